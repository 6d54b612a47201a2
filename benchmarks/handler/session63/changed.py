"""Session 63, rule 2: ``aten_alone_below_us=50`` against the defaults where it changes what is kept.

    python benchmarks/handler/session63/changed.py list KEY MODEL OUT.json     # offline, any machine
    python benchmarks/handler/session63/changed.py time LIST.json MODEL OUT.json [--budget S]   # a GPU
    python benchmarks/handler/session63/changed.py report OUT.json

``list``: the validation problems of ``data/KEY/val.msgpack`` whose top-3 kept set (the handler's
real selection, ``timer_sim.kept_sets``) differs between ``off`` (the option off) and ``short``
(``aten_alone_below_us=50``), written as JSON.

``time``: for each listed problem, its tensors (``torch_diode.collect.inductor.make_inputs``: the
problem's shapes, strides and dtype), compiled cold with ``max-autotune`` and the handler installed,
in the order off, short, off, short; each compiled function's kernel time (CUDA graph replays, the
speed check's ``kernel_time_us``) and eager ATen's. ``OUT`` is rewritten after every problem (an
interrupted run keeps what it measured); ``--budget``: no problem is started after so many seconds.

``report``: short / off per problem (each variant's time the geometric mean of its compiles), the
geomean, p95 and max, the same over the problems where both short compiles kept a single choice
(the option acted: the handler's ``single_choice`` count), and each variant's spread between its
two compiles.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[2] / "scripts"))

ORDER = ("off", "short", "off", "short")
# "off" was the defaults when rule 2 ran ({} in its JSON); 0 turns the option off now that 50 is the default
OPTIONS = {"off": {"aten_alone_below_us": 0.0}, "short": {"aten_alone_below_us": 50.0}}


def problem_from_json(d: dict):
    from torch_diode.records import Problem

    return Problem(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


def cmd_list(a: argparse.Namespace) -> None:
    from timer_sim import kept_sets

    from torch_diode.dataset import read_dataset
    from torch_diode.model import load_model

    evals, keeps = kept_sets(load_model(a.model), read_dataset(f"data/{a.key}/val.msgpack"))
    out = []
    for i, e in enumerate(evals):
        off, short = keeps["off"][i][3], keeps["short"][i][3]
        if sorted(off) != sorted(short):
            out.append(
                {
                    "problem": dataclasses.asdict(e.problem),
                    "off": [e.choices[j].key() for j in off],
                    "short": [e.choices[j].key() for j in short],
                }
            )
    Path(a.output).write_text(json.dumps({"key": a.key, "model": a.model, "problems": out}, indent=1))
    print(f"{a.key}: {len(out)} of {len(evals)} validation problems keep another set with short; wrote {a.output}")


def cmd_time(a: argparse.Namespace) -> None:
    import torch
    from check_handler_gpu import cold_compile_state, kernel_time_us, stats_delta, warm_up_compile

    from torch_diode.bench.measure import compile_for, environment, first_call_s
    from torch_diode.collect.inductor import gemm_function, make_inputs
    from torch_diode.inductor import install_diode_choices

    listed = json.loads(Path(a.list).read_text())["problems"]
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 as the training timings: IEEE
    result: dict = {"environment": environment(), "model": a.model, "order": ORDER, "options": OPTIONS, "rows": []}
    t0 = time.monotonic()
    warm_up_compile()
    for entry in listed:
        if a.budget and time.monotonic() - t0 > a.budget:
            break
        p = problem_from_json(entry["problem"])
        fn, args = gemm_function(p.op), make_inputs(p, "cuda")
        row: dict = {"problem": entry["problem"], "key": p.key(), "runs": []}
        for variant in ORDER:
            run: dict = {"variant": variant}
            try:
                with install_diode_choices(model=a.model, **OPTIONS[variant]) as handle:
                    before = handle.get_stats()
                    with cold_compile_state():
                        compiled = compile_for("max-autotune", fn)
                        run["compile_s"] = round(first_call_s(compiled, args), 3)
                        run["diode"] = stats_delta(before, handle.get_stats())
                        run["kernel_us"] = round(kernel_time_us(compiled, args, graph_iters=20, reps=20), 3)
            except Exception as e:  # reported per run; the problem's other runs go on
                run["error"] = f"{type(e).__name__}: {e}"[:500]
            row["runs"].append(run)
        row["aten_kernel_us"] = round(kernel_time_us(fn, args, graph_iters=20, reps=20), 3)
        result["rows"].append(row)
        Path(a.output).write_text(json.dumps(result, indent=1))
        times = " ".join(f"{r['variant']} {r.get('kernel_us', math.nan):.2f}" for r in row["runs"])
        print(f"{p.key():<60} {times} aten {row['aten_kernel_us']:.2f}", flush=True)
        torch.cuda.empty_cache()
    print(
        f"measured {len(result['rows'])} of {len(listed)} problems in {time.monotonic() - t0:.0f} s; wrote {a.output}"
    )


def gm(v) -> float:
    return float(np.exp(np.mean(np.log(v))))


def cmd_report(a: argparse.Namespace) -> None:
    result = json.loads(Path(a.output).read_text())
    ratios, acted, spreads = [], [], {"off": [], "short": []}
    print("| problem | off us (2 compiles) | short us (2 compiles) | ATen us | short / off | short single choice |")
    print("|---|---|---|---|---|---|")
    for row in result["rows"]:
        t = {v: [r["kernel_us"] for r in row["runs"] if r["variant"] == v and "kernel_us" in r] for v in OPTIONS}
        if not all(len(x) == 2 for x in t.values()):
            print(f"| {row['key']} | incomplete: {[r.get('error') for r in row['runs'] if 'error' in r]} |")
            continue
        ratio = gm(t["short"]) / gm(t["off"])
        ratios.append(ratio)
        for v in OPTIONS:
            spreads[v].append(max(t[v]) / min(t[v]))
        single = [r["diode"]["single_choice"] for r in row["runs"] if r["variant"] == "short"]
        if all(single):
            acted.append(ratio)
        print(
            f"| {row['key']} | {t['off'][0]:.2f} / {t['off'][1]:.2f} | {t['short'][0]:.2f} / {t['short'][1]:.2f} | "
            f"{row['aten_kernel_us']:.2f} | {ratio:.3f} | {single} |"
        )
    r = np.array(ratios)
    print(
        f"\n{len(r)} problems: short / off geomean **{gm(r):.4f}**, p95 {np.percentile(r, 95):.3f}, max {r.max():.3f}, "
        f"min {r.min():.3f}; faster on {int((r < 1).sum())}, slower on {int((r > 1).sum())}"
    )
    r = np.array(acted)
    print(
        f"{len(r)} of them where both short compiles kept a single choice (the option acted): geomean {gm(r):.4f}, "
        f"p95 {np.percentile(r, 95):.3f}, max {r.max():.3f}; faster on {int((r < 1).sum())}, slower on {int((r > 1).sum())}"
    )
    for v in OPTIONS:
        s = np.array(spreads[v])
        print(f"{v}: slower / faster of its two compiles, median {np.median(s):.3f}, max {s.max():.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("list")
    p.add_argument("key")
    p.add_argument("model")
    p.add_argument("output")
    p = sub.add_parser("time")
    p.add_argument("list")
    p.add_argument("model")
    p.add_argument("output")
    p.add_argument("--budget", type=float, default=None)
    p = sub.add_parser("report")
    p.add_argument("output")
    a = ap.parse_args()
    {"list": cmd_list, "time": cmd_time, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    main()
