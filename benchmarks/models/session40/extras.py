"""Session 40: does training on the problems with exactly one misaligned operand that the plans
were grown by (``CampaignOptions.train_one_misaligned``) help? Paired ``cv_jobs.py`` results:

    python benchmarks/models/session40/extras.py DIR [DIR...] [--json OUT.json]

Each job was run twice, ``"extras": "drop"`` (the 1,100 training problems of earlier sessions)
and ``"extras": "train"`` (those and the collected extras; cross-validation folds and what they
rank are the same in both, ``cv_jobs.job_data``). Per GPU, part (``cv``: the three folds pooled,
``val``) and seed: regret@1, regret@5 and p95 regret@5 of both, and regret@1 by alignment class
(``session39/misaligned.py``'s ``alignment_class``: ``aligned``, ``one-mis`` for A-mis and B-mis,
``both-mis``) with the number of problems. Jobs with ``"also"`` scoring-time changes
(``jobs-local4.json``: the neighbour memory's ``alignment_weight`` 16 instead of 4) add the
variants ``drop+<name>`` and ``train+<name>``; every variant is compared with ``drop``.

Session 41 (``--runs 's4[01]-*'``): its jobs train with features version 4 (the output's
alignment, ``benchmarks/models/session41/``) and ``"extras": "output"``, the variant ``output``,
paired with session 40's ``drop`` runs of the same GPU, part and seed; the ``aligned`` class is
split into ``aligned`` and ``out-mis`` (operands aligned, the output's rows not:
``features.output_aligned16``).
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

from torch_diode.features import output_aligned16
from torch_diode.records import Problem

CLASSES = ("aligned", "out-mis", "one-mis", "both-mis")


def load(dirs, pattern="s40*-*.json"):
    """{(hw, part, seed, variant): [rows]} over the result files of ``dirs`` (CV folds pooled).
    A variant is the job's ``extras``, and ``<extras>+<name>`` for each of its ``"also"``
    scoring-time changes (``cv_jobs.py``)."""
    runs = defaultdict(list)
    for d in dirs:
        for path in sorted(Path(d).glob(pattern)):
            res = json.loads(path.read_text())
            job = res["job"]
            key = (job["hw"], job["part"], job["seed"])
            extras = job.get("extras", "drop")
            runs[(*key, extras)] += res["rows"]
            for name, rows in res.get("also", {}).items():
                runs[(*key, f"{extras}+{name}")] += rows
    return runs


def klass(p):
    """``alignment_class`` with one-misaligned operands pooled and ``out-mis`` split off ``aligned``."""
    c = alignment_class(p)
    if c == "aligned" and not output_aligned16(p):
        return "out-mis"
    return "one-mis" if c in ("A-mis", "B-mis") else c


def figures(rows):
    r1 = np.log([r["r1"] for r in rows])
    r5 = np.array([r["r5"] for r in rows])
    out = {"n": len(rows), "r1": float(np.exp(r1.mean())), "r5": float(np.exp(np.log(r5).mean()))}
    out["r5_p95"] = float(np.percentile(r5, 95))
    cls = [klass(Problem.from_dict(json.loads(r["p"]))) for r in rows]
    for c in CLASSES:
        sel = [x for x, k in zip(r1, cls) if k == c]
        out[c] = {"n": len(sel), "r1": float(np.exp(np.mean(sel))) if sel else None}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--json")
    ap.add_argument("--runs", default="s40*-*.json", help="result files to read (a glob)")
    a = ap.parse_args()
    runs = load(a.dirs, a.runs)
    table = []
    for hw, part, seed in sorted({k[:3] for k in runs}):
        drop = runs.get((hw, part, seed, "drop"))
        for variant in sorted(k[3] for k in runs if k[:3] == (hw, part, seed) and k[3] != "drop"):
            train = runs[(hw, part, seed, variant)]
            if not drop or sorted(r["p"] for r in drop) != sorted(r["p"] for r in train):
                print(f"{hw} {part} s{seed} {variant}: no drop run of the same problems; skipped")
                continue
            if part == "cv" and len(drop) < 1000:  # a fold missing
                print(f"{hw} {part} s{seed}: {len(drop)} problems ranked, not every fold; skipped")
                continue
            f0, f1 = figures(drop), figures(train)
            table.append({"hw": hw, "part": part, "seed": seed, "variant": variant, "drop": f0, variant: f1})
            cls = "  ".join(f"{c} ({f0[c]['n']}) {f0[c]['r1']:.4f}->{f1[c]['r1']:.4f}" for c in CLASSES if f0[c]["n"])
            print(
                f"{hw} {part} s{seed} {variant}: r1 {f0['r1']:.4f}->{f1['r1']:.4f} "
                f"({100 * np.log(f1['r1'] / f0['r1']):+.2f} pts)  r5 {f0['r5']:.4f}->{f1['r5']:.4f}  "
                f"p95r5 {f0['r5_p95']:.3f}->{f1['r5_p95']:.3f}  | {cls}"
            )
    if a.json:
        Path(a.json).write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main()
