"""What the scoring-time parts of a model file cost and give (session 47): the validation figures
and the scoring time of a shipped file as it is and with its forest's shortlist shortened, its
forest off, or its neighbour memory off (scoring-time changes of the loaded model, no retraining:
what the planners would trade for speed; the file itself is not changed).

Usage: python benchmarks/models/session47/tradeoff.py KEY [--model FILE] [--repeat 300]
(KEY: NVIDIA-H100 or NVIDIA-H200; the data under data/KEY/). Scoring time: 1,500 candidates of one
problem (scripts/bench_scoring.py's), one thread, the median over --repeat calls per variant made
in interleaved rounds of 10.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
from bench_scoring import exhaustive_choices  # noqa: E402

from torch_diode.dataset import read_dataset  # noqa: E402
from torch_diode.evaluate import evaluate_model, read_max_autotune_solution  # noqa: E402
from torch_diode.model import load_model  # noqa: E402
from torch_diode.records import Problem  # noqa: E402


def variants(path: str):
    yield "as shipped", load_model(path)
    for shortlist in (256, 128):
        m = load_model(path)
        m.forest.options = dataclasses.replace(m.forest.options, shortlist=shortlist)
        yield f"forest shortlist {shortlist}", m
    m = load_model(path)
    m.forest = None
    yield "no forest", m
    m = load_model(path)
    m.memory = None
    yield "no neighbour memory", m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("key")
    ap.add_argument("--model", help="model file (default: the shipped one)")
    ap.add_argument("--repeat", type=int, default=300)
    args = ap.parse_args()
    torch.set_num_threads(1)
    path = args.model or str(ROOT / f"packages/torch-diode-models/src/torch_diode_models/{args.key}-matmul.safetensors")
    val = read_dataset(ROOT / f"data/{args.key}/val.msgpack")
    stock = read_max_autotune_solution(ROOT / f"data/{args.key}/val-stock-picks.json")
    problem = Problem(op="mm", m=1000, n=4096, k=4096, dtype="bfloat16")
    choices = exhaustive_choices(1500)
    models = list(variants(path))
    times: dict[str, list[float]] = {name: [] for name, _ in models}
    for _, m in models:
        for _ in range(20):
            m.predict(problem, choices)
    for _ in range(max(1, args.repeat // 10)):  # interleaved rounds of 10 calls: drift hits every variant alike
        for name, m in models:
            for _ in range(10):
                a = time.perf_counter()
                m.predict(problem, choices)
                times[name].append(time.perf_counter() - a)
    print(f"{'variant':22s} {'regret@1':>8s} {'regret@5':>8s} {'p95 r@5':>8s} {'vs stock':>8s} {'ms':>6s}")
    for name, m in models:
        o = evaluate_model(m, val, stock=stock)[0]["overall"]
        print(
            f"{name:22s} {o['regret@1']['geomean']:8.4f} {o['regret@5']['geomean']:8.4f} {o['regret@5']['p95']:8.4f} "
            f"{o['vs_max_autotune']['geomean']:8.4f} {statistics.median(times[name]) * 1e3:6.2f}"
        )


if __name__ == "__main__":
    main()
