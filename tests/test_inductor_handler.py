# ruff: noqa: F811  (pytest fixtures imported from test_inductor_helpers are redefined as arguments)
"""DiodeInductorChoices: the real hook on real Inductor kernel inputs (fake CUDA device), with a
real torch-diode model file; selection, untouched kwargs, ATen, LUT, fallback, stats, pickling, uuid."""

from __future__ import annotations

import copy
import logging
import math
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from test_inductor_helpers import (  # noqa: F401  (fixtures)
    SHIPPED_H100,
    SHIPPED_H200,
    TEMPLATES,
    buf,
    call_hook,
    corrupt_copy,
    diode_dataset,
    inductor_graph,
    kernel_inputs,
    model_path,
    other_model_path,
    stock_ktcs,
)
from torch._inductor import config as inductor_config
from torch._inductor.choices import InductorChoices
from torch._inductor.kernel.mm import addmm_contiguous_subgraph_template, aten_addmm, aten_bias_addmm, mm_template
from torch._inductor.kernel_inputs import MMKernelInputs

from torch_diode.config import DiodeOptions
from torch_diode.dataset import Dataset
from torch_diode.inductor.choices import DiodeInductorChoices, Selection, fits_shared_memory, select, top_k_count
from torch_diode.inductor.convert import choice_from_ktc, problem_from_kernel_inputs
from torch_diode.lut import KernelLUT
from torch_diode.model import load_model
from torch_diode.ranking import order_of
from torch_diode.records import Choice, Problem, Provenance, TimingRecord

OPS = ["mm", "addmm", "bmm", "baddbmm"]
SHAPE = (200, 136, 1001)  # odd sizes: K not divisible by any BLOCK_K


def kw(ktc: Any) -> dict[str, Any]:
    return ktc.params.to_kwargs()


def expected_selection(model: Any, ki: Any, op: str, options: DiodeOptions) -> tuple[set[Choice], bool]:
    """What the rule gives with this model's real predictions on stock Inductor's candidates."""
    space = options.search_space
    ktcs = stock_ktcs(ki, op, space=space)
    triton = [choice_from_ktc(x) for uid, xs in ktcs.items() if uid.startswith("triton::") for x in xs]
    aten = [choice_from_ktc(x) for uid, xs in ktcs.items() if uid.startswith("aten::") for x in xs]
    problem = problem_from_kernel_inputs(ki, op)
    pred = model.predict(problem, triton + aten)
    lt, sd = np.asarray(pred.log_time_us, np.float64), np.asarray(pred.std, np.float64)
    n = len(triton)
    order = order_of(problem, triton, lt[:n], diversity=options.diversity, cliff_guard=options.cliff_guard)
    sel = select(lt[:n], sd[:n], lt[n:], sd[n:], options, keep_one_triton=False, triton_order=order)
    return {triton[i] for i in sel.triton}, bool(sel.aten)


@pytest.mark.parametrize("user_space", ["DEFAULT", "EXHAUSTIVE"])
@pytest.mark.parametrize("op", OPS)
def test_hook_selects_top_k_of_exhaustive_space(op: str, user_space: str, model_path: Path) -> None:
    options = DiodeOptions(model=str(model_path))
    handler = DiodeInductorChoices(options)
    with inductor_graph(max_autotune_gemm_search_space=user_space):
        ki = kernel_inputs(op, *SHAPE)
        out = call_hook(handler, ki, op)
        # the user's global setting is unchanged by the local widening
        assert inductor_config.max_autotune_gemm_search_space == user_space
        stock = stock_ktcs(ki, op, space="EXHAUSTIVE")
        want_triton, want_aten = expected_selection(load_model(model_path), ki, op, options)
    triton_out = [x for x in out if x.template.uid.startswith("triton::")]
    aten_out = [x for x in out if x.template.uid.startswith("aten::")]
    # top_k = 3, doubled when the model is unsure of its best prediction
    assert 1 <= len(triton_out) <= 6 or (not triton_out and aten_out)
    assert {choice_from_ktc(x) for x in triton_out} == want_triton
    assert bool(aten_out) == want_aten
    # kwargs untouched: every returned Triton KTC's params equal one stock exhaustive KTC's params,
    # and its extra kwargs (ALLOW_TF32 ...) equal the stock ones
    stock_params = [kw(x) for x in stock[TEMPLATES[op][1].uid]]
    for x in triton_out:
        assert kw(x) in stock_params
        assert x.extra_kwargs.get("ALLOW_TF32") == stock[TEMPLATES[op][1].uid][0].extra_kwargs.get("ALLOW_TF32")
        assert x.params.to_kwargs()["EVEN_K"] is False  # K = 1001 (odd)
    stats = handler.get_stats()
    n_cands = sum(len(v) for v in stock.values())
    assert stats["calls"] == 1 and stats["gemm_calls"] == 1 and stats["model_selections"] == 1
    assert stats["candidates_seen"] == n_cands
    assert stats["candidates_kept"] == len(out)
    assert stats["fallbacks_total"] == 0 and stats["predict_time_s"] > 0
    assert 0 < stats["widen_time_s"] < stats["hook_time_s"]  # the enumeration, inside the hook
    assert 0 < stats["confidence_sum"] <= 1  # one selection: the best prediction's exp(-std)


def test_hook_keeps_the_models_order(model_path: Path) -> None:
    """The kept Triton configs are the first of the model's order (``ranking.order_of`` with the
    handler's ``diversity`` and ``cliff_guard``): K = 1001 leaves A's rows misaligned, so with a
    large guard no one-warp config is kept among 90% of the candidates, where without it some are
    (the test model predicts them slow: the last tenth holds most of them)."""
    wide = DiodeOptions(
        model=str(model_path), top_k_configs=0.9, performance_threshold=1e9, confidence_threshold=0.0, one_below_us=None
    )
    with inductor_graph():
        ki = kernel_inputs("mm", *SHAPE)
        model = load_model(model_path)
        plain, _ = expected_selection(model, ki, "mm", wide.replace(cliff_guard=0.0, diversity=0.0))
        assert any(c.num_warps == 1 for c in plain)
        for opts in (wide.replace(cliff_guard=10.0), wide.replace(cliff_guard=0.0, diversity=0.0)):
            out = call_hook(DiodeInductorChoices(opts), ki, "mm")
            kept = {choice_from_ktc(x) for x in out if x.template.uid.startswith("triton::")}
            want, _ = expected_selection(model, ki, "mm", opts)
            assert kept == want and len(kept) > 1000
        assert kept == plain
        guarded, _ = expected_selection(model, ki, "mm", wide.replace(cliff_guard=10.0))
    assert not any(c.num_warps == 1 for c in guarded) and guarded != plain


def test_search_space_default_scores_only_default_candidates(model_path: Path) -> None:
    handler = DiodeInductorChoices(DiodeOptions(model=str(model_path), search_space="DEFAULT"))
    with inductor_graph():
        ki = kernel_inputs("mm", *SHAPE)
        call_hook(handler, ki, "mm")
        n_default = sum(len(v) for v in stock_ktcs(ki, "mm", space="DEFAULT").values())
    assert handler.get_stats()["candidates_seen"] == n_default < 100


@pytest.mark.parametrize("op", OPS)
def test_aten_dropped_when_confidently_slower_and_kept_otherwise(op: str, model_path: Path) -> None:
    # threshold 1.0 and confidence 0: ATen survives only as the single best prediction
    strict = DiodeInductorChoices(
        DiodeOptions(model=str(model_path), top_k_configs=1, performance_threshold=1.0, confidence_threshold=0.0)
    )
    never_sure = DiodeInductorChoices(DiodeOptions(model=str(model_path), confidence_threshold=1.0))
    with inductor_graph():
        ki = kernel_inputs(op, *SHAPE)
        out = call_hook(strict, ki, op)
        out_unsure = call_hook(never_sure, ki, op)
    assert len(out) == 1  # one choice: Inductor benchmarks nothing
    assert strict.get_stats()["single_choice"] == 1
    if out[0].template.uid.startswith("triton::"):
        assert strict.get_stats()["aten_dropped"] == 1
    # a model never confident about ATen keeps it, and keeps more Triton configs (2 x top_k)
    assert any(x.template.uid.startswith("aten::") for x in out_unsure)
    assert never_sure.get_stats()["low_confidence"] == 1
    assert sum(x.template.uid.startswith("triton::") for x in out_unsure) <= 6


def rule_options(**changes: Any) -> DiodeOptions:
    """The selection tests' options: top-2 within 10%, confidence 0.9, and both one-choice rules
    (``aten_alone_below_us``, ``one_below_us``) off, so that each test turns on what it tests."""
    return DiodeOptions(
        model="m",
        top_k_configs=2,
        performance_threshold=1.1,
        confidence_threshold=0.9,
        aten_alone_below_us=None,
        one_below_us=None,
    ).replace(**changes)


