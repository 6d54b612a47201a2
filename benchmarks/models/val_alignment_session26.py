"""Session 26's breakdown of a preview's top-1 regret by op family and row alignment (``cv-session26.md``).

Groups a GPU's validation problems by batched (bmm, baddbmm) or not, and by whether rows are
16-byte aligned: the operands' (A's and B's leading-dimension and batch strides in bytes), or the
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
from torch_diode.evaluate import problem_evals, read_max_autotune_solution
from torch_diode.model import load_model
from torch_diode.records import DTYPE_ITEMSIZE, Problem

ROOT = Path(__file__).resolve().parents[2]
LABEL = {"operands": "operands' rows", "output": "output's rows"}


def operand_aligned(stride: tuple[int, ...], itemsize: int) -> bool:
    """The operand's leading-dimension stride (and batch stride, if any) in bytes is a multiple of 16."""
    ld = stride[-2] if stride[-1] == 1 else stride[-1]
    return all(s * itemsize % 16 == 0 for s in (ld, *stride[:-2]))


def groups(p: Problem) -> dict[str, bool]:
    isz = DTYPE_ITEMSIZE[p.dtype]
    return {
        "operands": operand_aligned(p.stride_a, isz) and operand_aligned(p.stride_b, isz),
        "output": p.n * DTYPE_ITEMSIZE[p.out_dtype] % 16 == 0,
    }


def main() -> None:
    key, model = sys.argv[1], load_model(sys.argv[2])
    data = ROOT / "data" / key
    evals = problem_evals(
        model, read_dataset(data / "val.msgpack"), stock=read_max_autotune_solution(data / "val-stock-picks.json")
    )
    regret = [math.log(e.measured_us[int(np.argmin(e.predicted_log_us))] / e.measured_us.min()) for e in evals]
    aten = [not e.choices[int(np.argmin(e.predicted_log_us))].is_triton for e in evals]
    total = sum(regret)
    print(f"{key}: {len(evals)} validation problems, regret@1 {math.exp(total / len(evals)):.4f}")
    for by in ("operands", "output"):
        cells: dict[tuple[bool, bool], list[int]] = defaultdict(list)
        for i, e in enumerate(evals):
            cells[(e.problem.op in ("bmm", "baddbmm"), groups(e.problem)[by])].append(i)
        print(f"  by the {LABEL[by]} (16-byte aligned or not):")
        for (batched, aligned), idx in sorted(cells.items()):
            r = sum(regret[i] for i in idx)
            print(
                f"    {'bmm/baddbmm' if batched else 'mm/addmm':11s} {'aligned' if aligned else 'misaligned':10s} "
                f"{len(idx):4d} problems  regret@1 {math.exp(r / len(idx)):.3f}  ATen picks {sum(aten[i] for i in idx):3d}  "
                f"share of the log-regret {r / total:.2f}"
            )
        rest = [
            i for i, e in enumerate(evals) if not (e.problem.op in ("bmm", "baddbmm") and not groups(e.problem)[by])
        ]
        print(
            f"    without the misaligned batched problems: regret@1 {math.exp(sum(regret[i] for i in rest) / len(rest)):.4f} "
            f"over {len(rest)}"
        )
    print("  the batched problems with misaligned output rows: the model's pick and the measured best")
    for e, r in zip(evals, regret):
        if e.problem.op in ("bmm", "baddbmm") and not groups(e.problem)["output"]:
            pred, mu = e.predicted_log_us, e.measured_us
            order = np.argsort(pred)
            i, b = int(order[0]), int(np.argmin(mu))
            print(
                f"    {e.problem.key():42s} regret {math.exp(r):.2f}  pick {_name(e.choices[i])} "
                f"(log error {pred[i] - math.log(mu[i]):+.2f})  best {_name(e.choices[b])} "
                f"(log error {pred[b] - math.log(mu[b]):+.2f}, ranked {int(np.flatnonzero(order == b)[0]) + 1})"
            )


def _name(c) -> str:
    if not c.is_triton:
        return c.template
    return f"{c.block_m}x{c.block_n}x{c.block_k} s{c.num_stages} w{c.num_warps}"


if __name__ == "__main__":
    main()
