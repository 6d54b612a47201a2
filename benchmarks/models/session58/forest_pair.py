"""Session 58: which part of the H200 file trained with the skinny problems moved its validation
figures: networks crossed with ranking forests of seeds 0-4.

    python benchmarks/models/session58/forest_pair.py NET=FILE [NET=FILE ...] --seeds 0 1 2 3 4

Each network file (its ensemble, screen, neighbour memory and ATen head) is scored on the H200's
178 validation problems (``call_study.val_figures``) with two kinds of forest per seed: ``base``
(session 51's forests of the shipped H200 file's training rows: seed 0 is the shipped file's and
the control's forest, bit for bit) and ``plus`` (the same fit with ``train-skinny.msgpack``'s rows
as well: ``session57/forest_xfer.py fit plus --add data/NVIDIA-H200/train-skinny.msgpack``; seed 0
is the ``skinny`` file's own forest, taken from FOREST0).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
for _d in ("session31", "session44", "session50", "session51", "session57"):
    sys.path.insert(0, str(ROOT / "benchmarks/models" / _d))
from call_study import val_figures  # noqa: E402
from forest_wave import forest_path  # noqa: E402
from forest_xfer import forest_of  # noqa: E402

KEY = "NVIDIA-H200"


def main() -> None:
    from torch_diode.model import load_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("nets", nargs="+")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--plus-dir", required=True, help="forest-NVIDIA-H200-plus-sS.npz of seeds 1-4")
    ap.add_argument("--forest0", required=True, help="the model file whose forest is plus seed 0")
    a = ap.parse_args()
    plus0 = load_model(a.forest0).forest
    for spec in a.nets:
        name, f = spec.split("=", 1)
        model = load_model(f)
        opts = model.forest.options
        for seed in a.seeds:
            for kind in ("base", "plus"):
                if kind == "base":
                    model.forest = forest_of(forest_path(KEY, "base", seed), opts)
                elif seed == 0:
                    model.forest = plus0
                else:
                    model.forest = forest_of(Path(a.plus_dir) / f"forest-{KEY}-plus-s{seed}.npz", opts)
                print(f"{KEY} network {name} forest {kind} seed {seed}: {val_figures(model, KEY)}", flush=True)


if __name__ == "__main__":
    main()
