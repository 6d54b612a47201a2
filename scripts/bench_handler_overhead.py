#!/usr/bin/env python
"""CPU cost of torch-diode's choices hook per GEMM: widening, conversion, prediction, selection.

Runs the real hook (``DiodeInductorChoices._finalize_template_configs``) on real Inductor kernel
inputs on a fake CUDA device (no GPU needed: Inductor's CUDA heuristics only read the device
type), for the problems of ``check_handler_gpu.SPEED_PROBLEMS``, and compares it with the stock
hook (which enumerates the DEFAULT space). The cost that matters is per GEMM of a cold compile:
``diode cold`` (a problem the handler has not seen) minus ``stock``. ``diode warm`` is a problem
seen before in the process (its selection is replayed, e.g. the same layer shape repeated).

    python scripts/bench_handler_overhead.py [--model M.safetensors] [--repeats 5] [--output out.json]
        [--profile 25]

``--profile N`` also runs one cold hook per problem under cProfile and prints its N most costly
functions (cumulative time), to say where the time goes on a given machine (e.g. a real GPU host).

Without ``--model`` it times an untrained model of the default architecture (``deep`` preset,
4 members): inference cost does not depend on the weights.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_handler_gpu import SPEED_PROBLEMS, GemmProblem


def default_model() -> Any:
    from torch_diode.features import FEATURE_SPEC, gpu_constants
    from torch_diode.model import ARCH_PRESETS, Architecture, Normalization, build_model

    n = len(FEATURE_SPEC)
    arch = Architecture(model_type="deep", input_dim=n, members=4, **ARCH_PRESETS["deep"])
    norm = Normalization(np.zeros(n, np.float32), np.ones(n, np.float32), 0.0, 1.0)
    return build_model(arch, hardware="NVIDIA-H100", gpu=gpu_constants("NVIDIA-H100"), normalization=norm, seed=0)


def fake_inputs(p: GemmProblem) -> tuple[Any, list[Any]]:
    """(MMKernelInputs, templates) as the lowering of ``p`` builds them, on a fake CUDA device."""
    from torch._inductor import ir
    from torch._inductor.kernel.bmm import aten_baddbmm, aten_bmm, bmm_template
    from torch._inductor.kernel.mm import aten_addmm, aten_mm, mm_template
    from torch._inductor.kernel_inputs import MMKernelInputs

    dtype = getattr(torch, p.dtype)
    batched = p.op in ("bmm", "baddbmm")
    pre = [p.batch] if batched else []

    def buf(name: str, size: list[int], stride: list[int]) -> Any:
        return ir.InputBuffer(name=name, layout=ir.FixedLayout(torch.device("cuda"), dtype, size, stride))

    a = buf("a", [*pre, p.m, p.k], ([p.m * p.k] if batched else []) + [p.k, 1])
    b_stride = [1, p.k] if p.transpose_b else [p.n, 1]
    b = buf("b", [*pre, p.k, p.n], ([p.k * p.n] if batched else []) + b_stride)
    templates = {
        "mm": [aten_mm, mm_template],
        "addmm": [aten_addmm, mm_template],
        "bmm": [aten_bmm, bmm_template],
        "baddbmm": [aten_baddbmm, bmm_template],
    }[p.op]
    if p.op in ("mm", "bmm"):
        return MMKernelInputs([a, b]), templates
    bias = buf("bias", [*pre, p.m, p.n], ([0] if batched else []) + [0, 1])
    return MMKernelInputs([bias, a, b], scalars={"alpha": 1, "beta": 1}), templates


def hook(handler: Any, ki: Any, templates: list[Any], op: str) -> tuple[float, int]:
    gens = {t.uid: handler.get_ktc(ki, t, op) for t in templates}
    t0 = time.perf_counter()
    out = handler._finalize_template_configs(gens, ki, templates, op)
    return time.perf_counter() - t0, len(out)


def bench_problem(p: GemmProblem, model: Any, repeats: int) -> dict[str, Any]:
    from torch._inductor.choices import InductorChoices

    from torch_diode.config import DiodeOptions
    from torch_diode.inductor.choices import DiodeInductorChoices, select
    from torch_diode.inductor.convert import choice_from_ktc, problem_from_kernel_inputs
    from torch_diode.ranking import order_of

    ki, templates = fake_inputs(p)
    triton = [t for t in templates if t.uid.startswith("triton::")]
    phases: dict[str, list[float]] = {k: [] for k in ("stock", "cold", "warm", "widen", "convert", "predict", "select")}
    kept = seen = 0
    for _ in range(repeats):
        phases["stock"].append(hook(InductorChoices(), ki, templates, p.op)[0])
        handler = DiodeInductorChoices(DiodeOptions(), model=model)  # fresh: nothing cached
        dt, kept = hook(handler, ki, templates, p.op)
        seen = handler.get_stats()["candidates_seen"]
        phases["cold"].append(dt)
        phases["warm"].append(hook(handler, ki, templates, p.op)[0])
        # the cold hook's phases, timed one by one
        t0 = time.perf_counter()
        gens = {t.uid: handler.get_ktc(ki, t, p.op) for t in templates}
        cands = handler._candidates(gens, ki, templates, p.op, {})  # the hook's own enumeration
        ktcs = [x for t in triton for x in cands[t.uid]]
        ktcs += [x for t in templates if t.uid.startswith("aten::") for x in cands[t.uid]]
        t1 = time.perf_counter()
        problem = problem_from_kernel_inputs(ki, p.op)
        choices = [choice_from_ktc(x) for x in ktcs]
        t2 = time.perf_counter()
        pred = model.predict(problem, choices)
        t3 = time.perf_counter()
        lt, sd = np.asarray(pred.log_time_us, np.float64), np.asarray(pred.std, np.float64)
        o = handler.options  # the Triton candidates' order, as the handler makes it
        order = order_of(problem, choices[:-1], lt[:-1], diversity=o.diversity, cliff_guard=o.cliff_guard)
        select(lt[:-1], sd[:-1], lt[-1:], sd[-1:], o, keep_one_triton=False, triton_order=order)
        t4 = time.perf_counter()
        for name, v in (("widen", t1 - t0), ("convert", t2 - t1), ("predict", t3 - t2), ("select", t4 - t3)):
            phases[name].append(v)
    ms = {k: round(1e3 * statistics.median(v), 2) for k, v in phases.items()}
    ms["cold_first"] = round(1e3 * phases["cold"][0], 2)
    return {"problem": p.name, "candidates": seen, "kept": kept, "median_ms": ms}


def profile_cold_hook(p: GemmProblem, model: Any, top: int) -> None:
    """One cold hook of ``p`` under cProfile; prints its ``top`` costliest functions."""
    import cProfile
    import io
    import pstats

    from torch_diode.config import DiodeOptions
    from torch_diode.inductor.choices import DiodeInductorChoices

    ki, templates = fake_inputs(p)
    handler = DiodeInductorChoices(DiodeOptions(), model=model)
    prof = cProfile.Profile()
    prof.enable()
    hook(handler, ki, templates, p.op)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(top)
    print(f"--- cProfile of one cold hook: {p.name}\n{buf.getvalue()}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="model file (default: untrained default architecture)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    ap.add_argument("--output", type=Path, help="write the results as JSON")
    ap.add_argument(
        "--profile", type=int, default=0, metavar="N", help="print the N costliest functions of a cold hook"
    )
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from torch._inductor import config as inductor_config
    from torch._inductor.choices import InductorChoices
    from torch._inductor.graph import GraphLowering
    from torch._inductor.virtualized import V

    from torch_diode.model import load_model

    t0 = time.perf_counter()
    model = load_model(args.model) if args.model else default_model()
    load_ms = 1e3 * (time.perf_counter() - t0)
    graph = GraphLowering(torch.fx.symbolic_trace(lambda x: x))
    rows = []
    with V.set_graph_handler(graph), inductor_config.patch(max_autotune=True):
        hook(InductorChoices(), *fake_inputs(SPEED_PROBLEMS[0]), SPEED_PROBLEMS[0].op)  # first-call costs
        for p in SPEED_PROBLEMS:
            rows.append(bench_problem(p, model, args.repeats))
            if args.profile:
                profile_cold_hook(p, model, args.profile)
            r = rows[-1]["median_ms"]
            print(
                f"{rows[-1]['problem']:<34} cands {rows[-1]['candidates']:>5} kept {rows[-1]['kept']:>2} | "
                f"stock {r['stock']:6.2f} | diode cold {r['cold']:6.2f} (first {r['cold_first']:6.2f}) "
                f"warm {r['warm']:5.2f} | widen {r['widen']:6.2f} convert {r['convert']:5.2f} "
                f"predict {r['predict']:5.2f} select {r['select']:4.2f} ms"
            )
    over = [r["median_ms"]["cold"] - r["median_ms"]["stock"] for r in rows]
    summary = {
        "model_load_ms": round(load_ms, 1),
        "median_cold_ms": round(statistics.median(r["median_ms"]["cold"] for r in rows), 2),
        "median_overhead_vs_stock_ms": round(statistics.median(over), 2),
        "max_overhead_vs_stock_ms": round(max(over), 2),
        "median_warm_ms": round(statistics.median(r["median_ms"]["warm"] for r in rows), 2),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    print(json.dumps(summary))
    if args.output:
        args.output.write_text(json.dumps({"summary": summary, "problems": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
