"""The ``diode bench`` runner: measure every case of a suite in every mode, resumably, within a
time budget, saving the results after each measurement.

Resuming: the results file in the output directory is read first; a (case, mode) already
measured there is skipped (a failed one is tried again). The file must come from the same GPU,
torch, triton and model, or the run refuses to mix them.

Time budget: before each measurement the runner estimates its duration (the median of the same
mode's earlier measurements of the same kind of case, or a conservative default) and leaves it
for a later run when it would not end within the budget; the run stops once the budget is spent,
and a measurement still running when it is spent is stopped (recorded as failed and
``timed_out``: later runs try it again only with a budget larger than the time it was given).

Each measurement runs in a new process of its own (:mod:`torch_diode.bench.isolate`), with new
cache folders and a warm-up compile there: the cold compile a fresh process pays. A measurement
whose process crashes is recorded as failed, with the end of its output, and the run goes on.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch_diode._text import plural, recorded_count, recorded_number
from torch_diode.bench import measure
from torch_diode.bench.report import (
    RESULTS_FILE,
    check_results,
    load_results,
    measured,
    new_results,
    save_results,
)
from torch_diode.bench.suite import DIODE_TOP_K, MODES, SUITES, Case, exhaustive_names, suite

log = logging.getLogger(__name__)

#: Seconds a measurement is assumed to take before one of its mode and kind has been measured
#: (its new process's start-up and warm-up included).
DEFAULT_ESTIMATE_S: dict[str, dict[str, float]] = {
    "gemm": {"default": 30, "max-autotune": 50, "diode-top1": 40, "diode-top3": 45, "exhaustive": 450},
    "module": {"default": 60, "max-autotune": 150, "diode-top1": 80, "diode-top3": 100, "exhaustive": 3600},
}
#: How cold compiles are measured (``settings["cold_compile"]`` of a results file): a new process
#: per measurement. Results files without it were measured in one process (``fresh_cache()`` per
#: compile), where compiles that benchmark several choices took longer after the process's first;
#: the two are not mixed.
COLD_COMPILE = "new process per measurement"
#: Environment fields that must match for a results file to be extended (one the file has: files
#: from before ``ptxas_mismatch`` lack it). With and without the ptxas mismatch, stock
#: max-autotune's later compiles differ several-fold (:mod:`torch_diode.inductor.ptxas`).
SAME_ENVIRONMENT: tuple[str, ...] = ("hardware_key", "gpu", "torch", "triton", "ptxas_mismatch")


@dataclass(frozen=True, kw_only=True)
class BenchOptions:
    """Options of :func:`run_bench`.

    Attributes:
        out: output directory (``results.json``, ``results.md``, the plots).
        problems: ``quick`` or ``all`` (:func:`torch_diode.bench.suite.suite`).
        modes: the modes to measure (:data:`~torch_diode.bench.suite.MODES`).
        exhaustive_subset: the EXHAUSTIVE mode runs on the first N GEMM cases only.
        time_budget_s: stop measuring after about this many seconds (None: no limit).
        graph_iters: calls per CUDA graph; reps: timed replays (the median is kept).
        progress: show a tqdm progress bar when tqdm is installed.
    """

    out: Path
    problems: str = "quick"
    modes: tuple[str, ...] = MODES
    exhaustive_subset: int = 4
    time_budget_s: float | None = None
    graph_iters: int = 20
    reps: int = 20
    progress: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))
        if self.problems not in SUITES:
            raise ValueError(f"problems: must be one of {', '.join(SUITES)}, got {self.problems!r}")
        modes = tuple(self.modes)
        unknown = [m for m in modes if m not in MODES]
        if not modes or unknown:
            what = f"{plural(len(unknown), 'unknown mode')} {unknown}" if unknown else "none given"
            raise ValueError(f"modes: {what}; known: {', '.join(MODES)}")
        object.__setattr__(self, "modes", tuple(m for m in MODES if m in modes))
        for name in ("graph_iters", "reps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: must be a positive integer, got {v!r}")
        if isinstance(self.exhaustive_subset, bool) or not isinstance(self.exhaustive_subset, int):
            raise TypeError(f"exhaustive_subset: must be an integer, got {self.exhaustive_subset!r}")
        if self.exhaustive_subset < 0:
            raise ValueError(f"exhaustive_subset: must be >= 0, got {self.exhaustive_subset}")
        b = self.time_budget_s
        if b is not None and (not isinstance(b, (int, float)) or not math.isfinite(b) or b <= 0):
            raise ValueError(f"time_budget_s: must be a positive number of seconds, got {b!r}")

    @property
    def results_path(self) -> Path:
        return self.out / RESULTS_FILE


@dataclass
class BenchRun:
    """What one :func:`run_bench` call did."""

    results: dict[str, Any]
    measured: int = 0
    failed: int = 0
    skipped_done: int = 0
    left_for_later: list[str] = field(default_factory=list)  # "case | mode" not run for lack of time
    seconds: float = 0.0

    def line(self) -> str:
        later = f", {len(self.left_for_later)} left for a later run (time budget)" if self.left_for_later else ""
        return (
            f"{plural(self.measured, 'measurement')} in {self.seconds:.0f} s ({self.failed} failed), "
            f"{self.skipped_done} already in the results{later}"
        )


def planned(cases: list[Case], options: BenchOptions) -> list[tuple[Case, str]]:
    """Every (case, mode) the options ask for, in measuring order."""
    exhaustive = exhaustive_names(cases, options.exhaustive_subset)
    return [(c, m) for c in cases for m in options.modes if m != "exhaustive" or c.name in exhaustive]


def estimate_s(results: dict[str, Any], kind: str, mode: str) -> float:
    """Expected seconds of one measurement: the median of earlier ones (their whole process), else the default."""
    walls = [
        e["process_s"]
        for c in results["cases"].values()
        if c["kind"] == kind and (e := measured(c, mode)) is not None and isinstance(e.get("process_s"), (int, float))
    ]
    return statistics.median(walls) if walls else DEFAULT_ESTIMATE_S[kind][mode]


def needs_at_least_s(case_results: dict[str, Any], mode: str) -> float:
    """Seconds the (case, mode) needs at least: the time its last try was given before the time
    budget stopped it (0 when it was not stopped)."""
    entry = case_results.get("modes", {}).get(mode) or {}
    if not entry.get("timed_out"):
        return 0.0
    return max(float(entry.get("timeout_s", 0.0)), float(entry.get("process_s", 0.0)))


def open_results(
    path: Path, environment: dict[str, Any], model: dict[str, Any] | None, settings: dict[str, Any]
) -> dict[str, Any]:
    """The results to extend: the file at ``path`` when it exists (checked to come from the same
    GPU, software and model), else a new object.

    Raises:
        ValueError: the file is unreadable, or was measured elsewhere or with another model.
    """
    if not path.exists():
        return new_results(environment, model, settings)
    results = load_results(path)
    old = results["environment"]
    diff = [
        f"{k} {old[k]!r} there, {environment.get(k)!r} here"
        for k in SAME_ENVIRONMENT
        if k in old and old[k] != environment.get(k)
    ]
    old_sha = (results.get("model") or {}).get("sha256")
    new_sha = (model or {}).get("sha256")
    if old_sha and new_sha and old_sha != new_sha:
        diff.append(f"model sha256 {old_sha[:16]} there, {new_sha[:16]} here")
    method = results["settings"].get("cold_compile", "one process, fresh_cache() per compile")
    if method != settings.get("cold_compile", method):
        diff.append(f"cold compiles measured in {method!r} there, {settings['cold_compile']!r} here")
    if diff:
        raise ValueError(
            f"{path} was measured in another setting ({'; '.join(diff)}); pass another --out, or move that file away"
        )
    if results.get("model") is None and model is not None:
        results["model"] = model
    results["settings"].update(settings)
    return results


def run_bench(
    options: BenchOptions,
    *,
    environment: dict[str, Any],
    model_info: dict[str, Any] | None = None,
    on_measured: Callable[[str, str, dict[str, Any]], None] | None = None,
) -> BenchRun:
    """Measure the suite on this GPU (see the module docstring); results go to ``options.results_path``.

    Args:
        options: what to run and where to write.
        environment: :func:`torch_diode.bench.measure.environment` of this machine.
        model_info: name, path, sha256 and hardware of the model for the diode modes (each
            measurement's process loads it from ``path``), recorded in the results.
        on_measured: called with (case name, mode, entry) after each measurement.

    Raises:
        ValueError: a diode mode without a model, or a results file from another setting.
    """
    model_path = (model_info or {}).get("path")
    if model_path is None and any(m in DIODE_TOP_K for m in options.modes):
        raise ValueError("the diode modes need a model: pass one, or leave diode-top1/diode-top3 out of the modes")
    t0 = time.monotonic()
    settings = {
        "graph_iters": options.graph_iters,
        "reps": options.reps,
        "compile_mode": measure.AUTOTUNE_MODE,
        "exhaustive_subset": options.exhaustive_subset,
        "cold_compile": COLD_COMPILE,
    }
    results = open_results(options.results_path, environment, model_info, settings)
    cases = suite(options.problems)
    plan = planned(cases, options)
    run = BenchRun(results)
    todo = []
    for case, mode in plan:
        if measured(results["cases"].get(case.name, {}), mode) is not None:
            run.skipped_done += 1
        else:
            todo.append((case, mode))
    log.info(
        "diode bench: %s of the %s suite, modes %s: %s to do, %d already in %s",
        plural(len(cases), "case"),
        options.problems,
        ", ".join(options.modes),
        plural(len(todo), "measurement"),
        run.skipped_done,
        options.results_path,
    )
    if not todo:
        run.seconds = time.monotonic() - t0
        return run
    bar = _progress(len(todo), options.progress)
    try:
        for case, mode in todo:
            elapsed = time.monotonic() - t0
            label = f"{case.name} | {mode}"
            if options.time_budget_s is not None:
                if elapsed >= options.time_budget_s:
                    run.left_for_later.append(label)
                    continue
                need = needs_at_least_s(results["cases"].get(case.name, {}), mode)
                if need >= options.time_budget_s:
                    run.left_for_later.append(label)
                    log.warning(
                        "%s: left out, it was stopped after %.0f s before and --time-budget is %.0f s; give it more",
                        label,
                        need,
                        options.time_budget_s,
                    )
                    continue
                if elapsed + max(need, estimate_s(results, case.kind, mode)) > options.time_budget_s:
                    run.left_for_later.append(label)
                    log.info("left for a later run (time budget): %s", label)
                    continue
            left = None if options.time_budget_s is None else options.time_budget_s - elapsed
            entry = _measure_one(case, mode, model_path, options, timeout_s=left)
            slot = results["cases"].setdefault(case.name, {**case.to_dict(), "modes": {}})
            slot["modes"][mode] = entry
            check_results(results)
            save_results(results, options.results_path)
            if "error" in entry:
                run.failed += 1
                log.warning("%s: %s", label, entry["error"])
            else:
                run.measured += 1
                log.info(
                    "%s: compile %.2f s, kernel %.2f us%s",
                    label,
                    entry["compile_s"],
                    entry["kernel_us"],
                    _diode_note(entry),
                )
            if on_measured is not None:
                on_measured(case.name, mode, entry)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    run.seconds = time.monotonic() - t0
    return run


def _measure_one(
    case: Case, mode: str, model_path: str | None, options: BenchOptions, *, timeout_s: float | None
) -> dict[str, Any]:
    """Measure one case in one mode in a new process (:func:`measure_case` there)."""
    from torch_diode.bench.isolate import run_in_new_process

    kwargs = {
        "case": case.name,
        "problems": options.problems,
        "mode": mode,
        "model_path": model_path,
        "graph_iters": options.graph_iters,
        "reps": options.reps,
    }
    entry = run_in_new_process("torch_diode.bench.run:measure_case", kwargs, timeout_s=timeout_s)
    if timeout_s is not None and entry.get("timed_out"):
        entry["error"] += "; that was the rest of --time-budget: a later run tries it again if its budget is larger"
        entry["timeout_s"] = round(timeout_s, 2)  # what it was given: a lower bound of what it needs
    return entry


def measure_case(
    *, case: str, problems: str, mode: str, model_path: str | None, graph_iters: int, reps: int
) -> dict[str, Any]:
    """In a new process: measure ``case`` of the ``problems`` suite in ``mode`` (a results entry).
    What raises here (a failed compile or run) comes back as the entry's error, its traceback in
    the log (:mod:`torch_diode.bench.isolate`).

    Raises:
        ValueError: no such case in the suite.
    """
    found = next((c for c in suite(problems) if c.name == case), None)
    if found is None:
        raise ValueError(f"case {case!r}: not in the {problems} suite")
    return measure.measure_here(
        lambda: found.build("cuda"), mode, model_path=model_path, graph_iters=graph_iters, reps=reps
    )


def _diode_note(entry: dict[str, Any]) -> str:
    d = entry.get("diode")
    if not d:
        return ""
    note = f", torch-diode kept {recorded_number(d.get('candidates_kept'))} of {recorded_count(d.get('candidates_seen'), 'choice')}"
    if "hook_time_s" in d:
        note += (
            f" (hook {d['hook_time_s']:.3f} s: enumerating {d.get('widen_time_s', float('nan')):.3f} s, "
            f"predicting {d.get('predict_time_s', float('nan')):.3f} s)"
        )
    return note


def _progress(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        log.info("no progress bar: tqdm is not installed (pip install 'torch-diode-lib[progress]')")
        return None
    return tqdm(total=total, desc="diode bench", unit="measurement")
