"""Records: validation names the field and the value, dtype widths match torch, hashing and equality."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from torch_diode.records import (
    DTYPE_ITEMSIZE,
    Choice,
    FailureRecord,
    Problem,
    Provenance,
    TimingRecord,
    canonical_dtype,
    dtype_itemsize,
)

MM = Problem(op="mm", m=128, n=256, k=64)
TRITON: dict[str, Any] = dict(template="triton::mm", block_m=64, block_n=64, block_k=32, num_stages=3, num_warps=4)


# -- invalid values: every case raises ValueError naming the field and the value ---------------------

PROBLEM_CASES = [
    ("op", dict(op="conv"), "'conv'"),
    ("op", dict(op=""), "''"),
    ("m", dict(m=0), "0"),
    ("m", dict(m=-3), "-3"),
    ("n", dict(n=-1), "-1"),
    ("k", dict(k=0), "0"),
    ("k", dict(k=2.5), "2.5"),
    ("m", dict(m=True), "True"),
    ("m", dict(m="128"), "'128'"),
    ("m", dict(m=2**63), str(2**63)),
    ("batch", dict(batch=0), "0"),
    ("batch", dict(batch=4), "4"),  # mm has no batch
    ("dtype", dict(dtype="float17"), "'float17'"),
    ("dtype", dict(dtype="complex64"), "'complex64'"),
    ("dtype", dict(dtype=None), "None"),
    ("dtype", dict(out_dtype="int4"), "'int4'"),
    ("stride_a", dict(stride_a=(1,)), "(1,)"),
    ("stride_a", dict(stride_a=(64, -1)), "(64, -1)"),
    ("stride_b", dict(stride_b=(1, 2, 3)), "(1, 2, 3)"),
    ("stride_b", dict(stride_b=(256, 1.0)), "(256, 1.0)"),
    ("stride_bias", dict(stride_bias=(0, 1)), "(0, 1)"),  # mm has no bias
]


@pytest.mark.parametrize(("field", "kwargs", "shown"), PROBLEM_CASES, ids=[f"{c[0]}={c[2]}" for c in PROBLEM_CASES])
def test_problem_invalid(field: str, kwargs: dict[str, Any], shown: str) -> None:
    base: dict[str, Any] = dict(op="mm", m=128, n=256, k=64)
    with pytest.raises(ValueError) as e:
        Problem(**{**base, **kwargs})
    assert str(e.value).startswith(f"{field}:"), str(e.value)
    assert shown in str(e.value)


def test_problem_batched_strides_and_bias_invalid() -> None:
    with pytest.raises(ValueError, match=r"^stride_a: .*\(64, 1\)"):
        Problem(op="bmm", m=8, n=8, k=64, batch=2, stride_a=(64, 1))
    with pytest.raises(ValueError, match=r"^stride_bias: .*\(1,\)"):
        Problem(op="addmm", m=8, n=8, k=8, stride_bias=(1,))


CHOICE_CASES = [
    ("template", dict(template=""), "''"),
    ("template", dict(template=None), "None"),
    ("block_m", dict(TRITON, block_m=0), "0"),
    ("block_n", dict(TRITON, block_n=-16), "-16"),
    ("block_k", dict(TRITON, block_k=True), "True"),
    ("num_warps", dict(TRITON, num_warps=4.0), "4.0"),
    ("group_m", dict(TRITON, group_m=-8), "-8"),
    ("even_k", dict(TRITON, even_k=1), "1"),
    ("allow_tf32", dict(TRITON, allow_tf32="yes"), "'yes'"),
    ("use_fast_accum", dict(TRITON, use_fast_accum=0), "0"),
    ("acc_type", dict(TRITON, acc_type=32), "32"),
    ("template", {k: v for k, v in TRITON.items() if k != "num_stages"}, "'triton::mm'"),
    ("extra", dict(TRITON, extra=(("BLOCK_M", 64),)), "'BLOCK_M'"),
    ("extra['X']", dict(TRITON, extra=(("X", math.nan),)), "nan"),
    ("extra['X']", dict(TRITON, extra=(("X", math.inf),)), "inf"),
    ("extra['X']", dict(TRITON, extra=(("X", [1, 2]),)), "[1, 2]"),
    ("extra['X']", dict(TRITON, extra=(("X", 2**64),)), str(2**64)),
]


@pytest.mark.parametrize(("field", "kwargs", "shown"), CHOICE_CASES, ids=[f"{c[0]}={c[2]}" for c in CHOICE_CASES])
def test_choice_invalid(field: str, kwargs: dict[str, Any], shown: str) -> None:
    with pytest.raises(ValueError) as e:
        Choice(**kwargs)
    assert str(e.value).startswith(f"{field}:"), str(e.value)
    assert shown in str(e.value)


TIME_CASES = [math.nan, -1.0, 0.0, 0, math.inf, -math.inf, "12", True, None]


@pytest.mark.parametrize("time_us", TIME_CASES, ids=repr)
def test_timing_record_invalid_time(time_us: Any) -> None:
    with pytest.raises(ValueError) as e:
        TimingRecord(problem=MM, choice=Choice.aten("mm"), time_us=time_us, hardware="NVIDIA-H100")
    assert str(e.value).startswith("time_us:")
    assert repr(time_us) in str(e.value)


@pytest.mark.parametrize("hardware", ["", None, 5], ids=repr)
def test_timing_record_invalid_hardware(hardware: Any) -> None:
    with pytest.raises(ValueError, match=r"^hardware: .*" + repr(hardware)):
        TimingRecord(problem=MM, choice=Choice.aten("mm"), time_us=1.0, hardware=hardware)


def test_failure_record_invalid() -> None:
    with pytest.raises(ValueError, match=r"^reason: .*'segfault'"):
        FailureRecord(problem=MM, choice=None, reason="segfault", message="", hardware="NVIDIA-H100")
    with pytest.raises(ValueError, match=r"^message: .*42"):
        FailureRecord(problem=MM, choice=None, reason="oom", message=42, hardware="NVIDIA-H100")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^hardware: "):
        FailureRecord(problem=MM, choice=None, reason="oom", message="x", hardware="")


PROVENANCE_CASES = [
    ("hardware", dict(hardware=""), "''"),
    ("gpu_name", dict(gpu_name=None), "None"),
    ("torch_version", dict(torch_version=2.13), "2.13"),
    ("seed", dict(seed=True), "True"),
    ("seed", dict(seed=1.5), "1.5"),
    ("seed", dict(seed=2**70), str(2**70)),
]


@pytest.mark.parametrize(
    ("field", "kwargs", "shown"), PROVENANCE_CASES, ids=[f"{c[0]}={c[2]}" for c in PROVENANCE_CASES]
)
def test_provenance_invalid(field: str, kwargs: dict[str, Any], shown: str) -> None:
    with pytest.raises(ValueError) as e:
        Provenance(**{"hardware": "NVIDIA-H100", **kwargs})
    assert str(e.value).startswith(f"{field}:"), str(e.value)
    assert shown in str(e.value)


@pytest.mark.parametrize(
    ("cls", "d", "msg"),
    [
        (Problem, {"op": "mm", "m": 1, "n": 1, "k": 1, "M": 2}, r"problem: 1 unknown field \['M'\]"),
        (Problem, {"op": "mm", "m": 1, "n": 1, "k": 1, "M": 2, "N": 3}, r"problem: 2 unknown fields \['M', 'N'\]"),
        (Problem, {"op": "mm", "m": 1, "n": 1}, r"problem: 1 missing field \['k'\]"),
        (Problem, {"op": "mm", "m": 1}, r"problem: 2 missing fields \['k', 'n'\]"),
        (Choice, {"BLOCK_M": 64}, r"choice: missing field 'template'"),
        (Provenance, {"hardware": "X", "gpu": "Y"}, r"provenance: 1 unknown field \['gpu'\]"),
        (Provenance, {"gpu_name": "Y"}, r"provenance: missing field 'hardware'"),
    ],
    ids=[
        "problem-unknown",
        "problem-unknowns",
        "problem-missing",
        "problem-missings",
        "choice-missing",
        "provenance-unknown",
        "provenance-missing",
    ],
)
def test_from_dict_names_bad_fields(cls: Any, d: dict[str, Any], msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        cls.from_dict(d)


# -- dtypes --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(DTYPE_ITEMSIZE))
def test_dtype_itemsize_matches_torch(name: str) -> None:
    dtype = getattr(torch, name)
    assert DTYPE_ITEMSIZE[name] == dtype.itemsize
    assert canonical_dtype(dtype) == name
    assert dtype_itemsize(dtype) == dtype.itemsize


def test_dtype_aliases() -> None:
    assert canonical_dtype("torch.bfloat16") == "bfloat16"
    assert canonical_dtype("half") == "float16"
    assert canonical_dtype("bf16") == "bfloat16"
    assert Problem(op="mm", m=1, n=1, k=1, dtype=torch.bfloat16).itemsize == 2  # not 4


# -- hashing, equality, defaults ---------------------------------------------------------------------


def test_problem_defaults_and_equality() -> None:
    explicit = Problem(
        op="mm", m=128, n=256, k=64, dtype="float16", out_dtype="float16", stride_a=(64, 1), stride_b=(256, 1)
    )
    assert explicit == MM and hash(explicit) == hash(MM)
    assert {MM: 1}[explicit] == 1
    assert MM.layout_a == "row" and MM.layout_b == "row"
    col = Problem(op="mm", m=128, n=256, k=64, stride_b=(1, 64))
    assert col != MM and col.layout_b == "col"
    bmm = Problem(op="bmm", m=8, n=16, k=32, batch=4)
    assert bmm.stride_a == (8 * 32, 32, 1) and bmm.flops == 2 * 4 * 8 * 16 * 32
    addmm = Problem(op="addmm", m=8, n=16, k=32)
    assert addmm.stride_bias == (0, 1)
    assert Problem(op="baddbmm", m=8, n=16, k=32, batch=2).stride_bias == (0, 0, 1)
    assert Problem(op="mm", m=1, n=1, k=1, dtype="float16") != Problem(op="mm", m=1, n=1, k=1, dtype="bfloat16")
    with pytest.raises(AttributeError):
        MM.m = 3  # type: ignore[misc]


def test_choice_hashing_and_kwargs() -> None:
    a = Choice(**TRITON, extra=(("B", 1), ("A", "x")))
    b = Choice(**TRITON, extra=(("A", "x"), ("B", 1)))
    assert a == b and hash(a) == hash(b) and a.extra == (("A", "x"), ("B", 1))
    assert a != Choice(**TRITON)
    assert a != Choice(**{**TRITON, "num_warps": 8}, extra=a.extra)
    kw = a.to_kwargs()
    assert kw == {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_stages": 3, "num_warps": 4, "A": "x", "B": 1}
    assert Choice.from_kwargs("triton::mm", kw) == a
    assert Choice.from_dict(a.to_dict()) == a
    aten = Choice.aten("mm")
    assert aten.template == "aten::mm" and aten.is_aten and not aten.is_triton and Choice.aten("aten::mm") == aten
    with pytest.raises(ValueError, match="epilogue_fn"):
        Choice.from_kwargs("triton::mm", {**kw, "epilogue_fn": object()})
    assert Choice.from_kwargs("triton::mm", {**kw, "epilogue_fn": object()}, strict=False) == a


def test_records_are_hashable_and_equal_by_value() -> None:
    c = Choice(**TRITON)
    r1 = TimingRecord(problem=MM, choice=c, time_us=12.5, hardware="NVIDIA-H100")
    r2 = TimingRecord(
        problem=Problem(op="mm", m=128, n=256, k=64), choice=Choice(**TRITON), time_us=12.5, hardware="NVIDIA-H100"
    )
    assert r1 == r2 and len({r1, r2}) == 1
    assert TimingRecord(problem=MM, choice=c, time_us=3, hardware="X").time_us == 3.0
    p = Provenance(hardware="NVIDIA-H100", extra=(("b", "2"), ("a", "1")))
    assert p == Provenance.from_dict(p.to_dict()) and p.extra == (("a", "1"), ("b", "2"))
    f = FailureRecord(problem=MM, choice=c, reason="oom", message="out of memory", hardware="NVIDIA-H100")
    assert f in {f}
