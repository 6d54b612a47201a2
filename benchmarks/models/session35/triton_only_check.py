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

from torch_diode.dataset import read_dataset
from torch_diode.evaluate import read_max_autotune_solution
from torch_diode.model import load_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from variants import ROOT, score, summary

for hw in ("NVIDIA-H100", "NVIDIA-H200"):
    m = load_model(ROOT / f"packages/torch-diode-models/src/torch_diode_models/{hw}-matmul.safetensors")
    val = read_dataset(ROOT / f"data/{hw}/val.msgpack")
    stock = read_max_autotune_solution(ROOT / f"data/{hw}/val-stock-picks.json")
    for flag in (False, True):
        m.forest.options = dataclasses.replace(m.forest.options, triton_only=flag)
        t = summary(score(m, val, stock, kept=False))
        print(
            hw,
            "triton_only" if flag else "default",
            t["problems"],
            f"r1 {t['r1']:.4f} r5 {t['r5']:.4f} p95r5 {t['r5_p95']:.3f} vs_stock {t['vs_stock']:.4f} "
            f"aten {t['aten_picks']}",
            flush=True,
        )
