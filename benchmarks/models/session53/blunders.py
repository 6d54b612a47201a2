"""Session 53: where the shipped files' top-1 gap to stock max-autotune's pick sits, and
scoring-time rules aimed at it, on each GPU's validation set (and OOS where a rule changes picks).

    python benchmarks/models/session53/blunders.py gap KEY
    python benchmarks/models/session53/blunders.py head KEY OP DTYPE MxNxK [--batch B]
    python benchmarks/models/session53/blunders.py stages KEY
    python benchmarks/models/session53/blunders.py stage-forest fit KEY [--seed 0]
    python benchmarks/models/session53/blunders.py stage-forest score KEY
    python benchmarks/models/session53/blunders.py fallback KEY OOS
    python benchmarks/models/session53/blunders.py ties KEY OOS
    python benchmarks/models/session53/blunders.py winners KEY

``gap``: the per-problem log(model's top-1 / stock's pick): how it splits into losses, wins and
near-ties, the geomean without the worst k problems, and the worst twelve. ``head``: one
validation problem's first eight candidates in the file's order and its eight fastest measured.

``stages``: the first Triton config's regret (over the best Triton config) split into the tile
(the best ``num_stages`` variant of the first config's tile, ``ranking.stage_groups``, over the
best Triton config) and the stage (the first config over its tile's best variant); top-1 /
stock with each Triton top-1 pick replaced by its tile's best variant; a random variant's regret.

``stage-forest``: LambdaRank (``forest.boost``, the shipped forest's depth and rounds, 1% label
steps) among the ``num_stages`` variants of each tile of each training problem (the shipped
forest's rows, ``session52/margin_forest.forest_rows``' problems); ``score`` replaces each Triton
top-1 pick by its tile's variant that the stage forest ranks first.

``fallback``: on the problems where a signal is in its top q (the top-1 pick's ensemble spread,
the top five's mean spread, the predicted gain of the model's first pick over its best DEFAULT
candidate, -min(M, N), -log(flops)), the model's order restricted to ATen and Inductor's DEFAULT
Triton candidates (``session51/call_study.default_triton``), or its first ATen choice.

``ties``: among the head of the model's order within ``delta`` of its first (of the first 16),
the pick by the lowest ensemble spread, the ranking forest's score, ATen first, or Triton first.

``winners``: each Triton config's share of training problems (``train.msgpack``) where it is
within 2% of the best Triton config; the order with configs never so lowered by ``delta`` times
the square root of that share (scaled to the highest), or configs near-best on fewer than n
training problems left out.
"""

from __future__ import annotations

import argparse
import collections
import functools
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
for _d in ("session31", "session44", "session50", "session51", "session52"):
    sys.path.insert(0, str(ROOT / "benchmarks/models" / _d))
from call_study import default_triton, oos_items, oos_top1, val_figures  # noqa: E402
from retime import evals, model_file  # noqa: E402


def gmean(v) -> float:
    return math.exp(float(np.mean(v)))


@functools.cache
def shipped(key: str):
    from torch_diode.model import load_model

    return load_model(model_file(key, None))


@functools.cache
def shipped_evals(key: str):
    return evals(key, shipped(key))[0]


def describe(c) -> str:
    if c.is_aten:
        return c.template
    return f"{c.block_m}x{c.block_n}x{c.block_k} s{c.num_stages} w{c.num_warps}"


def cmd_gap(a: argparse.Namespace) -> None:
    rows = [(math.log(e.measured_us[e.ranked()[0]] / e.stock_us), e) for e in shipped_evals(a.key) if e.stock_us]
    v = np.array([r[0] for r in rows])
    n = len(v)
    lose, win, tie = v > 0.02, v < -0.02, np.abs(v) <= 0.02
    print(
        f"{a.key}: {n} problems, top-1 / stock {gmean(v):.4f}; sum of log ratios {v.sum():.3f}: "
        f"{lose.sum()} losses over 2% ({v[lose].sum():+.3f}), {win.sum()} wins over 2% ({v[win].sum():+.3f}), "
        f"{tie.sum()} within 2% ({v[tie].sum():+.3f})"
    )
    worst = np.sort(v)[::-1]
    print(
        "  without the worst k: "
        + ", ".join(f"k={k} {math.exp((v.sum() - worst[:k].sum()) / n):.4f}" for k in (1, 3, 5, 10, 20))
    )
    for x, e in sorted(rows, key=lambda r: -r[0])[:12]:
        p = e.problem
        print(
            f"  {math.exp(x):.3f}x  {p.op} {p.dtype} batch {p.batch} {p.m}x{p.n}x{p.k}: {describe(e.choices[e.ranked()[0]])}"
        )


