"""Session 24's diagnostics of a preview model on its GPU's validation set (``cv-session24.md``).

Where the top-1 regret comes from: the top-1 picks of ATen and their share of the log-regret;
the model's best Triton pick against the best Triton config (its ranking alone); the oracle
decision between that pick and ATen; and two rules that do not need a new model: a constant added
to ATen's predicted log time, and a penalty on every Triton config outside Inductor's DEFAULT
candidates (stock max-autotune's own set). Diagnostics on the held-out set, not a tuning.

    python benchmarks/models/val_diagnostics_session24.py NVIDIA-H200 MODEL.safetensors
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
from cv_model import with_aten_margin  # noqa: E402

from torch_diode.collect.sweep import inductor_choices  # noqa: E402
from torch_diode.dataset import read_dataset  # noqa: E402
from torch_diode.evaluate import problem_evals, read_max_autotune_solution, summarize  # noqa: E402
from torch_diode.model import load_model  # noqa: E402


def top(shifted):
    """The headline figures of ``diode validate-max-autotune`` for the re-ranked evaluations."""
    o = summarize(shifted, with_tau=False)["overall"]
    return (
        f"regret@1 {o['regret@1']['geomean']:.4f}, regret@5 {o['regret@5']['geomean']:.4f} "
        f"(p95 {o['regret@5']['p95']:.3f}), vs stock {o['vs_max_autotune']['geomean']:.4f}, "
        f"ATen picks {round(o['model_picks_aten_share'] * len(shifted))}"
    )


def main() -> None:
    key, model = sys.argv[1], load_model(sys.argv[2])
    data = ROOT / "data" / key
    evals = problem_evals(
        model, read_dataset(data / "val.msgpack"), stock=read_max_autotune_solution(data / "val-stock-picks.json")
    )
    aten = [np.array([not c.is_triton for c in e.choices]) for e in evals]
    log_regret, from_aten, aten_picks, aten_wins, aten_off, tri, oracle = 0.0, 0.0, 0, 0, 0, [], []
    for e, isa in zip(evals, aten):
        p, mu = e.predicted_log_us, e.measured_us
        i = int(np.argmin(p))
        r = np.log(mu[i] / mu.min())
        log_regret += r
        aten_wins += mu[isa].min() <= mu.min()
        if isa[i]:
            aten_picks += 1
            from_aten += r
            aten_off += r > np.log(1.02)
        ti = np.where(~isa)[0][np.argmin(p[~isa])]
        tri.append(np.log(mu[ti] / mu[~isa].min()))
        oracle.append(np.log(min(mu[ti], mu[isa].min()) / mu.min()))
    n = len(evals)
    print(f"{key}: {n} validation problems, regret@1 {np.exp(log_regret / n):.4f}")
    print(f"  ATen picked on {aten_picks} (ATen the measured winner on {aten_wins}), more than 2% off on {aten_off};")
    print(
        f"  ATen picks carry {from_aten / log_regret:.2f} of the log-regret (without it: {np.exp((log_regret - from_aten) / n):.4f})"
    )
    print(
        f"  the best Triton pick against the best Triton config: {np.exp(np.mean(tri)):.4f} (p95 {np.exp(np.percentile(tri, 95)):.3f})"
    )
    print(f"  the oracle decision between that pick and ATen: {np.exp(np.mean(oracle)):.4f}")
    for d in (-0.05, 0.0, 0.02, 0.05, 0.1, 0.2):
        print(f"  ATen's predictions {d:+.2f}: {top(with_aten_margin(evals, d))}")
    default = []
    for e in evals:
        cands = {it.choice for it in inductor_choices(e.problem, "DEFAULT")}
        default.append(np.array([c in cands or not c.is_triton for c in e.choices]))
    for d in (0.02, 0.05, 0.1, 0.2, 10.0):
        shifted = [replace(e, predicted_log_us=e.predicted_log_us + d * ~m) for e, m in zip(evals, default)]
        print(f"  non-DEFAULT configs {d:+.2f}: {top(shifted)}")


if __name__ == "__main__":
    main()
