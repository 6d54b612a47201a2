"""Grouped cross-validation of rules for the top-1 call between ATen and the best Triton config.

Most of the model's top-1 regret comes from that call (``benchmarks/models/cv-session11.md``): the
network ranks ATen and the Triton configs on one scale, and the pick is ATen whenever its
predicted time is the lowest. This script trains each fold's model once (``scripts/cv_model.py``'s
folds, default training options), keeps the network's best ATen and best Triton candidate per
held-out problem, and scores rules that decide between those two:

- ``network``: the model as shipped (ATen when its predicted log time is the lower);
- ``oracle``: the faster of the two as measured (the room there is: no rule can do better);
- ``problem-mlp`` / ``problem-knn``: a problem-level regressor of the measured log time ratio
  (best ATen over best Triton) from the problem's feature columns, trained on the other folds'
  problems (an MLP ensemble, or the mean of the 8 nearest problems);
- ``stack-mlp`` / ``stack-knn``: the same, also given the network's predicted log ratio, and fit
  to the measured ratio of the network's own two picks (out-of-fold predictions: stacking);
- ``blend``: the mean of the network's log ratio and ``problem-mlp``'s;
- ``group-margin``: a margin on the network's log ratio per (op, dtype), chosen on the other folds.

One model per seed trained on the whole training file is scored on ``val.msgpack`` the same way
(every rule fit on all the training problems' out-of-fold figures). Geomean regret@1 against the
best measured choice of the whole space, as ``diode validate-max-autotune``. Writes ``--json``.

``--cache F.npz`` keeps the trained models' calls (cross-validation and validation) in ``F.npz``,
and reads them from there when it exists, so the rules can be changed and re-scored without
training again.

Usage:
    python scripts/cv_aten_decision.py --hardware NVIDIA-H100 --seed 0 --json out.json [--cache c.npz]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from cv_model import DEFAULT_COST, ROOT, fold_of_problems

from torch_diode.dataset import read_dataset
from torch_diode.demo import best_measured_us
from torch_diode.evaluate import ProblemEval, problem_evals, read_max_autotune_solution
from torch_diode.features import N_PROBLEM_FEATURES, featurize
from torch_diode.train import TrainOptions, train


@dataclass(frozen=True)
class Call:
    """One problem's ATen-or-Triton call: the network's two candidates and what they measured."""

    group: tuple[str, str]  # (op, dtype)
    fold: int
    features: np.ndarray  # the problem's feature columns
    net_ratio: float  # predicted log time: best ATen minus best Triton
    true_ratio: float  # measured log time: best ATen minus best Triton (of all measured)
    aten_regret: float  # measured time of the network's best ATen over the best measured
    triton_regret: float  # the same for its best Triton config

    @property
    def pick_ratio(self) -> float:
        """Measured log ratio of the network's two candidates (< 0: its ATen pick is faster)."""
        return float(np.log(self.aten_regret) - np.log(self.triton_regret))


def calls_of(evals: Sequence[ProblemEval], fold: int, hardware: str) -> list[Call]:
    out = []
    for e in evals:
        aten = np.array([c.is_aten for c in e.choices])
        if aten.all() or not aten.any():
            continue
        ia, it = np.flatnonzero(aten), np.flatnonzero(~aten)
        pa, pt = ia[np.argmin(e.predicted_log_us[ia])], it[np.argmin(e.predicted_log_us[it])]
        best = best_measured_us(e)
        m = e.measured_us
        out.append(
            Call(
                group=(e.problem.op, e.problem.dtype),
                fold=fold,
                features=featurize(e.problem, e.choices[:1], hardware)[0, :N_PROBLEM_FEATURES].astype(np.float64),
                net_ratio=float(e.predicted_log_us[pa] - e.predicted_log_us[pt]),
                true_ratio=float(np.log(m[aten].min()) - np.log(m[~aten].min())),
                aten_regret=float(m[pa]) / best,
                triton_regret=float(m[pt]) / best,
            )
        )
    return out


_CALL_FIELDS = ("fold", "features", "net_ratio", "true_ratio", "aten_regret", "triton_regret")


def save_calls(path: str, calls: Sequence[Call], val_calls: Sequence[Call]) -> None:
    arrays: dict[str, np.ndarray] = {}
    for part, cs in (("cv", calls), ("val", val_calls)):
        arrays[f"{part}_group"] = np.array([list(c.group) for c in cs], dtype=str)
        for name in _CALL_FIELDS:
            arrays[f"{part}_{name}"] = np.array([getattr(c, name) for c in cs])
    np.savez_compressed(path, **arrays)


def load_calls(path: str) -> tuple[list[Call], list[Call]]:
    with np.load(path, allow_pickle=False) as z:
        parts = []
        for part in ("cv", "val"):
            cols = {name: z[f"{part}_{name}"] for name in _CALL_FIELDS}
            groups = z[f"{part}_group"]
            parts.append(
                [
                    Call(group=(str(g[0]), str(g[1])), **{name: cols[name][i] for name in _CALL_FIELDS})
                    for i, g in enumerate(groups)
                ]
            )
    return parts[0], parts[1]


def regret_at_1(calls: Sequence[Call], decision: np.ndarray) -> float:
    """Geomean regret of picking ATen where ``decision < 0``, else the best predicted Triton config."""
    r = [c.aten_regret if d < 0 else c.triton_regret for c, d in zip(calls, decision)]
    return float(np.exp(np.mean(np.log(r))))


