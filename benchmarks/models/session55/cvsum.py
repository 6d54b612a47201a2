"""Session 55: paired fold figures of ``cv_jobs.py`` fold jobs (geomeans over each fold's problems).

    python benchmarks/models/session55/cvsum.py RESULTS s55-h200-cv3f{fold}-s0-{variant}-nf tw h96m2 --folds 0 1 2

Per fold and variant: regret@1, regret@5, p95 regret@5, and what the handler keeps at top-1 /
top-3 (``k1``, ``k3``; the fastest of what it keeps over the best measured), then the mean over
folds. The folds are grouped by problem, so they rank training problems the fold's model never saw.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session31"))
from summarize import pooled

#: cvsum's names for ``summarize.pooled``'s figures, in print order
FIGURES = {"r1": "r1", "r5": "r5", "p95 r5": "r5_p95", "k1": "kept1", "k3": "kept3"}


def figures(path: Path) -> dict[str, float]:
    """A fold job's figures (``summarize.pooled``), under cvsum's names, and its problem count."""
    p = pooled(json.loads(path.read_text())["rows"])
    return {"n": p["problems"], **{name: p[key] for name, key in FIGURES.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("pattern", help="a job id with {fold} and {variant}")
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--folds", nargs="+", type=int, default=[0, 1, 2])
    a = ap.parse_args()
    keys = tuple(FIGURES)
    means: dict[str, list[dict[str, float]]] = {v: [] for v in a.variants}
    for fold in a.folds:
        for v in a.variants:
            f = figures(Path(a.results) / (a.pattern.format(fold=fold, variant=v) + ".json"))
            means[v].append(f)
            print(f"fold {fold} {v} ({f['n']} problems): " + ", ".join(f"{k} {f[k]:.4f}" for k in keys))
    for v in a.variants:
        print(f"mean over folds {v}: " + ", ".join(f"{k} {np.mean([f[k] for f in means[v]]):.4f}" for k in keys))


if __name__ == "__main__":
    main()
