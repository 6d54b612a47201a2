"""Session 37: the ranking forest given the neighbour memory's votes as columns (a prototype on
saved models; nothing in the library changes).

The neighbour memory (:mod:`torch_diode.neighbours`) blends what the ``k`` nearest training
problems measured into the network's order with fixed weights; the forest (:mod:`torch_diode.forest`)
re-ranks the shortlist from the features alone. Here the forest also sees, per candidate, the
neighbours' vote: their weighted mean relative log time for that configuration (``-1`` where no
neighbour measured it), the weight of the neighbours that measured it, and that weight's share of
the ``k`` neighbours' weight. A training problem's votes come from its ``k`` nearest *other*
training problems (leave one out), a new problem's from its ``k`` nearest training problems, so
both see votes alike.

For each saved model (``cv_jobs.py`` jobs with ``"save": true``; a cross-validation fold or a
validation-set model) the script rebuilds the training rows as the trainer does, refits the forest
without the votes (``refit``: it must reproduce the saved model's ranking, a check of the
reconstruction) and with them (``votes``), and scores the held-out problems with the saved network,
memory and ATen head (at the trainer's default blend 0.75) and either forest; ``votes-nomem`` is
the vote forest after the network and head without the memory's blend (the votes then enter
through the forest only):

    python benchmarks/models/session37/vote_forest.py DIR [--json OUT.json]

Report as ``session35/variants.py``'s.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session35"))
import variants

import torch_diode.forest as forest_mod
from torch_diode.dataset import read_dataset
from torch_diode.evaluate import read_max_autotune_solution
from torch_diode.features import FEATURE_SPEC, N_PROBLEM_FEATURES, featurize_split
from torch_diode.forest import RankingForest
from torch_diode.model import load_model
from torch_diode.neighbours import NeighbourMemory
from torch_diode.train import TrainOptions, _featurize_problems, _measured, split_problems

N_VOTE = 3
F = len(FEATURE_SPEC)


@contextlib.contextmanager
def wide_forest():
    """The forest module with ``N_VOTE`` columns after the feature spec's (it reads only the length)."""
    saved = forest_mod.FEATURE_SPEC
    forest_mod.FEATURE_SPEC = range(F + N_VOTE)
    try:
        yield
    finally:
        forest_mod.FEATURE_SPEC = saved


def vote_columns(mem: NeighbourMemory, nb: np.ndarray, w: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``[N, N_VOTE]``: the neighbours ``nb`` (weights ``w``)'s vote on memory columns ``cols``."""
    cols = np.where(cols < 0, mem.rel.shape[1], cols)
    num = (w @ mem._votes[nb])[cols]
    den = (w @ mem._have[nb])[cols]
    mean = np.where(den > 0, num / np.maximum(den, 1e-30), -1.0)
    return np.stack([mean, den, den / max(float(w.sum()), 1e-30)], axis=1).astype(np.float32)


def loo_neighbours(mem: NeighbourMemory, i: int, problem) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest memory rows to training problem ``i`` other than itself."""
    options = mem.options
    mem.options = dataclasses.replace(options, k=options.k + 1)
    try:
        nb, w = mem.neighbours(problem)
    finally:
        mem.options = options
    keep = nb != i
    if keep.all():  # itself not among them (a duplicate descriptor tied): drop the farthest
        keep[np.argmin(w)] = False
    return nb[keep], w[keep]


class WithForest:
    """``model``'s network, memory and ATen head, then ``forest`` over the shortlist (``votes``: with
    the vote columns)."""

    def __init__(self, model, forest, votes: bool, blend_memory: bool = True):
        self.model, self.forest, self.votes, self.blend_memory = model, forest, votes, blend_memory

    def predict(self, problem, choices):
        saved, mem = self.model.forest, self.model.memory
        self.model.forest = None
        if not self.blend_memory:
            self.model.memory = None
        try:
            pred = self.model.predict(problem, choices)
        finally:
            self.model.forest, self.model.memory = saved, mem
        x_shared, x_rest = featurize_split(problem, choices, self.model.gpu)
        if self.votes:
            nb, w = mem.neighbours(problem)
            x_rest = np.hstack([x_rest, vote_columns(mem, nb, w, mem.columns(problem, x_rest))])
        return type(pred)(self.forest.rerank(pred.log_time_us, x_shared, x_rest), pred.std)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows_out: dict = {}
    data: dict = {}
    for path in sorted(Path(a.dir).glob("*.safetensors")):
        job = json.loads(path.with_suffix(".json").read_text())["job"]
        hw = job["hw"]
        if hw not in data:
            data[hw] = read_dataset(variants.ROOT / "data" / hw / "train.msgpack")
        ds = data[hw]
        stock = None
        if job["part"] == "val":
            train_ds = ds
            held_ds = read_dataset(variants.ROOT / "data" / hw / "val.msgpack")
            stock = read_max_autotune_solution(variants.ROOT / "data" / hw / "val-stock-picks.json")
        else:
            held = set(variants.fold_of_problems(ds, job["folds"], job["seed"])[job["fold"]])
            train_ds = ds.select_problems(ds.measured_problems() - held)
            held_ds = ds.select_problems(held)
        model = load_model(path)
        variants._set(model.aten_head, blend=0.75)
        opts = TrainOptions(**{"val_fraction": 0, **job.get("set", {}), "seed": job["seed"]})
        fopts = opts.forest_options()
        groups = train_ds.by_problem()
        train_ids, _ = split_problems([g.problem for g in groups], opts.val_fraction, opts.seed)  # the trainer's order
        groups = [groups[i] for i in train_ids]
        problems = [g.problem for g in groups]
        rows = _featurize_problems(train_ds, groups, model.gpu)
        mem = NeighbourMemory.from_measurements(_measured(rows, problems), model.memory.options)
        votes = np.empty((len(rows.y), N_VOTE), dtype=np.float32)
        for i, (p, s, n) in enumerate(zip(problems, rows.starts.tolist(), rows.counts.tolist())):
            nb, w = loo_neighbours(mem, i, p)
            votes[s : s + n] = vote_columns(mem, nb, w, mem.columns(p, rows.x[s : s + n, N_PROBLEM_FEATURES:]))
        refit = RankingForest.fit(rows.x, rows.y, rows.counts, fopts, opts.seed + 2)
        same = all(
            np.array_equal(getattr(refit, t), getattr(model.forest, t)) for t in ("features", "thresholds", "leaves")
        )
        with wide_forest():
            vforest = RankingForest.fit(np.hstack([rows.x, votes]), rows.y, rows.counts, fopts, opts.seed + 2)
        used = np.bincount(vforest.features.reshape(-1), minlength=F + N_VOTE)[F:]
        print(
            f"{path.name}: refit forest {'identical to' if same else 'DIFFERS from'} the saved one; "
            f"vote columns in {used.tolist()} of {vforest.features.size} splits",
            flush=True,
        )
        for name, wrapped in (
            ("refit", WithForest(model, refit, False)),
            ("votes", WithForest(model, vforest, True)),
            ("votes-nomem", WithForest(model, vforest, True, blend_memory=False)),
        ):
            key = f"{hw}-{job['part']}-s{job['seed']}-{name}"
            rows_out[key] = variants.score(wrapped, held_ds, stock, rows_out.get(key), kept=False)
    variants.report(rows_out, a.json)


if __name__ == "__main__":
    main()
