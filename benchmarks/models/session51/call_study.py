"""Session 51: the ATen-or-Triton call and other scoring-time changes to the top-1 pick, on each
GPU's validation set and on problems no part of the shipped file saw.

    python benchmarks/models/session51/call_study.py aten-out KEY
    python benchmarks/models/session51/call_study.py stack KEY OOS
    python benchmarks/models/session51/call_study.py knobs KEY OOS
    python benchmarks/models/session51/call_study.py prior KEY OOS
    python benchmarks/models/session51/call_study.py risk KEY OOS

OOS: a dataset of session 44's kind (``active.py run``: ATen, the model's first 20 Triton configs,
Inductor's DEFAULT candidates, 6 random) on problems the shipped file was not trained on and does
not hold in its neighbour memory: ``data/NVIDIA-H200/train-active3.msgpack`` (session 50) for the
H200 file of session 49, ``data/NVIDIA-H100/train-active.msgpack`` (session 44) for the H100 file
of session 41. There the model ranks ATen and the EXHAUSTIVE Triton configs under the handler's
compile cost (``active.py model_order``), and its top-1 is compared with stock's pick of the full
space (``stock_picks_from_full_space``); a top-1 pick that was not measured is counted apart.

``aten-out``: the ranking forest re-ranks the Triton configs only, ATen keeping the head-adjusted
network value (so the head's gap decides the call), with the file's head and with heads that
return the measured gap to the best Triton config or to the model's first one (a perfect call).

``stack``: the call as a shift ``b`` (ATen iff its final predicted log time is below the first
Triton config's plus ``b``; also on the head's and the network's gaps), and ridge regressions of
the measured ``log(ATen / first Triton)`` on the call's inputs (final gap, head gap, network gaps,
spreads, session 50's tile-wave columns) fit on OOS and scored on the validation set, with 5-fold
cross-validation within OOS, and fit on the validation set itself (in-sample and 5-fold: what the
inputs can tell at best).

``knobs``: the ranking forest's and the ATen head's blend. ``prior``: Inductor's DEFAULT
candidates' predicted log time lowered by ``delta`` (a prior for the hand-picked configs).
``risk``: the order by predicted log time plus ``lam`` times the ensemble's spread.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
for _d in ("session44", "session50"):
    sys.path.insert(0, str(ROOT / "benchmarks/models" / _d))
from aten_head_study import wave_features  # noqa: E402
from call_diagnostics import _OracleHead  # noqa: E402
from retime import evals, model_file  # noqa: E402

SMS = 132  # H100 SXM and H200: 132 SMs


@functools.cache
def oos_items(path: str):
    """Per OOS problem with stock's pick: (problem, candidates, measured {choice: us}, stock's us)."""
    from active import candidates

    from torch_diode.collect.campaign import stock_picks_from_full_space
    from torch_diode.config import config
    from torch_diode.dataset import read_dataset

    ds = read_dataset(ROOT / path)
    stock, _ = stock_picks_from_full_space(ds)
    cost = config.options().max_compile_cost
    out = []
    for pt in ds.by_problem():
        if pt.problem in stock:
            cands = candidates(pt.problem, cost)
            med = {ds.choices[c]: t for c, t in pt.median_by_choice().items()}
            out.append((pt.problem, cands, med, stock[pt.problem].time_us))
    return out


def oos_log_ratios(model, items, order: Callable | None = None) -> list[float | None]:
    """Per item of :func:`oos_items`: log(the model's top-1 / stock's pick), None where the top-1
    pick was not measured; ``order(problem, cands, prediction)`` -> the order (default:
    ``ranking.order_of`` of the predicted log times, as the handler ranks)."""
    out: list[float | None] = []
    for p, cands, med, st in items:
        top = cands[(order or _order)(p, cands, model.predict(p, cands))[0]]
        out.append(math.log(med[top] / st) if top in med else None)
    return out


def oos_summary(ratios: list[float | None]) -> str:
    """The OOS line of :func:`oos_log_ratios`' ratios."""
    xs = [x for x in ratios if x is not None]
    miss = len(ratios) - len(xs)
    return f"OOS top-1 / stock {math.exp(np.mean(xs)):.4f} ({len(xs)} problems, {miss} top-1 picks not measured)"


