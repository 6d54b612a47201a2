"""Grouped K-fold cross-validation of the trainer, by problem, plus the held-out validation set.

For each seed, the training file's problems are split into ``--folds`` folds (never rows); a model
is trained on all but one fold (``torch_diode.train.train``, whose own early-stopping split is
drawn from those training folds only) and ranks the held-out fold's measured choices (its sampled
Triton configs plus ATen). The held-out problems of all folds are pooled and summarised with
``torch_diode.evaluate`` (the numbers ``diode validate-max-autotune`` prints): geomean regret@1,
regret@5, p95 regret@5, recall@1, and ``kept1``/``kept3``: the geomean over problems of the
fastest of what the choices handler keeps for Inductor to benchmark (top-1 / top-3 Triton picks
widened by the ensemble's uncertainty, ATen included: what a compile gets). With ``--val``, one
model per seed is also trained on the whole training file and scored on ``val.msgpack`` (full
exhaustive spaces) against stock max-autotune's picks (``val-stock-picks.json``).

Usage:
    python scripts/cv_model.py --hardware NVIDIA-H200 --seeds 0 1 --val \
        --set ranking_weight=1.0 --set ensemble_size=4 [--json out.json]
    python scripts/cv_model.py --hardware NVIDIA-H100 --seeds 0 1 --val --no-cv \
        --train-problems 85 170 255 340 --json curve.json          # a learning curve

``--train-problems N [N ...]`` (with ``--val``) trains each seed's models on the first N problems of
one seeded permutation of the training file's problems (so the subsets are nested, and the seed
draws both the subset and the initialisation) and scores each on ``val.msgpack``: how the
held-out figures move with the amount of training data.

``--set NAME=VALUE`` overrides any ``TrainOptions`` field (parsed as JSON, else as a string).
``--aten-margin M [M ...]`` also scores the same predictions with every ATen choice's predicted log
time raised by M (so the top-1 pick is ATen only when it is predicted faster than the best Triton
config by more than M; negative M favours ATen): the ATen-decision rule of ``cv-session10.md``.
Training runs on one thread by default (``num_threads=1``): results are deterministic per seed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from torch_diode.config import DiodeOptions
from torch_diode.dataset import Dataset, read_dataset
from torch_diode.demo import best_measured_us, handler_keeps
from torch_diode.evaluate import problem_evals, read_max_autotune_solution, summarize
from torch_diode.train import TrainOptions, train

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_COST = DiodeOptions().max_compile_cost  # the handler's (and the CLI's) default


def sorted_problems(ds: Dataset) -> list[Any]:
    """The problems of ``ds`` in an order independent of the file's (sorted by their JSON)."""
    return sorted(ds.measured_problems(), key=lambda p: json.dumps(p.to_dict(), sort_keys=True))


def fold_of_problems(ds: Dataset, folds: int, seed: int) -> list[list[Any]]:
    """The problems of ``ds`` in ``folds`` groups (order-independent: :func:`sorted_problems`)."""
    probs = sorted_problems(ds)
    perm = np.random.default_rng(1000 + seed).permutation(len(probs))
    return [[probs[i] for i in perm[f::folds]] for f in range(folds)]


def headline(overall: dict[str, Any]) -> dict[str, float]:
    out = {
        "problems": overall["problems"],
        "r1": overall["regret@1"]["geomean"],
        "r1_ci95": overall["regret@1"].get("geomean_ci95"),
        "r1_p95": overall["regret@1"]["p95"],
        "r5": overall["regret@5"]["geomean"],
        "r5_p95": overall["regret@5"]["p95"],
        "recall1": overall["recall@1"],
    }
    vs = overall.get("vs_max_autotune", {})
    if vs.get("problems"):
        out["vs_stock"] = vs["geomean"]
        out["vs_stock_no_slower"] = vs["no_slower_share"]
    return out


def kept_regrets(model: Any, evals: list[Any]) -> list[tuple[float, float]]:
    """Per problem, the fastest of what the choices handler keeps for Inductor to benchmark
    (``top_k_configs`` 1 and 3, ATen included; ``diode demo``'s figure) over the best measured."""
    out = []
    for e in evals:
        keeps = handler_keeps(model, e, (1, 3))
        out.append(tuple(float(e.measured_us[keeps[k]].min()) / best_measured_us(e) for k in (1, 3)))
    return out


def with_kept(h: dict[str, Any], kept: list[tuple[float, float]]) -> dict[str, Any]:
    for j, k in enumerate((1, 3)):
        h[f"kept{k}"] = float(np.exp(np.mean(np.log([r[j] for r in kept]))))
    return h


def _rounded(h: dict[str, Any]) -> dict[str, Any]:
    return {k: (round(v, 4) if isinstance(v, float) else [round(x, 4) for x in v] if isinstance(v, list) else v)
            for k, v in h.items()}  # fmt: skip


