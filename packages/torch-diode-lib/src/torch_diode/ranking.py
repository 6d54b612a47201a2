"""The model's order of a problem's candidates: by predicted time, with one kernel shape's
``num_stages`` variants spread out and one-warp configs held back on misaligned operands.

``regret@k`` (README.md, Metrics) and the choices handler's ``top_k_configs`` take the fastest of the model's
first k candidates. Triton configs that differ only in ``num_stages`` run within a few percent of
each other on most problems, and the model's errors on them are shared: when its first five places
are five stage variants of one tile, a mistake on that tile costs all five. So each place after
the first goes to the candidate with the lowest predicted log time plus ``diversity`` times the
number of its group's candidates already placed (a group: the same template and config but for
``num_stages``; each ATen choice is a group of its own). The first place is always the lowest
prediction (after the cliff guard, below), and ``diversity`` 0 is the plain order by prediction.

The cliff guard: when an operand's rows are not 16-byte aligned (``features.operands_aligned16``),
its loads are scalar, and a one-warp Triton config has its 32 threads issue every one of them.
Such configs win now and then (14 of 387 such training problems on each GPU) but are the model's
worst top-1 misses (4-18x the best: ``bmm float16 2x61x127x4093`` picks ``16x16x256``, one warp,
at 17.8x on the H100), and the few training timings of the kind do not teach the network the
exception (``cv-session20.md``). So in the order their predicted log time counts ``cliff_guard``
more: one is placed first only when it is predicted that much faster than anything else.

Both chosen by cross-validation (``benchmarks/models/cv-session38.md``): with ``diversity`` 0.2,
on both GPUs, every seed and part, regret@3, regret@5, its p95 and the fastest of what the
handler keeps at top-3 are better than in the plain order; with ``cliff_guard`` 0.2, regret@1 is
better in 12 of 14 cross-validation runs over eight seeds (0.03 and 0.07 points worse in the other
two) and 1.7-1.8 points better on the H100's validation set for the three of ten seeds whose model
picked the 17.8x config.
"""

from __future__ import annotations

import contextlib
import math
import operator
from collections.abc import Sequence

import numpy as np

from torch_diode.features import operands_aligned16, output_aligned16
from torch_diode.records import Choice, Problem

#: The default log-time penalty per better-placed candidate of the same group (0.2: ~22% in time).
DIVERSITY = 0.2
#: The default log-time penalty of a one-warp Triton config when an operand's rows are misaligned.
CLIFF_GUARD = 0.2


def check_penalty(value: object, name: str) -> float:
    """``value`` as a float if it is a finite number >= 0, else ValueError naming ``name`` (the
    check of ``diversity`` and ``cliff_guard``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}: must be a finite number >= 0 (0: off), got {value!r}")
    return float(value)


def cliff_penalty(problem: Problem, choices: Sequence[Choice], guard: float = CLIFF_GUARD) -> np.ndarray | None:
    """``[N]`` the cliff guard's log-time penalty of each choice (see the module docstring), or
    None when none is penalised (both operands aligned, ``guard`` 0, or no one-warp config)."""
    if guard == 0 or all(operands_aligned16(problem)):
        return None
    hit = np.fromiter((c.num_warps == 1 and not c.is_aten for c in choices), dtype=bool, count=len(choices))
    return hit * guard if hit.any() else None


def check_min_num_warps(value: object) -> int | None:
    """``value`` as ``min_num_warps`` (an integer >= 1; 1 and None: off, returned as None), else
    ValueError saying what it takes."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif not isinstance(value, (bool, int)) and hasattr(value, "__index__"):  # numpy integers
        with contextlib.suppress(TypeError):  # (an array that is no integer: refused below)
            value = operator.index(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"min_num_warps: must be an integer >= 1 (4 leaves out one- and two-warp configs) or None, got {value!r}"
        )
    return None if value == 1 else value


def too_few_warps(num_warps: object, min_num_warps: int) -> bool:
    """Whether a Triton config's ``num_warps`` is under ``min_num_warps`` (one without an integer
    ``num_warps`` is not): the configs ``DiodeOptions.min_num_warps`` leaves out."""
    return isinstance(num_warps, int) and not isinstance(num_warps, bool) and num_warps < min_num_warps


