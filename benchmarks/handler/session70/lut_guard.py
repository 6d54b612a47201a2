#!/usr/bin/env python
"""Session 70, rule 8 (PLAN.md): a lookup-table hit over the GPU's shared memory, compiled.

    python benchmarks/handler/session70/lut_guard.py make LUT.json   # offline: the table
    python benchmarks/handler/session70/lut_guard.py run LUT.json OUT.json   # on the GPU

``make``: a lookup table for session 69's over-shared-memory problem (baddbmm bf16, batch 53,
128x96x1024, bias broadcast over rows) whose one entry is the first of Inductor's EXHAUSTIVE
configs of that problem that Triton refused on an H200 in session 69 (64x128x128, five stages, eight
warps: over the H100 / H200 limit of 227 KiB a block, within 256 KiB): what a table measured on a
GPU with more shared memory a block could hold. ``run``: the problem compiled
(``max-autotune-no-cudagraphs``, cold) (1) with that config alone (session 69's ``OneConfig``
handler: what a hit kept alone compiles), (2) with torch-diode and the table alone, (3) with the
table and the shipped H200 model; each output compared with eager, with the handler's statistics.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session69"))

from torch_diode.records import Problem, TimingRecord

PROBLEM = Problem(
    op="baddbmm", m=128, n=96, k=1024, batch=53, dtype="bfloat16", out_dtype="bfloat16",
    stride_a=(131072, 1024, 1), stride_b=(98304, 96, 1), stride_bias=(0, 0, 1),
)  # fmt: skip


def make(path: str) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
    from test_inductor_handler import TEMPLATES, _over_shared_memory_inputs
    from test_inductor_helpers import inductor_graph, stock_ktcs

    from torch_diode.dataset import Dataset
    from torch_diode.inductor.choices import fits_shared_memory
    from torch_diode.inductor.convert import choice_from_ktc, problem_from_kernel_inputs
    from torch_diode.lut import KernelLUT
    from torch_diode.records import Provenance

    with inductor_graph():
        ki = _over_shared_memory_inputs()
        assert problem_from_kernel_inputs(ki, "baddbmm") == PROBLEM
        triton = [choice_from_ktc(x) for x in stock_ktcs(ki, "baddbmm")[TEMPLATES["baddbmm"][1].uid]]
    # the config session 69's rule 4 saw Triton refuse on this problem ("Required: 245760 Hardware
    # limit: 232448"): Inductor's bound 245,888 bytes, over 227 KiB and within 256 KiB
    big = next(
        c for c in triton if (c.block_m, c.block_n, c.block_k, c.num_stages, c.num_warps) == (64, 128, 128, 5, 8)
    )
    assert fits_shared_memory(PROBLEM, big, 256 * 1024) and not fits_shared_memory(PROBLEM, big, 227 * 1024)
    rec = TimingRecord(problem=PROBLEM, choice=big, time_us=5.0, hardware="NVIDIA-H200")
    KernelLUT.from_dataset(Dataset.from_records([rec], Provenance(hardware="NVIDIA-H200")), top_k=1).save(path)
    print(big)


def run(lut_path: str, out: str) -> None:
    import torch
    from torch._inductor.utils import fresh_cache
    from torch._inductor.virtualized import V
    from wrong_result import OneConfig

    from torch_diode.collect.inductor import make_inputs
    from torch_diode.inductor import install_diode_choices
    from torch_diode.lut import KernelLUT

    big = KernelLUT.load(lut_path).lookup(PROBLEM)[0]
    torch.manual_seed(0)
    args = make_inputs(PROBLEM, "cuda")
    want = torch.baddbmm(*args)
    rows: list[dict[str, Any]] = []
    for name in ("config alone", "table alone", "table + H200 model"):
        torch._dynamo.reset()
        row: dict[str, Any] = {
            "variant": name,
            "config": [big.block_m, big.block_n, big.block_k, big.num_stages, big.num_warps],
        }
        try:
            with fresh_cache():
                if name == "config alone":
                    with V.set_choices_handler(OneConfig(tuple(row["config"]))):  # type: ignore[arg-type]
                        got = torch.compile(torch.baddbmm, mode="max-autotune-no-cudagraphs")(*args)
                else:
                    model = "NVIDIA-H200-matmul" if "model" in name else None
                    with install_diode_choices(model=model, lut=lut_path) as h:
                        got = torch.compile(torch.baddbmm, mode="max-autotune-no-cudagraphs")(*args)
                        stats = h.get_stats() if hasattr(h, "get_stats") else {}
                    row["stats"] = {
                        k: stats.get(k)
                        for k in ("lut_hits", "shared_memory_guard", "model_selections", "single_choice", "fallbacks")
                    }
                torch.cuda.synchronize()
            row["max_err_over_max_ref"] = float((got.float() - want.float()).abs().max() / want.float().abs().max())
            row["exception"] = None
        except Exception as e:
            row["exception"] = f"{type(e).__name__}: {e}"[:300]
        rows.append(row)
        print(json.dumps(row), flush=True)
    Path(out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        run(sys.argv[2], sys.argv[3])
