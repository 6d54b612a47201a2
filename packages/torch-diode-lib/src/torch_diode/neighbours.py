"""Neighbour memory: what the training problems nearest to a new one measured, blended into the
network's prediction.

The network generalises across problems from a few hundred measured ones; its ranking of the
configs within one problem is what costs regret. Problems of similar shape, dtype and layout rank
their configs alike, so a model file also keeps, per training problem, every measured choice's
time relative to that problem's best (``rel = log t - log t_best``, natural log). At prediction
time the ``k`` training problems nearest to the new one (distance below) each vote on every
candidate they measured, with weight ``w = exp(-d² / bandwidth²)``, and the network's own
relative prediction ``mlp_rel = log t̂ - min log t̂`` counts as ``prior_weight`` votes:

    score = (Σ w · min(rel, cap) + prior_weight · mlp_rel) / (Σ w + prior_weight)

where the sums run over the neighbours that measured the choice. A choice no neighbour measured
keeps ``mlp_rel``; a problem far from every training problem (small ``w``) keeps the network's
order. The blended log time is ``score + min log t̂``: the network's level, the blend's order.

Distance between problems: squared differences of log2 M, N, K and batch, plus 1 for fp16 against
bf16 and 4 for any other dtype mismatch, 0.5 per operand of another layout (row- vs
column-major), 0.3 for a bias on one side only and 0.3 for batched against unbatched, and
``alignment_weight`` (4) per operand, and for the output, whose rows are 16-byte aligned on one
side only (``features.operands_aligned16``, ``features.output_aligned16``; the output since
session 41: with aligned operands, ATen's bmm and baddbmm are 1.70x the best on the H100's
batched training problems whose output is misaligned, 4 of the first 1,100, and 1.17x on the 272
whose output is aligned): a misaligned operand is loaded a few elements at a time, and
tiles that hold many of them per thread fall off a cliff (in the H100's training data
``baddbmm float16 2x251x1021x8191``, B K-major, runs a 64x64x128 tile 5x slower with 4 warps than
with 8), so an aligned neighbour of the same sizes orders the configs otherwise.

A Triton choice is matched to the memory by its configuration (``SIGNATURE``: tile sizes,
GROUP_M, stages, warps, fast accumulation, split-K), not by its template, so a bmm config votes
for the same tile of an mm problem (whose distance counts the difference); EVEN_K and ALLOW_TF32
follow from the problem and are left out. An ATen choice is matched by its op and epilogue
(``aten::mm``, ``aten::addmm``, ``aten::bias_addmm``, ...): an addmm neighbour's ATen time says
little about cuBLAS on an mm (in cross-validation, sharing them made regret@1 worse than the
network alone).

Measured in ``benchmarks/models/cv-session9.md``: grouped cross-validation regret@1 and regret@5
improve on both GPUs with ``k`` = 8, ``bandwidth`` = 3, ``prior_weight`` = 1 (again on 1,062-1,100
training problems with the ranking forest: ``cv-session37.md``, which also measured the alignment
term). Model files written before session 37 have no alignment columns: they load with
``alignment_weight`` 0, ranking as they always did.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from torch_diode.features import FEATURE_SPEC, N_PROBLEM_FEATURES, operands_aligned16, output_aligned16
from torch_diode.records import BATCHED_OPS, BIAS_OPS, OPS, Problem

#: What identifies a choice in the memory: feature columns (``FEATURE_SPEC`` names), then
#: ``aten_op`` (1 + the problem's index in ``OPS`` for an ATen choice, 0 otherwise).
SIGNATURE: tuple[str, ...] = (
    "kind_aten",
    "kind_triton_other",
    "kind_other",
    "aten_bias_epilogue",
    "log2_block_m",
    "log2_block_n",
    "log2_block_k",
    "log2_group_m",
    "num_stages",
    "log2_num_warps",
    "fast_accum",
    "log2_k_split",
    "aten_op",
)
_SIG_COLS = np.array([FEATURE_SPEC.names.index(n) - N_PROBLEM_FEATURES for n in SIGNATURE[:-1]], dtype=np.intp)
_ATEN_COL = FEATURE_SPEC.names.index("kind_aten") - N_PROBLEM_FEATURES
#: Per-problem descriptor columns: log2 M, N, K, batch, dtype code, A row-major, B row-major, bias,
#: batched, A's, B's and the output's rows 16-byte aligned.
PROBLEM_COLUMNS: tuple[str, ...] = (
    "log2_m",
    "log2_n",
    "log2_k",
    "log2_batch",
    "dtype",
    "a_row",
    "b_row",
    "bias",
    "batched",
    "a_aligned16",
    "b_aligned16",
    "c_aligned16",
)
#: The descriptor of memories written before session 37 (no alignment columns; they load with
#: ``alignment_weight`` 0).
_LEGACY_COLUMNS = PROBLEM_COLUMNS[:9]
# Stored in model files: append only. fp16 and bf16 must stay 0 and 1 (``neighbours``' half-precision test).
_DTYPE_CODE = {
    d: float(i)
    for i, d in enumerate(
        ("float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2", "int8", "int32")
    )
}
_OTHER_DTYPE = 99.0  # a dtype added to records later: unlike every one above
CAP = 3.0  # a neighbour's vote for one choice is at most e^3 ~ 20x slower than its best


@dataclass(frozen=True)
class NeighbourOptions:
    """``k`` nearest training problems vote (0: no memory); see the module docstring."""

    k: int = 8
    bandwidth: float = 3.0
    prior_weight: float = 1.0
    alignment_weight: float = 4.0

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 0:
            raise ValueError(f"neighbours: must be an integer >= 0 (0 turns the memory off), got {self.k!r}")
        for name in ("bandwidth", "prior_weight"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"neighbour {name}: must be a positive number, got {v!r}")
        v = self.alignment_weight
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"neighbour alignment_weight: must be a number >= 0 (0: alignment ignored), got {v!r}")


def problem_row(p: Problem) -> list[float]:
    """The descriptor of ``p`` (``PROBLEM_COLUMNS``)."""
    code = _DTYPE_CODE.get(p.dtype, _OTHER_DTYPE)
    return [
        math.log2(p.m),
        math.log2(p.n),
        math.log2(p.k),
        math.log2(p.batch),
        code,
        float(p.stride_a[-1] == 1),
        float(p.stride_b[-1] == 1),
        float(p.op in BIAS_OPS),
        float(p.op in BATCHED_OPS),
        *(float(v) for v in operands_aligned16(p)),
        float(output_aligned16(p)),
    ]


def signatures(problem: Problem, x_rest: np.ndarray) -> np.ndarray:
    """``[N, len(SIGNATURE)]`` float32 signatures of the choices whose non-problem feature columns
    (``featurize_split``) are ``x_rest``."""
    sig = np.empty((len(x_rest), len(SIGNATURE)), dtype=np.float32)
    sig[:, :-1] = x_rest[:, _SIG_COLS]
    op = float(OPS.index(problem.op) + 1) if problem.op in OPS else float(len(OPS) + 1)
    sig[:, -1] = np.where(x_rest[:, _ATEN_COL] > 0, op, 0.0)
    return sig


def _hash_rows(sig: np.ndarray) -> np.ndarray:
    """A 64-bit hash per row of a float32 signature matrix ``[N, S]`` (matches are then verified)."""
    u = np.ascontiguousarray(sig, dtype=np.float32).view(np.uint32).astype(np.uint64)  # [N, S]
    h = np.full(len(u), 1469598103934665603, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(u.shape[1]):
            h = (h ^ u[:, j]) * np.uint64(1099511628211)
    return h


class NeighbourMemory:
    """The training problems' relative times, and the blend of :mod:`torch_diode.neighbours`.

    Attributes:
        problems: ``[P, 12]`` float32 descriptors (``PROBLEM_COLUMNS``; ``[P, 9]``, without the
            alignment columns, in a memory of a file written before session 37).
        configs: ``[C, len(SIGNATURE)]`` float32 configuration signatures.
        rel: ``[P, C]`` float32, ``log t - log t_best`` of the problem, NaN where not measured.
        options: ``k``, ``bandwidth``, ``prior_weight``, ``alignment_weight``.
        aligned: whether ``problems`` has the alignment columns (the alignment term applies).
    """

    def __init__(self, problems: np.ndarray, configs: np.ndarray, rel: np.ndarray, options: NeighbourOptions) -> None:
        self.problems = np.ascontiguousarray(problems, dtype=np.float32)
        if self.problems.ndim != 2 or self.problems.shape[1] not in (len(_LEGACY_COLUMNS), len(PROBLEM_COLUMNS)):
            raise ValueError(
                f"neighbour memory: problem table of shape {self.problems.shape}, not [P, {len(PROBLEM_COLUMNS)}]"
            )
        # A memory of a file written before session 37 has no alignment columns (and keeps none
        # when saved again, so the file's bytes stay the same); the alignment term is then off.
        self.aligned = self.problems.shape[1] == len(PROBLEM_COLUMNS)
        self.configs = np.ascontiguousarray(configs, dtype=np.float32)
        self.rel = np.ascontiguousarray(rel, dtype=np.float32)
        self.options = options
        # For the blend: capped votes and 1/0 "measured" weights, with an all-zero last column
        # that choices unknown to the memory point at.
        pad = np.zeros((len(self.rel), 1), dtype=np.float32)
        have = ~np.isnan(self.rel)
        self._votes = np.hstack([np.where(have, np.minimum(self.rel, CAP), 0.0).astype(np.float32), pad])
        self._have = np.hstack([have.astype(np.float32), pad])
        # Per problem op (an ATen choice's signature has it), choice-table row
        # (features.featurize_split_indexed) -> column; -2: not looked up yet.
        self._lock = threading.Lock()
        self._col_of_row: dict[str, np.ndarray] = {}
        self._generation = -1
        h = _hash_rows(self.configs)
        self._order = np.argsort(h, kind="stable")
        self._sorted_hash = h[self._order]
        if len(np.unique(h)) != len(h):
            raise ValueError("neighbour memory: two configurations share a signature hash (duplicate configs?)")

    # -- building -------------------------------------------------------------------------------
    @classmethod
    def from_measurements(
        cls, measured: Iterable[tuple[Problem, np.ndarray, np.ndarray]], options: NeighbourOptions
    ) -> NeighbourMemory:
        """The memory of problems given as ``(problem, x_rest [N, F - N_PROBLEM_FEATURES], log
        time [N])``: the non-problem feature columns of its measured choices (``featurize_split``)
        and their log times. The trainer passes the rows it has already featurized."""
        rows: list[list[float]] = []
        entries: list[tuple[np.ndarray, np.ndarray]] = []  # per problem: config signatures, rel
        for problem, x_rest, log_t in measured:
            entries.append((signatures(problem, x_rest), (log_t - log_t.min()).astype(np.float32)))
            rows.append(problem_row(problem))
        sigs = np.concatenate([e[0] for e in entries]) if entries else np.zeros((0, len(SIGNATURE)), np.float32)
        configs, inverse = np.unique(sigs, axis=0, return_inverse=True)
        rel = np.full((len(rows), len(configs)), np.nan, dtype=np.float32)
        off = 0
        for p, (sig, r) in enumerate(entries):
            cols = inverse.reshape(-1)[off : off + len(sig)]
            off += len(sig)
            # Two choices with one signature in a problem (not seen in practice): the faster votes.
            cur = rel[p, cols]
            rel[p, cols] = np.where(np.isnan(cur), r, np.fmin(cur, r))
        return cls(np.array(rows, dtype=np.float32).reshape(-1, len(PROBLEM_COLUMNS)), configs, rel, options)

    def select(self, rows: Sequence[int] | np.ndarray) -> NeighbourMemory:
        """The memory of the training problems ``rows`` only (the same configuration columns)."""
        rows = np.asarray(rows, dtype=np.intp)
        return NeighbourMemory(self.problems[rows], self.configs, self.rel[rows], self.options)

    # -- serialisation (model file) ---------------------------------------------------------------
    def to_tensors(self) -> dict[str, np.ndarray]:
        """The memory as arrays for the model file: the measured entries of ``rel`` in coordinate form."""
        if self.rel.size >= 2**31:
            raise ValueError(f"neighbour memory of {self.rel.shape} entries is too large for int32 indices")
        p_idx, c_idx = np.nonzero(~np.isnan(self.rel))
        return {
            "memory.problems": self.problems,
            "memory.configs": self.configs,
            "memory.rel_flat": (p_idx.astype(np.int64) * self.rel.shape[1] + c_idx).astype(np.int32),
            "memory.rel_value": self.rel[p_idx, c_idx],
        }

    def metadata(self) -> dict[str, Any]:
        return {
            "k": self.options.k,
            "bandwidth": self.options.bandwidth,
            "prior_weight": self.options.prior_weight,
            **({"alignment_weight": self.options.alignment_weight} if self.aligned else {}),
            "cap": CAP,
            "problems": int(self.rel.shape[0]),
            "configs": int(self.rel.shape[1]),
            "signature": list(SIGNATURE),
            "problem_columns": list(PROBLEM_COLUMNS[: self.problems.shape[1]]),
        }

    @classmethod
    def from_tensors(cls, tensors: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> NeighbourMemory:
        """Rebuild from :meth:`to_tensors` and :meth:`metadata`; ``ValueError`` says what does not fit."""
        if not isinstance(meta, Mapping):
            raise ValueError(f"its metadata is {type(meta).__name__}, not an object")
        columns = list(meta.get("problem_columns", ()))
        legacy = columns == list(_LEGACY_COLUMNS)
        if list(meta.get("signature", ())) != list(SIGNATURE) or not (legacy or columns == list(PROBLEM_COLUMNS)):
            raise ValueError("its signature or problem columns differ from this torch-diode's; retrain the model")
        if meta.get("cap") != CAP:
            raise ValueError(f"its cap {meta.get('cap')!r} is not this torch-diode's {CAP}; retrain the model")
        if legacy == ("alignment_weight" in meta):
            raise ValueError("its alignment_weight does not fit its problem columns")
        options = NeighbourOptions(
            k=meta["k"],
            bandwidth=meta["bandwidth"],
            prior_weight=meta["prior_weight"],
            alignment_weight=0.0 if legacy else meta["alignment_weight"],
        )
        expected = {"memory.problems", "memory.configs", "memory.rel_flat", "memory.rel_value"}
        if set(tensors) != expected:
            raise ValueError(f"tensors {sorted(set(tensors) ^ expected)} missing or unexpected")
        problems, configs = tensors["memory.problems"], tensors["memory.configs"]
        flat, value = tensors["memory.rel_flat"], tensors["memory.rel_value"]
        n_p, n_c = meta["problems"], meta["configs"]
        if problems.shape != (n_p, len(columns)) or configs.shape != (n_c, len(SIGNATURE)):
            raise ValueError(f"problem/config tables are {problems.shape}/{configs.shape}, not ({n_p}, ..)/({n_c}, ..)")
        if flat.ndim != 1 or flat.shape != value.shape:
            raise ValueError("rel_flat and rel_value are not two vectors of one length")
        if len(flat) and (flat.min() < 0 or int(flat.max()) >= n_p * n_c):
            raise ValueError("rel_flat holds an index out of range")
        if len(value) and not (value.min() >= 0):
            raise ValueError("rel_value holds a negative relative time")
        rel = np.full(n_p * n_c, np.nan, dtype=np.float32)
        rel[flat.astype(np.int64)] = value
        # every value is a number (checked above), so fewer filled entries than indices means an
        # index given twice (O(n): np.unique on the indices took most of a model file's load time)
        if np.count_nonzero(~np.isnan(rel)) != len(flat):
            raise ValueError("rel_flat holds an index twice")
        return cls(problems, configs, rel.reshape(n_p, n_c), options)

    # -- prediction ------------------------------------------------------------------------------
    def columns(self, problem: Problem, x_rest: np.ndarray) -> np.ndarray:
        """The memory column of each choice of ``problem`` (``-1``: no training problem measured
        it), from its non-problem feature columns ``x_rest [N, F - N_PROBLEM_FEATURES]``
        (``featurize_split``)."""
        sig = signatures(problem, x_rest)
        if len(self._sorted_hash) == 0:
            return np.full(len(sig), -1, dtype=np.intp)
        h = _hash_rows(sig)
        pos = np.searchsorted(self._sorted_hash, h).clip(0, len(self._sorted_hash) - 1)
        col = self._order[pos]
        ok = (self._sorted_hash[pos] == h) & (self.configs[col] == sig).all(axis=1)
        return np.where(ok, col, -1)

    def columns_indexed(self, problem: Problem, x_rest: np.ndarray, index: tuple[np.ndarray, int]) -> np.ndarray:
        """:meth:`columns`, cached by problem op and choice-table row (``index`` from
        ``features.featurize_split_indexed``): each choice is looked up once per op and process."""
        idx, generation = index
        with self._lock:
            if generation != self._generation:
                self._col_of_row.clear()
                self._generation = generation
            table = self._col_of_row.get(problem.op, np.zeros(0, dtype=np.intp))
            if len(idx) and idx.max() >= len(table):
                grow = max(int(idx.max()) + 1, 2 * len(table))
                table = np.concatenate([table, np.full(grow - len(table), -2, dtype=np.intp)])
                self._col_of_row[problem.op] = table
            cols = table[idx]  # (a copy)
            todo = cols == -2
            if todo.any():
                cols[todo] = table[idx[todo]] = self.columns(problem, x_rest[todo])
            return cols

    def neighbours(self, problem: Problem) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest training problems (memory rows) and their weights."""
        q = np.asarray(problem_row(problem), dtype=np.float32)
        mem = self.problems
        d = mem[:, :4] - q[:4]
        d2 = (d * d).sum(axis=1)
        same_dtype = mem[:, 4] == q[4]
        half = (mem[:, 4] <= 1.0) & (q[4] <= 1.0)  # fp16 and bf16 (codes 0 and 1)
        d2 += np.where(same_dtype, 0.0, np.where(half, 1.0, 4.0))
        d2 += 0.5 * (mem[:, 5] != q[5]) + 0.5 * (mem[:, 6] != q[6])
        d2 += 0.3 * (mem[:, 7] != q[7]) + 0.3 * (mem[:, 8] != q[8])
        if self.aligned and self.options.alignment_weight:
            d2 += self.options.alignment_weight * (
                (mem[:, 9] != q[9]).astype(np.float32) + (mem[:, 10] != q[10]) + (mem[:, 11] != q[11])
            )
        k = min(self.options.k, len(d2))
        nb = np.argpartition(d2, k - 1)[:k] if k < len(d2) else np.arange(len(d2))
        return nb, np.exp(-d2[nb] / self.options.bandwidth**2).astype(np.float32)

    def blend(
        self,
        problem: Problem,
        x_rest: np.ndarray,
        log_t: np.ndarray,
        index: tuple[np.ndarray, int] | None = None,
    ) -> np.ndarray:
        """The network's ``log_t [N]`` for the choices whose features are ``x_rest``, reordered by
        the neighbours' votes (module docstring). ``index``: the choices' rows from
        ``features.featurize_split_indexed``, to look each choice up once. Returns float32 ``[N]``."""
        if len(log_t) == 0 or self.options.k == 0 or len(self.problems) == 0:
            return log_t
        nb, w = self.neighbours(problem)
        cols = self.columns(problem, x_rest) if index is None else self.columns_indexed(problem, x_rest, index)
        cols = np.where(cols < 0, self.rel.shape[1], cols)  # the all-zero column
        num = (w @ self._votes[nb])[cols]  # the k rows summed first ([C + 1]), then read per choice
        den = (w @ self._have[nb])[cols]
        base = log_t.min()
        prior = self.options.prior_weight
        return ((num + prior * (log_t - base)) / (den + prior) + base).astype(np.float32)
