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

Asking for more problems than there are: ``uniform`` and ``pow2`` (without the alignment classes)
count their space first (the operand cap and the exclusions included; a space too large to count
quickly cannot run out; with ``min_dim`` 1 and several layouts it is not counted, since a size of 1
gives two layouts the same strides), so a request it cannot hold fails at once
(:class:`SamplingError` says how many there are and what to change). Other draws fail after
``100 * n`` in all, as before (so every request that succeeded before still does, with the same
problems); with ``partial`` they also stop after :data:`PATIENCE` in a row found nothing new.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from torch_diode._text import plural
from torch_diode.records import BATCHED_OPS, OPS, Problem, canonical_dtype
from torch_diode.shapes.shapeset import LAYOUTS, ShapeEntry, strides_for

SAMPLERS: tuple[str, ...] = ("log-normal", "uniform", "pow2")
#: The dtypes problems are sampled in: those the collectors can time (fp8 and integer GEMMs are other
#: ops; their inputs cannot be drawn with ``normal_``, and float64 has no Triton GEMM template).
SAMPLED_DTYPES: tuple[str, ...] = ("float16", "bfloat16", "float32")
#: The default cap on an operand's elements (batch included): 2**28 is 512 MiB in fp16.
MAX_OPERAND_ELEMENTS = 2**28
#: Draws in a row that found no new problem after which a space that was not counted (log-normal,
#: or the alignment classes) is taken as exhausted, where ``partial`` takes what was found (without
#: it only the ``100 * n`` limit stops the draws: a request that can succeed in them still does).
PATIENCE = 10_000


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
            raise ValueError(
                f"fit: {plural(len(es), f'{fam}-family entry', f'{fam}-family entries')}; need at least 4 to fit a log-normal"
            )
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


def cap_text(cap: int, *, value: bool = False) -> str:
    """An operand cap as text: ``2**28`` for a power of two (with ``value``: ``2**28 = 268,435,456``),
    else the number itself (``268,435,457``)."""
    if cap > 0 and cap & (cap - 1) == 0:
        return f"2**{cap.bit_length() - 1}" + (f" = {cap:,}" if value else "")
    return f"{cap:,}"


