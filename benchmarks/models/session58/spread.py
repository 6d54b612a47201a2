"""Session 58: does the model's uncertainty flag the skinny validation problems?

    python benchmarks/models/session58/spread.py

Per GPU, the shipped file's ensemble spread (``Prediction.std``, natural-log time) averaged over
its first five candidates of each validation problem (as ``validate-max-autotune`` ranks them),
for the 12 skinny problems (``skinny.kind``) and the other 166, and how many skinny problems lie
above the others' 75th percentile.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
for _d in ("session50", "session58"):
    sys.path.insert(0, str(ROOT / "benchmarks/models" / _d))
from retime import evals  # noqa: E402
from skinny import kind  # noqa: E402


def main() -> None:
    from torch_diode.model import load_model

    for key in ("NVIDIA-H100", "NVIDIA-H200"):
        model = load_model(ROOT / f"packages/torch-diode-models/src/torch_diode_models/{key}-matmul.safetensors")
        ev, _ = evals(key, model)
        spread: dict[bool, list[float]] = {True: [], False: []}
        for e in ev:
            std = model.predict(e.problem, list(e.choices)).std
            spread[kind(e.problem) is not None].append(float(np.mean(std[e.ranked()[:5]])))
        q75 = np.percentile(spread[False], 75)
        print(
            f"{key}: mean spread of the first five, skinny {np.mean(spread[True]):.4f} ({len(spread[True])} problems), "
            f"others {np.mean(spread[False]):.4f} ({len(spread[False])}); skinny problems above the others' "
            f"75th percentile ({q75:.4f}): {sum(x > q75 for x in spread[True])}"
        )


if __name__ == "__main__":
    main()
