"""``diode bench``: torch-diode against stock Inductor on the GEMMs of real layers, awkward shapes
and whole modules, on this GPU (:mod:`torch_diode.bench`).

Examples::

    diode bench --problems quick --time-budget 480       # on the GPU machine; rerun to resume
    diode bench --problems all --modes exhaustive --exhaustive-subset 8 --time-budget 540
    diode bench --report-only --out benchmarks/results/NVIDIA-H100   # rebuild the report (no GPU needed)
    diode bench --list --problems all                    # the cases and modes (no GPU needed)
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from torch_diode.cli import UsageError

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    from torch_diode.bench.suite import MODES, SUITES

    p = subparsers.add_parser(
        "bench",
        help="benchmark torch-diode against stock max-autotune on this GPU (compile and kernel time)",
        description="Measure, for each GEMM of real layers and awkward shapes and for whole modules, the cold "
        "compile time and the kernel (step) time with default torch.compile, stock max-autotune, max-autotune "
        "with the EXHAUSTIVE search space (on a subset) and torch-diode top-1 and top-3. Writes results.json, "
        "results.md and PNG plots, and checks the goals (per-GEMM compile median <= 1.5 s, <= 1/4 of stock's, "
        "<= 1/200 of EXHAUSTIVE's; kernel geomean within 2% of EXHAUSTIVE's winner and no worse than stock). "
        "Resumable: measurements already in results.json are skipped. Needs a CUDA GPU, except --list and "
        "--report-only.",
    )
    p.add_argument("--out", metavar="DIR", help="output directory (default: benchmarks/results/<hardware key>/)")
    p.add_argument("--problems", choices=SUITES, default="quick", help="the suite (default: quick)")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated modes (default: all: {','.join(MODES)})")
    p.add_argument(
        "--exhaustive-subset",
        type=int,
        default=4,
        metavar="N",
        help="EXHAUSTIVE mode on the first N GEMMs only; it takes minutes per GEMM (default: 4)",
    )
    p.add_argument(
        "--time-budget",
        type=float,
        metavar="S",
        help="stop after about S seconds, leaving what does not fit for a rerun (default: no limit)",
    )
    p.add_argument("--model", help="model file or registered name (default: the best installed model for this GPU)")
    p.add_argument("--graph-iters", type=int, default=20, help="calls per timed CUDA graph (default: 20)")
    p.add_argument("--reps", type=int, default=20, help="timed graph replays; the median is kept (default: 20)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--report-only", action="store_true", help="rebuild the report and goal checks from DIR/results.json"
    )
    p.add_argument("--list", action="store_true", help="print the cases and their modes, and exit")
    p.set_defaults(func=_bench)


def _options(args: argparse.Namespace, out: Path) -> Any:
    from torch_diode.bench.run import BenchOptions

    if args.time_budget is not None and args.time_budget <= 0:
        raise UsageError(f"--time-budget: must be a positive number of seconds, got {args.time_budget}")
    try:
        return BenchOptions(
            out=out,
            problems=args.problems,
            modes=tuple(m.strip() for m in args.modes.split(",") if m.strip()),
            exhaustive_subset=args.exhaustive_subset,
            time_budget_s=args.time_budget,
            graph_iters=args.graph_iters,
            reps=args.reps,
            progress=not args.no_progress,
        )
    except (TypeError, ValueError) as e:
        raise UsageError(str(e).replace("exhaustive_subset", "--exhaustive-subset")) from None


def _default_out(key: str | None) -> Path:
    if key is None:
        raise UsageError("no hardware key for this machine (no known GPU): pass --out DIR")
    return Path("benchmarks") / "results" / key


def _bench(args: argparse.Namespace) -> int:
    if args.list:
        return _list(_options(args, Path(args.out or ".")))
    if args.report_only:
        from torch_diode.hardware import detect

        out = Path(args.out) if args.out else _default_out(detect().key)
        return _report(out)
    import torch

    if not torch.cuda.is_available():
        raise UsageError(
            "needs a CUDA GPU (torch.cuda.is_available() is False); run it on a GPU machine, or use --list or "
            "--report-only here"
        )
    from torch_diode.bench.measure import environment
    from torch_diode.bench.run import run_bench

    env = environment()
    options = _options(args, Path(args.out) if args.out else _default_out(env["hardware_key"]))
    info = _model(args.model, env["hardware_key"], options.modes)
    log.info(
        "diode bench on %s (%s), torch %s, triton %s; model %s",
        env["gpu"],
        env["hardware_key"],
        env["torch"],
        env["triton"],
        info["name"] if info else "none",
    )
    try:
        run = run_bench(options, environment=env, model_info=info)
    except ValueError as e:
        raise UsageError(str(e)) from None
    print(f"diode bench: {run.line()}")
    if not options.results_path.is_file():
        print("diode bench: nothing measured yet, so no report; rerun with a larger --time-budget (or none)")
        return 1
    code = _report(options.out)
    return 1 if run.failed and not run.measured and not run.skipped_done else code


def _model(name: str | None, key: str | None, modes: tuple[str, ...]) -> dict[str, Any] | None:
    """What the results record about the model of the diode modes (loaded here to check it; each
    measurement's process loads it again from its path)."""
    from torch_diode import registry
    from torch_diode.bench.suite import DIODE_TOP_K
    from torch_diode.model import load_model

    if not any(m in DIODE_TOP_K for m in modes):
        return None
    if name is None:
        candidates = registry.models_for_hardware(key) if key else []
        if not candidates:
            raise UsageError(
                f"no installed model for this GPU ({key or 'unknown hardware key'}): pass --model FILE, or leave "
                "diode-top1,diode-top3 out of --modes"
            )
        name = candidates[0].name
    path = registry.resolve(name)
    model = load_model(path)
    if key is not None and model.hardware != key:
        log.warning("model %s was trained for %s, but this GPU is %s", name, model.hardware, key)
    return {
        "name": Path(name).name.removesuffix(".safetensors"),
        "path": str(path),
        "sha256": model.model_hash,
        "hardware": model.hardware,
    }


def _report(out: Path) -> int:
    from torch_diode.bench.report import RESULTS_FILE, load_results, summary_lines, write_report

    path = out / RESULTS_FILE
    if not path.is_file():
        raise UsageError(f"{path}: no results file (run `diode bench --out {out}` on a GPU first)")
    results = load_results(path)
    for line in summary_lines(results):
        print(line)
    for written in write_report(results, out):
        print(f"wrote {written}")
    return 0


def _list(options: Any) -> int:
    from torch_diode._text import plural
    from torch_diode.bench.run import planned
    from torch_diode.bench.suite import suite

    cases = suite(options.problems)
    plan = planned(cases, options)
    modes: dict[str, list[str]] = {}
    for case, mode in plan:
        modes.setdefault(case.name, []).append(mode)
    print(f"{options.problems} suite: {plural(len(cases), 'case')}, {plural(len(plan), 'measurement')}")
    for case in cases:
        source = getattr(case, "source", "")
        print(f"  {case.kind:<6} {case.name:<48} {source:<52} {','.join(modes.get(case.name, []))}")
    return 0
