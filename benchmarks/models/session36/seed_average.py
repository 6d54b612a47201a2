"""Session 36: what averaging the predictions of whole models trained with different seeds would
give, under cross-validation and on the validation set, from saved models (``cv_jobs.py`` jobs
with ``"save": true``; fold models of the different seeds must share one split, which the
``"fold_seed"`` key of a job gives):

    python benchmarks/models/session36/seed_average.py DIR_A DIR_B [...] [--head 0.75] [--json OUT]

Every ``DIR`` holds one model per (GPU, part, fold), from one seed. For each held-out problem each
model's predicted log times (``problem_evals``, at the handler's compile-cost cap) are averaged
over the models, and the average is scored like one model: geomean regret@1 and regret@5 (p95),
regret@1's p95 and how many problems' top-1 pick is over 1.5x the best, ATen top-1 picks and, on
the validation set, the top-1 pick over stock's. Each model alone is scored the same way, so the
lines for one seed reproduce that seed's ``summarize.py`` figures. ``--head`` sets the ATen
head's blend of every model first (a scoring-time setting, as in ``session35/variants.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from torch_diode.dataset import read_dataset
from torch_diode.evaluate import problem_evals, read_max_autotune_solution
from torch_diode.model import load_model

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "benchmarks" / "models" / "session35"))
sys.path.insert(0, str(ROOT / "benchmarks" / "models" / "session31"))
from cv_jobs import fold_seed_of  # noqa: E402
from cv_model import DEFAULT_COST, fold_of_problems  # noqa: E402
from variants import _set, add, new_acc, report  # noqa: E402


def models_by_run(d):
    """``{(hw, part, fold, fold_seed, folds): (path, seed)}`` of one folder's saved models (the
    last three None for a validation model)."""
    out = {}
    for path in sorted(Path(d).glob("*.safetensors")):
        job = json.loads(path.with_suffix(".json").read_text())["job"]
        fold_seed = fold_seed_of(job) if job["part"] == "cv" else None
        out[(job["hw"], job["part"], job.get("fold"), fold_seed, job.get("folds"))] = (path, job["seed"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--head", type=float, default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    runs = [models_by_run(d) for d in a.dirs]
    common = sorted(set.intersection(*(set(r) for r in runs)), key=str)
    data, rows = {}, {}
    for key in common:
        hw, part, fold, fold_seed, folds = key
        if hw not in data:
            data[hw] = read_dataset(ROOT / "data" / hw / "train.msgpack")
        if part == "val":
            ds = read_dataset(ROOT / "data" / hw / "val.msgpack")
            stock = read_max_autotune_solution(ROOT / "data" / hw / "val-stock-picks.json")
        else:
            held = set(fold_of_problems(data[hw], folds, fold_seed)[fold])
            ds, stock = data[hw].select_problems(held), None
        per_model = []
        seeds = []
        for r in runs:
            path, seed = r[key]
            model = load_model(path)
            if a.head is not None:
                _set(model.aten_head, blend=a.head)
            per_model.append(list(problem_evals(model, ds, stock=stock, max_compile_cost=DEFAULT_COST)))
            seeds.append(seed)
        for evals in zip(*per_model):
            e = evals[0]
            for other in evals[1:]:
                if other.problem != e.problem or not np.array_equal(other.measured_us, e.measured_us):
                    raise SystemExit(f"{key}: the models' evaluations do not line up")
            for s, ei in zip(seeds, evals):
                add(rows.setdefault(f"{hw}-{part}-s{s}", new_acc()), e, ei.predicted_log_us)
            avg = np.mean([ei.predicted_log_us for ei in evals], axis=0)
            add(rows.setdefault(f"{hw}-{part}-avg" + "".join(map(str, seeds)), new_acc()), e, avg)
        print(f"scored {key}", flush=True)
    report(rows, a.json, width=28)


if __name__ == "__main__":
    main()