def enough_warps(choices: Sequence[Choice], min_num_warps: int | None) -> list[int]:
    """The indices of the choices that ``min_num_warps`` (``DiodeOptions``) keeps: every ATen
    choice, and the Triton configs not :func:`too_few_warps`; ``None``: all."""
    if min_num_warps is None:
        return list(range(len(choices)))
    return [i for i, c in enumerate(choices) if c.is_aten or not too_few_warps(c.num_warps, min_num_warps)]


def aten_variant_call_trusted(problem: Problem) -> bool:
    """Whether the handler may keep one ATen variant alone on the model's word (``select``'s
    ``drop_slower_aten``): fp16 or bf16 with both operands' and the output's rows 16-byte
    aligned, the nn.Linear case.

    There, under cross-validation over the 1,100 training problems (session 42, both GPUs), the
    model's call between addmm's ``aten::addmm`` and ``aten::bias_addmm`` never lost to keeping
    both (67 problems changed); on fp32 or misaligned problems it lost on 13 of 33, up to 1.9x.
    Keeping both asks Inductor to benchmark the pair, which it does erratically (it picked the
    slower ``addmm`` in 8 of 10 such benchmarks on an H100 and an H200)."""
    return problem.dtype in ("float16", "bfloat16") and all(operands_aligned16(problem)) and output_aligned16(problem)


def stage_groups(choices: Sequence[Choice]) -> np.ndarray:
    """``[N]`` group ids: equal for Triton configs that differ only in ``num_stages``, distinct for
    every ATen choice. Ids are only comparable within one call."""
    keys: dict[tuple[object, ...], int] = {}
    return np.fromiter(
        (
            keys.setdefault(
                (i,)
                if c.is_aten
                else (
                    c.template,
                    c.block_m,
                    c.block_n,
                    c.block_k,
                    c.group_m,
                    c.num_warps,
                    c.even_k,
                    c.allow_tf32,
                    c.use_fast_accum,
                    c.acc_type,
                    c.extra,
                ),
                len(keys),
            )
            for i, c in enumerate(choices)
        ),
        dtype=np.intp,
        count=len(choices),
    )


def rank_in_group(predicted: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each candidate's place within its group by ``predicted`` (0: the group's lowest; ties keep
    the candidates' order)."""
    n = len(predicted)
    order = np.lexsort((np.arange(n), predicted, groups))  # by group, then prediction, then position
    g = groups[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if n else np.zeros(0, dtype=np.intp)
    sizes = np.diff(np.r_[starts, n])
    out = np.empty(n, dtype=np.intp)
    out[order] = np.arange(n) - np.repeat(starts, sizes)
    return out


def model_order(
    predicted: np.ndarray,
    groups: np.ndarray | None = None,
    diversity: float = DIVERSITY,
    penalty: np.ndarray | None = None,
) -> np.ndarray:
    """Indices of the candidates in the model's order (see the module docstring): ascending
    ``predicted`` plus ``penalty`` (:func:`cliff_penalty`) plus ``diversity`` times
    :func:`rank_in_group`; stable, so ties keep the candidates' order. Without ``groups`` (or with
    ``diversity`` 0) and ``penalty``, the plain ascending order."""
    predicted = np.asarray(predicted)
    for name, a in (("groups", groups), ("penalty", penalty)):
        if a is not None and np.shape(a) != predicted.shape:
            raise ValueError(f"{name} {np.shape(a)} and predictions {predicted.shape} differ in shape")
    key = predicted.astype(np.float64)
    if penalty is not None:
        key = key + penalty
    if groups is not None and diversity != 0 and len(key) > 1:
        key = key + diversity * rank_in_group(key, np.asarray(groups))
    return np.argsort(key, kind="stable")


def order_of(
    problem: Problem,
    choices: Sequence[Choice],
    predicted: np.ndarray,
    *,
    diversity: float = DIVERSITY,
    cliff_guard: float = CLIFF_GUARD,
) -> np.ndarray:
    """The model's order of ``choices`` of ``problem`` from their ``predicted`` log times: the
    groups of :func:`stage_groups` and the penalty of :func:`cliff_penalty` in :func:`model_order`.
    What the choices handler and the metrics (``torch_diode.evaluate``) rank by."""
    groups = stage_groups(choices) if diversity else None
    return model_order(predicted, groups, diversity, cliff_penalty(problem, choices, cliff_guard))
