# ruff: noqa: F811  (pytest fixtures imported from test_inductor_helpers are redefined as arguments)
"""The handler's enumeration of Triton candidates (``compat.mm_template_kwargs``, EVEN_K once per
BLOCK_K) against Inductor's own ``get_ktc``: the same kwargs, in the same order, and the same
selections from the real hook, on a fake CUDA device."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sympy
import torch
from test_inductor_helpers import (  # noqa: F401  (fixtures)
    TEMPLATES,
    buf,
    call_hook,
    diode_dataset,
    inductor_graph,
    kernel_inputs,
    model_path,
    stock_ktcs,
)
from torch._inductor import config as inductor_config
from torch._inductor.choices import InductorChoices
from torch._inductor.graph import GraphLowering
from torch._inductor.kernel_inputs import MMKernelInputs
from torch._inductor.virtualized import V

from torch_diode.config import DiodeOptions
from torch_diode.inductor import compat
from torch_diode.inductor.choices import DiodeInductorChoices

OPS = ["mm", "addmm", "bmm", "baddbmm"]
#: (m, n, k, dtype, transpose_b): K odd, K a multiple of every BLOCK_K, K a multiple of some,
#: a decode-like M, fp32 and bf16
SHAPES = [
    (200, 136, 1001, torch.float16, False),
    (1024, 512, 4096, torch.float16, True),
    (16, 4096, 96, torch.bfloat16, False),
    (512, 384, 1024, torch.float32, False),
]


def typed_items(kwargs: dict[str, Any]) -> list[tuple[str, type, Any]]:
    """Names, value types and values in order: True and 1 are different kwargs here."""
    return [(k, type(v), v) for k, v in kwargs.items()]


def plain_extra(ktc: Any) -> dict[str, Any]:
    """extra_kwargs without ``epilogue_fn`` (a closure built anew by every get_extra_kwargs call)."""
    return {k: v for k, v in ktc.extra_kwargs.items() if k != "epilogue_fn"}


class FullEnumerationChoices(DiodeInductorChoices):
    """The handler with its own ``get_ktc``: the handler then enumerates every candidate through
    Inductor's ``get_ktc`` (the path before EVEN_K was evaluated once per BLOCK_K)."""

    def get_ktc(self, *args: Any, **kwargs: Any) -> Any:
        return super().get_ktc(*args, **kwargs)


