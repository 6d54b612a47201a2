"""The one feature function: (problem, choices, hardware) -> float32 matrix ``[N, F]``.

Training, evaluation and the Inductor hook all call :func:`featurize`; there is no second feature
path. ``FEATURE_SPEC`` names every column in order, says how it is computed (``transforms``) and
carries a version; a model file stores the spec it was trained with and loading refuses a model
whose spec differs from this one.

Speed: scoring is on the compile path (about 1,500 candidates per GEMM), so the function is
vectorised over choices. The per-choice columns that do not depend on the problem (template
kind, block sizes, stages, warps, flags) are computed once per distinct ``Choice`` and cached;
each call then does one dict lookup per choice and a few dozen numpy operations on ``[N]`` arrays.

Hardware figures (SM count, shared memory, bandwidth, peak TFLOP/s) come from
``torch_diode.hardware.HARDWARE_SPECS``. A model file stores the figures it was trained with
(:class:`GpuConstants`), so a later datasheet correction cannot silently shift its inputs.
"""

from __future__ import annotations

import logging
import math
import operator
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from torch_diode.records import DTYPE_ITEMSIZE, OPS, Choice, Problem

log = logging.getLogger(__name__)

#: Bump when any column's meaning, order or computation changes.
# 2: aten_bias_epilogue (aten::addmm and aten::bias_addmm were one row); 3: log2_fma_unroll;
# 4: c_ld_aligned16 (the output's row alignment)
FEATURE_VERSION = 4


@dataclass(frozen=True)
class FeatureSpec:
    """Ordered feature names, one transform description per name, and a version."""

    version: int
    names: tuple[str, ...]
    transforms: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "names": list(self.names), "transforms": list(self.transforms)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FeatureSpec:
        return cls(version=int(d["version"]), names=tuple(d["names"]), transforms=tuple(d["transforms"]))

    def __len__(self) -> int:
        return len(self.names)


