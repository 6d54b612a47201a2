"""The feature function against hand-computed values, and its invariants."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from torch_diode.features import (
    FEATURE_SPEC,
    N_PROBLEM_FEATURES,
    GpuConstants,
    featurize,
    gpu_constants,
    output_aligned16,
)
from torch_diode.records import Choice, Problem

H100 = "NVIDIA-H100"


def col(x: np.ndarray, name: str, row: int = 0) -> float:
    return float(x[row, FEATURE_SPEC.names.index(name)])


def tri(bm: int, bn: int, bk: int, stages: int = 3, warps: int = 4, **kw: object) -> Choice:
    return Choice(
        template=str(kw.pop("template", "triton::mm")), block_m=bm, block_n=bn, block_k=bk, group_m=8,
        num_stages=stages, num_warps=warps, even_k=True, allow_tf32=bool(kw.pop("allow_tf32", False)),
    )  # fmt: skip


def test_spec_is_consistent() -> None:
    assert len(FEATURE_SPEC.names) == len(set(FEATURE_SPEC.names)) == len(FEATURE_SPEC.transforms)
    assert isinstance(FEATURE_SPEC.version, int)
    assert FEATURE_SPEC.names[:N_PROBLEM_FEATURES][0] == "log2_m"
    assert FEATURE_SPEC.names[N_PROBLEM_FEATURES] == "kind_aten"


def test_hand_computed_bf16_mm() -> None:
    hw = gpu_constants(H100)
    assert (hw.sm_count, hw.smem_per_block_bytes) == (132, 227 * 1024)
    p = Problem(op="mm", m=1000, n=4096, k=4096, dtype="bfloat16")
    x = featurize(p, [tri(128, 128, 64, stages=3, warps=4), Choice.aten("mm")], H100)
    assert x.dtype == np.float32 and x.shape == (2, len(FEATURE_SPEC))
    # problem columns
    assert col(x, "log2_m") == pytest.approx(math.log2(1000))
    assert col(x, "log2_flops") == pytest.approx(math.log2(2 * 1000 * 4096 * 4096))
    assert col(x, "itemsize") == 2.0  # bf16 is 2 bytes, not 4
    assert col(x, "dtype_bfloat16") == 1.0 and col(x, "dtype_float16") == 0.0
    assert col(x, "op_mm") == 1.0 and col(x, "op_addmm") == 0.0
    assert (col(x, "a_row"), col(x, "b_row"), col(x, "b_col")) == (1.0, 1.0, 0.0)
    assert (col(x, "m_div16"), col(x, "n_div16")) == (0.0, 1.0)
    assert (col(x, "a_ld_aligned16"), col(x, "b_ld_aligned16"), col(x, "c_ld_aligned16")) == (1.0, 1.0, 1.0)
    min_bytes = (1000 * 4096 + 4096 * 4096 + 1000 * 4096) * 2
    assert col(x, "log2_min_bytes") == pytest.approx(math.log2(min_bytes))
    t_comp = 2 * 1000 * 4096 * 4096 / 989.4e12 * 1e6
    t_mem = min_bytes / 3350e9 * 1e6
    assert col(x, "log2_t_compute_us") == pytest.approx(math.log2(t_comp), rel=1e-6)
    assert col(x, "log2_t_roofline_us") == pytest.approx(math.log2(max(t_comp, t_mem)), rel=1e-6)
    # choice columns
    assert col(x, "kind_triton_mm") == 1.0 and col(x, "kind_aten") == 0.0
    assert (col(x, "log2_block_m"), col(x, "log2_block_k"), col(x, "num_stages"), col(x, "log2_num_warps")) == (
        7,
        6,
        3,
        2,
    )
    assert col(x, "log2_acc_regs") == pytest.approx(math.log2(128 * 128 / 128))
    assert col(x, "log2_tile_intensity") == pytest.approx(math.log2(2 * 128 * 128 / (256 * 2)))
    # interactions: 8 x 32 tiles; 32 KiB per stage; 2 CTAs per SM fit in 227 KiB
    assert col(x, "log2_tiles") == pytest.approx(math.log2(8 * 32))
    assert col(x, "log2_waves") == pytest.approx(math.log2(256 / 132))
    assert col(x, "smem_stage_kb") == 32.0
    assert col(x, "smem_ratio") == pytest.approx(3 * 32 * 1024 / (227 * 1024))
    assert col(x, "smem_fits") == 1.0
    assert col(x, "ctas_per_sm") == 2.0
    assert col(x, "log2_waves_occ") == pytest.approx(math.log2(256 / 264))
    assert col(x, "last_wave_eff") == pytest.approx(256 / 264)
    assert col(x, "mn_pad_waste") == pytest.approx(math.log2(1024 / 1000))
    assert col(x, "k_pad_waste") == 0.0
    assert col(x, "log2_k_iters") == 6.0
    assert col(x, "stage_use") == 1.0
    tile_t = 1 * 264 * (2 * 128 * 128 * 4096) / 989.4e12 * 1e6
    assert col(x, "log2_t_tile_compute_us") == pytest.approx(math.log2(tile_t), rel=1e-6)
    # the ATen row: same problem columns, no Triton interaction columns
    assert np.array_equal(x[0, :N_PROBLEM_FEATURES], x[1, :N_PROBLEM_FEATURES])
    assert col(x, "kind_aten", 1) == 1.0
    assert not x[1, FEATURE_SPEC.names.index("log2_tiles") :].any()


@pytest.mark.parametrize(
    ("dtype", "itemsize"), [("float16", 2), ("bfloat16", 2), ("float32", 4)], ids=["fp16", "bf16", "fp32"]
)
def test_bytes_per_element_follow_the_dtype(dtype: str, itemsize: int) -> None:
    p = Problem(op="mm", m=256, n=256, k=256, dtype=dtype)
    x = featurize(p, [tri(64, 64, 32, stages=2)], H100)
    assert col(x, "itemsize") == itemsize
    assert col(x, "smem_stage_kb") == (64 + 64) * 32 * itemsize / 1024
    assert col(x, "log2_min_bytes") == pytest.approx(math.log2(3 * 256 * 256 * itemsize))


def test_output_alignment_column() -> None:
    """``c_ld_aligned16``: the output's rows (N elements of the output dtype) are a multiple of 16
    bytes; the operands' columns do not see it (B column-major: its rows are K long)."""
    for n, dtype, want in (
        (6150, "float16", 0.0),
        (6152, "float16", 1.0),
        (6150, "float32", 0.0),
        (6148, "float32", 1.0),
    ):
        p = Problem(op="bmm", m=1000, n=n, k=520, batch=8, dtype=dtype, stride_b=(n * 520, 1, 520))
        x = featurize(p, [tri(64, 64, 32), Choice.aten("bmm")], H100)
        assert col(x, "c_ld_aligned16") == want and col(x, "c_ld_aligned16", 1) == want
        assert (col(x, "a_ld_aligned16"), col(x, "b_ld_aligned16")) == (1.0, 1.0)
        assert output_aligned16(p) == bool(want)


