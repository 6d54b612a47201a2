"""Triton kernels of the sweep collector: Inductor's GEMM templates, sizes literal or run-time.

Inductor renders ``triton_mm.py.jinja`` / ``triton_bmm.py.jinja`` once per problem,
with every size and stride baked in as a literal. The code below is the same template with each
size and stride passed through ``_hint`` and a ``tl.constexpr`` code, in one of two modes:

* **literal** (``SweepOptions.literal_sizes``, the default): every code is ``-value``, so the
  kernel is compiled with the problem's sizes and strides as literals, exactly as Inductor's:
  the same register allocation and spills (``scripts/sweep_register_compare.py``: 12 of 13
  kernels identical in registers and spill bytes with triton 3.6, against 2 of 13 with run-time
  sizes), one compile per (problem, config);
* **shared spec**: sizes are passed at run time and every fact about them that changes the
  generated code is a ``tl.constexpr``, so one compiled kernel serves every problem of a *kernel
  spec* (fewer compiles, but register allocation can differ from Inductor's literal kernel):

* the template's compile-time branches: the ``offs_a_m``/``offs_b_n`` contiguity hint
  (``(stride_am == 1 and stride_ak == M) or (stride_am == K and stride_ak == 1)) and M >= BLOCK_M
  and K > 1``), ``EVEN_K``, ``ALLOW_TF32``, ``ACC_TYPE``, ``USE_FAST_ACCUM``, ``INDEX_DTYPE``;
* the template revision (``TEMPLATE``: 211 for the sources of torch 2.11, 213 for torch 2.13,
  which cast the aranges to ``INDEX_DTYPE`` and split/clamp large batches in bmm);
  ``torch_diode.collect.sweep.template_revision`` checks the installed sources by hash;
* ``K`` itself (``K_LIT``) when the K loop has few iterations: Inductor's literal K gives the
  loop a constant trip count, and for short loops that changes the software pipelining (a single
  iteration is not pipelined at all), so such problems get K as a literal too;
* the addmm/baddbmm bias epilogue (``acc + bias`` with the bias upcast, alpha = beta = 1);
* for every size and stride, what a literal tells Triton's alignment analysis: a stride of 0 or a
  size/stride of 1 is a literal (indices fold away exactly as with Inductor's constants); any other
  value is a run-time argument re-asserted to be a multiple of its largest power-of-two divisor,
  capped at 16 elements (:data:`DIV_CAP`), which is what the literal gives the vectoriser (loads
  and stores are at most 16 bytes wide, so larger divisors cannot change the code).

``torch_diode.collect.sweep.int_spec`` computes that constexpr from a value, and
``KernelSpec`` there holds all of them for one problem: problems with equal specs share every
compiled kernel. This module imports triton; the rest of the sweep does not need it to enumerate.
"""

import triton
import triton.language as tl


