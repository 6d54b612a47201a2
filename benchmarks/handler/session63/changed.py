"""Session 63, rules 2 and 3: handler settings and stock compiled on a GPU, problem by problem.

    python benchmarks/handler/session63/changed.py list KEY MODEL OUT.json     # offline, any machine
    python benchmarks/handler/session63/changed.py sample KEY N OUT.json [--seed S]   # offline
    python benchmarks/handler/session63/changed.py time LIST.json MODEL OUT.json [--budget S]
        [--order off,short,off,short] [--shard I/N]                                 # a GPU
    python benchmarks/handler/session63/changed.py report OUT.json [OUT2.json ...]

``list``: the validation problems of ``data/KEY/val.msgpack`` whose top-3 kept set (the handler's
real selection, ``timer_sim.kept_sets``) differs between ``off`` (the option off) and ``short``
(``aten_alone_below_us=50``), written as JSON. ``sample``: N validation problems drawn at random
(seeded), in the same format.

``time``: for each listed problem, its tensors (``torch_diode.collect.inductor.make_inputs``: the
problem's shapes, strides and dtype), compiled cold with ``max-autotune`` in the variants of
``--order`` (``VARIANTS``: the handler with the option off, with it at 50 us, with its defaults, or
stock Inductor without the handler); each compiled function's kernel time (CUDA graph replays, the
speed check's ``kernel_time_us``) and eager ATen's. ``OUT`` is rewritten after every problem (an
interrupted run keeps what it measured); ``--budget``: no problem is started after so many seconds;
``--shard I/N``: only the listed problems I, I + N, ... (one process per GPU).

``report``: the second variant of the run's order over the first (``short / off``, ``default /
stock``) per problem (each variant's time the geometric mean of its compiles), the geomean, p95 and
max, the same over the problems where every compile of the second variant kept a single choice
(the handler's ``single_choice`` count), and each variant's spread between its compiles when it has
several. Several OUT files (a run's shards) are reported as one.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from torch_diode.records import Problem

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[2] / "scripts"))

# handler options per variant (None: stock Inductor, no handler). "off" was the defaults when rule 2
# ran ({} in its JSON); 0 turns an option off now that its default is on (aten_alone_below_us 50
# since session 63, one_below_us 20 since session 64, off in "off" and "short" as when they ran).
# "default": the handler's defaults of the day (session 63's rule 3, session 64's rule 4).
VARIANTS: dict[str, dict | None] = {
    "off": {"aten_alone_below_us": 0.0, "one_below_us": 0.0},
    "short": {"aten_alone_below_us": 50.0, "one_below_us": 0.0},
    "default": {},
    "stock": None,
}


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
                    "problem": e.problem.to_dict(),
                    "off": [e.choices[j].key() for j in off],
                    "short": [e.choices[j].key() for j in short],
                }
            )
    Path(a.output).write_text(json.dumps({"key": a.key, "model": a.model, "problems": out}, indent=1))
    print(f"{a.key}: {len(out)} of {len(evals)} validation problems keep another set with short; wrote {a.output}")


def cmd_sample(a: argparse.Namespace) -> None:
    from torch_diode.dataset import read_dataset

    problems = [pt.problem for pt in read_dataset(f"data/{a.key}/val.msgpack").by_problem()]
    pick = np.random.default_rng(a.seed).choice(len(problems), size=min(a.n, len(problems)), replace=False)
    out = [{"problem": problems[int(i)].to_dict()} for i in sorted(pick)]
    Path(a.output).write_text(json.dumps({"key": a.key, "seed": a.seed, "problems": out}, indent=1))
    print(f"{a.key}: {len(out)} of {len(problems)} validation problems (seed {a.seed}); wrote {a.output}")


def cmd_time(a: argparse.Namespace) -> None:
    import torch
    from check_handler_gpu import compile_and_time, kernel_time_us, warm_up_compile

    from torch_diode.bench.measure import environment
    from torch_diode.collect.inductor import gemm_function, make_inputs

    order = a.order.split(",")
    unknown = sorted(set(order) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"--order: unknown variant(s) {unknown}; known: {', '.join(VARIANTS)}")
    shard, shards = (int(x) for x in a.shard.split("/"))
    listed = json.loads(Path(a.list).read_text())["problems"][shard::shards]
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 as the training timings: IEEE
    options = {v: VARIANTS[v] for v in order}
    result: dict = {"environment": environment(), "model": a.model, "order": order, "options": options, "rows": []}
    t0 = time.monotonic()
    warm_up_compile()
    for entry in listed:
        if a.budget and time.monotonic() - t0 > a.budget:
            break
        p = Problem.from_dict(entry["problem"])
        fn, args = gemm_function(p.op), make_inputs(p, "cuda")
        row: dict = {"problem": entry["problem"], "key": p.key(), "runs": []}
        for variant in order:
            run = compile_and_time(a.model, VARIANTS[variant], fn, args, graph_iters=20, reps=20, kernel_digits=3)
            row["runs"].append({"variant": variant, **run})
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


def geomean_ci(r: np.ndarray) -> str:
    from torch_diode.evaluate import geomean_ci95

    lo, hi = geomean_ci95(r)
    return f"{lo:.4f}-{hi:.4f}"


def cmd_report(a: argparse.Namespace) -> None:
    results = [json.loads(Path(f).read_text()) for f in a.outputs]
    order = results[0]["order"]
    if any(r["order"] != order for r in results):
        raise SystemExit("report: the files were run with different --order")
    first, second = list(dict.fromkeys(order))[:2]
    n = {v: order.count(v) for v in (first, second)}
    ratios, acted, spreads = [], [], {first: [], second: []}
    print(
        f"| problem | {first} us ({n[first]} compiles) | {second} us ({n[second]} compiles) | ATen us | "
        f"{second} / {first} | {second} single choice |"
    )
    print("|---|---|---|---|---|---|")
    for row in (row for r in results for row in r["rows"]):
        t = {v: [r["kernel_us"] for r in row["runs"] if r["variant"] == v and "kernel_us" in r] for v in n}
        if not all(len(t[v]) == n[v] for v in n):
            print(f"| {row['key']} | incomplete: {[r.get('error') for r in row['runs'] if 'error' in r]} |")
            continue
        ratio = gm(t[second]) / gm(t[first])
        ratios.append(ratio)
        for v in n:
            spreads[v].append(max(t[v]) / min(t[v]))
        single = [r["diode"]["single_choice"] for r in row["runs"] if r["variant"] == second and "diode" in r]
        if single and all(single):
            acted.append(ratio)
        cells = " | ".join(" / ".join(f"{x:.2f}" for x in t[v]) for v in (first, second))
        print(f"| {row['key']} | {cells} | {row['aten_kernel_us']:.2f} | {ratio:.3f} | {single} |")
    r = np.array(ratios)
    print(
        f"\n{len(r)} problems: {second} / {first} geomean **{gm(r):.4f}** (95% {geomean_ci(r)}), "
        f"p95 {np.percentile(r, 95):.3f}, max {r.max():.3f}, "
        f"min {r.min():.3f}; faster on {int((r < 1).sum())}, slower on {int((r > 1).sum())}"
    )
    if acted:
        r = np.array(acted)
        print(
            f"{len(r)} of them where every {second} compile kept a single choice: geomean {gm(r):.4f}, "
            f"p95 {np.percentile(r, 95):.3f}, max {r.max():.3f}; faster on {int((r < 1).sum())}, "
            f"slower on {int((r > 1).sum())}"
        )
    rows = [row for r in results for row in r["rows"]]
    comp = {
        v: [x["compile_s"] for row in rows for x in row["runs"] if x["variant"] == v and "compile_s" in x] for v in n
    }
    print("cold compile (first call), median: " + ", ".join(f"{v} {np.median(comp[v]):.2f} s" for v in n))
    for v in n:
        if n[v] > 1:
            s = np.array(spreads[v])
            print(f"{v}: slowest / fastest of its {n[v]} compiles, median {np.median(s):.3f}, max {s.max():.3f}")


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
    p.add_argument("--order", default="off,short,off,short")
    p.add_argument("--shard", default="0/1")
    p = sub.add_parser("sample")
    p.add_argument("key")
    p.add_argument("n", type=int)
    p.add_argument("output")
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("report")
    p.add_argument("outputs", nargs="+")
    a = ap.parse_args()
    {"list": cmd_list, "sample": cmd_sample, "time": cmd_time, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    main()