def test_fractional_top_k_rounds_up() -> None:
    assert top_k_count(0.0001, 1400) == 1 and top_k_count(0.01, 1400) == 14 and top_k_count(3, 5) == 3


def test_select_rule_on_known_predictions() -> None:
    """The rule without the ATen-alone and one-choice options (the times here are under their
    defaults, 50 and 20 us)."""
    opts = rule_options()
    t = np.log(np.array([10.0, 10.5, 10.8, 30.0]))
    zero = np.zeros(4)
    # ATen 2x slower, confident: dropped where one Triton config is kept, ...
    one = opts.replace(top_k_configs=1)
    s = select(t, zero, np.log([20.0]), np.zeros(1), one, keep_one_triton=False)
    assert (s.triton, s.aten, s.confident) == ([0], [], True)
    # ... but with the two best Triton within 10% kept, the best-predicted ATen stays as
    # Inductor's fallback for a layout conflict among several choices
    s = select(t, zero, np.log([25.0, 20.0]), np.zeros(2), opts, keep_one_triton=False)
    assert (s.triton, s.aten, s.confident) == ([0, 1], [1], True)
    # ATen slower but uncertain (std 0.5 -> confidence 0.61 < 0.9): kept
    s = select(t, zero, np.log([20.0]), np.array([0.5]), opts, keep_one_triton=False)
    assert s.aten == [0]
    # ATen fastest by far: no Triton config is within the threshold
    s = select(t, zero, np.log([2.0]), np.zeros(1), opts, keep_one_triton=False)
    assert (s.triton, s.aten) == ([], [0])
    # ... unless the call has no ATen to fall back on
    assert select(t, zero, np.log([2.0]), np.zeros(1), opts, keep_one_triton=True).triton == [0]
    # two ATen variants (addmm, bias_addmm), no Triton config kept: both stay (Inductor
    # benchmarks the pair) ...
    assert select(t, zero, np.log([3.0, 2.0]), np.zeros(2), opts, keep_one_triton=False).aten == [0, 1]
    # ... unless the caller trusts the model's call between them: then the one predicted beyond
    # the threshold, and sure of it, is dropped (Inductor benchmarks nothing) ...
    s = select(t, zero, np.log([3.0, 2.0]), np.zeros(2), opts, keep_one_triton=False, drop_slower_aten=True)
    assert (s.triton, s.aten) == ([], [1])
    # ... but kept where it is unsure (std 0.5) or within the threshold
    unsure = select(
        t, zero, np.log([3.0, 2.0]), np.array([0.5, 0.0]), opts, keep_one_triton=False, drop_slower_aten=True
    )
    assert unsure.aten == [0, 1]
    close = select(t, zero, np.log([2.1, 2.0]), np.zeros(2), opts, keep_one_triton=False, drop_slower_aten=True)
    assert close.aten == [0, 1]
    # best prediction uncertain: 2 x top_k and a threshold widened by exp(std)
    s = select(t, np.full(4, 0.2), np.log([20.0]), np.zeros(1), opts, keep_one_triton=False)
    assert (s.triton, s.confident) == ([0, 1, 2], False)


@pytest.mark.parametrize(
    "option", [{"aten_alone_when_best": True}, {"aten_alone_below_us": 50.0}], ids=["when_best", "below_50_us"]
)
def test_aten_alone_options(option: dict[str, Any]) -> None:
    """``aten_alone_when_best`` and ``aten_alone_below_us`` (here ATen is predicted under 50 us):
    ATen predicted best and confident -> that ATen choice alone, even with Triton configs within the
    threshold (which are kept without the option) and with a second ATen variant; not where ATen is
    not the best, nor where the best is uncertain."""
    opts = rule_options()
    alone = opts.replace(**option)
    t = np.log(np.array([10.0, 10.5, 10.8, 30.0]))
    zero = np.zeros(4)
    aten = np.log([10.3, 9.8])  # bias_addmm best, both Triton configs 0 and 1 within 10% of it
    assert select(t, zero, aten, np.zeros(2), opts, keep_one_triton=False).triton == [0, 1]
    assert select(t, zero, aten, np.zeros(2), alone, keep_one_triton=False) == Selection([], [1], True, 1.0)
    # ATen second: the option changes nothing
    later = np.log([10.2])
    assert select(t, zero, later, np.zeros(1), alone, keep_one_triton=False) == select(
        t, zero, later, np.zeros(1), opts, keep_one_triton=False
    )
    # ATen best but unsure (std 0.5 -> confidence 0.61 < 0.9): the usual widened selection
    unsure = np.array([0.5, 0.5])
    s = select(t, zero, aten, unsure, alone, keep_one_triton=False)
    assert s == select(t, zero, aten, unsure, opts, keep_one_triton=False) and not s.confident
    assert len(s.triton) >= 2


def test_aten_alone_below_us_threshold() -> None:
    """``aten_alone_below_us`` acts only where the best (ATen) prediction is under that many
    microseconds; 0 and None are off; 50 us by default. ``aten_alone_when_best`` must be a bool."""
    opts = rule_options()
    assert DiodeOptions(model="m").aten_alone_below_us == 50.0
    t = np.log(np.array([10.0, 10.5, 10.8, 30.0]))
    zero = np.zeros(4)
    aten = np.log([10.3, 9.8])  # bias_addmm predicted best, at 9.8 us
    usual = select(t, zero, aten, np.zeros(2), opts, keep_one_triton=False)
    assert usual.triton == [0, 1]
    for below, alone in ((10.0, True), (50.0, True), (9.7, False), (0.0, False), (None, False)):
        s = select(t, zero, aten, np.zeros(2), opts.replace(aten_alone_below_us=below), keep_one_triton=False)
        assert s == (Selection([], [1], True, 1.0) if alone else usual), below
    # the same at ten times the times: over 50 us, the usual selection
    slow = opts.replace(aten_alone_below_us=50.0)
    t10, aten10 = t + np.log(10), aten + np.log(10)
    assert select(t10, zero, aten10, np.zeros(2), slow, keep_one_triton=False) == select(
        t10, zero, aten10, np.zeros(2), opts, keep_one_triton=False
    )
    with pytest.raises(TypeError, match="aten_alone_when_best: must be a bool"):
        DiodeOptions(model="m", aten_alone_when_best="yes")


def test_one_below_us_keeps_the_best_choice_alone() -> None:
    """``one_below_us``: where the best prediction, ATen or Triton, is confident and under that
    many microseconds, that one choice alone (a Triton best: the first of the model's order);
    over the limit, unsure, 0 or None: the usual selection. 20 us by default."""
    opts = rule_options()
    assert DiodeOptions(model="m").one_below_us == 20.0
    t = np.log(np.array([10.0, 10.5, 10.8, 30.0]))
    zero = np.zeros(4)
    aten = np.log([10.3, 12.0])
    usual = select(t, zero, aten, np.zeros(2), opts, keep_one_triton=False)
    assert usual == Selection([0, 1], [0], True, 1.0)  # the ATen choice within the threshold kept
    for limit, alone in ((20.0, True), (10.01, True), (9.99, False), (0.0, False), (None, False)):
        s = select(t, zero, aten, np.zeros(2), opts.replace(one_below_us=limit), keep_one_triton=False)
        assert s == (Selection([0], [], True, 1.0) if alone else usual), limit
    one = opts.replace(one_below_us=20.0)
    # a Triton best: the first of the model's order, not the lowest prediction
    s = select(t, zero, aten, np.zeros(2), one, keep_one_triton=False, triton_order=np.array([1, 0, 2, 3]))
    assert s == Selection([1], [], True, 1.0)
    # an ATen best: that ATen choice alone
    fast_aten = np.log([12.0, 9.0])
    assert select(t, zero, fast_aten, np.zeros(2), one, keep_one_triton=False) == Selection([], [1], True, 1.0)
    # the best unsure (std 0.5 -> confidence 0.61 < 0.9): the usual widened selection
    unsure = np.full(4, 0.5)
    s = select(t, unsure, aten, np.zeros(2), one, keep_one_triton=False)
    assert s == select(t, unsure, aten, np.zeros(2), opts, keep_one_triton=False) and not s.confident
    # ten times slower, over 20 us: the usual selection
    assert select(t + np.log(10), zero, aten + np.log(10), np.zeros(2), one, keep_one_triton=False) == select(
        t + np.log(10), zero, aten + np.log(10), np.zeros(2), opts, keep_one_triton=False
    )