@triton.jit
def _hint(x, SPEC: tl.constexpr):
    # SPEC <= 0: the literal -SPEC (0 and 1 fold away; any other value is Inductor's literal size or
    # stride, exactly as its rendered template has it). SPEC > 0: re-assert what a literal would
    # tell Triton's alignment analysis, a multiple of SPEC.
    if SPEC <= 0:
        return -SPEC
    elif SPEC == 1:
        return x
    else:
        return (x // SPEC) * SPEC


@triton.jit
def _arange(BLOCK: tl.constexpr, INDEX_DTYPE: tl.constexpr, TEMPLATE: tl.constexpr):
    # torch 2.13's templates cast the aranges to INDEX_DTYPE; torch 2.11's do not.
    if TEMPLATE >= 213:
        return tl.arange(0, BLOCK).to(INDEX_DTYPE)
    else:
        return tl.arange(0, BLOCK)


# ------------------------------------------------------------------------------------------------
# triton::mm (triton_mm.py.jinja), with the addmm bias epilogue when HAS_BIAS.
# ------------------------------------------------------------------------------------------------
@triton.jit(do_not_specialize=["M_", "N_", "K_", "sam_", "sak_", "sbk_", "sbn_", "scm_", "scn_", "sim_", "sin_"])
def sweep_mm_kernel(
    A, B, C, BIAS,
    M_, N_, K_,
    sam_, sak_, sbk_, sbn_, scm_, scn_, sim_, sin_,
    M_SPEC: tl.constexpr, N_SPEC: tl.constexpr, K_SPEC: tl.constexpr,
    SAM: tl.constexpr, SAK: tl.constexpr, SBK: tl.constexpr, SBN: tl.constexpr,
    SCM: tl.constexpr, SCN: tl.constexpr, SIM: tl.constexpr, SIN: tl.constexpr,
    A_HINT: tl.constexpr, B_HINT: tl.constexpr, HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr, ALLOW_TF32: tl.constexpr, ACC_TYPE: tl.constexpr,
    USE_FAST_ACCUM: tl.constexpr, INDEX_DTYPE: tl.constexpr, TEMPLATE: tl.constexpr, K_LIT: tl.constexpr,
):  # fmt: skip
    M = _hint(M_, M_SPEC)
    N = _hint(N_, N_SPEC)
    if K_LIT > 0:
        K = K_LIT
    else:
        K = _hint(K_, K_SPEC)
    stride_am = _hint(sam_, SAM)
    stride_ak = _hint(sak_, SAK)
    stride_bk = _hint(sbk_, SBK)
    stride_bn = _hint(sbn_, SBN)
    stride_cm = _hint(scm_, SCM)
    stride_cn = _hint(scn_, SCN)

    # based on triton.ops.matmul
    pid = tl.program_id(0).to(INDEX_DTYPE)
    grid_m = (M + BLOCK_M - 1) // BLOCK_M
    grid_n = (N + BLOCK_N - 1) // BLOCK_N

    # re-order program ID for better L2 performance
    width = GROUP_M * grid_n
    group_id = pid // width
    group_size = min(grid_m - group_id * GROUP_M, GROUP_M)
    pid_m = group_id * GROUP_M + (pid % group_size)
    pid_n = (pid % width) // (group_size)
    tl.assume(pid_m >= 0)
    tl.assume(pid_n >= 0)

    rm = pid_m * BLOCK_M + _arange(BLOCK_M, INDEX_DTYPE, TEMPLATE)
    rn = pid_n * BLOCK_N + _arange(BLOCK_N, INDEX_DTYPE, TEMPLATE)
    if A_HINT:
        offs_a_m = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)
    else:
        offs_a_m = rm % M
    if B_HINT:
        offs_b_n = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)
    else:
        offs_b_n = rn % N
    offs_k = _arange(BLOCK_K, INDEX_DTYPE, TEMPLATE)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC_TYPE)

    for k_idx in range(0, tl.cdiv(K, BLOCK_K)):
        a_k_idx_vals = offs_k[None, :] + (k_idx * BLOCK_K)
        b_k_idx_vals = offs_k[:, None] + (k_idx * BLOCK_K)

        idx_m = offs_a_m[:, None]
        idx_n = a_k_idx_vals
        if EVEN_K:
            a = tl.load(A + (idx_m * stride_am + idx_n * stride_ak))
        else:
            a_mask = offs_k[None, :] < (K - k_idx * BLOCK_K)
            a = tl.load(A + (idx_m * stride_am + idx_n * stride_ak), mask=a_mask, other=0.0)

        idx_m = b_k_idx_vals
        idx_n = offs_b_n[None, :]
        if EVEN_K:
            b = tl.load(B + (idx_m * stride_bk + idx_n * stride_bn))
        else:
            b_mask = offs_k[:, None] < (K - k_idx * BLOCK_K)
            b = tl.load(B + (idx_m * stride_bk + idx_n * stride_bn), mask=b_mask, other=0.0)

        if USE_FAST_ACCUM:
            acc = tl.dot(a, b, acc, allow_tf32=ALLOW_TF32, out_dtype=ACC_TYPE)
        else:
            acc += tl.dot(a, b, allow_tf32=ALLOW_TF32, out_dtype=ACC_TYPE)

    # rematerialize rm and rn to save registers
    rm = pid_m * BLOCK_M + _arange(BLOCK_M, INDEX_DTYPE, TEMPLATE)
    rn = pid_n * BLOCK_N + _arange(BLOCK_N, INDEX_DTYPE, TEMPLATE)
    idx_m = rm[:, None]
    idx_n = rn[None, :]
    mask = (idx_m < M) & (idx_n < N)

    # Inductor's suffix: (bias epilogue) and the store, indexed like the output layout.
    if HAS_BIAS:
        stride_im = _hint(sim_, SIM)
        stride_in = _hint(sin_, SIN)
        bias = tl.load(BIAS + (idx_m * stride_im + idx_n * stride_in), mask, eviction_policy="evict_last")
        acc = acc + bias.to(tl.float32)
    tl.store(C + (idx_m * stride_cm + idx_n * stride_cn), acc, mask)


