"""Session 52: the ranking forest boosted from the file's own order (a base margin) instead of
blended with it.

    python benchmarks/models/session52/margin_forest.py oof KEY FOLD [--folds 3] [--out DIR] [--device D]
    python benchmarks/models/session52/margin_forest.py fit KEY TAU [TAU ...] [--seeds 0] [--oof DIR]
    python benchmarks/models/session52/margin_forest.py score KEY OOS TAU:SEED [TAU:SEED ...]

The shipped forest is boosted from zero on the training rows and, in a compile, its scores are
z-standardised and averaged 50/50 with the network's (after the neighbour memory and the ATen
head) over the network's 512 best candidates (``RankingForest.rerank``). The alternative here is
the classic stacking of LambdaRank on a first model: the trees start from the file's own order,
``init = -log_t / TAU`` per row, and learn corrections to it, so the final order is by
``-log_t / TAU + forest score``. For the trees to learn where the file is wrong on problems it
has not seen (as in a compile), ``init`` is the file's prediction out of fold:

``oof``: the rows the shipped forest was fit on (``session51/forest_wave.py``'s: ``cv_jobs.py``'s
``val`` job of the file, the trainer's split and rows) cut into ``--folds`` folds by shape (every
layout and dtype of one (M, N, K, batch) in one fold, drawn with seed 7); for fold ``FOLD`` a model is
trained on the other folds' problems with the file's trainer options but no forest (network,
neighbour memory of those problems, ATen head) and predicts every measured choice of the fold's
problems: ``DIR/oof-KEY-fFOLD.npz`` (each row's index among the forest's rows and its predicted
log time).

``fit``: ``forest.boost`` with the shipped forest's options and seed ``SEED + 2`` (the trainer's)
on the same rows, from ``init = -oof / TAU`` (``oof`` relative to each problem's lowest, in
float16: ``oof_relative``): ``forests/margin-KEY-tTAU-sSEED.npz``.

``score``: the shipped file with its forest replaced by each margin forest (``TAU:SEED``; the
order within the file's shortlist by ``-log_t / TAU + score``, values kept as ``rerank`` keeps
them): validation top-1 / stock, regret@1, regret@5 (``session51/call_study.py``'s measures), the regret of the first Triton
config and the number of ATen top-1 picks (:func:`first_triton`), and OOS top-1 / stock.
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
from call_study import oos_top1, val_figures  # noqa: E402
from forest_wave import ADD  # noqa: E402
from retime import model_file  # noqa: E402

FOLD_SEED = 7


def forest_groups(key: str):
    """The shipped forest's training problems: (dataset, their groups in the order of the forest's
    rows, the ``cv_jobs`` job), as ``train._split_rows`` orders them, without featurizing."""
    from cv_jobs import job_data, train_options

    from torch_diode.train import split_problems

    job = {"hw": key, "part": "val", "seed": 0, "extras": "output", "add": ADD[key]}
    trained_on, _, _ = job_data(job)
    groups = trained_on.by_problem()
    opts = train_options(job)
    train_ids, _ = split_problems([g.problem for g in groups], opts.val_fraction, opts.seed)
    return trained_on, [groups[i] for i in train_ids], job


def forest_rows(key: str):
    """The shipped forest's training rows (``train._featurize_problems`` of :func:`forest_groups`)."""
    from torch_diode.features import gpu_constants
    from torch_diode.train import _featurize_problems

    ds, groups, _ = forest_groups(key)
    return _featurize_problems(ds, groups, gpu_constants(ds.hardware))


def folds_of(groups, folds: int) -> np.ndarray:
    """Each problem's fold: shapes (M, N, K, batch) shuffled with :data:`FOLD_SEED`, dealt round."""
    shapes = sorted({(g.problem.m, g.problem.n, g.problem.k, g.problem.batch) for g in groups})
    perm = np.random.default_rng(FOLD_SEED).permutation(len(shapes))
    fold = {shapes[j]: i % folds for i, j in enumerate(perm)}
    return np.array([fold[(g.problem.m, g.problem.n, g.problem.k, g.problem.batch)] for g in groups])


