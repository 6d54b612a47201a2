"""Metric definitions (README.md, Metrics) against hand-computed examples."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from torch_diode.dataset import Dataset
from torch_diode.evaluate import (
    ProblemEval,
    StockPick,
    evaluate_model,
    geomean_ci95,
    kendall_tau,
    markdown_table,
    max_autotune_solution_from_dataset,
    problem_evals,
    read_max_autotune_solution,
    regression_stats,
    regret_at_k,
    report_json,
    summarize,
    write_max_autotune_solution,
    write_report,
)
from torch_diode.records import Choice, Problem, Provenance, TimingRecord

ATEN = Choice.aten("mm")


def tri(bm: int) -> Choice:
    return Choice(template="triton::mm", block_m=bm, block_n=64, block_k=32, group_m=8, num_stages=3, num_warps=4)


CHOICES = [ATEN, tri(16), tri(32), tri(64)]


def pe(
    op: str, measured: list[float], predicted_us: list[float], stock: float | None = None, m: int = 64
) -> ProblemEval:
    p = Problem(op=op, m=m, n=64, k=64, batch=2 if op == "bmm" else 1)
    choices = [Choice.aten(op), *CHOICES[1 : len(measured)]]
    return ProblemEval(p, choices, np.array(measured, float), np.log(np.array(predicted_us, float)), stock_us=stock,
                       aten_us=measured[0])  # fmt: skip


def test_regret_at_k_by_hand() -> None:
    measured = np.array([10.0, 12.0, 8.0, 20.0])
    predicted = np.log([1.0, 2.0, 3.0, 4.0])  # model order: 0, 1, 2, 3
    r = regret_at_k(measured, predicted)
    assert r == {1: 1.25, 3: 1.0, 5: 1.0, 10: 1.0}  # oracle 8 is third; k > 4 means all
    assert regret_at_k(measured, -predicted, (1, 2)) == {1: 20 / 8, 2: 1.0}


def test_kendall_tau_by_hand_and_against_scipy() -> None:
    assert kendall_tau(np.arange(5), np.arange(5)) == pytest.approx(1.0)
    assert kendall_tau(np.arange(5), -np.arange(5)) == pytest.approx(-1.0)
    # x = [1, 2, 3], y = [1, 3, 2]: pairs (01 +, 02 +, 12 -) -> (2 - 1) / 3
    assert kendall_tau(np.array([1, 2, 3]), np.array([1, 3, 2])) == pytest.approx(1 / 3)
    assert math.isnan(kendall_tau(np.ones(4), np.arange(4)))
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    x = rng.integers(0, 20, 300).astype(float)  # with ties
    y = x + rng.normal(0, 5, 300)
    assert kendall_tau(x, y) == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)


def test_summary_by_hand() -> None:
    evals = [
        pe("mm", [10.0, 12.0, 8.0, 20.0], [1, 2, 3, 4], stock=12.0),  # r1 1.25, r3 1, pick = ATen (10)
        pe("mm", [5.0, 4.0, 6.0, 7.0], [9, 1, 2, 3], stock=5.0, m=128),  # r1 1, pick 4
        pe("bmm", [3.0, 6.0, 9.0], [3, 2, 1]),  # order 2, 1, 0: r1 3, r3 1
    ]
    rep = summarize(evals)
    o = rep["overall"]
    assert o["problems"] == 3
    assert o["regret@1"]["geomean"] == pytest.approx((1.25 * 1.0 * 3.0) ** (1 / 3))
    assert o["regret@1"]["max"] == 3.0
    assert o["regret@1"]["p95"] == pytest.approx(np.percentile([1.25, 1.0, 3.0], 95))
    assert o["recall@1"] == pytest.approx(1 / 3)
    assert o["recall@3"] == 1.0 and o["regret@3"]["max"] == 1.0
    assert o["vs_max_autotune"]["problems"] == 2
    assert o["vs_max_autotune"]["geomean"] == pytest.approx(math.sqrt((10 / 12) * (4 / 5)))
    assert o["vs_max_autotune"]["no_slower_share"] == 1.0
    assert o["vs_aten"]["geomean"] == pytest.approx((1.0 * 0.8 * 3.0) ** (1 / 3))
    assert o["model_picks_aten_share"] == pytest.approx(1 / 3)
    assert set(rep["per_op"]) == {"mm", "bmm"}
    bmm_r1 = rep["per_op"]["bmm"]["regret@1"]
    assert bmm_r1.pop("geomean_ci95") == pytest.approx([3.0, 3.0])  # one problem: nothing to resample
    assert bmm_r1 == pytest.approx({"geomean": 3.0, "p95": 3.0, "max": 3.0})
    assert rep["per_op"]["bmm"]["vs_max_autotune"]["problems"] == 0
    assert -1.0 <= o["kendall_tau"]["mean"] <= 1.0
    # the JSON keys are the names of the README's Metrics; NaN becomes null
    js = json.loads(report_json(rep))
    assert js["overall"]["recall@5"] == 1.0 and js["per_op"]["bmm"]["vs_max_autotune"]["geomean"] is None
    lo, hi = o["regret@1"]["geomean_ci95"]
    assert 1.0 <= lo <= o["regret@1"]["geomean"] <= hi <= 3.0 + 1e-12  # within the values (exp(log 3) rounds)
    assert js["overall"]["regret@1"]["geomean_ci95"] == [lo, hi]
    md = markdown_table(rep)
    assert md.count("\n| ") == 3 and "| overall | 3 |" in md  # overall, bmm, mm
    assert f"regret@1 [{lo:.3f}, {hi:.3f}]" in md and "vs max-autotune [" in md


def test_geomean_ci95() -> None:
    # two values: a resample is all of one (p = 0.25 each), so the 2.5/97.5 percentiles are the values
    assert geomean_ci95([1.0, 4.0]) == pytest.approx((1.0, 4.0))
    assert geomean_ci95([1.2] * 7) == pytest.approx((1.2, 1.2))
    assert all(math.isnan(v) for v in geomean_ci95([]))
    rng = np.random.default_rng(1)
    r = np.exp(np.abs(rng.normal(0.0, 0.2, 400)))  # regret-like ratios >= 1
    lo, hi = geomean_ci95(r)
    assert geomean_ci95(r) == (lo, hi)  # a fixed seed: reports are reproducible
    # large n: close to the normal interval of the mean log, exp(mean +- 1.96 sd / sqrt(n))
    logs = np.log(r)
    half = 1.96 * logs.std(ddof=1) / math.sqrt(len(r))
    assert math.log(lo) == pytest.approx(logs.mean() - half, abs=0.15 * half)
    assert math.log(hi) == pytest.approx(logs.mean() + half, abs=0.15 * half)


def test_regression_stats_by_hand() -> None:
    e = pe("mm", [10.0, 20.0], [10.0 * math.e, 20.0])  # errors: 1, 0 (natural log)
    st = regression_stats([e], top_n_worst=1)
    assert st.rows == 2 and st.mse == pytest.approx(0.5) and st.rmse == pytest.approx(math.sqrt(0.5))
    assert st.rmse_exp == pytest.approx(math.exp(math.sqrt(0.5)))
    assert st.worst[0]["ratio"] == pytest.approx(math.e) and st.worst[0]["choice"] == "aten::mm"


def test_solution_files(tmp_path: Path) -> None:
    p = Problem(op="mm", m=64, n=64, k=64)
    path = write_max_autotune_solution({p: StockPick(tri(32), 7.5)}, tmp_path / "s.json", hardware="NVIDIA-H100")
    assert read_max_autotune_solution(path) == {p: StockPick(tri(32), 7.5)}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "torch-diode-max-autotune-solution", "version": 1, "hardware": "NVIDIA-H100",
                               "solutions": [{"choice": {}}]}))  # fmt: skip
    with pytest.raises(ValueError, match=r"solutions\[0\] is malformed"):
        read_max_autotune_solution(bad)
    other = tmp_path / "other.json"
    other.write_text("{}")
    with pytest.raises(ValueError, match="not a max-autotune solution"):
        read_max_autotune_solution(other)
    recs = [
        TimingRecord(problem=p, choice=c, time_us=t, hardware="NVIDIA-H100")
        for c, t in ((ATEN, 9.0), (tri(16), 5.0), (tri(16), 7.0))
    ]
    ds = Dataset.from_records(recs, Provenance(hardware="NVIDIA-H100"))
    assert max_autotune_solution_from_dataset(ds) == {p: StockPick(tri(16), 6.0)}  # median of repeats


def _solution_json(tmp_path: Path, edit: Callable[[dict[str, Any]], object], name: str = "s.json") -> Path:
    """A solution file of three problems' picks (times 7.5, 8.5, 9.5), changed by ``edit``."""
    picks = {Problem(op="mm", m=64 * (i + 1), n=64, k=64): StockPick(tri(32), 7.5 + i) for i in range(3)}
    path = write_max_autotune_solution(picks, tmp_path / name, hardware="NVIDIA-H100")
    obj = json.loads(path.read_text())
    edit(obj)
    path.write_text(json.dumps(obj))  # NaN and Infinity as Python's json writes and reads them
    return path


