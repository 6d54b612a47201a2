"""Session 50: is the ATen head (``torch_diode.aten_head``) short of data or of capacity?

    python benchmarks/models/session50/aten_head_study.py refit MODEL KEY [--add FILE ...] [--wave-features SMS]
    python benchmarks/models/session50/aten_head_study.py cv KEY [--add FILE ...] [--wave-features SMS]

``refit``: the head of MODEL fit again (its options and the trainer's seed) on all of the training
problems of ``cv_jobs.py``'s job ``{"hw": KEY, "part": "val", "seed": 0, "extras": "output", "add":
[FILE ...]}`` (the shipped file's: reproduces it), then on random halves and three quarters of
them (three draws each); each time the model's figures on KEY's 178 validation problems
(``session47/rescore.py``'s; network, memory and forest unchanged).

With ``--wave-features SMS`` the head is fit on :func:`wave_features` of the same rows.

``cv``: 5-fold cross-validation of the head alone over the same problems, for head settings and a
nearest-neighbour average of the gap: the mean absolute error of the predicted log ratio of best
ATen to best Triton time, how often its sign is right, and the cost of its wrong signs (``|gap|``
averaged over all problems, in points: 100 x log). ``--wave-features SMS``: with
:func:`wave_features` added to the head's inputs.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks/models/session31"))
sys.path.insert(0, str(ROOT / "benchmarks/models/session47"))
import cv_jobs  # noqa: E402
from rescore import figures  # noqa: E402

from torch_diode import train as T  # noqa: E402
from torch_diode.aten_head import AtenHead, AtenHeadOptions  # noqa: E402

FOLDS = 5


def head_rows(key: str, add: list[str]):
    """The head's training rows as the trainer builds them (``train._aten_gaps`` of both parts of
    the job's split), and the job's data and options."""
    job = {"hw": key, "part": "val", "seed": 0, "extras": "output", "add": add}
    trained_on, scored, stock = cv_jobs.job_data(job)
    opts = cv_jobs.train_options(job)
    _, _, _, rows_tr, rows_va, _ = T._split_rows(trained_on, trained_on.by_problem(), opts)
    gaps = [T._aten_gaps(r) for r in (rows_tr, rows_va)]
    x = np.concatenate([g[0] for g in gaps])
    y = np.concatenate([g[1] for g in gaps])
    return x, y, scored, stock, opts.seed


def cmd_refit(a: argparse.Namespace) -> None:
    from torch_diode.model import load_model

    x, y, scored, stock, seed = head_rows(a.key, a.add)
    model = load_model(a.model)
    options = model.aten_head.options
    if a.wave_features:
        x = wave_features(x, a.wave_features)

    def run(name: str, idx: np.ndarray) -> None:
        head = AtenHead.fit(x[idx], y[idx], options, seed)
        model.aten_head = _WaveHead(head, a.wave_features) if a.wave_features else head
        f = figures(model, scored, stock)
        print(f"{name}: {len(idx)} problems  " + "  ".join(f"{k} {v:.4f}" for k, v in f.items()), flush=True)

    print("as shipped: " + "  ".join(f"{k} {v:.4f}" for k, v in figures(model, scored, stock).items()))
    run("refit on all", np.arange(len(y)))
    for frac in (0.5, 0.75):
        for draw in range(3):
            run(f"{frac:.0%} draw {draw}", np.random.default_rng(100 + draw).permutation(len(y))[: int(frac * len(y))])


class _WaveHead:
    """A head fit on :func:`wave_features` inputs, given the model's problem columns."""

    def __init__(self, head: AtenHead, sms: int) -> None:
        self.head, self.sms, self.options = head, sms, head.options

    def ratio(self, x: np.ndarray) -> np.ndarray:
        return self.head.ratio(wave_features(np.asarray(x), self.sms).astype(np.float32))

    def adjust(self, log_t: np.ndarray, aten: np.ndarray, x_problem: np.ndarray) -> np.ndarray:
        return AtenHead.adjust(self, log_t, aten, x_problem)  # type: ignore[arg-type]


def _mlp(**kw):
    options = dataclasses.replace(AtenHeadOptions(), **kw)
    return lambda xt, yt, xe: AtenHead.fit(xt, yt, options, 0).ratio(xe.astype(np.float32))


