"""Session 63, rule 1 (c): what a compile gets with the handler's ATen-alone options, offline.

    python benchmarks/handler/session63/timer_sim.py KEY MODEL [--inductor-run R.msgpack] [--val V]

For every validation problem, the choices the handler keeps (``torch_diode.demo.handler_keeps``:
the real selection rule, top-3 and top-1) with three option sets: ``off`` (neither ATen-alone
option), ``short`` (``aten_alone_below_us=50``, the default since this session) and ``on``
(``aten_alone_when_best``). Inductor then
benchmarks what is kept and lowers the fastest; that pick is simulated two ways and scored in the
validation set's timings against the best measured time of the problem (regret; geomean):

* exact timer: Inductor's benchmark ranks the kept choices as the validation set does (the
  ``diode demo`` figure; every problem);
* Inductor's measured timer (``--inductor-run``: session 62's rule 12, Inductor's own autotuning
  times of the validation problems on the same GPU): the ATen choices ranked with that problem's
  measured handicap added, ATen's median offset minus the Triton configs' median offset
  (``session62/timer_offsets.problem_offsets``); only the problems the run measured.

Also printed: stock max-autotune's pick in the same scoring (``val-stock-picks.json``'s, and, with
``--inductor-run``, Inductor's own pick: the run's fastest record), and on how many problems each
option set keeps something else than ``off``.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models" / "session62"))
from stock_run import choice_medians
from timer_offsets import problem_offsets

from torch_diode.config import config
from torch_diode.dataset import read_dataset
from torch_diode.demo import best_measured_us, handler_keeps
from torch_diode.evaluate import (
    evaluate_model,
    geomean_ci95,
    max_autotune_solution_from_dataset,
    read_max_autotune_solution,
)
from torch_diode.model import load_model

# each set in full: the defaults changed with this session (aten_alone_below_us 50 since rule 2)
# and the next (one_below_us 20 since session 64; off here, as when these ran)
VARIANTS = {
    "off": {"aten_alone_when_best": False, "aten_alone_below_us": None, "one_below_us": None},
    "short": {"aten_alone_when_best": False, "aten_alone_below_us": 50.0, "one_below_us": None},
    "on": {"aten_alone_when_best": True, "aten_alone_below_us": None, "one_below_us": None},
}
KS = (3, 1)


def gm(v) -> float:
    return float(np.exp(np.mean(np.log(v)))) if len(v) else math.nan


def kept_sets(model, val) -> tuple[list, dict]:
    """The model's evaluations of ``val``'s problems and, per option set of ``VARIANTS``, what the
    handler keeps of each (``{name: [{k: indices into e.choices}]}``, in the order of the evaluations)."""
    opts = config.options()
    _, evals = evaluate_model(
        model, val, max_compile_cost=opts.max_compile_cost, diversity=opts.diversity, cliff_guard=opts.cliff_guard
    )
    keeps = {}
    for name, changes in VARIANTS.items():
        with config.patch(**changes):
            keeps[name] = [handler_keeps(model, e, KS) for e in evals]
    return evals, keeps


def timers(evals, val, run) -> list:
    """The timers a pick is simulated with: ``(label, indices into evals, ATen handicap in us of
    an evaluation)``; the exact one on every problem and, given ``run`` (Inductor's own-timer run
    of the validation problems), Inductor's measured one on the problems it measured."""
    out = [("exact timer", list(range(len(evals))), lambda e: 0.0)]
    if run is not None:
        handicap = {p: at - tr for p, (_, at, tr) in problem_offsets(choice_medians(val), run).items()}
        idx = [i for i, e in enumerate(evals) if e.problem in handicap]
        out.append(("Inductor's measured timer", idx, lambda e: handicap[e.problem]))
    return out


def pick(e, kept: list[int], aten_handicap_us: float) -> int:
    """The kept choice Inductor lowers when its timer adds ``aten_handicap_us`` to ATen's time."""
    t = [float(e.measured_us[i]) + (aten_handicap_us if e.choices[i].is_aten else 0.0) for i in kept]
    return kept[int(np.argmin(t))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("key")
    ap.add_argument("model")
    ap.add_argument("--inductor-run", default=None)
    ap.add_argument("--val", default=None)
    a = ap.parse_args()
    val_path = Path(a.val or f"data/{a.key}/val.msgpack")
    val = read_dataset(val_path)
    evals, keeps = kept_sets(load_model(a.model), val)
    stock_picks = {"val-stock-picks.json": read_max_autotune_solution(val_path.with_name("val-stock-picks.json"))}
    run = read_dataset(a.inductor_run) if a.inductor_run else None
    if run is not None:
        stock_picks["Inductor's own pick"] = max_autotune_solution_from_dataset(run)

    print(f"{a.key}: {len(evals)} validation problems, {a.model}")
    for label, idx, hc in timers(evals, val, run):
        print(f"\n{label}, {len(idx)} problems: regret of the pick (geomean, 95% interval; p95; max)")
        print("| top-k | option set | regret | 95% | p95 | max | kept set differs from off | pick / off's pick |")
        print("|---|---|---|---|---|---|---|---|")
        for k in KS:
            base = None
            for name in VARIANTS:
                r, differs = [], 0
                for i in idx:
                    e = evals[i]
                    kept = keeps[name][i][k]
                    differs += sorted(kept) != sorted(keeps["off"][i][k])
                    r.append(float(e.measured_us[pick(e, kept, hc(e))]) / best_measured_us(e))
                r = np.array(r)
                base = r if base is None else base
                lo, hi = geomean_ci95(r)
                print(
                    f"| {k} | {name} | {gm(r):.4f} | {lo:.4f}-{hi:.4f} | {np.percentile(r, 95):.3f} | {r.max():.3f} | "
                    f"{differs} | {gm(r / base):.4f} |"
                )
        for sname, picks in stock_picks.items():
            r = []
            for i in idx:
                e = evals[i].with_stock(picks.get(evals[i].problem))
                if e.stock_us is not None:
                    r.append(e.stock_us / best_measured_us(e))
            print(f"stock max-autotune, {sname}: regret {gm(r):.4f} on {len(r)} of these problems")


if __name__ == "__main__":
    main()