def oos_top1(model, path: str, order: Callable | None = None) -> str:
    """The model's top-1 / stock on OOS (``order`` as in :func:`oos_log_ratios`)."""
    return oos_summary(oos_log_ratios(model, oos_items(path), order))


def _order(p, cands, pr):
    from torch_diode.ranking import order_of

    return order_of(p, cands, pr.log_time_us)


def val_figures(model, key: str, order: Callable | None = None, ev: list | None = None) -> str:
    """top-1 / stock, regret@1, regret@5 and its p95 on KEY's validation problems (as
    ``validate-max-autotune`` ranks them; ``order`` as in :func:`oos_top1`; ``ev``: the model's
    ``retime.evals`` of them where the caller has them already)."""
    if ev is None:
        ev, _ = evals(key, model)
    t1, r1, r5 = [], [], []
    for e in ev:
        o = order(e.problem, list(e.choices), model.predict(e.problem, list(e.choices))) if order else e.ranked()
        best = e.oracle_us or e.measured_us.min()
        r1.append(math.log(e.measured_us[o[0]] / best))
        r5.append(math.log(e.measured_us[o[:5]].min() / best))
        if e.stock_us is not None:
            t1.append(math.log(e.measured_us[o[0]] / e.stock_us))
    g = lambda v: math.exp(np.mean(v))  # noqa: E731
    return (
        f"val top-1 / stock {g(t1):.4f}, regret@1 {g(r1):.4f}, regret@5 {g(r5):.4f} "
        f"(p95 {math.exp(np.percentile(r5, 95)):.4f})"
    )


class AtenOutForest:
    """The file's forest re-ranking the Triton configs only; ATen rows keep their value."""

    def __init__(self, forest) -> None:
        from torch_diode.model import _KIND_ATEN

        self.forest, self.options, self.col = forest, forest.options, _KIND_ATEN

    def rerank(self, log_t: np.ndarray, x_shared: np.ndarray, x_rest: np.ndarray) -> np.ndarray:
        tri = x_rest[:, self.col] <= 0.5
        out = np.array(log_t, dtype=np.float32)
        out[tri] = self.forest.rerank(log_t[tri], x_shared, x_rest[tri])
        return out


def _x_shared(model, e) -> bytes:
    from torch_diode.features import featurize_split_indexed

    return np.asarray(featurize_split_indexed(e.problem, e.choices, model.gpu)[0], dtype=np.float32).tobytes()


def cmd_aten_out(a: argparse.Namespace) -> None:
    from torch_diode.model import load_model

    model = load_model(model_file(a.key, None))
    print(f"as shipped: {val_figures(model, a.key)}", flush=True)
    forest, head = model.forest, model.aten_head
    model.forest = AtenOutForest(forest)
    print(f"ATen out of the forest's shortlist: {val_figures(model, a.key)}", flush=True)
    best, first = {}, {}
    for e in evals(a.key, model)[0]:
        aten = np.array([c.is_aten for c in e.choices])
        t = next(j for j in e.ranked() if not aten[j])
        k = _x_shared(model, e)
        best[k] = math.log(e.measured_us[aten].min() / e.measured_us[~aten].min())
        first[k] = math.log(e.measured_us[aten].min() / e.measured_us[t])
    for name, truth in (("best Triton config", best), ("the model's first Triton config", first)):
        for blend in (head.options.blend, 1.0):
            model.aten_head = _OracleHead(dataclasses.replace(head.options, blend=blend), truth)
            print(f"ATen out, head = measured gap to {name}, blend {blend}: {val_figures(model, a.key)}", flush=True)