def test_tf32_uses_the_tf32_peak() -> None:
    p = Problem(op="mm", m=2048, n=2048, k=2048, dtype="float32")
    x = featurize(p, [tri(128, 128, 32, allow_tf32=True), tri(128, 128, 32, allow_tf32=False)], H100)
    i = FEATURE_SPEC.names.index("log2_t_tile_compute_us")
    assert x[1, i] - x[0, i] == pytest.approx(math.log2(494.7 / 66.9), rel=1e-5)
    # tl.dot lowers to FMAs only without TF32: 128*128*32 / (32 * 4 warps) = 4096 per thread
    assert (col(x, "log2_fma_unroll", 0), col(x, "log2_fma_unroll", 1)) == (0.0, 12.0)


def test_fma_unroll_is_zero_off_fp32_and_on_aten() -> None:
    choices = [tri(32, 64, 64, warps=4), Choice.aten("mm")]
    x32 = featurize(Problem(op="mm", m=40, n=3000, k=40, dtype="float32"), choices, H100)
    assert (col(x32, "log2_fma_unroll", 0), col(x32, "log2_fma_unroll", 1)) == (10.0, 0.0)  # 32*64*64 / 128
    for dtype in ("float16", "bfloat16"):
        x = featurize(Problem(op="mm", m=40, n=3000, k=40, dtype=dtype), choices, H100)
        assert not x[:, FEATURE_SPEC.names.index("log2_fma_unroll")].any()