def test_aten_alone_when_best_through_the_hook() -> None:
    """Through the real hook, with the shipped H200 model: mm fp16 1000x1000x1000 (the speed
    check's ``odd_mm``, where the model ranks ATen first) keeps ATen and Triton configs with the
    ATen-alone options off, and by default (``aten_alone_below_us`` 50) or with
    ``aten_alone_when_best`` ATen's mm alone (a single choice: Inductor benchmarks nothing)."""
    from torch_diode.registry import resolve

    path = str(resolve("NVIDIA-H200-matmul"))
    outs = {}
    for name, opts in (
        ("off", {"aten_alone_below_us": None, "one_below_us": None}),
        ("default", {}),
        ("alone", {"aten_alone_when_best": True, "aten_alone_below_us": 0.0, "one_below_us": None}),
        ("below 5 us", {"aten_alone_below_us": 5.0, "one_below_us": None}),
    ):
        handler = DiodeInductorChoices(DiodeOptions(model=path, **opts))
        with inductor_graph():
            outs[name] = [x.template.uid for x in call_hook(handler, kernel_inputs("mm", 1000, 1000, 1000), "mm")]
        assert handler.get_stats()["fallbacks_total"] == 0
        assert handler.get_stats()["single_choice"] == (outs[name] == ["aten::mm"])
    assert "aten::mm" in outs["off"] and "triton::mm" in outs["off"]
    # the model predicts ATen's mm at 13.6 us here: alone below 50 us (the default), not below 5 us
    assert outs["alone"] == outs["default"] == ["aten::mm"]
    assert outs["below 5 us"] == outs["off"]


def test_one_below_us_through_the_hook() -> None:
    """Through the real hook, with the shipped H200 model: mm fp16 127x255x383 (the speed check's
    ``odd_small``, predicted a few microseconds, a Triton config best) keeps ATen and three Triton
    configs with ``one_below_us`` off, and by default (20 us) the first of those Triton configs
    alone, its kwargs as Inductor made them (a single choice: Inductor benchmarks nothing)."""
    from torch_diode.registry import resolve

    path = str(resolve("NVIDIA-H200-matmul"))
    outs, handlers = {}, {}
    for name, opts in (("off", {"one_below_us": None}), ("default", {})):
        handlers[name] = DiodeInductorChoices(DiodeOptions(model=path, **opts))
        with inductor_graph():
            outs[name] = call_hook(handlers[name], kernel_inputs("mm", 127, 255, 383), "mm")
        assert handlers[name].get_stats()["fallbacks_total"] == 0
    assert sorted(x.template.uid for x in outs["off"]) == ["aten::mm", "triton::mm", "triton::mm", "triton::mm"]
    first = next(x for x in outs["off"] if x.template.uid == "triton::mm")
    assert [x.template.uid for x in outs["default"]] == ["triton::mm"]
    assert kw(outs["default"][0]) == kw(first)
    assert handlers["default"].get_stats()["single_choice"] == 1 and handlers["off"].get_stats()["single_choice"] == 0


def test_select_triton_pick_equals_the_per_element_rule() -> None:
    """The vectorised Triton pick in select() keeps exactly what the per-element rule keeps
    (``float(t[i]) - best <= margin + 1e-9`` in argsort order, first k), float32 or float64,
    with ties and values on the threshold."""
    rng = np.random.default_rng(0)
    for trial in range(300):
        n = int(rng.integers(0, 40))
        dtype = np.float32 if trial % 2 else np.float64
        t = np.round(rng.normal(3.0, 0.3, n), int(rng.integers(1, 4))).astype(dtype)  # rounding makes ties
        a = rng.normal(3.0, 0.3, int(rng.integers(0, 2))).astype(dtype)
        std = rng.uniform(0, 0.5, n).astype(dtype)
        a_std = rng.uniform(0, 0.5, a.size).astype(dtype)
        opts = DiodeOptions(
            model="m",
            top_k_configs=int(rng.integers(1, 6)),
            performance_threshold=float(rng.choice([1.0, 1.05, 1.1, 1.5])),
            confidence_threshold=float(rng.choice([0.0, 0.8, 1.0])),
            aten_alone_below_us=None,  # the Triton pick; the ATen-alone and one-choice branches have
            one_below_us=None,  # their own tests
        )
        s = select(t, std, a, a_std, opts, keep_one_triton=bool(trial % 3))
        all_log = np.concatenate([t, a])
        if all_log.size == 0:
            continue
        b = int(np.argmin(all_log))
        best, std_best = float(all_log[b]), float(np.concatenate([std, a_std])[b])
        k, margin = top_k_count(opts.top_k_configs, n), math.log(opts.performance_threshold)
        if not s.confident:
            k, margin = 2 * k, margin + std_best
        order = np.argsort(t, kind="stable")
        want = [int(i) for i in order if float(t[i]) - best <= margin + 1e-9][:k]
        if not want and trial % 3 and n:
            want = [int(order[0])]
        assert s.triton == want, (trial, t, a)


def test_addmm_triton_only_call_scores_a_stand_in_aten(model_path: Path) -> None:
    """torch >= 2.12 lowers addmm with ATen in an earlier, separate hook call."""
    handler = DiodeInductorChoices(
        DiodeOptions(model=str(model_path), performance_threshold=1.0, confidence_threshold=0.0, top_k_configs=1)
    )
    with inductor_graph():
        ki = kernel_inputs("addmm", *SHAPE)
        out = call_hook(handler, ki, "addmm", templates=[TEMPLATES["addmm"][1]])
        model = load_model(model_path)
        ktcs = stock_ktcs(ki, "addmm")["triton::mm"]
        choices = [choice_from_ktc(x) for x in ktcs] + [Choice.aten("addmm")]
        pred = model.predict(problem_from_kernel_inputs(ki, "addmm"), choices)
    aten_best = int(np.argmin(pred.log_time_us)) == len(choices) - 1
    assert len(out) == (0 if aten_best else 1)
    assert all(x.template.uid == "triton::mm" for x in out)


def split_addmm_inputs(m: int, n: int, k: int, *, bias_2d: bool, dtype: torch.dtype = torch.float16) -> tuple[Any, Any]:
    """The kernel inputs of torch >= 2.12's two addmm calls: ATen's on the bias as given (a 2-D
    bias broadcast along rows offers ``aten::bias_addmm`` too), Triton's on the expanded bias;
    both on the same mat1 and mat2, as ``tuned_addmm`` passes them."""
    a, b = buf([m, k], [k, 1], dtype), buf([k, n], [1, k], dtype)
    bias = buf([m, n], [0, 1], dtype) if bias_2d else buf([n], [1], dtype)
    scalars = {"alpha": 1, "beta": 1}
    return MMKernelInputs([bias, a, b], scalars=scalars), MMKernelInputs(
        [buf([m, n], [0, 1], dtype), a, b], scalars=scalars
    )


def test_addmm_aten_call_keeps_the_variant_the_model_trusts() -> None:
    """torch >= 2.12: addmm's ATen call holds both variants on a 2-D broadcast bias; where the call
    between them is trusted (fp16, aligned) the one confidently over the threshold slower is left
    out, as in torch 2.11's single call, so Inductor does not benchmark the pair."""
    handler = DiodeInductorChoices(DiodeOptions(model=str(SHIPPED_H100)))
    model = load_model(SHIPPED_H100)
    variants = [aten_addmm, aten_bias_addmm]
    with inductor_graph():
        ki, _ = split_addmm_inputs(6304, 3072, 768, bias_2d=True)
        out = call_hook(handler, ki, "addmm", variants)
        pred = model.predict(problem_from_kernel_inputs(ki, "addmm"), [choice_from_ktc(x) for x in out] or [])
        stock = [x.template.uid for x in call_hook(InductorChoices(), ki, "addmm", variants)]
        both = model.predict(problem_from_kernel_inputs(ki, "addmm"), [Choice.aten("addmm"), Choice.aten("bias_addmm")])
        # fp32: the call between them is not trusted (session 42), both stay
        ki32, _ = split_addmm_inputs(6304, 3072, 768, bias_2d=True, dtype=torch.float32)
        out32 = call_hook(handler, ki32, "addmm", variants)
    assert stock == ["aten::addmm", "aten::bias_addmm"]
    slow, fast = np.asarray(both.log_time_us), np.asarray(both.std)
    assert slow[0] - slow[1] > math.log(1.1) and np.exp(-fast).min() >= 0.8  # addmm predicted slower, surely
    assert [x.template.uid for x in out] == ["aten::bias_addmm"] and len(pred.log_time_us) == 1
    assert [x.template.uid for x in out32] == ["aten::addmm", "aten::bias_addmm"]
    s = handler.get_stats()
    assert s["passthrough"] == {"no_triton_candidates": 1} and s["fallbacks_total"] == 0


