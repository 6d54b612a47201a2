"""Session 82 rule 1: every figure the rule needs, for model files of both GPUs.

    python benchmarks/models/session82/score.py NAME=H200_FILE,H100_FILE ...

For each file, on ``data/<KEY>/val.msgpack`` as ``diode validate-max-autotune`` scores it with
``val-stock-picks.json``: regret@1 / regret@5 geomean, p95 regret@5, top-1 / stock's pick (geomean
and 95% interval), and regret@1 by the operands' alignment class (itemsize, the largest power of
two <= 16 dividing both operands' leading-dimension strides in bytes); on the H200 also top-1 /
stock's pick with ``val-stock.msgpack`` (stock's picks from a run of their own). JSON on stdout.
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

import numpy as np

from torch_diode.dataset import read_dataset
from torch_diode.evaluate import evaluate_model, read_max_autotune_solution, summarize
from torch_diode.model import load_model
from torch_diode.records import DTYPE_ITEMSIZE

ROOT = Path(__file__).resolve().parents[3]


def _pow2_bytes(*values: int) -> int:
    """The largest power of two <= 16 dividing every one of ``values``."""
    a = 16
    for v in values:
        while v % a:
            a //= 2
    return a


def load_bytes(p) -> tuple[int, int]:
    """A's and B's widest load in bytes (features version 5's ``operand_load_bytes``, before a
    tile limits it): the power-of-two alignment of the leading-dimension stride in bytes, and of
    K in bytes where K is the operand's contiguous dimension; the itemsize with no contiguous one."""
    isz = DTYPE_ITEMSIZE[p.dtype]
    out = []
    for stride, k_last in ((p.stride_a, True), (p.stride_b, False)):
        if stride[-1] == 1:
            k_contiguous, ld = k_last, stride[-2]
        elif stride[-2] == 1:
            k_contiguous, ld = not k_last, stride[-1]
        else:
            out.append(isz)
            continue
        out.append(_pow2_bytes(max(ld, 1) * isz, *([p.k * isz] if k_contiguous else [])))
    return out[0], out[1]


def alignment_class(p) -> str:
    a, b = load_bytes(p)
    return f"{DTYPE_ITEMSIZE[p.dtype]}B elements, {min(a, b)}B aligned"


def score(path: str, key: str) -> dict:
    model = load_model(path)
    ds = read_dataset(ROOT / f"data/{key}/val.msgpack")
    out: dict = {"file": path, "hardware": model.hardware}
    stock = read_max_autotune_solution(ROOT / f"data/{key}/val-stock-picks.json", hardware=key)
    rep, evals = evaluate_model(model, ds, stock=stock)
    o = rep["overall"]
    vs = o["vs_max_autotune"]
    out["in_set"] = {
        "regret@1": o["regret@1"]["geomean"],
        "regret@5": o["regret@5"]["geomean"],
        "p95 regret@5": o["regret@5"]["p95"],
        "top1/stock": vs["geomean"],
        "top1/stock ci95": vs["geomean_ci95"],
        "problems": vs["problems"],
    }
    by = collections.defaultdict(list)
    for e in evals:
        top = e.ranked()[0]
        by[alignment_class(e.problem)].append(np.log(e.measured_us[top] / e.measured_us.min()))
    out["regret@1 by class"] = {k: [len(v), float(np.exp(np.mean(v)))] for k, v in sorted(by.items())}
    own = ROOT / f"data/{key}/val-stock.msgpack"
    if own.exists():
        theirs = read_max_autotune_solution(own, hardware=key)  # the same predictions, other stock times
        v2 = summarize([e.with_stock(theirs.get(e.problem)) for e in evals])["overall"]["vs_max_autotune"]
        out["own_run"] = {"top1/stock": v2["geomean"], "ci95": v2["geomean_ci95"], "problems": v2["problems"]}
    return out


def main() -> None:
    result = {}
    for arg in sys.argv[1:]:
        name, files = arg.split("=", 1)
        h200, h100 = files.split(",")
        result[name] = {"NVIDIA-H200": score(h200, "NVIDIA-H200"), "NVIDIA-H100": score(h100, "NVIDIA-H100")}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
