"""Seeded problem samplers: log-normal (fitted to real model GEMMs), uniform and power-of-two.

* ``log-normal``: ``(ln M, ln N, ln K)`` drawn from a 3-d normal whose mean and covariance were
  fitted to the real-model entries of ``data/shapesets/real_models.json`` (:data:`FITTED`), one
  fit for mm/addmm and one for bmm/baddbmm (whose ``ln batch`` has its own normal). Sizes are
  rounded and clipped to the range the fit saw.
* ``uniform``: every dimension uniform on ``[min_dim, max_dim]``.
* ``pow2``: every dimension ``2**e`` with ``e`` uniform on ``[log2 min_dim, log2 max_dim]``.

The op, dtype and layout of each problem are drawn uniformly from the given lists; problems are
distinct, and operands larger than ``max_operand_elements`` are redrawn. The same arguments and
seed always give the same problems (numpy's PCG64 ``default_rng``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from torch_diode.records import BATCHED_OPS, OPS, Problem, canonical_dtype
from torch_diode.shapes.shapeset import LAYOUTS, ShapeEntry, strides_for

SAMPLERS: tuple[str, ...] = ("log-normal", "uniform", "pow2")
#: The dtypes problems are sampled in: those the collectors can time (fp8 and integer GEMMs are other
#: ops; their inputs cannot be drawn with ``normal_``, and float64 has no Triton GEMM template).
SAMPLED_DTYPES: tuple[str, ...] = ("float16", "bfloat16", "float32")


@dataclass(frozen=True)
class LogNormalParams:
    """A log-normal over (M, N, K) [and batch]: ``mean``/``cov`` of ``(ln M, ln N, ln K)``."""

    mean: tuple[float, float, float]
    cov: tuple[tuple[float, float, float], ...]
    lo: tuple[int, int, int]
    hi: tuple[int, int, int]
    batch_mean: float = 0.0
    batch_std: float = 0.0
    batch_hi: int = 1
    n: int = 0  # entries the fit used


# Fitted by `fit_log_normal(load_shapeset("data/shapesets/real_models.json").select(tags=REAL_TAGS))`
# (unweighted over distinct shapes; printed by `diode shapes --fit data/shapesets/real_models.json`)
# on the committed shape set. Refit and paste when the shape set changes.
# Fit of 2026-11-22 on 741 real-model entries (529 mm/addmm, 212 bmm) of 1127.
FITTED: dict[str, LogNormalParams] = {
    "mm": LogNormalParams(
        mean=(4.6126, 8.5358, 8.0815),
        cov=((8.5145, -0.5667, -0.4145), (-0.5667, 3.0823, 0.3109), (-0.4145, 0.3109, 0.7245)),
        lo=(1, 256, 320),
        hi=(16448, 152064, 28672),
        n=529,
    ),
    "bmm": LogNormalParams(
        mean=(4.1647, 5.6308, 5.6308),
        cov=((10.6381, -0.6075, -0.6075), (-0.6075, 2.1174, -1.0469), (-0.6075, -1.0469, 2.1174)),
        lo=(1, 40, 40),
        hi=(8192, 8192, 8192),
        batch_mean=4.247,
        batch_std=1.5925,
        batch_hi=4096,
        n=212,
    ),
}

#: Tags of the real-model entries (the awkward ones are synthetic and stay out of the fit).
REAL_TAGS: tuple[str, ...] = ("llm", "encoder", "vision", "cnn", "diffusion")


def _family(op: str) -> str:
    return "bmm" if op in BATCHED_OPS else "mm"


def fit_log_normal(entries: Iterable[ShapeEntry]) -> dict[str, LogNormalParams]:
    """Fit one :class:`LogNormalParams` per op family (``"mm"``: mm/addmm, ``"bmm"``: bmm/baddbmm).

    Raises:
        ValueError: a family has fewer than 4 entries (no covariance to speak of).
    """
    by_family: dict[str, list[ShapeEntry]] = {"mm": [], "bmm": []}
    for e in entries:
        by_family[_family(e.op)].append(e)
    out = {}
    for fam, es in by_family.items():
        if len(es) < 4:
            raise ValueError(f"fit: {len(es)} {fam}-family entries; need at least 4 to fit a log-normal")
        x = np.log(np.array([[e.m, e.n, e.k] for e in es], dtype=np.float64))  # [E, 3]
        mean = x.mean(axis=0)
        cov = np.cov(x, rowvar=False)
        dims = np.array([[e.m, e.n, e.k] for e in es])
        lb = np.log(np.array([e.batch for e in es], dtype=np.float64))
        out[fam] = LogNormalParams(
            mean=tuple(round(float(v), 4) for v in mean),  # type: ignore[arg-type]
            cov=tuple(tuple(round(float(v), 4) for v in row) for row in cov),  # type: ignore[misc]
            lo=tuple(int(v) for v in dims.min(axis=0)),  # type: ignore[arg-type]
            hi=tuple(int(v) for v in dims.max(axis=0)),  # type: ignore[arg-type]
            batch_mean=round(float(lb.mean()), 4),
            batch_std=round(float(lb.std()), 4),
            batch_hi=int(max(e.batch for e in es)),
            n=len(es),
        )
    return out


def _operand_row_sizes(layout: str) -> tuple[str, str]:
    """Which size (``"m"``, ``"n"``, ``"k"``) A's and B's rows are long in a ``"row/col"``-style
    layout (their leading dimensions, ``shapeset.strides_for``)."""
    la, lb = layout.split("/")
    return ("k" if la == "row" else "m"), ("n" if lb == "row" else "k")


def one_misaligned_layout(layout: str) -> bool:
    """Whether a ``"row/col"``-style layout can have exactly one operand with misaligned rows:
    its two operands' rows have different lengths (not ``row/col``, where both are K long)."""
    a, b = _operand_row_sizes(layout)
    return a != b