def test_addmm_split_calls_are_one_lowering() -> None:
    """torch >= 2.12: ``single_choice`` counts what addmm's ATen call kept with its Triton call
    (a Triton config kept beside ATen is two choices; none kept beside one ATen choice is one),
    and the Triton call weighs its configs against the ATen choice that call kept."""
    handler = DiodeInductorChoices(DiodeOptions(model=str(SHIPPED_H100)))
    model = load_model(SHIPPED_H100)
    totals, kept_triton = [], {}
    with inductor_graph():
        for bias_2d in (False, True):
            ki_aten, ki_triton = split_addmm_inputs(4096, 1024, 1024, bias_2d=bias_2d)
            handler.reset_stats()
            aten_out = call_hook(handler, ki_aten, "addmm", [aten_addmm, aten_bias_addmm] if bias_2d else [aten_addmm])
            between = call_hook(handler, ki_aten, "addmm", [addmm_contiguous_subgraph_template])  # 2.13's second call
            triton_out = call_hook(handler, ki_triton, "addmm", [mm_template])
            totals.append(len(aten_out) + len(between) + len(triton_out))
            s = handler.get_stats()  # the lowering's, counted at its last call
            assert s["single_choice"] == int(totals[-1] == 1)
            assert (s["candidates_kept"], s["aten_kept"], s["aten_dropped"]) == (totals[-1], 1, int(bias_2d))
            assert s["candidates_seen"] == 1 + int(bias_2d) + len(stock_ktcs(ki_triton, "addmm")["triton::mm"])
            kept_triton[bias_2d] = [kw(x) for x in triton_out]
        problem = problem_from_kernel_inputs(ki_triton, "addmm")
        ktcs = stock_ktcs(ki_triton, "addmm")["triton::mm"]
    assert sorted(totals) == [1, 2]  # one of each, so that both counts are checked
    # what the Triton call kept follows the ATen choice the earlier call kept (addmm, then bias_addmm)
    triton = [choice_from_ktc(x) for x in ktcs]
    for bias_2d, aten in ((False, "addmm"), (True, "bias_addmm")):
        pred = model.predict(problem, [*triton, Choice.aten(aten)])
        lt, sd = np.asarray(pred.log_time_us, np.float64), np.asarray(pred.std, np.float64)
        n = len(triton)
        order = order_of(
            problem, triton, lt[:n], diversity=handler.options.diversity, cliff_guard=handler.options.cliff_guard
        )
        sel = select(lt[:n], sd[:n], lt[n:], sd[n:], handler.options, keep_one_triton=False, triton_order=order)
        assert len(kept_triton[bias_2d]) == len(sel.triton)
    assert kept_triton[False] != kept_triton[True]


def test_decision_cache_replays_identical_ktcs(model_path: Path) -> None:
    handler = DiodeInductorChoices(DiodeOptions(model=str(model_path)))
    with inductor_graph():
        first = call_hook(handler, kernel_inputs("addmm", *SHAPE), "addmm")
        again = call_hook(handler, kernel_inputs("addmm", *SHAPE), "addmm")
    assert handler.get_stats()["decision_cache_hits"] == 1
    assert handler.get_stats()["model_selections"] == 1
    assert [(x.template.uid, kw(x)) for x in first] == [(x.template.uid, kw(x)) for x in again]
    for a, b in zip(first, again):
        assert {k: v for k, v in a.extra_kwargs.items() if k != "epilogue_fn"} == {
            k: v for k, v in b.extra_kwargs.items() if k != "epilogue_fn"
        }


@pytest.mark.parametrize("op", OPS)
def test_dynamic_sizes_are_ranked_at_their_hints_with_inductors_even_k(op: str, model_path: Path) -> None:
    """``torch.compile(dynamic=True)`` lowers GEMMs whose sizes are symbols. The handler ranks the
    kernels Inductor would build at the symbols' hints (where Inductor benchmarks too): each
    config's ``EVEN_K`` stays Inductor's, False for a symbolic K whatever its hint (one read at
    K = 1024, which every BLOCK_K divides, would skip K's tail at the other sizes the kernel runs
    at), and the model ranks that kernel (``even_k`` is one of its features), so a static
    problem's decision, made first at the same sizes, is not replayed. A static K keeps EVEN_K."""
    from torch._dynamo.source import ConstantSource

    options = DiodeOptions(model=str(model_path))
    handler = DiodeInductorChoices(options)
    model = load_model(model_path)
    with inductor_graph() as graph:
        env = graph.sizevars.shape_env
        m, k = (env.create_symbol(v, ConstantSource(name)) for name, v in (("m", 200), ("k", 1024)))
        static_ki = kernel_inputs(op, 200, 136, 1024)
        static = call_hook(handler, static_ki, op)
        for dynamic_ki, even_k in ((kernel_inputs(op, m, 136, k), False), (kernel_inputs(op, m, 136, 1024), True)):
            assert problem_from_kernel_inputs(dynamic_ki, op) == problem_from_kernel_inputs(static_ki, op)
            out = call_hook(handler, dynamic_ki, op)
            want_triton, want_aten = expected_selection(model, dynamic_ki, op, options)
            triton_out = [x for x in out if x.template.uid.startswith("triton::")]
            assert {choice_from_ktc(x) for x in triton_out} == want_triton
            assert any(x.template.uid.startswith("aten::") for x in out) == want_aten
            assert triton_out and all(kw(x)["EVEN_K"] is even_k for x in triton_out)
    assert all(kw(x)["EVEN_K"] is True for x in static if x.template.uid.startswith("triton::"))
    s = handler.get_stats()
    assert (s["model_selections"], s["decision_cache_hits"], s["fallbacks_total"]) == (3, 0, 0)


def test_fits_shared_memory_on_hand_computed_footprints() -> None:
    """Inductor's bound, stages x (BLOCK_M x BLOCK_K + BLOCK_K x BLOCK_N) x itemsize + 128 bytes,
    against an H100 / H200 block's 232,448 (227 KiB)."""
    limit = 232_448
    bf16 = Problem(
        op="bmm", m=128, n=96, k=1024, batch=53, dtype="bfloat16", stride_a=(131072, 1024, 1), stride_b=(98304, 96, 1)
    )
    fp32 = Problem(op="mm", m=128, n=96, k=1024, dtype="float32", stride_a=(1024, 1), stride_b=(96, 1))

    def triton(bm: int, bn: int, bk: int, stages: int, template: str = "triton::bmm") -> Choice:
        return Choice(template=template, block_m=bm, block_n=bn, block_k=bk, group_m=8, num_stages=stages, num_warps=8)

    assert not fits_shared_memory(bf16, triton(64, 128, 128, 5), limit)  # 5 x 24,576 x 2 + 128 = 245,888
    assert fits_shared_memory(bf16, triton(64, 128, 128, 4), limit)  # 196,736
    assert fits_shared_memory(bf16, triton(64, 128, 128, 5), 245_888)  # the bound itself fits
    assert not fits_shared_memory(bf16, triton(64, 128, 128, 5), 245_887)
    assert not fits_shared_memory(bf16, triton(128, 128, 128, 4), limit)  # 262,272
    assert fits_shared_memory(bf16, triton(64, 128, 64, 5, "triton::mm"), limit)  # 123,008
    assert not fits_shared_memory(fp32, triton(64, 128, 64, 5, "triton::mm"), limit)  # 4 bytes: 245,888
    assert fits_shared_memory(bf16, Choice.aten("baddbmm"), 1)  # cuBLAS always runs
    # a template the bound does not cover (the persistent TMA one adds an epilogue buffer) is never sure to
    assert not fits_shared_memory(bf16, triton(16, 16, 16, 1, "triton::mm_persistent_tma"), limit)


#: A problem where the shipped H200 file keeps one Triton config alone (its 20 us rule) that needs
#: more shared memory than the GPU has: on an H200 the compile failed there ("No valid triton
#: configs. OutOfMemoryError ... Required: 245760 Hardware limit: 232448", session 69 rule 4).
OVER_SHARED_MEMORY = ("baddbmm", 53, 128, 96, 1024)


def _over_shared_memory_inputs(device: str = "cuda") -> MMKernelInputs:
    _, batch, m, n, k = OVER_SHARED_MEMORY
    a = buf([batch, m, k], [m * k, k, 1], torch.bfloat16, device)
    b = buf([batch, k, n], [k * n, n, 1], torch.bfloat16, device)
    bias = buf([batch, m, n], [0, 0, 1], torch.bfloat16, device)
    return MMKernelInputs([bias, a, b], scalars={"alpha": 1, "beta": 1})


def _over_shared_memory_choices() -> tuple[MMKernelInputs, Problem, list[Choice], list[Choice]]:
    """The over-shared-memory problem's kernel inputs, problem, Triton (EXHAUSTIVE) and ATen choices."""
    op = OVER_SHARED_MEMORY[0]
    with inductor_graph():
        ki = _over_shared_memory_inputs()
        problem = problem_from_kernel_inputs(ki, op)
        ktcs = stock_ktcs(ki, op)
        triton = [choice_from_ktc(x) for x in ktcs[TEMPLATES[op][1].uid]]
        aten = [choice_from_ktc(x) for x in ktcs[TEMPLATES[op][0].uid]]
    return ki, problem, triton, aten