def cmd_head(a: argparse.Namespace) -> None:
    m, n, k = (int(v) for v in a.shape.split("x"))
    for e in shipped_evals(a.key):
        p = e.problem
        if (p.op, p.dtype, p.m, p.n, p.k, p.batch) != (a.op, a.dtype, m, n, k, a.batch):
            continue
        order = e.ranked()
        place = {int(i): r for r, i in enumerate(order)}
        dflt = default_triton(p)
        print(f"{a.key} {p}: stock's pick {e.stock_us:.2f} us, the best measured {e.measured_us.min():.2f} us")
        for title, rows in (
            ("the model's first 8", order[:8]),
            ("the 8 fastest measured", np.argsort(e.measured_us)[:8]),
        ):
            print(f"  {title}:")
            for i in rows:
                print(
                    f"    place {place[int(i)]:4d}  {describe(e.choices[i]):22s} predicted {math.exp(e.predicted_log_us[i]):8.2f} us"
                    f"  measured {e.measured_us[i]:8.2f} us{'  (DEFAULT)' if e.choices[i] in dflt else ''}"
                )


def tile_variants(e, i: int) -> np.ndarray:
    """The Triton choices of ``e`` that differ from choice ``i`` only in ``num_stages`` (its tile's
    variants, ``ranking.stage_groups``; ``i`` among them)."""
    from torch_diode.ranking import stage_groups

    groups = stage_groups(e.choices)
    return np.array([j for j in np.flatnonzero(groups == groups[i]) if e.choices[j].is_triton])


def cmd_stages(a: argparse.Namespace) -> None:
    tile, stage, total, rand, t1, t1_best_stage, sizes = [], [], [], [], [], [], []
    for e in shipped_evals(a.key):
        order = e.ranked()
        tri = [i for i in range(len(e.choices)) if e.choices[i].is_triton]
        first = next(i for i in order if e.choices[i].is_triton)
        group = tile_variants(e, first)
        best, gbest = e.measured_us[tri].min(), e.measured_us[group].min()
        tile.append(math.log(gbest / best))
        stage.append(math.log(e.measured_us[first] / gbest))
        total.append(math.log(e.measured_us[first] / best))
        rand.append(np.mean(np.log(e.measured_us[group] / gbest)))
        sizes.append(len(group))
        if e.stock_us:
            top = order[0]
            t1.append(math.log(e.measured_us[top] / e.stock_us))
            t1_best_stage.append(math.log((gbest if top == first else e.measured_us[top]) / e.stock_us))
    sigma, floor = noise_floor(a.key, sizes)
    print(
        f"{a.key}: a single measurement's noise {sigma:.4f} (log sd, from train-repeat.msgpack); "
        f"a tile's best variant over an equal one by noise alone {math.exp(floor):.4f}"
    )
    print(
        f"{a.key}: first Triton config / best Triton {gmean(total):.4f} = tile {gmean(tile):.4f} x stage "
        f"{gmean(stage):.4f} (a random variant of that tile: {gmean(rand):.4f}); top-1 / stock {gmean(t1):.4f}, "
        f"with each Triton top-1 pick's tile at its best variant {gmean(t1_best_stage):.4f}"
    )


