"""Session 62: how Inductor's autotuning timer differs from the sweep's, ATen against Triton.

    python benchmarks/models/session62/timer_offsets.py KEY INDUCTOR_RUN.msgpack [--val data/KEY/val.msgpack]

For every problem of ``INDUCTOR_RUN`` (rule 12: each problem compiled with max-autotune, the times
Inductor's autotuning measured), each choice's Inductor time minus its time in the validation set
(the sweep's timer: CUDA graphs, L2 flushed, literal-size kernels), in microseconds: the median
over the problem's Triton configs and the ATen choices' own, grouped by the size of the problem's
fastest validation time. Prints one table.
"""

from __future__ import annotations

import argparse

import numpy as np
from stock_run import choice_medians

from torch_diode.dataset import read_dataset

BINS = ((0, 10), (10, 20), (20, 50), (50, 200), (200, float("inf")))


def problem_offsets(vmed: dict, run) -> dict:
    """``{problem: (fastest validation time, ATen offset, Triton offset)}`` (us) for each problem of
    ``run`` (Inductor's times) that ``vmed`` (``choice_medians`` of the validation set) holds and
    that has both ATen and Triton choices timed by both: each offset the median over those choices
    of Inductor's time minus the validation set's."""
    out = {}
    for pt in run.by_problem():
        v = vmed.get(pt.problem)
        if v is None:
            continue
        aten, triton = [], []
        for c, t in pt.median_by_choice().items():
            ch = run.choices[c]
            if ch in v:
                (aten if ch.is_aten else triton).append(t - v[ch])
        if aten and triton:
            out[pt.problem] = (min(v.values()), float(np.median(aten)), float(np.median(triton)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("key")
    ap.add_argument("run")
    ap.add_argument("--val", default=None)
    a = ap.parse_args()
    val = read_dataset(a.val or f"data/{a.key}/val.msgpack")
    run = read_dataset(a.run)
    rows = {b: {"aten": [], "triton": [], "problems": 0} for b in BINS}
    for fastest, aten, triton in problem_offsets(choice_medians(val), run).values():
        b = next(b for b in BINS if b[0] <= fastest < b[1])
        rows[b]["problems"] += 1
        rows[b]["aten"].append(aten)
        rows[b]["triton"].append(triton)
    print(f"{a.key}: Inductor's autotuning time minus the validation set's, per problem (us; medians over problems)")
    print("| fastest validation time | problems | ATen | Triton (median config) | ATen minus Triton |")
    print("|---|---|---|---|---|")
    for b in BINS:
        r = rows[b]
        if not r["problems"]:
            continue
        at, tr = np.array(r["aten"]), np.array(r["triton"])
        label = f"{b[0]:g}-{b[1]:g} us" if b[1] != float("inf") else f">= {b[0]:g} us"
        print(
            f"| {label} | {r['problems']} | {np.median(at):+.1f} | {np.median(tr):+.1f} | {np.median(at - tr):+.1f} |"
        )


if __name__ == "__main__":
    main()
