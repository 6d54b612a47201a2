"""Session 57: the H100's ranking forest started from the H200's (forest transfer).

Session 56 found that the H100's network trained from the H200 file's network ranks better than
one trained from scratch (validation top-1 / stock 1.0215 -> 1.0157 over five seeds); the ranking
forest, which re-orders the network's shortlist, was still fit on the H100's rows alone. Here the
H100 file's forest is replaced by forests that start from the shipped H200 file's:

* ``base``: the H100's own forest (``session51/forest_wave.py fit``: the trainer's rows, seed + 2);
* ``refit``: the H200 forest's 192 tree structures (features, thresholds) kept, their leaf values
  refit in turn on the H100's rows (LambdaRank Newton steps with the forest options' shrinkage,
  L2 and row sampling): the shipped forest's size and scoring cost;
* ``xferN``: the H200 forest as it is, then N more trees boosted on the H100's rows from its
  scores (``forest.boost``'s ``init``: the new trees learn corrections to the H200 forest's order);
  192 + N trees;
* ``selfN`` (the control for ``xferN``): the seed's own ``base`` forest, then N more trees boosted
  the same way on the same rows: as many trees, no other GPU's.

With ``--key NVIDIA-H200`` the same for the H200: its forests from the H100 file's. ``plus``
(with ``--add FILE...``): the GPU's own 192-tree forest fit on its shipped file's training files
and those too (for the H200, session 50's ``train-active3`` and session 46's ``train-cover2``,
which its shipped file does not train on: does its forest gain from more problems, as the H100's
gained from the H200's forest of twice its problems?). ``plusN`` (session 59): the same fit with N trees.
``fromN`` (session 60, with ``--start FILE`` and optionally ``--add``): the forest of the model file
FILE (``{seed}`` in it: the seed's file) as it is, then N more trees boosted from its scores on
the rows of the shipped recipe's files and ``--add``'s.

Datasets are not mixed: every fit reads the H100's timings only; what crosses is the H200
forest. Each forest is scored with the shipped H100 file's network, memory and head on the
H100's 178 validation problems (``call_study.val_figures``).

    python benchmarks/models/session57/forest_xfer.py fit refit xfer96 --seeds 0 1 2 3 4
    python benchmarks/models/session57/forest_xfer.py score base refit xfer96 --seeds 0 1 2 3 4
    python benchmarks/models/session57/forest_xfer.py score bag:base --seeds 0 1 2 3 4   # averaged

``bag:VARIANT``: the given seeds' forests of VARIANT averaged (all their trees, leaf values
divided by their number): what the forest's seed noise costs.
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
from call_study import val_figures  # noqa: E402
from forest_wave import ADD, forest_path  # noqa: E402
from retime import model_file  # noqa: E402

KEY = "NVIDIA-H100"


OTHER = {"NVIDIA-H100": "NVIDIA-H200", "NVIDIA-H200": "NVIDIA-H100"}


def out_path(variant: str, seed: int, key: str = KEY) -> Path:
    """``base``: KEY's own forest of that seed (``session51/forest_wave.py fit``); ``other``: the
    other GPU's own forest of that seed, as it is; else this script's forests of KEY."""
    if variant == "base":
        return forest_path(key, "base", seed)
    if variant == "other":
        return forest_path(OTHER[key], "base", seed)
    return HERE / "forests" / f"forest-{key}-{variant}-s{seed}.npz"


def forest_of(path: Path, options, trees: int | None = None):
    """The forest saved at ``path`` (``np.savez`` of its tables) with ``options``, its size set;
    with ``trees``, its first ``trees`` trees (a shorter fit of the same boosting, session 60)."""
    import dataclasses

    from torch_diode.forest import RankingForest

    z = np.load(path)
    t = len(z["features"]) if trees is None else trees
    opts = dataclasses.replace(options, trees=t)
    return RankingForest(z["features"][:t], z["thresholds"][:t], z["leaves"][:t], opts)


def refit(x, y, counts, feats, thrs, options, seed: int) -> np.ndarray:
    """Leaf values of the trees ``feats``/``thrs`` refit on rows ``x`` in turn (``forest.boost``'s
    Newton step and row sampling, the structures fixed)."""
    from torch_diode.forest import _Padded, relevance_gains

    o = options
    rng = np.random.default_rng(seed)
    group, gains = relevance_gains(y, counts, o)
    pad = _Padded(counts)
    scores = np.zeros(len(x), dtype=np.float64)
    t, d = feats.shape
    leaves = np.zeros((t, 2**d), dtype=np.float32)
    weights = (1 << np.arange(d - 1, -1, -1)).astype(np.int64)
    for tree in range(t):
        grad, hess = pad.lambdas(scores, gains, o.top)
        rows = (rng.random(len(counts)) < o.row_fraction)[group]
        leaf = ((x[:, feats[tree]] > thrs[tree]) * weights).sum(axis=1)
        gs = np.bincount(leaf[rows], weights=grad[rows], minlength=2**d)
        hs = np.bincount(leaf[rows], weights=hess[rows], minlength=2**d)
        leaves[tree] = (-gs / (hs + o.l2) * o.learning_rate).astype(np.float32)
        scores += leaves[tree][leaf]
    return leaves


def cmd_fit(a: argparse.Namespace) -> None:
    import dataclasses

    import torch
    from cv_jobs import job_data, train_options

    from torch_diode.forest import RankingForest, boost
    from torch_diode.model import load_model
    from torch_diode.train import _split_rows

    if a.threads:
        torch.set_num_threads(a.threads)
    key = a.key
    plus = [v for v in a.variants if v.startswith("plus")]
    cont = [v for v in a.variants if v.startswith("from")]
    if cont and (cont != a.variants or not a.start):
        raise SystemExit("fit fromN (alone) takes --start FILE (and --add FILE... for more rows)")
    if not cont and (bool(plus) != bool(a.add) or (a.add and plus != a.variants)):
        raise SystemExit("fit plus / plusN (alone) take --add FILE...; the other variants take no --add")
    job = {"hw": key, "part": "val", "seed": 0, "extras": "output", "add": ADD[key] + (a.add or [])}
    trained_on, _, _ = job_data(job)
    groups = trained_on.by_problem()
    _, _, _, rows, _, _ = _split_rows(trained_on, groups, train_options(job))
    x, y, counts = rows.x, rows.y, rows.counts
    print(f"{key}: {len(counts)} problems, {len(y)} rows", flush=True)
    own = load_model(model_file(key, None)).forest
    other = load_model(model_file(OTHER[key], None)).forest  # the start: the other GPU's shipped forest
    # (the H200's xferN forests of gpu-fit.sh xfer started from session 56's H100 file, 192 trees;
    # the H100 file shipped since has 288)
    assert other.options.depth == own.options.depth
    for seed in a.seeds:
        for variant in a.variants:
            out = Path(a.out) / out_path(variant, seed, key).name if a.out else out_path(variant, seed, key)
            if out.exists():
                continue
            t0 = time.perf_counter()
            if variant == "refit":
                f, th = other.features, other.thresholds
                lv = refit(x, y, counts, f, th, own.options, seed + 2)
            elif variant.startswith(("xfer", "self", "from")):  # a forest continued: init_forest's fit
                if variant.startswith("xfer"):
                    begin = other
                elif variant.startswith("self"):  # the control: the seed's own forest
                    begin = forest_of(out_path("base", seed, key), own.options)
                else:  # from: --start's forest
                    begin = load_model(a.start.format(seed=seed)).forest
                options = dataclasses.replace(own.options, trees=int(variant[4:]))
                grown = RankingForest.fit(x, y, counts, options, seed + 2, start=begin)
                f, th, lv = grown.features, grown.thresholds, grown.leaves
            elif variant.startswith("plus"):  # the trainer's forest on the --add files' problems as well
                options = dataclasses.replace(own.options, trees=int(variant[4:] or own.options.trees))
                f, th, lv = boost(x, y, counts, options, seed + 2)
            else:
                raise SystemExit(f"unknown variant {variant!r}")
            out.parent.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(out, features=f, thresholds=th, leaves=lv)
            print(f"{key} {variant} seed {seed}: {len(f)} trees, {time.perf_counter() - t0:.0f} s", flush=True)


def cmd_score(a: argparse.Namespace) -> None:
    import dataclasses

    from torch_diode.forest import RankingForest
    from torch_diode.model import load_model

    key = a.key
    model = load_model(model_file(key, None))
    opts = model.forest.options
    if a.shortlist:
        opts = dataclasses.replace(opts, shortlist=a.shortlist)
    if a.blend is not None:
        opts = dataclasses.replace(opts, blend=a.blend)
    how = f"shortlist {opts.shortlist}" + (f", blend {opts.blend}" if a.blend is not None else "")
    for variant in a.variants:
        if variant.startswith("bag:"):  # bag:VARIANT: the seeds' forests averaged (their trees, leaves / n)
            zs = [np.load(out_path(variant[4:], seed, key)) for seed in a.seeds]
            f = np.concatenate([z["features"] for z in zs])
            th = np.concatenate([z["thresholds"] for z in zs])
            lv = np.concatenate([z["leaves"] for z in zs]) / len(zs)
            model.forest = RankingForest(f, th, lv, dataclasses.replace(opts, trees=len(f)))
            print(f"{key} seeds {a.seeds} {variant} ({how}): {val_figures(model, key)}", flush=True)
            continue
        for seed in a.seeds:
            model.forest = forest_of(out_path(variant, seed, key), opts)
            print(f"{key} seed {seed} {variant} ({how}): {val_figures(model, key)}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=("fit", "score"))
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--blend", type=float, help="score: the forest's blend weight (default: the file's, 0.5)")
    ap.add_argument("--key", default=KEY, help="the GPU whose forests are fit (from the other's) or scored")
    ap.add_argument("--out", help="fit: write the forests here instead of beside this script")
    ap.add_argument("--threads", type=int, help="fit: torch threads (1 for parallel processes)")
    ap.add_argument("--add", nargs="+", help="fit plus / plusN / fromN: more of the GPU's training files for its rows")
    ap.add_argument("--start", help="fit fromN: the model file whose forest is continued ({seed}: the seed's)")
    ap.add_argument("--shortlist", type=int, help="score: the forest re-ranks this many (default: the file's, 512)")
    a = ap.parse_args()
    (cmd_fit if a.cmd == "fit" else cmd_score)(a)


if __name__ == "__main__":
    main()
