"""Session 51: the shipped file's ranking forest refit with session 50's cuBLAS tile-wave columns,
or on the rows its shortlist would hold.

    python benchmarks/models/session51/forest_wave.py fit KEY SEED [SEED ...] [--variants base wave short]
    python benchmarks/models/session51/forest_wave.py score KEY OOS VARIANT:SEED [...]

``fit``: the rows the shipped file's forest was fit on (``cv_jobs.py``'s ``val`` job of the file:
the H200's with session 49's extra files, the H100's with none; the trainer's split and rows),
then ``forest.boost`` with the file's forest options and seed ``SEED + 2`` (the trainer's) on
those rows (``base``; seed 0 gives the shipped forest, bit for bit, which ``fit`` checks) and on
the rows with the 37 tile-wave columns of ``session50/aten_head_study.wave_features`` appended
(``wave``: tile counts, last-wave fill, waves and padding of five cuBLAS-like output tiles on 132
SMs, divisibility by 8/64/128, small M/N; the same for every candidate of a problem, so they act
through the trees' interactions with the candidates' columns), or on the rows of each problem
that the file's shortlist would hold in a compile (``short``: :func:`shortlist_rows`; 73% of the
H100's rows, 75% of the H200's: the forest learns on what it re-ranks). Writes
``forests/forest-KEY-VARIANT-sSEED.npz`` beside this script (a few tens of KB each).

``score``: the shipped file with each forest in place of its own: the validation set's top-1 /
stock, regret@1, regret@5 (as ``call_study.py`` measures them) and top-1 / stock on OOS
(``call_study.py``'s out-of-sample datasets).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
for _d in ("session31", "session44", "session50", "session51"):
    sys.path.insert(0, str(ROOT / "benchmarks/models" / _d))
from aten_head_study import wave_features  # noqa: E402
from call_study import SMS, oos_top1, val_figures  # noqa: E402
from retime import model_file  # noqa: E402

ADD = {
    "NVIDIA-H200": [f"data/NVIDIA-H200/train-{n}.msgpack" for n in ("active", "cover", "active2")],
    "NVIDIA-H100": [],
}


def wave_columns(x_problem: np.ndarray) -> np.ndarray:
    """``[R, 37]`` tile-wave columns of rows' problem columns ``x_problem [R, S]``."""
    return wave_features(x_problem, SMS)[:, x_problem.shape[1] :].astype(np.float32)


def forest_path(key: str, variant: str, seed: int) -> Path:
    return HERE / "forests" / f"forest-{key}-{variant}-s{seed}.npz"


def cmd_fit(a: argparse.Namespace) -> None:
    from cv_jobs import job_data, train_options

    from torch_diode.features import N_PROBLEM_FEATURES
    from torch_diode.forest import boost
    from torch_diode.model import load_model
    from torch_diode.train import _split_rows

    job = {"hw": a.key, "part": "val", "seed": 0, "extras": "output", "add": ADD[a.key]}
    trained_on, _, _ = job_data(job)
    groups = trained_on.by_problem()
    _, train_ids, _, rows, _, _ = _split_rows(trained_on, groups, train_options(job))
    print(f"{a.key}: {len(rows.counts)} problems, {len(rows.y)} rows", flush=True)
    model = load_model(model_file(a.key, None))
    shipped = model.forest
    make = {
        "base": lambda: (rows.x, rows.y, rows.counts),
        "wave": lambda: (np.hstack([rows.x, wave_columns(rows.x[:, :N_PROBLEM_FEATURES])]), rows.y, rows.counts),
        "short": lambda: shortlist_rows(model, trained_on, [groups[i] for i in train_ids], rows),
    }
    made: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for seed in a.seeds:
        for variant in a.variants:
            out = forest_path(a.key, variant, seed)
            if out.exists():
                continue
            if variant not in made:  # once per variant, for every seed
                made[variant] = make[variant]()
            x, y, counts = made[variant]
            t0 = time.perf_counter()
            f, th, lv = boost(x, y, counts, shipped.options, seed + 2)
            out.parent.mkdir(exist_ok=True)
            np.savez_compressed(out, features=f, thresholds=th, leaves=lv)
            note = ""
            if variant == "base" and seed == 0:
                same = all(
                    np.array_equal(u, v)
                    for u, v in zip((f, th, lv), (shipped.features, shipped.thresholds, shipped.leaves))
                )
                note = f"; the shipped forest, bit for bit: {same}"
            print(f"{variant} seed {seed}: {time.perf_counter() - t0:.0f} s{note}", flush=True)


