"""Session 26's breakdown of a preview's top-1 regret by op family and row alignment (``cv-session26.md``).

Groups a GPU's validation problems by batched (bmm, baddbmm) or not, and by whether rows are
16-byte aligned: the operands' (the features' `a_ld_aligned16` and `b_ld_aligned16`), or the
output's (N times the output's bytes per element). For each group: problems, regret@1 (geomean of
the model's top-1 pick over the measured best, as ``diode validate-max-autotune``), the model's ATen
picks, and the group's share of the summed log-regret. A diagnostic on the held-out set, not a tuning.

    python benchmarks/models/val_alignment_session26.py NVIDIA-H100 MODEL.safetensors
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from torch_diode.dataset import read_dataset
from torch_diode.evaluate import ProblemEval, model_order, problem_evals, read_max_autotune_solution, regret_at_k
from torch_diode.features import FEATURE_SPEC, featurize_split
from torch_diode.model import load_model
from torch_diode.records import DTYPE_ITEMSIZE

ROOT = Path(__file__).resolve().parents[2]
LABEL = {"operands": "operands' rows", "output": "output's rows"}
_A_ALIGNED, _B_ALIGNED = (FEATURE_SPEC.names.index(n) for n in ("a_ld_aligned16", "b_ld_aligned16"))


def groups(e: ProblemEval, hardware: str) -> dict[str, bool]:
    """Whether the operands' rows (the features' own ``a_ld_aligned16`` and ``b_ld_aligned16``) and
    the output's rows (N times the output's bytes per element) are 16-byte aligned."""
    shared, _ = featurize_split(e.problem, [], hardware)
    return {
        "operands": bool(shared[_A_ALIGNED]) and bool(shared[_B_ALIGNED]),
        "output": e.problem.n * DTYPE_ITEMSIZE[e.problem.out_dtype] % 16 == 0,
    }


def main() -> None:
    key, model = sys.argv[1], load_model(sys.argv[2])
    data = ROOT / "data" / key
    evals = problem_evals(
        model, read_dataset(data / "val.msgpack"), stock=read_max_autotune_solution(data / "val-stock-picks.json")
    )
    batched = [e.problem.op in ("bmm", "baddbmm") for e in evals]
    aligned = [groups(e, key) for e in evals]
    orders = [model_order(e.predicted_log_us) for e in evals]
    regret = [math.log(regret_at_k(e.measured_us, e.predicted_log_us, (1,), oracle_us=e.oracle_us)[1]) for e in evals]
    aten = [e.choices[int(o[0])].is_aten for e, o in zip(evals, orders)]
    total = sum(regret)
    print(f"{key}: {len(evals)} validation problems, regret@1 {math.exp(total / len(evals)):.4f}")
    for by in ("operands", "output"):
        cells: dict[tuple[bool, bool], list[int]] = defaultdict(list)
        for i in range(len(evals)):
            cells[(batched[i], aligned[i][by])].append(i)
        print(f"  by the {LABEL[by]} (16-byte aligned or not):")
        for (b, a), idx in sorted(cells.items()):
            r = sum(regret[i] for i in idx)
            print(
                f"    {'bmm/baddbmm' if b else 'mm/addmm':11s} {'aligned' if a else 'misaligned':10s} "
                f"{len(idx):4d} problems  regret@1 {math.exp(r / len(idx)):.3f}  ATen picks {sum(aten[i] for i in idx):3d}  "
                f"share of the log-regret {r / total:.2f}"
            )
        rest = [i for i in range(len(evals)) if not (batched[i] and not aligned[i][by])]
        print(
            f"    without the misaligned batched problems: regret@1 {math.exp(sum(regret[i] for i in rest) / len(rest)):.4f} "
            f"over {len(rest)}"
        )
    print("  the batched problems with misaligned output rows: the model's pick and the measured best")
    for i, (e, order) in enumerate(zip(evals, orders)):
        if batched[i] and not aligned[i]["output"]:
            pred, mu = e.predicted_log_us, e.measured_us
            p, b = int(order[0]), int(np.argmin(mu))
            print(
                f"    {e.problem.key():42s} regret {math.exp(regret[i]):.2f}  pick {e.choices[p].key()} "
                f"(log error {pred[p] - math.log(mu[p]):+.2f})  best {e.choices[b].key()} "
                f"(log error {pred[b] - math.log(mu[b]):+.2f}, ranked {int(np.flatnonzero(order == b)[0]) + 1})"
            )


if __name__ == "__main__":
    main()
