"""The results file of ``diode bench`` and everything computed from it: the issue's goal checks, a
markdown report and PNG plots. Pure functions of the results (no GPU), so they run anywhere.

Results file (``results.json``, ``format: "torch-diode-bench"``, ``version: 1``)::

    {"format": "torch-diode-bench", "version": 1,
     "environment": {"gpu": "NVIDIA H100 80GB HBM3", "hardware_key": "NVIDIA-H100", "driver": "...",
                     "torch": "2.11.0", "cuda": "12.8", "triton": "3.6.0", "torch_diode": "...", ...},
     "model": {"name": "NVIDIA-H100-matmul", "path": "...", "sha256": "...", "hardware": "NVIDIA-H100"},
     "settings": {"graph_iters": 20, "reps": 20, "compile_mode": "max-autotune-no-cudagraphs"},
     "cases": {"mm bfloat16 16x4096x4096 row/col": {
         "kind": "gemm", "source": "...", "tags": [...], "problem": {...}, "via_linear": true,
         "modes": {"max-autotune": {"compile_s": 8.1, "kernel_us": 20.3, "kernel_us_reps": [...],
                                     "wall_s": 9.0},
                   "diode-top1": {..., "diode": {"candidates_kept": 2, ...}},
                   "exhaustive": {"error": "OutOfMemoryError: ..."}}}}}

Goals (issue 8), per torch-diode mode (top-1 and top-3), over the GEMM cases:

* cold compile median <= 1.5 s; <= 1/4 of stock max-autotune's median and <= 1/200 of
  EXHAUSTIVE's median, both over the cases measured in both modes (ratio of the medians);
* kernel time geomean within 2% of EXHAUSTIVE's winner (ratio <= 1.02) and no worse than stock
  max-autotune (ratio <= 1.00), over the cases measured in both modes;
* every case where torch-diode's kernel is more than 3% slower than stock max-autotune's.

Whole modules are reported, not checked: cold compile with torch-diode against stock
max-autotune, and step time against stock max-autotune and the default mode.
"""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torch_diode._text import NO_MATPLOTLIB, plural, recorded_count, recorded_number
from torch_diode.bench.suite import DIODE_TOP_K, MODES

log = logging.getLogger(__name__)

FORMAT = "torch-diode-bench"
VERSION = 1
RESULTS_FILE = "results.json"
REPORT_FILE = "results.md"
COMPILE_PLOT = "compile_time.png"
KERNEL_PLOT = "kernel_time.png"

COMPILE_GOAL_S = 1.5
COMPILE_VS_STOCK_GOAL = 1 / 4
COMPILE_VS_EXHAUSTIVE_GOAL = 1 / 200
KERNEL_VS_EXHAUSTIVE_GOAL = 1.02
KERNEL_VS_STOCK_GOAL = 1.0
LOSS_THRESHOLD = 1.03

_LABEL = {"diode-top1": "torch-diode top-1", "diode-top3": "torch-diode top-3"}
_COLOR = {
    "default": "tab:blue",
    "max-autotune": "tab:orange",
    "diode-top1": "tab:green",
    "diode-top3": "tab:red",
    "exhaustive": "tab:purple",
}


# -- the results file ---------------------------------------------------------------------------


