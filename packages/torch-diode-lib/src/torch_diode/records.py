"""Typed, frozen records: a GEMM problem, a kernel choice, a timing, a failure, and provenance.

Every record validates itself on construction and raises ``ValueError`` naming the field and the
offending value. Records are hashable, so they can key dicts (as Triton's ``Config`` does). Each
record family has one ``to_dict``/``from_dict`` pair; the dataset files store exactly those dicts.
Times are always microseconds (``time_us``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Literal

from torch_diode._text import plural

#: Operations whose lowering goes through Inductor's GEMM template selection.
OPS: tuple[str, ...] = ("mm", "addmm", "bmm", "baddbmm")
BATCHED_OPS: frozenset[str] = frozenset({"bmm", "baddbmm"})
BIAS_OPS: frozenset[str] = frozenset({"addmm", "baddbmm"})

#: Canonical dtype names (``str(torch.float16)`` without the ``torch.`` prefix) and their widths.
#: The widths equal ``torch.dtype.itemsize``; ``tests/test_records.py`` checks that against torch,
#: so this table cannot drift (bf16 is 2 bytes, not 4).
DTYPE_ITEMSIZE: Mapping[str, int] = {
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int8": 1,
    "int32": 4,
}

Layout = Literal["row", "col", "strided"]
Scalar = bool | int | float | str | None

# Inductor kwarg name -> Choice field name, for the kwargs that every GEMM template shares.
_KNOWN_KWARGS: Mapping[str, str] = {
    "BLOCK_M": "block_m",
    "BLOCK_N": "block_n",
    "BLOCK_K": "block_k",
    "GROUP_M": "group_m",
    "num_stages": "num_stages",
    "num_warps": "num_warps",
    "EVEN_K": "even_k",
    "ALLOW_TF32": "allow_tf32",
    "USE_FAST_ACCUM": "use_fast_accum",
    "ACC_TYPE": "acc_type",
}
_INT_FIELDS = ("block_m", "block_n", "block_k", "group_m", "num_stages", "num_warps")
_BOOL_FIELDS = ("even_k", "allow_tf32", "use_fast_accum")


def canonical_dtype(dtype: object) -> str:
    """Return the canonical name of a dtype given as ``torch.dtype`` or string.

    Raises:
        ValueError: the dtype is not one torch-diode knows.
    """
    name = str(dtype)
    if name.startswith("torch."):
        name = name[len("torch.") :]
    aliases = {"half": "float16", "fp16": "float16", "bf16": "bfloat16", "float": "float32", "fp32": "float32"}
    name = aliases.get(name, name)
    if name not in DTYPE_ITEMSIZE:
        raise ValueError(f"dtype: unknown dtype {dtype!r}; known: {', '.join(DTYPE_ITEMSIZE)}")
    return name


def dtype_itemsize(dtype: object) -> int:
    """Bytes per element of a dtype (bf16 -> 2)."""
    return DTYPE_ITEMSIZE[canonical_dtype(dtype)]


# Integers are stored as 64-bit in msgpack files; larger ones could not be written.
_INT64_MAX = 2**63 - 1


def _check_pos_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value > _INT64_MAX:
        raise ValueError(f"{name}: must be a positive integer, got {value!r}")


def _check_stride(name: str, value: object, ndim: int) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or len(value) != ndim:
        raise ValueError(f"{name}: must be a sequence of {ndim} integers, got {value!r}")
    out = []
    for s in value:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0 or s > _INT64_MAX:
            raise ValueError(f"{name}: strides must be non-negative integers, got {value!r}")
        out.append(int(s))
    return tuple(out)


def layout_of(stride: tuple[int, ...]) -> Layout:
    """Classify the last two dimensions of a stride: row-major, column-major or other."""
    if stride[-1] == 1:
        return "row"
    if stride[-2] == 1:
        return "col"
    return "strided"


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One GEMM problem: ``out[b] = A[b] (M x K) @ B[b] (K x N)`` (plus a bias for addmm/baddbmm).

    Strides are those of the operands as Inductor sees them (2 entries for mm/addmm, 3 for
    bmm/baddbmm); ``stride_bias`` is the stride of the bias *after* broadcasting to the output
    shape (``(0, 1)`` for a vector bias of an addmm) and ``None`` for ops without a bias.
    """

    op: str
    m: int
    n: int
    k: int
    batch: int = 1
    dtype: str = "float16"
    out_dtype: str = ""
    stride_a: tuple[int, ...] = ()
    stride_b: tuple[int, ...] = ()
    stride_bias: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"op: unknown op {self.op!r}; known: {', '.join(OPS)}")
        for name in ("m", "n", "k", "batch"):
            _check_pos_int(name, getattr(self, name))
        if self.op not in BATCHED_OPS and self.batch != 1:
            raise ValueError(f"batch: must be 1 for op {self.op!r}, got {self.batch!r}")
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))
        object.__setattr__(self, "out_dtype", canonical_dtype(self.out_dtype or self.dtype))
        ndim = 3 if self.op in BATCHED_OPS else 2
        batched = self.op in BATCHED_OPS
        default_a = ((self.m * self.k,) if batched else ()) + (self.k, 1)
        default_b = ((self.k * self.n,) if batched else ()) + (self.n, 1)
        object.__setattr__(self, "stride_a", _check_stride("stride_a", self.stride_a or default_a, ndim))
        object.__setattr__(self, "stride_b", _check_stride("stride_b", self.stride_b or default_b, ndim))
        if self.op in BIAS_OPS:
            default_bias = ((0,) if batched else ()) + (0, 1)
            bias = self.stride_bias if self.stride_bias is not None else default_bias
            object.__setattr__(self, "stride_bias", _check_stride("stride_bias", bias, ndim))
        elif self.stride_bias is not None:
            raise ValueError(f"stride_bias: op {self.op!r} has no bias, got {self.stride_bias!r}")

    @property
    def layout_a(self) -> Layout:
        return layout_of(self.stride_a)

    @property
    def layout_b(self) -> Layout:
        return layout_of(self.stride_b)

    @property
    def itemsize(self) -> int:
        return DTYPE_ITEMSIZE[self.dtype]

    @property
    def flops(self) -> int:
        """Multiply-add count times two (the usual GEMM FLOP count)."""
        return 2 * self.batch * self.m * self.n * self.k

    @property
    def shape(self) -> tuple[str, int, int, int, int, str]:
        """``(op, m, n, k, batch, dtype)``: what the problem is in every layout. Training and
        validation problems are kept apart by it: a validation problem of a training problem's
        shape in another layout is not held out."""
        return (self.op, self.m, self.n, self.k, self.batch, self.dtype)

    def shape_digest(self) -> str:
        """The first 12 hex digits of the sha256 of :attr:`shape` (``"<op> <dtype> <batch> <m>
        <n> <k>"``), as model files list the shapes they were trained on."""
        op, m, n, k, batch, dtype = self.shape
        return hashlib.sha256(f"{op} {dtype} {batch} {m} {n} {k}".encode()).hexdigest()[:12]

    def key(self) -> str:
        """A short human-readable id, e.g. ``mm float16 128x6144x4096 row/row``."""
        b = f"{self.batch}x" if self.op in BATCHED_OPS else ""
        return f"{self.op} {self.dtype} {b}{self.m}x{self.n}x{self.k} {self.layout_a}/{self.layout_b}"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "op": self.op,
            "m": self.m,
            "n": self.n,
            "k": self.k,
            "batch": self.batch,
            "dtype": self.dtype,
            "out_dtype": self.out_dtype,
            "stride_a": list(self.stride_a),
            "stride_b": list(self.stride_b),
        }
        if self.stride_bias is not None:
            d["stride_bias"] = list(self.stride_bias)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Problem:
        unknown = set(d) - _PROBLEM_KEYS
        if unknown:
            raise ValueError(f"problem: {plural(len(unknown), 'unknown field')} {sorted(unknown)}")
        missing = {"op", "m", "n", "k"} - set(d)
        if missing:
            raise ValueError(f"problem: {plural(len(missing), 'missing field')} {sorted(missing)}")
        kw = dict(d)
        for name in ("stride_a", "stride_b", "stride_bias"):
            if kw.get(name) is not None:
                kw[name] = tuple(kw[name])
        return cls(**kw)