def mlp_fit_predict(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray) -> np.ndarray:
    """Mean of 4 small MLPs (Huber loss, full batch) fit on standardised inputs."""
    mu, sd = x_train.mean(0), x_train.std(0) + 1e-6
    xt = torch.tensor((x_train - mu) / sd, dtype=torch.float32)
    yt = torch.tensor(y_train, dtype=torch.float32)
    xe = torch.tensor((x_test - mu) / sd, dtype=torch.float32)
    preds = []
    for seed in range(4):
        torch.manual_seed(seed)
        net = torch.nn.Sequential(
            torch.nn.Linear(xt.shape[1], 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
            torch.nn.Linear(64, 1),
        )  # fmt: skip
        opt = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=1e-3)
        for _ in range(400):
            opt.zero_grad()
            torch.nn.functional.huber_loss(net(xt).squeeze(1), yt, delta=0.3).backward()
            opt.step()
        with torch.no_grad():
            preds.append(net(xe).squeeze(1).numpy())
    return np.mean(preds, axis=0)


def knn_fit_predict(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, k: int = 8) -> np.ndarray:
    mu, sd = x_train.mean(0), x_train.std(0) + 1e-6
    a, b = (x_train - mu) / sd, (x_test - mu) / sd
    d = ((b[:, None, :] - a[None, :, :]) ** 2).sum(-1)
    return y_train[np.argsort(d, axis=1)[:, :k]].mean(axis=1)


MARGINS = np.linspace(-0.3, 0.3, 25)


def group_margins(calls: Sequence[Call]) -> dict[tuple[str, str], float]:
    """Per (op, dtype), the margin on the network's log ratio with the lowest mean log regret."""
    out = {}
    for g in sorted({c.group for c in calls}):
        cs = [c for c in calls if c.group == g]
        scores = [np.log(regret_at_1(cs, np.array([c.net_ratio + m for c in cs]))) for m in MARGINS]
        out[g] = float(MARGINS[int(np.argmin(scores))])
    return out


def decisions(train: Sequence[Call], test: Sequence[Call]) -> dict[str, np.ndarray]:
    """Every rule's decision (< 0: ATen) on ``test``, fit on ``train``."""
    xp = np.stack([c.features for c in train])
    xs = np.column_stack([xp, [c.net_ratio for c in train]])
    tp = np.stack([c.features for c in test])
    ts = np.column_stack([tp, [c.net_ratio for c in test]])
    true = np.array([c.true_ratio for c in train])
    pick = np.array([c.pick_ratio for c in train])
    margins = group_margins(train)
    network = np.array([c.net_ratio for c in test])
    problem_mlp = mlp_fit_predict(xp, true, tp)
    return {
        "network": network,
        "oracle": np.array([c.pick_ratio for c in test]),
        "problem-mlp": problem_mlp,
        "blend": (network + problem_mlp) / 2,
        "problem-knn": knn_fit_predict(xp, true, tp),
        "stack-mlp": mlp_fit_predict(xs, pick, ts),
        "stack-knn": knn_fit_predict(xs, pick, ts),
        "group-margin": np.array([c.net_ratio + margins.get(c.group, 0.0) for c in test]),
    }


def score(calls: Sequence[Call], decided: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    truth = np.array([c.pick_ratio for c in calls]) < 0
    return {
        name: {"r1": round(regret_at_1(calls, d), 4), "agree": round(float(((d < 0) == truth).mean()), 3)}
        for name, d in decided.items()
    }


def trained_calls(hardware: str, folds: int, seed: int) -> tuple[list[Call], list[Call]]:
    """The calls of each fold's model on its held-out problems, and of a model trained on the whole
    training file on the validation problems."""
    data = ROOT / "data" / hardware
    ds = read_dataset(data / "train.msgpack")
    opts = TrainOptions(seed=seed, num_threads=1, progress=False)
    problems = ds.measured_problems()
    calls: list[Call] = []
    for f, fold in enumerate(fold_of_problems(ds, folds, seed)):
        held = set(fold)
        model, _ = train(ds.select_problems(problems - held), opts)
        held_evals = problem_evals(model, ds.select_problems(held), max_compile_cost=DEFAULT_COST)
        calls += calls_of(held_evals, f, hardware)
    val = read_dataset(data / "val.msgpack")
    picks = data / "val-stock-picks.json"
    stock = read_max_autotune_solution(picks) if picks.exists() else None
    model, _ = train(ds, opts)
    val_calls = calls_of(problem_evals(model, val, stock=stock, max_compile_cost=DEFAULT_COST), -1, hardware)
    return calls, val_calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", default="NVIDIA-H200")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--cache", metavar="F.npz", help="the trained models' calls: read when it exists, else written")
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    if args.cache and Path(args.cache).exists():
        calls, val_calls = load_calls(args.cache)
    else:
        calls, val_calls = trained_calls(args.hardware, args.folds, args.seed)
        if args.cache:
            save_calls(args.cache, calls, val_calls)
    cv: dict[str, np.ndarray] = {}
    order = []
    for f in range(args.folds):
        test = [c for c in calls if c.fold == f]
        order += test
        for name, d in decisions([c for c in calls if c.fold != f], test).items():
            cv[name] = np.concatenate([cv.get(name, np.empty(0)), d])
    result: dict[str, Any] = {"hardware": args.hardware, "seed": args.seed, "cv_problems": len(order)}
    result["cv"] = score(order, cv)
    result["val_problems"] = len(val_calls)
    result["val"] = score(val_calls, decisions(calls, val_calls))
    result["group_margins"] = {f"{op} {dt}": m for (op, dt), m in group_margins(calls).items()}
    result["seconds"] = round(time.perf_counter() - t0, 1)
    for part in ("cv", "val"):
        for name, s in result[part].items():
            print(f"{part:3s} {name:13s} regret@1 {s['r1']:.4f}  agrees with the faster pick {s['agree']:.3f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
            fh.write("\n")


if __name__ == "__main__":
    main()
