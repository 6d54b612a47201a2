"""Regenerate tests/data/small_synthetic.msgpack: real Inductor EXHAUSTIVE config lists, synthetic times.

The problems' candidate lists come from Inductor's own CUDA heuristics (the CPU recipe of
reference/inductor-hooks.md section 7.1: a fake ``cuda`` device, no GPU needed), converted with
``torch_diode.inductor.convert.choice_from_ktc``; a seeded subsample of each list plus the ATen
choice is kept. Times come from an analytic roofline-style formula of an H100 with 3% log-normal
noise (configs whose shared memory does not fit are left out, as they fail to compile). The real
GPU slice for tests is added separately (by the lead); this file only needs to be plausible.

Usage: python tests/data/make_small_synthetic.py [OUT]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import torch

from torch_diode.dataset import Dataset, write_dataset
from torch_diode.inductor.convert import choice_from_ktc, problem_from_kernel_inputs
from torch_diode.records import Choice, Problem, Provenance, TimingRecord

HW = "NVIDIA-H100"
SMS, SMEM, BW_GBS = 132, 227 * 1024, 3350.0
PEAK = {"float16": 989.4e12, "bfloat16": 989.4e12, "tf32": 494.7e12, "float32": 66.9e12}
CONFIGS_PER_PROBLEM = 100


def synthetic_time_us(p: Problem, c: Choice, rng: np.random.Generator) -> float | None:
    isz = 4 if p.dtype == "float32" else 2
    flops = 2.0 * p.batch * p.m * p.n * p.k
    min_bytes = p.batch * (p.m * p.k + p.k * p.n + p.m * p.n) * isz
    noise = math.exp(rng.normal(0.0, 0.03))
    if c.is_aten:
        peak = PEAK["float32"] if p.dtype == "float32" else PEAK[p.dtype]
        t = max(flops / (0.75 * peak), min_bytes / (0.8 * BW_GBS * 1e9)) * 1e6
        return (t + 5.0) * noise
    bm, bn, bk, st, w = c.block_m, c.block_n, c.block_k, c.num_stages, c.num_warps
    assert bm and bn and bk and st and w
    smem = (bm + bn) * bk * isz * st
    if smem > SMEM:
        return None
    peak = PEAK["tf32" if (p.dtype == "float32" and c.allow_tf32) else p.dtype]
    tiles = math.ceil(p.m / bm) * math.ceil(p.n / bn) * p.batch
    ctas = max(1, min(SMEM // smem, 64 // w))
    waves = math.ceil(tiles / (SMS * ctas))
    k_iters = math.ceil(p.k / bk)
    mma_eff = min(1.0, bm * bn / (128 * 128)) ** 0.35 * {1: 0.4, 2: 0.7, 4: 1.0, 8: 0.92}.get(w, 0.8)
    mma_eff *= min(1.0, bk / 32) ** 0.3
    pipe = 1.0 if st >= 3 or k_iters <= st else (0.65 if st == 2 else 0.45)
    t_comp = waves * ctas * (2.0 * bm * bn * k_iters * bk) / (peak / SMS * mma_eff * pipe)
    traffic = (
        p.batch * (p.m * p.k * math.ceil(p.n / bn) + p.k * p.n * math.ceil(p.m / bm)) * isz / 4
        + p.batch * p.m * p.n * isz
    )
    t_mem = traffic / (BW_GBS * 1e9)
    t = (max(t_comp, t_mem) + 0.3 * min(t_comp, t_mem)) * 1e6 + 4.0
    if bm * bn / (32 * w) > 256:
        t *= 3.0
    return t * noise


def _problems(rng: np.random.Generator) -> list[tuple[str, str, int, int, int, int]]:
    out = []
    specs = [("mm", 14), ("addmm", 6), ("bmm", 6)]
    dtypes = ["float16", "bfloat16", "float32"]
    for op, count in specs:
        for _ in range(count):
            m, n, k = (round(float(2 ** rng.uniform(6, 12.5))) for _ in range(3))
            if rng.random() < 0.5:
                m, n, k = (max(16, x // 16 * 16) for x in (m, n, k))
            b = int(rng.choice([2, 4, 8, 16])) if op == "bmm" else 1
            out.append((op, dtypes[int(rng.integers(3))], b, m, n, k))
    return out


def main(out: Path) -> None:
    import torch._inductor.template_heuristics.triton as th
    from torch._inductor import config, ir
    from torch._inductor.choices import InductorChoices
    from torch._inductor.graph import GraphLowering
    from torch._inductor.kernel.bmm import bmm_template
    from torch._inductor.kernel.mm import mm_template
    from torch._inductor.kernel_inputs import MMKernelInputs
    from torch._inductor.virtualized import V

    class _TritonConfig:  # torch binds TritonConfig to `object` without triton (reference 7.1)
        def __init__(self, kwargs: dict, num_stages: int, num_warps: int, **_: object) -> None:
            self.kwargs, self.num_stages, self.num_warps = kwargs, num_stages, num_warps

    rng = np.random.default_rng(20261122)
    records: list[TimingRecord] = []
    dt = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
    with mock.patch.object(th, "TritonConfig", _TritonConfig):
        graph = GraphLowering(torch.fx.symbolic_trace(lambda x: x))
        with (
            V.set_graph_handler(graph),
            config.patch(max_autotune=True, max_autotune_gemm_search_space="EXHAUSTIVE", force_disable_caches=True),
        ):
            for i, (op, dtype, b, m, n, k) in enumerate(_problems(rng)):
                dev = torch.device("cuda")
                shape_a, shape_b = ([b, m, k], [b, k, n]) if op == "bmm" else ([m, k], [k, n])
                stride_a = [m * k, k, 1] if op == "bmm" else [k, 1]
                # every third problem has a column-major B (a transposed weight)
                if i % 3 == 2:
                    stride_b = [k * n, 1, k] if op == "bmm" else [1, k]
                else:
                    stride_b = [k * n, n, 1] if op == "bmm" else [n, 1]
                a = ir.InputBuffer(name=f"a{i}", layout=ir.FixedLayout(dev, dt[dtype], shape_a, stride_a))
                bb = ir.InputBuffer(name=f"b{i}", layout=ir.FixedLayout(dev, dt[dtype], shape_b, stride_b))
                nodes = [a, bb]
                if op == "addmm":
                    bias = ir.InputBuffer(name=f"c{i}", layout=ir.FixedLayout(dev, dt[dtype], [m, n], [0, 1]))
                    nodes = [bias, a, bb]
                ki = MMKernelInputs(nodes, scalars={"alpha": 1, "beta": 1}) if op == "addmm" else MMKernelInputs(nodes)
                problem = problem_from_kernel_inputs(ki, op)
                template = bmm_template if op == "bmm" else mm_template
                ktcs = list(InductorChoices().get_ktc(ki, template, op))
                sel = rng.choice(len(ktcs), size=min(CONFIGS_PER_PROBLEM, len(ktcs)), replace=False)
                choices = [choice_from_ktc(ktcs[j]) for j in sorted(sel.tolist())]
                choices.append(Choice.aten(op))
                for c in choices:
                    t = synthetic_time_us(problem, c, rng)
                    if t is not None:
                        records.append(TimingRecord(problem=problem, choice=c, time_us=t, hardware=HW))
    prov = Provenance(
        hardware=HW,
        gpu_name="synthetic (analytic H100 roofline + 3% noise)",
        torch_version=torch.__version__,
        collector="synthetic",
        command="python tests/data/make_small_synthetic.py",
        date="2026-11-22",
        seed=20261122,
    )
    ds = Dataset.from_records(records, prov)
    write_dataset(ds, out)
    print(f"wrote {out}: {ds}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("small_synthetic.msgpack"))
