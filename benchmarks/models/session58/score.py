"""Session 58: model files on a GPU's validation set, overall and on its skinny problems.

    python benchmarks/models/session58/score.py KEY NAME=FILE[:FOREST.npz] [NAME=FILE[:FOREST.npz] ...]

Per file: ``call_study.val_figures`` (top-1 / stock, regret@1, regret@5 and its p95, as
``diode validate-max-autotune`` ranks), then top-1 / stock and regret@1 on the validation
problems with one output side at most 16 (N <= 16, or M <= 16 with A column-major:
``skinny.py``'s kinds) and on the others, and the problems whose top-1 / stock moved by more than
2% against the first file (the first file is the reference). ``FILE:FOREST.npz``: the file with
that ranking forest (``session57/forest_xfer.py fit``'s tables) in place of its own (session 59).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
for _d in ("session31", "session44", "session50", "session51", "session57", "session58"):
    sys.path.insert(0, str(ROOT / "benchmarks/models" / _d))
from call_study import val_figures  # noqa: E402
from forest_xfer import forest_of  # noqa: E402
from retime import evals  # noqa: E402
from skinny import kind  # noqa: E402


def skinny(p) -> bool:
    return kind(p) is not None


def main() -> None:
    from torch_diode.model import load_model

    key, pairs = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    ref = None
    for name, spec in pairs:
        f, _, forest = spec.partition(":")
        model = load_model(f)
        if forest:
            model.forest = forest_of(Path(forest), model.forest.options)
        ev, _ = evals(key, model)
        print(f"{key} {name}: {val_figures(model, key, ev=ev)}")
        t1 = {e.problem: math.log(e.measured_us[e.ranked()[0]] / e.stock_us) for e in ev if e.stock_us}
        r1 = {e.problem: math.log(e.measured_us[e.ranked()[0]] / (e.oracle_us or e.measured_us.min())) for e in ev}
        for label, keep in (("skinny", True), ("others", False)):
            ps = [p for p in t1 if skinny(p) == keep]
            print(
                f"    {label:6s} {len(ps):3d} problems: top-1 / stock {math.exp(np.mean([t1[p] for p in ps])):.4f}, "
                f"regret@1 {math.exp(np.mean([r1[p] for p in ps])):.4f}, sum of log top-1 / stock {sum(t1[p] for p in ps):+.3f}"
            )
        if ref is None:
            ref = t1
            continue
        moved = sorted((t1[p] - ref[p], p) for p in t1 if abs(t1[p] - ref[p]) > 0.02)
        for d, p in moved[:6] + moved[-6:] if len(moved) > 12 else moved:
            s = "skinny " if skinny(p) else ""
            print(f"      {math.exp(d):.3f}x vs {pairs[0][0]}: {s}{p.op} {p.dtype} batch {p.batch} {p.m}x{p.n}x{p.k}")


if __name__ == "__main__":
    main()
