"""Session 35: the shipped files scored on the validation sets with the ranking forest allowed to
re-rank only the Triton candidates of the shortlist (ATen keeps the value the network, memory and
ATen head gave it, so the ATen-or-Triton call is theirs) against the default. Needs
``forest_triton_only.patch`` applied (``ForestOptions.triton_only``); nothing is retrained:

    git apply benchmarks/models/session35/forest_triton_only.patch
    python benchmarks/models/session35/triton_only_check.py
"""

import dataclasses
import sys
from pathlib import Path

import numpy as np

from torch_diode.dataset import read_dataset
from torch_diode.evaluate import problem_evals, read_max_autotune_solution, regret_at_k
from torch_diode.model import load_model

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
from cv_model import DEFAULT_COST  # noqa: E402


def gm(x):
    return float(np.exp(np.mean(np.log(x))))


for hw in ("NVIDIA-H100", "NVIDIA-H200"):
    m = load_model(ROOT / f"packages/torch-diode-models/src/torch_diode_models/{hw}-matmul.safetensors")
    val = read_dataset(ROOT / f"data/{hw}/val.msgpack")
    stock = read_max_autotune_solution(ROOT / f"data/{hw}/val-stock-picks.json")
    for flag in (False, True):
        m.forest.options = dataclasses.replace(m.forest.options, triton_only=flag)
        ev = problem_evals(m, val, stock=stock, max_compile_cost=DEFAULT_COST)
        r = [regret_at_k(e.measured_us, e.predicted_log_us, (1, 5), oracle_us=e.oracle_us) for e in ev]
        r1, r5 = [x[1] for x in r], [x[5] for x in r]
        st = [e.measured_us[np.argmin(e.predicted_log_us)] / e.stock_us for e in ev if e.stock_us]
        aten = sum(bool(e.choices[int(np.argmin(e.predicted_log_us))].is_aten) for e in ev)
        print(
            hw,
            "triton_only" if flag else "default",
            len(ev),
            f"r1 {gm(r1):.4f} r5 {gm(r5):.4f} p95r5 {np.percentile(r5, 95):.3f} vs_stock {gm(st):.4f} aten {aten}",
            flush=True,
        )