_PROBLEM_KEYS = frozenset(f.name for f in fields(Problem))


def _check_scalar(name: str, value: object) -> None:
    if value is not None and not isinstance(value, (bool, int, float, str)):
        raise ValueError(f"{name}: config values must be bool, int, float, str or None, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name}: must be finite, got {value!r}")
    if isinstance(value, int) and not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        raise ValueError(f"{name}: integers must fit in 64 bits, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    """A kernel choice: an ATen/extern kernel, or one config of a Triton (or subgraph) template.

    ``template`` is Inductor's template uid (``"aten::mm"``, ``"triton::mm"``, ``"triton::bmm"``,
    ``"decompose_k"`` ...). The shared template kwargs have typed fields; any other kwarg that
    changes the generated kernel goes in ``extra`` as sorted ``(name, value)`` pairs.
    ``to_kwargs()`` gives back exactly the kwargs Inductor used (nothing is added or forced).
    """

    template: str
    block_m: int | None = None
    block_n: int | None = None
    block_k: int | None = None
    group_m: int | None = None
    num_stages: int | None = None
    num_warps: int | None = None
    even_k: bool | None = None
    allow_tf32: bool | None = None
    use_fast_accum: bool | None = None
    acc_type: str | None = None
    extra: tuple[tuple[str, Scalar], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.template, str) or not self.template:
            raise ValueError(f"template: must be a non-empty string, got {self.template!r}")
        for name in _INT_FIELDS:
            v = getattr(self, name)
            if v is not None:
                _check_pos_int(name, v)
        for name in _BOOL_FIELDS:
            v = getattr(self, name)
            if v is not None and not isinstance(v, bool):
                raise ValueError(f"{name}: must be a bool or None, got {v!r}")
        if self.acc_type is not None and not isinstance(self.acc_type, str):
            raise ValueError(f"acc_type: must be a string or None, got {self.acc_type!r}")
        if self.is_triton and None in (self.block_m, self.block_n, self.block_k, self.num_stages, self.num_warps):
            raise ValueError(
                f"template: Triton template {self.template!r} needs block_m, block_n, block_k, "
                f"num_stages and num_warps, got {self.to_kwargs()!r}"
            )
        extra = tuple(sorted((str(k), v) for k, v in dict(self.extra).items()))
        for k, v in extra:
            if k in _KNOWN_KWARGS:
                raise ValueError(f"extra: {k!r} has its own field; do not pass it in extra")
            _check_scalar(f"extra[{k!r}]", v)
        object.__setattr__(self, "extra", extra)

    ATEN_PREFIX: ClassVar[str] = "aten::"

    @property
    def is_aten(self) -> bool:
        return self.template.startswith(self.ATEN_PREFIX)

    @property
    def is_triton(self) -> bool:
        return self.template.startswith("triton::")

    @classmethod
    def aten(cls, name: str = "mm") -> Choice:
        """The ATen (cuBLAS) choice of an op, e.g. ``Choice.aten("mm")`` -> ``aten::mm``."""
        return cls(template=name if name.startswith(cls.ATEN_PREFIX) else cls.ATEN_PREFIX + name)

    @classmethod
    def from_kwargs(cls, template: str, kwargs: Mapping[str, Any], *, strict: bool = True) -> Choice:
        """Build a choice from Inductor template kwargs (``ktc.params.to_kwargs()`` and the
        config-like ``extra_kwargs``). Non-scalar plumbing (``epilogue_fn``, ``prefix_args``,
        layouts, nodes) is not part of a config and is skipped when ``strict`` is False."""
        fields: dict[str, Any] = {}
        extra: dict[str, Scalar] = {}
        for k, v in kwargs.items():
            if k in _KNOWN_KWARGS:
                fields[_KNOWN_KWARGS[k]] = v
            elif v is None or isinstance(v, (bool, int, float, str)):
                extra[k] = v
            elif strict:
                raise ValueError(f"{k}: config values must be bool, int, float, str or None, got {v!r}")
        return cls(template=template, extra=tuple(extra.items()), **fields)

    def to_kwargs(self) -> dict[str, Scalar]:
        """The template kwargs with Inductor's names (``BLOCK_M``, ``num_stages`` ...)."""
        out: dict[str, Scalar] = {}
        for kw, attr in _KNOWN_KWARGS.items():
            v = getattr(self, attr)
            if v is not None:
                out[kw] = v
        out.update(self.extra)
        return out

    def key(self) -> str:
        """A short human-readable id, e.g. ``triton::mm 64x128x64 g8 s4 w4``."""
        if not self.is_triton:
            extra = " ".join(f"{k}={v}" for k, v in self.extra)
            return f"{self.template} {extra}".strip()
        s = f"{self.template} {self.block_m}x{self.block_n}x{self.block_k} g{self.group_m} s{self.num_stages} w{self.num_warps}"
        extra = " ".join(f"{k}={v}" for k, v in self.extra if v is not None)
        return f"{s} {extra}".strip()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"template": self.template}
        d.update(self.to_kwargs())
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Choice:
        if "template" not in d:
            raise ValueError(f"choice: missing field 'template' in {dict(d)!r}")
        rest = {k: v for k, v in d.items() if k != "template"}
        return cls.from_kwargs(str(d["template"]), rest, strict=True)


