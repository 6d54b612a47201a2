"""Where one cold compile of a `diode bench` module case spends its time (cProfile of the main
process), with Inductor's epilogue-fusion benchmarking on and then off. Needs a CUDA GPU.

Usage (repository root, the packages' src folders on PYTHONPATH):
    python scripts/profile_module_compile.py --model M.safetensors [--case "module ViT-B/16"]
                                             [--mode diode-top1] [--top 45]

Prints, per compile, the cold compile time, the handler's statistics (diode modes) and the
functions with the most cumulative and the most own time. Work done in Inductor's compile
workers shows as waiting (``as_completed``, ``_recv_msg``); Triton kernels compiled in the main
process show as ``make_cubin`` (ptxas) and ``make_ptx``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats

import torch

from torch_diode.bench import measure
from torch_diode.bench.suite import MODES, ModuleCase, suite
from torch_diode.model import load_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="model file (diode modes)")
    ap.add_argument("--case", default="module ViT-B/16", help="the first module case whose name starts with this")
    ap.add_argument("--mode", default="diode-top1", choices=[m for m in MODES if m != "exhaustive"])
    ap.add_argument("--top", type=int, default=45, help="functions listed per ordering")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        ap.error("needs a CUDA GPU")
    model = load_model(args.model)
    cases = [c for c in suite("all") if isinstance(c, ModuleCase) and c.name.startswith(args.case)]
    if not cases:
        ap.error(f"--case: no module case starts with {args.case!r}; see `diode bench --list --problems all`")
    case = cases[0]
    fn, fn_args = case.build("cuda")
    measure.warm_up((args.mode,), model=model)
    from torch._inductor import config as inductor_config

    for label, patch in (
        ("default config", {}),
        ("benchmark_epilogue_fusion=False", {"benchmark_epilogue_fusion": False}),
    ):
        prof = cProfile.Profile()
        with (
            inductor_config.patch(patch),
            torch.no_grad(),
            measure.cold_compile_state(),
            measure.mode_context(args.mode, model) as handle,
        ):
            compiled = measure.compile_for(args.mode, fn)
            prof.enable()
            seconds = measure.first_call_s(compiled, fn_args)
            prof.disable()
            stats = handle.get_stats() if handle is not None else {}
        print(f"== {case.name} | {args.mode} | {label}: cold compile {seconds:.2f} s", flush=True)
        if stats:
            print(f"   handler: {stats}", flush=True)
        for order in ("cumulative", "tottime"):
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats(order).print_stats(args.top)
            print("\n".join(line for line in out.getvalue().splitlines() if line.strip()), flush=True)


if __name__ == "__main__":
    main()