def cmd_oof(a: argparse.Namespace) -> None:
    import dataclasses

    from cv_jobs import train_options

    from torch_diode.train import train

    ds, groups, job = forest_groups(a.key)
    counts = [len(g.median_by_choice()) for g in groups]  # each problem's rows, as the forest's
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).tolist()
    fold = folds_of(groups, a.folds)
    held = fold == a.fold
    t0 = time.perf_counter()
    opts = dataclasses.replace(train_options(job), forest_trees=0, device=a.device)
    if a.epochs:  # a quick check of the script only
        opts = dataclasses.replace(opts, num_epochs=a.epochs)
    model, _ = train(ds.select_problems({g.problem for g, h in zip(groups, held) if not h}), opts)
    ttrain = time.perf_counter() - t0
    idx, pred = [], []
    for g, start, n, h in zip(groups, starts, counts, held):
        if h:
            choices = [ds.choices[i] for i in g.median_by_choice()]
            idx.append(np.arange(start, start + n))
            pred.append(model.predict(g.problem, choices).log_time_us)
    out = Path(a.out) / f"oof-{a.key}-f{a.fold}.npz"
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, rows=np.concatenate(idx), log_t=np.concatenate(pred).astype(np.float32))
    print(
        f"{a.key} fold {a.fold}/{a.folds}: trained on {int((~held).sum())} problems in {ttrain:.0f} s, "
        f"predicted {int(held.sum())} ({sum(len(i) for i in idx)} rows), {time.perf_counter() - t0:.0f} s",
        flush=True,
    )


def oof_relative(key: str, rows, folds: int, where: Path) -> np.ndarray:
    """Every forest row's out-of-fold prediction relative to its problem's lowest, float16 (what
    ``fit`` boosts from: the order within a problem is all LambdaRank sees, and the tree's 64 MiB
    limit on what goes to the GPU machine leaves no room for the folds' float32 files). Read
    from ``where/oof-KEY.npz``, else made from the folds' files (each row exactly once) and
    written there."""
    packed = where / f"oof-{key}.npz"
    if packed.exists():
        rel = np.load(packed)["rel"]
        if len(rel) != len(rows.y):
            raise ValueError(
                f"{packed}: {len(rel)} rows, the forest's are {len(rows.y)}; delete it to pack the folds again"
            )
        return rel
    out = np.full(len(rows.y), np.nan, dtype=np.float32)
    for f in range(folds):
        z = np.load(where / f"oof-{key}-f{f}.npz")
        if not np.isnan(out[z["rows"]]).all():
            raise ValueError(f"fold {f} repeats rows")
        out[z["rows"]] = z["log_t"]
    if np.isnan(out).any():
        raise ValueError(f"{int(np.isnan(out).sum())} rows have no out-of-fold prediction")
    rel = (out - np.minimum.reduceat(out, rows.starts)[np.repeat(np.arange(len(rows.counts)), rows.counts)]).astype(
        np.float16
    )
    np.savez_compressed(packed, rel=rel)
    return rel


def margin_path(key: str, tau: float, seed: int) -> Path:
    return HERE / "forests" / f"margin-{key}-t{tau:g}-s{seed}.npz"


def cmd_fit(a: argparse.Namespace) -> None:
    from torch_diode.forest import boost
    from torch_diode.model import load_model

    rows = forest_rows(a.key)
    rel = oof_relative(a.key, rows, a.folds, Path(a.oof)).astype(np.float64)
    print(f"{a.key}: {len(rows.counts)} problems, {len(rows.y)} rows", flush=True)
    options = load_model(model_file(a.key, None)).forest.options
    for tau in a.taus:
        for seed in a.seeds:
            out = margin_path(a.key, tau, seed)
            if out.exists():
                continue
            t0 = time.perf_counter()
            f, th, lv = boost(rows.x, rows.y, rows.counts, options, seed + 2, init=-rel / tau)
            out.parent.mkdir(exist_ok=True)
            np.savez_compressed(out, features=f, thresholds=th, leaves=lv)
            print(f"tau {tau:g} seed {seed}: {time.perf_counter() - t0:.0f} s", flush=True)


