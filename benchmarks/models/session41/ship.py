"""Train a shipped model file on a GPU's first 1,100 training problems and the plan groups a
``cv_jobs.py`` job's ``"extras"`` names (``cv_jobs.EXTRAS``), with the trainer's defaults on one
thread, every problem trained on (``--val-fraction 0``), and the validation set's metrics as the
file's held-out metrics, as ``diode train --held-out-dataset`` records them:

    python benchmarks/models/session41/ship.py --hw NVIDIA-H100 --extras output --seed 0 \\
        --out packages/torch-diode-models/src/torch_diode_models/NVIDIA-H100-matmul.safetensors

The model is the one ``cv_jobs.py`` trains for the job ``{"hw", "part": "val", "seed",
"extras"}`` (same data, options and seed: the same weights on the same machine), so that job's
figures are this file's; ``--add`` names the job's ``"add"`` files (session 46's H200 file:
``--add data/NVIDIA-H200/train-active.msgpack data/NVIDIA-H200/train-cover.msgpack``).
``diode train --dataset data/<KEY>/train.msgpack`` would train on every collected problem
instead, the one-misaligned ones of session 40 included.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session31"))
from cv_jobs import EXTRAS, job_data, train_options


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hw", required=True, help="hardware key, e.g. NVIDIA-H100")
    ap.add_argument("--extras", choices=sorted(EXTRAS), default="output")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="the .safetensors file to write")
    ap.add_argument(
        "--add",
        nargs="*",
        default=[],
        help='more training datasets (a job\'s "add", session 44), from the repository root',
    )
    a = ap.parse_args()

    from torch_diode.config import DiodeOptions
    from torch_diode.model import save_model
    from torch_diode.train import dataset_hash, train

    job = {"hw": a.hw, "part": "val", "seed": a.seed, "extras": a.extras}
    if a.add:
        job["add"] = a.add
    trained_on, held_out, _ = job_data(job)
    model, report = train(
        trained_on, train_options(job), held_out=held_out, held_out_max_compile_cost=DiodeOptions().max_compile_cost
    )
    path = save_model(model, a.out)
    o = report.held_out["overall"]
    print(
        f"wrote {path}: {report.train_problems} training problems (dataset {dataset_hash(trained_on)[:12]}), "
        f"{report.epochs_run} epochs in {report.seconds:.0f} s; held out ({o['problems']} problems): regret@1 "
        f"{o['regret@1']['geomean']:.4f}, regret@5 {o['regret@5']['geomean']:.4f} (p95 {o['regret@5']['p95']:.4f})"
    )


if __name__ == "__main__":
    main()
