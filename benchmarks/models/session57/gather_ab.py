"""Session 57: the forest's leaf gather, numpy's ``take`` of flat indices
(``RankingForest.score_split``) against ``torch.gather`` per tree (an alternative, not adopted:
slower on one thread), timed inside ``DiodeModel.predict`` of 1,500 candidates
(``scripts/bench_scoring.py``'s problem and choices), one process pinned to one CPU, the two
interleaved round by round, torch on one thread (as ``predict`` scores); both give the same
bits. (Timed alone with torch's two threads the gather looked 1.4x faster than ``take``; on one
thread it is slower, and with two threads on one pinned CPU 7x slower.)

    python benchmarks/models/session57/gather_ab.py MODEL [--rounds 400] [--cpu 0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from bench_scoring import exhaustive_choices

from torch_diode.forest import RankingForest
from torch_diode.model import load_model
from torch_diode.records import Problem


def gather_score_split(self: RankingForest, x_shared: np.ndarray, x_rest: np.ndarray) -> np.ndarray:
    """``score_split`` with the leaf values gathered by ``torch.gather`` from ``[T, 2**D]``."""
    n, r = x_rest.shape
    t, d = self.options.trees, self.options.depth
    cols = np.empty((r + 1, n), dtype=np.float32)
    cols[:r] = x_rest.T
    cols[r] = -np.inf
    feature, threshold = self._split_feature, self._split_threshold
    distinct = np.empty((len(feature), n), dtype=bool)
    for i in range(0, len(feature), 256):
        j = i + 256
        np.greater(np.take(cols, feature[i:j], axis=0), threshold[i:j], out=distinct[i:j])
    bits = np.take(distinct, self._split_of, axis=0)
    prob_bits = x_shared[self._prob_feature] > self._prob_threshold
    prob_code = np.bincount(self._prob_tree, prob_bits * self._prob_weight, minlength=t)
    code = np.einsum("dtn,d->tn", bits.reshape(d, t, n).view(np.uint8), self._level_weights)
    index = torch.from_numpy(code).long().add_(torch.from_numpy(prob_code.astype(np.int64))[:, None])
    return torch.gather(torch.from_numpy(self.leaves), 1, index).numpy().sum(axis=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--cpu", type=int, default=0)
    a = ap.parse_args()
    os.sched_setaffinity(0, {a.cpu})
    torch.set_num_threads(1)  # as inside predict's one-thread block, where a forest using torch would run
    model = load_model(a.model)
    problem = Problem(op="mm", m=4096, n=4096, k=4096, dtype="bfloat16")
    choices = exhaustive_choices(1500)
    take = RankingForest.score_split
    variants = {"take": take, "gather": gather_score_split}
    outs = {}
    for name, fn in variants.items():
        RankingForest.score_split = fn  # type: ignore[method-assign]
        outs[name] = model.predict(problem, choices).log_time_us
    assert np.array_equal(outs["take"], outs["gather"]), "the two gathers disagree"
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(a.rounds):
        for name, fn in variants.items():
            RankingForest.score_split = fn  # type: ignore[method-assign]
            t0 = time.perf_counter()
            model.predict(problem, choices)
            times[name].append((time.perf_counter() - t0) * 1e3)
    RankingForest.score_split = take  # type: ignore[method-assign]
    trees = model.forest.options.trees if model.forest else 0
    print(
        f"{Path(a.model).name} ({trees} trees), CPU {a.cpu}, {a.rounds} rounds: "
        + ", ".join(f"{k} median {statistics.median(v):.3f} ms" for k, v in times.items())
        + "; the same predictions"
    )


if __name__ == "__main__":
    main()
