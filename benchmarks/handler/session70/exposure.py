#!/usr/bin/env python
"""Session 70: how often a compile with torch-diode ends on a one- or two-warp Triton config.

Offline, on the committed validation sets: for each problem, the choices the handler keeps with its
defaults (``torch_diode.demo.handler_keeps``, top 3), the pick Inductor's benchmark then makes (the
fastest kept choice in the validation set's timings), and whether that pick, any kept choice, the
problem's fastest choice, or stock max-autotune's pick (``val-stock-picks.json``) is a Triton config
with fewer than four warps: the configs that Triton miscompiles in rules 1-6. With ``min_warps``,
the same with such configs dropped before the handler ranks (the cost of a rule against them).

    python benchmarks/handler/session70/exposure.py KEY MODEL
"""

from __future__ import annotations

import math
import sys

import numpy as np

from torch_diode.config import config
from torch_diode.dataset import read_dataset
from torch_diode.demo import handler_keeps
from torch_diode.evaluate import evaluate_model, read_max_autotune_solution
from torch_diode.model import load_model


def few_warps(c) -> bool:  # type: ignore[no-untyped-def]
    return (not c.is_aten) and c.num_warps is not None and c.num_warps < 4


def gm(v: list[float]) -> float:
    return float(np.exp(np.mean(np.log(v)))) if v else math.nan


def main() -> int:
    key, model_path = sys.argv[1], sys.argv[2]
    val = read_dataset(f"data/{key}/val.msgpack")
    model = load_model(model_path)
    opts = config.options()
    _, evals = evaluate_model(model, val, max_compile_cost=opts.max_compile_cost, diversity=opts.diversity,
                              cliff_guard=opts.cliff_guard)  # fmt: skip
    stock = read_max_autotune_solution(f"data/{key}/val-stock-picks.json")
    n = {"problems": len(evals), "kept_any_few_warps": 0, "pick_few_warps": 0, "best_few_warps": 0,
         "stock_pick_few_warps": 0, "pick_few_warps_16bit_bias": 0, "problems_16bit_bias": 0}  # fmt: skip
    regret, regret_filtered = [], []
    for e in evals:
        kept = handler_keeps(model, e, (3,))[3]
        t = np.asarray(e.measured_us, dtype=np.float64)
        pick = kept[int(np.argmin(t[kept]))]
        best = float(t.min())
        bias16 = e.problem.op in ("addmm", "baddbmm") and e.problem.dtype in ("float16", "bfloat16")
        n["problems_16bit_bias"] += bias16
        n["kept_any_few_warps"] += any(few_warps(e.choices[i]) for i in kept)
        n["pick_few_warps"] += few_warps(e.choices[pick])
        n["pick_few_warps_16bit_bias"] += bias16 and few_warps(e.choices[pick])
        n["best_few_warps"] += few_warps(e.choices[int(np.argmin(t))])
        sp = stock.get(e.problem)
        n["stock_pick_few_warps"] += sp is not None and few_warps(sp.choice)
        regret.append(float(t[pick]) / best)
        ok = [i for i in kept if not few_warps(e.choices[i])]
        if not ok:  # the handler's next choices without few-warp configs: its order, filtered
            order = np.argsort(np.asarray(model.predict(e.problem, e.choices).log_time_us))
            ok = [int(i) for i in order if not few_warps(e.choices[int(i)])][:3]
        regret_filtered.append(float(t[ok].min()) / best)
    print(key, model_path)
    for k, v in n.items():
        print(f"  {k}: {v}")
    print(f"  regret of the pick, geomean: {gm(regret):.4f}; with few-warp configs dropped from the kept set: "
          f"{gm(regret_filtered):.4f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