# -- the call's inputs and the stacked call ----------------------------------------------------------
def call_row(model, problem, cands, meas, stock_us) -> dict | None:
    """The call between the model's first ATen choice and first Triton config: its inputs and the
    measured outcome (None when either is not measured)."""
    from torch_diode.features import featurize_split_indexed
    from torch_diode.ranking import cliff_penalty, order_of

    head, forest = model.aten_head, model.forest
    model.aten_head, model.forest = None, None
    p0 = model.predict(problem, cands).log_time_us.astype(np.float64)  # the network (and memory)
    model.aten_head = head
    p1 = model.predict(problem, cands).log_time_us.astype(np.float64)  # and the head
    model.forest = forest
    pr = model.predict(problem, cands)
    p2, sd = pr.log_time_us.astype(np.float64), pr.std.astype(np.float64)
    order = order_of(problem, cands, p2)
    aten = np.array([c.is_aten for c in cands])
    ia, it = next(j for j in order if aten[j]), next(j for j in order if not aten[j])
    if meas[ia] is None or meas[it] is None:
        return None
    pen = cliff_penalty(problem, cands)
    xs = np.asarray(featurize_split_indexed(problem, cands, model.gpu)[0], dtype=np.float32)
    inputs = [
        p2[ia] - p2[it] - (pen[it] if pen is not None else 0.0),  # the final gap: the file's call is its sign
        float(head.ratio(xs[None, :])[0]),
        p1[aten].min() - p1[~aten].min(),
        p0[aten].min() - p0[~aten].min(),
        sd[ia],
        sd[it],
    ]
    return {
        "x": np.array(inputs),
        "xs": xs,
        "y": math.log(meas[ia] / meas[it]),
        "la": math.log(meas[ia]),
        "lt": math.log(meas[it]),
        "stock": math.log(stock_us) if stock_us else math.nan,
    }


INPUTS = {"gap": [0], "gap+head": [0, 1], "gaps": [0, 1, 2, 3], "gaps+spread": [0, 1, 2, 3, 4, 5]}


def call_matrix(rows: list[dict], which: str) -> np.ndarray:
    x = np.stack([r["x"] for r in rows])[:, INPUTS[which.removesuffix("+wave")]]
    if which.endswith("+wave"):
        x = np.hstack([x, wave_features(np.stack([r["xs"] for r in rows]), SMS)[:, rows[0]["xs"].shape[0] :]])
    return x


def ridge(x: np.ndarray, y: np.ndarray, lam: float) -> Callable[[np.ndarray], np.ndarray]:
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    w = np.linalg.solve(z.T @ z + lam * np.diag([1.0] * (z.shape[1] - 1) + [0.0]), z.T @ y)
    return lambda xn: np.hstack([(xn - mu) / sd, np.ones((len(xn), 1))]) @ w


def call_top1(rows: list[dict], aten: np.ndarray) -> float:
    """top-1 / stock when ATen is called where ``aten`` (the rest as the model's first Triton config)."""
    x = [(r["la"] if c else r["lt"]) - r["stock"] for r, c in zip(rows, aten) if not math.isnan(r["stock"])]
    return math.exp(np.mean(x))


def cross_fit(x: np.ndarray, y: np.ndarray, lam: float, seed: int) -> np.ndarray:
    fold = np.random.default_rng(seed).integers(0, 5, len(y))
    out = np.zeros(len(y))
    for i in range(5):
        out[fold == i] = ridge(x[fold != i], y[fold != i], lam)(x[fold == i])
    return out


