# ruff: noqa: F811  (pytest fixtures imported from test_inductor_helpers are redefined as arguments)
"""``diode bench``: the suite definitions (on the meta device and CPU), the goal checks, report and
plots computed from a results file constructed here, resuming, and the CLI on a machine without a
GPU. The measurements themselves need a CUDA GPU (the ``gpu`` tests at the end)."""

from __future__ import annotations

import copy
import json
import math
import os
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
from test_inductor_helpers import diode_dataset, model_path  # noqa: F401  (fixtures)

import torch_diode
from torch_diode.bench.report import (
    FORMAT,
    RESULTS_FILE,
    check_results,
    goal_checks,
    load_results,
    markdown_report,
    new_results,
    save_results,
    summary_lines,
    write_report,
)
from torch_diode.bench.run import (
    COLD_COMPILE,
    BenchOptions,
    estimate_s,
    needs_at_least_s,
    open_results,
    planned,
    run_bench,
)
from torch_diode.bench.suite import (
    QUICK_MODULES,
    GemmCase,
    ModuleCase,
    exhaustive_names,
    module_gemms,
    quick_gemms,
    suite,
)
from torch_diode.shapes.extract import extract_gemms

ENV = {"PYTHONPATH": os.pathsep.join([str(Path(torch_diode.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# -- the suite ----------------------------------------------------------------------------------


class _Call:
    """An ``nn.Module`` calling a GEMM case's function, for ``extract_gemms``."""

    def __new__(cls, fn: Any) -> Any:
        import torch

        class Call(torch.nn.Module):
            def forward(self, *args: Any) -> Any:
                return fn(*args)

        return Call()


@pytest.fixture(scope="module")
def all_cases() -> list:
    return suite("all")


def test_suites_are_ordered_unique_and_nested(all_cases: list) -> None:
    quick = suite("quick")
    names = [c.name for c in all_cases]
    assert len(names) == len(set(names))
    assert names[: len(quick)] == [c.name for c in quick]  # quick is the first part of all
    gemms = [c for c in all_cases if isinstance(c, GemmCase)]
    modules = [c for c in all_cases if isinstance(c, ModuleCase)]
    assert len(quick_gemms()) == 12 and len(gemms) >= 60 and len(modules) == 5
    tags = {t for c in gemms for t in c.tags}
    assert {"llm", "decode", "prefill", "encoder", "vision", "cnn", "awkward"} <= tags
    assert {c.problem.op for c in gemms} == {"mm", "addmm", "bmm", "baddbmm"}
    assert {c.problem.dtype for c in gemms} == {"float16", "bfloat16", "float32"}
    # decode M = batch = 1..64 over the 2048-token cache, and prefill token counts
    decode_m = {c.problem.m for c in gemms if "decode" in c.tags and c.problem.op == "mm"}
    assert {1, 16, 64} <= decode_m and any(c.problem.m == 2048 for c in gemms if "prefill" in c.tags)
    assert {m.arch for m in modules} == {"decoder", "vit"} and any(m.past for m in modules)
    with pytest.raises(ValueError, match="unknown suite 'most'"):
        suite("most")


def test_every_gemm_case_realises_its_problem(all_cases: list) -> None:
    """Each case's function on its inputs dispatches exactly its problem: what Inductor will lower."""
    for case in all_cases:
        if not isinstance(case, GemmCase):
            continue
        fn, args = case.build("meta")
        calls = extract_gemms(_Call(fn), *args)
        assert [c.problem for c in calls] == [case.problem], case.name
        assert case.via_linear == (case.problem.op in ("mm", "addmm") and "awkward" not in case.tags), case.name


def test_modules_build_on_cpu_and_their_gemms_extract(all_cases: list) -> None:
    import torch

    for case in QUICK_MODULES:  # real weights on the CPU (the full-size 8B block is traced on meta only)
        module, args = case.build("cpu")
        params = list(module.parameters())
        assert params and all(p.device.type == "cpu" and p.dtype == getattr(torch, case.dtype) for p in params)
        assert all(a.device.type == "cpu" and a.shape[0] == case.batch for a in args)
    for case in [c for c in all_cases if isinstance(c, ModuleCase)]:
        problems = module_gemms(case)
        if case.arch == "decoder":
            m = case.batch * case.tokens
            # q, k, v, o, gate, up, down: every projection of the block, as Linear layers lower them
            assert len(problems) == 7 and {p.op for p in problems} == {"mm"}, case.name
        else:
            m = case.batch * case.tokens
            assert len(problems) == 4 and {p.op for p in problems} == {"addmm"}, case.name  # qkv, proj, fc1, fc2
        assert {p.m for p in problems} == {m} and {p.dtype for p in problems} == {case.dtype}
        assert {p.layout_b for p in problems} == {"col"}  # x @ W.T


def test_exhaustive_runs_on_the_first_gemms_only(all_cases: list, tmp_path: Path) -> None:
    gemms = [c.name for c in all_cases if isinstance(c, GemmCase)]
    assert exhaustive_names(all_cases, 3) == set(gemms[:3])
    assert exhaustive_names(all_cases, 0) == set()
    opts = BenchOptions(out=tmp_path, problems="quick", modes=("exhaustive", "default"), exhaustive_subset=2)
    assert opts.modes == ("default", "exhaustive")  # measuring order, the slow search last
    plan = planned(suite("quick"), opts)
    assert [(c.name, m) for c, m in plan if m == "exhaustive"] == [(n, "exhaustive") for n in gemms[:2]]
    assert sum(m == "default" for _, m in plan) == len(suite("quick"))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"problems": "some"}, "problems"),
        ({"modes": ("fast",)}, "unknown mode"),
        ({"modes": ()}, "none given"),
        ({"graph_iters": 0}, "graph_iters"),
        ({"reps": 1.5}, "reps"),
        ({"exhaustive_subset": -1}, "exhaustive_subset"),
        ({"time_budget_s": 0}, "time_budget_s"),
        ({"time_budget_s": math.inf}, "time_budget_s"),
    ],
    ids=lambda v: v if isinstance(v, str) else next(iter(v)),
)
def test_options_are_validated(kwargs: dict, match: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=match):
        BenchOptions(out=tmp_path, **kwargs)


# -- results, goal checks and report ------------------------------------------------------------

ENVIRONMENT = {
    "gpu": "NVIDIA H100 80GB HBM3",
    "hardware_key": "NVIDIA-H100",
    "driver": "550.54.15",
    "torch": "2.11.0",
    "cuda": "12.8",
    "triton": "3.6.0",
    "torch_diode": "0.1.1",
    "date": "2026-01-01T00:00:00Z",
}
SETTINGS = {
    "graph_iters": 20,
    "reps": 20,
    "compile_mode": "max-autotune-no-cudagraphs",
    "exhaustive_subset": 2,
    "cold_compile": COLD_COMPILE,
}
MODEL = {"name": "NVIDIA-H100-matmul", "path": "/m.safetensors", "sha256": "ab" * 32, "hardware": "NVIDIA-H100"}


def _m(compile_s: float, kernel_us: float) -> dict[str, Any]:
    return {
        "compile_s": compile_s,
        "kernel_us": kernel_us,
        "kernel_us_reps": [kernel_us] * 3,
        "wall_s": compile_s + 1,
        "process_s": compile_s + 20,
    }


def make_results() -> dict[str, Any]:
    """Three GEMMs (two with EXHAUSTIVE, one failed top-3) and a module, with chosen numbers."""
    r = new_results(ENVIRONMENT, MODEL, SETTINGS)
    a, b, c = quick_gemms()[:3]
    mod = QUICK_MODULES[0]
    r["cases"][a.name] = {
        **a.to_dict(),
        "modes": {
            "default": _m(0.9, 10.2),
            "max-autotune": _m(8.0, 10.0),
            "exhaustive": _m(400.0, 9.8),
            "diode-top1": _m(1.0, 10.5),
            "diode-top3": _m(1.4, 9.9),
        },
    }
    r["cases"][b.name] = {
        **b.to_dict(),
        "modes": {
            "max-autotune": _m(10.0, 20.0),
            "exhaustive": _m(600.0, 19.0),
            "diode-top1": _m(1.2, 19.5),
            "diode-top3": _m(2.0, 19.2),
        },
    }
    r["cases"][c.name] = {
        **c.to_dict(),
        "modes": {
            "max-autotune": _m(6.0, 5.0),
            "diode-top1": _m(0.8, 5.05),
            "diode-top3": {"error": "OutOfMemoryError: CUDA out of memory"},
        },
    }
    r["cases"][mod.name] = {
        **mod.to_dict(),
        "modes": {
            "default": _m(20.0, 500.0),
            "max-autotune": _m(100.0, 480.0),
            "diode-top1": _m(12.0, 490.0),
            "diode-top3": _m(15.0, 470.0),
        },
    }
    return r


def _geo(xs: list[float]) -> float:
    return math.prod(xs) ** (1 / len(xs))


def test_goal_checks_from_results() -> None:
    results = make_results()
    names = list(results["cases"])
    checks = goal_checks(results)
    t1, t3 = checks["diode"]["diode-top1"], checks["diode"]["diode-top3"]
    assert t1["problems"] == 3 and t3["problems"] == 2  # top-3 failed on the third GEMM
    assert t1["compile_median_s"] == {"value": 1.0, "goal": 1.5, "ok": True}
    assert t3["compile_median_s"]["value"] == pytest.approx(1.7) and t3["compile_median_s"]["ok"] is False
    # ratio of medians over the GEMMs measured in both modes
    assert t1["compile_vs_max-autotune"]["value"] == pytest.approx(1.0 / 8.0) and t1["compile_vs_max-autotune"]["ok"]
    assert t3["compile_vs_max-autotune"]["value"] == pytest.approx(1.7 / 9.0)
    assert t1["compile_vs_exhaustive"]["problems"] == 2
    assert t1["compile_vs_exhaustive"]["value"] == pytest.approx(1.1 / 500.0) and t1["compile_vs_exhaustive"]["ok"]
    k1 = t1["kernel_vs_exhaustive"]
    assert k1["value"] == pytest.approx(_geo([10.5 / 9.8, 19.5 / 19.0])) and k1["ok"] is False
    assert k1["max"] == pytest.approx(10.5 / 9.8) and k1["problems"] == 2
    s1 = t1["kernel_vs_max-autotune"]
    assert s1["value"] == pytest.approx(_geo([1.05, 0.975, 1.01])) and s1["ok"] is False and s1["problems"] == 3
    s3 = t3["kernel_vs_max-autotune"]
    assert s3["value"] == pytest.approx(_geo([0.99, 0.96])) and s3["ok"] is True
    assert [x["case"] for x in t1["losses_over_3pct"]] == [names[0]]  # 5% slower; the 1% one is not listed
    assert t1["losses_over_3pct"][0]["ratio"] == pytest.approx(1.05) and t3["losses_over_3pct"] == []
    (mod,) = checks["modules"]
    assert mod["case"] == names[3] and mod["compile_s"]["diode-top3"] == 15.0 and mod["step_us"]["default"] == 500.0
    assert mod["ratios"]["diode-top3 compile / max-autotune"] == pytest.approx(0.15)
    assert mod["ratios"]["diode-top3 step / default"] == pytest.approx(0.94)


def test_gemms_the_handler_never_saw_are_left_out_and_losses_say_why() -> None:
    """An M = 1 matmul is lowered as a reduction: the handler's stats show no GEMM call, so the
    case says nothing about torch-diode and stays out of the goals (listed instead); a real loss
    carries the handler's own account (candidates kept, fallbacks)."""
    results = make_results()
    base = goal_checks(results)["diode"]["diode-top1"]
    decode = quick_gemms()[3]
    stats = {"gemm_calls": 0, "candidates_seen": 0, "candidates_kept": 0, "fallbacks_total": 0}
    results["cases"][decode.name] = {
        **decode.to_dict(),
        "modes": {"max-autotune": _m(2.0, 9.8), "diode-top1": {**_m(3.5, 15.7), "diode": stats}},
    }
    first = next(iter(results["cases"]))
    results["cases"][first]["modes"]["diode-top1"]["diode"] = {
        "gemm_calls": 1,
        "candidates_seen": 1401,
        "candidates_kept": 3,
        "low_confidence": 1,
        "fallbacks_total": 0,
    }
    t1 = goal_checks(results)["diode"]["diode-top1"]
    assert t1["not_involved"] == [decode.name] and t1["problems"] == base["problems"]
    assert t1["kernel_vs_max-autotune"] == base["kernel_vs_max-autotune"]
    assert [x["case"] for x in t1["losses_over_3pct"]] == [first]
    assert t1["losses_over_3pct"][0]["why"] == "kept 3 of 1,401 candidates to benchmark; model unsure on 1 call"
    text = "\n".join(summary_lines(results))
    assert f"the handler saw no GEMM (Inductor lowered it otherwise): {decode.name}" in text
    assert f"`{decode.name}`" in markdown_report(results).split("GEMMs left out of the goals")[1]


def test_goal_checks_without_measurements_are_not_applicable() -> None:
    results = new_results(ENVIRONMENT, None, SETTINGS)
    checks = goal_checks(results)
    for block in checks["diode"].values():
        assert block["problems"] == 0 and block["compile_median_s"]["ok"] is None
        assert block["kernel_vs_exhaustive"]["value"] is None and block["losses_over_3pct"] == []
    assert all("n/a" in " ".join(cells) for _, cells in [r for r in _rows(checks)][:-1])


def _rows(checks: dict) -> list:
    from torch_diode.bench.report import goal_rows

    return goal_rows(checks)


def test_summary_and_markdown_report() -> None:
    results = make_results()
    names = list(results["cases"])
    lines = summary_lines(results)
    assert lines[0] == "goals on NVIDIA-H100 (torch-diode top-1 | torch-diode top-3):"
    compile_line = next(ln for ln in lines if "per-GEMM cold compile, median <= 1.5 s" in ln)
    assert "1.00 s PASS (3 GEMMs) | 1.70 s FAIL (2 GEMMs)" in compile_line
    assert any("kernel time within 2% of EXHAUSTIVE's winner (geomean)" in ln and "FAIL" in ln for ln in lines)
    assert any(ln.startswith(f"  torch-diode top-1 loses to stock: {names[0]} 1.050x") for ln in lines)
    assert any(ln.startswith(f"  {names[3]}: compile default 20.0 s") for ln in lines)
    md = markdown_report(results)
    assert md.startswith("# torch-diode benchmark: NVIDIA-H100\n")
    assert "driver 550.54.15, torch 2.11.0 (CUDA 12.8), triton 3.6.0" in md
    assert "| goal | torch-diode top-1 | torch-diode top-3 |" in md
    assert f"- torch-diode top-1: `{names[0]}`" in md and "1.050x (10.5 us vs 10.0 us)" in md
    assert f"| `{names[2]}` | " in md and "| error |" in md  # the failed top-3 shows in the tables
    assert f"- `{names[2]}` diode-top3: OutOfMemoryError: CUDA out of memory" in md
    assert "## Modules: cold compile time (s) and step time (us)" in md and f"| {names[3]} | 20.0 |" in md
    for line in md.splitlines():  # every table row has as many cells as its header
        if line.startswith("|"):
            assert line.endswith("|")
    assert "ptxas" not in md  # measured without the mismatch (or before it was recorded)
    results["environment"]["ptxas_mismatch"] = True
    md = markdown_report(results)
    assert "\nOn this install Inductor's compile workers and the main process key Triton's cache" in md
    assert "TRITON_PTXAS_PATH set before the first compile (or torch_diode.inductor.ptxas.pin_ptxas()" in md


def test_write_report_writes_markdown_and_plots(tmp_path: Path) -> None:
    results = make_results()
    path = save_results(results, tmp_path / RESULTS_FILE)
    assert load_results(path) == results
    written = write_report(load_results(path), tmp_path)
    assert [p.name for p in written] == ["results.md", "compile_time.png", "kernel_time.png"]
    assert all(p.read_bytes().startswith(PNG_MAGIC) for p in written[1:])
    assert (tmp_path / "results.md").read_text() == markdown_report(results)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda r: r.update(format="other"), "not a torch-diode bench results file"),
        (lambda r: r.update(version=2), "results version 2 is not supported"),
        (lambda r: r["cases"][next(iter(r["cases"]))]["modes"].update(fast=_m(1, 1)), "unknown mode 'fast'"),
        (lambda r: r["cases"][next(iter(r["cases"]))]["modes"].update(default={"compile_s": 1}), "kernel_us"),
        (lambda r: r["cases"][next(iter(r["cases"]))].update(kind="layer"), 'no "kind"'),
        (lambda r: r.update(settings=[]), '"settings" must be an object'),
    ],
    ids=["format", "version", "mode", "missing-kernel", "kind", "settings"],
)
def test_malformed_results_are_refused(change: Any, match: str, tmp_path: Path) -> None:
    results = make_results()
    change(results)
    path = tmp_path / RESULTS_FILE
    path.write_text(json.dumps(results))
    with pytest.raises(ValueError, match=match) as e:
        load_results(path)
    assert str(path) in str(e.value)