class SamplingError(ValueError):
    """Fewer than ``n`` distinct problems could be drawn (:func:`sample_problems`).

    ``str()`` names ``sample_problems``' arguments; :meth:`message` names what a caller maps them
    to (the CLI: its flags).

    Attributes:
        asked: the ``n`` asked for.
        problems: the distinct problems drawn, in order (with ``partial=True``: every one the
            draws found; empty when a request was refused before drawing).
        space: the problems the counted space holds (``uniform``/``pow2`` without alignment
            classes), None where it was not counted; ``excluded`` of them are excluded, and
            ``over_cap`` more of the size ranges have an operand over ``max_operand_elements``.
        tries: draws made; ``over_cap_draws``, ``repeats`` and ``excluded_draws`` count the ones
            that gave no new problem and why.
        patience_ran_out: the draws stopped after :data:`PATIENCE` in a row found nothing new.
        largest_ok: the largest ``n`` the same arguments and seed give (a smaller ``n`` makes the same
            draws, and stops after ``100 * n``): 0 when none, or when refused before drawing.
    """

    def __init__(
        self,
        *,
        asked: int,
        problems: list[Problem],
        sampler: str,
        min_dim: int,
        max_dim: int,
        max_operand_elements: int,
        space: int | None = None,
        excluded: int = 0,
        over_cap: int = 0,
        tries: int = 0,
        over_cap_draws: int = 0,
        repeats: int = 0,
        excluded_draws: int = 0,
        patience_ran_out: bool = False,
        largest_ok: int = 0,
    ) -> None:
        self.asked = asked
        self.problems = problems
        self.sampler = sampler
        self.min_dim = min_dim
        self.max_dim = max_dim
        self.max_operand_elements = max_operand_elements
        self.space = space
        self.excluded = excluded
        self.over_cap = over_cap
        self.tries = tries
        self.over_cap_draws = over_cap_draws
        self.repeats = repeats
        self.excluded_draws = excluded_draws
        self.patience_ran_out = patience_ran_out
        self.largest_ok = largest_ok
        super().__init__(self.message())

    def __reduce__(self) -> tuple[Any, ...]:  # its arguments are keyword-only (pickled across processes)
        return functools.partial(SamplingError, **{k: v for k, v in vars(self).items() if not k.startswith("_")}), ()

    def message(self, names: Mapping[str, str] | None = None) -> str:
        """The explanation, with ``names`` in place of the argument names (keys ``n``,
        ``min_dim``, ``max_dim``, ``ops``, ``dtypes``, ``layouts``, ``sampler``, ``params``; ``cap``:
        how to call the operand cap; ``excluded``: what the excluded problems are). A name given
        as ``""`` is an argument the caller cannot set: the advice leaves it out."""
        cap = self.max_operand_elements
        name = {
            "n": "n",
            "min_dim": "min_dim",
            "max_dim": "max_dim",
            "ops": "ops",
            "dtypes": "dtypes",
            "layouts": "layouts",
            "sampler": "sampler",
            "params": "params",
            "cap": f"max_operand_elements ({cap_text(cap)} elements per operand, batch included)",
            "excluded": "excluded (exclude, exclude_shapes)",
            **(names or {}),
        }
        sized = self.sampler in ("uniform", "pow2")  # min_dim/max_dim apply
        widen = ", ".join(
            name[k] if k != "min_dim" else f"{name['min_dim']}/{name['max_dim']}"
            for k in (("min_dim",) if sized else ()) + ("ops", "dtypes", "layouts")
        )
        found = len(self.problems)
        if self.space == 0:  # the smallest problem of the ranges is over the cap
            smallest = self.min_dim if self.sampler == "uniform" else 1 << (self.min_dim - 1).bit_length()
            fit = math.isqrt(cap) if self.sampler == "uniform" else 1 << (math.isqrt(cap).bit_length() - 1)
            return (
                f"no problem fits under {name['cap']}: with {name['min_dim']} {self.min_dim} every M, N and K is at "
                f"least {smallest}, so every operand has at least {smallest * smallest:,} elements; lower "
                f"{name['min_dim']} to at most {fit}"
            )
        if self.space is not None and self.space - self.excluded < self.asked:
            available = self.space - self.excluded
            text = f"{name['n']} {self.asked}: the space holds only {plural(self.space, 'distinct problem')}"
            if self.excluded:
                text += f", {self.excluded:,} of them {name['excluded']}"
            if available > 0:
                text += f"; lower {name['n']} to at most {available:,}, or widen the space ({widen})"
            else:
                text += f"; widen the space ({widen})"
            if self.over_cap > self.space:
                text += (
                    f"; {plural(self.over_cap, 'more problem')} of the size ranges have an operand over {name['cap']}, so "
                    f"larger sizes add few: lower {name['min_dim']} rather than raise {name['max_dim']}"
                )
            return text
        text = (
            f"{name['n']} {self.asked}: drew only {plural(found, 'distinct problem')} in {plural(self.tries, 'draw')}"
        )
        if self.patience_ran_out:
            text += f", the last {PATIENCE:,} all without a new one"
        why = [
            f"{count:,} {what}"
            for count, what in (
                (self.over_cap_draws, f"had an operand over {name['cap']}"),
                (self.repeats, "repeated a problem already drawn"),
                (self.excluded_draws, f"were {name['excluded']}"),
            )
            if count
        ]
        text += f" ({', '.join(why)})" if why else ""
        if self.over_cap_draws > self.repeats + self.excluded_draws and sized:
            if self.space is not None:
                text += f"; of the size ranges' problems {self.space:,} fit under it, {self.over_cap:,} do not"
            return text + (
                f"; lower {name['min_dim']}/{name['max_dim']}: every M, N and K up to {math.isqrt(cap)} fits (batch 1)"
            )
        if self.over_cap_draws > self.repeats + self.excluded_draws and self.sampler == "log-normal":
            # Not "widen the space": more dtypes or layouts give as many draws over the cap.
            return text + self._log_normal_over_cap(name)
        return text + f"; the space looks exhausted: lower {name['n']}, or widen the space ({widen})"

    def _log_normal_over_cap(self, name: Mapping[str, str]) -> str:
        """What can help when most log-normal draws were over the cap: its sizes come from its fit,
        whatever the dtypes and layouts, so only fewer problems (as many as the same draws give),
        smaller fitted sizes, or another sampler's sizes do."""
        advice = []
        if self.largest_ok:
            advice.append(f"lower {name['n']} to at most {self.largest_ok:,} (the same draws give that many)")
        if name["params"]:
            advice.append(f"pass {name['params']} with smaller sizes (e.g. fit_log_normal of smaller shapes)")
        advice.append(
            f"sample with {name['sampler']} uniform or pow2, whose sizes {name['min_dim']}/{name['max_dim']} set "
            f"(every M, N and K up to {math.isqrt(self.max_operand_elements)} fits, batch 1)"
        )
        return (
            f"; the log-normal sampler draws its sizes from its fit to real model GEMMs, whatever the "
            f"{name['dtypes']} and {name['layouts']}: " + ", or ".join(advice)
        )