def test_layouts_bias_and_batch() -> None:
    p = Problem(op="addmm", m=64, n=128, k=256, stride_b=(1, 256))
    x = featurize(p, [Choice.aten("addmm")], H100)
    assert (col(x, "b_row"), col(x, "b_col"), col(x, "bias_vector"), col(x, "op_addmm")) == (0.0, 1.0, 1.0, 1.0)
    # ATen's two addmm choices (bias in the epilogue or copied into the output first) differ in
    # one column only: equal rows would force one prediction on both.
    z = featurize(p, [Choice.aten("addmm"), Choice.aten("bias_addmm")], H100)
    assert (col(z, "aten_bias_epilogue", 0), col(z, "aten_bias_epilogue", 1)) == (0.0, 1.0)
    assert [FEATURE_SPEC.names[i] for i in np.flatnonzero(z[0] != z[1])] == ["aten_bias_epilogue"]
    q = Problem(op="bmm", m=64, n=64, k=64, batch=8)
    y = featurize(q, [tri(32, 32, 32, template="triton::bmm")], H100)
    assert col(y, "log2_batch") == 3.0 and col(y, "kind_triton_bmm") == 1.0
    assert col(y, "log2_tiles") == pytest.approx(math.log2(2 * 2 * 8))


def test_vectorised_equals_one_at_a_time_and_cache_is_by_value() -> None:
    p = Problem(op="mm", m=333, n=777, k=1000, dtype="float16")
    choices = [
        tri(bm, bn, bk, s, w)
        for bm in (16, 64, 256)
        for bn in (32, 128)
        for bk in (16, 64)
        for s in (1, 4)
        for w in (2, 8)
    ]
    choices.append(Choice(template="decompose_k", extra=(("k_split", 4),)))
    x = featurize(p, choices, H100)
    rows = np.concatenate([featurize(p, [c], H100) for c in choices])
    assert np.array_equal(x, rows)
    fresh = [Choice.from_dict(c.to_dict()) for c in choices]  # equal values, new objects
    assert np.array_equal(featurize(p, fresh, H100), x)
    assert col(x, "log2_k_split", len(choices) - 1) == 2.0
    assert np.isfinite(x).all()


def test_empty_choices_and_constants_argument() -> None:
    p = Problem(op="mm", m=8, n=8, k=8)
    assert featurize(p, [], H100).shape == (0, len(FEATURE_SPEC))
    hw = gpu_constants(H100)
    assert GpuConstants.from_dict(hw.to_dict()) == hw
    assert np.array_equal(featurize(p, [tri(16, 16, 16)], hw), featurize(p, [tri(16, 16, 16)], H100))


def test_unknown_hardware_uses_generic_figures(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="torch_diode.features"):
        hw = gpu_constants("ACME-GPU-9000")
    assert hw.key == "ACME-GPU-9000" and hw.sm_count > 0
    assert "ACME-GPU-9000" in caplog.text


def test_same_vector_from_inductor_kernel_inputs_and_from_a_record() -> None:
    """The compiler hook and training featurize the same problem identically (STYLE: one feature path)."""
    torch = pytest.importorskip("torch")
    from torch._inductor import ir
    from torch._inductor.graph import GraphLowering
    from torch._inductor.kernel_inputs import MMKernelInputs
    from torch._inductor.virtualized import V

    from torch_diode.inductor.convert import problem_from_kernel_inputs

    graph = GraphLowering(torch.fx.symbolic_trace(lambda x: x))
    with V.set_graph_handler(graph):
        dev = torch.device("cuda")  # a fake device: no GPU needed
        a = ir.InputBuffer(name="a", layout=ir.FixedLayout(dev, torch.bfloat16, [1000, 4096], [4096, 1]))
        b = ir.InputBuffer(name="b", layout=ir.FixedLayout(dev, torch.bfloat16, [4096, 512], [1, 4096]))
        from_inductor = problem_from_kernel_inputs(MMKernelInputs([a, b]), "mm")
    from_record = Problem.from_dict(
        {"op": "mm", "m": 1000, "n": 512, "k": 4096, "dtype": "bfloat16", "stride_a": [4096, 1], "stride_b": [1, 4096]}
    )
    choices = [tri(128, 64, 64), Choice.aten("mm")]
    assert np.array_equal(featurize(from_inductor, choices, H100), featurize(from_record, choices, H100))
