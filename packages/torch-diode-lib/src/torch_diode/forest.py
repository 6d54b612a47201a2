"""A ranking forest: boosted oblivious trees that re-rank the network's shortlist.

The ensemble MLP (:mod:`torch_diode.model`) predicts every candidate's log time; on grouped
cross-validation and on the held-out sets, a LambdaRank gradient-boosted forest over the same
features ranks a problem's fast choices better, and a 50/50 blend of the two ranks better than
either (``benchmarks/models/cv-session22.md``). The forest is sized for the compile path: its
trees are *oblivious* (every node of one level tests the same feature against the same
threshold), so a tree is ``depth`` comparisons and one table lookup per candidate, vectorised
over candidates, and it scores only the network's ``shortlist`` best candidates (512 by default:
in those runs, blending over the network's 512 best gave the same figures as blending over every
candidate, while 384 or fewer brought back a 17.98x miss on the H100's validation set).

Training (:meth:`RankingForest.fit`) is LambdaRank (Burges, "From RankNet to LambdaRank to
LambdaMART: An Overview", MSR-TR-2010-82) with Newton leaf values: per problem, every pair (i, j)
with i among the ``top`` choices the current forest ranks first and j ranked below it is pushed
towards the measured order with weight |delta NDCG|, the change in NDCG that swapping them would
make. A choice's gain is ``2**label - 1`` with ``label = max(0, levels - ceil(log(t / t_best) /
step))``: each ``step`` (3%) slower than the problem's best halves its gain, so the top of the
order is what is learnt. Features are binned once (at most ``max_bins`` - 1 thresholds per
column, quantiles of the training rows); each level of a tree takes the (feature, threshold) with
the largest Newton gain summed over that level's leaves. Rows are sampled by problem
(``row_fraction``) and columns per tree (``feature_fraction``) from a seeded generator: the same
rows, options and seed give the same forest, bit for bit.

Blending (:meth:`RankingForest.rerank`): over the shortlist, the network's predicted log times
``p`` and the forest's scores ``s`` are each standardised (z-scores) and combined as
``(1 - blend) * z(p) + blend * z(-s)``; the shortlist is put in that order and the k-th of it
gets the network's k-th lowest prediction. The values are the network's, only their order
changes, so what the choices handler reads from their spacing (its ``performance_threshold``) is
what it was calibrated on: with the z-scores mapped back onto ``p``'s mean and spread instead, the
fastest of what the handler keeps at top-3 got worse than the network's alone (validation H100
1.0248 against 1.0227), with this mapping it is 1.0221 (``cv-session22.md``). Candidates outside
the shortlist keep the network's prediction; the uncertainty stays the network's.

In a model file the forest is three tensors, ``forest.features`` (int32 ``[T, D]``, feature
columns of ``FEATURE_SPEC``), ``forest.thresholds`` (float32 ``[T, D]``: a candidate goes right,
bit 1, where its feature is greater) and ``forest.leaves`` (float32 ``[T, 2**D]``, indexed by the
level bits, level 0 the most significant), and its options in the ``forest`` metadata.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import numpy as np
import torch

from torch_diode._text import plural
from torch_diode.features import FEATURE_SPEC, N_PROBLEM_FEATURES

_PREFIX = "forest."
#: Tree depth limit: a candidate's leaf index is built in one uint8 per tree.
MAX_DEPTH = 8
#: Splits gathered and compared per block when scoring.
_SPLIT_BLOCK = 256


@dataclass(frozen=True, kw_only=True)
class ForestOptions:
    """Options of :class:`RankingForest` (the trainer's ``forest_*`` options set the first five).

    Attributes:
        trees: boosting rounds (one oblivious tree each).
        depth: levels per tree (``2**depth`` leaves), at most :data:`MAX_DEPTH`.
        learning_rate: shrinkage of each tree's Newton leaf values.
        blend: weight of the forest in :meth:`RankingForest.rerank` (0: the network alone, 1: the
            forest alone within the shortlist).
        shortlist: how many of the network's best candidates the forest re-ranks.
        l2: L2 regularisation of the leaf values (added to the summed hessians).
        max_bins: at most ``max_bins - 1`` thresholds per feature column.
        top: LambdaRank truncation: pairs need one member among the problem's ``top`` by score.
        step: relevance step in natural-log time (0.03: 3% slower than the best, one label less).
        levels: labels run from ``levels`` (the best) down to 0.
        row_fraction: share of problems each tree is grown on.
        feature_fraction: share of feature columns each tree may split on.
    """

    trees: int = 192
    depth: int = 6
    learning_rate: float = 0.22
    blend: float = 0.5
    shortlist: int = 512
    l2: float = 1.0
    max_bins: int = 64
    top: int = 30
    step: float = 0.03
    levels: int = 30
    row_fraction: float = 0.8
    feature_fraction: float = 0.9

    def __post_init__(self) -> None:
        for name in ("trees", "depth", "shortlist", "max_bins", "top", "levels"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"forest {name}: must be a positive integer, got {v!r}")
        if self.depth > MAX_DEPTH:
            raise ValueError(f"forest depth: at most {MAX_DEPTH}, got {self.depth}")
        if not 2 <= self.max_bins <= 256:
            raise ValueError(f"forest max_bins: must be in [2, 256], got {self.max_bins}")
        for name in ("learning_rate", "step"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"forest {name}: must be a positive number, got {v!r}")
        if isinstance(self.l2, bool) or not isinstance(self.l2, (int, float)) or not self.l2 >= 0:
            raise ValueError(f"forest l2: must be a non-negative number, got {self.l2!r}")
        for name in ("blend", "row_fraction", "feature_fraction"):
            v = getattr(self, name)
            lo_ok = v >= 0 if name == "blend" else v > 0
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (lo_ok and v <= 1):
                raise ValueError(f"forest {name}: must be in {'[0' if name == 'blend' else '(0'}, 1], got {v!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ForestOptions:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown forest options {unknown}")
        return cls(**dict(d))


class RankingForest:
    """Boosted oblivious trees scoring candidates (higher: predicted faster); see the module docstring."""

    def __init__(
        self, features: np.ndarray, thresholds: np.ndarray, leaves: np.ndarray, options: ForestOptions
    ) -> None:
        features = np.asarray(features)
        thresholds = np.asarray(thresholds)
        leaves = np.asarray(leaves)
        t, d = options.trees, options.depth
        if features.shape != (t, d) or thresholds.shape != (t, d) or leaves.shape != (t, 2**d):
            raise ValueError(
                f"tables of shapes {features.shape}, {thresholds.shape}, {leaves.shape} do not fit {plural(t, 'tree')} of depth {d}"
            )
        if not np.issubdtype(features.dtype, np.integer) or features.min() < 0 or features.max() >= len(FEATURE_SPEC):
            raise ValueError(f"split features must be feature columns in [0, {len(FEATURE_SPEC)})")
        if not (np.isfinite(thresholds).all() and np.isfinite(leaves).all()):
            raise ValueError("thresholds and leaf values must be finite")
        self.options = options
        self.features = np.ascontiguousarray(features, dtype=np.int32)
        self.thresholds = np.ascontiguousarray(thresholds, dtype=np.float32)
        self.leaves = np.ascontiguousarray(leaves, dtype=np.float32)
        # Scoring layout: splits level-major (row l * T + t). A split on a problem column (equal on
        # every candidate of a call) reads row ``R`` of the candidates' columns, a row of -inf that
        # never goes right; the problem's own bits are added to each tree's leaf offset instead.
        f_lm, t_lm = self.features.T.reshape(-1), self.thresholds.T.reshape(-1)
        s, r = N_PROBLEM_FEATURES, len(FEATURE_SPEC) - N_PROBLEM_FEATURES
        prob = f_lm < s
        # Trees share splits (on 1,000 training problems 192 trees of depth 6 make 281-292 distinct
        # ones of 1,152): each distinct (column, threshold) is compared once per candidate, and
        # ``_split_of`` maps every split of the trees to its row among them.
        pairs = np.stack([np.where(prob, r, f_lm - s).astype(np.float64), np.where(prob, 0.0, t_lm)], axis=1)
        distinct, self._split_of = np.unique(pairs, axis=0, return_inverse=True)
        self._split_of = self._split_of.reshape(-1).astype(np.intp)
        self._split_feature = distinct[:, 0].astype(np.intp)
        self._split_threshold = distinct[:, 1].astype(np.float32)[:, None]
        self._prob_feature, self._prob_threshold = f_lm[prob].astype(np.intp), t_lm[prob]
        self._prob_tree = np.flatnonzero(prob) % t  # the tree of each problem split
        self._prob_weight = (1 << (d - 1 - np.flatnonzero(prob) // t)).astype(np.float64)  # its level's bit
        self._flat_leaves = self.leaves.reshape(-1)
        # uint16 leaf indices where they fit (2x cheaper to build and gather than intp)
        self._index_dtype = np.uint16 if t * 2**d <= 2**16 else np.intp
        self._offsets = (np.arange(t) * (2**d)).astype(self._index_dtype)[:, None]
        self._level_weights = (1 << np.arange(d - 1, -1, -1)).astype(np.uint8)

    # -- scoring ------------------------------------------------------------------------------------
    def score_split(self, x_shared: np.ndarray, x_rest: np.ndarray) -> np.ndarray:
        """Scores ``[N]`` (float32, higher: faster) of one problem's candidates from
        ``features.featurize_split``'s parts: ``x_shared [S]`` and ``x_rest [N, F - S]``."""
        n, r = x_rest.shape
        t, d = self.options.trees, self.options.depth
        cols = np.empty((r + 1, n), dtype=np.float32)  # the candidates' columns, then a row of -inf
        cols[:r] = x_rest.T
        cols[r] = -np.inf
        # the distinct splits' bits, gathered and compared in blocks that stay in the CPU's cache
        feature, threshold = self._split_feature, self._split_threshold
        distinct = np.empty((len(feature), n), dtype=bool)
        for i in range(0, len(feature), _SPLIT_BLOCK):
            j = i + _SPLIT_BLOCK
            np.greater(np.take(cols, feature[i:j], axis=0), threshold[i:j], out=distinct[i:j])
        bits = np.take(distinct, self._split_of, axis=0)  # [D*T, N], level-major
        # each tree's leaf offset plus the bits of its splits on problem columns
        prob_bits = x_shared[self._prob_feature] > self._prob_threshold
        prob_code = np.bincount(self._prob_tree, prob_bits * self._prob_weight, minlength=t)  # [T]
        offsets = self._offsets + prob_code.astype(self._index_dtype)[:, None]
        # [T, N] leaf index, level 0 the most significant bit (uint8 sums: at most 2**8 - 1)
        code = np.einsum("dtn,d->tn", bits.reshape(d, t, n).view(np.uint8), self._level_weights)
        # every index is in range by construction: "clip" skips take's bounds check
        return np.take(self._flat_leaves, code + offsets, mode="clip").sum(axis=0)

    def score(self, x: np.ndarray) -> np.ndarray:
        """Scores ``[N]`` of rows ``x [N, F]`` computed by ``features.featurize`` (any problems)."""
        return oblivious_scores(x, self.features, self.thresholds, self.leaves)

    def rerank(self, log_t: np.ndarray, x_shared: np.ndarray, x_rest: np.ndarray) -> np.ndarray:
        """``log_t [N]`` (the network's predicted log times of one problem's candidates, features
        ``x_shared``/``x_rest``) with the shortlist put in the blended order, each position keeping
        the network's value for it (module docstring). Returns float32 ``[N]``."""
        n = len(log_t)
        if n < 2 or self.options.blend == 0.0:
            return log_t
        m = self.options.shortlist
        short = np.argpartition(log_t, m - 1)[:m] if n > m else np.arange(n)
        p = np.asarray(log_t[short], dtype=np.float32)
        sc = self.score_split(x_shared, x_rest[short])
        p_sorted = np.sort(p)
        # statistics over sorted values: the same candidates in another order give the same bits
        p_mean, p_std = _mean_std(p_sorted)
        s_mean, s_std = _mean_std(np.sort(sc))
        blend = self.options.blend
        z = np.zeros(len(p), dtype=np.float32)  # the blend, lower first: (1 - b) z(p) + b z(-s)
        if p_std > 0:
            z += (p - np.float32(p_mean)) * np.float32((1.0 - blend) / p_std)
        if s_std > 0:
            z += (np.float32(s_mean) - sc) * np.float32(blend / s_std)
        out = np.array(log_t, dtype=np.float32)
        out[short[np.argsort(z, kind="stable")]] = p_sorted
        return out

    # -- serialisation ------------------------------------------------------------------------------
    def to_tensors(self) -> dict[str, np.ndarray]:
        return {
            f"{_PREFIX}features": self.features,
            f"{_PREFIX}thresholds": self.thresholds,
            f"{_PREFIX}leaves": self.leaves,
        }

    def metadata(self) -> dict[str, Any]:
        return {"options": self.options.to_dict()}

    @classmethod
    def from_tensors(cls, tensors: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> RankingForest:
        """Rebuild from :meth:`to_tensors` and :meth:`metadata`; ``ValueError`` says what does not fit."""
        if not isinstance(meta, Mapping) or not isinstance(meta.get("options"), Mapping):
            raise ValueError("its metadata has no options object")
        expected = {f"{_PREFIX}{k}" for k in ("features", "thresholds", "leaves")}
        if set(tensors) != expected:
            raise ValueError(f"tensors {sorted(set(tensors) ^ expected)} missing or unexpected")
        options = ForestOptions.from_dict(meta["options"])
        return cls(tensors[f"{_PREFIX}features"], tensors[f"{_PREFIX}thresholds"], tensors[f"{_PREFIX}leaves"], options)

    # -- training -----------------------------------------------------------------------------------
    @classmethod
    def fit(
        cls,
        x: np.ndarray,
        log_t: np.ndarray,
        counts: np.ndarray,
        options: ForestOptions,
        seed: int,
        start: RankingForest | None = None,
    ) -> RankingForest:
        """Boost a forest on the rows ``x [R, F]`` (``featurize``) with measured ``log_t [R]``
        (natural log), grouped by problem: ``counts [P]`` consecutive rows each.

        ``start``: a forest to continue (e.g. another GPU's: ``TrainOptions.init_forest``). Its
        trees are kept as they are and ``options.trees`` more are boosted from its scores of the
        rows (``boost``'s ``init``: they learn corrections to its order); the result has both,
        ``start``'s first, and ``options`` with ``trees`` their sum. Its depth must be
        ``options.depth``."""
        x = np.asarray(x, dtype=np.float32)
        counts = np.asarray(counts, dtype=np.int64)
        if x.ndim != 2 or x.shape[1] != len(FEATURE_SPEC) or len(log_t) != len(x) or counts.sum() != len(x):
            raise ValueError(f"forest: x {x.shape}, log_t {np.shape(log_t)} and counts (sum {counts.sum()}) disagree")
        if len(counts) == 0 or counts.min() < 1:
            raise ValueError("forest: needs at least one problem, each with at least one row")
        if start is None:
            return cls(*boost(x, log_t, counts, options, seed), options)
        if start.options.depth != options.depth:
            raise ValueError(f"forest: the start forest's trees are {start.options.depth} deep, not {options.depth}")
        init = oblivious_scores(x, start.features, start.thresholds, start.leaves).astype(np.float64)
        feats, thrs, leaves = boost(x, log_t, counts, options, seed, init=init)
        return cls(
            np.concatenate([start.features, feats]),
            np.concatenate([start.thresholds, thrs]),
            np.concatenate([start.leaves, leaves]),
            replace(options, trees=start.options.trees + options.trees),
        )


def boost(
    x: np.ndarray,
    log_t: np.ndarray,
    counts: np.ndarray,
    options: ForestOptions,
    seed: int,
    init: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The boosting of :meth:`RankingForest.fit` (module docstring) on rows ``x [R, C]`` of any
    ``C`` columns: the split features ``[T, D]`` (columns of ``x``), thresholds ``[T, D]`` and leaf
    values ``[T, 2**D]``. ``fit`` checks the rows against ``FEATURE_SPEC`` first; a study can boost
    on more columns and score with :func:`oblivious_scores`. ``init [R]``: the rows' scores before
    the first tree (higher ranks first; default 0), so that the trees learn corrections to another
    model's order (a base margin) instead of an order of their own."""
    x = np.asarray(x, dtype=np.float32)
    counts = np.asarray(counts, dtype=np.int64)
    if init is not None and np.shape(init) != (len(x),):
        raise ValueError(f"forest: init {np.shape(init)} does not match {plural(len(x), 'row')}")
    o = options
    rng = np.random.default_rng(seed)
    group, gains = relevance_gains(log_t, counts, o)
    borders = _borders(x, o.max_bins)
    binned = _binned(x, borders)  # [F, R] uint8
    splittable = np.flatnonzero([len(b) > 0 for b in borders])
    n_bins = max((len(b) for b in borders), default=0) + 1
    pad = _Padded(counts)
    scores = np.zeros(len(x), dtype=np.float64) if init is None else np.array(init, dtype=np.float64)
    t, d = o.trees, o.depth
    feats = np.zeros((t, d), dtype=np.int32)
    thrs = np.full((t, d), np.finfo(np.float32).max, dtype=np.float32)
    leaves = np.zeros((t, 2**d), dtype=np.float32)
    for tree in range(t):
        grad, hess = pad.lambdas(scores, gains, o.top)
        rows = (rng.random(len(counts)) < o.row_fraction)[group]
        cols = splittable[rng.random(len(splittable)) < o.feature_fraction]
        if len(cols) == 0:
            cols = splittable
        split_bins = np.full(d, 255, dtype=np.int64)  # no bin exceeds 255: an unsplit level sends all left
        sel = np.flatnonzero(rows)  # the tree is grown on its sampled problems' rows only
        g, h = grad[sel], hess[sel]
        sub = binned[:, sel]  # [F, R_tree]
        leaf = np.zeros(len(sel), dtype=np.int64)
        for level in range(d):
            best_gain, best_f, best_j = -np.inf, -1, -1
            base = leaf * n_bins
            width = (2**level) * n_bins
            for f in cols.tolist():
                k = base + sub[f]
                gh = np.bincount(k, weights=g, minlength=width).reshape(-1, n_bins)  # [L, B]
                hh = np.bincount(k, weights=h, minlength=width).reshape(-1, n_bins)
                gl, hl = np.cumsum(gh, axis=1)[:, :-1], np.cumsum(hh, axis=1)[:, :-1]  # left: bins <= j
                gr, hr = gh.sum(axis=1, keepdims=True) - gl, hh.sum(axis=1, keepdims=True) - hl
                gain = (gl * gl / (hl + o.l2) + gr * gr / (hr + o.l2)).sum(axis=0)[: len(borders[f])]
                j = int(np.argmax(gain))
                if gain[j] > best_gain:
                    best_gain, best_f, best_j = float(gain[j]), f, j
            if best_f < 0:  # nothing to split on: every candidate goes left at this level
                leaf = leaf * 2
                continue
            feats[tree, level] = best_f
            thrs[tree, level] = borders[best_f][best_j]
            split_bins[level] = best_j
            leaf = leaf * 2 + (sub[best_f] > best_j)
        gs = np.bincount(leaf, weights=g, minlength=2**d)
        hs = np.bincount(leaf, weights=h, minlength=2**d)
        values = (-gs / (hs + o.l2) * o.learning_rate).astype(np.float32)
        leaves[tree] = values
        every = np.zeros(len(x), dtype=np.int64)  # every row's leaf, sampled or not
        for level in range(d):
            every = every * 2 + (binned[feats[tree, level]] > split_bins[level])
        scores += values[every]
    return feats, thrs, leaves


def oblivious_scores(x: np.ndarray, features: np.ndarray, thresholds: np.ndarray, leaves: np.ndarray) -> np.ndarray:
    """Scores ``[N]`` of rows ``x [N, C]`` under the oblivious trees ``features``/``thresholds``
    ``[T, D]`` (columns of ``x``) and ``leaves [T, 2**D]`` (:meth:`RankingForest.score`)."""
    x = np.asarray(x, dtype=np.float32)
    t, d = features.shape
    bits = x[:, features.reshape(-1)] > thresholds.reshape(-1)  # [N, T*D]
    weights = (1 << np.arange(d - 1, -1, -1)).astype(np.intp)
    idx = (bits.reshape(len(x), t, d) * weights).sum(axis=2)  # [N, T]
    return leaves[np.arange(t), idx].sum(axis=1, dtype=np.float32)


def relevance_gains(log_t: np.ndarray, counts: np.ndarray, options: ForestOptions) -> tuple[np.ndarray, np.ndarray]:
    """Each row's problem index and LambdaRank gain ``2**label - 1`` (module docstring) from the
    measured ``log_t [R]``, rows grouped by problem in ``counts [P]`` consecutive runs."""
    counts = np.asarray(counts, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    group = np.repeat(np.arange(len(counts)), counts)
    y = np.asarray(log_t, dtype=np.float64)
    rel = y - np.minimum.reduceat(y, starts)[group]
    labels = np.clip(options.levels - np.ceil(rel / options.step - 1e-9), 0, options.levels)
    return group, np.exp2(labels) - 1.0


def _mean_std(v: np.ndarray) -> tuple[float, float]:
    """Mean and (population) standard deviation of a vector, as Python floats: a sum and a dot
    product in float64 instead of ``np.std``'s passes (this runs on the compile path)."""
    w = v.astype(np.float64)
    n = len(w)
    mean = float(w.sum()) / n
    var = float(np.dot(w, w)) / n - mean * mean
    return mean, math.sqrt(var) if var > 1e-12 * max(1.0, mean * mean) else 0.0


def _borders(x: np.ndarray, max_bins: int) -> list[np.ndarray]:
    """Per feature column, its split thresholds (float32, ascending): every distinct value but the
    largest when there are at most ``max_bins`` of them, else ``max_bins - 1`` quantiles."""
    out = []
    for f in range(x.shape[1]):
        u = np.unique(x[:, f])
        if len(u) <= max_bins:
            out.append(u[:-1].astype(np.float32))
        else:
            q = np.quantile(x[:, f], np.linspace(0.0, 1.0, max_bins + 1)[1:-1], method="lower")
            b = np.unique(q.astype(np.float32))
            out.append(b[b < u[-1]])
    return out


def _binned(x: np.ndarray, borders: list[np.ndarray]) -> np.ndarray:
    """``[F, R]`` uint8: how many of its column's thresholds each value exceeds, so that
    ``bin > j`` exactly when ``x > borders[j]``."""
    out = np.empty((x.shape[1], x.shape[0]), dtype=np.uint8)
    for f, b in enumerate(borders):
        out[f] = np.searchsorted(b, x[:, f], side="left")
    return out


class _Padded:
    """Rows grouped by problem, padded to ``[P, C]`` for the vectorised LambdaRank gradients."""

    def __init__(self, counts: np.ndarray) -> None:
        self.c = int(counts.max())
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.mask = np.arange(self.c)[None, :] < counts[:, None]  # [P, C]
        self.idx = np.where(self.mask, starts[:, None] + np.arange(self.c)[None, :], 0)  # [P, C] row index
        self.rows = self.idx[self.mask]  # row of each masked slot, in slot order

    def lambdas(self, scores: np.ndarray, gains: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
        """LambdaRank gradient and hessian of every row (module docstring), sigmoid scale 1.

        Computed in float32 over ``[P, top, C]`` pair tensors (pairs outside the truncation are
        never formed); a problem's padding slots take part in no pair."""
        mask = torch.from_numpy(self.mask)
        p, c = self.mask.shape
        s = torch.from_numpy(np.where(self.mask, scores[self.idx], -np.inf).astype(np.float32))  # [P, C]
        g = torch.from_numpy(np.where(self.mask, gains[self.idx], 0.0).astype(np.float32))
        order = torch.argsort(s, dim=1, descending=True, stable=True)
        rank = torch.empty_like(order).scatter_(1, order, torch.arange(c).expand(p, c))
        disc = 1.0 / torch.log2(2.0 + rank.to(torch.float32))  # [P, C]
        ideal = torch.sort(g, dim=1, descending=True).values
        max_dcg = (ideal / torch.log2(2.0 + torch.arange(c, dtype=torch.float32))).sum(1).clamp_min(1e-30)  # [P]
        it = order[:, : min(top, c)]  # [P, T] the current top by score
        s0 = torch.where(mask, s, 0.0)  # finite everywhere (padding: -inf would make inf - inf)
        s_i, g_i, d_i, r_i = (torch.gather(a, 1, it) for a in (s0, g, disc, rank))
        dg = g_i[:, :, None] - g[:, None, :]  # [P, T, C]
        valid = mask[:, None, :] & torch.gather(mask, 1, it)[:, :, None] & (rank[:, None, :] > r_i[:, :, None])
        sign = torch.sign(dg)
        # |delta NDCG| of swapping i and j (j ranks below i, so d_i > d_j), 0 outside the valid pairs
        delta = dg.abs_().mul_(d_i[:, :, None] - disc[:, None, :]).mul_(valid).div_(max_dcg[:, None, None])
        rho = (s_i[:, :, None] - s0[:, None, :]).mul_(sign).neg_().sigmoid_()  # sigmoid(-(s_hi - s_lo))
        lam = rho * delta  # the better member's score is pushed up by lam, the other's down
        hes = rho.mul_(1.0 - rho).mul_(delta)
        lam.mul_(sign)
        grad = torch.zeros(p, c, dtype=torch.float32)
        hess = torch.zeros(p, c, dtype=torch.float32)
        grad.scatter_add_(1, it, lam.sum(2).neg_())
        grad += lam.sum(1)
        hess.scatter_add_(1, it, hes.sum(2))
        hess += hes.sum(1)
        out_g = np.zeros(len(scores))
        out_h = np.zeros(len(scores))
        out_g[self.rows] = grad.numpy()[self.mask]
        out_h[self.rows] = hess.numpy()[self.mask]
        return out_g, out_h
