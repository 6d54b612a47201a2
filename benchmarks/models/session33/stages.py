"""Where two training seeds' top-1 picks part: a model's validation regret@1 with its parts turned
on one at a time (network; + neighbour memory; + ATen head; + ranking forest), for two model
files, and how often the two files' picks agree at each stage (session 33).

    python benchmarks/models/session33/stages.py data/NVIDIA-H100/val.msgpack A.safetensors B.safetensors
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))

from cv_model import DEFAULT_COST  # noqa: E402

from torch_diode.dataset import read_dataset  # noqa: E402
from torch_diode.evaluate import model_order, problem_evals, regret_at_k  # noqa: E402
from torch_diode.model import load_model  # noqa: E402

STAGES = (("net", (0, 0, 0)), ("net+mem", (1, 0, 0)), ("net+mem+head", (1, 1, 0)), ("all", (1, 1, 1)))


def main(val_path: str, a: str, b: str) -> None:
    val = read_dataset(val_path)
    res = {}
    for f in (a, b):
        m = load_model(f)
        parts = (m.memory, m.aten_head, m.forest)
        for name, keep in STAGES:
            m.memory, m.aten_head, m.forest = [p if k else None for p, k in zip(parts, keep)]
            logs, picks = [], []
            for e in problem_evals(m, val, max_compile_cost=DEFAULT_COST):
                j = int(model_order(e.predicted_log_us)[0])
                logs.append(np.log(regret_at_k(e.measured_us, e.predicted_log_us, (1,), oracle_us=e.oracle_us)[1]))
                picks.append((j, e.choices[j].is_aten))
            res[f, name] = (np.array(logs), picks)
            print(
                f"{Path(f).name} {name}: regret@1 {np.exp(np.mean(logs)):.4f}, ATen picked on {sum(p[1] for p in picks)}"
            )
    for name, _ in STAGES:
        (la, pa), (lb, pb) = res[a, name], res[b, name]
        side = sum(x[1] != y[1] for x, y in zip(pa, pb))
        same = sum(x[0] == y[0] for x, y in zip(pa, pb))
        print(
            f"{name}: picks change side on {side}, same pick on {same} of {len(pa)}, "
            f"mean |log regret difference| {np.mean(np.abs(la - lb)):.4f}"
        )


if __name__ == "__main__":
    main(*sys.argv[1:4])
