"""Session 82 diagnostic: regret@1 by alignment class on a dataset, for each model file whole and
with its networks alone (ranking forest and neighbour memory removed).

    python benchmarks/models/session82/insample.py data/NVIDIA-H200/train.msgpack FILE [FILE ...]
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from score import alignment_class

from torch_diode.dataset import read_dataset
from torch_diode.evaluate import evaluate_model
from torch_diode.model import load_model


def main() -> None:
    ds = read_dataset(sys.argv[1])
    for path in sys.argv[2:]:
        model = load_model(path)
        for variant in ("whole", "networks alone"):
            if variant == "networks alone":
                model.forest = None
                model.memory = None
            report, evals = evaluate_model(model, ds)
            by = collections.defaultdict(list)
            for e in evals:
                top = e.ranked()[0]
                by[alignment_class(e.problem)].append(np.log(e.measured_us[top] / e.measured_us.min()))
            classes = {k: (len(v), round(float(np.exp(np.mean(v))), 4)) for k, v in sorted(by.items()) if len(v) > 5}
            print(path, variant, f"regret@1 {report['overall']['regret@1']['geomean']:.4f}", classes)


if __name__ == "__main__":
    main()