def new_results(
    environment: Mapping[str, Any], model: Mapping[str, Any] | None, settings: Mapping[str, Any]
) -> dict[str, Any]:
    """An empty results object."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "environment": dict(environment),
        "model": dict(model) if model is not None else None,
        "settings": dict(settings),
        "cases": {},
    }


def check_results(obj: Any, where: str = "results") -> dict[str, Any]:
    """Validate the structure of a results object (see the module docstring).

    Raises:
        ValueError: the object is not a torch-diode bench results file of this version; the
            message names ``where`` and what is wrong.
    """
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise ValueError(f'{where}: not a torch-diode bench results file (no "format": "{FORMAT}")')
    if obj.get("version") != VERSION:
        raise ValueError(
            f"{where}: results version {obj.get('version')!r} is not supported (this torch-diode reads {VERSION})"
        )
    cases = obj.get("cases")
    if not isinstance(cases, dict):
        raise ValueError(f'{where}: "cases" must be an object')
    for name, case in cases.items():
        if not isinstance(case, dict) or case.get("kind") not in ("gemm", "module"):
            raise ValueError(f'{where}: case {name!r} has no "kind" of gemm or module')
        modes = case.get("modes")
        if not isinstance(modes, dict):
            raise ValueError(f'{where}: case {name!r} has no "modes" object')
        for mode, entry in modes.items():
            if mode not in MODES:
                raise ValueError(f"{where}: case {name!r} has unknown mode {mode!r}; known: {', '.join(MODES)}")
            good = isinstance(entry, dict) and (
                isinstance(entry.get("error"), str)
                or all(isinstance(entry.get(k), (int, float)) and entry[k] > 0 for k in ("compile_s", "kernel_us"))
            )
            if not good:
                raise ValueError(
                    f"{where}: case {name!r} mode {mode}: needs positive compile_s and kernel_us, or an error"
                )
    for key in ("environment", "settings"):
        if not isinstance(obj.get(key), dict):
            raise ValueError(f'{where}: "{key}" must be an object')
    return obj


def load_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a results file.

    Raises:
        ValueError: unreadable, not JSON or not a results file (the message names the file).
    """
    p = Path(path)
    try:
        obj = json.loads(p.read_text())
    except OSError as e:
        raise ValueError(f"{p}: cannot read the benchmark results: {e.strerror or e}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{p}: not JSON ({e})") from None
    return check_results(obj, str(p))