def _check_time(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"time_us: must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"time_us: must be a positive finite number of microseconds, got {value!r}")
    return v


def _check_key(name: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name}: must be a non-empty string, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class TimingRecord:
    """One measurement: ``choice`` took ``time_us`` microseconds on ``problem`` on ``hardware``."""

    problem: Problem
    choice: Choice
    time_us: float
    hardware: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "time_us", _check_time(self.time_us))
        _check_key("hardware", self.hardware)


#: Why a problem or choice produced no timing.
FAILURE_REASONS: tuple[str, ...] = ("oom", "compile_error", "no_valid_config", "runtime_error", "timeout", "error")


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureRecord:
    """A problem (or one choice of it, when ``choice`` is set) that could not be measured."""

    problem: Problem
    choice: Choice | None
    reason: str
    message: str
    hardware: str

    def __post_init__(self) -> None:
        if self.reason not in FAILURE_REASONS:
            raise ValueError(f"reason: unknown failure reason {self.reason!r}; known: {', '.join(FAILURE_REASONS)}")
        _check_key("hardware", self.hardware)
        if not isinstance(self.message, str):
            raise ValueError(f"message: must be a string, got {self.message!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Provenance:
    """Where a set of records came from. Every dataset file carries one per source."""

    hardware: str
    gpu_name: str = ""
    driver: str = ""
    torch_version: str = ""
    triton_version: str = ""
    collector: str = ""
    command: str = ""
    date: str = ""
    seed: int | None = None
    extra: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        _check_key("hardware", self.hardware)
        for name in ("gpu_name", "driver", "torch_version", "triton_version", "collector", "command", "date"):
            v = getattr(self, name)
            if not isinstance(v, str):
                raise ValueError(f"{name}: must be a string, got {v!r}")
        if self.seed is not None and (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, int)
            or not -_INT64_MAX - 1 <= self.seed <= _INT64_MAX
        ):
            raise ValueError(f"seed: must be a 64-bit integer or None, got {self.seed!r}")
        extra = tuple(sorted((str(k), str(v)) for k, v in dict(self.extra).items()))
        object.__setattr__(self, "extra", extra)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hardware": self.hardware,
            "gpu_name": self.gpu_name,
            "driver": self.driver,
            "torch_version": self.torch_version,
            "triton_version": self.triton_version,
            "collector": self.collector,
            "command": self.command,
            "date": self.date,
            "seed": self.seed,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Provenance:
        unknown = set(d) - _PROVENANCE_KEYS
        if unknown:
            raise ValueError(f"provenance: {plural(len(unknown), 'unknown field')} {sorted(unknown)}")
        if "hardware" not in d:
            raise ValueError("provenance: missing field 'hardware'")
        kw = dict(d)
        kw["extra"] = tuple(dict(kw.get("extra") or {}).items())
        return cls(**kw)