def _aligned_size(v: int, align_to: int) -> int:
    """``v`` rounded to the nearest multiple of ``align_to``, or of 16 when at most ``align_to``
    (never below 16): the aligned size of the grown plans' problems."""
    return align_to * round(v / align_to) if v > align_to else max(16, 16 * round(v / 16))


def output_misaligned_layout(layout: str) -> bool:
    """Whether a ``"row/col"``-style layout can have both operands' rows 16-byte aligned and the
    output's not: neither operand's rows are N long, as the output's are (``row/col``: both K;
    ``col/col``: M and K)."""
    return "n" not in _operand_row_sizes(layout)


def _output_misaligned(m: int, n: int, k: int, layout: str, odd: bool, align_to: int) -> tuple[int, int, int]:
    """(M, N, K) with the output's rows misaligned and both operands' aligned
    (``sample_problems``' ``output_misaligned``)."""
    sizes = {"m": m, "n": n, "k": k}
    for s in set(_operand_row_sizes(layout)):
        sizes[s] = _aligned_size(sizes[s], align_to)
    # Odd N leaves rows 1-element aligned; N = 2 mod 4 leaves them 2 elements (4 bytes for 2-byte
    # types, 8 for fp32): cuBLAS and Triton pick their vector widths from the largest that fits.
    sizes["n"] = sizes["n"] | 1 if odd else max(2, sizes["n"] - sizes["n"] % 4 + 2)
    return sizes["m"], sizes["n"], sizes["k"]


def _one_misaligned(m: int, n: int, k: int, layout: str, a_misaligned: bool, align_to: int) -> tuple[int, int, int]:
    """(M, N, K) with exactly one operand's rows misaligned (``sample_problems``' ``one_misaligned``)."""
    sizes = {"m": m, "n": n, "k": k}
    bad, good = _operand_row_sizes(layout) if a_misaligned else _operand_row_sizes(layout)[::-1]
    sizes[bad] |= 1
    sizes[good] = _aligned_size(sizes[good], align_to)
    return sizes["m"], sizes["n"], sizes["k"]


def _check_choice(name: str, values: Sequence[str], allowed: Sequence[str]) -> tuple[str, ...]:
    values = tuple(values)
    if not values:
        raise ValueError(f"{name}: give at least one of {', '.join(allowed)}")
    bad = [v for v in values if v not in allowed]
    if bad:
        raise ValueError(f"{name}: unknown {bad}; known: {', '.join(allowed)}")
    return values


