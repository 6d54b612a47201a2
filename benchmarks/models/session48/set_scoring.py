"""Give a shipped model file the network cascade (session 48) and re-measure its held-out metrics.

A file written before session 48 has no ``scoring`` metadata and scores without the cascade
(``torch_diode.model.ScoringOptions``). This script, for ``KEY``'s file in the models package:

1. re-measures the held-out metrics as the trainer measured them when the file was shipped
   (``summarize(problem_evals(model, data/KEY/val.msgpack, max_compile_cost=DiodeOptions()
   .max_compile_cost), with_tau=True)``, ``session41/ship.py``) with the file's own scoring and
   checks they equal the ``held_out_metrics`` it stores, to 1e-5 (so the procedure is the one
   that made them);
2. sets ``scoring`` to ``--network-shortlist`` (default: ``ScoringOptions()``'s), measures again,
   stores those metrics and says so in ``training.held_out_metrics_are_from``;
3. writes the file in place (atomically) and prints regret@1 / regret@5 / p95 regret@5 before and
   after. The network, memory, head and forest tensors are unchanged (their sha256 is checked).

Then ``python scripts/update_models_manifest.py --no-hub`` rewrites the manifest.

Usage: python benchmarks/models/session48/set_scoring.py NVIDIA-H100 [--network-shortlist 128]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from torch_diode.config import DiodeOptions
from torch_diode.dataset import read_dataset
from torch_diode.evaluate import problem_evals, summarize
from torch_diode.model import ScoringOptions, load_model, save_model

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "packages/torch-diode-models/src/torch_diode_models"


def measure(model, val) -> dict:
    return summarize(problem_evals(model, val, max_compile_cost=DiodeOptions().max_compile_cost), with_tau=True)


def close(a, b) -> bool:
    """Equal nested metrics: numbers to 1e-5 relative (Kendall's tau moves ~1e-6 with the float
    rounding of another CPU); a NaN is stored as null."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if all(v is None or isinstance(v, (int, float)) for v in (a, b)):
        x, y = (math.nan if v is None else v for v in (a, b))
        return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-5)
    return a == b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("key")
    ap.add_argument("--network-shortlist", type=int, default=ScoringOptions().network_shortlist)
    args = ap.parse_args()
    path = PACKAGE / f"{args.key}-matmul.safetensors"
    model = load_model(path)
    tensors = model.metadata["tensors_sha256"]
    val = read_dataset(ROOT / f"data/{args.key}/val.msgpack")
    before = measure(model, val)
    if not close(before, model.metadata["held_out_metrics"]):
        raise SystemExit(f"{path}: re-measured held-out metrics differ from the stored ones; not changing it")
    model.scoring = ScoringOptions(network_shortlist=args.network_shortlist)
    after = measure(model, val)
    training = dict(model.metadata["training"])
    training["held_out_metrics_are_from"] = (
        f"{training['held_out_metrics_are_from']}; re-measured in session 48 with the network cascade of "
        f"`scoring` (network_shortlist {args.network_shortlist}), set after training "
        "(benchmarks/models/session48/set_scoring.py)"
    )
    model.update_metadata({"held_out_metrics": after, "training": training})
    save_model(model, path)
    assert load_model(path).metadata["tensors_sha256"] == tensors
    for name, m in (("before", before), ("after", after)):
        o = m["overall"]
        print(
            f"{args.key} {name}: regret@1 {o['regret@1']['geomean']:.4f} regret@5 {o['regret@5']['geomean']:.4f} "
            f"p95 regret@5 {o['regret@5']['p95']:.4f} recall@5 {o['recall@5']:.3f} tau {o['kendall_tau']['mean']:.3f}"
        )


if __name__ == "__main__":
    main()
