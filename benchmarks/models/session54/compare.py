"""Session 54: model files side by side on a GPU's validation set and on its OOS problems (the
figures of ``session53/expectile.py score``: validation top-1 / stock, regret@1, regret@5 and its
p95, the first Triton config's regret, ATen top-1 picks; OOS top-1 / stock).

    python benchmarks/models/session54/compare.py KEY OOS FILE [FILE ...]

Then, since an OOS problem counts only where a file's top-1 pick was measured (its lists hold an
older file's first 20 configs, DEFAULT's and a few random ones), the OOS top-1 / stock of every
file on the problems where all files' picks were measured.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
for _d in ("session31", "session44", "session50", "session51", "session52"):
    sys.path.insert(0, str(ROOT / "benchmarks/models" / _d))
from call_study import oos_items, oos_log_ratios, oos_summary, val_figures  # noqa: E402
from margin_forest import first_triton  # noqa: E402
from retime import evals  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("key")
    ap.add_argument("oos", help="the OOS dataset, relative to the repository root")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    from torch_diode.model import load_model

    items = oos_items(a.oos)
    picks = []  # per file: the log top-1 / stock of each OOS problem, None where not measured
    for f in a.files:
        model = load_model(f)
        picks.append(oos_log_ratios(model, items))
        ev, _ = evals(a.key, model)
        print(
            f"{a.key} {f} ({model.model_hash[:16]}): {val_figures(model, a.key, ev=ev)}; {first_triton(ev)}; "
            f"{oos_summary(picks[-1])}",
            flush=True,
        )
    n, geomeans = on_common_problems(picks)
    for f, g in zip(a.files, geomeans):
        print(f"{a.key} {f}: OOS top-1 / stock {g:.4f} on the {n} problems where every file's pick was measured")


def on_common_problems(rows: list[list[float | None]]) -> tuple[int, list[float]]:
    """Rows of ``oos_log_ratios`` (one per model, of the same problems): how many problems have
    every model's pick measured, and each model's geomean top-1 / stock on them."""
    common = [i for i in range(len(rows[0])) if all(r[i] is not None for r in rows)]
    return len(common), [math.exp(np.mean([r[i] for i in common])) for r in rows]


if __name__ == "__main__":
    main()