@pytest.mark.parametrize("aten_offered", [True, False])
def test_a_config_kept_alone_that_may_not_fit_in_shared_memory_gets_a_fallback(aten_offered: bool) -> None:
    """Where no choice kept is sure to fit in shared memory, the handler adds the best ATen choice
    or, with no ATen offered (``max_autotune_gemm_backends="TRITON"``), the first config of the
    model's order that is sure to fit: Inductor then benchmarks them and drops the config that fails,
    where the config kept alone failed the compile."""
    handler = DiodeInductorChoices(DiodeOptions(model=str(SHIPPED_H200)))
    model = load_model(SHIPPED_H200)
    op = OVER_SHARED_MEMORY[0]
    templates = list(TEMPLATES[op]) if aten_offered else [TEMPLATES[op][1]]
    with inductor_graph():
        ki = _over_shared_memory_inputs()
        problem = problem_from_kernel_inputs(ki, op)
        out = call_hook(handler, ki, op, templates)
        stock = [choice_from_ktc(x) for x in stock_ktcs(ki, op)[TEMPLATES[op][1].uid]]
    limit = model.gpu.smem_per_block_bytes
    # what the model prefers: one config, over the limit, predicted under 20 us with confidence
    pred = model.predict(problem, stock)
    lt = np.asarray(pred.log_time_us, np.float64)
    order = order_of(problem, stock, lt)
    first = stock[int(order[0])]
    assert not fits_shared_memory(problem, first, limit) and math.exp(lt[int(order[0])]) < 20
    kept = [choice_from_ktc(x) for x in out]
    assert kept[0] == first or first in kept
    if aten_offered:
        assert sorted(c.template for c in kept) == ["aten::baddbmm", "triton::bmm"]
    else:
        spare = next(stock[int(i)] for i in order if fits_shared_memory(problem, stock[int(i)], limit))
        assert set(kept) == {first, spare}
    s = handler.get_stats()
    assert (s["shared_memory_guard"], s["single_choice"], s["fallbacks_total"]) == (1, 0, 0)


