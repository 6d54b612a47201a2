"""Session 59: a larger ranking forest for the H200 file trained with the skinny data (``PLAN.md``'s
fourth rule).

    python benchmarks/models/session59/forest_size.py fit TREES SEED OUT.npz      (one thread)
    python benchmarks/models/session59/forest_size.py score NAME=FILE[:FOREST.npz] ...

``fit``: the trainer's forest (``forest.boost``, the shipped H200 file's options with ``trees`` set,
seed + 2 as ``ship.py``'s seed-S training fits it) on the rows of ``ship.py``'s H200 job with
``train-skinny.msgpack`` and ``train-large.msgpack`` added (the shipped file's training rows).
``score``: each file, with its forest replaced by ``FOREST.npz`` where given, on the validation
set (``session58/score.py``'s figures, skinny problems and the others apart).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
for _d in ("session31", "session51", "session57", "session58"):
    sys.path.insert(0, str(ROOT / "benchmarks/models" / _d))
from forest_wave import ADD  # noqa: E402
from forest_xfer import forest_of  # noqa: E402

KEY = "NVIDIA-H200"
NEW = ["data/NVIDIA-H200/train-skinny.msgpack", "data/NVIDIA-H200/train-large.msgpack"]
SHIPPED = ROOT / "packages/torch-diode-models/src/torch_diode_models/NVIDIA-H200-matmul.safetensors"


def cmd_fit(trees: int, seed: int, out: str) -> None:
    import torch
    from cv_jobs import job_data, train_options

    from torch_diode.forest import boost
    from torch_diode.model import load_model
    from torch_diode.train import _split_rows

    torch.set_num_threads(1)
    job = {"hw": KEY, "part": "val", "seed": seed, "extras": "output", "add": ADD[KEY] + NEW}
    trained_on, _, _ = job_data(job)
    _, _, _, rows, _, _ = _split_rows(trained_on, trained_on.by_problem(), train_options(job))
    print(f"{KEY}: {len(rows.counts)} problems, {len(rows.y)} rows", flush=True)
    options = dataclasses.replace(load_model(SHIPPED).forest.options, trees=trees)
    t0 = time.perf_counter()
    f, th, lv = boost(rows.x, rows.y, rows.counts, options, seed + 2)
    np.savez_compressed(out, features=f, thresholds=th, leaves=lv)
    print(f"{out}: {len(f)} trees, {time.perf_counter() - t0:.0f} s", flush=True)


def cmd_score(pairs: list[str]) -> None:
    import subprocess

    # score.py takes files: write each swapped model to a temporary file beside its forest
    from torch_diode.model import load_model, save_model

    args = []
    for pair in pairs:
        name, spec = pair.split("=", 1)
        path, _, forest = spec.partition(":")
        if forest:
            model = load_model(path)
            model.forest = forest_of(Path(forest), model.forest.options)
            path = str(Path(forest).with_suffix(f".{name}.safetensors"))
            save_model(model, path)
        args.append(f"{name}={path}")
    subprocess.run([sys.executable, str(ROOT / "benchmarks/models/session58/score.py"), KEY, *args], check=True)


if __name__ == "__main__":
    if sys.argv[1] == "fit":
        cmd_fit(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        cmd_score(sys.argv[2:])
