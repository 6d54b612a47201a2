"""Give a model file written by an older torch-diode this torch-diode's neighbour memory.

The neighbour memory (``torch_diode.neighbours``) is built from the training data alone, after
the network, the ATen head and the ranking forest; since session 37 its problem descriptor also
holds whether each operand's rows are 16-byte aligned, and its distance counts a mismatch
(``alignment_weight``, ``benchmarks/models/cv-session37.md``). A file written before keeps a
memory without those columns (it loads with the alignment term off). This script rebuilds that
memory from the same training data, exactly as ``torch_diode.train.train`` would now
(``training_memory``: the file's own split seed and validation fraction), leaving the network, the
head and the forest as they are, and writes a new file:

    python scripts/rebuild_memory.py --model OLD.safetensors --dataset TRAIN.msgpack \\
        --held-out VAL.msgpack --output NEW.safetensors [--alignment-weight 4]

It refuses, and writes nothing, when the dataset is not the one the file was trained on (its
``training_data_hash``) or when the rebuilt memory's other columns, configurations and relative
times differ from the file's by a single value. The held-out metrics stored in the file are
measured again on ``--held-out`` (as ``diode train --held-out-dataset`` measures them, Triton configs over
the handler's compile-cost cap not ranked), since the memory changes the ranking.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from torch_diode.config import DiodeOptions
from torch_diode.dataset import read_dataset
from torch_diode.evaluate import problem_evals, summarize
from torch_diode.model import load_model, save_model
from torch_diode.neighbours import NeighbourMemory
from torch_diode.train import TrainOptions, dataset_hash, training_memory


def same_as_before(old: NeighbourMemory, new: NeighbourMemory) -> str | None:
    """Why ``new`` is not ``old`` with alignment columns added, or None."""
    cols = old.problems.shape[1]
    if new.problems.shape[0] != old.problems.shape[0] or not np.array_equal(new.problems[:, :cols], old.problems):
        return "its problem descriptors differ"
    if not np.array_equal(new.configs, old.configs):
        return "its configurations differ"
    if not np.array_equal(new.rel, old.rel, equal_nan=True):
        return "its relative times differ"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, type=Path, help="the model file to upgrade")
    ap.add_argument("--dataset", required=True, type=Path, help="the training data it was trained on")
    ap.add_argument("--held-out", required=True, type=Path, help="validation data to measure the new file on")
    ap.add_argument("--output", required=True, type=Path, help="the new model file (not the old one)")
    ap.add_argument("--alignment-weight", type=float, default=TrainOptions.neighbour_alignment)
    a = ap.parse_args(argv)
    if a.output.resolve() == a.model.resolve():
        ap.error("--output must be a new file: the old one is the reference the rebuild is checked against")
    model = load_model(a.model)
    if model.memory is None:
        print(f"{a.model}: has no neighbour memory; nothing to rebuild", file=sys.stderr)
        return 2
    ds = read_dataset(a.dataset)
    if dataset_hash(ds) != model.metadata["training_data_hash"]:
        print(
            f"{a.dataset}: not the data {a.model} was trained on (training_data_hash differs); "
            "pass the training file it was trained on",
            file=sys.stderr,
        )
        return 2
    trained = model.metadata["training"]["options"]
    old = model.memory.options
    opts = TrainOptions(
        val_fraction=trained["val_fraction"],
        seed=trained["seed"],
        neighbours=old.k,
        neighbour_bandwidth=old.bandwidth,
        neighbour_prior=old.prior_weight,
        neighbour_alignment=a.alignment_weight,
    )
    memory = training_memory(ds, opts)
    why = same_as_before(model.memory, memory) if memory is not None else "none was built"
    if why is not None:
        print(
            f"{a.model}: the rebuilt memory is not the file's with alignment added ({why}); nothing written",
            file=sys.stderr,
        )
        return 1
    old_hash = model.model_hash
    model.memory = memory
    held = read_dataset(a.held_out)
    cost = DiodeOptions().max_compile_cost
    metrics = summarize(problem_evals(model, held, max_compile_cost=cost), with_tau=True)
    training = dict(model.metadata["training"])
    training["held_out_metrics_are_from"] = (
        f"a separate held-out dataset of {len(held.measured_problems())} problems (sha256 "
        f"{dataset_hash(held)[:16]}), measured after the neighbour memory was rebuilt with alignment "
        f"columns (Triton configs over compile cost {cost:g} not ranked, as in the handler)"
    )
    training["memory_rebuilt"] = {
        "by": "scripts/rebuild_memory.py",
        "from_model_sha256": old_hash,
        "alignment_weight": a.alignment_weight,
        "held_out_metrics_before": model.metadata["held_out_metrics"].get("overall", {}),
    }
    model.update_metadata({"training": training, "held_out_metrics": metrics})
    save_model(model, a.output)
    r1 = metrics["overall"]["regret@1"]["geomean"]
    print(f"{a.output}: memory rebuilt ({memory.problems.shape[0]} problems), held-out regret@1 {r1:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