def noise_floor(key: str, sizes: list[int]) -> tuple[float, float]:
    """The log-time noise of one measurement (sd, from the median absolute log difference between
    ``train.msgpack`` and ``train-repeat.msgpack``'s times of the same choices: 0.6745 sd sqrt(2))
    and the mean over ``sizes`` of E[x - min of n] for n equal variants under that noise (by
    simulation, seeded): what a tile's best variant gains over any of them by noise alone."""
    from torch_diode.dataset import read_dataset

    first, again = (read_dataset(ROOT / "data" / key / f) for f in ("train.msgpack", "train-repeat.msgpack"))
    t = {(pt.problem, first.choices[c]): v for pt in first.by_problem() for c, v in pt.median_by_choice().items()}
    d = [
        math.log(v / t[(pt.problem, again.choices[c])])
        for pt in again.by_problem()
        for c, v in pt.median_by_choice().items()
        if (pt.problem, again.choices[c]) in t
    ]
    sigma = float(np.median(np.abs(d))) / (0.6745 * math.sqrt(2))
    rng = np.random.default_rng(0)
    gain = {n: float(np.mean(-rng.normal(0, sigma, (20000, n)).min(1))) for n in set(sizes)}
    return sigma, float(np.mean([gain[n] for n in sizes]))


def stage_forest_path(key: str, seed: int) -> Path:
    return HERE / "forests" / f"stage-{key}-s{seed}.npz"


def stage_forest_options():
    from torch_diode.forest import ForestOptions

    return ForestOptions(step=0.01, top=5)  # the shipped forest's trees and depth; 1% label steps


def cmd_stage_fit(a: argparse.Namespace) -> None:
    from margin_forest import forest_groups

    from torch_diode.features import featurize, gpu_constants
    from torch_diode.forest import boost
    from torch_diode.ranking import stage_groups

    t0 = time.perf_counter()
    ds, groups, _ = forest_groups(a.key)
    hw = gpu_constants(a.key)
    xs, ys, counts = [], [], []
    for g in groups:
        med = g.median_by_choice()
        ids = [i for i in med if ds.choices[i].is_triton]
        if len(ids) < 2:
            continue
        ch = [ds.choices[i] for i in ids]
        x, y, sg = featurize(g.problem, ch, hw), np.log([med[i] for i in ids]), stage_groups(ch)
        for gid in np.unique(sg):
            sel = np.flatnonzero(sg == gid)
            if len(sel) > 1:
                xs.append(x[sel])
                ys.append(y[sel])
                counts.append(len(sel))
    x, y = np.concatenate(xs), np.concatenate(ys).astype(np.float32)
    print(
        f"{a.key}: {len(counts)} tiles of {len(groups)} problems, {len(y)} rows ({time.perf_counter() - t0:.0f} s)",
        flush=True,
    )
    t0 = time.perf_counter()
    f, th, lv = boost(x, y, np.array(counts), stage_forest_options(), a.seed)
    out = stage_forest_path(a.key, a.seed)
    out.parent.mkdir(exist_ok=True)
    np.savez_compressed(out, features=f, thresholds=th, leaves=lv)
    print(f"fit in {time.perf_counter() - t0:.0f} s: {out.relative_to(ROOT)}", flush=True)


def cmd_stage_score(a: argparse.Namespace) -> None:
    from torch_diode.features import featurize
    from torch_diode.forest import oblivious_scores

    gpu = shipped(a.key).gpu
    for path in [None, *sorted(stage_forest_path(a.key, 0).parent.glob(f"stage-{a.key}-s*.npz"))]:
        tables = None if path is None else tuple(np.load(path)[k] for k in ("features", "thresholds", "leaves"))
        t1, r1, st = [], [], []
        for e in shipped_evals(a.key):
            top = e.ranked()[0]
            if e.choices[top].is_triton:
                group = tile_variants(e, top)
                if tables is not None:
                    top = group[
                        int(
                            np.argmax(
                                oblivious_scores(featurize(e.problem, [e.choices[i] for i in group], gpu), *tables)
                            )
                        )
                    ]
                st.append(math.log(e.measured_us[top] / e.measured_us[group].min()))
            r1.append(math.log(e.measured_us[top] / (e.oracle_us or e.measured_us.min())))
            if e.stock_us:
                t1.append(math.log(e.measured_us[top] / e.stock_us))
        name = "the file's order" if path is None else path.name
        print(
            f"{a.key} {name}: top-1 / stock {gmean(t1):.4f}, regret@1 {gmean(r1):.4f}, "
            f"Triton top-1 picks over their tile's best variant {gmean(st):.4f} ({len(st)})",
            flush=True,
        )


