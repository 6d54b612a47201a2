"""Session 39: the noise floor of regret@1 from the repeated measurements (``train-repeat.msgpack``,
training problems measured again in a later run): the first run's fastest choice judged on the
repeat's times, and the repeat's fastest judged on the first run's, over the choices both runs
timed (each run's median where a run has several measurements). A model that knew one run's
times exactly would have that regret@1 against the other run's:

    python benchmarks/models/session39/repeat_floor.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from torch_diode.dataset import read_dataset

ROOT = Path(__file__).resolve().parents[3]


def by_choice(ds):
    return {pt.problem: {ds.choices[i]: t for i, t in pt.median_by_choice().items()} for pt in ds.by_problem()}


def main() -> None:
    for key in ("NVIDIA-H100", "NVIDIA-H200"):
        first = by_choice(read_dataset(ROOT / "data" / key / "train.msgpack"))
        again = by_choice(read_dataset(ROOT / "data" / key / "train-repeat.msgpack"))
        fwd, back = [], []
        for problem, b in again.items():
            a = first.get(problem, {})
            common = [c for c in b if c in a]
            if not common:
                continue
            ta = np.array([a[c] for c in common])
            tb = np.array([b[c] for c in common])
            fwd.append(tb[np.argmin(ta)] / tb.min())
            back.append(ta[np.argmin(tb)] / ta.min())
        print(
            f"{key}: {len(fwd)} problems; first run's pick on the repeat: geomean {np.exp(np.mean(np.log(fwd))):.4f}"
            f" (max {max(fwd):.3f}); the repeat's pick on the first run: {np.exp(np.mean(np.log(back))):.4f}"
            f" (max {max(back):.3f})"
        )


if __name__ == "__main__":
    main()
