"""torch_diode.inductor.convert: real Inductor KernelInputs and KTCs -> records (the one conversion path)."""

from __future__ import annotations

import pytest
import torch
from test_inductor_helpers import buf, inductor_graph, kernel_inputs, stock_ktcs
from torch._inductor.kernel_inputs import MMKernelInputs

from torch_diode.inductor.convert import (
    PLUMBING_KWARGS,
    canonical_op,
    choice_from_ktc,
    problem_from_input_nodes,
    problem_from_kernel_inputs,
)
from torch_diode.records import Choice, Problem


def test_problem_mm_transposed_b() -> None:
    with inductor_graph():
        p = problem_from_kernel_inputs(kernel_inputs("mm", 1024, 512, 4095, transpose_b=True), "mm")
    assert p == Problem(op="mm", m=1024, n=512, k=4095, dtype="float16", stride_a=(4095, 1), stride_b=(1, 4095))
    assert p.layout_b == "col"


@pytest.mark.parametrize("op", ["bmm", "baddbmm"])
def test_problem_batched(op: str) -> None:
    with inductor_graph():
        p = problem_from_kernel_inputs(kernel_inputs(op, 128, 256, 300, batch=1, dtype=torch.bfloat16), op)
    assert (p.op, p.batch, p.m, p.n, p.k, p.dtype) == (op, 1, 128, 256, 300, "bfloat16")
    assert p.stride_a == (128 * 300, 300, 1)
    assert p.stride_bias == ((0, 0, 1) if op == "baddbmm" else None)


def test_addmm_bias_expanded_or_not_is_one_problem() -> None:
    """2.12+ gives the ATen hook call the un-expanded [N] bias and the Triton call the expanded
    one; both must map to the same problem (bias stride after broadcasting)."""
    with inductor_graph():
        a, b = buf([64, 128], [128, 1]), buf([128, 32], [32, 1])
        vec = MMKernelInputs([buf([32], [1]), a, b], scalars={"alpha": 1, "beta": 1})
        expanded = MMKernelInputs([buf([64, 32], [0, 1]), a, b], scalars={"alpha": 1, "beta": 1})
        full = MMKernelInputs([buf([64, 32], [32, 1]), a, b])
        row1 = MMKernelInputs([buf([1, 32], [32, 1]), a, b])
        p_vec, p_exp = problem_from_kernel_inputs(vec, "addmm"), problem_from_kernel_inputs(expanded, "addmm")
        assert p_vec == p_exp and p_vec.stride_bias == (0, 1)
        assert problem_from_kernel_inputs(full, "addmm").stride_bias == (32, 1)
        assert problem_from_kernel_inputs(row1, "addmm").stride_bias == (0, 1)


def test_problem_from_input_nodes_matches_kernel_inputs() -> None:
    with inductor_graph():
        for op in ("mm", "addmm", "bmm", "baddbmm"):
            ki = kernel_inputs(op, 96, 80, 72)
            assert problem_from_input_nodes(op, ki.nodes()) == problem_from_kernel_inputs(ki, op)


def test_out_dtype_and_mm_ah_alias() -> None:
    with inductor_graph():
        a, b = buf([8, 16], [16, 1], torch.bfloat16), buf([16, 8], [8, 1], torch.bfloat16)
        p = problem_from_kernel_inputs(MMKernelInputs([a, b], out_dtype=torch.float32), "mm-ah")
    assert (p.op, p.dtype, p.out_dtype) == ("mm", "bfloat16", "float32")


@pytest.mark.parametrize("op", ["int_mm", "scaled_mm", "mm_plus_mm", "packed_linear"])
def test_unsupported_ops_raise(op: str) -> None:
    with pytest.raises(ValueError, match="not supported by torch-diode"):
        canonical_op(op)


def test_mixed_dtypes_raise() -> None:
    with inductor_graph():
        ki = MMKernelInputs([buf([8, 16], [16, 1], torch.float16), buf([16, 8], [8, 1], torch.float32)])
        with pytest.raises(ValueError, match="different dtypes"):
            problem_from_kernel_inputs(ki, "mm")


@pytest.mark.parametrize("space", ["DEFAULT", "EXHAUSTIVE"])
@pytest.mark.parametrize("op", ["mm", "addmm", "bmm", "baddbmm"])
def test_choice_keeps_every_scalar_kwarg_and_adds_nothing(op: str, space: str) -> None:
    with inductor_graph():
        ki = kernel_inputs(op, 200, 136, 4095)  # K odd: EVEN_K False for every BLOCK_K
        ktcs = stock_ktcs(ki, op, space=space)
    triton = [x for uid, xs in ktcs.items() if uid.startswith("triton::") for x in xs]
    aten = [x for uid, xs in ktcs.items() if uid.startswith("aten::") for x in xs]
    assert len(triton) > (100 if space == "EXHAUSTIVE" else 5)
    for ktc in triton + aten:
        c = choice_from_ktc(ktc)
        expected = {
            k: v
            for src in (ktc.params.to_kwargs(), ktc.extra_kwargs)
            for k, v in src.items()
            if k not in PLUMBING_KWARGS and (v is None or isinstance(v, (bool, int, float, str)))
        }
        assert c.to_kwargs() == expected
        assert c.template == ktc.template.uid
    # Inductor's own flags come through exactly, never forced: K is odd, so EVEN_K is False.
    assert all(choice_from_ktc(x).even_k is False for x in triton)
    assert all(choice_from_ktc(x).allow_tf32 is False for x in triton)  # fp16: no TF32
    assert all(choice_from_ktc(x).use_fast_accum is False for x in triton)
    assert {choice_from_ktc(x) for x in aten} == {Choice.aten(op)}


def test_even_k_true_when_divisible() -> None:
    with inductor_graph():
        ktcs = stock_ktcs(kernel_inputs("mm", 256, 256, 4096), "mm", space="DEFAULT")
    assert all(choice_from_ktc(x).even_k is True for x in ktcs["triton::mm"])
