"""Score a saved model with its neighbour memory rebuilt from other training files (no retraining).

    python benchmarks/models/session49/memswap.py MODEL.safetensors KEY --seed S [--add FILE ...] [--shortlist N]

The memory is ``torch_diode.train.training_memory`` of ``cv_jobs.py``'s job ``{"hw": KEY, "part":
"val", "seed": S, "extras": "output", "add": [FILE ...]}`` (what the trainer builds for those
training files); the network, ATen head and forest stay the file's. Prints the figures of
``session47/rescore.py`` on KEY's 178 validation problems (regret@1, regret@5, its p95, the
handler's top-3, top-1 / stock's pick) with the file's memory and with the rebuilt one;
``--shortlist N`` scores both with the network cascade's shortlist N (0: none, as files before
session 48 scored).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks/models/session31"))
sys.path.insert(0, str(ROOT / "benchmarks/models/session47"))
import cv_jobs  # noqa: E402
from rescore import figures  # noqa: E402

from torch_diode.model import load_model  # noqa: E402
from torch_diode.train import training_memory  # noqa: E402


@functools.cache
def _val_job_data(key: str, add: tuple[str, ...]):
    """``cv_jobs.job_data`` of a ``val`` job (which does not depend on its seed), read once per
    process for each ``(key, add)``."""
    return cv_jobs.job_data({"hw": key, "part": "val", "extras": "output", "add": list(add)})


def job_memory(key: str, seed: int, add: list[str]):
    """The neighbour memory the trainer builds for ``cv_jobs.py``'s job ``{"hw": key, "part": "val",
    "seed": seed, "extras": "output", "add": add}``, and the job's data: ``(memory, what it trains
    on, what it ranks, stock's picks)``."""
    job = {"hw": key, "part": "val", "seed": seed, "extras": "output", "add": add}
    trained_on, scored, stock = _val_job_data(key, tuple(add))
    return training_memory(trained_on, cv_jobs.train_options(job)), trained_on, scored, stock


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("key")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--add", nargs="*", default=[])
    ap.add_argument("--shortlist", type=int, default=None)
    a = ap.parse_args()
    memory, _, scored, stock = job_memory(a.key, a.seed, a.add)
    model = load_model(a.model)
    if a.shortlist is not None:
        model.scoring = dataclasses.replace(model.scoring, network_shortlist=a.shortlist)
    before = figures(model, scored, stock)
    p0 = len(model.memory.problems)
    model.memory = memory
    after = figures(model, scored, stock)
    print(
        Path(a.model).name,
        f"memory {p0} -> {len(model.memory.problems)} problems;",
        "  ".join(f"{k} {before[k]:.4f} -> {after[k]:.4f}" for k in before),
        flush=True,
    )


if __name__ == "__main__":
    main()
