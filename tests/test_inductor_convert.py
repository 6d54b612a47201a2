"""torch_diode.inductor.convert: real Inductor KernelInputs and KTCs -> records (the one conversion path)."""

from __future__ import annotations

import pytest
import torch
from test_inductor_helpers import buf, inductor_graph, kernel_inputs, stock_ktcs
from torch._inductor.kernel_inputs import MMKernelInputs

from torch_diode.inductor import convert
from torch_diode.inductor.convert import (
    PLUMBING_KWARGS,
    canonical_op,
    choice_from_ktc,
    choice_kwargs,
    choices_from_ktcs,
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


def _reference_choice(ktc: object) -> Choice:
    """The uncached definition of choice_from_ktc."""
    return Choice.from_kwargs(ktc.template.uid, choice_kwargs(ktc), strict=False)  # type: ignore[attr-defined]


@pytest.mark.parametrize("op", ["mm", "addmm", "bmm", "baddbmm"])
def test_cached_conversion_equals_uncached_over_many_shapes(op: str) -> None:
    """choice_from_ktc / choices_from_ktcs (cached by the KTC's kwargs) give exactly the Choice
    the uncached definition gives, for every KTC of the exhaustive space, cold and warm cache,
    over shapes covering EVEN_K true/false, TF32 on/off, scaling of small dims, all dtypes."""
    shapes = [(16, 16, 16), (33, 65, 100), (1024, 512, 4096), (512, 4096, 4095), (8, 2048, 512), (300, 200, 17)]
    dtypes = [torch.float16, torch.bfloat16, torch.float32]
    with inductor_graph():
        for i, (m, n, k) in enumerate(shapes):
            ki = kernel_inputs(op, m, n, k, dtype=dtypes[i % 3], transpose_b=bool(i % 2))
            ktcs = [x for xs in stock_ktcs(ki, op).values() for x in xs]
            want = [_reference_choice(x) for x in ktcs]
            convert._CHOICE_CACHE.clear()
            assert choices_from_ktcs(ktcs) == want  # cold
            assert choices_from_ktcs(ktcs) == want  # warm
            assert [choice_from_ktc(x) for x in ktcs] == want
            assert choices_from_ktcs(iter(ktcs)) == want


def test_cached_conversion_key_edge_cases() -> None:
    """Unhashable plumbing, an extra_kwarg overriding a param, and kwargs differing only in a value
    or in the extra_kwargs never share a cache entry wrongly."""
    from torch._inductor.kernel.bmm import bmm_template
    from torch._inductor.kernel.mm import aten_mm, mm_template
    from torch._inductor.kernel_template_choice import KernelTemplateChoice

    from torch_diode.inductor import compat

    params_cls = compat.template_heuristics_module("params").DictKernelTemplateParams
    with inductor_graph():
        ki = kernel_inputs("mm", 64, 64, 64)
        real = stock_ktcs(ki, "mm")["triton::mm"][0]
    templates = {"triton::mm": mm_template, "triton::bmm": bmm_template, "aten::mm": aten_mm}

    def ktc(uid: str, params: dict, extra: dict | None) -> KernelTemplateChoice:
        return KernelTemplateChoice(templates[uid], params_cls(params), extra, real.layout, real.inputs)  # type: ignore[arg-type]

    base = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 3, "num_warps": 4, "EVEN_K": True}
    cases = [
        ktc("triton::mm", {**base, "prefix_args": [1]}, {"ALLOW_TF32": True}),  # unhashable plumbing
        ktc("triton::mm", dict(base), {"ALLOW_TF32": True}),
        ktc("triton::mm", dict(base), {"ALLOW_TF32": False}),
        ktc("triton::mm", dict(base), {"ALLOW_TF32": False, "epilogue_fn": print, "prefix_args": 1}),
        ktc("triton::mm", {**base, "epilogue_fn": print}, {"ALLOW_TF32": False}),  # hashable plumbing
        ktc("triton::mm", dict(base), {"EVEN_K": False}),  # extra_kwargs win over params
        ktc("triton::mm", {**base, "EVEN_K": False}, None),
        ktc("triton::mm", {**base, "GROUP_M": 8, "hint_override": None}, {}),
        ktc("triton::bmm", dict(base), {}),
        ktc("aten::mm", {}, {}),
    ]
    for _ in range(2):  # cold, then warm
        assert choices_from_ktcs(cases) == [_reference_choice(x) for x in cases]
        assert [choice_from_ktc(x) for x in cases] == [_reference_choice(x) for x in cases]
    assert choice_from_ktc(cases[5]).even_k is False
    scalars = (type(None), bool, int, float, str)
    for uid, params, extra in convert._CHOICE_CACHE:  # no plumbing object is kept alive by the cache
        assert all(isinstance(v, scalars) for _, v in (*params, *extra)), (uid, params, extra)
    with pytest.raises(ValueError):
        choices_from_ktcs([ktc("triton::mm", {"BLOCK_M": 64}, {})])
