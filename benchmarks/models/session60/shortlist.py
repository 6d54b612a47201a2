"""Session 60, diagnostics after rule 7 (no decision rests on them): the forest's shortlist against
its size, and larger forests than the scoring budget holds.

    python benchmarks/models/session60/shortlist.py NET_S0 NET_S1 FOREST... [--trees T ...] [--shortlists 384 512]

Each forest (a ``forest_xfer.py fit`` table, ``{seed}`` in its path: the seed's), or its first T
trees for each ``--trees`` T, in the network file of that seed (session 59's ``both`` files),
re-ranking the network's best 384 or 512 candidates; ``call_study.val_figures`` on the H200's
validation set. Outputs: ``shortlist.txt`` (``fromN``'s first 480 and 576 trees: ``from384``),
``bigger.txt`` (576 trees continued by 192 more).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
for _d in ("session31", "session44", "session50", "session51", "session57"):
    sys.path.insert(0, str(ROOT / "benchmarks/models" / _d))
from call_study import val_figures  # noqa: E402
from forest_xfer import forest_of  # noqa: E402


def main() -> None:
    from torch_diode.model import load_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("nets", nargs=2, help="the network files of seeds 0 and 1")
    ap.add_argument("forests", nargs="+", help="forest tables, {seed} for the seed")
    ap.add_argument("--trees", nargs="+", type=int, help="score each forest's first T trees (default: all)")
    ap.add_argument("--shortlists", nargs="+", type=int, default=[384, 512])
    a = ap.parse_args()
    for seed, net in enumerate(a.nets):
        model = load_model(net)
        for pattern in a.forests:
            path = Path(pattern.format(seed=seed))
            for t in a.trees or [len(np.load(path)["features"])]:
                for shortlist in a.shortlists:
                    model.forest = forest_of(path, dataclasses.replace(model.forest.options, shortlist=shortlist), t)
                    print(
                        f"seed {seed} {Path(pattern).stem.replace('-s{seed}', '')} first {t} trees, shortlist "
                        f"{shortlist} (cost {t * shortlist / 1000:.0f}k): {val_figures(model, 'NVIDIA-H200')}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