def shortlist_rows(model, dataset, groups, rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The training rows the forest would see in a compile: per problem, those of its measured
    choices that are among the ``shortlist`` best of ATen and the EXHAUSTIVE Triton configs under
    the handler's compile cost, as the file ranks them before its forest (network, neighbour
    memory, ATen head: what ``RankingForest.rerank`` receives; in-sample for these problems)."""
    from active import model_order

    from torch_diode.config import config

    cost = config.options().max_compile_cost
    m = model.forest.options.shortlist
    forest, model.forest = model.forest, None
    keep = np.zeros(len(rows.y), dtype=bool)
    try:
        for g, start, n in zip(groups, rows.starts.tolist(), rows.counts.tolist()):
            cands, _, pred = model_order(model, g.problem, cost)
            p = np.array([pred[c] for c in cands])
            short = {cands[j] for j in (np.argpartition(p, m - 1)[:m] if len(p) > m else range(len(p)))}
            keep[start : start + n] = [dataset.choices[i] in short for i in g.median_by_choice()]
    finally:
        model.forest = forest
    counts = np.add.reduceat(keep, rows.starts).astype(np.int64)
    print(f"shortlist rows: {keep.sum()} of {len(keep)}, {int((counts > 0).sum())} problems", flush=True)
    return rows.x[keep], rows.y[keep], counts[counts > 0]


class _Refit:
    """A refit forest in a model's place: the file's ``rerank`` with this forest's scores."""

    def __init__(self, shipped, tables, wave: bool) -> None:
        self.options, self.tables, self.wave, self._rerank = shipped.options, tables, wave, type(shipped).rerank

    def score_split(self, x_shared: np.ndarray, x_rest: np.ndarray) -> np.ndarray:
        from torch_diode.forest import oblivious_scores

        x = np.hstack([np.broadcast_to(x_shared, (len(x_rest), len(x_shared))), x_rest])
        if self.wave:
            x = np.hstack([x, np.repeat(wave_columns(np.asarray(x_shared, np.float32)[None, :]), len(x_rest), 0)])
        return oblivious_scores(x, *self.tables)

    def rerank(self, log_t: np.ndarray, x_shared: np.ndarray, x_rest: np.ndarray) -> np.ndarray:
        return self._rerank(self, log_t, x_shared, x_rest)


def cmd_score(a: argparse.Namespace) -> None:
    from torch_diode.model import load_model

    model = load_model(model_file(a.key, None))
    shipped = model.forest
    print(f"{a.key} shipped: {val_figures(model, a.key)}; {oos_top1(model, a.oos)}", flush=True)
    for spec in a.forests:
        variant, seed = spec.split(":")
        z = np.load(forest_path(a.key, variant, int(seed)))
        model.forest = _Refit(shipped, (z["features"], z["thresholds"], z["leaves"]), variant == "wave")
        print(f"{a.key} {variant} seed {seed}: {val_figures(model, a.key)}; {oos_top1(model, a.oos)}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit")
    f.add_argument("key")
    f.add_argument("seeds", nargs="+", type=int)
    f.add_argument("--variants", nargs="+", choices=("base", "wave", "short"), default=["base", "wave"])
    f.set_defaults(fn=cmd_fit)
    s = sub.add_parser("score")
    s.add_argument("key")
    s.add_argument("oos")
    s.add_argument("forests", nargs="+", metavar="VARIANT:SEED")
    s.set_defaults(fn=cmd_score)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