class MarginForest:
    """A margin forest in a model's place: the file's shortlist ordered by ``-log_t / tau +
    score``, each position keeping the file's k-th lowest value (as ``rerank`` keeps them)."""

    def __init__(self, shipped, tables, tau: float) -> None:
        self.options, self.tables, self.tau = shipped.options, tables, tau

    def rerank(self, log_t: np.ndarray, x_shared: np.ndarray, x_rest: np.ndarray) -> np.ndarray:
        from torch_diode.forest import oblivious_scores

        n, m = len(log_t), self.options.shortlist
        if n < 2:
            return log_t
        short = np.argpartition(log_t, m - 1)[:m] if n > m else np.arange(n)
        x = np.hstack([np.broadcast_to(x_shared, (len(short), len(x_shared))), x_rest[short]])
        total = -np.asarray(log_t[short], np.float64) / self.tau + oblivious_scores(x, *self.tables)
        out = np.array(log_t, dtype=np.float32)
        out[short[np.argsort(-total, kind="stable")]] = np.sort(log_t[short])
        return out


def first_triton(ev) -> str:
    """On validation problems (``retime.evals``): the regret of the model's first Triton config
    (over the best measured, ATen included) and how many top-1 picks are ATen: the two halves of
    the top-1 pick."""
    import math

    regret, aten_picks = [], 0
    for e in ev:
        order = e.ranked()
        aten_picks += e.choices[order[0]].is_aten
        first = next(i for i in order if not e.choices[i].is_aten)
        regret.append(math.log(e.measured_us[first] / (e.oracle_us or e.measured_us.min())))
    return f"first Triton config's regret {math.exp(np.mean(regret)):.4f}, ATen top-1 picks {aten_picks}"


def cmd_score(a: argparse.Namespace) -> None:
    from retime import evals

    from torch_diode.model import load_model

    model = load_model(model_file(a.key, None))
    shipped = model.forest

    def line(name: str) -> str:  # the validation problems ranked once, for both figures
        ev, _ = evals(a.key, model)
        return f"{a.key} {name}: {val_figures(model, a.key, ev=ev)}; {first_triton(ev)}; {oos_top1(model, a.oos)}"

    print(line("shipped"), flush=True)
    for spec in a.forests:
        tau, seed = spec.split(":")
        z = np.load(margin_path(a.key, float(tau), int(seed)))
        model.forest = MarginForest(shipped, (z["features"], z["thresholds"], z["leaves"]), float(tau))
        print(line(f"margin:{spec}"), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("oof")
    o.add_argument("key")
    o.add_argument("fold", type=int)
    o.add_argument("--folds", type=int, default=3)
    o.add_argument("--out", default=str(HERE / "oof"))
    o.add_argument("--device", default="cpu")
    o.add_argument("--epochs", type=int, default=None, help="fewer epochs than the trainer's (a check of the script)")
    o.set_defaults(fn=cmd_oof)
    f = sub.add_parser("fit")
    f.add_argument("key")
    f.add_argument("taus", nargs="+", type=float)
    f.add_argument("--seeds", nargs="+", type=int, default=[0])
    f.add_argument("--folds", type=int, default=3)
    f.add_argument("--oof", default=str(HERE / "oof"))
    f.set_defaults(fn=cmd_fit)
    s = sub.add_parser("score")
    s.add_argument("key")
    s.add_argument("oos")
    s.add_argument("forests", nargs="+", metavar="TAU:SEED")
    s.set_defaults(fn=cmd_score)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