_PROVENANCE_KEYS = frozenset(f.name for f in fields(Provenance))


def unique(items: Iterable[Any]) -> list[Any]:
    """Order-preserving de-duplication."""
    return list(dict.fromkeys(items))


def compile_cost(problem: Problem, choice: Choice) -> float:
    """Relative CPU cost of compiling the Triton kernel of (problem, choice); 0 for a choice without
    block sizes (ATen). Used to schedule the sweep's compiles and to leave out configs too slow to
    compile (``SweepOptions.max_compile_cost``, ``DiodeOptions.max_compile_cost``), so it is cheap:
    plain arithmetic on the choice's fields.

    Compile time grows with the unrolled inner product per thread, ``BLOCK_M * BLOCK_N * BLOCK_K /
    (32 * num_warps)``, and fp32 without TF32 lowers ``tl.dot`` to FMAs, which LLVM and ptxas
    handle several times slower than tensor-core instructions (measured on sm_90 with triton 3.6:
    benchmarks/fidelity/NVIDIA-H100/THROUGHPUT_NOTES.md)."""
    bm, bn, bk = choice.block_m, choice.block_n, choice.block_k
    if bm is None or bn is None or bk is None:
        return 0.0
    per_thread = bm * bn * bk / (32.0 * max(1, choice.num_warps or 4))
    fma = problem.dtype == "float32" and not choice.allow_tf32
    return per_thread * (8.0 if fma else 1.0) * (1 + 0.1 * (choice.num_stages or 1))
