#!/usr/bin/env python
"""Session 70, rule 6 (PLAN.md): Inductor's wrong addmm kernels as plain Triton, no Inductor.

The kernel below is the code Inductor 2.11 generates from its ``triton_mm`` template for
``torch.addmm(bias, a, b)`` with a 1-D bias (``triton_tem_fused_addmm_0`` of rule 2's dump), the
sizes and strides as compile-time constants as Inductor writes them, and ``HINT`` switching the
template's ``tl.max_contiguous(tl.multiple_of(r % M, BLOCK), BLOCK)`` on the operands' M / N
offsets (on where the template puts it; off: plain ``r % M``). Each case is compared with a
float64 reference; ``BIAS=False`` is the mm twin.

    python benchmarks/handler/session70/repro_triton.py            # every case, a line each
    DISABLE_LLVM_OPT=1 python ...  /  DISABLE_PTXAS_OPT=1 python ...  # the compiler stages

Needs only torch (for the tensors and the reference) and triton.
"""

from __future__ import annotations

import json
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def addmm_kernel(
    in_ptr0, A, B, out_ptr0,
    M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
    stride_am: tl.constexpr, stride_ak: tl.constexpr, stride_bk: tl.constexpr, stride_bn: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    BIAS: tl.constexpr, HINT: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    grid_m = (M + BLOCK_M - 1) // BLOCK_M
    grid_n = (N + BLOCK_N - 1) // BLOCK_N
    width = GROUP_M * grid_n
    group_id = pid // width
    group_size = min(grid_m - group_id * GROUP_M, GROUP_M)
    pid_m = group_id * GROUP_M + (pid % group_size)
    pid_n = (pid % width) // (group_size)
    tl.assume(pid_m >= 0)
    tl.assume(pid_n >= 0)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if (
        HINT
        and ((stride_am == 1 and stride_ak == M) or (stride_am == K and stride_ak == 1))
        and (M >= BLOCK_M and K > 1)
    ):
        offs_a_m = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)
    else:
        offs_a_m = rm % M
    if (
        HINT
        and ((stride_bk == 1 and stride_bn == K) or (stride_bk == N and stride_bn == 1))
        and (N >= BLOCK_N and K > 1)
    ):
        offs_b_n = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)
    else:
        offs_b_n = rn % N
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_idx in range(0, tl.cdiv(K, BLOCK_K)):
        a_mask = offs_k[None, :] < (K - k_idx * BLOCK_K)
        b_mask = offs_k[:, None] < (K - k_idx * BLOCK_K)
        a_k = offs_k[None, :] + (k_idx * BLOCK_K)
        b_k = offs_k[:, None] + (k_idx * BLOCK_K)
        a = tl.load(A + (offs_a_m[:, None] * stride_am + a_k * stride_ak), mask=a_mask, other=0.0)
        b = tl.load(B + (b_k * stride_bk + offs_b_n[None, :] * stride_bn), mask=b_mask, other=0.0)
        acc += tl.dot(a, b, allow_tf32=False, out_dtype=tl.float32)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    idx_m = rm[:, None]
    idx_n = rn[None, :]
    mask = (idx_m < M) & (idx_n < N)
    xindex = idx_n + N * idx_m
    if BIAS:
        tmp0 = tl.load(in_ptr0 + (tl.broadcast_to(idx_n, [BLOCK_M, BLOCK_N])), mask, eviction_policy="evict_last").to(
            tl.float32
        )
        tl.store(out_ptr0 + (tl.broadcast_to(xindex, [BLOCK_M, BLOCK_N])), acc + tmp0, mask)
    else:
        tl.store(out_ptr0 + (tl.broadcast_to(xindex, [BLOCK_M, BLOCK_N])), acc, mask)


# name, dtype, M, N, K, A column-major, B column-major, (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps)
CASES = [
    ("A", torch.float16, 251, 4093, 127, False, False, (128, 64, 16, 2, 2)),
    ("A-w4", torch.float16, 251, 4093, 127, False, False, (128, 64, 16, 2, 4)),
    ("A-m250", torch.float16, 250, 4093, 127, False, False, (128, 64, 16, 2, 2)),
    ("B", torch.float16, 1, 33921, 1347, False, True, (16, 16, 128, 3, 1)),
    ("B-k1346", torch.float16, 1, 33921, 1346, False, True, (16, 16, 128, 3, 1)),
    ("C", torch.bfloat16, 1021, 61, 127, True, False, (128, 64, 32, 2, 2)),
    ("C-w4", torch.bfloat16, 1021, 61, 127, True, False, (128, 64, 32, 2, 4)),
]


def run(name: str, dtype: torch.dtype, m: int, n: int, k: int, a_col: bool, b_col: bool,
        cfg: tuple[int, int, int, int, int], bias: bool, hint: bool) -> dict[str, object]:  # fmt: skip
    bm, bn, bk, stages, warps = cfg
    g = torch.Generator(device="cuda").manual_seed(0)
    a = (
        torch.randn(k, m, generator=g, device="cuda").to(dtype).t()
        if a_col
        else torch.randn(m, k, generator=g, device="cuda").to(dtype)
    )
    b = (
        torch.randn(n, k, generator=g, device="cuda").to(dtype).t()
        if b_col
        else torch.randn(k, n, generator=g, device="cuda").to(dtype)
    )
    vec = torch.randn(n, generator=g, device="cuda").to(dtype)
    out = torch.empty(m, n, device="cuda", dtype=dtype)
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    addmm_kernel[grid](
        vec, a, b, out, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        bm, bn, bk, 8, bias, hint, num_stages=stages, num_warps=warps,
    )  # fmt: skip
    ref = a.double() @ b.double() + (vec.double() if bias else 0)
    err = float((out.double() - ref).abs().max() / ref.abs().max())
    return {"case": name, "bias": bias, "hint": hint, "err": err, "wrong": err > 0.02}


def main() -> int:
    rows = []
    for c in CASES:
        for bias in (True, False):
            for hint in (True, False):
                r = run(*c, bias=bias, hint=hint)
                rows.append(r)
                print(json.dumps(r), flush=True)
    print(json.dumps({"wrong": [f"{r['case']} bias={r['bias']} hint={r['hint']}" for r in rows if r["wrong"]]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
