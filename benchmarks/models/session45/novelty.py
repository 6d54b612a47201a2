"""Session 45: where the top-1 pick trails stock's, by how far the nearest training problems are.

    python benchmarks/models/session45/novelty.py DATA MODEL [STOCK.json]

Per problem of DATA whose model top-1 pick, first Triton config and first ATen choice were
measured (the model's order over ATen and the EXHAUSTIVE space at the handler's compile cost, as
the handler ranks; session 44's ``active.model_order``): log(top-1 / stock's pick), in points
(100 x log) summed per quarter of the problems by ``wsum``, the summed weight of the neighbour
memory's ``k`` nearest training problems (its own distance and kernel: 1 per identical problem,
so 0 to ``k``); then three scoring-time rules keyed on ``wsum`` (geomean of top-1 / stock's, in
percent). Stock's pick: STOCK.json (``val-stock-picks.json``) or, without it, the fastest of
Inductor's DEFAULT candidates and ATen in DATA (which must hold them: session 44's active files).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session44"))
from active import model_order


def rows(data: str, model_path: str, stock_path: str | None) -> list[dict]:
    from torch_diode.collect.campaign import stock_picks_from_full_space
    from torch_diode.collect.sweep import inductor_choices
    from torch_diode.config import config
    from torch_diode.dataset import read_dataset
    from torch_diode.evaluate import read_max_autotune_solution
    from torch_diode.model import load_model

    ds = read_dataset(data)
    model = load_model(model_path)
    picks = read_max_autotune_solution(stock_path) if stock_path else stock_picks_from_full_space(ds)[0]
    cost = config.options().max_compile_cost
    out = []
    for pt in ds.by_problem():
        p = pt.problem
        if p not in picks:
            continue
        med = {ds.choices[c]: t for c, t in pt.median_by_choice().items()}
        # the dataset's measurement of stock's choice where it has one (as ``problem_evals``)
        stock = med.get(picks[p].choice, picks[p].time_us)
        if stock is None:
            continue
        _, order, pred = model_order(model, p, cost)
        t1 = next(c for c in order if not c.is_aten)
        a1 = next((c for c in order if c.is_aten), None)
        if order[0] not in med or t1 not in med or a1 not in med:
            continue
        default = {it.choice for it in inductor_choices(p, "DEFAULT")}
        first_default = next(c for c in order if c.is_aten or c in default)
        out.append(
            dict(
                top=med[order[0]],
                top_aten=order[0].is_aten,
                t1=med[t1],
                a1=med[a1],
                default=med.get(first_default, math.nan),
                gap=float(pred[a1] - pred[t1]),  # predicted log(ATen / first Triton)
                stock=stock,
                wsum=float(model.memory.neighbours(p)[1].sum()),
            )
        )
    return out


def main() -> int:
    data, model_path = sys.argv[1:3]
    r = rows(data, model_path, sys.argv[3] if len(sys.argv) > 3 else None)
    col = {k: np.array([x[k] for x in r], dtype=np.float64) for k in r[0]}
    lg = {k: np.log(col[k] / col["stock"]) for k in ("top", "t1", "a1", "default")}
    w, top = col["wsum"], lg["top"]
    print(f"{data}: {len(r)} problems, top-1 / stock's pick {math.exp(top.mean()):.4f}")
    print("quarter by wsum: problems, summed points (top-1 vs stock's), with a perfect ATen-or-Triton call")
    perfect = np.minimum(lg["t1"], lg["a1"])
    for q in np.array_split(np.argsort(w, kind="stable"), 4):
        print(
            f"  wsum {w[q].min():.2f}-{w[q].max():.2f}: {len(q):3d} {100 * top[q].sum():7.1f} {100 * perfect[q].sum():7.1f}"
        )

    def pct(x: np.ndarray) -> str:
        return f"{100 * x.mean():+.2f}"

    aten = col["top_aten"].astype(bool)
    has_default = np.isfinite(lg["default"])  # the first DEFAULT-or-ATen choice measured
    print(f"rules, geomean top-1 / stock's - 1 in % (the model's own: {pct(top)}):")
    for tau in (2.0, 3.0, 4.0, 5.0):
        a = [pct(np.where((w < tau) & (col["gap"] < m), lg["a1"], top)) for m in (0.1, 0.2, 0.3)]
        b = [pct(np.where((w < tau) & aten & (col["gap"] > -m), lg["t1"], top)) for m in (0.05, 0.1, 0.2)]
        c = pct(np.where((w < tau) & has_default, lg["default"], top))
        print(
            f"  wsum < {tau}: ATen if predicted within 0.1/0.2/0.3 {' '.join(a)} | the first Triton config if "
            f"ATen is first by under 0.05/0.1/0.2 {' '.join(b)} | the first DEFAULT or ATen choice {c}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
