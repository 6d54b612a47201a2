"""Session 50: do seeds' errors average out? Predictions of several saved ``cv_jobs.py`` val runs
averaged, scored on the validation problems.

    python benchmarks/models/session50/seed_ensemble.py KEY RUN.safetensors [RUN.safetensors ...] \\
        [--memory-add FILE ...] [--shortlist N]

Each run's file is scored as ``session49/memswap.py`` scores it (its neighbour memory rebuilt from
the plan's training problems and ``--memory-add``, as the trainer builds it for the run's seed,
read from the job in ``RUN.json``; ``--shortlist`` the network cascade's, 0 for none); then, for
every subset of two or more runs, the mean of their final predicted log times per choice, put in
order as the handler orders them (``ProblemEval.with_predictions``), with
``session47/rescore.py``'s figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
for sub in ("session31", "session47", "session49"):
    sys.path.insert(0, str(ROOT / "benchmarks/models" / sub))
sys.path.insert(0, str(ROOT / "scripts"))
import cv_jobs  # noqa: E402
import summarize  # noqa: E402
from cv_model import DEFAULT_COST  # noqa: E402
from memswap import job_memory  # noqa: E402
from rescore import FIGURES  # noqa: E402

from torch_diode.evaluate import problem_evals  # noqa: E402
from torch_diode.model import load_model  # noqa: E402


def pooled(model, evals) -> str:
    p = summarize.pooled([cv_jobs.result_row(model, e) for e in evals])
    return "  ".join(f"{name} {p[key]:.4f}" for key, name in FIGURES.items() if p[key] is not None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("key")
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--memory-add", nargs="*", default=[])
    ap.add_argument("--shortlist", type=int, default=None)
    a = ap.parse_args()
    scored = []
    for path in a.runs:
        seed = json.loads(Path(path).with_suffix(".json").read_text())["job"]["seed"]
        model = load_model(path)
        if a.shortlist is not None:
            model.scoring = dataclasses.replace(model.scoring, network_shortlist=a.shortlist)
        model.memory, _, problems, stock = job_memory(a.key, seed, a.memory_add)
        evals = problem_evals(model, problems, stock=stock, max_compile_cost=DEFAULT_COST)
        scored.append((model, evals))
        print(f"{Path(path).name} (seed {seed}): {pooled(model, evals)}", flush=True)
    for k in range(2, len(scored) + 1):
        for subset in itertools.combinations(range(len(scored)), k):
            mean = [
                scored[subset[0]][1][j].with_predictions(
                    np.mean([scored[i][1][j].predicted_log_us for i in subset], axis=0)
                )
                for j in range(len(scored[0][1]))
            ]
            print(f"mean of runs {subset}: {pooled(scored[subset[0]][0], mean)}", flush=True)


if __name__ == "__main__":
    main()
