"""Session 56: how fine-tuning from another GPU's model does with little data of the new GPU.

The H100's training problems of the shipped trainer (``cv_jobs.job_data``'s ``val`` job: the
plan's first 1,100 and the output-misaligned ones) are subsampled by problem (a seeded draw of
``--fraction`` of them); on that subset the shipped file's design (hidden 64 x 3 behind a 32-wide
screen, ranking forest, neighbour memory, ATen head: the trainer's defaults otherwise, one
thread) is trained twice, from scratch and from ``--init-from`` (the shipped H200 file), and each
is scored on the H100's 178 validation problems (``session51/call_study.val_figures``).

    python benchmarks/models/session56/fewdata.py --fraction 0.25 --seed 0 [--init-from FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
for _d in ("session31", "session51", "session50"):
    sys.path.insert(0, str(ROOT / "benchmarks/models" / _d))
H200_FILE = "packages/torch-diode-models/src/torch_diode_models/NVIDIA-H200-matmul.safetensors"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fraction", type=float, required=True, help="share of the H100 training problems kept")
    ap.add_argument("--seed", type=int, default=0, help="seed of the subsample and of the training")
    ap.add_argument("--init-from", default=H200_FILE)
    ap.add_argument("--only", choices=("scratch", "init"), help="train only one of the two")
    a = ap.parse_args()
    from call_study import val_figures
    from cv_jobs import job_data

    from torch_diode.train import TrainOptions, train

    trained_on, _, _ = job_data({"hw": "NVIDIA-H100", "part": "val", "seed": a.seed, "extras": "output"})
    problems = sorted(trained_on.measured_problems(), key=str)
    rng = np.random.default_rng(a.seed)
    keep = [problems[i] for i in sorted(rng.choice(len(problems), round(a.fraction * len(problems)), replace=False))]
    subset = trained_on.select_problems(keep)
    base = dict(hidden=64, ensemble_size=3, screen_hidden=32, val_fraction=0.0, num_threads=1, progress=False)
    runs = {"scratch": {}, "init": {"init_from": a.init_from}}
    for name, extra in runs.items():
        if a.only and name != a.only:
            continue
        t0 = time.perf_counter()
        model, _ = train(subset, TrainOptions(**base, **extra, seed=a.seed))
        took = time.perf_counter() - t0
        print(
            f"NVIDIA-H100 fraction {a.fraction} ({len(keep)} of {len(problems)} problems) seed {a.seed} {name}: "
            f"{val_figures(model, 'NVIDIA-H100')} ({took:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
