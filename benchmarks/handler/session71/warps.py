#!/usr/bin/env python
"""Session 71: the cost of the handler's opt-in ``min_num_warps`` on the validation sets, and the
problems whose kept set it changes (for a GPU check).

Offline, on the committed validation sets: for each problem, the choices the handler keeps with its
defaults (``torch_diode.demo.handler_keeps``, top 3) over the candidates ``min_num_warps`` leaves
(``torch_diode.evaluate.problem_evals(min_num_warps=...)``, as the handler filters them), the pick
Inductor's benchmark then makes (taken as the fastest kept choice in the validation set's timings),
its time over the best measured choice (any warps), and over stock max-autotune's pick.

    python benchmarks/handler/session71/warps.py cost KEY MODEL [W]
    python benchmarks/handler/session71/warps.py list KEY MODEL W OUT.json   # changed.py's list format
    python benchmarks/handler/session71/warps.py report OUT.json [OUT2.json ...]   # changed71.py's runs

``report``: per problem, each variant's kernel time (the geometric mean of its compiles in the
run), warps4 / default, their geomean over problems with a 95% bootstrap interval (problems
resampled, 2,000 draws, seed 0), by dtype, the defaults' own spread where a run compiled them twice,
failed compiles, and what the handler's stats say the option did.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

from torch_diode.config import config
from torch_diode.dataset import read_dataset
from torch_diode.demo import handler_keeps
from torch_diode.evaluate import problem_evals, read_max_autotune_solution
from torch_diode.model import load_model


def gm(v: list[float]) -> float:
    return float(np.exp(np.mean(np.log(v)))) if v else math.nan


def kept_picks(key: str, model_path: str, warps: int | None) -> list[tuple]:
    """Per problem: (problem, kept choice keys, pick's time, best time of the whole space, few-warp
    pick, stock's pick's time: ``val-stock-picks.json``, picked in these timings)."""
    model = load_model(model_path)
    stock = read_max_autotune_solution(f"data/{key}/val-stock-picks.json", hardware=key)
    opts = config.options()
    evals = problem_evals(
        model,
        read_dataset(f"data/{key}/val.msgpack"),
        stock=stock,
        max_compile_cost=opts.max_compile_cost,
        min_num_warps=warps,
        diversity=opts.diversity,
        cliff_guard=opts.cliff_guard,
    )
    out = []
    for e in evals:
        kept = handler_keeps(model, e, (3,))[3]
        t = np.asarray(e.measured_us, dtype=np.float64)
        pick = kept[int(np.argmin(t[kept]))]
        c = e.choices[pick]
        few = (not c.is_aten) and c.num_warps is not None and c.num_warps < 4
        best = e.oracle_us if e.oracle_us is not None else float(t.min())
        out.append((e.problem, [e.choices[i].key() for i in kept], float(t[pick]), best, few, e.stock_us))
    return out


def cmd_cost(key: str, model_path: str, warps: int) -> None:
    print(f"{key} {model_path}")
    for w in (None, warps):
        rows = kept_picks(key, model_path, w)
        regret = [r[2] / r[3] for r in rows]
        vs = [r[2] / r[5] for r in rows if r[5] is not None]
        print(
            f"  min_num_warps={w}: top-3 kept set's pick / best {gm(regret):.4f} (p95 {np.percentile(regret, 95):.3f}),"
            f" / stock's pick {gm(vs):.4f} ({len(vs)} problems), pick has 1-2 warps on {sum(r[4] for r in rows)}"
            f" of {len(rows)}"
        )


def cmd_list(key: str, model_path: str, warps: int, output: str) -> None:
    base = kept_picks(key, model_path, None)
    other = kept_picks(key, model_path, warps)
    listed = [
        {"problem": a[0].to_dict(), "default": a[1], f"warps{warps}": b[1]}
        for a, b in zip(base, other, strict=True)
        if sorted(a[1]) != sorted(b[1])
    ]
    Path(output).write_text(
        json.dumps({"key": key, "model": model_path, "min_num_warps": warps, "problems": listed}, indent=1)
    )
    print(
        f"{key}: {len(listed)} of {len(base)} validation problems keep another set with min_num_warps={warps}; wrote {output}"
    )


def cmd_report(files: list[str]) -> None:
    from collections import defaultdict

    ratios: dict[str, float] = {}
    dtypes: dict[str, str] = {}
    spread, errors, skipped, unmet = [], 0, [], 0
    for f in files:
        for row in json.loads(Path(f).read_text())["rows"]:
            by: dict[str, list[float]] = defaultdict(list)
            for r in row["runs"]:
                if "error" in r:
                    errors += 1
                    continue
                by[r["variant"]].append(r["kernel_us"])
                stats = r.get("diode") or {}
                if r["variant"] == "warps4" and "few_warps_skipped" in stats:
                    skipped.append(stats["few_warps_skipped"])
                    unmet += stats.get("min_num_warps_unmet", 0)
            if by["default"] and by["warps4"]:
                ratios[row["key"]] = gm(by["warps4"]) / gm(by["default"])
                dtypes[row["key"]] = row["problem"].get("dtype", "float16")
            if len(by["default"]) == 2:
                spread.append(max(by["default"]) / min(by["default"]))
    r = np.array(list(ratios.values()))
    rng = np.random.default_rng(0)
    boots = [gm(list(r[rng.integers(0, len(r), len(r))])) for _ in range(2000)]
    print(f"{len(r)} problems, {errors} failed compiles: warps4 / default kernel time geomean {gm(list(r)):.4f} "
          f"(95% {np.percentile(boots, 2.5):.4f}-{np.percentile(boots, 97.5):.4f}), p95 {np.percentile(r, 95):.3f}, "
          f"max {r.max():.3f}; over 1.03x on {int((r > 1.03).sum())}, under 0.97x on {int((r < 0.97).sum())}")  # fmt: skip
    for dt in sorted(set(dtypes.values())):
        v = [x for k, x in ratios.items() if dtypes[k] == dt]
        print(f"  {dt}: {len(v)} problems, geomean {gm(v):.4f}, max {max(v):.3f}")
    if spread:
        print(f"  the defaults' two compiles of one problem apart by (max / min): geomean {gm(spread):.4f}, "
              f"max {max(spread):.3f} ({len(spread)} problems)")  # fmt: skip
    if skipped:
        print(f"  warps4 compiles with stats: {len(skipped)}; configs left out per compile: median "
              f"{int(np.median(skipped))}, min {min(skipped)}; min_num_warps_unmet {unmet}")  # fmt: skip
    for k, x in sorted(ratios.items(), key=lambda kv: -kv[1])[:5]:
        print(f"  {x:.3f}  {k}")


if __name__ == "__main__":
    if sys.argv[1] == "cost":
        cmd_cost(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 4)
    elif sys.argv[1] == "report":
        cmd_report(sys.argv[2:])
    elif sys.argv[1] == "list":
        cmd_list(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    else:
        raise SystemExit(__doc__)
