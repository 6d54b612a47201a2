"""Session 46: can the ATen-or-Triton call be learnt better from the data we have? (No.)

    rows KEY fold|val|DATA   the call's rows (-> ROWS_DIR/rows-KEY-NAME.npz): per problem with ATen
                             and Triton, the problem's feature columns, the model's predicted gap
                             ``g`` (its best-predicted ATen minus its first Triton config ``T1``, in
                             the handler's order) and the measured one ``z`` = log(ATen / T1);
                             ``fold``: the 1,100 training problems, each from session 42's CV fold
                             model that never saw it (``--folds DIR``); ``val``: the validation set
                             with the model; DATA: a file of the model's own top configs (session
                             44's active, session 45's cover files) with the model ranking the
                             whole EXHAUSTIVE space (--model; default: the shipped file of KEY)
    fit KEY NAME[,NAME...]   stacked call models fit on those rows (ATen iff predicted z < 0),
                             scored on the validation rows against the model's own call
    head KEY DATA [DATA...]  the model with its ATen head refit on DATA's problems (log(best
                             ATen / best Triton), as the trainer fits it; --frac: a random part),
                             validation regret@1, regret@5 and top-1 / stock's pick

Out-of-sample rows only for ``fit``: on its own training problems the model's gap is in-sample.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks/models/session31"))
sys.path.insert(0, str(ROOT / "benchmarks/models/session44"))


def model_path(a: argparse.Namespace) -> Path:
    """``--model``, or the shipped file of ``a.key``."""
    return Path(a.model or ROOT / f"packages/torch-diode-models/src/torch_diode_models/{a.key}-matmul.safetensors")


def cost() -> float | None:
    from torch_diode.config import config

    return config.options().max_compile_cost


def problem_columns(problem, gpu) -> np.ndarray:
    """The problem's feature columns (what the ATen head reads), without featurizing any choice."""
    from torch_diode.features import featurize_split

    return featurize_split(problem, (), gpu)[0]


def call_row(model, problem, choices, pred, order, measured, stock_us=None) -> dict | None:
    """One problem's row (None without both kinds, or with the call's choices unmeasured)."""
    from torch_diode.ranking import aten_variant_call_trusted

    aten = np.array([c.is_aten for c in choices])
    if not aten.any() or aten.all():
        return None
    ai = np.flatnonzero(aten)
    a = int(ai[np.argmin(pred[ai])])
    t1 = next(i for i in order if not aten[i])
    if not (np.isfinite(measured[a]) and np.isfinite(measured[t1])):
        return None
    vs = (lambda i: math.log(measured[i] / stock_us)) if stock_us else (lambda i: math.nan)
    return {
        "x": problem_columns(problem, model.gpu),
        "g": float(pred[a] - pred[t1]),
        "z": math.log(measured[a] / measured[t1]),
        "trusted": aten_variant_call_trusted(problem),
        "aten_vs_stock": vs(a),
        "t1_vs_stock": vs(t1),
        "top_vs_stock": vs(order[0]),
    }


def eval_rows(model, evals) -> list[dict]:
    rows = (
        call_row(model, e.problem, e.choices, e.predicted_log_us, e.order, e.measured_us, e.stock_us) for e in evals
    )
    return [r for r in rows if r]


def cmd_rows(a: argparse.Namespace) -> int:
    from active import model_order
    from cv_jobs import job_data

    from torch_diode.dataset import read_dataset
    from torch_diode.evaluate import problem_evals, read_max_autotune_solution
    from torch_diode.model import load_model

    if a.what == "fold":
        rows, name = [], "fold"
        for j in json.load(open(a.jobs)):
            if j["hw"] == a.key:
                _, held, _ = job_data(j)
                m = load_model(Path(a.folds) / f"{j['id']}.safetensors")
                rows += eval_rows(m, problem_evals(m, held, max_compile_cost=cost()))
    elif a.what == "val":
        m, name = load_model(model_path(a)), "val"
        stock = read_max_autotune_solution(ROOT / f"data/{a.key}/val-stock-picks.json")
        ds = read_dataset(ROOT / f"data/{a.key}/val.msgpack")
        rows = eval_rows(m, problem_evals(m, ds, stock=stock, max_compile_cost=cost()))
    else:
        m, name, rows = load_model(model_path(a)), Path(a.what).name.split(".")[0], []
        ds = read_dataset(a.what)
        for pt in ds.by_problem():
            med = {ds.choices[c]: t for c, t in pt.median_by_choice().items()}
            cands, order, pred = model_order(m, pt.problem, cost())
            at = {c: i for i, c in enumerate(cands)}
            r = call_row(
                m,
                pt.problem,
                cands,
                np.array([pred[c] for c in cands]),
                [at[c] for c in order],
                np.array([med.get(c, math.nan) for c in cands]),
            )
            if r:
                rows.append(r)
    out = Path(a.dir) / f"rows-{a.key}-{name}.npz"
    np.savez(out, **{k: np.array([r[k] for r in rows]) for k in rows[0]})
    print(f"{out}: {len(rows)} problems")
    return 0


