"""Session 60: timing stand-ins, model files whose ranking forest has a given number of trees,
for ``session48/pinned.py`` before any forest of that size is fit (rules 7 and 9: the number of
trees chosen by scoring time alone). Not for scoring on data: the extra trees are copies.

    python benchmarks/models/session60/standin.py MODEL K [K ...] --repeat-from R --out DIR

Each stand-in is MODEL with its forest's T trees, then copies of its trees R..T-1 in turn, up to
K trees (``DIR/standin-K.safetensors``). A forest's scoring cost depends on its number of trees
(and shortlist), not on their values. Rule 7 used the session-60 rule-5 H200 file (288 trees) with
``--repeat-from 192`` for K = 384, 480, 576 (``pinned-rule7.json``); rule 9 session 57's H100
file (288 trees) with ``--repeat-from 0`` for K = 528, 576 (``pinned-rule9.json``).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np


def main() -> None:
    from torch_diode.forest import RankingForest
    from torch_diode.model import load_model, save_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("trees", nargs="+", type=int)
    ap.add_argument("--repeat-from", type=int, required=True, help="the first tree copied after the file's own")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    for k in a.trees:
        model = load_model(a.model)
        f = model.forest
        t, r = f.options.trees, a.repeat_from
        if not 0 <= r < t or k < t:
            raise SystemExit(f"--repeat-from must be in [0, {t}) and each K at least {t}")
        idx = np.concatenate([np.arange(t), r + np.arange(k - t) % (t - r)])
        model.forest = RankingForest(
            f.features[idx], f.thresholds[idx], f.leaves[idx], dataclasses.replace(f.options, trees=k)
        )
        print(save_model(model, Path(a.out) / f"standin-{k}.safetensors"))


if __name__ == "__main__":
    main()
