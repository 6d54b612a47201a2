"""Session 40: does training on the problems with exactly one misaligned operand that the plans
were grown by (``CampaignOptions.train_one_misaligned``) help? Paired ``cv_jobs.py`` results:

    python benchmarks/models/session40/extras.py DIR [DIR...] [--json OUT.json]

Each job was run twice, ``"extras": "drop"`` (the 1,100 training problems of earlier sessions)
and ``"extras": "train"`` (those and the collected extras; cross-validation folds and what they
rank are the same in both, ``cv_jobs.job_data``). Per GPU, part (``cv``: the three folds pooled,
``val``) and seed: regret@1, regret@5 and p95 regret@5 of both, and regret@1 by alignment class
(``session39/misaligned.py``'s ``alignment_class``: ``aligned``, ``one-mis`` for A-mis and B-mis,
``both-mis``) with the number of problems.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session39"))
from misaligned import alignment_class

from torch_diode.records import Problem

CLASSES = ("aligned", "one-mis", "both-mis")


def load(dirs):
    """{(hw, part, seed, extras): [rows]} over the result files of ``dirs`` (CV folds pooled)."""
    runs = defaultdict(list)
    for d in dirs:
        for path in sorted(Path(d).glob("s40-*.json")):
            res = json.loads(path.read_text())
            job = res["job"]
            runs[(job["hw"], job["part"], job["seed"], job.get("extras", "drop"))] += res["rows"]
    return runs


def figures(rows):
    r1 = np.log([r["r1"] for r in rows])
    r5 = np.array([r["r5"] for r in rows])
    out = {"n": len(rows), "r1": float(np.exp(r1.mean())), "r5": float(np.exp(np.log(r5).mean()))}
    out["r5_p95"] = float(np.percentile(r5, 95))
    cls = [alignment_class(Problem.from_dict(json.loads(r["p"]))) for r in rows]
    cls = ["one-mis" if c in ("A-mis", "B-mis") else c for c in cls]
    for c in CLASSES:
        sel = [x for x, k in zip(r1, cls) if k == c]
        out[c] = {"n": len(sel), "r1": float(np.exp(np.mean(sel))) if sel else None}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--json")
    a = ap.parse_args()
    runs = load(a.dirs)
    table = []
    for hw, part, seed in sorted({k[:3] for k in runs}):
        drop, train = runs.get((hw, part, seed, "drop")), runs.get((hw, part, seed, "train"))
        if not drop or not train:
            continue
        if sorted(r["p"] for r in drop) != sorted(r["p"] for r in train):
            print(f"{hw} {part} s{seed}: the two runs ranked different problems; skipped")
            continue
        if part == "cv" and len(drop) < 1000:  # a fold missing
            print(f"{hw} {part} s{seed}: {len(drop)} problems ranked, not every fold; skipped")
            continue
        f0, f1 = figures(drop), figures(train)
        table.append({"hw": hw, "part": part, "seed": seed, "drop": f0, "train": f1})
        cls = "  ".join(f"{c} ({f0[c]['n']}) {f0[c]['r1']:.4f}->{f1[c]['r1']:.4f}" for c in CLASSES if f0[c]["n"])
        print(
            f"{hw} {part} s{seed}: r1 {f0['r1']:.4f}->{f1['r1']:.4f} ({100 * np.log(f1['r1'] / f0['r1']):+.2f} pts)  "
            f"r5 {f0['r5']:.4f}->{f1['r5']:.4f}  p95r5 {f0['r5_p95']:.3f}->{f1['r5_p95']:.3f}  | {cls}"
        )
    if a.json:
        Path(a.json).write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main()