@pytest.mark.parametrize("time_us", [0, 0.0, -3.0, math.nan, math.inf, -math.inf, "7.5", True])
def test_a_solution_time_that_is_not_a_positive_finite_number_is_refused(tmp_path: Path, time_us: object) -> None:
    """A time of 0 divided by zero in ``vs_max_autotune``, and a negative, NaN or infinite one
    (or a string, or a bool) made its figures nonsense: refused on reading, naming the entry, as
    the dataset reader refuses such times."""
    path = _solution_json(tmp_path, lambda o: o["solutions"][1].update(time_us=time_us))
    with pytest.raises(
        ValueError, match=r"solutions\[1\]: time_us must be a positive finite number of microseconds, got "
    ):
        read_max_autotune_solution(path)
    unknown = _solution_json(tmp_path, lambda o: o["solutions"][1].pop("time_us"), "unknown.json")
    assert [s.time_us for s in read_max_autotune_solution(unknown).values()] == [7.5, None, 9.5]  # no time: fine


def test_a_solution_with_two_entries_of_one_problem_is_refused(tmp_path: Path) -> None:
    """The later of two entries of one problem used to win silently; both are named instead."""
    path = _solution_json(tmp_path, lambda o: o["solutions"].append({**o["solutions"][0], "time_us": 1.0}))
    with pytest.raises(
        ValueError, match=r"solutions\[0\] and solutions\[3\] are both of problem mm float16 64x64x64 row/row:"
    ):
        read_max_autotune_solution(path)


