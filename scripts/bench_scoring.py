"""Median time to featurize and score 1,500 candidates of one GEMM problem on one CPU core.

This is the work the Inductor choices handler does per GEMM lowering: ``DiodeModel.predict``
(``featurize``, the ensemble forward and, in a trained model file, the neighbour memory, the
ATen head and the ranking forest). Two cases: the same ``Choice`` objects every call (what the
handler does: ``torch_diode.inductor.convert`` keeps one ``Choice`` per config, and the feature
cache finds them by identity), and new but equal ``Choice`` objects every call, made before the
clock starts (the feature cache finds them by value: 0.7-1.7 ms more for 1,500 on session 32's
dev CPU).

Usage: python scripts/bench_scoring.py [--model M.safetensors | NAME] [--model-type deep] [--repeat 300]
                                      [--members 4] [--hidden H] [--depth D] [--threads 1] [--busy 0]
                                      [--network-shortlist N] [--screen-hidden H] [--cpu C]
Without --model, an untrained network of the preset architecture (or of --hidden / --depth) is
timed, with no memory, head or forest (speed does not depend on the weights); give a trained
model file (a preview: benchmarks/models/<KEY>-preview/README.md) for the handler's real cost.

``--threads T`` sets torch's thread count before timing (as the calling process would have it) and
``--busy N`` keeps N other processes spinning meanwhile, as Inductor's compile workers do while the
handler scores a GEMM: ``--threads 2 --busy 2`` on a 2-core machine shows what a busy CPU costs.
``--network-shortlist N`` scores with that network cascade instead of the model's own
(``torch_diode.model.ScoringOptions``; 0: every member scores every candidate); ``--cpu C`` pins
the process to CPU C first (on a shared host, to compare cores). ``--screen-hidden H`` gives the
untrained model a one-member screening network of width H (``DiodeModel.screen``: it scores every
candidate of the cascade and the ensemble its shortlist).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

from torch_diode.bench.measure import cpu_model
from torch_diode.features import FEATURE_SPEC, featurize, gpu_constants
from torch_diode.model import (
    ARCH_PRESETS,
    Architecture,
    Normalization,
    ScoringOptions,
    build_model,
    init_network,
    load_model,
)
from torch_diode.records import Choice, Problem
from torch_diode.registry import resolve


def exhaustive_choices(n: int) -> list[Choice]:
    """The first ``n`` configs of Inductor's EXHAUSTIVE mm space (block sizes 16..256, stages 1..5,
    warps 2/4/8, GROUP_M 8), plus the ATen choice."""
    out = [Choice.aten("mm")]
    for bm, bn, bk in itertools.product([16, 32, 64, 128, 256], repeat=3):
        for stages in (1, 2, 3, 4, 5):
            for warps in (2, 4, 8):
                out.append(
                    Choice(
                        template="triton::mm", block_m=bm, block_n=bn, block_k=bk, group_m=8, num_stages=stages,
                        num_warps=warps, even_k=True, allow_tf32=False, acc_type="tl.float32", use_fast_accum=False,
                        extra=(("hint_override", None),),
                    )
                )  # fmt: skip
    return out[:n]


def _spin() -> None:
    while True:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a model file or registered name (default: an untrained model of --model-type)")
    ap.add_argument("--model-type", default="deep", choices=sorted(ARCH_PRESETS))
    ap.add_argument("--members", type=int, default=4)
    ap.add_argument("--hidden", type=int, help="width instead of the preset's (without --model)")
    ap.add_argument("--depth", type=int, help="hidden layers or blocks instead of the preset's (without --model)")
    ap.add_argument("--candidates", type=int, default=1500)
    ap.add_argument("--repeat", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the process (default 1)")
    ap.add_argument("--busy", type=int, default=0, help="processes kept spinning while timing (default 0)")
    ap.add_argument("--network-shortlist", type=int, help="the network cascade's shortlist (default: the model's)")
    ap.add_argument("--screen-hidden", type=int, help="a screening network of this width (without --model)")
    ap.add_argument("--cpu", type=int, help="pin the process to this CPU before timing")
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    if args.model and (args.hidden or args.depth or args.screen_hidden):
        ap.error("--hidden, --depth and --screen-hidden shape an untrained model: give them without --model")
    torch.set_num_threads(args.threads)
    problem = Problem(op="mm", m=1000, n=4096, k=4096, dtype="bfloat16")
    choices = exhaustive_choices(args.candidates)
    if args.model:
        model = load_model(resolve(args.model))
    else:
        x = featurize(problem, choices, "NVIDIA-H100")
        arch = Architecture(
            model_type=args.model_type,
            input_dim=len(FEATURE_SPEC),
            members=args.members,
            hidden=args.hidden or ARCH_PRESETS[args.model_type]["hidden"],
            depth=args.depth or ARCH_PRESETS[args.model_type]["depth"],
        )
        model = build_model(
            arch,
            hardware="NVIDIA-H100",
            gpu=gpu_constants("NVIDIA-H100"),
            normalization=Normalization.fit(x, np.zeros(2)),
            seed=0,
        )
        if args.screen_hidden:
            model.screen = init_network(dataclasses.replace(arch, hidden=args.screen_hidden, members=1), seed=1)
    if args.network_shortlist is not None:
        model.scoring = ScoringOptions(network_shortlist=args.network_shortlist)

    def timeit(fn: Callable[[list[Choice]], object], make: Callable[[], list[Choice]]) -> dict[str, float]:
        """Median wall time and median CPU time of this thread (ms) of ``fn(make())``, ``make`` left
        out of the time. On a shared machine the wall time includes time the process spent
        preempted; the CPU time does not."""
        for _ in range(20):
            fn(make())
        wall, cpu = [], []
        for _ in range(args.repeat):
            arg = make()
            t, c = time.perf_counter(), time.thread_time()
            fn(arg)
            cpu.append(time.thread_time() - c)
            wall.append(time.perf_counter() - t)
        return {"wall_ms": statistics.median(wall) * 1e3, "cpu_ms": statistics.median(cpu) * 1e3}

    dicts = [c.to_dict() for c in choices]
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    try:
        timings = {
            "featurize": timeit(lambda cs: featurize(problem, cs, model.gpu), lambda: choices),
            "predict_same_objects": timeit(lambda cs: model.predict(problem, cs), lambda: choices),
            "predict_new_objects": timeit(
                lambda cs: model.predict(problem, cs), lambda: [Choice.from_dict(d) for d in dicts]
            ),
            "load_average": os.getloadavg()[0],
        }
    finally:
        for p in spinners:
            p.terminate()
    result = {
        "candidates": len(choices),
        "architecture": model.arch.to_dict(),
        "screen": model.screen.arch.to_dict() if model.screen is not None else None,
        "scoring": model.scoring.to_dict(),
        "cpu": cpu_model(),
        "cpus": sorted(os.sched_getaffinity(0)),
        "threads": torch.get_num_threads(),
        "busy_processes": args.busy,
        "torch": torch.__version__,
        **timings,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
