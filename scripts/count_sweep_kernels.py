#!/usr/bin/env python3
"""Count the Triton configs and the distinct compiled kernels a campaign plan's sweep needs (no GPU).

Enumerates Inductor's own EXHAUSTIVE configs for every problem (fake CUDA device), applies the
campaign's training sampling (``--max-configs``, ``--sample``, ``--max-compile-cost``), and counts
distinct ``torch_diode.collect.sweep.compile_key`` values: with shared run-time-size kernels
(``--literal`` off) problems of one kernel spec share kernels; with literal sizes every
(problem, config) is its own kernel.

    PYTHONPATH=packages/torch-diode-lib/src python scripts/count_sweep_kernels.py data/NVIDIA-H100/plan.json
"""

from __future__ import annotations

import argparse
import sys
import time

from torch_diode.collect import sweep
from torch_diode.collect.campaign import CampaignPlan


def count(
    problems: list, *, max_configs: int | None, sample: str, max_compile_cost: float | None, literal: bool
) -> dict:
    rev = sweep.template_revision()
    keys: set = set()
    configs = 0
    for p in problems:
        items = sweep.inductor_choices(p, "EXHAUSTIVE")
        if max_compile_cost is not None:
            items = [it for it in items if it.kind != "triton" or sweep.compile_cost(p, it.choice) <= max_compile_cost]
        if sample == "shared":
            items = sweep.sample_shared(items, max_configs, 0)
        else:
            items = sweep.sample_choices(items, p, max_configs, 0)
        for it in items:
            if it.kind == "triton":
                configs += 1
                keys.add(sweep.compile_key(p, it.choice, rev, literal=literal))
    return {"problems": len(problems), "configs": configs, "kernels": len(keys)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plan")
    ap.add_argument("--split", choices=("train", "val"), default="train")
    ap.add_argument("--max-configs", type=int, default=330, help="0 = the full space")
    ap.add_argument("--sample", choices=("shared", "problem"), default="shared")
    ap.add_argument("--max-compile-cost", type=float, default=131072.0, help="0 = keep every config")
    ap.add_argument("--literal", action="store_true", help="literal-size kernels (the sweep's default)")
    args = ap.parse_args(argv)
    plan = CampaignPlan.load(args.plan)
    probs = plan.train if args.split == "train" else plan.val
    t0 = time.perf_counter()
    r = count(
        probs,
        max_configs=args.max_configs or None,
        sample=args.sample,
        max_compile_cost=args.max_compile_cost or None,
        literal=args.literal,
    )
    print(
        f"{args.plan} {args.split}: {r['problems']} problems, {r['configs']} Triton configs, {r['kernels']} distinct "
        f"kernels ({r['configs'] / max(1, r['kernels']):.2f} configs per kernel; {time.perf_counter() - t0:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