def test_resuming_needs_the_same_setting_and_estimates_from_earlier_runs(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_FILE
    fresh = open_results(path, ENVIRONMENT, MODEL, SETTINGS)
    assert fresh["format"] == FORMAT and fresh["cases"] == {}
    save_results(make_results(), path)
    again = open_results(path, ENVIRONMENT, MODEL, {**SETTINGS, "reps": 30})
    assert len(again["cases"]) == 4 and again["settings"]["reps"] == 30
    other = copy.deepcopy(ENVIRONMENT) | {"torch": "2.12.0"}
    with pytest.raises(ValueError, match=re.escape("torch '2.11.0' there, '2.12.0' here")):
        open_results(path, other, MODEL, SETTINGS)
    assert "ptxas_mismatch" not in ENVIRONMENT  # a file from before the field: not compared
    assert len(open_results(path, ENVIRONMENT | {"ptxas_mismatch": True}, MODEL, SETTINGS)["cases"]) == 4
    with_field = make_results()
    with_field["environment"]["ptxas_mismatch"] = False
    save_results(with_field, path)
    with pytest.raises(ValueError, match=re.escape("ptxas_mismatch False there, True here")):
        open_results(path, ENVIRONMENT | {"ptxas_mismatch": True}, MODEL, SETTINGS)
    save_results(make_results(), path)
    with pytest.raises(ValueError, match="model sha256 abababababababab there, cdcdcdcdcdcdcdcd here"):
        open_results(path, ENVIRONMENT, MODEL | {"sha256": "cd" * 32}, SETTINGS)
    one_process = make_results()  # measured before compiles had a process each
    del one_process["settings"]["cold_compile"]
    save_results(one_process, path)
    with pytest.raises(ValueError, match=re.escape("cold compiles measured in 'one process, fresh_cache() per")):
        open_results(path, ENVIRONMENT, MODEL, SETTINGS)
    results = make_results()
    walls = [28.0, 30.0, 26.0]  # max-autotune process_s of the three GEMMs
    assert estimate_s(results, "gemm", "max-autotune") == statistics.median(walls)
    assert estimate_s(results, "module", "exhaustive") == 3600  # nothing measured yet: the default


def test_a_measurement_the_budget_stopped_is_left_out_until_the_budget_can_hold_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A (case, mode) killed at the end of a run's time budget is not tried again with a budget no
    larger than the time it was given (it would be killed again, every run, holding up the rest),
    although its estimate (30 s) would fit."""
    first, *others = suite("quick")
    results = new_results(ENVIRONMENT, None, SETTINGS)
    stopped = {"error": "did not finish within 100 s (killed); ...", "timed_out": True, "timeout_s": 100.0}
    stopped["process_s"] = 99.9  # a little under what it was given: the timeout is the bound
    results["cases"][first.name] = {**first.to_dict(), "modes": {"default": stopped}}
    for case in others:  # measured already: only the stopped one is left to do
        results["cases"][case.name] = {**case.to_dict(), "modes": {"default": _m(1.0, 1.0)}}
    save_results(results, tmp_path / RESULTS_FILE)
    assert needs_at_least_s(results["cases"][first.name], "default") == 100.0
    assert needs_at_least_s(results["cases"][first.name], "max-autotune") == 0.0
    assert needs_at_least_s(results["cases"][others[0].name], "default") == 0.0
    options = BenchOptions(out=tmp_path, modes=("default",), time_budget_s=100, progress=False)
    run = run_bench(options, environment=ENVIRONMENT)
    assert run.measured == run.failed == 0 and run.skipped_done == len(others)
    assert run.left_for_later == [f"{first.name} | default"]
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == [
        f"{first.name} | default: left out, it was stopped after 100 s before and --time-budget is 100 s; give it more"
    ]


# -- the CLI without a GPU ----------------------------------------------------------------------


def test_cli_refuses_to_measure_without_a_gpu(run_diode, tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    r = run_diode("bench", "--out", str(tmp_path), env=ENV)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith("diode bench: error: needs a CUDA GPU (torch.cuda.is_available() is False)")
    assert not (tmp_path / RESULTS_FILE).exists()


@pytest.mark.parametrize("key", ["NVIDIA-H100", "NVIDIA-H200"])
def test_committed_reports_are_what_their_results_give(key: str) -> None:
    """benchmarks/results/<GPU>/results.md is markdown_report of the results.json beside it (a report
    left behind a change of the report's wording fails here: regenerate it with `diode bench
    --report-only --out benchmarks/results/<GPU>`)."""
    folder = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / key
    results = load_results(folder / RESULTS_FILE)
    assert markdown_report(results) == (folder / "results.md").read_text()


def test_cli_report_only_and_list(run_diode, tmp_path: Path) -> None:
    save_results(make_results(), tmp_path / RESULTS_FILE)
    r = run_diode("bench", "--report-only", "--out", str(tmp_path), env=ENV, check=True)
    out = r.stdout.splitlines()
    assert out[0] == "goals on NVIDIA-H100 (torch-diode top-1 | torch-diode top-3):"
    assert out[-3:] == [f"wrote {tmp_path / name}" for name in ("results.md", "compile_time.png", "kernel_time.png")]
    r = run_diode("bench", "--report-only", "--out", str(tmp_path / "none"), env=ENV)
    assert r.returncode == 2 and "no results file" in r.stderr
    r = run_diode("bench", "--list", "--problems", "quick", "--modes", "default,exhaustive", env=ENV, check=True)
    lines = r.stdout.splitlines()
    n = len(suite("quick"))
    assert lines[0] == f"quick suite: {n} cases, {n + 4} measurements"  # EXHAUSTIVE on the default 4 GEMMs
    assert len(lines) == n + 1 and lines[1].split()[0] == "gemm" and lines[1].endswith("default,exhaustive")
    r = run_diode("bench", "--list", "--modes", "fastest", env=ENV)
    assert r.returncode == 2 and "1 unknown mode ['fastest']" in r.stderr


def test_environment_records_the_ptxas_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch_diode.bench.measure import environment
    from torch_diode.inductor.ptxas import torch_bundled_ptxas

    monkeypatch.setenv("TRITON_PTXAS_PATH", "/opt/x/ptxas")
    env = environment()
    assert env["triton_ptxas_path"] == "/opt/x/ptxas" and env["ptxas_mismatch"] is False  # set: no mismatch
    monkeypatch.delenv("TRITON_PTXAS_PATH")
    env = environment()
    assert env["triton_ptxas_path"] == ""
    if torch_bundled_ptxas() is None:  # the CPU wheel: nothing to differ from
        assert env["ptxas_mismatch"] is False


def test_wait_for_compile_workers_returns_once_the_pool_is_ready() -> None:
    """Real Inductor compile workers (CPU): the wait returns with the pool ready, as a later compile
    of the process finds it; with one compile thread there is no pool and it returns at once."""
    import time

    from torch._inductor import config as inductor_config
    from torch._inductor.async_compile import AsyncCompile, shutdown_compile_workers

    from torch_diode.bench.measure import wait_for_compile_workers

    shutdown_compile_workers()
    try:
        with inductor_config.patch(compile_threads=2):
            got = wait_for_compile_workers(240)
            assert got["compile_pool_ready"] is True and got["compile_pool_waited_s"] < 240
            assert AsyncCompile.use_process_pool()  # ready now, not merely asked for
        with inductor_config.patch(compile_threads=1):
            t0 = time.monotonic()
            assert wait_for_compile_workers(60) == {"compile_pool_ready": False, "compile_pool_waited_s": 0.0}
            assert time.monotonic() - t0 < 5
    finally:
        shutdown_compile_workers()


# -- on a GPU -----------------------------------------------------------------------------------


@pytest.mark.gpu
def test_measure_a_gemm_in_default_and_max_autotune_mode() -> None:
    from torch_diode.bench import measure

    case = quick_gemms()[0]
    fn, args = case.build("cuda")
    measure.warm_up(["default", "max-autotune"])
    for mode in ("default", "max-autotune"):
        m = measure.measure(fn, args, mode, graph_iters=5, reps=5)
        assert m.compile_s > 0 and m.kernel_us > 0 and len(m.kernel_us_reps) == 5 and m.diode is None


@pytest.mark.gpu
def test_bench_runs_and_resumes(run_diode, tmp_path: Path) -> None:
    args = ("bench", "--out", str(tmp_path), "--modes", "default", "--time-budget", "40", "--no-progress")
    run_diode(*args, env=ENV, check=True, timeout=600)
    results = load_results(tmp_path / RESULTS_FILE)
    check_results(results)
    assert results["environment"]["gpu"] and results["environment"]["torch"]
    done = [n for n, c in results["cases"].items() if "default" in c["modes"]]
    assert done
    r = run_diode(*args, env=ENV, check=True, timeout=600)
    assert f"{len(done)} already in the results" in r.stdout


@pytest.mark.parametrize("mode", ["default", "max-autotune", "exhaustive"])
def test_stock_modes_measure_without_a_registered_model(mode: str, model_path: Path) -> None:
    """A model registered in the process (the meta-wheel registers one at import, `diode bench`
    included) is taken out for the stock modes and installed again after them."""
    from torch_diode.bench.measure import mode_context
    from torch_diode.inductor import install_diode_choices, installed_handler

    with install_diode_choices(model=str(model_path)) as handle:
        with mode_context(mode) as inside:
            assert inside is None and installed_handler() is None
        assert installed_handler() is handle.handler
