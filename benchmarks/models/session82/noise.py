"""Session 82 diagnostic: session 61's two re-timings of H200 validation configs
(``session61/retime/retime-{a,b}.msgpack``) against the validation set's timings, by alignment
class: drift (new / validation) and run-to-run spread (run a / run b), in natural log.

    python benchmarks/models/session82/noise.py
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from score import alignment_class  # noqa: E402

from torch_diode.dataset import read_dataset  # noqa: E402

ROOT = HERE.parents[2]


def fastest(path: Path) -> dict:
    """(problem, choice) -> its fastest finite time in the dataset at ``path``."""
    t = collections.defaultdict(list)
    for r in read_dataset(path).records():
        if r.time_us is not None and np.isfinite(r.time_us):
            t[(r.problem, r.choice)].append(r.time_us)
    return {k: min(v) for k, v in t.items()}


def main() -> None:
    val = fastest(ROOT / "data/NVIDIA-H200/val.msgpack")
    a, b = (fastest(ROOT / f"benchmarks/models/session61/retime/retime-{x}.msgpack") for x in "ab")
    drift, spread = collections.defaultdict(list), collections.defaultdict(list)
    for k in a.keys() & b.keys() & val.keys():
        c = alignment_class(k[0])
        drift[c].append(np.log(np.sqrt(a[k] * b[k]) / val[k]))
        spread[c].append(np.log(a[k] / b[k]))
    for c in sorted(drift):
        d, s = np.array(drift[c]), np.array(spread[c])
        print(
            f"{c}: n={len(d)}  new/validation mean {d.mean():+.4f} sd {d.std():.4f} | run a/b sd {s.std():.4f}, "
            f"share past 5%: {np.mean(np.abs(s) > 0.05):.2f}"
        )


if __name__ == "__main__":
    main()
