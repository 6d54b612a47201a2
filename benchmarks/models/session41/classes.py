"""Session 41: how ATen and the best Triton config fare, per class of operand and output
alignment, on a GPU's measured problems (a diagnostic of the data, no model):

    python benchmarks/models/session41/classes.py NVIDIA-H100 train [--first]

Per class (batched or not; both operands' rows 16-byte aligned, one, or none; the output's rows
aligned or not: ``features.operands_aligned16``, ``features.output_aligned16``): the number of
problems, the geomean of ATen's and of the best Triton config's time over the best measured,
and the share of problems where ATen is the fastest. ``--first``: the plan's first training
problems only (``CampaignPlan.group("first")``), without the problems it was grown by.
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("hardware")
    ap.add_argument("split", choices=("train", "val"))
    ap.add_argument("--first", action="store_true")
    a = ap.parse_args()

    from torch_diode.collect.campaign import CampaignPlan
    from torch_diode.dataset import read_dataset
    from torch_diode.features import operands_aligned16, output_aligned16
    from torch_diode.records import BATCHED_OPS

    data = ROOT / "data" / a.hardware
    ds = read_dataset(data / f"{a.split}.msgpack")
    keep = set(CampaignPlan.load(data / "plan.json").group("first")) if a.first else None
    groups: dict[tuple, list[tuple[float, float, bool]]] = defaultdict(list)
    for pt in ds.by_problem():
        p = pt.problem
        if keep is not None and p not in keep:
            continue
        med = pt.median_by_choice()
        best = min(med.values())
        aten = min(v for c, v in med.items() if ds.choices[c].is_aten)
        tri = min((v for c, v in med.items() if not ds.choices[c].is_aten), default=math.inf)
        operands = {2: "both aligned", 1: "one misaligned", 0: "both misaligned"}[sum(operands_aligned16(p))]
        key = (p.op in BATCHED_OPS, operands, output_aligned16(p))
        groups[key].append((math.log(aten / best), math.log(tri / best), aten <= tri))
    print("| batched | operands | output aligned | problems | ATen / best | best Triton / best | ATen fastest |")
    print("|---|---|---|---|---|---|---|")
    for (batched, operands, out), rows in sorted(groups.items()):
        n = len(rows)
        at = math.exp(sum(r[0] for r in rows) / n)
        tr = math.exp(sum(r[1] for r in rows) / n)
        print(f"| {batched} | {operands} | {out} | {n} | {at:.3f} | {tr:.3f} | {sum(r[2] for r in rows) / n:.0%} |")


if __name__ == "__main__":
    main()
