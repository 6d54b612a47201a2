"""Session 35: scoring-time variants of saved models, on the cross-validation folds and the
validation set they were trained for (``cv_jobs.py`` jobs with ``"save": true`` write
``<id>.safetensors`` beside ``<id>.json``). Each variant changes only what
:meth:`DiodeModel.predict` does after training (a part left out, or a blend weight), so one
training run per fold serves them all:

    python benchmarks/models/session35/variants.py DIR [--json OUT.json]

Variants: ``default``; ``nohead`` (the ATen head left out); ``head25`` / ``head75`` (its blend
0.25 / 0.75, default 0.5); ``fb40`` / ``fb60`` (the forest's blend 0.4 / 0.6, default 0.5);
``nomem`` (the neighbour memory left out). Figures per GPU and part (CV folds pooled): geomean
regret@1 and regret@5 (p95), what the handler keeps at top-3 over the best (``k3``), ATen top-1
picks, and on the validation set the top-1 pick over stock's; regret@1's p95 and how many
problems' top-1 pick is over 1.5x the best.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

from torch_diode.dataset import read_dataset
from torch_diode.demo import best_measured_us, handler_keeps
from torch_diode.evaluate import model_order, problem_evals, read_max_autotune_solution, regret_at_k
from torch_diode.model import load_model

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
from cv_model import DEFAULT_COST, fold_of_problems  # noqa: E402


def _set(part, **kw):
    part.options = dataclasses.replace(part.options, **kw)


VARIANTS = {
    "default": lambda m: None,
    "nohead": lambda m: setattr(m, "aten_head", None),
    "head25": lambda m: _set(m.aten_head, blend=0.25),
    "head75": lambda m: _set(m.aten_head, blend=0.75),
    "fb40": lambda m: _set(m.forest, blend=0.4),
    "fb60": lambda m: _set(m.forest, blend=0.6),
    "nomem": lambda m: setattr(m, "memory", None),
}


def gm(x):
    return float(np.exp(np.mean(np.log(x))))


def new_acc():
    """An empty accumulator of :func:`add` and :func:`score`, for :func:`summary`."""
    return {"r1": [], "r5": [], "k3": [], "aten": 0, "stock": []}


def add(acc, e, pred):
    """Add problem ``e`` (a ``problem_evals`` item) as ranked by the predicted log times ``pred``
    to ``acc``: regret@1, regret@5, whether the top-1 pick is ATen, the top-1 pick over stock's
    where ``e`` has it."""
    r = regret_at_k(e.measured_us, pred, (1, 5), oracle_us=e.oracle_us)
    acc["r1"].append(r[1])
    acc["r5"].append(r[5])
    top = int(model_order(pred)[0])
    acc["aten"] += bool(e.choices[top].is_aten)
    if e.stock_us:
        acc["stock"].append(float(e.measured_us[top] / e.stock_us))


def score(model, ds, stock=None, acc=None, kept=True):
    """Add each problem of ``ds`` as ``model`` ranks it to ``acc`` (:func:`add`'s figures and what
    the handler keeps at top-3 unless ``kept`` is False); returns ``acc``."""
    acc = acc if acc is not None else new_acc()
    for e in problem_evals(model, ds, stock=stock, max_compile_cost=DEFAULT_COST):
        add(acc, e, e.predicted_log_us)
        if kept:
            acc["k3"].append(float(e.measured_us[handler_keeps(model, e, (3,))[3]].min() / best_measured_us(e)))
    return acc


def summary(acc):
    """The pooled figures of :func:`score`'s lists."""
    return {
        "problems": len(acc["r1"]),
        "r1": gm(acc["r1"]),
        "r1_p95": float(np.percentile(acc["r1"], 95)),
        "r1_over_1.5": int(np.sum(np.asarray(acc["r1"]) > 1.5)),
        "r5": gm(acc["r5"]),
        "r5_p95": float(np.percentile(acc["r5"], 95)),
        "k3": gm(acc["k3"]) if acc["k3"] else None,
        "aten_picks": acc["aten"],
        "vs_stock": gm(acc["stock"]) if acc["stock"] else None,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--json", default=None)
    ap.add_argument("--variants", nargs="*", default=list(VARIANTS))
    a = ap.parse_args()
    rows = {}
    data = {}
    for path in sorted(Path(a.dir).glob("*.safetensors")):
        job = json.loads(path.with_suffix(".json").read_text())["job"]
        hw = job["hw"]
        if hw not in data:
            data[hw] = read_dataset(ROOT / "data" / hw / "train.msgpack")
        if job["part"] == "val":
            ds = read_dataset(ROOT / "data" / hw / "val.msgpack")
            stock = read_max_autotune_solution(ROOT / "data" / hw / "val-stock-picks.json")
        else:
            held = set(fold_of_problems(data[hw], job["folds"], job["seed"])[job["fold"]])
            ds, stock = data[hw].select_problems(held), None
        for v in a.variants:
            model = load_model(path)  # fresh: each variant changes one part
            VARIANTS[v](model)
            key = f"{hw}-{job['part']}-s{job['seed']}-{v}"
            rows[key] = score(model, ds, stock, rows.get(key))
        print(f"scored {path.name}", flush=True)
    report(rows, a.json)


def report(rows, json_path=None, width=34):
    """Print one line of :func:`summary` per accumulator of ``rows`` (by key) and write them all
    to ``json_path`` where given (``session36/seed_average.py`` reports the same way)."""
    table = {}
    for key, acc in sorted(rows.items()):
        table[key] = t = summary(acc)
        vs = f" vs_stock {t['vs_stock']:.4f}" if t["vs_stock"] else ""
        k3 = f"k3 {t['k3']:.4f} " if t["k3"] is not None else ""
        print(
            f"{key:{width}s} n={t['problems']:5d} r1 {t['r1']:.4f} p95 {t['r1_p95']:.3f} >1.5 {t['r1_over_1.5']:3d} "
            f"r5 {t['r5']:.4f} p95r5 {t['r5_p95']:.3f} "
            f"{k3}aten {t['aten_picks']}{vs}"
        )
    if json_path:
        Path(json_path).write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