@pytest.mark.parametrize("space", ["DEFAULT", "EXHAUSTIVE"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}x{s[2]}-{s[3]}-{'nt' if s[4] else 'nn'}")
@pytest.mark.parametrize("op", OPS)
def test_candidates_equal_inductors_get_ktc(op: str, shape: tuple[Any, ...], space: str, model_path: Path) -> None:
    m, n, k, dtype, transpose_b = shape
    handler = DiodeInductorChoices(DiodeOptions(model=str(model_path)))
    template = TEMPLATES[op][1]
    with inductor_graph(max_autotune_gemm_search_space=space):
        ki = kernel_inputs(op, m, n, k, dtype=dtype, transpose_b=transpose_b)
        want = stock_ktcs(ki, op, space=space)[template.uid]
        heuristic = compat.template_heuristic(template.uid, "cuda", op)
        kwargs = compat.mm_template_kwargs(heuristic, ki, op)
        got = handler._triton_ktcs(ki, template, op, {})
    assert kwargs is not None and got is not None, "the cheaper enumeration applies to Inductor's CUDA GEMM heuristics"
    assert len(want) > 10
    assert [typed_items(x) for x in kwargs] == [typed_items(x.params.to_kwargs()) for x in want]
    assert [typed_items(x.params.to_kwargs()) for x in got] == [typed_items(x.params.to_kwargs()) for x in want]
    for a, b in zip(got, want):
        assert a.template is b.template and a.layout == b.layout
        assert a.inputs.nodes() == b.inputs.nodes() and plain_extra(a) == plain_extra(b)
    even_k = {x["BLOCK_K"]: x["EVEN_K"] for x in kwargs}
    assert even_k == {bk: k % bk == 0 for bk in even_k}
    assert len(even_k) > 1  # several BLOCK_K: EVEN_K is not one value carried over from the first config


def test_kwarg_overrides_are_merged_as_inductor_merges_them() -> None:
    override = {"num_stages": 7, "EXTRA_FLAG": True}
    with inductor_graph(max_autotune_gemm_search_space="EXHAUSTIVE"):
        ki = kernel_inputs("mm", 200, 136, 1001)
        want = list(InductorChoices().get_ktc(ki, TEMPLATES["mm"][1], "mm", override))
        got = DiodeInductorChoices(DiodeOptions(model="unused"))._triton_ktcs(ki, TEMPLATES["mm"][1], "mm", override)
    assert got is not None
    assert [typed_items(x.params.to_kwargs()) for x in got] == [typed_items(x.params.to_kwargs()) for x in want]
    assert all(x.params.to_kwargs()["num_stages"] == 7 for x in got)


def test_symbolic_k_gets_inductors_even_k_per_block_k() -> None:
    """K = 64*s0: EVEN_K is statically true for BLOCK_K dividing 64 and unknown (False) for 128,
    so configs of one call differ in EVEN_K by BLOCK_K, as Inductor's sympy evaluation says."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    shape_env = ShapeEnv()
    s0 = shape_env.create_symbol(16, source=ConstantSource("k_blocks"))
    k = 64 * s0
    graph = GraphLowering(torch.fx.symbolic_trace(lambda x: x), shape_env=shape_env)
    with (
        V.set_graph_handler(graph),
        inductor_config.patch(max_autotune=True, max_autotune_gemm_search_space="EXHAUSTIVE"),
    ):
        ki = MMKernelInputs([buf([256, k], [k, 1]), buf([k, 512], [512, 1])])
        want = stock_ktcs(ki, "mm")[TEMPLATES["mm"][1].uid]
        heuristic = compat.template_heuristic(TEMPLATES["mm"][1].uid, "cuda", "mm")
        kwargs = compat.mm_template_kwargs(heuristic, ki, "mm")
    assert isinstance(k, sympy.Expr) and not k.is_number
    assert kwargs is not None
    assert [typed_items(x) for x in kwargs] == [typed_items(x.params.to_kwargs()) for x in want]
    even_k = {x["BLOCK_K"]: x["EVEN_K"] for x in kwargs}
    assert even_k[64] is True and even_k.get(128, False) is False and any(v for v in even_k.values())


def test_no_triton_configs_without_max_autotune() -> None:
    """``should_run`` is honoured: without max-autotune the heuristic yields nothing, here too."""
    with inductor_graph(max_autotune=False, max_autotune_gemm=False):
        ki = kernel_inputs("addmm", 200, 136, 1001)
        heuristic = compat.template_heuristic(TEMPLATES["addmm"][1].uid, "cuda", "addmm")
        assert list(InductorChoices().get_ktc(ki, TEMPLATES["addmm"][1], "addmm")) == []
        assert compat.mm_template_kwargs(heuristic, ki, "addmm") == []


def test_a_heuristic_with_its_own_conversion_is_enumerated_by_inductor() -> None:
    """The cheaper enumeration mirrors MMTemplateConfigMixin only: a heuristic that converts configs
    its own way (a subclass here, e.g. a future torch or a user's registered heuristic) gets None,
    and the handler then enumerates through Inductor."""
    cuda_mm = type(compat.template_heuristic(TEMPLATES["mm"][1].uid, "cuda", "mm"))

    class OwnConversion(cuda_mm):  # type: ignore[misc, valid-type]
        def _convert_config_to_template_kwargs(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return {**super()._convert_config_to_template_kwargs(*args, **kwargs), "EXTRA": 1}

    with inductor_graph(max_autotune_gemm_search_space="EXHAUSTIVE"):
        ki = kernel_inputs("mm", 200, 136, 1001)
        assert compat.mm_template_kwargs(OwnConversion(), ki, "mm") is None
        assert compat.mm_template_kwargs(cuda_mm(), ki, "mm") is not None


@pytest.mark.parametrize("user_space", ["DEFAULT", "EXHAUSTIVE"])
@pytest.mark.parametrize("op", OPS)
def test_hook_keeps_the_selection_of_the_full_enumeration(op: str, user_space: str, model_path: Path) -> None:
    # Any predicted gap keeps the top 5 Triton configs, so the comparison below always covers
    # Triton kwargs, whatever the small test model predicts for ATen (not kept alone either, nor
    # any one choice alone).
    options = DiodeOptions(
        model=str(model_path),
        top_k_configs=5,
        confidence_threshold=0.0,
        performance_threshold=1e6,
        aten_alone_below_us=None,
        one_below_us=None,
    )
    fast = DiodeInductorChoices(options)
    full = FullEnumerationChoices(options)
    shapes = [s for s in SHAPES if s[3] != torch.bfloat16]  # the test model covers fp16 and fp32
    for m, n, k, dtype, transpose_b in shapes:
        with inductor_graph(max_autotune_gemm_search_space=user_space):
            ki = kernel_inputs(op, m, n, k, dtype=dtype, transpose_b=transpose_b)
            assert fast._triton_ktcs(ki, TEMPLATES[op][1], op, {}) is not None
            assert full._triton_ktcs(ki, TEMPLATES[op][1], op, {}) is None
            got = call_hook(fast, ki, op)
            want = call_hook(full, ki, op)
            assert inductor_config.max_autotune_gemm_search_space == user_space
        assert [(x.template.uid, typed_items(x.params.to_kwargs())) for x in got] == [
            (x.template.uid, typed_items(x.params.to_kwargs())) for x in want
        ]
        assert [plain_extra(x) for x in got] == [plain_extra(x) for x in want]
        assert any(x.template.uid.startswith("triton::") for x in want), "a Triton config is selected"
    a, b = fast.get_stats(), full.get_stats()
    for key in ("model_selections", "candidates_seen", "candidates_kept", "aten_kept", "compile_cost_skipped"):
        assert a[key] == b[key], key
    assert a["fallbacks_total"] == b["fallbacks_total"] == 0 and a["model_selections"] == len(shapes)
