"""Shared helpers for the Inductor tests: real GraphLowering, real KernelInputs on a fake CUDA
device (no GPU needed: Inductor only reads the device type), a real torch-diode model file.

Recipe: shared/reference/inductor-hooks.md section 7.1. Imported by tests/test_inductor_*.py.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch._inductor import config as inductor_config
from torch._inductor import ir
from torch._inductor.choices import InductorChoices
from torch._inductor.graph import GraphLowering
from torch._inductor.kernel.bmm import aten_baddbmm, aten_bmm, bmm_template
from torch._inductor.kernel.mm import aten_addmm, aten_mm, mm_template
from torch._inductor.kernel_inputs import MMKernelInputs
from torch._inductor.virtualized import V

from torch_diode.dataset import Dataset
from torch_diode.inductor.convert import choice_from_ktc, problem_from_kernel_inputs
from torch_diode.records import Choice, Problem, Provenance, TimingRecord

HARDWARE = "NVIDIA-H100"
#: The shipped model files (the torch-diode-models package's, in this checkout)
SHIPPED_MODELS = Path(__file__).resolve().parents[1] / "packages/torch-diode-models/src/torch_diode_models"
SHIPPED_H100 = SHIPPED_MODELS / "NVIDIA-H100-matmul.safetensors"
SHIPPED_H200 = SHIPPED_MODELS / "NVIDIA-H200-matmul.safetensors"

#: op -> (ATen template, Triton template) as the lowerings pass them (2.13 kernel/mm.py, bmm.py)
TEMPLATES: dict[str, tuple[Any, Any]] = {
    "mm": (aten_mm, mm_template),
    "addmm": (aten_addmm, mm_template),
    "bmm": (aten_bmm, bmm_template),
    "baddbmm": (aten_baddbmm, bmm_template),
}


@contextlib.contextmanager
def inductor_graph(**config: Any) -> Iterator[GraphLowering]:
    """A real GraphLowering as V.graph, max-autotune on, caches off (plus ``config``); without a
    GPU, Inductor's heuristics see a GPU's warp size (``compat.gpu_warp_without_a_gpu``)."""
    from torch_diode.inductor import compat

    graph = GraphLowering(torch.fx.symbolic_trace(lambda x: x))
    settings: dict[str, Any] = {"max_autotune": True, "force_disable_caches": True}
    settings.update(config)
    with V.set_graph_handler(graph), inductor_config.patch(**settings), compat.gpu_warp_without_a_gpu():
        yield graph


_counter = iter(range(10**9))


def buf(size: list[int], stride: list[int], dtype: torch.dtype = torch.float16, device: str = "cuda") -> ir.InputBuffer:
    return ir.InputBuffer(name=f"buf{next(_counter)}", layout=ir.FixedLayout(torch.device(device), dtype, size, stride))


def kernel_inputs(
    op: str,
    m: int,
    n: int,
    k: int,
    *,
    batch: int = 4,
    dtype: torch.dtype = torch.float16,
    transpose_b: bool = False,
    bias_vector: bool = True,
    device: str = "cuda",
) -> MMKernelInputs:
    """The MMKernelInputs a lowering builds: (mat1, mat2) or (expanded bias, mat1, mat2)."""
    batched = op in ("bmm", "baddbmm")
    pre = [batch] if batched else []
    a = buf([*pre, m, k], ([m * k] if batched else []) + [k, 1], dtype, device)
    b_stride = [n, 1] if not transpose_b else [1, k]
    b = buf([*pre, k, n], ([k * n] if batched else []) + b_stride, dtype, device)
    if op in ("mm", "bmm"):
        return MMKernelInputs([a, b])
    # mm_args expands the bias to the output shape: a [N] bias gets stride 0 on the other dims
    bias_stride = ([0] if batched else []) + ([0, 1] if bias_vector else [n, 1])
    bias = buf([*pre, m, n], bias_stride, dtype, device)
    return MMKernelInputs([bias, a, b], scalars={"alpha": 1, "beta": 1})


def stock_ktcs(ki: MMKernelInputs, op: str, *, space: str = "EXHAUSTIVE") -> dict[str, list[Any]]:
    """What stock Inductor enumerates per template uid in a search space."""
    stock = InductorChoices()
    with inductor_config.patch(max_autotune_gemm_search_space=space):
        return {t.uid: list(stock.get_ktc(ki, t, op)) for t in TEMPLATES[op]}


def call_hook(handler: InductorChoices, ki: MMKernelInputs, op: str, templates: list[Any] | None = None) -> list[Any]:
    """Call the real hook as get_template_configs does (generators from get_ktc)."""
    templates = list(TEMPLATES[op]) if templates is None else templates
    gens = {t.uid: handler.get_ktc(ki, t, op) for t in templates}
    out = handler._finalize_template_configs(gens, ki, templates, op)
    assert isinstance(out, list)
    return out


def synthetic_time_us(p: Problem, c: Choice) -> float:
    """A deterministic stand-in for a measurement: roofline time times a tile-efficiency factor."""
    flops_t = p.flops / 700e6  # us at 700 TFLOP/s
    if c.is_aten:
        return 3.0 + 1.15 * flops_t
    assert c.block_m and c.block_n and c.block_k and c.num_warps and c.num_stages
    tiles = math.ceil(p.m / c.block_m) * math.ceil(p.n / c.block_n) * p.batch
    waves = math.ceil(tiles / 132)
    util = tiles / (waves * 132)
    tile_eff = min(1.0, (c.block_m * c.block_n) / (128 * 128)) ** 0.5
    stage_eff = min(1.0, c.num_stages / 3)
    return 2.0 + flops_t / max(0.05, util * tile_eff * stage_eff)


TRAIN_SHAPES = [("mm", 1024, 512, 4096), ("addmm", 256, 1024, 768), ("bmm", 128, 256, 300), ("baddbmm", 64, 64, 1000)]
#: fp32 problems too (IEEE: TF32 off, torch's default), so the model covers fp32 (``coverage`` metadata)
TRAIN_SHAPES_FP32 = [("mm", 768, 384, 1024), ("addmm", 512, 512, 512)]


def build_dataset() -> Dataset:
    """Real Inductor candidates (exhaustive space, conversion through convert.py) with synthetic times."""
    records = []
    with inductor_graph():
        shapes = [(*x, torch.float16) for x in TRAIN_SHAPES] + [(*x, torch.float32) for x in TRAIN_SHAPES_FP32]
        for op, m, n, k, dtype in shapes:
            ki = kernel_inputs(op, m, n, k, dtype=dtype)
            problem = problem_from_kernel_inputs(ki, op)
            choices = {choice_from_ktc(x) for ktcs in stock_ktcs(ki, op).values() for x in ktcs}
            for c in sorted(choices, key=Choice.key):
                records.append(
                    TimingRecord(problem=problem, choice=c, time_us=synthetic_time_us(problem, c), hardware=HARDWARE)
                )
    return Dataset.from_records(records, Provenance(hardware=HARDWARE, collector="synthetic-test"))


def train_model(ds: Dataset, path: Path) -> Path:
    """A real torch-diode model file, trained for a few epochs on ``ds``."""
    from torch_diode.model import save_model
    from torch_diode.train import TrainOptions, train

    model, _ = train(ds, TrainOptions(model_type="base", num_epochs=3, seed=0, progress=False, num_threads=1))
    save_model(model, path)
    return path


@pytest.fixture(scope="session")
def diode_dataset() -> Dataset:
    return build_dataset()


@pytest.fixture(scope="session")
def model_path(tmp_path_factory: pytest.TempPathFactory, diode_dataset: Dataset) -> Path:
    return train_model(diode_dataset, tmp_path_factory.mktemp("model") / "NVIDIA-H100-test.safetensors")


def corrupt_copy(model_path: Path, dest: Path) -> Path:
    """``model_path``'s bytes with the last 64 zeroed (tensor bytes no longer match their recorded sha256)."""
    data = bytearray(model_path.read_bytes())
    data[-64:] = b"\x00" * 64
    dest.write_bytes(bytes(data))
    return dest


@pytest.fixture(scope="session")
def other_model_path(tmp_path_factory: pytest.TempPathFactory, diode_dataset: Dataset) -> Path:
    """A second, different model (fewer problems), for uuid tests."""
    sub = diode_dataset.select_problems(diode_dataset.problems[:2])
    return train_model(sub, tmp_path_factory.mktemp("model2") / "other.safetensors")
