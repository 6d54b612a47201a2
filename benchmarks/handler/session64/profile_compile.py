"""Where a cold compile's time goes with torch-diode's handler (session 64, a report).

Session 63's speed check: a GEMM where the handler keeps one choice compiles cold in 0.5-0.6 s,
one where it keeps ATen and one Triton config in 1.2-2.2 s, three or more in 2.5-4.2 s (H200).
For each problem and handler setting this compiles the GEMM cold twice, once timed plainly and
once under cProfile, and writes what the profile and Inductor's own phase timers say:

    python benchmarks/handler/session64/profile_compile.py MODEL OUT_DIR [--problems a,b] [--settings default,on]

OUT_DIR gets ``profile.json`` (per compile: seconds, the handler's stats, Inductor's
``compile_times``; the profile's top functions by cumulative and by own time) and, with
``--pstats``, one ``.pstats`` file per profiled compile. Stock max-autotune (setting ``stock``) is
timed, not profiled. Needs a CUDA GPU; run from the repository root with the packages'
``src`` folders on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "scripts"))

SETTINGS: dict[str, dict[str, Any] | None] = {
    "stock": None,
    "default": {},
    "on": {"aten_alone_when_best": True},
    "off": {"aten_alone_below_us": 0},
}


def top(stats: pstats.Stats, key: str, n: int) -> str:
    buf = io.StringIO()
    stats.stream = buf  # type: ignore[attr-defined]
    stats.sort_stats(key).print_stats(n)
    return buf.getvalue()


def main() -> int:
    from check_handler_gpu import (
        SPEED_PROBLEMS,
        cold_compile_state,
        compile_for,
        make_args,
        stats_delta,
        warm_up_compile,
    )

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("out", type=Path)
    ap.add_argument("--problems", default="llm_mlp_up,llm_lm_head,vit_b_mlp,odd_small,resnet_im2col")
    ap.add_argument("--settings", default="default,on")
    ap.add_argument("--top", type=int, default=45)
    ap.add_argument("--pstats", action="store_true", help="also write each profile as a .pstats file")
    args = ap.parse_args()
    by_name = {p.name: p for p in SPEED_PROBLEMS}
    problems = [by_name[n] for n in args.problems.split(",")]
    settings = args.settings.split(",")
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        ap.error(f"unknown setting(s) {unknown}; choose from {sorted(SETTINGS)}")
    args.out.mkdir(parents=True, exist_ok=True)

    import torch
    from torch._dynamo.utils import compilation_time_metrics, compile_times

    from torch_diode.inductor import install_diode_choices

    warm_up_compile()
    rows: list[dict[str, Any]] = []
    for p in problems:
        fn, fargs = make_args(p)
        for setting in settings:
            opts = SETTINGS[setting]
            # stock max-autotune is timed only: its profile would be Inductor's alone
            for profiled in (False,) if opts is None else (False, True):
                row: dict[str, Any] = {
                    "problem": p.name,
                    "shape": p.describe(),
                    "setting": setting,
                    "profiled": profiled,
                }
                with contextlib.ExitStack() as stack:
                    handle = (
                        stack.enter_context(install_diode_choices(model=args.model, **opts))
                        if opts is not None
                        else None
                    )
                    before = handle.get_stats() if handle else None
                    stack.enter_context(cold_compile_state())
                    compilation_time_metrics.clear()
                    compiled = compile_for("max-autotune", fn)
                    prof = cProfile.Profile() if profiled else None
                    t0 = time.perf_counter()
                    if prof is not None:
                        prof.enable()
                    compiled(*fargs)
                    torch.cuda.synchronize()
                    if prof is not None:
                        prof.disable()
                    row["compile_s"] = round(time.perf_counter() - t0, 3)
                    if handle is not None:
                        row["diode"] = stats_delta(before, handle.get_stats())
                    row["inductor_compile_times"] = compile_times(repr="str", aggregate=True)
                if prof is not None:
                    name = f"{p.name}-{setting}"
                    if args.pstats:
                        prof.dump_stats(str(args.out / f"{name}.pstats"))
                    st = pstats.Stats(prof)
                    row["top_cumulative"] = top(st, "cumulative", args.top)
                    row["top_own"] = top(st, "tottime", args.top)
                rows.append(row)
                kept = row.get("diode", {}).get("candidates_kept", "-")
                print(
                    f"{p.name:<16} {setting:<8} {'prof' if profiled else 'time'} {row['compile_s']:7.3f} s kept {kept}",
                    flush=True,
                )
                (args.out / "profile.json").write_text(json.dumps({"rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
