"""Session 62: stock max-autotune's pick made from a benchmark run of its own (rule 11).

    python benchmarks/models/session62/stock_run.py KEY MODEL STOCK_RUN.msgpack [--val data/KEY/val.msgpack]

``STOCK_RUN``: ATen + Inductor's DEFAULT candidates of the validation problems, measured in a run
of their own (``scripts/campaign.py run --split val-stock``). Stock's pick there is its fastest
record (``evaluate.max_autotune_solution_from_dataset``, as ``diode validate-max-autotune
--max-autotune-solution`` reads a dataset); it is scored, as the model's pick is, in the validation
set's timings. Printed, on the problems both files hold: the model's top-1 / stock's pick with
stock's picks from ``val-stock-picks.json`` (chosen in the validation set's own timings) and from
the run; how often the two give the same pick; picks the validation set did not time (their run
time used, as ``evaluate.problem_evals`` does); the run's drift against the validation set on the
choices both timed (geomean of run / val, every choice and stock's picks alone); the problems
whose ratio moved most.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from torch_diode.dataset import read_dataset
from torch_diode.evaluate import (
    geomean_ci95,
    max_autotune_solution_from_dataset,
    problem_evals,
    read_max_autotune_solution,
)
from torch_diode.model import load_model


def gm(v) -> float:
    return float(np.exp(np.mean(np.log(v)))) if len(v) else math.nan


def choice_medians(ds) -> dict:
    """``{problem: {choice: median time (us)}}`` of a dataset."""
    return {pt.problem: {ds.choices[c]: t for c, t in pt.median_by_choice().items()} for pt in ds.by_problem()}


def top1_over_stock(evals: dict, picks: dict, problems) -> np.ndarray:
    """The model's top-1 pick's time over stock's, for each of ``problems`` (in that order) with a
    stock time from ``picks`` (``ProblemEval.with_stock``: the validation set's measurement of the
    pick, else the pick's own time); ``evals``: ``{problem: ProblemEval}``, predicted once."""
    out = []
    for p in problems:
        e = evals[p].with_stock(picks.get(p))
        if e.stock_us is not None:
            out.append(float(e.measured_us[int(e.ranked()[0])]) / e.stock_us)
    return np.array(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("key")
    ap.add_argument("model")
    ap.add_argument("stock_run")
    ap.add_argument("--val", default=None)
    a = ap.parse_args()
    val_path = Path(a.val or f"data/{a.key}/val.msgpack")
    val = read_dataset(val_path)
    run = read_dataset(a.stock_run)
    derived = read_max_autotune_solution(val_path.with_name("val-stock-picks.json"))
    fresh = max_autotune_solution_from_dataset(run)
    common = [p for p in fresh if p in derived]
    print(f"{a.key}: {len(fresh)} problems in {a.stock_run}, {len(derived)} derived picks, {len(common)} in both")

    evals = {e.problem: e for e in problem_evals(load_model(a.model), val)}
    rd, rf = top1_over_stock(evals, derived, common), top1_over_stock(evals, fresh, common)
    for name, r in (
        ("stock's pick from the validation set's timings (val-stock-picks.json)", rd),
        ("stock's pick from its own run", rf),
    ):
        lo, hi = geomean_ci95(r)
        print(
            f"  top-1 / {name}: {gm(r):.4f} (95% {lo:.4f}-{hi:.4f}), p95 {np.percentile(r, 95):.3f}, "
            f"max {r.max():.3f}, no slower on {int((r <= 1.0).sum())} of {len(r)}"
        )

    same = sum(derived[p].choice == fresh[p].choice for p in common)
    val_med = choice_medians(val)
    untimed = [p for p in common if fresh[p].choice not in val_med[p]]
    print(
        f"  the same pick both ways on {same} of {len(common)}; the run's pick not timed in the validation set: {len(untimed)}"
    )
    for p in untimed:
        print(f"    {p.key()}: {fresh[p].choice.key()} (its run time used)")
    drift, drift_pick = [], []
    for pt in run.by_problem():
        if pt.problem not in val_med:
            continue
        vm = val_med[pt.problem]
        for c, t in pt.median_by_choice().items():
            ch = run.choices[c]
            if ch in vm:
                drift.append(t / vm[ch])
                if pt.problem in fresh and fresh[pt.problem].choice == ch:
                    drift_pick.append(t / vm[ch])
    print(
        f"  run / validation set on the same choices: geomean {gm(drift):.4f} over {len(drift)} timings; "
        f"stock's run picks alone {gm(drift_pick):.4f} over {len(drift_pick)}"
    )
    moved = sorted(range(len(common)), key=lambda i: -abs(math.log(rf[i] / rd[i])))[:12]
    print("  moved most (top-1 / stock: validation-timed pick -> own-run pick):")
    for i in moved:
        if rf[i] == rd[i]:
            break
        p = common[i]
        print(
            f"    {p.key():50s} {rd[i]:.3f} -> {rf[i]:.3f}  stock {derived[p].choice.key()} -> {fresh[p].choice.key()}"
        )


if __name__ == "__main__":
    main()