def _neighbours(k: int):
    def predict(xt, yt, xe):
        mean, std = xt.mean(0), xt.std(0) + 1e-6
        a, b = (xt - mean) / std, (xe - mean) / std
        d = ((b[:, None, :] - a[None, :, :]) ** 2).sum(-1)
        idx = np.argsort(d, 1)[:, :k]
        w = 1 / (np.take_along_axis(d, idx, 1) + 1e-3)
        return (yt[idx] * w).sum(1) / w.sum(1)

    return predict


VARIANTS = {
    "defaults": _mlp(),
    "hidden 128": _mlp(hidden=128),
    "8 members": _mlp(members=8),
    "1000 epochs": _mlp(epochs=1000),
    "200 epochs": _mlp(epochs=200),
    "huber 0.1": _mlp(huber_delta=0.1),
    "weight decay 1e-2": _mlp(weight_decay=1e-2),
    "learning rate 1e-3": _mlp(learning_rate=1e-3),
    "8 neighbours": _neighbours(8),
    "16 neighbours": _neighbours(16),
}


def wave_features(x: np.ndarray, sms: int) -> np.ndarray:
    """``x`` (problem feature columns) with 37 more from its sizes (recovered from ``log2_m``,
    ``log2_n``, ``log2_k``, ``log2_batch``, the first four columns): for output tiles of 64x64,
    128x64, 128x128, 128x256 and 256x128, the log2 tile count, the last wave's fill on ``sms``
    SMs, the waves (capped at 4) and the share of M and N the tiles do not pad; divisibility of
    M, N, K by 8, 64 and 128; M <= 16, M <= 64, N <= 64. A prototype of what cuBLAS's tile
    quantisation could add to the head's inputs."""
    m, n, k, b = (np.round(2 ** x[:, i].astype(np.float64)).astype(np.int64) for i in range(4))
    cols = []
    for tm, tn in ((64, 64), (128, 64), (128, 128), (128, 256), (256, 128)):
        tiles = np.ceil(m / tm) * np.ceil(n / tn) * b
        waves = tiles / sms
        cols += [np.log2(tiles), tiles / (np.ceil(waves) * sms), np.minimum(waves, 4.0)]
        cols += [m / (np.ceil(m / tm) * tm), n / (np.ceil(n / tn) * tn)]
    for d in (8, 64, 128):
        cols += [(m % d == 0) * 1.0, (n % d == 0) * 1.0, (k % d == 0) * 1.0]
    cols += [(m <= 16) * 1.0, (m <= 64) * 1.0, (n <= 64) * 1.0]
    return np.concatenate([x, np.stack(cols, 1)], 1)


def cmd_cv(a: argparse.Namespace) -> None:
    x, y, *_ = head_rows(a.key, a.add)
    if a.wave_features:
        x = wave_features(x, a.wave_features)
    fold = np.random.default_rng(7).integers(0, FOLDS, len(y))
    print(f"{a.key}: {len(y)} problems, {FOLDS} folds")
    for name, fit_predict in VARIANTS.items():
        t0 = time.perf_counter()
        p = np.zeros_like(y)
        for k in range(FOLDS):
            p[fold == k] = fit_predict(x[fold != k], y[fold != k], x[fold == k])
        wrong = np.sign(p) != np.sign(y)
        print(
            f"{name}: MAE {np.abs(p - y).mean():.4f}  sign right {1 - wrong.mean():.3f}  "
            f"cost of wrong signs {100 * (np.abs(y) * wrong).mean():.2f} points  ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("refit")
    r.add_argument("model")
    r.add_argument("key")
    r.add_argument("--add", nargs="*", default=[])
    r.add_argument("--wave-features", type=int, default=0, metavar="SMS", help="fit on wave_features(SMS)")
    r.set_defaults(fn=cmd_refit)
    c = sub.add_parser("cv")
    c.add_argument("key")
    c.add_argument("--add", nargs="*", default=[])
    c.add_argument("--wave-features", type=int, default=0, metavar="SMS", help="add wave_features(SMS) to the inputs")
    c.set_defaults(fn=cmd_cv)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
