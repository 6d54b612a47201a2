"""torch_diode.ranking: the model's order (a tile's num_stages variants spread out, one-warp configs
on misaligned operands held back), by hand, and its use by the metrics, the choices handler's
selection rule and the options (the CLI's flags: tests/test_train.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from torch_diode.config import DiodeConfig, DiodeOptions
from torch_diode.dataset import Dataset
from torch_diode.evaluate import ProblemEval, problem_evals, regret_at_k, summarize
from torch_diode.inductor.choices import select
from torch_diode.ranking import (
    CLIFF_GUARD,
    DIVERSITY,
    aten_variant_call_trusted,
    check_penalty,
    cliff_penalty,
    model_order,
    order_of,
    rank_in_group,
    stage_groups,
)
from torch_diode.records import Choice, Problem, Provenance, TimingRecord


def cfg(bm: int, stages: int, warps: int = 4, template: str = "triton::mm") -> Choice:
    return Choice(template=template, block_m=bm, block_n=64, block_k=32, group_m=8, num_stages=stages, num_warps=warps)


def test_stage_groups_by_hand() -> None:
    choices = [
        cfg(64, 3),
        cfg(64, 4),  # only num_stages differs: the same group
        cfg(64, 3, warps=8),  # other warps: another group
        cfg(128, 3),  # other tile
        Choice.aten("addmm"),
        Choice.aten("bias_addmm"),  # every ATen choice is its own group
        cfg(64, 5),
        cfg(64, 3, template="triton::bmm"),  # other template
    ]
    g = stage_groups(choices)
    assert g.tolist() == [0, 0, 1, 2, 3, 4, 0, 5]
    assert stage_groups([]).shape == (0,)


def test_rank_in_group_by_hand() -> None:
    predicted = np.array([3.0, 1.0, 2.0, 5.0, 1.0, 0.5])
    groups = np.array([0, 0, 0, 1, 0, 1])
    # group 0: 1.0 (index 1) then 1.0 (index 4, a tie: later position), 2.0, 3.0; group 1: 0.5, 5.0
    assert rank_in_group(predicted, groups).tolist() == [3, 0, 2, 1, 1, 0]


def test_model_order_by_hand() -> None:
    predicted = np.array([1.0, 1.05, 1.1, 1.2, 1.4])
    groups = np.array([0, 0, 0, 1, 2])
    # keys: 1.0, 1.05 + 0.2, 1.1 + 0.4, 1.2, 1.4
    assert model_order(predicted, groups, 0.2).tolist() == [0, 3, 1, 4, 2]
    assert model_order(predicted, groups, 0.0).tolist() == [0, 1, 2, 3, 4]
    assert model_order(predicted).tolist() == [0, 1, 2, 3, 4]  # no groups: by prediction
    assert model_order(predicted, groups, 10.0).tolist() == [0, 3, 4, 1, 2]
    with pytest.raises(ValueError, match="differ in shape"):
        model_order(predicted, groups[:3], 0.2)


def test_the_first_place_is_the_lowest_prediction() -> None:
    """Whatever the diversity and groups, the top-1 pick is the plain order's (ties included)."""
    rng = np.random.default_rng(0)
    for trial in range(200):
        n = int(rng.integers(1, 40))
        predicted = np.round(rng.normal(size=n), 1)  # rounded: many ties
        groups = rng.integers(0, max(1, n // 3), size=n)
        d = float(rng.choice([0.05, 0.2, 1.0, 5.0]))
        order = model_order(predicted, groups, d)
        assert sorted(order.tolist()) == list(range(n))
        assert order[0] == np.argsort(predicted, kind="stable")[0], trial


def test_check_penalty() -> None:
    assert check_penalty(0, "diversity") == 0.0 and check_penalty(0.2, "diversity") == 0.2
    for bad in (-0.1, math.nan, math.inf, True, "0.2", None):
        with pytest.raises(ValueError, match="cliff_guard: must be a finite number >= 0"):
            check_penalty(bad, "cliff_guard")


def test_regret_at_k_in_a_given_order() -> None:
    measured = np.array([10.0, 10.2, 10.1, 8.0])  # the fourth, another tile, is the fastest
    predicted = np.log([5.0, 5.1, 5.2, 6.0])
    groups = np.array([0, 0, 0, 1])
    order = model_order(predicted, groups, 0.2)
    assert order.tolist() == [0, 3, 1, 2]
    assert regret_at_k(measured, predicted, (1, 2, 3)) == {1: 10 / 8, 2: 10 / 8, 3: 10 / 8}
    assert regret_at_k(measured, predicted, (1, 2, 3), order=order) == {1: 10 / 8, 2: 1.0, 3: 1.0}
    p = Problem(op="mm", m=64, n=64, k=64)
    choices = [cfg(64, 3), cfg(64, 4), cfg(64, 5), cfg(128, 3)]
    e = ProblemEval(p, choices, measured, predicted, order=order)
    plain = ProblemEval(p, choices, measured, predicted)
    assert plain.ranked().tolist() == [0, 1, 2, 3]
    s, s0 = summarize([e], with_tau=False)["overall"], summarize([plain], with_tau=False)["overall"]
    assert s["regret@3"]["geomean"] == 1.0 and s0["regret@3"]["geomean"] == pytest.approx(10 / 8)
    assert s["regret@1"] == s0["regret@1"] and s["recall@3"] == 1.0 and s0["recall@3"] == 0.0


def _model_and_dataset() -> tuple[object, Dataset]:
    from torch_diode.features import FEATURE_SPEC, gpu_constants
    from torch_diode.model import ARCH_PRESETS, Architecture, Normalization, build_model

    p = Problem(op="mm", m=512, n=512, k=2048)
    choices = [Choice.aten("mm")] + [cfg(bm, s, w) for bm in (32, 64, 128) for w in (4, 8) for s in (2, 3, 4, 5)]
    recs = [TimingRecord(problem=p, choice=c, time_us=10.0 + i, hardware="NVIDIA-H100") for i, c in enumerate(choices)]
    ds = Dataset.from_records(recs, Provenance(hardware="NVIDIA-H100"))
    n = len(FEATURE_SPEC)
    arch = Architecture(model_type="base", input_dim=n, members=2, **ARCH_PRESETS["base"])
    norm = Normalization(np.zeros(n, np.float32), np.ones(n, np.float32), 0.0, 1.0)
    return build_model(arch, hardware="NVIDIA-H100", gpu=gpu_constants("NVIDIA-H100"), normalization=norm, seed=0), ds


def test_problem_evals_carry_the_models_order() -> None:
    model, ds = _model_and_dataset()
    (e,) = problem_evals(model, ds)
    assert e.order is not None
    want = model_order(e.predicted_log_us, stage_groups(e.choices), DIVERSITY)  # K = 2048: aligned, no guard
    assert e.order.tolist() == want.tolist() and e.order.tolist() != np.argsort(e.predicted_log_us).tolist()
    (e0,) = problem_evals(model, ds, diversity=0)
    assert e0.order.tolist() == np.argsort(e0.predicted_log_us, kind="stable").tolist()
    with pytest.raises(ValueError, match="diversity"):
        problem_evals(model, ds, diversity=-1)
    with pytest.raises(ValueError, match="cliff_guard"):
        problem_evals(model, ds, cliff_guard=-1)


def test_select_keeps_the_first_top_k_of_the_order_within_the_threshold() -> None:
    t = np.log([1.0, 1.01, 1.02, 1.05, 1.3])  # three stage variants of one tile, then two other tiles
    groups = np.array([0, 0, 0, 1, 2])
    zero = np.zeros(5)
    opts = DiodeOptions(top_k_configs=2, performance_threshold=1.1, one_below_us=None)  # times of 1 us: not one alone
    aten = np.log([2.0])
    order = model_order(t, groups, 0.2)
    assert select(t, zero, aten, np.zeros(1), opts, keep_one_triton=False, triton_order=order).triton == [0, 3]
    assert select(t, zero, aten, np.zeros(1), opts, keep_one_triton=False).triton == [0, 1]  # no order given
    # another tile beyond the threshold is never kept for diversity's sake
    opts3 = opts.replace(top_k_configs=3)
    assert select(t, zero, aten, np.zeros(1), opts3, keep_one_triton=False, triton_order=order).triton == [0, 3, 1]


def test_the_option_and_its_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert DiodeOptions().diversity == DIVERSITY == 0.2 and DiodeOptions().cliff_guard == CLIFF_GUARD == 0.2
    assert DiodeOptions(diversity=0).diversity == 0.0 and DiodeOptions(cliff_guard=0).cliff_guard == 0.0
    for name in ("diversity", "cliff_guard"):
        with pytest.raises(ValueError, match=name):
            DiodeOptions(**{name: -0.5})
    monkeypatch.setenv("TORCH_DIODE_DIVERSITY", "0")
    monkeypatch.setenv("TORCH_DIODE_CLIFF_GUARD", "1.5")
    assert (DiodeConfig().options().diversity, DiodeConfig().options().cliff_guard) == (0.0, 1.5)
    monkeypatch.setenv("TORCH_DIODE_DIVERSITY", "wide")
    with pytest.raises(ValueError, match="TORCH_DIODE_DIVERSITY='wide'"):
        DiodeConfig().options()


def test_with_predictions_makes_the_order_again() -> None:
    p = Problem(op="mm", m=64, n=64, k=64)
    choices = [cfg(64, 3), cfg(64, 4), cfg(128, 3)]
    e = ProblemEval(p, choices, np.ones(3), np.zeros(3)).with_predictions(np.log([1.0, 1.05, 1.2]))
    assert e.order is not None and e.order.tolist() == [0, 2, 1]  # 1.05's key: log(1.05) + 0.2
    e2 = e.with_predictions(np.log([1.2, 1.0, 1.3]))
    assert e2.order.tolist() == [1, 2, 0] and e2.predicted_log_us.dtype == np.float64  # plain: [1, 0, 2]
    assert e.with_predictions(e.predicted_log_us, diversity=0).order.tolist() == [0, 1, 2]


def test_cliff_penalty_by_hand() -> None:
    aligned = Problem(op="mm", m=64, n=64, k=64)  # fp16, K = 64: both operands' rows 128 bytes
    odd_k = Problem(op="mm", m=64, n=64, k=63)  # A's rows 126 bytes: misaligned
    col_a = Problem(op="mm", m=75, n=64, k=64, stride_a=(1, 75))  # A column-major, 150-byte columns
    choices = [cfg(16, 3, warps=1), cfg(16, 3, warps=2), Choice.aten("mm"), cfg(32, 4, warps=1)]
    assert cliff_penalty(aligned, choices) is None
    assert cliff_penalty(odd_k, choices[1:3]) is None  # no one-warp config
    assert cliff_penalty(odd_k, choices, guard=0.0) is None
    assert cliff_penalty(odd_k, choices).tolist() == [0.2, 0.0, 0.0, 0.2]
    assert cliff_penalty(col_a, choices, guard=0.5).tolist() == [0.5, 0.0, 0.0, 0.5]


def test_aten_variant_call_trusted_by_hand() -> None:
    """fp16/bf16 with both operands' and the output's rows 16-byte aligned: the nn.Linear case."""
    linear = Problem(op="addmm", m=6304, n=3072, k=768, stride_b=(1, 768))  # x @ W.T + b
    assert aten_variant_call_trusted(linear)
    assert aten_variant_call_trusted(Problem(op="addmm", m=6304, n=3072, k=768, dtype="bfloat16"))
    assert not aten_variant_call_trusted(Problem(op="addmm", m=128, n=1024, k=1024, dtype="float32"))
    assert not aten_variant_call_trusted(Problem(op="addmm", m=64, n=64, k=63))  # A's rows 126 bytes
    assert not aten_variant_call_trusted(
        Problem(op="addmm", m=64, n=6150, k=512, stride_b=(1, 512))
    )  # output rows 12,300 B


def test_order_of_holds_one_warp_configs_back_on_misaligned_operands() -> None:
    p = Problem(op="bmm", m=61, n=127, k=4093, batch=2, stride_b=(519811, 1, 4093))  # both misaligned
    one, four, other = cfg(16, 4, warps=1), cfg(32, 3, warps=4), cfg(64, 3, warps=4)
    choices = [one, four, other, Choice.aten("bmm")]
    predicted = np.log([10.0, 11.0, 13.0, 11.5])
    # the one-warp config is predicted 10% faster: under the guard's 0.2 (22%), so it is placed after
    assert order_of(p, choices, predicted).tolist() == [1, 3, 0, 2]
    assert order_of(p, choices, predicted, cliff_guard=0).tolist() == [0, 1, 3, 2]
    # predicted 30% faster than anything else, it stays first
    assert order_of(p, choices, np.log([8.0, 11.0, 13.0, 11.5])).tolist()[0] == 0
    # aligned operands: no guard
    q = Problem(op="bmm", m=61, n=128, k=4096, batch=2)
    assert order_of(q, choices, predicted).tolist() == [0, 1, 3, 2]
    e = ProblemEval(p, choices, np.array([178.0, 10.0, 12.0, 10.3]), np.zeros(4)).with_predictions(predicted)
    assert summarize([e], with_tau=False)["overall"]["regret@1"]["geomean"] == 1.0
    e0 = e.with_predictions(predicted, cliff_guard=0)
    assert summarize([e0], with_tau=False)["overall"]["regret@1"]["geomean"] == pytest.approx(17.8)