# ------------------------------------------------------------------------------------------------
# triton::bmm (triton_bmm.py.jinja), with the baddbmm bias epilogue when HAS_BIAS.
# ------------------------------------------------------------------------------------------------
@triton.jit(
    do_not_specialize=[
        "M_", "N_", "K_", "BATCH_", "saq_", "sam_", "sak_", "sbq_", "sbk_", "sbn_",
        "scq_", "scm_", "scn_", "siq_", "sim_", "sin_",
    ]
)  # fmt: skip
def sweep_bmm_kernel(
    A, B, C, BIAS,
    M_, N_, K_, BATCH_,
    saq_, sam_, sak_, sbq_, sbk_, sbn_, scq_, scm_, scn_, siq_, sim_, sin_,
    M_SPEC: tl.constexpr, N_SPEC: tl.constexpr, K_SPEC: tl.constexpr, BATCH_SPEC: tl.constexpr,
    SAQ: tl.constexpr, SAM: tl.constexpr, SAK: tl.constexpr,
    SBQ: tl.constexpr, SBK: tl.constexpr, SBN: tl.constexpr,
    SCQ: tl.constexpr, SCM: tl.constexpr, SCN: tl.constexpr,
    SIQ: tl.constexpr, SIM: tl.constexpr, SIN: tl.constexpr,
    A_HINT: tl.constexpr, B_HINT: tl.constexpr, HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr, ALLOW_TF32: tl.constexpr, ACC_TYPE: tl.constexpr,
    USE_FAST_ACCUM: tl.constexpr, INDEX_DTYPE: tl.constexpr, TEMPLATE: tl.constexpr, K_LIT: tl.constexpr,
):  # fmt: skip
    M = _hint(M_, M_SPEC)
    N = _hint(N_, N_SPEC)
    if K_LIT > 0:
        K = K_LIT
    else:
        K = _hint(K_, K_SPEC)
    BATCH = _hint(BATCH_, BATCH_SPEC)

    stride_aq = _hint(saq_, SAQ)
    stride_am = _hint(sam_, SAM)
    stride_ak = _hint(sak_, SAK)

    stride_bq = _hint(sbq_, SBQ)
    stride_bk = _hint(sbk_, SBK)
    stride_bn = _hint(sbn_, SBN)

    # based on triton.ops.matmul
    pid = tl.program_id(0).to(INDEX_DTYPE)
    grid_m = (M + BLOCK_M - 1) // BLOCK_M
    grid_n = (N + BLOCK_N - 1) // BLOCK_N

    # re-order program ID for better L2 performance
    width = GROUP_M * grid_n
    group_id = pid // width
    group_size = min(grid_m - group_id * GROUP_M, GROUP_M)
    pid_m = group_id * GROUP_M + (pid % group_size)
    pid_n = (pid % width) // (group_size)
    tl.assume(pid_m >= 0)
    tl.assume(pid_n >= 0)

    rm = pid_m * BLOCK_M + _arange(BLOCK_M, INDEX_DTYPE, TEMPLATE)
    rn = pid_n * BLOCK_N + _arange(BLOCK_N, INDEX_DTYPE, TEMPLATE)
    if A_HINT:
        ram = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)
    else:
        ram = rm % M
    if B_HINT:
        rbn = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)
    else:
        rbn = rn % N

    rk = _arange(BLOCK_K, INDEX_DTYPE, TEMPLATE)

    if TEMPLATE >= 213:
        # Reconstruct batch index from grid_y/grid_z split (handles batch > 65535)
        idx_q = (tl.program_id(1) + tl.program_id(2) * tl.num_programs(1)).to(INDEX_DTYPE)
        # Clamp to valid range for safe pointer arithmetic; out-of-bounds CTAs are
        # masked off at the store below.
        idx_q_clamped = tl.minimum(idx_q, BATCH - 1)
        A = A + (ram[:, None] * stride_am + rk[None, :] * stride_ak + idx_q_clamped * stride_aq)
        B = B + (rk[:, None] * stride_bk + rbn[None, :] * stride_bn + idx_q_clamped * stride_bq)
    else:
        idx_q = tl.program_id(1).to(INDEX_DTYPE)  # batch dimension for BMM
        A = A + (ram[:, None] * stride_am + rk[None, :] * stride_ak + idx_q * stride_aq)
        B = B + (rk[:, None] * stride_bk + rbn[None, :] * stride_bn + idx_q * stride_bq)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC_TYPE)
    for k in range(K, 0, -BLOCK_K):
        if EVEN_K:
            a = tl.load(A)
            b = tl.load(B)
        else:
            a = tl.load(A, mask=rk[None, :] < k, other=0.0)
            b = tl.load(B, mask=rk[:, None] < k, other=0.0)
        acc += tl.dot(a, b, allow_tf32=ALLOW_TF32)
        A += BLOCK_K * stride_ak
        B += BLOCK_K * stride_bk

    # rematerialize rm and rn to save registers
    rm = pid_m * BLOCK_M + _arange(BLOCK_M, INDEX_DTYPE, TEMPLATE)
    rn = pid_n * BLOCK_N + _arange(BLOCK_N, INDEX_DTYPE, TEMPLATE)
    if TEMPLATE >= 213:
        idx_q = (tl.program_id(1) + tl.program_id(2) * tl.num_programs(1)).to(INDEX_DTYPE)
        idx_m = rm[:, None]
        idx_n = rn[None, :]
        mask = (idx_m < M) & (idx_n < N) & (idx_q < BATCH)
    else:
        idx_q = tl.program_id(1).to(INDEX_DTYPE)  # batch dimension for BMM
        idx_m = rm[:, None]
        idx_n = rn[None, :]
        mask = (idx_m < M) & (idx_n < N)

    # Inductor's suffix: (bias epilogue) and the store, indexed like the output layout.
    stride_cq = _hint(scq_, SCQ)
    stride_cm = _hint(scm_, SCM)
    stride_cn = _hint(scn_, SCN)
    if HAS_BIAS:
        stride_iq = _hint(siq_, SIQ)
        stride_im = _hint(sim_, SIM)
        stride_in = _hint(sin_, SIN)
        bias = tl.load(
            BIAS + (idx_q * stride_iq + idx_m * stride_im + idx_n * stride_in), mask, eviction_policy="evict_last"
        )
        acc = acc + bias.to(tl.float32)
    tl.store(C + (idx_q * stride_cq + idx_m * stride_cm + idx_n * stride_cn), acc, mask)


KERNELS = {"mm": sweep_mm_kernel, "bmm": sweep_bmm_kernel}
