"""Session 64, offline: what keeping one choice on GEMMs predicted short would cost in kernel time
and save in benchmarking.

    python benchmarks/handler/session64/single_sim.py KEY MODEL [--inductor-run R.msgpack] [--below 20,50,100]
        [--ungated] [--list OUT.json]

Session 64's profile (``report.py``): Inductor's autotuning costs ~0.24-0.37 s per benchmarked
choice on GEMMs of 5-20 us (0.03 s on a 190 us one), and session 62 found its timer least
trustworthy there (ATen timed 13-27 us slow under 50 us). For each validation problem this takes
what the handler keeps with its defaults of before session 64 at top-3 (``one_below_us`` off) (``torch_diode.demo.handler_keeps``) and, for a
variant ``one<T>``, what it keeps with the handler's ``one_below_us=T`` (the model's first choice
alone, ATen or Triton, where that prediction is confident and under T us, so Inductor lowers it
without a benchmark; ``--ungated``: the lowest prediction alone whatever its confidence, PLAN rule
3's figures). ``--list``: the problems whose kept set the first T changes, for ``changed64.py time``. The pick of each kept
set is simulated with the exact timer and, with ``--inductor-run`` (session 62's own-timer run of
the validation problems on the same GPU), with Inductor's measured ATen handicap, as
``session63/timer_sim.py`` does; regret is against the best measured time. Also: how many
problems each variant keeps one choice on and how many choices Inductor benchmarks in all.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session63"))
from timer_sim import gm, pick, timers

from torch_diode.config import config
from torch_diode.dataset import read_dataset
from torch_diode.demo import best_measured_us, handler_keeps
from torch_diode.evaluate import evaluate_model, geomean_ci95
from torch_diode.model import load_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("key")
    ap.add_argument("model")
    ap.add_argument("--inductor-run", default=None)
    ap.add_argument("--below", default="20,50,100", help="thresholds T in us (comma-separated)")
    ap.add_argument("--ungated", action="store_true", help="the lowest prediction alone, whatever its confidence")
    ap.add_argument("--list", default=None, help="write the problems whose kept set the first T changes (JSON)")
    a = ap.parse_args()
    thresholds = [float(x) for x in a.below.split(",")]
    val = read_dataset(Path(f"data/{a.key}/val.msgpack"))
    model = load_model(a.model)
    opts = config.options()  # the handler's defaults (aten_alone_below_us 50 since session 63)
    _, evals = evaluate_model(
        model, val, max_compile_cost=opts.max_compile_cost, diversity=opts.diversity, cliff_guard=opts.cliff_guard
    )
    with config.patch(one_below_us=None):  # the defaults before session 64's one_below_us 20, as when this ran
        default = [handler_keeps(model, e, (3,))[3] for e in evals]
    variants = {"default": default}
    if a.ungated:  # PLAN rule 3's figures: the lowest prediction alone, whatever its confidence
        first, first_us = [], []
        for e in evals:
            log_t = np.asarray(model.predict(e.problem, e.choices).log_time_us, dtype=np.float64)
            i = int(np.argmin(log_t))
            first.append(i)
            first_us.append(float(np.exp(log_t[i])))
        for t in thresholds:
            variants[f"one<{t:g}"] = [[first[i]] if first_us[i] < t else default[i] for i in range(len(evals))]
    else:  # the handler's option, its real selection rule (confidence gate included)
        for t in thresholds:
            with config.patch(one_below_us=t):
                variants[f"one<{t:g}"] = [handler_keeps(model, e, (3,))[3] for e in evals]
    if a.list:
        t = thresholds[0]
        name = f"one<{t:g}"
        out = [
            {
                "problem": e.problem.to_dict(),
                "default": [e.choices[j].key() for j in default[i]],
                name: [e.choices[j].key() for j in variants[name][i]],
            }
            for i, e in enumerate(evals)
            if sorted(variants[name][i]) != sorted(default[i])
        ]
        Path(a.list).write_text(
            json.dumps({"key": a.key, "model": a.model, "one_below_us": t, "problems": out}, indent=1)
        )
        print(f"{len(out)} of {len(evals)} problems keep another set with one_below_us={t:g}; wrote {a.list}")

    run = read_dataset(a.inductor_run) if a.inductor_run else None
    print(f"{a.key}: {len(evals)} validation problems, {a.model}; handler defaults at top-3")
    for label, idx, hc in timers(evals, val, run):
        print(f"\n{label}, {len(idx)} problems")
        print(
            "| variant | regret (geomean) | 95% | p95 | max | / default's pick | one choice kept on | "
            "choices benchmarked (sum) | of them on the changed problems |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        base = None
        for name, keeps in variants.items():
            r = np.array([float(evals[i].measured_us[pick(evals[i], keeps[i], hc(evals[i]))]) for i in idx])
            r = r / np.array([best_measured_us(evals[i]) for i in idx])
            base = r if base is None else base
            single = sum(len(keeps[i]) == 1 for i in idx)
            bench = sum(len(keeps[i]) for i in idx if len(keeps[i]) > 1)
            changed = [i for i in idx if keeps[i] != default[i]]
            bench_changed = sum(len(default[i]) for i in changed if len(default[i]) > 1)
            lo, hi = geomean_ci95(r)
            print(
                f"| {name} | {gm(r):.4f} | {lo:.4f}-{hi:.4f} | {np.percentile(r, 95):.3f} | {r.max():.3f} | "
                f"{gm(r / base):.4f} | {single} | {bench} | {bench_changed} saved on {len(changed)} |"
            )


if __name__ == "__main__":
    main()