@pytest.mark.parametrize("hardware", [None, "", 100])
def test_a_solution_without_its_gpu_is_refused(tmp_path: Path, hardware: object) -> None:
    """A solution says which GPU its picks were made on (the format's ``hardware``); without it
    the check against the dataset's GPU was skipped, so it is refused, whether checked or not."""
    path = _solution_json(tmp_path, lambda o: o.pop("hardware") if hardware is None else o.update(hardware=hardware))
    for ours in (None, "NVIDIA-H100"):
        with pytest.raises(
            ValueError,
            match=r'the max-autotune solution has (no "hardware"|"hardware": ""|"hardware": 100), the key of the GPU',
        ):
            read_max_autotune_solution(path, hardware=ours)


def test_stock_picks_of_none_of_the_datasets_problems_are_refused() -> None:
    """A solution of another dataset's problems gave an empty ``vs_max_autotune`` and a log line;
    it is refused. One that covers some of the problems is scored on those."""
    probs = [Problem(op="mm", m=64 * (i + 1), n=64, k=64) for i in range(3)]
    recs = [
        TimingRecord(problem=p, choice=c, time_us=t, hardware="NVIDIA-H100")
        for p in probs[:2]
        for c, t in ((ATEN, 9.0), (tri(16), 5.0))
    ]
    ds = Dataset.from_records(recs, Provenance(hardware="NVIDIA-H100"))
    model = _tiny_model()
    with pytest.raises(
        ValueError,
        match=r"no problem of the max-autotune solution is in the dataset \(solution: 1 problem, dataset: 2 measured problems\)",
    ):
        evaluate_model(model, ds, stock={probs[2]: StockPick(tri(16), 5.0)})
    report, _ = evaluate_model(model, ds, stock={probs[1]: StockPick(tri(16), 5.0), probs[2]: StockPick(tri(16), 5.0)})
    assert report["overall"]["problems"] == 2 and report["overall"]["vs_max_autotune"]["problems"] == 1