def _picks(key: str, items) -> list[tuple[float, float, float, dict]]:
    """Per problem whose picks were measured: log(top-1 / stock), log(top-1 of ATen and DEFAULT
    only / stock), log(the model's first ATen choice / stock), and the problem's signals."""
    from torch_diode.ranking import order_of

    model = shipped(key)
    out = []
    for p, cands, med, stock_us in items:
        pr = model.predict(p, cands)
        order = order_of(p, cands, pr.log_time_us)
        dflt = default_triton(p)
        lt = np.asarray(pr.log_time_us, np.float64) + 10.0 * np.array([c.is_triton and c not in dflt for c in cands])
        safe = order_of(p, cands, lt)
        a, b = cands[order[0]], cands[safe[0]]
        aten = next(cands[i] for i in order if cands[i].is_aten)
        if a not in med or b not in med or aten not in med:
            continue
        signals = {
            "spread of the top-1": float(pr.std[order[0]]),
            "mean spread of the top 5": float(np.mean(pr.std[order[:5]])),
            "gain over DEFAULT": float(lt[safe[0]] - pr.log_time_us[order[0]]),
            "-min(M, N)": -min(p.m, p.n),
            "-log flops": -math.log(p.m * p.n * p.k * p.batch),
        }
        out.append((math.log(med[a] / stock_us), math.log(med[b] / stock_us), math.log(med[aten] / stock_us), signals))
    return out


def cmd_fallback(a: argparse.Namespace) -> None:
    def val_items():
        for e in shipped_evals(a.key):
            if e.stock_us:
                yield e.problem, list(e.choices), dict(zip(e.choices, e.measured_us)), e.stock_us

    sets = {"val": _picks(a.key, val_items()), "OOS": _picks(a.key, oos_items(a.oos))}
    print(
        f"{a.key}: "
        + "; ".join(
            f"{name} ({len(r)}): the file {gmean([x[0] for x in r]):.4f}, ATen and DEFAULT only "
            f"{gmean([x[1] for x in r]):.4f}, ATen always {gmean([x[2] for x in r]):.4f}"
            for name, r in sets.items()
        )
    )
    for target, col in (("ATen and DEFAULT", 1), ("ATen", 2)):
        for signal in next(iter(sets.values()))[0][3]:
            for q in (0.1, 0.2, 0.3, 0.5):
                parts = []
                for name, r in sets.items():
                    s = np.array([x[3][signal] for x in r])
                    thr = np.quantile(s, 1 - q)
                    parts.append(f"{name} {gmean([x[col] if x[3][signal] > thr else x[0] for x in r]):.4f}")
                print(f"  to {target} on the top {q:.0%} by {signal}: " + ", ".join(parts), flush=True)


def cmd_ties(a: argparse.Namespace) -> None:
    from torch_diode.features import featurize_split
    from torch_diode.ranking import order_of

    model = shipped(a.key)
    ev = shipped_evals(a.key)  # the validation problems ranked once, for every rule

    def rule(delta: float, how: str):
        def order(p, cands, pr):
            lt = np.asarray(pr.log_time_us, np.float64)
            o = order_of(p, cands, lt)
            head = [i for i in o[:16] if lt[i] <= lt[o[0]] + delta]
            if len(head) < 2:
                return o
            if how == "spread":
                key = pr.std[head]
            elif how == "forest":
                key = -model.forest.score_split(*featurize_split(p, [cands[i] for i in head], model.gpu))
            else:  # "ATen first" / "Triton first"
                key = np.array([cands[i].is_aten == (how == "Triton first") for i in head], dtype=float)
            pick = head[int(np.argmin(key))]
            return np.array([pick, *(i for i in o if i != pick)])

        return order

    print(f"{a.key} the file: {val_figures(model, a.key, ev=ev)}; {oos_top1(model, a.oos)}", flush=True)
    for how in ("spread", "forest", "ATen first", "Triton first"):
        for delta in (0.01, 0.02, 0.04):
            o = rule(delta, how)
            print(
                f"{a.key} {how}, delta {delta}: {val_figures(model, a.key, o, ev=ev)}; {oos_top1(model, a.oos, o)}",
                flush=True,
            )