# -- hardware ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class GpuConstants:
    """The hardware figures the features use (a snapshot stored in every model file)."""

    key: str
    sm_count: int
    smem_per_block_bytes: int
    l2_bytes: int
    mem_bandwidth_gbs: float
    peak_tflops_fp16: float  # also bf16
    peak_tflops_tf32: float
    peak_tflops_fp32: float
    peak_tflops_fp8: float
    max_warps_per_sm: int = 64

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key.strip():
            raise ValueError(f"key: must be a hardware key such as 'NVIDIA-H100', got {self.key!r}")
        for f in fields(self):
            if f.name == "key":
                continue
            v = getattr(self, f.name)
            integral = f.type in ("int", int)
            if isinstance(v, bool) or not isinstance(v, int if integral else (int, float)):
                raise ValueError(f"{f.name}: must be {'an integer' if integral else 'a number'}, got {v!r}")
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{f.name}: must be finite and positive, got {v!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GpuConstants:
        return cls(**dict(d))

    def peak_tflops(self, dtype: str, allow_tf32: bool = False) -> float:
        if dtype in ("float16", "bfloat16"):
            return self.peak_tflops_fp16
        if dtype in ("float8_e4m3fn", "float8_e5m2", "int8"):
            return self.peak_tflops_fp8
        if dtype == "float32":
            return self.peak_tflops_tf32 if allow_tf32 else self.peak_tflops_fp32
        return self.peak_tflops_fp32  # float64 and anything else: the plain FP32 rate is the best guess


# Used only for keys that torch_diode.hardware has no datasheet figures for: a middle-of-the-road
# datacenter GPU, so features stay finite; such a model is tied to its own key anyway.
_GENERIC = dict(
    sm_count=108,
    smem_per_block_bytes=163 * 1024,
    l2_bytes=40 * 1024 * 1024,
    mem_bandwidth_gbs=2000.0,
    peak_tflops_fp16=312.0,
    peak_tflops_tf32=156.0,
    peak_tflops_fp32=19.5,
    peak_tflops_fp8=624.0,
)
_warned_generic: set[str] = set()


def gpu_constants(hardware_key: str) -> GpuConstants:
    """The figures of a hardware key, from ``torch_diode.hardware.HARDWARE_SPECS``.

    A key without figures gets generic datacenter-GPU figures and one warning per process.
    """
    from torch_diode.hardware import HARDWARE_SPECS

    spec = HARDWARE_SPECS.get(hardware_key)
    if spec is None:
        if hardware_key not in _warned_generic:
            _warned_generic.add(hardware_key)
            log.warning(
                "no datasheet figures for hardware %r (known: %s); features use generic figures",
                hardware_key,
                ", ".join(sorted(HARDWARE_SPECS)),
            )
        return GpuConstants(key=hardware_key, **_GENERIC)  # type: ignore[arg-type]
    fp16 = float(spec.peak_tflops.get("float16", _GENERIC["peak_tflops_fp16"]))
    return GpuConstants(
        key=hardware_key,
        sm_count=int(spec.sm_count),
        smem_per_block_bytes=int(spec.smem_per_sm_bytes),
        l2_bytes=int(spec.l2_bytes),
        mem_bandwidth_gbs=float(spec.mem_bandwidth_gbs),
        peak_tflops_fp16=fp16,
        peak_tflops_tf32=float(spec.peak_tflops.get("tf32", fp16 / 2)),
        peak_tflops_fp32=float(spec.peak_tflops.get("float32", fp16 / 16)),
        # fp8 tensor cores run at twice the fp16 rate on Hopper; datasheets list it with sparsity.
        peak_tflops_fp8=float(spec.peak_tflops.get("float8_e4m3fn", 2 * fp16)),
        max_warps_per_sm=int(spec.max_threads_per_sm) // 32,
    )


# -- the spec ---------------------------------------------------------------------------------

_DTYPE_GROUPS = ("float16", "bfloat16", "float32", "fp8", "other")
_KINDS = ("aten", "triton_mm", "triton_bmm", "triton_other", "other")

# Problem columns (equal on every row of one call).
_PROBLEM: tuple[tuple[str, str], ...] = (
    ("log2_m", "log2(M)"),
    ("log2_n", "log2(N)"),
    ("log2_k", "log2(K)"),
    ("log2_batch", "log2(batch)"),
    ("log2_flops", "log2(2*batch*M*N*K)"),
    *((f"op_{op}", f"1 if op == {op!r} else 0") for op in OPS),
    *((f"dtype_{g}", f"1 if the input dtype is {g} else 0 (fp8 = float8_e4m3fn/float8_e5m2)") for g in _DTYPE_GROUPS),
    ("itemsize", "bytes per input element (records.DTYPE_ITEMSIZE; bf16 = 2)"),
    ("out_itemsize", "bytes per output element"),
    ("a_row", "1 if A is row-major (stride[-1] == 1)"),
    ("a_col", "1 if A is column-major (stride[-2] == 1 and stride[-1] != 1)"),
    ("b_row", "1 if B is row-major"),
    ("b_col", "1 if B is column-major"),
    ("bias_vector", "1 if the bias is broadcast along rows (addmm with a [N] bias)"),
    ("m_div16", "1 if M % 16 == 0"),
    ("n_div16", "1 if N % 16 == 0"),
    ("k_div16", "1 if K % 16 == 0"),
    ("a_ld_aligned16", "1 if A's leading-dimension stride in bytes is a multiple of 16"),
    ("b_ld_aligned16", "1 if B's leading-dimension stride in bytes is a multiple of 16"),
    ("c_ld_aligned16", "1 if the output's rows (N x its bytes per element) are a multiple of 16 bytes"),
    ("log2_min_bytes", "log2(bytes of A + B + bias + output, each read or written once)"),
    ("log2_intensity", "log2(flops / min_bytes)"),
    ("log2_l2_ratio", "log2((bytes of A + B) / L2 size)"),
    ("log2_t_compute_us", "log2(flops / peak FLOP/s of the dtype, in us) (fp32: non-TF32 peak)"),
    ("log2_t_memory_us", "log2(min_bytes / memory bandwidth, in us)"),
    ("log2_t_roofline_us", "log2(max(t_compute, t_memory))"),
)

# Static choice columns (depend on the choice only; cached).
_STATIC: tuple[tuple[str, str], ...] = (
    *(
        (f"kind_{k}", f"1 if the template is {k} (aten::*, triton::mm, triton::bmm, other triton::*, other)")
        for k in _KINDS
    ),
    (
        "aten_bias_epilogue",
        "1 if the template is aten::bias_addmm (cuBLASLt, bias added in the GEMM's epilogue), else 0",
    ),
    ("log2_block_m", "log2(BLOCK_M), 0 for non-Triton"),
    ("log2_block_n", "log2(BLOCK_N), 0 for non-Triton"),
    ("log2_block_k", "log2(BLOCK_K), 0 for non-Triton"),
    ("log2_group_m", "log2(GROUP_M) (missing: 0)"),
    ("num_stages", "num_stages (missing: 0)"),
    ("log2_num_warps", "log2(num_warps) (missing: 0)"),
    ("even_k", "EVEN_K (missing: 0)"),
    ("allow_tf32", "ALLOW_TF32 (missing: 0)"),
    ("fast_accum", "USE_FAST_ACCUM (missing: 0)"),
    ("log2_k_split", "log2(k_split) of a decompose_k choice, else 0"),
    ("log2_acc_regs", "log2(BLOCK_M*BLOCK_N / (32*num_warps)): fp32 accumulator registers per thread"),
    ("acc_spill", "1 if the accumulator alone needs >= 256 registers per thread"),
    ("log2_tile_intensity", "log2(2*BLOCK_M*BLOCK_N / ((BLOCK_M+BLOCK_N)*itemsize)) (flops per loaded byte)"),
)

# Interaction columns (choice x problem x hardware; 0 on non-Triton rows).
_INTERACT: tuple[tuple[str, str], ...] = (
    ("log2_tiles", "log2(ceil(M/BLOCK_M)*ceil(N/BLOCK_N)*batch)"),
    ("log2_waves", "log2(tiles / SM count)"),
    ("smem_stage_kb", "(BLOCK_M+BLOCK_N)*BLOCK_K*itemsize / 1024: shared memory per stage"),
    ("smem_ratio", "stages * smem_stage / shared memory per block (> 1 does not fit)"),
    ("smem_fits", "1 if smem_ratio <= 1"),
    ("ctas_per_sm", "min(floor(smem per block / smem), floor(max warps per SM / num_warps)), >= 1"),
    ("log2_waves_occ", "log2(tiles / (SMs * ctas_per_sm))"),
    ("last_wave_eff", "tiles / (ceil(tiles / (SMs*ctas_per_sm)) * SMs*ctas_per_sm): last-wave utilisation"),
    ("mn_pad_waste", "log2(ceil(M/BM)*BM*ceil(N/BN)*BN / (M*N)): padded-tile waste"),
    ("k_pad_waste", "log2(ceil(K/BK)*BK / K)"),
    ("log2_k_iters", "log2(ceil(K/BLOCK_K))"),
    ("stage_use", "min(num_stages, k_iters) / num_stages"),
    ("log2_tiled_bytes", "log2(batch*(M*K*tiles_n + K*N*tiles_m)*itemsize + output bytes): traffic without L2 reuse"),
    ("log2_t_tile_compute_us", "log2(ceil(waves_occ) * SMs*ctas * padded tile flops / peak (TF32 if ALLOW_TF32), us)"),
    ("log2_t_tile_memory_us", "log2(tiled_bytes / bandwidth, us)"),
    ("log2_t_tile_roofline_us", "log2(max(t_tile_compute, t_memory)) (t_memory of the problem: L2 absorbs re-reads)"),
    (
        "log2_fma_unroll",
        "log2(BLOCK_M*BLOCK_N*BLOCK_K / (32*num_warps)) when tl.dot lowers to FMAs (fp32 without TF32), else 0",
    ),
)

FEATURE_SPEC = FeatureSpec(
    version=FEATURE_VERSION,
    names=tuple(n for n, _ in (*_PROBLEM, *_STATIC, *_INTERACT)),
    transforms=tuple(t for _, t in (*_PROBLEM, *_STATIC, *_INTERACT)),
)
_NP, _NS, _NI = len(_PROBLEM), len(_STATIC), len(_INTERACT)
#: The first ``N_PROBLEM_FEATURES`` columns depend on the problem only (equal on every row of a call).
N_PROBLEM_FEATURES = _NP


# -- static choice columns, cached -------------------------------------------------------------

# Raw per-choice values the interaction columns need: is_triton, BM, BN, BK, stages, warps, tf32.
_RAW = 7


def _kind(template: str) -> str:
    if template.startswith("aten::"):
        return "aten"
    if template == "triton::mm":
        return "triton_mm"
    if template == "triton::bmm":
        return "triton_bmm"
    if template.startswith("triton::"):
        return "triton_other"
    return "other"


def _static_row(c: Choice) -> tuple[list[float], list[float]]:
    kind = _kind(c.template)
    row = [1.0 if kind == k else 0.0 for k in _KINDS]
    # ATen's two addmm choices differ only here (the op and kind columns are equal): without it
    # they get one prediction, and aten::addmm copies the bias into the output before the GEMM.
    row.append(1.0 if c.template == "aten::bias_addmm" else 0.0)
    tri = c.block_m is not None and c.block_n is not None and c.block_k is not None
    bm, bn, bk = (c.block_m or 0), (c.block_n or 0), (c.block_k or 0)
    warps = c.num_warps or 0
    row += [math.log2(bm) if bm else 0.0, math.log2(bn) if bn else 0.0, math.log2(bk) if bk else 0.0]
    row += [math.log2(c.group_m) if c.group_m else 0.0, float(c.num_stages or 0), math.log2(warps) if warps else 0.0]
    row += [float(bool(c.even_k)), float(bool(c.allow_tf32)), float(bool(c.use_fast_accum))]
    k_split = dict(c.extra).get("k_split")
    row.append(
        math.log2(k_split) if isinstance(k_split, int) and not isinstance(k_split, bool) and k_split > 0 else 0.0
    )
    if tri and warps:
        acc = bm * bn / (32.0 * warps)
        row += [math.log2(acc), 1.0 if acc >= 256 else 0.0]
    else:
        row += [0.0, 0.0]
    row.append(0.0)  # tile intensity: needs the itemsize, filled per call
    raw = [
        1.0 if tri else 0.0,
        float(bm or 1),
        float(bn or 1),
        float(bk or 1),
        float(c.num_stages or 1),
        float(warps or 1),
        float(bool(c.allow_tf32)),
    ]
    return row, raw


#: A ``Choice``'s fields as one tuple: equal for equal choices, as ``Choice.__eq__`` compares them.
_choice_key = operator.attrgetter(*(f.name for f in fields(Choice)))


class _ChoiceCache:
    """Choice -> row of a growing table of static and raw columns. Thread-safe; bounded.

    Two levels: by object identity (the cache holds a reference to every object it has seen, so
    an id cannot be reused while it is in the map), then by value, keyed by the tuple of the
    ``Choice``'s fields (what its ``__eq__`` and ``__hash__`` compare, but built and compared in
    C). On session 32's dev CPU ``featurize`` of 1,500 new but equal objects took 1.09 ms this way
    and 1.54 ms keyed by the ``Choice`` itself, against 0.29 ms for the same objects, which is what
    the handler passes (``torch_diode.inductor.convert`` keeps one per config).
    """

    MAX = 200_000  # distinct choices kept
    MAX_ALIVE = 100_000  # objects kept for the identity map

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._index: dict[tuple[Any, ...], int] = {}  # _choice_key(c) -> row
        self._by_id: dict[int, int] = {}
        self._alive: list[Choice] = []
        self._static = np.zeros((1024, _NS), dtype=np.float32)
        self._raw = np.zeros((_RAW, 1024), dtype=np.float64)  # field-major: rows of a lookup are contiguous
        #: Bumped whenever row indices are reused for other choices (the table was cleared).
        self.generation = 0

    def lookup(self, choices: Sequence[Choice]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """Static rows ``[N, S]``, raw columns ``[7, N]``, the table rows (indices) of ``choices``
        and the generation in which those indices are valid."""
        with self._lock:
            try:  # every choice seen before (the handler's case): no list of Python ints in between
                idx = np.fromiter(map(self._by_id.__getitem__, map(id, choices)), dtype=np.intp, count=len(choices))
            except KeyError:
                idx = self._rows(choices)
            return self._static[idx], self._raw[:, idx], idx, self.generation

    def _rows(self, choices: Sequence[Choice]) -> np.ndarray:
        """The table rows of ``choices``, some not in the identity map, adding those the table lacks
        (under the lock)."""
        ids = list(map(self._by_id.get, map(id, choices)))
        if len(self._index) + len(choices) > self.MAX:
            self.generation += 1
            self._index.clear()
            self._by_id.clear()
            self._alive.clear()
            ids = [None] * len(choices)
        elif len(self._alive) + len(choices) > self.MAX_ALIVE:
            self._by_id.clear()
            self._alive.clear()
            ids = [None] * len(choices)
        for i, c in enumerate(choices):
            if ids[i] is None:
                key = _choice_key(c)
                j = self._index.get(key)
                if j is None:
                    j = self._add(c, key)
                self._by_id[id(c)] = j
                self._alive.append(c)
                ids[i] = j
        return np.array(ids, dtype=np.intp)

    def _add(self, c: Choice, key: tuple[Any, ...]) -> int:
        j = len(self._index)
        if j >= len(self._static):
            self._static = np.concatenate([self._static, np.zeros_like(self._static)])
            self._raw = np.concatenate([self._raw, np.zeros_like(self._raw)], axis=1)
        row, raw = _static_row(c)
        self._static[j] = row
        self._raw[:, j] = raw
        self._index[key] = j
        return j


_CACHE = _ChoiceCache()
_CONSTANTS: dict[str, GpuConstants] = {}


def _dtype_group(dtype: str) -> str:
    if dtype in ("float16", "bfloat16", "float32"):
        return dtype
    if dtype.startswith("float8"):
        return "fp8"
    return "other"


def operands_aligned16(p: Problem) -> tuple[bool, bool]:
    """Whether A's and B's rows (their leading-dimension strides, in bytes) are multiples of 16
    bytes: the widest vector loads need it (the ``a_ld_aligned16`` / ``b_ld_aligned16`` columns,
    and the neighbour memory's distance)."""
    isz = DTYPE_ITEMSIZE[p.dtype]
    sa, sb = p.stride_a, p.stride_b
    a_ld = sa[-2] if sa[-1] == 1 else sa[-1]
    b_ld = sb[-2] if sb[-1] == 1 else sb[-1]
    return a_ld * isz % 16 == 0, b_ld * isz % 16 == 0


def output_aligned16(p: Problem) -> bool:
    """Whether the output's rows (N elements: the op writes a new contiguous tensor) are a
    multiple of 16 bytes; with both operands' aligned, cuBLAS still drops to narrower kernels
    when they are not."""
    return p.n * DTYPE_ITEMSIZE[p.out_dtype] % 16 == 0


def _problem_row(p: Problem, hw: GpuConstants) -> tuple[list[float], float]:
    m, n, k, b = p.m, p.n, p.k, p.batch
    isz = DTYPE_ITEMSIZE[p.dtype]
    osz = DTYPE_ITEMSIZE[p.out_dtype]
    flops = 2.0 * b * m * n * k
    group = _dtype_group(p.dtype)
    sa, sb = p.stride_a, p.stride_b
    a_row, b_row = sa[-1] == 1, sb[-1] == 1
    a_col, b_col = (not a_row) and sa[-2] == 1, (not b_row) and sb[-2] == 1
    bias = p.stride_bias
    bias_bytes = 0.0
    bias_vector = 0.0
    if bias is not None:
        bias_vector = 1.0 if bias[-2] == 0 else 0.0
        bias_bytes = (n if bias_vector else m * n) * osz * (1 if bias[0] == 0 or len(bias) == 2 else b)
    ab_bytes = float(b * (m * k + k * n) * isz)
    min_bytes = ab_bytes + bias_bytes + b * m * n * osz
    t_comp = flops / (hw.peak_tflops(p.dtype) * 1e12) * 1e6
    t_mem = min_bytes / (hw.mem_bandwidth_gbs * 1e9) * 1e6
    row = [math.log2(m), math.log2(n), math.log2(k), math.log2(b), math.log2(flops)]
    row += [1.0 if p.op == op else 0.0 for op in OPS]
    row += [1.0 if group == g else 0.0 for g in _DTYPE_GROUPS]
    row += [float(isz), float(osz), float(a_row), float(a_col), float(b_row), float(b_col), bias_vector]
    row += [float(m % 16 == 0), float(n % 16 == 0), float(k % 16 == 0)]
    row += [float(v) for v in operands_aligned16(p)]
    row.append(float(output_aligned16(p)))
    row += [math.log2(min_bytes), math.log2(flops / min_bytes), math.log2(ab_bytes / hw.l2_bytes)]
    row += [math.log2(t_comp), math.log2(t_mem), math.log2(max(t_comp, t_mem))]
    return row, min_bytes


def featurize(problem: Problem, choices: Sequence[Choice], hardware: str | GpuConstants) -> np.ndarray:
    """The feature matrix of every choice of one problem on one GPU.

    Args:
        problem: the GEMM problem.
        choices: its candidate kernels (ATen and Triton configs alike).
        hardware: a hardware key (figures from ``torch_diode.hardware``) or the
            :class:`GpuConstants` a model was trained with.

    Returns:
        ``float32`` array ``[len(choices), len(FEATURE_SPEC)]``, columns in ``FEATURE_SPEC.names`` order.
    """
    shared, rest = featurize_split(problem, choices, hardware)
    out = np.empty((len(choices), len(FEATURE_SPEC)), dtype=np.float32)  # [N, F]
    out[:, :_NP] = shared
    out[:, _NP:] = rest
    return out


def featurize_split(
    problem: Problem, choices: Sequence[Choice], hardware: str | GpuConstants
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`featurize` in two parts: the problem columns once (``[N_PROBLEM_FEATURES]``) and the
    remaining columns per choice (``[N, F - N_PROBLEM_FEATURES]``); both float32, the same numbers
    as ``featurize``. Scoring uses this to skip writing the problem columns on every row."""
    shared, rest, _ = featurize_split_indexed(problem, choices, hardware)
    return shared, rest


def featurize_split_indexed(
    problem: Problem, choices: Sequence[Choice], hardware: str | GpuConstants
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, int]]:
    """:func:`featurize_split`, plus ``(rows, generation)``: each choice's row in this process's
    choice table and the table's generation. Equal rows in one generation are equal choices, so a
    caller can cache per-choice results by row (the neighbour memory does)."""
    if isinstance(hardware, GpuConstants):
        hw = hardware
    else:
        hw = _CONSTANTS.get(hardware) or _CONSTANTS.setdefault(hardware, gpu_constants(hardware))
    n_rows = len(choices)
    prow, min_bytes = _problem_row(problem, hw)
    shared = np.asarray(prow, dtype=np.float32)  # [S]
    out = np.empty((n_rows, _NS + _NI), dtype=np.float32)  # [N, F - S]
    if n_rows == 0:
        return shared, out, (np.zeros(0, dtype=np.intp), _CACHE.generation)
    static, raw, idx, generation = _CACHE.lookup(choices)  # [N, S], [7, N], [N]
    out[:, :_NS] = static
    tri, bm, bn, bk, stages, warps, tf32 = raw  # each [N] float64
    isz = float(DTYPE_ITEMSIZE[problem.dtype])
    osz = float(DTYPE_ITEMSIZE[problem.out_dtype])
    out[:, _NS - 1] = np.log2(2.0 * bm * bn / ((bm + bn) * isz)) * tri
    m, n, k, b = float(problem.m), float(problem.n), float(problem.k), float(problem.batch)
    sms = float(hw.sm_count)
    tiles_m = np.ceil(m / bm)
    tiles_n = np.ceil(n / bn)
    tiles = tiles_m * tiles_n * b
    k_iters = np.ceil(k / bk)
    smem_stage = (bm + bn) * bk * isz
    smem_ratio = stages * smem_stage / hw.smem_per_block_bytes
    ctas = np.maximum(
        1.0,
        np.minimum(np.floor(hw.smem_per_block_bytes / (stages * smem_stage)), np.floor(hw.max_warps_per_sm / warps)),
    )
    slots = sms * ctas
    waves_occ = tiles / slots
    full_waves = np.ceil(waves_occ)
    tiled_bytes = b * (m * k * tiles_n + k * n * tiles_m) * isz + b * m * n * osz
    peak: np.ndarray | float = (
        np.where(tf32 > 0, hw.peak_tflops_tf32, hw.peak_tflops_fp32) * 1e12
        if problem.dtype == "float32"
        else hw.peak_tflops(problem.dtype) * 1e12
    )
    t_tile = full_waves * slots * (2.0 * bm * bn * k_iters * bk) / peak * 1e6
    t_tmem = tiled_bytes / (hw.mem_bandwidth_gbs * 1e9) * 1e6
    t_mem = min_bytes / (hw.mem_bandwidth_gbs * 1e9) * 1e6
    cols = np.stack(
        (
            np.log2(tiles),
            np.log2(tiles / sms),
            smem_stage / 1024.0,
            smem_ratio,
            (smem_ratio <= 1.0).astype(np.float64),
            ctas,
            np.log2(waves_occ),
            tiles / (full_waves * slots),
            np.log2(tiles_m * bm * tiles_n * bn / (m * n)),
            np.log2(k_iters * bk / k),
            np.log2(k_iters),
            np.minimum(stages, k_iters) / stages,
            np.log2(tiled_bytes),
            np.log2(t_tile),
            np.log2(t_tmem),
            np.log2(np.maximum(t_tile, t_mem)),
            # fp32 without TF32: tl.dot is unrolled into FMAs on registers; past ~1,024 per thread
            # per K step the kernel spills, 5-115x slower (data/NVIDIA-H200/val.msgpack:
            # baddbmm float32 4x40x3000x40, BLOCK_K 64 tiles up to 115x the best)
            np.log2(bm * bn * bk / (32.0 * warps)) * (0.0 if problem.dtype != "float32" else 1.0 - tf32),
        )
    )  # [I, N]
    cols *= tri  # non-Triton rows get zeros
    out[:, _NS:] = cols.T
    return shared, out, (idx, generation)