@dataclass(frozen=True)
class _Space:
    """The (op, dtype, layout, M, N, K, batch) tuples ``uniform``/``pow2`` draw from: ``box`` in
    the ranges, ``size`` of them within the operand cap, ``excluded`` of those excluded."""

    box: int
    size: int
    excluded: int


_COUNT_LIMIT = 10**6  # sizes per count beyond which a uniform space is not counted (it is huge)


def _count_uniform(lo: int, hi: int, cap: int) -> int | None:
    """How many (M, N, K) in ``[lo, hi]**3`` have ``max(M*K, K*N, M*N) <= cap``; None: too many
    to count quickly. For the pairs (M, N) whose larger size is ``t``: the other size is at most
    ``min(t, cap // t)``, and K at most ``cap // t``."""
    if cap < lo * lo:
        return 0
    t_hi = min(hi, cap // lo)
    if t_hi - lo + 1 > _COUNT_LIMIT or 2.0 * cap * (t_hi - lo + 1) >= 2.0**62:
        return None
    t = np.arange(lo, t_hi + 1, dtype=np.int64)
    q = cap // t
    pairs = 2 * (np.minimum(t, q) - lo + 1) - (t * t <= cap)  # (M, N) and (N, M); (t, t) once
    ks = np.minimum(hi, q) - lo + 1
    return int((pairs * ks).sum())


def _count_pow2(elo: int, ehi: int, cap: int) -> int:
    """How many (M, N, K) of powers of two ``2**elo .. 2**ehi`` have ``max(M*K, K*N, M*N) <= cap``."""
    if cap < 1:
        return 0
    e = np.arange(elo, ehi + 1, dtype=np.int64)
    em, en, ek = e[:, None, None], e[None, :, None], e[None, None, :]
    largest = np.maximum(np.maximum(em + ek, ek + en), em + en)
    return int((largest <= cap.bit_length() - 1).sum())


def _batches(sampler: str, max_batch: int) -> Sequence[int]:
    """The batches ``uniform``/``pow2`` draw for bmm/baddbmm."""
    if sampler == "uniform":
        return range(1, max_batch + 1)
    return [2**j for j in range(int(math.log2(max_batch)) + 1)]


@dataclass(frozen=True)
class _Ranges:
    """What ``uniform``/``pow2`` draw from: ``sample_problems``' arguments (``cap``: its
    ``max_operand_elements``)."""

    sampler: str
    ops: Sequence[str]
    dtypes: Sequence[str]
    layouts: Sequence[str]
    min_dim: int
    max_dim: int
    max_batch: int
    cap: int


def _count_space(r: _Ranges) -> tuple[int, int] | None:
    """``(box, size)`` of :class:`_Space` (no exclusion), or None when too large to count."""
    sampler, min_dim, max_dim, cap = r.sampler, r.min_dim, r.max_dim, r.cap
    if sampler == "uniform":
        per_side = max_dim - min_dim + 1

        def triples(c: int) -> int | None:
            return _count_uniform(min_dim, max_dim, c)

    else:
        elo, ehi = math.ceil(math.log2(min_dim)), math.floor(math.log2(max_dim))
        per_side = ehi - elo + 1

        def triples(c: int) -> int | None:
            return _count_pow2(elo, ehi, c)

    box = size = 0
    for op in set(r.ops):
        batches = _batches(sampler, r.max_batch) if op in BATCHED_OPS else [1]
        if len(batches) > 4096:  # each batch is a count of its own
            return None
        box += per_side**3 * len(batches)
        for b in batches:
            if cap // b < min_dim * min_dim:  # no larger batch fits either
                break
            count = triples(cap // b)
            if count is None:
                return None
            size += count
    per_kind = len(set(r.dtypes)) * len(set(r.layouts))
    return box * per_kind, size * per_kind


def _count_excluded(
    r: _Ranges, excluded: set[Problem], excluded_shapes: set[tuple[str, int, int, int, int, str]]
) -> int:
    """How many tuples of the counted space give an excluded problem (``excluded``, or a shape of
    ``excluded_shapes`` in any layout)."""
    sampler, ops, dtypes, layouts, min_dim, max_dim, cap = (
        r.sampler,
        r.ops,
        r.dtypes,
        r.layouts,
        r.min_dim,
        r.max_dim,
        r.cap,
    )
    batches = _batches(sampler, r.max_batch)

    def size_ok(v: int) -> bool:
        return min_dim <= v <= max_dim and (sampler == "uniform" or v & (v - 1) == 0)

    count = 0
    keys = excluded_shapes | {p.shape for p in excluded}
    for op, m, n, k, batch, dtype in keys:
        if op not in ops or dtype not in dtypes or not all(size_ok(v) for v in (m, n, k)):
            continue
        if (batch not in batches if op in BATCHED_OPS else batch != 1) or max(m * k, k * n, m * n) * batch > cap:
            continue
        for layout in set(layouts):
            if (op, m, n, k, batch, dtype) in excluded_shapes:
                count += 1
                continue
            sa, sb = strides_for(op, m, n, k, layout)
            count += Problem(op=op, m=m, n=n, k=k, batch=batch, dtype=dtype, stride_a=sa, stride_b=sb) in excluded
    return count


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
    max_operand_elements: int = MAX_OPERAND_ELEMENTS,
    exclude: Iterable[Problem] = (),
    exclude_shapes: Iterable[Problem] = (),
    params: dict[str, LogNormalParams] | None = None,
    aligned_fraction: float | None = None,
    align_to: int = 128,
    one_misaligned: bool = False,
    output_misaligned: bool = False,
    partial: bool = False,
) -> list[Problem]:
    """``n`` distinct seeded problems.

    Args:
        n: how many.
        seed: the RNG seed (same arguments + seed = same problems).
        sampler: ``"log-normal"``, ``"uniform"`` or ``"pow2"``.
        ops, dtypes, layouts: drawn uniformly per problem (layouts as ``"row/col"``, A/B).
        min_dim, max_dim: the range of M, N, K for ``uniform`` and ``pow2``.
        max_batch: the largest batch (bmm/baddbmm) for ``uniform`` and ``pow2`` (``pow2``: the powers
            of two up to it); ``log-normal`` draws its batch from its fit, and mm/addmm have batch 1.
            Like ``min_dim``/``max_dim`` (and ``align_to``), it is checked whether or not the
            sampler and ops use it.
        max_operand_elements: redraw a problem with a larger operand (batch included).
        exclude: problems never to return (e.g. a training set's, for a validation set).
        exclude_shapes: problems whose shape (op, M, N, K, batch, dtype) is never returned, in any
            layout. The draws are those without it; only the ones whose shape is excluded are
            skipped, so the problems are the same as ``exclude``'s with those dropped, and more.
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
        partial: where the excluded problems leave fewer than ``n`` to draw, draw the ones there
            are before raising (the :class:`SamplingError`'s ``problems``: in a counted space, every
            one not excluded) instead of refusing at once; a request the counted space cannot hold
            even without them is refused at once all the same.

    Raises:
        SamplingError: fewer than ``n`` distinct problems can be drawn: the counted space holds
            fewer (refused before drawing), or ``100 * n`` draws did not find them (with
            ``partial``, in a space that was not counted: or :data:`PATIENCE` draws in a row
            found nothing new).
        ValueError: bad arguments.
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
    if sampler == "pow2" and math.ceil(math.log2(min_dim)) > math.floor(math.log2(max_dim)):
        raise ValueError(f"pow2: no power of two in [{min_dim}, {max_dim}]")
    if (
        isinstance(max_operand_elements, bool)
        or not isinstance(max_operand_elements, (int, float))
        or not max_operand_elements >= 1
    ):
        raise ValueError(f"max_operand_elements: must be a number >= 1, got {max_operand_elements!r}")
    max_operand_elements = int(max_operand_elements)  # an integer size compares alike with its floor
    if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
        raise ValueError(f"max_batch: must be a positive integer, got {max_batch!r}")
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
                f"output_misaligned: in {plural(len(shared), 'layout')} {', '.join(shared)} an operand's rows are N long, as the output's "
                "are, so they are aligned or misaligned together; use row/col or col/col"
            )
    if one_misaligned:
        if aligned_fraction is not None:
            raise ValueError("one_misaligned: sets every problem's alignment; leave aligned_fraction None")
        shared = [lay for lay in layouts if not one_misaligned_layout(lay)]
        if shared:
            raise ValueError(
                f"one_misaligned: in {plural(len(shared), 'layout')} {', '.join(shared)} both operands' rows are K long, so they are "
                "aligned or misaligned together; use row/row, col/row or col/col"
            )
    excluded = set(exclude)
    excluded_shapes = {p.shape for p in exclude_shapes}
    fail: dict[str, Any] = dict(
        sampler=sampler, min_dim=min_dim, max_dim=max_dim, max_operand_elements=max_operand_elements
    )
    space = None
    # A size of 1 gives two layouts the same strides (one problem): the count would be too high.
    same_strides = min_dim == 1 and len(set(layouts)) > 1
    if (
        sampler != "log-normal"
        and aligned_fraction is None
        and not one_misaligned
        and not output_misaligned
        and not same_strides
    ):
        ranges = _Ranges(sampler, ops, dtypes, layouts, min_dim, max_dim, max_batch, max_operand_elements)
        counted = _count_space(ranges)
        if counted is not None:
            box, size = counted
            # Count the excluded ones only where they could matter (a train set can be large).
            most = len(excluded) + len(excluded_shapes) * len(set(layouts))
            gone = 0
            if size - most < n:
                gone = _count_excluded(ranges, excluded, excluded_shapes)
            space = _Space(box=box, size=size, excluded=gone)
            if size - gone < n and (size < n or not partial):  # the draws could never find them
                raise SamplingError(asked=n, problems=[], space=size, excluded=gone, over_cap=box - size, **fail)
    target = n if space is None else min(n, space.size - space.excluded)
    rng = np.random.default_rng(seed)
    out: dict[Problem, None] = {}
    tries = in_a_row = over_cap = repeats = excluded_draws = largest_ok = 0
    while len(out) < target:
        tries += 1
        if tries > 100 * max(n, 1) or (partial and space is None and in_a_row >= PATIENCE):
            break
        in_a_row += 1  # until a new problem is found
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
            over_cap += 1
            continue
        sa, sb = strides_for(op, m, nn, k, layout)
        prob = Problem(op=op, m=m, n=nn, k=k, batch=batch, dtype=dtype, stride_a=sa, stride_b=sb)
        if prob in out:
            repeats += 1
            continue
        if prob in excluded or (op, m, nn, k, batch, dtype) in excluded_shapes:
            excluded_draws += 1
            continue
        out[prob] = None
        in_a_row = 0
        if tries <= 100 * len(out):  # within a request for len(out) problems' 100 * n draws: it succeeds
            largest_ok = len(out)
    if len(out) < n:
        raise SamplingError(
            asked=n,
            problems=list(out),
            space=None if space is None else space.size,
            excluded=0 if space is None else space.excluded,
            over_cap=0 if space is None else space.box - space.size,
            tries=tries - (len(out) < target),  # the last one counted was not drawn
            over_cap_draws=over_cap,
            repeats=repeats,
            excluded_draws=excluded_draws,
            patience_ran_out=partial and space is None and in_a_row >= PATIENCE,
            largest_ok=largest_ok,
            **fail,
        )
    return list(out)