def cmd_winners(a: argparse.Namespace) -> None:
    from torch_diode.dataset import read_dataset
    from torch_diode.ranking import order_of

    def sig(c):
        return (c.template, c.block_m, c.block_n, c.block_k, c.group_m, c.num_stages, c.num_warps, c.extra)

    ds = read_dataset(ROOT / "data" / a.key / "train.msgpack")
    wins: collections.Counter = collections.Counter()
    seen: collections.Counter = collections.Counter()
    for pt in ds.by_problem():
        tri = {cid: t for cid, t in pt.median_by_choice().items() if ds.choices[cid].is_triton}
        if tri:
            best = min(tri.values())
            for cid, t in tri.items():
                seen[sig(ds.choices[cid])] += 1
                wins[sig(ds.choices[cid])] += t <= best * 1.02
    share = {k: wins[k] / seen[k] for k in seen}
    top = math.sqrt(max(share.values()))
    print(
        f"{a.key}: {len(seen)} Triton configs in train.msgpack, {sum(1 for v in wins.values() if v)} within 2% of a problem's best"
    )
    model = shipped(a.key)
    ev = shipped_evals(a.key)
    tri_best = [min((i for i, c in enumerate(e.choices) if c.is_triton), key=lambda i: e.measured_us[i]) for e in ev]
    never = sum(not wins.get(sig(e.choices[i]), 0) for e, i in zip(ev, tri_best))
    print(
        f"  validation problems whose best Triton config was never within 2% on a training problem: {never} of {len(ev)}"
    )
    print(f"  the file: {val_figures(model, a.key, ev=ev)}")

    def order(p, cands, pr, mode, th):
        lt = np.asarray(pr.log_time_us, np.float64).copy()
        if mode == "left out":
            lt += 10.0 * np.array([c.is_triton and wins.get(sig(c), 0) < th for c in cands])
        else:
            lt -= th * np.array([math.sqrt(share.get(sig(c), 0.0)) / top if c.is_triton else 0.0 for c in cands])
        return order_of(p, cands, lt)

    for mode, values in (("left out", (1, 3, 10)), ("lowered", (0.01, 0.02, 0.03, 0.05))):
        for th in values:
            o = functools.partial(order, mode=mode, th=th)
            print(f"  {mode} {th}: {val_figures(model, a.key, o, ev=ev)}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, fn, oos in (
        ("gap", cmd_gap, False),
        ("stages", cmd_stages, False),
        ("fallback", cmd_fallback, True),
        ("ties", cmd_ties, True),
        ("winners", cmd_winners, False),
    ):
        s = sub.add_parser(name)
        s.add_argument("key")
        if oos:
            s.add_argument("oos", help="the OOS dataset, relative to the repository root")
        s.set_defaults(fn=fn)
    h = sub.add_parser("head")
    h.add_argument("key")
    h.add_argument("op")
    h.add_argument("dtype")
    h.add_argument("shape", help="MxNxK")
    h.add_argument("--batch", type=int, default=1)
    h.set_defaults(fn=cmd_head)
    sf = sub.add_parser("stage-forest").add_subparsers(dest="what", required=True)
    f = sf.add_parser("fit")
    f.add_argument("key")
    f.add_argument("--seed", type=int, default=0)
    f.set_defaults(fn=cmd_stage_fit)
    s = sf.add_parser("score")
    s.add_argument("key")
    s.set_defaults(fn=cmd_stage_score)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
