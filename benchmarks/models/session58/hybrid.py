"""Session 58's ``hybrid`` H200 file: a file trained with ``train-skinny.msgpack`` (its networks,
neighbour memory and ATen head) with the ranking forest of a file trained without it.

    python benchmarks/models/session58/hybrid.py --net SKINNY.safetensors --forest-from CONTROL.safetensors --out OUT

The forest is the trainer's fit on the training rows alone (it does not depend on the network), so
``--forest-from`` a file of the same seed trained without the skinny file gives the forest that
``ship.py`` would fit without it (for seed 0: the shipped H200 file's, bit for bit). The held-out
metrics are measured again with the new forest (``session48/set_scoring.measure``, what the trainer
measures) and ``training.forest`` / ``training.held_out_metrics_are_from`` say where the forest
came from. Why: ``benchmarks/models/cv-session58.md`` (rules in ``session58/PLAN.md``).

``--forest-from F.npz`` (session 60): the forest ``session57/forest_xfer.py fit`` saved there
(e.g. ``fromN``: another file's forest continued on ``--net``'s training rows), with ``--about``
saying how it was fit (recorded in ``training.forest``). ``--shortlist N`` (session 61): the forest
re-ranks the network's best N candidates instead of the forest options' shortlist.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks/models/session48"))
sys.path.insert(0, str(ROOT / "benchmarks/models/session57"))
from forest_xfer import forest_of  # noqa: E402
from set_scoring import measure  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--net", required=True, help="the file trained with train-skinny.msgpack")
    ap.add_argument(
        "--forest-from",
        required=True,
        help="a file of the same GPU and seed trained without it, or a forest_xfer.py forest (.npz)",
    )
    ap.add_argument("--about", help="with an .npz forest: how it was fit (for training.forest)")
    ap.add_argument("--shortlist", type=int, help="the forest's shortlist (default: its options')")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    from torch_diode.dataset import read_dataset
    from torch_diode.forest import RankingForest
    from torch_diode.model import load_model, save_model

    model = load_model(a.net)
    sha = hashlib.sha256(Path(a.forest_from).read_bytes()).hexdigest()
    if a.forest_from.endswith(".npz"):
        if not a.about:
            raise SystemExit("--forest-from F.npz needs --about (how the forest was fit)")
        model.forest = forest_of(Path(a.forest_from), model.forest.options)
        about = f"the ranking forest {Path(a.forest_from).name} (sha256 {sha[:16]}, {model.forest.options.trees} trees): {a.about}"
    else:
        other = load_model(a.forest_from)
        if model.hardware != other.hardware or model.forest.options != other.forest.options:
            raise SystemExit(f"{a.forest_from}: another GPU or other forest options than {a.net}")
        model.forest = other.forest
        about = (
            f"the ranking forest of {Path(a.forest_from).name} (sha256 {sha[:16]}, training data "
            f"{other.metadata['training_data_hash'][:16]}): fit on the training files without train-skinny.msgpack; "
            "the networks, neighbour memory and ATen head were trained with it (benchmarks/models/cv-session58.md)"
        )
    if a.shortlist is not None:
        f = model.forest
        model.forest = RankingForest(
            f.features, f.thresholds, f.leaves, dataclasses.replace(f.options, shortlist=a.shortlist)
        )
        about += f"; re-ranking the network's best {a.shortlist} candidates"
    metrics = measure(model, read_dataset(ROOT / f"data/{model.hardware}/val.msgpack"))
    training = dict(model.metadata["training"])
    training["forest"] = about
    training["held_out_metrics_are_from"] += (
        "; re-measured with the forest of `training.forest` (benchmarks/models/session58/hybrid.py)"
    )
    model.update_metadata({"held_out_metrics": metrics, "training": training})
    path = save_model(model, a.out)
    o = load_model(path).metadata["held_out_metrics"]["overall"]
    print(
        f"wrote {path}: regret@1 {o['regret@1']['geomean']:.4f} regret@5 {o['regret@5']['geomean']:.4f} "
        f"(p95 {o['regret@5']['p95']:.4f}) recall@5 {o['recall@5']:.3f}"
    )


if __name__ == "__main__":
    main()
