"""Scoring time per CPU core, variants interleaved (session 48).

One process pins itself to each CPU in turn (``os.sched_setaffinity``) and, on it, times
``DiodeModel.predict`` of 1,500 candidates of one problem (``scripts/bench_scoring.py``'s, the same
``Choice`` objects every call, as the handler passes them) for every variant in rounds: each round
times each variant once, so drift on a shared host falls on all of them alike. A variant is a
model file and a network shortlist (``ScoringOptions.network_shortlist``; 0: every member scores
every candidate). With ``--old-features FILE`` (a ``features.py`` of an earlier commit, e.g.
``git show 4cd757c:packages/torch-diode-lib/src/torch_diode/features.py``), each model also gets
a variant ``NAME/old``: shortlist 0 and that file's ``featurize_split_indexed`` (swapped into
``torch_diode.model`` for the call), i.e. scoring as that commit did. Prints one JSON object: per
CPU, each variant's median and p10 (ms), and the CPU's model name.

Usage: python benchmarks/models/session48/pinned.py --model H200=FILE --model H100=FILE \
           [--shortlist 512 --shortlist 0] [--old-features F.py] [--rounds 200] [--cpus 0-15] [--output F.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from bench_scoring import exhaustive_choices

import torch_diode.model as model_module
from torch_diode.model import ScoringOptions, load_model
from torch_diode.records import Problem


def cpu_list(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def old_featurize(path: str):
    """``featurize_split_indexed`` of another ``features.py``, loaded as its own module (its own
    choice cache)."""
    spec = importlib.util.spec_from_file_location("features_old", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["features_old"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    converted: dict = {}

    def featurize(problem, choices, hw):  # the model's GpuConstants, as that module's class
        g = converted.get(hw) or converted.setdefault(hw, module.GpuConstants.from_dict(hw.to_dict()))
        return module.featurize_split_indexed(problem, choices, g)

    return featurize


def with_features(predict, featurize):
    """``predict`` with ``torch_diode.model`` calling ``featurize`` for the call."""

    def call(problem, choices):
        saved = model_module.featurize_split_indexed
        model_module.featurize_split_indexed = featurize
        try:
            return predict(problem, choices)
        finally:
            model_module.featurize_split_indexed = saved

    return call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", required=True, help="NAME=FILE")
    ap.add_argument("--shortlist", action="append", type=int, help="network shortlists to time (default: 512 and 0)")
    ap.add_argument("--old-features", help="a features.py of an earlier commit: adds NAME/old variants")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--cpus", help="e.g. 0-15 (default: the CPUs this process may use)")
    ap.add_argument("--output")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cpus = cpu_list(args.cpus) if args.cpus else sorted(os.sched_getaffinity(0))
    problem = Problem(op="mm", m=1000, n=4096, k=4096, dtype="bfloat16")
    choices = exhaustive_choices(1500)
    variants = {}
    featurize_old = old_featurize(args.old_features) if args.old_features else None
    for spec in args.model:
        name, _, path = spec.partition("=")
        for s in args.shortlist or [512, 0]:
            m = load_model(path)  # one object per variant: its own scoring options
            m.scoring = ScoringOptions(network_shortlist=s)
            variants[f"{name}/{s}"] = m.predict
        if featurize_old is not None:
            m = load_model(path)
            m.scoring = ScoringOptions(network_shortlist=0)
            variants[f"{name}/old"] = with_features(m.predict, featurize_old)
    if featurize_old is not None:  # the old features score as the new ones do
        for spec in args.model:
            name = spec.partition("=")[0]
            same = (
                variants[f"{name}/0"](problem, choices).log_time_us,
                variants[f"{name}/old"](problem, choices).log_time_us,
            )
            assert np.array_equal(*same), f"{name}: the old features give other predictions"
    result: dict[str, object] = {"cpu_model": cpu_model(), "torch": torch.__version__, "rounds": args.rounds}
    per_cpu = {}
    for c in cpus:
        os.sched_setaffinity(0, {c})
        times: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(20):
            for predict in variants.values():
                predict(problem, choices)
        for _ in range(args.rounds):
            for k, predict in variants.items():
                t = time.perf_counter()
                predict(problem, choices)
                times[k].append(time.perf_counter() - t)
        per_cpu[c] = {
            k: {
                "median_ms": round(statistics.median(v) * 1e3, 3),
                "p10_ms": round(float(np.percentile(v, 10)) * 1e3, 3),
            }
            for k, v in times.items()
        }
        print(c, {k: v["median_ms"] for k, v in per_cpu[c].items()}, flush=True)
    result["per_cpu"] = per_cpu
    result["median_over_cpus_ms"] = {
        k: round(statistics.median(per_cpu[c][k]["median_ms"] for c in cpus), 3) for k in variants
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")


if __name__ == "__main__":
    main()