def test_write_report_writes_json_and_markdown(tmp_path: Path) -> None:
    evals = [pe("mm", [10.0, 12.0, 8.0], [1, 2, 3], stock=9.0)]
    rep = {"hardware": "NVIDIA-H100", **summarize(evals)}
    written = write_report(rep, evals, tmp_path / "out" / "report.json")
    assert written[:2] == [tmp_path / "out" / "report.json", tmp_path / "out" / "report.md"]
    js = json.loads(written[0].read_text())
    assert js["overall"]["regret@1"]["geomean"] == pytest.approx(1.25)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert len(written) == 2  # the PNG needs the optional plot extra
    else:
        assert written[2].suffix == ".png" and written[2].stat().st_size > 0


@pytest.mark.parametrize(
    ("lo", "hi", "expect"),
    [(1.0, 1.83, ["1", "1.1", "1.2", "1.3", "1.5"]), (0.9, 100.0, ["1", "2", "5", "10", "20", "50", "100"])],
)
def test_regret_axes_are_labelled_in_plain_numbers(lo: float, hi: float, expect: list[str]) -> None:
    """Regret axes read 1.1, 1.2, 2, not matplotlib's default 1.2 x 10^0; ticks thin out over
    wide ranges so labels do not overlap, and a narrow range still gets several."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from torch_diode.evaluate import ratio_axis

    fig, ax = plt.subplots()
    ax.plot([lo, hi], [0, 1])
    ax.set_xscale("log")
    ratio_axis(ax.xaxis)
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == expect
    ax.set_xlim(1.0, 1.01)
    fig.canvas.draw()
    narrow = [float(t.get_text()) for t in ax.get_xticklabels()]
    assert len(narrow) >= 3 and narrow == sorted(narrow)
    plt.close(fig)


def test_regret_against_a_wider_oracle() -> None:
    """With ``oracle_us`` (the best of the whole space when some choices are not ranked) regret
    counts the loss of leaving the fastest choice out, and recall is 0 for that problem."""
    measured = np.array([10.0, 12.0, 9.0])
    predicted = np.log([1.0, 2.0, 3.0])
    assert regret_at_k(measured, predicted, (1, 3), oracle_us=6.0) == {1: 10 / 6, 3: 1.5}
    assert regret_at_k(measured, predicted, (1,), oracle_us=100.0) == {1: 10 / 9}  # never above the ranked best
    e = ProblemEval(Problem(op="mm", m=8, n=8, k=8), CHOICES[:3], measured, predicted, oracle_us=6.0)
    s = summarize([e], with_tau=False)["overall"]
    assert s["regret@3"]["geomean"] == pytest.approx(1.5) and s["recall@10"] == 0.0


def test_problem_evals_rank_only_what_the_handler_would(tmp_path: Path) -> None:
    """``max_compile_cost`` leaves the fp32 FMA tiles the handler never considers out of the
    ranking, but the oracle is still the best of everything measured."""
    from torch_diode.collect.sweep import compile_cost
    from torch_diode.features import FEATURE_SPEC, gpu_constants
    from torch_diode.model import ARCH_PRESETS, Architecture, Normalization, build_model

    p = Problem(op="mm", m=512, n=512, k=2048, dtype="float32")
    cheap = Choice(template="triton::mm", block_m=64, block_n=64, block_k=32, group_m=8, num_stages=3, num_warps=4)
    costly = Choice(template="triton::mm", block_m=128, block_n=128, block_k=128, group_m=8, num_stages=3,
                    num_warps=4)  # fmt: skip
    assert compile_cost(p, cheap) <= 131072 < compile_cost(p, costly)
    recs = [
        TimingRecord(problem=p, choice=c, time_us=t, hardware="NVIDIA-H100")
        for c, t in ((Choice.aten("mm"), 30.0), (cheap, 40.0), (costly, 20.0))
    ]
    ds = Dataset.from_records(recs, Provenance(hardware="NVIDIA-H100"))
    n = len(FEATURE_SPEC)
    arch = Architecture(model_type="base", input_dim=n, members=2, **ARCH_PRESETS["base"])
    norm = Normalization(np.zeros(n, np.float32), np.ones(n, np.float32), 0.0, 1.0)
    model = build_model(arch, hardware="NVIDIA-H100", gpu=gpu_constants("NVIDIA-H100"), normalization=norm, seed=0)
    (full,) = problem_evals(model, ds)
    (capped,) = problem_evals(model, ds, max_compile_cost=131072)
    assert set(full.choices) == {Choice.aten("mm"), cheap, costly} and full.oracle_us is None
    assert set(capped.choices) == {Choice.aten("mm"), cheap} and capped.oracle_us == 20.0
    assert regret_at_k(capped.measured_us, capped.predicted_log_us, (10,), oracle_us=capped.oracle_us) == {10: 1.5}


def test_problem_evals_without_few_warp_configs() -> None:
    """``min_num_warps`` leaves the Triton configs of fewer warps out of the ranking, as the
    handler's option of that name does (ATen stays), with the oracle the best of everything measured;
    1 and None leave everything in."""
    p = Problem(op="mm", m=512, n=512, k=2048)
    two = Choice(template="triton::mm", block_m=64, block_n=64, block_k=32, group_m=8, num_stages=3, num_warps=2)
    four = dataclasses.replace(two, num_warps=4)
    recs = [
        TimingRecord(problem=p, choice=c, time_us=t, hardware="NVIDIA-H100")
        for c, t in ((Choice.aten("mm"), 30.0), (two, 20.0), (four, 25.0))
    ]
    ds = Dataset.from_records(recs, Provenance(hardware="NVIDIA-H100"))
    model = _tiny_model()
    for off in (None, 1):
        (full,) = problem_evals(model, ds, min_num_warps=off)
        assert set(full.choices) == {Choice.aten("mm"), two, four} and full.oracle_us is None
    (warps,) = problem_evals(model, ds, min_num_warps=4)
    assert set(warps.choices) == {Choice.aten("mm"), four} and warps.oracle_us == 20.0
    assert regret_at_k(warps.measured_us, warps.predicted_log_us, (10,), oracle_us=warps.oracle_us) == {10: 1.25}
    (none,) = problem_evals(model, ds, min_num_warps=8)
    assert none.choices == [Choice.aten("mm")] and none.oracle_us == 20.0
    # no ATen measured and no config with the warps asked for: all stay, as in the handler
    triton_only = Dataset.from_records(recs[1:], Provenance(hardware="NVIDIA-H100"))
    (kept,) = problem_evals(model, triton_only, min_num_warps=8)
    assert set(kept.choices) == {two, four}
    with pytest.raises(ValueError, match="min_num_warps: must be an integer >= 1"):
        problem_evals(model, ds, min_num_warps=0)


def _tiny_model():
    from torch_diode.features import FEATURE_SPEC, gpu_constants
    from torch_diode.model import ARCH_PRESETS, Architecture, Normalization, build_model

    n = len(FEATURE_SPEC)
    arch = Architecture(model_type="base", input_dim=n, members=2, **ARCH_PRESETS["base"])
    norm = Normalization(np.zeros(n, np.float32), np.ones(n, np.float32), 0.0, 1.0)
    return build_model(arch, hardware="NVIDIA-H100", gpu=gpu_constants("NVIDIA-H100"), normalization=norm, seed=0)


def test_where_stocks_time_comes_from() -> None:
    """``vs_max_autotune.stock_time`` tells a pick picked in the dataset's own timings (its time the
    dataset's, bit for bit) from one picked elsewhere and timed here, and from one the dataset
    did not time (the solution's time used); the report notes the first when it is most picks."""
    probs = [Problem(op="mm", m=64 * (i + 1), n=64, k=64) for i in range(4)]
    recs = [
        TimingRecord(problem=p, choice=c, time_us=t + i, hardware="NVIDIA-H100")
        for i, p in enumerate(probs)
        for c, t in ((ATEN, 9.0), (tri(16), 5.0), (tri(32), 7.0))
    ]
    ds = Dataset.from_records(recs, Provenance(hardware="NVIDIA-H100"))
    stock = {
        probs[0]: StockPick(tri(16), 5.0),  # the dataset's own time: picked in these timings
        probs[1]: StockPick(tri(32), 7.5),  # picked in another run, timed here (8.0)
        probs[2]: StockPick(tri(64), 4.0),  # not timed here: the solution's time
        probs[3]: StockPick(tri(64), None),  # not timed here and no time: no stock figure
    }
    evals = problem_evals(_tiny_model(), ds, stock=stock)
    assert [(e.stock_us, e.stock_source) for e in evals] == [
        (5.0, "same_time_here"),
        (8.0, "other_time_here"),
        (4.0, "from_solution"),
        (None, None),
    ]
    vs = summarize(evals)["overall"]["vs_max_autotune"]
    assert vs["problems"] == 3
    assert vs["stock_time"] == {"same_time_here": 1, "other_time_here": 1, "from_solution": 1}
    md = markdown_table({"hardware": "NVIDIA-H100", **summarize(evals)})
    assert "picks were made in the timings they are scored in" not in md  # 1 of 3: chance agreement
    assert "not among this dataset's timings on 1 of 3 problems" in md
    # stock's picks derived from the dataset itself: every time is the dataset's, and the note says so
    derived = problem_evals(_tiny_model(), ds, stock=max_autotune_solution_from_dataset(ds))
    vs = summarize(derived)["overall"]["vs_max_autotune"]
    assert vs["stock_time"] == {"same_time_here": 4, "other_time_here": 0, "from_solution": 0}
    md = markdown_table({"hardware": "NVIDIA-H100", **summarize(derived)})
    assert "bit for bit, on 4 of 4 problems" in md and "not among" not in md


def test_plural_counts_one_in_the_singular() -> None:
    from torch_diode._text import plural

    assert [plural(n, "epoch") for n in (0, 1, 2)] == ["0 epochs", "1 epoch", "2 epochs"]
    assert plural(2163, "row") == "2,163 rows"
    assert plural(1, "worst prediction") == "1 worst prediction" and plural(3, "CUDA GPU") == "3 CUDA GPUs"
    assert plural(2, "matrix", "matrices") == "2 matrices" and plural(1, "matrix", "matrices") == "1 matrix"


def test_a_report_of_one_problem_says_problem() -> None:
    """The table's title, its vs max-autotune cell and the notes under it count one problem in the
    singular (they said "1 problems")."""
    prob = Problem(op="mm", m=64, n=64, k=64)
    recs = [
        TimingRecord(problem=prob, choice=c, time_us=t, hardware="NVIDIA-H100")
        for c, t in ((ATEN, 9.0), (tri(16), 5.0))
    ]
    ds = Dataset.from_records(recs, Provenance(hardware="NVIDIA-H100"))
    model = _tiny_model()
    report, _ = evaluate_model(model, ds, stock=max_autotune_solution_from_dataset(ds))
    md = markdown_table(report)
    assert md.startswith("Model vs measured timings on NVIDIA-H100 (1 problem)\n"), md
    assert " (1 problem, " in md and "bit for bit, on 1 of 1 problem:" in md
    assert "1 problems" not in md
    report, _ = evaluate_model(model, ds, stock={prob: StockPick(tri(64), 4.0)})
    assert "not among this dataset's timings on 1 of 1 problem:" in markdown_table(report)


def test_validate_models_report_names_what_it_measured_as_validate_max_autotunes_does() -> None:
    """``regression_report`` (``diode validate-model --json``) carries the keys that say which model
    (its file's sha256), GPU and data were measured, the same as ``evaluate_model``'s report, and
    which choices were predicted (``--max-compile-cost``: configs over it are left out)."""
    from torch_diode.evaluate import regression_report

    probs = [Problem(op="mm", m=64 * (i + 1), n=64, k=64) for i in range(2)]
    costly = Choice(template="triton::mm", block_m=128, block_n=128, block_k=128, group_m=8, num_stages=3,
                    num_warps=4)  # fmt: skip
    recs = [
        TimingRecord(problem=p, choice=c, time_us=t, hardware="NVIDIA-H100")
        for p in probs
        for c, t in ((ATEN, 9.0), (tri(16), 5.0), (costly, 6.0))
    ]
    ds = Dataset.from_records(recs, Provenance(hardware="NVIDIA-H100"))
    model = _tiny_model()
    full, _ = evaluate_model(model, ds, max_compile_cost=None)
    rep = regression_report(model, ds, max_compile_cost=None, top_n_worst=2)
    for key in ("hardware", "model", "dataset"):
        assert rep[key] == full[key], key
    assert rep["hardware"] == "NVIDIA-H100" and rep["model"]["sha256"] == model.model_hash
    assert rep["dataset"] == {"records": 6, "problems": 2, "hardware": ["NVIDIA-H100"]}
    assert rep["candidates"] == {"max_compile_cost": None} and rep["rows"] == 6 and len(rep["worst"]) == 2
    st = regression_stats(problem_evals(model, ds), top_n_worst=2)
    assert (rep["mse"], rep["rmse"], rep["rmse_exp"], rep["worst"]) == (st.mse, st.rmse, st.rmse_exp, st.worst)
    from torch_diode.records import compile_cost

    cap = min(compile_cost(p, costly) for p in probs) - 1
    assert all(compile_cost(p, c) <= cap for p in probs for c in (ATEN, tri(16)))
    capped = regression_report(model, ds, max_compile_cost=cap, top_n_worst=0)
    assert capped["candidates"] == {"max_compile_cost": cap} and capped["rows"] == 4  # the costly config left out
    assert capped["worst"] == [] and capped["dataset"] == rep["dataset"]


def test_trained_shapes_note_says_what_the_block_means() -> None:
    """The line under ``validate-*``'s tables for each state of the ``trained_shapes`` block; an
    incomplete list is always said, with or without ``--exclude-trained``."""
    from torch_diode.evaluate import trained_shapes_note

    assert trained_shapes_note({"listed": True, "complete": True, "problems": 0}) == ""
    assert "does not list the shapes" in trained_shapes_note({"listed": False})
    one = trained_shapes_note({"listed": True, "complete": True, "problems": 1})
    assert one.startswith("1 problem of the dataset has the shape") and one.count("\n") == 1
    gone = trained_shapes_note({"listed": True, "complete": False, "problems": 0, "excluded": 1})
    assert gone.startswith("1 problem of the dataset with the shape of a problem the model was trained on was left")
    assert "lists only part of its training shapes" in gone and "these problems may" in gone
    both = trained_shapes_note({"listed": True, "complete": False, "problems": 3})
    assert both.startswith("3 problems of the dataset have") and "the others may" in both