def test_the_shared_memory_guard_reads_the_gpus_own_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard's limit is the GEMM's GPU's (``shared_memory_per_block_optin``), read at the hook,
    not the model file's figure for the GPU it was trained on: a model of an H200 on a GPU with
    more shared memory a block keeps its config alone there, one with less gets the fallback.
    (No GPU here: the device's properties, the outside world, are stood in for, and only while
    the limit is read, so that Inductor's enumeration is a CPU machine's as everywhere else.)"""
    import types

    from torch_diode.inductor import choices as choices_module

    op = OVER_SHARED_MEMORY[0]
    handler = DiodeInductorChoices(DiodeOptions(model=str(SHIPPED_H200)))
    ki, problem, triton, aten = _over_shared_memory_choices()
    assert choices_module.device_shared_memory(ki) is None  # no CUDA: the model file's figure
    for optin in (256 * 1024, 227 * 1024):
        with monkeypatch.context() as m:
            m.setattr(torch.cuda, "is_available", lambda: True)
            m.setattr(torch.cuda, "current_device", lambda: 0)
            m.setattr(
                torch.cuda,
                "get_device_properties",
                lambda i, v=optin: types.SimpleNamespace(shared_memory_per_block_optin=v),
            )
            choices_module._cuda_shared_memory.cache_clear()
            assert choices_module.device_shared_memory(ki) == optin
        choices_module._cuda_shared_memory.cache_clear()
        kept_triton, kept_aten = handler._model_selection(problem, op, triton, aten, shared_memory=optin)
        if optin == 256 * 1024:  # 245,888 bytes fit: alone, as the model chose
            assert (len(kept_triton), kept_aten) == (1, [])
        else:
            assert (len(kept_triton), len(kept_aten)) == (1, 1)
    assert handler.get_stats()["shared_memory_guard"] == 1


def _over_shared_memory_lut(tmp_path: Path, problem: Problem, triton: list[Choice]) -> tuple[Path, Choice]:
    """A lookup table whose one entry for ``problem`` is a config over 227 KiB and within 256 KiB:
    what a table measured on a GPU with more shared memory a block could hold."""
    big = next(
        c
        for c in triton
        if fits_shared_memory(problem, c, 256 * 1024) and not fits_shared_memory(problem, c, 227 * 1024)
    )
    rec = TimingRecord(problem=problem, choice=big, time_us=5.0, hardware="NVIDIA-H200")
    lut = KernelLUT.from_dataset(Dataset.from_records([rec], Provenance(hardware="NVIDIA-H200")), top_k=1)
    return lut.save(tmp_path / "lut.json"), big


def test_a_lut_hit_that_may_not_fit_in_the_gpus_shared_memory_gets_a_fallback(tmp_path: Path) -> None:
    """A table's config over the GPU's limit (Inductor's bound), kept alone, would fail the compile
    (as a model's would, session 69): the hit stands, with the first ATen choice beside it or, with
    no ATen offered, the first candidate sure to fit; with room, or where the limit is not known
    (no CUDA), the hit stands alone."""
    op = OVER_SHARED_MEMORY[0]
    _, problem, triton, aten = _over_shared_memory_choices()
    lut_path, big = _over_shared_memory_lut(tmp_path, problem, triton)
    handler = DiodeInductorChoices(DiodeOptions(lut=str(lut_path)))
    hit = [triton.index(big)]
    for limit in (None, 256 * 1024):
        assert handler._lut_selection(problem, triton, aten, op_name=op, shared_memory=limit) == (hit, [])
    assert handler._lut_selection(problem, triton, aten, op_name=op, shared_memory=227 * 1024) == (hit, [0])
    spare = next(i for i, c in enumerate(triton) if fits_shared_memory(problem, c, 227 * 1024))
    assert handler._lut_selection(problem, triton, [], op_name=op, shared_memory=227 * 1024) == ([*hit, spare], [])
    s = handler.get_stats()
    assert (s["lut_hits"], s["shared_memory_guard"], s["model_selections"]) == (4, 2, 0)


@pytest.mark.parametrize("source", ["model", "lut"])
def test_the_hook_guards_each_gemm_against_its_own_gpus_shared_memory(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the hook, one process, two GPUs: on one with 256 KiB a block the over-227-KiB
    config (the model's choice, or the table's) stays alone; on one with 227 KiB the same GEMM gets
    an ATen choice beside it, not the first GPU's cached decision. (No GPU here: the devices'
    properties, the outside world, are stood in for while they are read once, and remembered as
    torch-diode remembers them, so that Inductor's enumeration is a CPU machine's as everywhere
    else.)"""
    import types

    from torch_diode.inductor import choices as choices_module

    op = OVER_SHARED_MEMORY[0]
    optin = {0: 256 * 1024, 1: 227 * 1024}
    choices_module._cuda_shared_memory.cache_clear()
    with monkeypatch.context() as m:
        m.setattr(torch.cuda, "is_available", lambda: True)
        m.setattr(
            torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(shared_memory_per_block_optin=optin[i])
        )
        assert [choices_module._cuda_shared_memory(i) for i in (0, 1)] == [optin[0], optin[1]]
    try:
        kept = {}
        _, problem, triton, _ = _over_shared_memory_choices()
        with inductor_graph():
            if source == "lut":
                lut_path, big = _over_shared_memory_lut(tmp_path, problem, triton)
                handler = DiodeInductorChoices(DiodeOptions(lut=str(lut_path)))
            else:
                handler = DiodeInductorChoices(DiodeOptions(model=str(SHIPPED_H200)))
            for index in (0, 1):
                ki = _over_shared_memory_inputs(device=f"cuda:{index}")
                assert choices_module.device_shared_memory(ki) == optin[index]
                kept[index] = sorted(
                    (x.template.uid, choice_from_ktc(x).block_m or 0) for x in call_hook(handler, ki, op)
                )
    finally:
        choices_module._cuda_shared_memory.cache_clear()
    first = [t for t in kept[0] if t[0].startswith("triton")]
    assert len(kept[0]) == 1 and len(first) == 1  # alone where it fits
    assert sorted(kept[1]) == sorted([*first, ("aten::baddbmm", 0)])
    s = handler.get_stats()
    assert (s["shared_memory_guard"], s["decision_cache_hits"], s["single_choice"]) == (1, 0, 1)
    if source == "lut":
        assert first[0][1] == big.block_m and s["lut_hits"] == 2


def test_no_cache_predicts_every_time(model_path: Path) -> None:
    handler = DiodeInductorChoices(DiodeOptions(model=str(model_path), cache_predictions=False))
    with inductor_graph():
        for _ in range(2):
            call_hook(handler, kernel_inputs("mm", *SHAPE), "mm")
    s = handler.get_stats()
    assert (s["model_selections"], s["decision_cache_hits"], s["cache_hits"]) == (2, 0, 0)


@pytest.mark.parametrize("cache", [True, False])
def test_predictions_follow_the_choices_with_duplicates_and_cache(cache: bool, model_path: Path) -> None:
    """_predict returns, per choice in order, exactly the model's prediction for it: all distinct
    (predictions returned as they are), with duplicates, and on a (partial) cache hit."""
    model = load_model(model_path)
    handler = DiodeInductorChoices(DiodeOptions(model=str(model_path), cache_predictions=cache), model=model)
    with inductor_graph():
        ki = kernel_inputs("mm", *SHAPE)
        problem = problem_from_kernel_inputs(ki, "mm")
        choices = [choice_from_ktc(x) for xs in stock_ktcs(ki, "mm").values() for x in xs]
    assert len(set(choices)) == len(choices)

    def predicted(batch: list[Choice]) -> dict[Choice, tuple[float, float]]:
        unique = list(dict.fromkeys(batch))  # the model's float32 results depend on the batch
        pred = model.predict(problem, unique)
        return {c: (float(a), float(b)) for c, a, b in zip(unique, pred.log_time_us, pred.std)}

    full = predicted(choices)
    for batch in (choices, choices[::-1] + choices[:7], choices[:3], choices[5:9] + choices[5:6]):
        # with the cache, everything after the first call is a hit on the full prediction
        want = full if cache else predicted(batch)
        log_t, std = handler._predict(model, problem, batch)
        assert log_t.dtype == std.dtype == np.float64
        assert log_t.tolist() == [want[c][0] for c in batch]
        assert std.tolist() == [want[c][1] for c in batch]
    assert handler.get_stats()["cache_hits"] == (3 if cache else 0)


def test_lut_exact_hit_wins_without_a_model(tmp_path: Path) -> None:
    with inductor_graph():
        ki = kernel_inputs("mm", *SHAPE)
        problem = problem_from_kernel_inputs(ki, "mm")
        ktcs = stock_ktcs(ki, "mm")["triton::mm"]
        best = choice_from_ktc(ktcs[17])
        records = [
            TimingRecord(problem=problem, choice=best, time_us=5.0, hardware="NVIDIA-H100"),
            TimingRecord(problem=problem, choice=Choice.aten("mm"), time_us=9.0, hardware="NVIDIA-H100"),
        ]
        lut = KernelLUT.from_dataset(Dataset.from_records(records, Provenance(hardware="NVIDIA-H100")), top_k=1)
        lut_path = lut.save(tmp_path / "lut.json")
        handler = DiodeInductorChoices(DiodeOptions(lut=str(lut_path)))
        out = call_hook(handler, ki, "mm")
        # a problem the table does not know, and no model: stock behaviour, counted
        miss = call_hook(handler, kernel_inputs("mm", 64, 64, 64), "mm")
        stock_miss = stock_ktcs(kernel_inputs("mm", 64, 64, 64), "mm", space="DEFAULT")
    assert [kw(x) for x in out] == [kw(ktcs[17])]
    assert [choice_from_ktc(x) for x in out] == [best]
    s = handler.get_stats()
    assert s["lut_hits"] == 1 and s["model_selections"] == 0 and s["fallbacks"] == {"no_model": 1}
    assert [kw(x) for x in miss] == [kw(x) for xs in stock_miss.values() for x in xs]


def stock_result(ki: Any, op: str) -> list[tuple[str, dict[str, Any]]]:
    return [(x.template.uid, kw(x)) for x in call_hook(InductorChoices(), ki, op)]


def test_corrupt_model_file_falls_back_to_stock(
    tmp_path: Path, model_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = corrupt_copy(model_path, tmp_path / "corrupt.safetensors")
    handler = DiodeInductorChoices(DiodeOptions(model=str(bad)))
    caplog.set_level(logging.DEBUG, logger="torch_diode")
    with inductor_graph():
        for op in ("mm", "bmm"):
            ki = kernel_inputs(op, *SHAPE)
            assert [(x.template.uid, kw(x)) for x in call_hook(handler, ki, op)] == stock_result(ki, op)
    s = handler.get_stats()
    assert s["fallbacks"] == {"model_load_error": 2} and s["model_selections"] == 0
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "model load error" in r.getMessage()]
    assert len(warnings) <= 1  # once per process (0 if an earlier test already logged this reason)
    assert any("TORCH_DIODE_DISABLE=1" in r.getMessage() for r in caplog.records)
    assert handler.uuid().startswith("torch-diode-")  # uuid() still answers: compile never fails


def test_model_that_raises_falls_back_and_strict_mode_reraises(diode_dataset: Dataset) -> None:
    """A real DiodeModel whose network does not fit the feature vector: predict() raises."""
    from torch_diode.features import gpu_constants
    from torch_diode.model import Architecture, Normalization, build_model

    arch = Architecture(model_type="base", input_dim=3, hidden=4, depth=1, members=2)
    norm = Normalization(np.zeros(3, np.float32), np.ones(3, np.float32), 0.0, 1.0)
    broken = build_model(arch, hardware="NVIDIA-H100", gpu=gpu_constants("NVIDIA-H100"), normalization=norm, seed=0)
    handler = DiodeInductorChoices(DiodeOptions(), model=broken)
    strict = DiodeInductorChoices(DiodeOptions(enable_fallback=False), model=broken)
    with inductor_graph():
        ki = kernel_inputs("baddbmm", *SHAPE)
        assert [(x.template.uid, kw(x)) for x in call_hook(handler, ki, "baddbmm")] == stock_result(ki, "baddbmm")
        with pytest.raises(Exception):  # noqa: B017  (whatever the model raised)
            call_hook(strict, ki, "baddbmm")
    assert handler.get_stats()["fallbacks"] == {"model_error": 1}
    assert strict.get_stats()["fallbacks"] == {"model_error": 1}


def test_passthrough_cases(model_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    handler = DiodeInductorChoices(DiodeOptions(model=str(model_path)))
    with inductor_graph():
        ki = kernel_inputs("mm", *SHAPE)
        stock = stock_result(ki, "mm")
        # AutoHeuristic's extra call and ops we do not model are left alone
        ah = [TEMPLATES["mm"][1]]
        stock_ah = [(x.template.uid, kw(x)) for x in call_hook(InductorChoices(), ki, "mm-ah", ah)]
        assert [(x.template.uid, kw(x)) for x in call_hook(handler, ki, "mm-ah", ah)] == stock_ah
        # an ATen-only call (no max-autotune, or 2.12+ addmm's ATen call): nothing to select
        assert len(call_hook(handler, ki, "mm", [TEMPLATES["mm"][0]])) == 1
        # a CPU GEMM with device_types=("cuda",)
        cpu_ki = kernel_inputs("mm", *SHAPE, dtype=torch.float32, device="cpu")
        call_hook(handler, cpu_ki, "mm")
        monkeypatch.setenv("TORCH_DIODE_DISABLE", "1")
        assert [(x.template.uid, kw(x)) for x in call_hook(handler, ki, "mm")] == stock
    s = handler.get_stats()
    assert s["passthrough"] == {"unsupported_op": 1, "no_triton_candidates": 1, "device_type": 1, "disabled": 1}
    assert s["calls"] == 4 and s["model_selections"] == 0 and s["fallbacks_total"] == 0


def test_pickle_round_trip(model_path: Path) -> None:
    handler = DiodeInductorChoices(DiodeOptions(model=str(model_path), top_k_configs=2))
    with inductor_graph():
        before = [(x.template.uid, kw(x)) for x in call_hook(handler, kernel_inputs("bmm", *SHAPE), "bmm")]
        clone = pickle.loads(pickle.dumps(handler))
        assert isinstance(clone, DiodeInductorChoices) and clone.options == handler.options
        assert clone.uuid() == handler.uuid()
        assert clone.get_stats()["calls"] == 0  # stats and caches start empty in the child
        after = [(x.template.uid, kw(x)) for x in call_hook(clone, kernel_inputs("bmm", *SHAPE), "bmm")]
    assert after == before
    state = handler.__getstate__()
    assert set(state) == {"options", "active", "uuid"}  # the loaded model is not pickled


def test_model_object_without_path_pickles_as_its_bytes_and_deepcopies_as_itself(model_path: Path) -> None:
    model = load_model(model_path)
    handler = DiodeInductorChoices(DiodeOptions(top_k_configs=2), model=model)
    assert copy.deepcopy(handler) is handler  # torch.compile(mode=...) deep-copies Inductor's config
    clone = pickle.loads(pickle.dumps(handler))
    assert clone is not handler and clone.uuid() == handler.uuid()
    assert clone.model_hash() == model.model_hash
    with inductor_graph():
        before = [(x.template.uid, kw(x)) for x in call_hook(handler, kernel_inputs("bmm", *SHAPE), "bmm")]
        after = [(x.template.uid, kw(x)) for x in call_hook(clone, kernel_inputs("bmm", *SHAPE), "bmm")]
    assert after == before and clone.get_stats()["model_selections"] == 1


def test_uuid_changes_with_model_and_options(model_path: Path, other_model_path: Path) -> None:
    def uuid(**kw: Any) -> str:
        return DiodeInductorChoices(DiodeOptions(**kw)).uuid()

    base = uuid(model=str(model_path))
    assert base == uuid(model=str(model_path))
    assert base != uuid(model=str(other_model_path))
    assert base != uuid(model=str(model_path), top_k_configs=4)
    assert base != uuid(model=str(model_path), performance_threshold=1.2)
    assert base != uuid(model=str(model_path), search_space="DEFAULT")
    assert base != uuid(model=str(model_path), min_num_warps=4)
    assert base == uuid(model=str(model_path), min_num_warps=1)  # 1 leaves nothing out: the same handler


def test_needs_a_model_or_a_table() -> None:
    with pytest.raises(ValueError, match="TORCH_DIODE_MODEL"):
        DiodeInductorChoices(DiodeOptions())


@pytest.mark.parametrize("op", ["mm", "bmm"])
def test_widened_fp32_tiles_too_slow_to_compile_are_left_out(op: str, model_path: Path) -> None:
    """fp32 (no TF32) tiles of 16,384+ multiply-adds per thread take minutes each to compile: the
    widening leaves them out by default (Inductor's own DEFAULT candidates always stay), and
    ``max_compile_cost=None`` keeps the whole space."""
    from torch_diode.collect.sweep import compile_cost

    with inductor_graph():
        ki = kernel_inputs(op, 512, 512, 2048, dtype=torch.float32)
        problem = problem_from_kernel_inputs(ki, op)
        full = stock_ktcs(ki, op, space="EXHAUSTIVE")
        default = stock_ktcs(ki, op, space="DEFAULT")
        capped = DiodeInductorChoices(DiodeOptions(model=str(model_path)))
        out = call_hook(capped, ki, op)
        whole = DiodeInductorChoices(DiodeOptions(model=str(model_path), max_compile_cost=None))
        call_hook(whole, ki, op)
    tri = TEMPLATES[op][1].uid
    default_kw = [kw(x) for x in default[tri]]
    costly = [x for x in full[tri] if compile_cost(problem, choice_from_ktc(x)) > 131072 and kw(x) not in default_kw]
    assert costly, "the fp32 EXHAUSTIVE space has tiles over the cap"
    n_all = sum(len(v) for v in full.values())
    s = capped.get_stats()
    assert s["compile_cost_skipped"] == len(costly)
    assert s["candidates_seen"] == n_all - len(costly)
    assert whole.get_stats()["candidates_seen"] == n_all and whole.get_stats()["compile_cost_skipped"] == 0
    assert s["model_selections"] == 1 and s["fallbacks_total"] == 0  # the model (trained on fp32 too) chose
    for x in out:
        if x.template.uid == tri:
            assert compile_cost(problem, choice_from_ktc(x)) <= 131072 or kw(x) in default_kw


def test_problems_outside_the_models_training_data_use_stock_autotuning(model_path: Path) -> None:
    """fp32 with TF32 on gives Inductor's configs ALLOW_TF32=True (and cuBLAS TF32 kernels): the
    model, trained on IEEE fp32 timings only (its ``coverage`` metadata), is not asked; Inductor's
    stock candidates are returned and the fallback is counted. Likewise a dtype it never saw."""
    model = load_model(model_path)
    assert model.metadata["coverage"]["fp32_allow_tf32"] == [False]
    assert model.metadata["coverage"]["dtypes"] == ["float16", "float32"]
    handler = DiodeInductorChoices(DiodeOptions(model=str(model_path)))
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # the user API for TF32 (one consistent state)
    try:
        with inductor_graph():
            ki = kernel_inputs("mm", 512, 512, 2048, dtype=torch.float32)
            ktcs = stock_ktcs(ki, "mm", space="DEFAULT")
            stock = [(x.template.uid, kw(x)) for xs in ktcs.values() for x in xs]
            tf32 = [choice_from_ktc(x).allow_tf32 for uid, xs in ktcs.items() if uid.startswith("triton::") for x in xs]
            assert tf32 and all(tf32), "Inductor's fp32 configs carry ALLOW_TF32=True"
            out = [(x.template.uid, kw(x)) for x in call_hook(handler, ki, "mm")]
            assert out == stock
            call_hook(handler, kernel_inputs("mm", 512, 512, 2048, dtype=torch.bfloat16), "mm")
    finally:
        torch.set_float32_matmul_precision(before)
    assert not torch.backends.cuda.matmul.allow_tf32
    s = handler.get_stats()
    assert s["fallbacks"] == {"out_of_coverage": 2} and s["model_selections"] == 0


def test_compile_cost_cap_leaves_inductors_own_exhaustive_space_alone(model_path: Path) -> None:
    """When the user already asked for EXHAUSTIVE, every candidate is Inductor's own: nothing is
    left out for its compile cost (the cap only applies to configs the handler adds)."""
    with inductor_graph(max_autotune_gemm_search_space="EXHAUSTIVE"):
        ki = kernel_inputs("mm", 512, 512, 2048, dtype=torch.float32)
        n_all = sum(len(v) for v in stock_ktcs(ki, "mm", space="EXHAUSTIVE").values())
        handler = DiodeInductorChoices(DiodeOptions(model=str(model_path)))
        call_hook(handler, ki, "mm")
    s = handler.get_stats()
    assert s["compile_cost_skipped"] == 0 and s["candidates_seen"] == n_all


def _few_warps(ktc: Any) -> bool:
    c = choice_from_ktc(ktc)
    return not c.is_aten and c.num_warps is not None and c.num_warps < 4


#: Options under which the model keeps every Triton candidate (no top-k, no threshold, no
#: one-choice rules): what min_num_warps leaves out is then exactly what is missing.
KEEP_ALL = dict(top_k_configs=100_000, performance_threshold=1e9, one_below_us=0, aten_alone_below_us=0)


def test_min_num_warps_leaves_out_few_warp_configs_inductors_own_too(model_path: Path) -> None:
    """``min_num_warps=4`` (opt-in, against the one- and two-warp miscompiles of session 70): no
    Triton config of fewer warps reaches Inductor, whether the widening added it or Inductor's
    DEFAULT list offered it; the others and ATen are untouched, and the leaving out is counted."""
    with inductor_graph():
        ki = kernel_inputs("mm", *SHAPE)
        full = stock_ktcs(ki, "mm", space="EXHAUSTIVE")
        default = stock_ktcs(ki, "mm", space="DEFAULT")
        plain = DiodeInductorChoices(DiodeOptions(model=str(model_path), **KEEP_ALL))
        every = call_hook(plain, ki, "mm")
        warps = DiodeInductorChoices(DiodeOptions(model=str(model_path), min_num_warps=4, **KEEP_ALL))
        out = call_hook(warps, ki, "mm")
    few = [kw(x) for x in full["triton::mm"] if _few_warps(x)]
    assert few and any(_few_warps(x) for x in default["triton::mm"]), "Inductor's own list has two-warp configs"
    assert len(every) == sum(len(v) for v in full.values())  # KEEP_ALL keeps everything
    assert [(x.template.uid, kw(x)) for x in out] == [(x.template.uid, kw(x)) for x in every if not _few_warps(x)]
    s = warps.get_stats()
    assert s["few_warps_skipped"] == len(few) and s["min_num_warps_unmet"] == 0
    assert s["candidates_seen"] == len(every) - len(few) and plain.get_stats()["few_warps_skipped"] == 0


def test_min_num_warps_above_every_config_keeps_aten_alone_or_all_without_aten(
    model_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Where no Triton config has the warps asked for, ATen is kept alone; where no ATen choice is
    offered either (here or in addmm's earlier call), every config stays, said once and counted,
    since a compile without choices fails; after addmm's ATen call (torch >= 2.12), its Triton call
    keeps none."""
    with inductor_graph():
        ki = kernel_inputs("mm", *SHAPE)
        n_triton = len(stock_ktcs(ki, "mm")["triton::mm"])
        handler = DiodeInductorChoices(DiodeOptions(model=str(model_path), min_num_warps=16))
        aten_alone = call_hook(handler, ki, "mm")
        assert [x.template.uid for x in aten_alone] == ["aten::mm"]
        assert handler.get_stats()["few_warps_skipped"] == n_triton
        triton_only = [TEMPLATES["mm"][1]]
        plain = DiodeInductorChoices(DiodeOptions(model=str(model_path)))
        expected = [kw(x) for x in call_hook(plain, ki, "mm", triton_only)]
        handler.reset_stats()
        with caplog.at_level(logging.WARNING, logger="torch_diode"):
            kept = call_hook(handler, ki, "mm", triton_only)
        assert expected and [kw(x) for x in kept] == expected
        s = handler.get_stats()
        assert (s["min_num_warps_unmet"], s["few_warps_skipped"], s["fallbacks_total"]) == (1, 0, 0)
        assert "fewer than min_num_warps=16 warps and no ATen choice is offered" in caplog.text
        handler.reset_stats()
        ki_addmm = kernel_inputs("addmm", *SHAPE)
        assert call_hook(handler, ki_addmm, "addmm", [TEMPLATES["addmm"][1]]) == []
        s = handler.get_stats()
        assert s["min_num_warps_unmet"] == 0 and s["few_warps_skipped"] == len(
            stock_ktcs(ki_addmm, "addmm")["triton::mm"]
        )


def test_min_num_warps_holds_in_the_stock_fallback(model_path: Path) -> None:
    """Where the handler falls back to stock autotuning (here fp32 with TF32 on, outside what the
    model was trained on), ``min_num_warps`` still leaves out Inductor's few-warp configs."""
    handler = DiodeInductorChoices(DiodeOptions(model=str(model_path), min_num_warps=4))
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        with inductor_graph():
            ki = kernel_inputs("mm", 512, 512, 2048, dtype=torch.float32)
            stock = [
                (x.template.uid, kw(x), _few_warps(x))
                for xs in stock_ktcs(ki, "mm", space="DEFAULT").values()
                for x in xs
            ]
            out = [(x.template.uid, kw(x)) for x in call_hook(handler, ki, "mm")]
    finally:
        torch.set_float32_matmul_precision(before)
    few = sum(f for _, _, f in stock)
    assert few, "Inductor's fp32 list has two-warp configs"
    assert out == [(uid, k) for uid, k, f in stock if not f]
    s = handler.get_stats()
    assert s["fallbacks"] == {"out_of_coverage": 1} and s["few_warps_skipped"] == few


def test_min_num_warps_in_the_stock_fallback_never_leaves_a_compile_without_choices(model_path: Path) -> None:
    """The fallback's rule is the selection's: with no config of enough warps, ATen alone where it
    is offered, every config where it is not (counted), none after addmm's own ATen call (torch >=
    2.12). The fallback here: bf16, a dtype outside the test model's training data."""
    handler = DiodeInductorChoices(DiodeOptions(model=str(model_path), min_num_warps=16))
    assert "bfloat16" not in load_model(model_path).metadata["coverage"]["dtypes"]
    with inductor_graph():
        ki = kernel_inputs("mm", *SHAPE, dtype=torch.bfloat16)
        stock = stock_ktcs(ki, "mm", space="DEFAULT")["triton::mm"]
        assert [x.template.uid for x in call_hook(handler, ki, "mm")] == ["aten::mm"]
        s = handler.get_stats()
        assert (s["few_warps_skipped"], s["fallbacks"]) == (len(stock), {"out_of_coverage": 1})
        handler.reset_stats()
        kept = call_hook(handler, ki, "mm", [TEMPLATES["mm"][1]])
        assert [kw(x) for x in kept] == [kw(x) for x in stock]
        s = handler.get_stats()
        assert (s["min_num_warps_unmet"], s["few_warps_skipped"]) == (1, 0)
        handler.reset_stats()
        ki_aten, ki_triton = split_addmm_inputs(*SHAPE, bias_2d=False, dtype=torch.bfloat16)
        assert [x.template.uid for x in call_hook(handler, ki_aten, "addmm", [aten_addmm])] == ["aten::addmm"]
        assert call_hook(handler, ki_triton, "addmm", [mm_template]) == []
        s = handler.get_stats()
        assert s["min_num_warps_unmet"] == 0 and s["fallbacks"] == {"out_of_coverage": 1}


def test_min_num_warps_counts_again_on_a_replayed_decision(model_path: Path) -> None:
    """A decision replayed from the cache counts what the filters left out, as the first call did."""
    handler = DiodeInductorChoices(DiodeOptions(model=str(model_path), min_num_warps=4))
    with inductor_graph():
        ki = kernel_inputs("mm", *SHAPE)
        first = [kw(x) for x in call_hook(handler, ki, "mm")]
        once = handler.get_stats()["few_warps_skipped"]
        again = [kw(x) for x in call_hook(handler, ki, "mm")]
    s = handler.get_stats()
    assert once > 0 and again == first
    assert s["decision_cache_hits"] == 1 and s["few_warps_skipped"] == 2 * once


def test_min_num_warps_on_torch_2_12s_split_addmm(model_path: Path) -> None:
    """torch >= 2.12: addmm's ATen call keeps its ATen choice; with no Triton config left, the
    Triton call keeps none, the lowering is one choice, and the same lowering again replays it."""
    handler = DiodeInductorChoices(DiodeOptions(model=str(model_path), min_num_warps=16))
    with inductor_graph():
        ki_aten, ki_triton = split_addmm_inputs(512, 256, 1001, bias_2d=False)
        n_triton = len(stock_ktcs(ki_triton, "addmm")["triton::mm"])
        for _ in range(2):
            aten_out = call_hook(handler, ki_aten, "addmm", [aten_addmm])
            triton_out = call_hook(handler, ki_triton, "addmm", [mm_template])
            assert [x.template.uid for x in aten_out] == ["aten::addmm"] and triton_out == []
    s = handler.get_stats()
    assert (s["single_choice"], s["decision_cache_hits"], s["min_num_warps_unmet"]) == (2, 1, 0)
    assert s["few_warps_skipped"] == 2 * n_triton and s["fallbacks_total"] == 0


def test_min_num_warps_turns_a_lookup_table_hit_on_a_few_warp_config_into_a_miss(
    tmp_path: Path, model_path: Path
) -> None:
    """A table's entry naming a two-warp config is not kept under ``min_num_warps=4``: the model
    decides instead, among the configs the option leaves."""
    with inductor_graph():
        ki = kernel_inputs("mm", *SHAPE)
        problem = problem_from_kernel_inputs(ki, "mm")
        two = next(choice_from_ktc(x) for x in stock_ktcs(ki, "mm")["triton::mm"] if _few_warps(x))
        rec = TimingRecord(problem=problem, choice=two, time_us=5.0, hardware="NVIDIA-H100")
        lut_path = KernelLUT.from_dataset(
            Dataset.from_records([rec], Provenance(hardware="NVIDIA-H100")), top_k=1
        ).save(tmp_path / "lut.json")
        hits = DiodeInductorChoices(DiodeOptions(model=str(model_path), lut=str(lut_path)))
        assert [choice_from_ktc(x) for x in call_hook(hits, ki, "mm")] == [two]
        warps = DiodeInductorChoices(DiodeOptions(model=str(model_path), lut=str(lut_path), min_num_warps=4))
        out = call_hook(warps, ki, "mm")
    assert out and not any(_few_warps(x) for x in out)
    assert (hits.get_stats()["lut_hits"], warps.get_stats()["lut_hits"], warps.get_stats()["model_selections"]) == (
        1,
        0,
        1,
    )


def test_the_decision_cache_follows_aten_and_tf32_settings(model_path: Path) -> None:
    """A decision replayed under other settings would keep no choice at all (ATen no longer offered
    where the model's ATen stand-in had won) or replay an ALLOW_TF32 the user has since changed."""
    handler = DiodeInductorChoices(DiodeOptions(model=str(model_path)))
    before = torch.backends.cuda.matmul.allow_tf32
    try:
        with inductor_graph():
            call_hook(handler, kernel_inputs("addmm", *SHAPE), "addmm")
            with inductor_config.patch(max_autotune_gemm_backends="TRITON"):
                call_hook(handler, kernel_inputs("addmm", *SHAPE), "addmm")
            torch.backends.cuda.matmul.allow_tf32 = not before
            call_hook(handler, kernel_inputs("addmm", *SHAPE), "addmm")
            call_hook(handler, kernel_inputs("addmm", *SHAPE), "addmm")  # the same settings again: a hit
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    s = handler.get_stats()
    assert (s["model_selections"], s["decision_cache_hits"]) == (3, 1)


def test_a_broken_lut_falls_back_on_every_gemm(tmp_path: Path, model_path: Path) -> None:
    bad = tmp_path / "lut.json"
    bad.write_text("{not json")
    handler = DiodeInductorChoices(DiodeOptions(model=str(model_path), lut=str(bad)))
    with inductor_graph():
        for _ in range(3):
            ki = kernel_inputs("mm", *SHAPE)
            assert [(x.template.uid, kw(x)) for x in call_hook(handler, ki, "mm")] == stock_result(ki, "mm")
    s = handler.get_stats()
    assert s["fallbacks"] == {"lut_error": 3} and s["model_selections"] == 0


def test_uuid_answers_for_a_model_object_without_a_hash(model_path: Path) -> None:
    """install_diode_choices takes any object with predict(): Inductor asks every compile for the
    handler's uuid(), which must never raise (the compile would fail)."""
    model = load_model(model_path)

    class Wrapped:
        def predict(self, problem: Any, choices: Any) -> Any:
            return model.predict(problem, choices)

        def out_of_coverage(self, problem: Any, triton: Any) -> None:
            return None

    a, b = (DiodeInductorChoices(DiodeOptions(model=str(model_path)), model=Wrapped()) for _ in range(2))
    assert a.model_hash() is None and a.uuid().startswith("torch-diode-")
    assert a.uuid() != b.uuid()  # two objects: no cached graph of one is served to the other