def cmd_fit(a: argparse.Namespace) -> int:
    from torch_diode.aten_head import AtenHead, AtenHeadOptions

    def load(name: str) -> dict:
        return dict(np.load(Path(a.dir) / f"rows-{a.key}-{name}.npz"))

    parts = [load(n) for n in a.names.split(",")]
    tr = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    va = load("val")

    def pts(pick: np.ndarray) -> str:
        return f"{100 * pick.sum():.0f} points, top-1 / stock {math.exp(pick.mean()):.4f}"

    wrong = np.sign(tr["g"]) != np.sign(tr["z"])
    print(
        f"{len(tr['z'])} training rows (the model's call wrong on {wrong.mean():.3f}, "
        f"{100 * (np.abs(tr['z']) * wrong).sum():.0f} points); validation: the model {pts(va['top_vs_stock'])}, "
        f"a perfect call {pts(np.minimum(va['aten_vs_stock'], va['t1_vs_stock']))}"
    )

    def feats(d: dict, with_g: bool) -> np.ndarray:
        return np.hstack([d["x"], d["g"][:, None]]) if with_g else d["x"]

    for with_g, resid in ((False, False), (True, False), (True, True)):
        x_tr, x_va = feats(tr, with_g), feats(va, with_g).astype(np.float32)
        y = tr["z"] - tr["g"] if resid else tr["z"]
        preds = []
        for seed in range(a.seeds):
            head = AtenHead.fit(x_tr, y, AtenHeadOptions(), seed)
            preds.append(head.ratio(x_va) + (va["g"] if resid else 0.0))
        p = np.mean(preds, axis=0)
        pick = np.where(p < 0, va["aten_vs_stock"], va["t1_vs_stock"])
        rmse = math.sqrt(((p - va["z"]) ** 2).mean())
        singles = [100 * np.where(q < 0, va["aten_vs_stock"], va["t1_vs_stock"]).sum() for q in preds]
        print(
            f"  inputs {'x+g' if with_g else 'x':3s} {'residual of g' if resid else 'z':13s}: mean of {a.seeds} fits "
            f"{pts(pick)} (single fits {min(singles):.0f}-{max(singles):.0f}); rmse of z {rmse:.3f} (the model's g: "
            f"{math.sqrt(((va['g'] - va['z']) ** 2).mean()):.3f})"
        )
    return 0


def cmd_head(a: argparse.Namespace) -> int:
    from torch_diode.aten_head import AtenHead, AtenHeadOptions
    from torch_diode.dataset import read_dataset
    from torch_diode.evaluate import problem_evals, read_max_autotune_solution, summarize
    from torch_diode.model import load_model

    m = load_model(model_path(a))
    xs, ys = [], []
    for f in a.data:
        ds = read_dataset(f)
        for pt in ds.by_problem():
            med = pt.median_by_choice()
            ch = [ds.choices[c] for c in med]
            t = np.array(list(med.values()))
            aten = np.array([c.is_aten for c in ch])
            if aten.any() and not aten.all():
                xs.append(problem_columns(pt.problem, m.gpu))
                ys.append(math.log(t[aten].min() / t[~aten].min()))
    x, y = np.array(xs, np.float64), np.array(ys)
    val = read_dataset(ROOT / f"data/{a.key}/val.msgpack")
    stock = read_max_autotune_solution(ROOT / f"data/{a.key}/val-stock-picks.json")

    def score(tag: str) -> None:
        o = summarize(problem_evals(m, val, stock=stock, max_compile_cost=cost()), with_tau=False)["overall"]
        print(
            f"{tag:30s} regret@1 {o['regret@1']['geomean']:.4f} regret@5 {o['regret@5']['geomean']:.4f} "
            f"top-1 / stock {o['vs_max_autotune']['geomean']:.4f}",
            flush=True,
        )

    score("the model as loaded")
    for seed in a.seeds:
        idx = np.arange(len(y))
        if a.frac < 1:
            idx = np.sort(np.random.default_rng(seed).choice(len(y), int(a.frac * len(y)), replace=False))
        for blend in a.blends:
            m.aten_head = AtenHead.fit(x[idx], y[idx], AtenHeadOptions(blend=blend), seed)
            score(f"head seed {seed} blend {blend} on {len(idx)}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=".", help="where the rows files are")
    ap.add_argument("--model", help="the model of rows val/DATA and head (default: the shipped file of KEY)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("rows")
    r.add_argument("key")
    r.add_argument("what")
    r.add_argument("--jobs", default=str(ROOT / "benchmarks/handler/session42/jobs-cv-save.json"))
    r.add_argument("--folds", help="the saved fold models (<id>.safetensors)")
    r.set_defaults(fn=cmd_rows)
    f = sub.add_parser("fit")
    f.add_argument("key")
    f.add_argument("names")
    f.add_argument("--seeds", type=int, default=4)
    f.set_defaults(fn=cmd_fit)
    h = sub.add_parser("head")
    h.add_argument("key")
    h.add_argument("data", nargs="+")
    h.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    h.add_argument("--blends", nargs="+", type=float, default=[0.75, 1.0])
    h.add_argument("--frac", type=float, default=1.0)
    h.set_defaults(fn=cmd_head)
    a = ap.parse_args()
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