def parse_sets(items: list[str]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(TrainOptions)}
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or key not in names:
            raise SystemExit(f"--set {item!r}: expected NAME=VALUE with NAME one of {', '.join(sorted(names))}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def with_aten_margin(evals: list[Any], margin: float) -> list[Any]:
    """The same evaluations with every ATen choice's predicted log time raised by ``margin``."""
    out = []
    for e in evals:
        is_aten = np.array([c.template.startswith("aten::") for c in e.choices])
        out.append(e.with_predictions(e.predicted_log_us + margin * is_aten))
    return out


def report_margins(result: dict[str, Any], part: str, seed: int, evals: list[Any], margins: list[float]) -> None:
    for m in margins:
        h = headline(summarize(with_aten_margin(evals, m), with_tau=False)["overall"])
        result.setdefault(f"{part}_aten_margin", {}).setdefault(str(m), {})[seed] = h
        print(f"{part} seed {seed} aten-margin {m:+g}: {json.dumps(_rounded(h))}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", default="NVIDIA-H200", help="data/<KEY>/ to read (default: NVIDIA-H200)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--val", action="store_true", help="also train on the whole file and score val.msgpack")
    ap.add_argument("--no-cv", action="store_true", help="skip the cross-validation (with --val: val only)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a TrainOptions override")
    ap.add_argument(
        "--max-compile-cost",
        type=lambda s: None if s == "none" else float(s),
        default=DEFAULT_COST,
        help="rank only the configs the handler would consider (default: the handler's; 'none': all)",
    )
    ap.add_argument("--json", metavar="OUT", help="write every figure as JSON")
    ap.add_argument(
        "--aten-margin", type=float, nargs="+", default=[], metavar="M", help="also score with ATen's log time + M"
    )
    ap.add_argument(
        "--train-problems",
        type=int,
        nargs="+",
        default=[],
        metavar="N",
        help="with --val: train on nested seeded subsets of N training problems (a learning curve)",
    )
    args = ap.parse_args()
    if args.train_problems and not args.val:
        ap.error("--train-problems needs --val (the curve is scored on val.msgpack)")
    overrides = {"num_threads": 1, "progress": False, **parse_sets(args.set)}
    data = ROOT / "data" / args.hardware
    ds = read_dataset(data / "train.msgpack")
    result: dict[str, Any] = {"hardware": args.hardware, "overrides": overrides, "cv": {}, "val": {}}
    t0 = time.perf_counter()
    if not args.no_cv:
        problems = ds.measured_problems()
        for seed in args.seeds:
            evals, kept = [], []
            for fold in fold_of_problems(ds, args.folds, seed):
                held = set(fold)
                train_ds = ds.select_problems(problems - held)
                model, _ = train(train_ds, TrainOptions(**{**overrides, "seed": seed}))
                fold_evals = problem_evals(model, ds.select_problems(held), max_compile_cost=args.max_compile_cost)
                evals += fold_evals
                kept += kept_regrets(model, fold_evals)
            h = with_kept(headline(summarize(evals, with_tau=False)["overall"]), kept)
            result["cv"][seed] = h
            print(f"cv seed {seed}: {json.dumps(_rounded(h))}", flush=True)
            report_margins(result, "cv", seed, evals, args.aten_margin)
    if args.val:
        val = read_dataset(data / "val.msgpack")
        picks = data / "val-stock-picks.json"
        stock = read_max_autotune_solution(picks) if picks.exists() else None
        problems = sorted_problems(ds)
        sizes = sorted(set(args.train_problems)) or [len(problems)]
        if sizes[-1] > len(problems):
            ap.error(f"--train-problems {sizes[-1]}: the training file has {len(problems)} problems")
        for seed in args.seeds:
            perm = np.random.default_rng(2000 + seed).permutation(len(problems))
            for n in sizes:
                subset = ds if n == len(problems) else ds.select_problems({problems[i] for i in perm[:n]})
                model, _ = train(subset, TrainOptions(**{**overrides, "seed": seed}))
                evals = problem_evals(model, val, stock=stock, max_compile_cost=args.max_compile_cost)
                h = with_kept(headline(summarize(evals, with_tau=False)["overall"]), kept_regrets(model, evals))
                h["train_problems"] = n
                if n == len(problems):
                    result["val"][seed] = h
                    report_margins(result, "val", seed, evals, args.aten_margin)
                if args.train_problems:
                    result.setdefault("val_curve", {}).setdefault(str(n), {})[seed] = h
                print(f"val seed {seed}, {n} training problems: {json.dumps(_rounded(h))}", flush=True)
    for part in ("cv", "val"):
        rows = list(result[part].values())
        if rows:
            keys = [k for k in rows[0] if isinstance(rows[0][k], float)]
            mean = {k: float(np.mean([r[k] for r in rows if k in r])) for k in keys}
            result[f"{part}_mean"] = mean
            print(f"{part} mean over seeds: " + ", ".join(f"{k} {v:.4f}" for k, v in mean.items()))
    result["seconds"] = time.perf_counter() - t0
    print(f"({result['seconds']:.0f} s)", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=lambda o: None if math.isnan(o) else o) + "\n")


if __name__ == "__main__":
    main()