def sample_problems(
    n: int,
    *,
    seed: int,
    sampler: str = "log-normal",
    ops: Sequence[str] = ("mm", "addmm", "bmm"),
    dtypes: Sequence[str] = ("float16", "bfloat16", "float32"),
    layouts: Sequence[str] = ("row/row", "row/col"),
    min_dim: int = 16,
    max_dim: int = 8192,
    max_batch: int = 64,
    max_operand_elements: int = 2**28,
    exclude: Iterable[Problem] = (),
    params: dict[str, LogNormalParams] | None = None,
    aligned_fraction: float | None = None,
    align_to: int = 128,
    one_misaligned: bool = False,
    output_misaligned: bool = False,
) -> list[Problem]:
    """``n`` distinct seeded problems.

    Args:
        n: how many.
        seed: the RNG seed (same arguments + seed = same problems).
        sampler: ``"log-normal"``, ``"uniform"`` or ``"pow2"``.
        ops, dtypes, layouts: drawn uniformly per problem (layouts as ``"row/col"``, A/B).
        min_dim, max_dim: the range of M, N, K for ``uniform`` and ``pow2``.
        max_batch: the largest batch (bmm/baddbmm) for ``uniform`` and ``pow2``.
        max_operand_elements: redraw a problem with a larger operand (batch included).
        exclude: problems never to return (e.g. a training set's, for a validation set).
        params: log-normal parameters (default :data:`FITTED`).
        aligned_fraction: None (the default) keeps the sizes as drawn. Otherwise each problem is
            put in one of two size classes: with this probability *aligned* (N, K and M rounded to
            the nearest multiple of ``align_to``, M only when larger than ``align_to`` so decode
            sizes stay), else *odd* (N, K and M > 1 made odd). A sweep kernel depends on a
            size's divisibility, not its value (``torch_diode.collect.sweep.kernel_spec``), so
            problems of one class, op, dtype and layout share compiled kernels; sizes with every
            divisibility in between compile one kernel set each. Odd sizes are the hardest case
            for masking and padding, so they stay in the mix.
        align_to: the multiple of the aligned class.
        one_misaligned: every problem has exactly one operand whose rows are not 16-byte aligned
            (``features.operands_aligned16``): that operand's contiguous size made odd, the other
            operand's rounded to a multiple of ``align_to`` (of 16 when it is at most
            ``align_to``), the third size as drawn; A or B, each half the time. Only layouts
            where the two operands' rows have different sizes can do this (``row/row``: A's rows
            are K long, B's N; ``col/row``: M and N; ``col/col``: M and K), not ``row/col`` (both
            K). Replaces ``aligned_fraction``, which must then be None.
        output_misaligned: every problem has both operands' rows 16-byte aligned and the output's
            rows (N times its bytes per element) not: the operands' contiguous sizes rounded as
            above, N made odd or 2 mod 4 (each half the time), the third size as drawn (a linear
            layer whose output features are not a multiple of 8, ``x @ W.T``). Only layouts where
            neither operand's rows are N long: ``row/col`` and ``col/col``. Replaces
            ``aligned_fraction`` and excludes ``one_misaligned``.

    Raises:
        ValueError: bad arguments, or ``n`` distinct problems could not be drawn in ``100 * n`` tries.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n: must be a non-negative integer, got {n!r}")
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler: must be one of {', '.join(SAMPLERS)}, got {sampler!r}")
    ops = _check_choice("ops", ops, OPS)
    layouts = _check_choice("layouts", layouts, LAYOUTS)
    dtypes = tuple(canonical_dtype(d) for d in dtypes)
    if not dtypes:
        raise ValueError("dtypes: give at least one dtype")
    uncollectable = [d for d in dtypes if d not in SAMPLED_DTYPES]
    if uncollectable:  # their inputs cannot be drawn, or Inductor has no GEMM template for them
        raise ValueError(
            f"dtypes: {', '.join(uncollectable)} cannot be collected (every problem would fail); "
            f"sample from {', '.join(SAMPLED_DTYPES)}"
        )
    if not 1 <= min_dim <= max_dim:
        raise ValueError(f"min_dim/max_dim: need 1 <= min_dim <= max_dim, got {min_dim}, {max_dim}")
    fitted = params if params is not None else FITTED
    if sampler == "log-normal" and any(_family(op) not in fitted for op in ops):
        raise ValueError("sampler: no fitted log-normal parameters; fit them with `diode shapes --fit SHAPESET`")
    if aligned_fraction is not None and not 0.0 <= aligned_fraction <= 1.0:
        raise ValueError(f"aligned_fraction: must be in [0, 1] or None, got {aligned_fraction!r}")
    if isinstance(align_to, bool) or not isinstance(align_to, int) or align_to < 2:
        raise ValueError(f"align_to: must be an integer >= 2, got {align_to!r}")
    if output_misaligned:
        if aligned_fraction is not None or one_misaligned:
            raise ValueError(
                "output_misaligned: sets every problem's alignment; leave aligned_fraction None and one_misaligned off"
            )
        shared = [lay for lay in layouts if not output_misaligned_layout(lay)]
        if shared:
            raise ValueError(
                f"output_misaligned: in layout(s) {', '.join(shared)} an operand's rows are N long, as the output's "
                "are, so they are aligned or misaligned together; use row/col or col/col"
            )
    if one_misaligned:
        if aligned_fraction is not None:
            raise ValueError("one_misaligned: sets every problem's alignment; leave aligned_fraction None")
        shared = [lay for lay in layouts if not one_misaligned_layout(lay)]
        if shared:
            raise ValueError(
                f"one_misaligned: in layout(s) {', '.join(shared)} both operands' rows are K long, so they are "
                "aligned or misaligned together; use row/row, col/row or col/col"
            )
    rng = np.random.default_rng(seed)
    excluded = set(exclude)
    out: dict[Problem, None] = {}
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > 100 * max(n, 1):
            raise ValueError(
                f"sampler: drew only {len(out)} distinct problems of {n} in {tries - 1} tries; widen the ranges"
            )
        op = ops[int(rng.integers(len(ops)))]
        dtype = dtypes[int(rng.integers(len(dtypes)))]
        layout = layouts[int(rng.integers(len(layouts)))]
        batched = op in BATCHED_OPS
        if sampler == "log-normal":
            p = fitted[_family(op)]
            z = rng.multivariate_normal(np.array(p.mean), np.array(p.cov))
            m, nn, k = (int(min(max(round(math.exp(v)), lo), hi)) for v, lo, hi in zip(z, p.lo, p.hi))
            batch = (
                int(min(max(round(math.exp(rng.normal(p.batch_mean, p.batch_std))), 1), p.batch_hi)) if batched else 1
            )
        elif sampler == "uniform":
            m, nn, k = (int(v) for v in rng.integers(min_dim, max_dim + 1, size=3))
            batch = int(rng.integers(1, max_batch + 1)) if batched else 1
        else:
            lo, hi = math.ceil(math.log2(min_dim)), math.floor(math.log2(max_dim))
            if lo > hi:
                raise ValueError(f"pow2: no power of two in [{min_dim}, {max_dim}]")
            m, nn, k = (2 ** int(v) for v in rng.integers(lo, hi + 1, size=3))
            batch = 2 ** int(rng.integers(0, int(math.log2(max_batch)) + 1)) if batched else 1
        if aligned_fraction is not None:
            if rng.random() < aligned_fraction:
                nn, k = (max(align_to, align_to * round(v / align_to)) for v in (nn, k))
                m = align_to * round(m / align_to) if m > align_to else m
            else:
                nn, k = nn | 1, k | 1
                m = m | 1 if m > 1 else m
        if one_misaligned:
            m, nn, k = _one_misaligned(m, nn, k, layout, bool(rng.random() < 0.5), align_to)
        if output_misaligned:
            m, nn, k = _output_misaligned(m, nn, k, layout, bool(rng.random() < 0.5), align_to)
        if max(m * k, k * nn, m * nn) * batch > max_operand_elements:
            continue
        sa, sb = strides_for(op, m, nn, k, layout)
        prob = Problem(op=op, m=m, n=nn, k=k, batch=batch, dtype=dtype, stride_a=sa, stride_b=sb)
        if prob in excluded or prob in out:
            continue
        out[prob] = None
    return list(out)
