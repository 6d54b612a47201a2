"""Session 49's H200 file: session 41's ``ship.py`` training with more training files, and a
neighbour memory built from fewer of them.

    python benchmarks/models/session49/ship.py --hw NVIDIA-H200 --seed 0 \\
        --add data/NVIDIA-H200/train-active.msgpack data/NVIDIA-H200/train-cover.msgpack data/NVIDIA-H200/train-active2.msgpack \\
        --memory-add data/NVIDIA-H200/train-active.msgpack data/NVIDIA-H200/train-cover.msgpack \\
        --out packages/torch-diode-models/src/torch_diode_models/NVIDIA-H200-matmul.safetensors

1. trains as ``session41/ship.py --add ADD`` does (``cv_jobs.py``'s job ``{"hw", "part": "val",
   "seed", "extras": "output", "add"}``: the same weights on the same machine), held-out metrics
   measured on ``data/KEY/val.msgpack`` as the trainer measures them;
2. replaces the file's neighbour memory with ``torch_diode.train.training_memory`` of the job with
   ``--memory-add`` instead of ``--add`` (``memswap.job_memory``: the memory the trainer builds for
   those training files);
   the network, ATen head and ranking forest stay those trained on everything;
3. re-measures the held-out metrics (``session48/set_scoring.measure``: what the trainer measures)
   and stores them, and says so in ``training.held_out_metrics_are_from`` and
   ``training.memory``.

Why (``benchmarks/models/cv-session49.md``): with ``train-active2.msgpack``'s 800 problems in
the memory as well, all four paired seeds were worse than with the memory of the other files.

Since session 54: ``--set KEY=VALUE ...`` sets training options as a job's ``"set"`` does (values
JSON, e.g. ``--set hidden=64 ensemble_size=3 screen_hidden=32``), and without ``--memory-add`` the
trained memory stays (steps 2-3 skipped: session 41's ``ship.py`` with options, for the H100):

    python benchmarks/models/session49/ship.py --hw NVIDIA-H100 --seed 0 --set hidden=64 ensemble_size=3 \
        screen_hidden=32 --out packages/torch-diode-models/src/torch_diode_models/NVIDIA-H100-matmul.safetensors

Progress goes to stderr: each stage as it starts and how long it took, the trainer's own log lines
and every 10th epoch of the network; stdout and the file written are as they were without it.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks/models/session31"))
sys.path.insert(0, str(ROOT / "benchmarks/models/session48"))
sys.path.insert(0, str(ROOT / "benchmarks/models/session49"))
from cv_jobs import job_data, train_options  # noqa: E402
from memswap import job_memory  # noqa: E402
from set_scoring import measure  # noqa: E402

log = logging.getLogger("ship")
#: The network's epochs are logged every EPOCH_EVERY-th (and the last).
EPOCH_EVERY = 10


@contextmanager
def stage(what: str):
    """Log ``what`` on stderr as it starts, and how long it took."""
    log.info("%s ...", what)
    t0 = time.perf_counter()
    yield
    log.info("%s: done in %.0f s", what, time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hw", required=True, help="hardware key, e.g. NVIDIA-H200")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="the .safetensors file to write")
    ap.add_argument("--add", nargs="*", default=[], help='more training datasets (a job\'s "add")')
    ap.add_argument(
        "--memory-add",
        nargs="*",
        default=None,
        help="the training datasets of the memory (a subset of --add; none given: the trained memory stays)",
    )
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help='training options (a job\'s "set")')
    a = ap.parse_args()
    try:
        options = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in a.set)}
    except ValueError as e:
        ap.error(f"--set takes KEY=VALUE pairs with JSON values ({e})")
    if a.memory_add is not None and not set(a.memory_add) <= set(a.add):
        ap.error(f"--memory-add must be a subset of --add; not in it: {sorted(set(a.memory_add) - set(a.add))}")

    # Progress on stderr: these stages, and the trainer's own INFO lines (screening network,
    # ranking forest). Not TrainOptions.progress: the options are stored in the file's metadata.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S", stream=sys.stderr)
    t_start = time.perf_counter()
    from torch_diode.config import DiodeOptions
    from torch_diode.model import load_model, save_model
    from torch_diode.train import dataset_hash, train

    job = {"hw": a.hw, "part": "val", "seed": a.seed, "extras": "output", "add": a.add, "set": options}
    with stage(f"reading {a.hw}'s training and held-out data"):
        trained_on, held_out, _ = job_data(job)
    opts = train_options(job)
    t_train = time.perf_counter()

    def on_epoch(entry: dict) -> None:
        epoch = int(entry["epoch"])
        if epoch % EPOCH_EVERY == 0 or epoch == opts.num_epochs:
            log.info(
                "network: epoch %d/%d, loss %.4f (%.0f s)",
                epoch,
                opts.num_epochs,
                entry["loss"],
                time.perf_counter() - t_train,
            )

    with stage(
        "training the network, "
        + ("the screening network, " if opts.screen_hidden else "")
        + ("the ranking forest, " if opts.forest_options() is not None else "")
        + "then the held-out metrics"
    ):
        model, report = train(
            trained_on,
            opts,
            on_epoch=on_epoch,
            held_out=held_out,
            held_out_max_compile_cost=DiodeOptions().max_compile_cost,
        )
    before = model.metadata["held_out_metrics"]
    figures = [("memory of every training file", before)]
    if a.memory_add is not None:
        p_before = len(model.memory.problems)
        with stage("building the neighbour memory of --memory-add"):
            model.memory, memory_data, _, _ = job_memory(a.hw, a.seed, a.memory_add)
        with stage("re-measuring the held-out metrics with that memory"):
            after = measure(model, held_out)
        training = dict(model.metadata["training"])
        training["held_out_metrics_are_from"] += (
            "; re-measured with the neighbour memory of `training.memory` (benchmarks/models/session49/ship.py)"
        )
        training["memory"] = (
            f"the neighbour memory of {len(model.memory.problems)} of the {p_before} training problems: "
            f"the plan's and {', '.join(Path(f).name for f in a.memory_add) or 'no extra file'} "
            f"(dataset sha256 {dataset_hash(memory_data)[:16]}); the network, ATen head and ranking forest "
            "were trained on all of them (benchmarks/models/cv-session49.md)"
        )
        model.update_metadata({"held_out_metrics": after, "training": training})
        figures.append(("memory of --memory-add", after))
    with stage(f"writing {a.out}"):
        path = save_model(model, a.out)
        assert len(load_model(path).memory.problems) == len(model.memory.problems)
    for name, m in figures:
        o = m["overall"]
        print(
            f"{name}: regret@1 {o['regret@1']['geomean']:.4f} regret@5 {o['regret@5']['geomean']:.4f} "
            f"(p95 {o['regret@5']['p95']:.4f}) recall@5 {o['recall@5']:.3f} tau {o['kendall_tau']['mean']:.3f}"
        )
    print(
        f"wrote {path}: {report.train_problems} training problems, {report.epochs_run} epochs in {report.seconds:.0f} s"
    )
    log.info("finished in %.0f s", time.perf_counter() - t_start)


if __name__ == "__main__":
    main()
