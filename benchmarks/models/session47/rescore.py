"""Re-score saved ``cv_jobs.py`` models with scoring-time options changed (session 47): the same
problems the job ranked (its validation set, or its held-out fold), the model file the job saved
beside its JSON, as saved and with each ``--set PART.OPTION=VALUE`` applied (PART: a part of the
model with an ``options`` dataclass: ``forest``, ``memory`` or ``aten_head``; e.g.
``forest.shortlist=256``; or ``scoring``, the model's ``ScoringOptions``, since session 48: e.g.
``scoring.network_shortlist=128``). Files saved before session 48 load without the network
cascade (``network_shortlist`` 0), as they were validated.

Usage: python benchmarks/models/session47/rescore.py RUN.json [RUN.json ...] --set forest.shortlist=256
Prints per run regret@1, regret@5, p95 regret@5, top-1 / stock (val runs) and the handler's top-3,
as saved -> changed, and the mean change in points (100 x log) over the runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks/models/session31"))
sys.path.insert(0, str(ROOT / "scripts"))
import cv_jobs  # noqa: E402
import summarize  # noqa: E402
from cv_model import DEFAULT_COST  # noqa: E402

from torch_diode.evaluate import problem_evals  # noqa: E402
from torch_diode.model import load_model  # noqa: E402

#: ``summarize.pooled``'s figures this prints, and their names here
FIGURES = {"r1": "r1", "r5": "r5", "r5_p95": "p95r5", "kept3": "k3", "vs_stock": "stock"}


def figures(model, scored, stock) -> dict[str, float]:
    """The model's pooled figures on the job's ranked problems (``summarize.pooled`` of
    ``cv_jobs.result_row``'s rows; top-1 / stock only where the problems have stock's pick)."""
    evals = problem_evals(model, scored, stock=stock, max_compile_cost=DEFAULT_COST)
    pooled = summarize.pooled([cv_jobs.result_row(model, e) for e in evals])
    return {name: pooled[key] for key, name in FIGURES.items() if pooled[key] is not None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--set", action="append", required=True, help="PART.OPTION=VALUE (int or float)")
    args = ap.parse_args()
    change: dict[str, dict[str, float]] = {}
    for s in args.set:
        key, value = s.split("=")
        part, option = key.split(".")
        change.setdefault(part, {})[option] = float(value) if "." in value else int(value)
    deltas: dict[str, list[float]] = {}
    for run in args.runs:
        job = json.loads(Path(run).read_text())["job"]
        model = load_model(Path(run).with_suffix(".safetensors"))
        _, scored, stock = cv_jobs.job_data(job)
        before = figures(model, scored, stock)
        for part, kw in change.items():
            if part == "scoring":
                model.scoring = dataclasses.replace(model.scoring, **kw)
            else:
                getattr(model, part).options = dataclasses.replace(getattr(model, part).options, **kw)
        after = figures(model, scored, stock)
        print(job["id"], "  ".join(f"{k} {before[k]:.4f} -> {after[k]:.4f}" for k in before), flush=True)
        for k in before:
            deltas.setdefault(k, []).append(100 * math.log(after[k] / before[k]))
    print(
        "mean change, points:",
        "  ".join(f"{k} {np.mean(v):+.2f} ({sum(x < 0 for x in v)} of {len(v)} better)" for k, v in deltas.items()),
    )


if __name__ == "__main__":
    main()
