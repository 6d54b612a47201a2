"""Session 50: time the model's top-1 pick and stock max-autotune's pick again, in a run neither was
picked from.

    select KEY OUT.json.gz [--model M]   (dev machine) per validation problem of KEY, the Triton
                                         configs among: the model's top-1 pick, its first TOP Triton
                                         configs, stock's pick -> a choice-lists file
    run LISTS OUT.msgpack                (GPU machine) session 44's ``active.py run``: the same
                                         sweep timer as the validation set, ATen included
    score KEY LISTS RUN.msgpack [RUN.msgpack ...] [--model M]
                                         (dev machine) the model's top-1 pick against stock's pick
                                         in the validation set's timings and in the new runs'

Why. ``diode validate-max-autotune`` compares the two picks' times in ``data/KEY/val.msgpack``,
and stock's pick is, by definition, the fastest of its ~20 candidates *in those timings*: with
timing noise, the minimum of several near-equal times is low by more than the noise's mean, so
stock's recorded time is optimistic, while the model's pick was made without the timings and its
recorded time is not. In a run that made neither pick, both times are unbiased. ``score`` prints
both comparisons, per problem the new-to-validation time ratio of each pick (their difference is
the selection's bias; the run's common shift cancels), and what a perfect call between the
model's first Triton config and ATen would give.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_TOP = 3


def model_file(key: str, given: str | None) -> Path:
    return (
        Path(given) if given else ROOT / f"packages/torch-diode-models/src/torch_diode_models/{key}-matmul.safetensors"
    )


@functools.cache
def val_data(key: str):
    """KEY's validation set and stock's picks (``val-stock-picks.json``), read once per process."""
    from torch_diode.dataset import read_dataset
    from torch_diode.evaluate import read_max_autotune_solution

    data = ROOT / "data" / key
    return read_dataset(data / "val.msgpack"), read_max_autotune_solution(data / "val-stock-picks.json")


def evals(key: str, model):
    """``problem_evals`` of ``model`` (a file, or a loaded model) on KEY's validation set as ``diode
    validate-max-autotune`` makes them (the handler's compile cost, stock's picks from
    ``val-stock-picks.json``), and stock's picks."""
    from torch_diode.config import DiodeOptions
    from torch_diode.evaluate import problem_evals
    from torch_diode.model import load_model

    dataset, stock = val_data(key)
    if isinstance(model, (str, Path)):
        model = load_model(model)
    ev = problem_evals(model, dataset, stock=stock, max_compile_cost=DiodeOptions().max_compile_cost)
    return ev, stock


def cmd_select(a: argparse.Namespace) -> int:
    from torch_diode.collect.sweep import write_choice_lists

    ev, stock = evals(a.key, model_file(a.key, a.model))
    lists = {}
    for e in ev:
        if e.problem not in stock:
            continue
        order = [e.choices[j] for j in e.ranked()]
        picks = [order[0], *[c for c in order if not c.is_aten][: a.top], stock[e.problem].choice]
        lists[e.problem] = [c for c in dict.fromkeys(picks) if not c.is_aten]
    note = f"session 50: {a.key} validation problems, model's top-1, first {a.top} Triton, stock's pick"
    write_choice_lists(a.out, lists, note)
    n = sum(len(v) for v in lists.values())
    print(f"{a.out}: {len(lists)} problems, {n} Triton configs (ATen is always timed)")
    return 0


def _times(paths: list[str]) -> list[dict]:
    """Per run, ``{problem: {choice: median us}}``."""
    from torch_diode.dataset import read_dataset

    out = []
    for p in paths:
        ds = read_dataset(p)
        out.append({pt.problem: {ds.choices[c]: t for c, t in pt.median_by_choice().items()} for pt in ds.by_problem()})
    return out


def cmd_score(a: argparse.Namespace) -> int:
    import numpy as np

    from torch_diode.collect.sweep import read_choice_lists
    from torch_diode.evaluate import geomean_ci95

    ev, stock = evals(a.key, model_file(a.key, a.model))
    lists = read_choice_lists(a.lists)
    runs = _times(a.runs)
    rows = []
    missing = 0
    for e in ev:
        if e.problem not in lists or e.stock_us is None:
            continue
        order = [e.choices[j] for j in e.ranked()]
        top, st = order[0], stock[e.problem].choice
        first_triton = next(c for c in order if not c.is_aten)
        val = dict(zip(e.choices, e.measured_us.tolist()))
        new = [r.get(e.problem, {}) for r in runs]
        need = (top, st, first_triton)
        if not all(c in r for r in new for c in need) or not all(c in val for c in need):
            missing += 1
            continue

        def fresh(c, new=new):  # geometric mean over the new runs
            return math.exp(np.mean([math.log(r[c]) for r in new]))

        aten_new = min(fresh(c) for c in new[0] if c.is_aten)
        rows.append(
            {
                "problem": e.problem,
                "val": math.log(val[top] / val[st]),
                "new": math.log(fresh(top) / fresh(st)),
                "drift_top": math.log(fresh(top) / val[top]),
                "drift_stock": math.log(fresh(st) / val[st]),
                "perfect_new": math.log(min(fresh(first_triton), aten_new) / fresh(st)),
                "same": top == st,
                "runs": [math.log(r[top] / r[st]) for r in new],
            }
        )
    if not rows:
        print("no problem has both picks timed in every run")
        return 1

    def line(name: str, x) -> str:
        x = np.asarray(x)
        lo, hi = geomean_ci95(np.exp(x))
        return (
            f"{name}: geomean {math.exp(x.mean()):.4f} (95% CI {lo:.4f}-{hi:.4f}), p95 "
            f"{math.exp(np.quantile(x, 0.95)):.3f}, no slower on {int((x <= 0).sum())} of {len(x)}"
        )

    print(
        f"{a.key}: {len(rows)} validation problems with both picks timed in {len(runs)} new run(s) "
        f"({missing} without); the same pick on {sum(r['same'] for r in rows)}"
    )
    print(line("top-1 / stock, validation set's timings", [r["val"] for r in rows]))
    print(line("top-1 / stock, new runs' timings       ", [r["new"] for r in rows]))
    for i in range(len(runs)):
        print(line(f"  new run {i + 1} alone                  ", [r["runs"][i] for r in rows]))
    diff = [r["drift_stock"] - r["drift_top"] for r in rows if not r["same"]]
    print(
        f"new / validation time, geomean: model's pick {math.exp(np.mean([r['drift_top'] for r in rows])):.4f}, "
        f"stock's pick {math.exp(np.mean([r['drift_stock'] for r in rows])):.4f}; where they differ "
        f"({len(diff)}), stock's drift over the model's {math.exp(np.mean(diff)):.4f}"
    )
    print(line("perfect ATen-or-first-Triton call / stock, new runs", [r["perfect_new"] for r in rows]))
    if len(runs) > 1:
        x = np.array([r["runs"] for r in rows])
        print(f"run-to-run sd of log(top-1 / stock): {np.std(x[:, 0] - x[:, 1]) / math.sqrt(2):.4f}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("select")
    s.add_argument("key")
    s.add_argument("out")
    s.add_argument("--model")
    s.add_argument("--top", type=int, default=DEFAULT_TOP)
    s.set_defaults(fn=cmd_select)
    c = sub.add_parser("score")
    c.add_argument("key")
    c.add_argument("lists")
    c.add_argument("runs", nargs="+")
    c.add_argument("--model")
    c.set_defaults(fn=cmd_score)
    a = ap.parse_args()
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