def cmd_stack(a: argparse.Namespace) -> None:
    from torch_diode.model import load_model

    model = load_model(model_file(a.key, None))
    val = [
        r
        for e in evals(a.key, model)[0]
        if (r := call_row(model, e.problem, list(e.choices), list(e.measured_us), e.stock_us))
    ]
    oos = [r for p, c, med, st in oos_items(a.oos) if (r := call_row(model, p, c, [med.get(x) for x in c], st))]
    print(f"{a.key}: {len(val)} validation problems, {len(oos)} OOS problems with both picks measured")
    print(
        f"as shipped: val top-1 {call_top1(val, np.array([r['x'][0] < 0 for r in val])):.4f}, OOS {call_top1(oos, np.array([r['x'][0] < 0 for r in oos])):.4f}"
    )
    for col, name in ((0, "final gap"), (1, "head gap"), (2, "network+head gap")):
        cells = []
        for b in (-0.06, -0.04, -0.02, 0.0, 0.02, 0.04, 0.06, 0.08):
            t = [call_top1(s, np.array([r["x"][col] < b for r in s])) for s in (oos, val)]
            cells.append(f"{b:+.2f}: {t[0]:.4f}/{t[1]:.4f}")
        print(f"ATen iff {name} < b (OOS/val): " + "  ".join(cells))
    yo = np.clip([r["y"] for r in oos], -0.3, 0.3)
    yv = np.clip([r["y"] for r in val], -0.3, 0.3)
    for which in ("gap", "gap+head", "gaps", "gaps+spread", "gaps+wave", "gaps+spread+wave"):
        xo, xv = call_matrix(oos, which), call_matrix(val, which)
        for lam in (1.0, 30.0, 300.0):
            on_val = call_top1(val, ridge(xo, yo, lam)(xv) < 0)
            oos_cv = call_top1(oos, cross_fit(xo, yo, lam, 0) < 0)
            val_in = call_top1(val, ridge(xv, yv, lam)(xv) < 0)
            val_cv = np.mean([call_top1(val, cross_fit(xv, yv, lam, s) < 0) for s in range(5)])
            print(
                f"ridge on {which:17s} lambda {lam:5.0f}: fit on OOS -> val {on_val:.4f}, OOS 5-fold {oos_cv:.4f}; "
                f"fit on val in-sample {val_in:.4f}, val 5-fold (5 draws) {val_cv:.4f}",
                flush=True,
            )


# -- scoring-time knobs ---------------------------------------------------------------------------
def cmd_knobs(a: argparse.Namespace) -> None:
    from torch_diode.model import load_model

    model = load_model(model_file(a.key, None))
    fo, ho = model.forest.options, model.aten_head.options
    for fb, hb in (
        (0.5, 0.75),
        (0.3, 0.75),
        (0.4, 0.75),
        (0.6, 0.75),
        (0.7, 0.75),
        (0.5, 0.5),
        (0.5, 1.0),
        (0.6, 1.0),
        (0.4, 0.5),
    ):
        model.forest.options = dataclasses.replace(fo, blend=fb)
        model.aten_head.options = dataclasses.replace(ho, blend=hb)
        print(
            f"forest blend {fb}, head blend {hb}: {val_figures(model, a.key)}; {oos_top1(model, a.oos)}",
            flush=True,
        )


@functools.cache
def default_triton(problem) -> frozenset:
    """Inductor's DEFAULT Triton candidates of ``problem`` (enumerated once per problem)."""
    from torch_diode.collect.sweep import inductor_choices

    return frozenset(it.choice for it in inductor_choices(problem, "DEFAULT") if it.kind == "triton")


def cmd_prior(a: argparse.Namespace) -> None:
    from torch_diode.model import load_model
    from torch_diode.ranking import order_of

    model = load_model(model_file(a.key, None))
    for delta in (0.0, 0.01, 0.02, 0.03, 0.05, 0.08):

        def order(p, cands, pr, delta=delta):
            dflt = default_triton(p)
            return order_of(p, cands, pr.log_time_us - delta * np.array([c in dflt for c in cands]))

        print(
            f"DEFAULT prior {delta:.2f}: {val_figures(model, a.key, order)}; {oos_top1(model, a.oos, order)}",
            flush=True,
        )


def cmd_risk(a: argparse.Namespace) -> None:
    from torch_diode.model import load_model
    from torch_diode.ranking import order_of

    model = load_model(model_file(a.key, None))
    for lam in (0.0, 0.25, 0.5, 1.0, 2.0, -0.5):

        def order(p, cands, pr, lam=lam):
            return order_of(p, cands, pr.log_time_us.astype(np.float64) + lam * pr.std)

        print(
            f"mean + {lam:+.2f} x spread: {val_figures(model, a.key, order)}; {oos_top1(model, a.oos, order)}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, fn, oos in (
        ("aten-out", cmd_aten_out, False),
        ("stack", cmd_stack, True),
        ("knobs", cmd_knobs, True),
        ("prior", cmd_prior, True),
        ("risk", cmd_risk, True),
    ):
        s = sub.add_parser(name)
        s.add_argument("key")
        if oos:
            s.add_argument("oos", help="the OOS dataset, relative to the repository root")
        s.set_defaults(fn=fn)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