def save_results(results: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write the results atomically (a reader never sees half a file, an interrupted run loses nothing)."""
    from torch_diode._files import atomic_write

    return atomic_write(path, json.dumps(results, indent=1) + "\n")


def measured(case: Mapping[str, Any], mode: str) -> Mapping[str, Any] | None:
    """The measurement of ``case`` in ``mode``, or None (not measured, or failed)."""
    entry = case.get("modes", {}).get(mode)
    return entry if isinstance(entry, Mapping) and "error" not in entry else None


# -- goal checks --------------------------------------------------------------------------------


def _geomean(values: Sequence[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _ok(value: float | None, goal: float) -> bool | None:
    return None if value is None else value <= goal * (1 + 1e-9)


def _gemms(results: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {n: c for n, c in results["cases"].items() if c["kind"] == "gemm"}


def _involved(m: Mapping[str, Any]) -> bool:
    """Whether torch-diode's handler saw a GEMM of this measurement (its stats say so; results
    without stats count as involved). Inductor lowers some matmuls without a GEMM template (an
    M = 1 matmul becomes a reduction), and then the handler is never called."""
    stats = m.get("diode")
    return not isinstance(stats, Mapping) or int(stats.get("gemm_calls", 1)) > 0


def _why(m: Mapping[str, Any]) -> str:
    """What the handler did for a measurement, from its stats: the facts behind a loss."""
    st = m.get("diode")
    if not isinstance(st, Mapping):
        return "no handler statistics recorded"
    parts = [
        f"kept {recorded_number(st.get('candidates_kept', '?'))} of {recorded_count(st.get('candidates_seen', '?'), 'candidate')} "
        "to benchmark"
    ]
    if st.get("lut_hits"):
        parts.append(plural(st["lut_hits"], "lookup-table hit"))
    if st.get("low_confidence"):
        parts.append(f"model unsure on {plural(st['low_confidence'], 'call')}")
    if st.get("fallbacks_total"):
        reasons = ", ".join(f"{k} x{v}" for k, v in sorted(dict(st.get("fallbacks") or {}).items()))
        parts.append(f"{plural(st['fallbacks_total'], 'fallback')} to stock ({reasons})")
    return "; ".join(parts)


def goal_checks(results: Mapping[str, Any]) -> dict[str, Any]:
    """The issue's goal checks (module docstring) for each torch-diode mode, plus the modules.

    Returns:
        ``{"diode": {mode: {...}}, "modules": [...]}``; a check with no case measured in both
        modes has ``value``/``ok`` None.
    """
    gemms = _gemms(check_results(results))
    out: dict[str, Any] = {"diode": {}, "modules": []}
    for dm in DIODE_TOP_K:
        done = {n: m for n, c in gemms.items() if (m := measured(c, dm)) is not None}
        # GEMMs the handler never saw say nothing about torch-diode: listed, kept out of the goals
        mine = {n: m for n, m in done.items() if _involved(m)}
        med = _median([m["compile_s"] for m in mine.values()])
        block: dict[str, Any] = {
            "problems": len(mine),
            "not_involved": sorted(set(done) - set(mine)),
            "compile_median_s": {"value": med, "goal": COMPILE_GOAL_S, "ok": _ok(med, COMPILE_GOAL_S)},
        }
        for ref, goal in (("max-autotune", COMPILE_VS_STOCK_GOAL), ("exhaustive", COMPILE_VS_EXHAUSTIVE_GOAL)):
            pairs = [(m["compile_s"], r["compile_s"]) for n, m in mine.items() if (r := measured(gemms[n], ref))]
            d_med, r_med = _median([p[0] for p in pairs]), _median([p[1] for p in pairs])
            ratio = d_med / r_med if d_med is not None and r_med else None
            block[f"compile_vs_{ref}"] = {
                "problems": len(pairs),
                "diode_median_s": d_med,
                "ref_median_s": r_med,
                "value": ratio,
                "goal": goal,
                "ok": _ok(ratio, goal),
            }
        for ref, goal in (("exhaustive", KERNEL_VS_EXHAUSTIVE_GOAL), ("max-autotune", KERNEL_VS_STOCK_GOAL)):
            ratios = {n: m["kernel_us"] / r["kernel_us"] for n, m in mine.items() if (r := measured(gemms[n], ref))}
            geo = _geomean(list(ratios.values()))
            block[f"kernel_vs_{ref}"] = {
                "problems": len(ratios),
                "value": geo,
                "max": max(ratios.values()) if ratios else None,
                "goal": goal,
                "ok": _ok(geo, goal),
            }
        losses = []
        for n, m in mine.items():
            stock = measured(gemms[n], "max-autotune")
            if stock is not None and m["kernel_us"] > LOSS_THRESHOLD * stock["kernel_us"]:
                losses.append(
                    {
                        "case": n,
                        "ratio": m["kernel_us"] / stock["kernel_us"],
                        "diode_us": m["kernel_us"],
                        "stock_us": stock["kernel_us"],
                        "source": gemms[n].get("source", ""),
                        "why": _why(m),
                    }
                )
        block["losses_over_3pct"] = sorted(losses, key=lambda x: -x["ratio"])
        out["diode"][dm] = block
    for name, case in results["cases"].items():
        if case["kind"] != "module":
            continue
        compile_s = {mode: m["compile_s"] for mode in MODES if (m := measured(case, mode))}
        step_us = {mode: m["kernel_us"] for mode in MODES if (m := measured(case, mode))}
        mod_ratios: dict[str, float] = {}
        for dm in DIODE_TOP_K:
            for what, values, ref in (
                ("compile", compile_s, "max-autotune"),
                ("step", step_us, "max-autotune"),
                ("step", step_us, "default"),
            ):
                if dm in values and ref in values:
                    mod_ratios[f"{dm} {what} / {ref}"] = values[dm] / values[ref]
        out["modules"].append({"case": name, "compile_s": compile_s, "step_us": step_us, "ratios": mod_ratios})
    return out


def _fmt(v: float | None, spec: str = ".3f", suffix: str = "") -> str:
    return "n/a" if v is None else f"{v:{spec}}{suffix}"


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def goal_rows(checks: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """The goal checks as rows ``(goal, [cell per torch-diode mode])``, for text and markdown tables."""
    blocks = [checks["diode"][dm] for dm in DIODE_TOP_K]

    def cells(key: str, value: Any, detail: Any) -> list[str]:
        return [f"{value(b[key])} {_verdict(b[key]['ok'])} ({detail(b, b[key])})" for b in blocks]

    rows = [
        (
            f"per-GEMM cold compile, median <= {COMPILE_GOAL_S} s",
            cells(
                "compile_median_s", lambda c: _fmt(c["value"], ".2f", " s"), lambda b, c: plural(b["problems"], "GEMM")
            ),
        )
    ]
    for ref, frac, label in (
        ("max-autotune", "1/4", "stock max-autotune's"),
        ("exhaustive", "1/200", "EXHAUSTIVE's"),
    ):
        rows.append(
            (
                f"cold compile <= {frac} of {label} (ratio of medians)",
                cells(
                    f"compile_vs_{ref}",
                    lambda c: _fmt(c["value"], ".4f", "x"),
                    lambda b, c: (
                        f"{_fmt(c['diode_median_s'], '.2f')} s vs {_fmt(c['ref_median_s'], '.2f')} s, "
                        + plural(c["problems"], "GEMM")
                    ),
                ),
            )
        )
    within = round((KERNEL_VS_EXHAUSTIVE_GOAL - 1) * 100)
    for ref, text in (
        ("exhaustive", f"kernel time within {within}% of EXHAUSTIVE's winner"),
        ("max-autotune", "kernel time no worse than stock max-autotune"),
    ):
        rows.append(
            (
                f"{text} (geomean)",
                cells(
                    f"kernel_vs_{ref}",
                    lambda c: _fmt(c["value"], ".3f", "x"),
                    lambda b, c: f"max {_fmt(c['max'], '.3f', 'x')}, {plural(c['problems'], 'GEMM')}",
                ),
            )
        )
    rows.append(
        (
            f"GEMMs slower than stock max-autotune by > {round((LOSS_THRESHOLD - 1) * 100)}%",
            [str(len(b["losses_over_3pct"])) for b in blocks],
        )
    )
    return rows


def summary_lines(results: Mapping[str, Any], checks: Mapping[str, Any] | None = None) -> list[str]:
    """The goal checks and module comparisons as a few aligned lines of text."""
    checks = checks if checks is not None else goal_checks(results)
    env = results.get("environment", {})
    lines = [
        f"goals on {env.get('hardware_key') or env.get('gpu') or 'unknown GPU'} "
        f"({' | '.join(_LABEL[dm] for dm in DIODE_TOP_K)}):"
    ]
    rows = goal_rows(checks)
    width = max(len(g) for g, _ in rows)
    for goal, cells in rows:
        lines.append(f"  {goal:<{width}}  {' | '.join(cells)}")
    for dm in DIODE_TOP_K:
        for loss in checks["diode"][dm]["losses_over_3pct"]:
            lines.append(
                f"  {_LABEL[dm]} loses to stock: {loss['case']} {loss['ratio']:.3f}x "
                f"({loss['diode_us']:.1f} us vs {loss['stock_us']:.1f} us; {loss['source']}; {loss['why']})"
            )
        if checks["diode"][dm]["not_involved"]:
            lines.append(
                f"  {_LABEL[dm]}: left out of the goals, the handler saw no GEMM (Inductor lowered it otherwise): "
                + ", ".join(checks["diode"][dm]["not_involved"])
            )
    for mod in checks["modules"]:
        c, s, r = mod["compile_s"], mod["step_us"], mod["ratios"]
        parts = [f"compile {', '.join(f'{m} {v:.1f} s' for m, v in c.items())}"]
        parts.append(f"step {', '.join(f'{m} {v:.1f} us' for m, v in s.items())}")
        if r:
            parts.append(", ".join(f"{k} {v:.3f}x" for k, v in r.items()))
        lines.append(f"  {mod['case']}: " + "; ".join(parts))
    return lines


# -- markdown -----------------------------------------------------------------------------------


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def _cell(case: Mapping[str, Any], mode: str, key: str, spec: str) -> str:
    entry = case.get("modes", {}).get(mode)
    if entry is None:
        return "-"
    if "error" in entry:
        return "error"
    return f"{entry[key]:{spec}}"


def _ratio_cell(case: Mapping[str, Any], mode: str, ref: str) -> str:
    a, b = measured(case, mode), measured(case, ref)
    return f"{a['kernel_us'] / b['kernel_us']:.3f}" if a and b else "-"


def _ptxas_note() -> str:
    from torch_diode.inductor.ptxas import NOTE

    return NOTE[0].upper() + NOTE[1:]


def markdown_report(results: Mapping[str, Any], checks: Mapping[str, Any] | None = None) -> str:
    """The whole report: environment, goals, losses, GEMM and module tables, errors."""
    checks = checks if checks is not None else goal_checks(results)
    env, settings, model = results["environment"], results["settings"], results.get("model") or {}
    key = env.get("hardware_key") or "unknown GPU"
    parts = [f"# torch-diode benchmark: {key}\n"]
    parts.append(
        f"GPU {env.get('gpu', '?')} ({key}), driver {env.get('driver') or '?'}, torch {env.get('torch', '?')} "
        f"(CUDA {env.get('cuda') or '?'}), triton {env.get('triton', '?')}, torch-diode {env.get('torch_diode', '?')}; "
        f"model {model.get('name', 'none')}"
        + (f" (sha256 {str(model['sha256'])[:16]})" if model.get("sha256") else "")
        + f"; measured {env.get('date', '?')}.\n\n"
        f"Cold compile: the first call with fresh caches, "
        + (
            "each measurement in a new process after a warm-up compile there"
            if settings.get("cold_compile")
            else "all in one process (`fresh_cache()` per compile; compiles that benchmark several choices "
            "took longer after the process's first: README)"
        )
        + f", `{settings.get('compile_mode', '?')}` for every "
        f"autotuning mode. Kernel (step) time: median over {recorded_count(settings.get('reps', '?'), 'replay')} of a CUDA "
        f"graph of {recorded_count(settings.get('graph_iters', '?'), 'call')}, in microseconds. EXHAUSTIVE runs on a subset of the GEMMs.\n"
        + (f"\n{_ptxas_note()}\n" if env.get("ptxas_mismatch") else "")
    )
    parts.append("## Goals\n")
    parts.append(_table(["goal", *(_LABEL[dm] for dm in DIODE_TOP_K)], [[g, *c] for g, c in goal_rows(checks)]))
    losses = [
        f"- {_LABEL[dm]}: `{x['case']}` ({x['source']}): {x['ratio']:.3f}x ({x['diode_us']:.1f} us vs "
        f"{x['stock_us']:.1f} us); {x['why']}"
        for dm in DIODE_TOP_K
        for x in checks["diode"][dm]["losses_over_3pct"]
    ]
    parts.append(f"## GEMMs where torch-diode is more than {round((LOSS_THRESHOLD - 1) * 100)}% slower than stock\n")
    parts.append("\n".join(losses) + "\n" if losses else "None.\n")
    idle = sorted({n for dm in DIODE_TOP_K for n in checks["diode"][dm]["not_involved"]})
    if idle:
        parts.append(
            "GEMMs left out of the goals because the handler saw no GEMM for them (Inductor lowered them "
            "without a GEMM template, e.g. an M = 1 matmul as a reduction): "
            + ", ".join(f"`{n}`" for n in idle)
            + ".\n"
        )
    gemms = _gemms(results)
    if gemms:
        parts.append("## GEMMs: cold compile time (s)\n")
        parts.append(
            _table(
                ["problem", "source", *MODES],
                [
                    [f"`{n}`", c.get("source", ""), *(_cell(c, m, "compile_s", ".2f") for m in MODES)]
                    for n, c in gemms.items()
                ],
            )
        )
        parts.append("## GEMMs: kernel time (us) and ratios\n")
        ratio_cols = [(dm, ref) for ref in ("max-autotune", "exhaustive") for dm in DIODE_TOP_K]
        parts.append(
            _table(
                ["problem", *MODES, *(f"{dm.removeprefix('diode-')} / {ref}" for dm, ref in ratio_cols)],
                [
                    [
                        f"`{n}`",
                        *(_cell(c, m, "kernel_us", ".1f") for m in MODES),
                        *(_ratio_cell(c, dm, ref) for dm, ref in ratio_cols),
                    ]
                    for n, c in gemms.items()
                ],
            )
        )
    modules = {n: c for n, c in results["cases"].items() if c["kind"] == "module"}
    if modules:
        parts.append("## Modules: cold compile time (s) and step time (us)\n")
        mod_modes = [m for m in MODES if m != "exhaustive"]
        parts.append(
            _table(
                [
                    "module",
                    *(f"compile {m}" for m in mod_modes),
                    *(f"step {m}" for m in mod_modes),
                    "top-3 step / max-autotune",
                    "top-3 step / default",
                ],
                [
                    [
                        n,
                        *(_cell(c, m, "compile_s", ".1f") for m in mod_modes),
                        *(_cell(c, m, "kernel_us", ".1f") for m in mod_modes),
                        _ratio_cell(c, "diode-top3", "max-autotune"),
                        _ratio_cell(c, "diode-top3", "default"),
                    ]
                    for n, c in modules.items()
                ],
            )
        )
    errors = [
        f"- `{n}` {mode}: {entry['error']}"
        for n, c in results["cases"].items()
        for mode, entry in c["modes"].items()
        if "error" in entry
    ]
    if errors:
        parts.append("## Errors\n")
        parts.append("\n".join(errors) + "\n")
    return "\n".join(parts)


# -- plots --------------------------------------------------------------------------------------


def plot_results(results: Mapping[str, Any], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write ``compile_time.png`` (cold compile per mode) and ``kernel_time.png`` (kernel time
    relative to EXHAUSTIVE's winner, and to stock max-autotune) into ``out_dir``.

    Needs matplotlib (the ``plot`` extra); without it, logs how to install it and returns [].
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning(NO_MATPLOTLIB)
        return []
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cases = results["cases"]
    gemms = _gemms(results)
    modules = {n: c for n, c in cases.items() if c["kind"] == "module"}
    key = results["environment"].get("hardware_key") or ""
    written = []

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    ax = axes[0]
    for i, mode in enumerate(MODES):
        ys = [m["compile_s"] for c in gemms.values() if (m := measured(c, mode))]
        if ys:
            ax.boxplot([ys], positions=[i], widths=0.5, showfliers=False)
            ax.scatter([i + (j % 7 - 3) * 0.04 for j in range(len(ys))], ys, s=10, alpha=0.6, color=_COLOR[mode])
    ax.axhline(COMPILE_GOAL_S, color="green", ls="--", lw=1, label=f"goal {COMPILE_GOAL_S} s")
    ax.set_xticks(range(len(MODES)), MODES)
    ax.set_yscale("log")
    ax.set_ylabel("cold compile (s)")
    ax.set_title(f"per-GEMM cold compile ({plural(len(gemms), 'GEMM')})")
    ax.legend()
    ax = axes[1]
    width = 0.8 / len(MODES)
    for i, mode in enumerate(MODES):
        ys = [(m["compile_s"] if (m := measured(c, mode)) else 0.0) for c in modules.values()]
        ax.bar([j + i * width for j in range(len(modules))], ys, width, label=mode, color=_COLOR[mode])
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(modules))], [_short(n) for n in modules], fontsize=7)
    ax.set_ylabel("cold compile (s)")
    ax.set_title("whole modules")
    if modules:
        ax.legend(fontsize=7)
    written.append(_save_figure(fig, f"torch-diode bench {key}: cold compile time", out / COMPILE_PLOT))

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for ax, ref, title in (
        (axes[0], "exhaustive", "relative to EXHAUSTIVE's winner"),
        (axes[1], "max-autotune", "relative to stock max-autotune"),
    ):
        names = [n for n, c in gemms.items() if measured(c, ref)]
        for mode in MODES:
            if mode == ref:
                continue
            pts = [
                (j, m["kernel_us"] / r["kernel_us"])
                for j, n in enumerate(names)
                if (m := measured(gemms[n], mode)) and (r := measured(gemms[n], ref))
            ]
            if pts:
                ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=18, label=mode, alpha=0.8, color=_COLOR[mode])
        ax.axhline(1.0, color="black", lw=1)
        goal = KERNEL_VS_EXHAUSTIVE_GOAL if ref == "exhaustive" else LOSS_THRESHOLD
        ax.axhline(goal, color="grey", ls="--", lw=1, label=f"{(goal - 1) * 100:.0f}% slower")
        ax.set_xticks(range(len(names)), [_short(n) for n in names], rotation=90, fontsize=6)
        ax.set_ylabel("kernel time ratio")
        ax.set_title(f"{title} ({plural(len(names), 'GEMM')})")
        if names:
            ax.legend(fontsize=7)
    written.append(_save_figure(fig, f"torch-diode bench {key}: kernel time", out / KERNEL_PLOT))
    return written


def _save_figure(fig: Any, title: str, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _short(name: str) -> str:
    """A case name for a crowded axis: no ``module`` prefix, no layout, short dtype names."""
    if name.startswith("module "):
        return name.removeprefix("module ")
    return name.rsplit(" ", 1)[0].replace("bfloat16", "bf16").replace("float16", "fp16").replace("float32", "fp32")


def write_report(results: Mapping[str, Any], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write ``results.md`` and the plots into ``out_dir``; returns the paths written."""
    from torch_diode._files import atomic_write

    out = Path(out_dir)
    written = [atomic_write(out / REPORT_FILE, markdown_report(results))]
    written += plot_results(results, out)
    return written
