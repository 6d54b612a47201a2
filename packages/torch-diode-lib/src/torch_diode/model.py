"""The kernel-time model: an ensemble of MLPs predicting log(time_us) per (problem, choice).

Every choice of a problem, ATen included, gets a predicted ``log(time_us)``; the ensemble's
spread (standard deviation over members, in log space) is the uncertainty. In training the K
members are evaluated together as batched matrix products (weights ``[K, in, out]``); scoring one
problem's candidates runs them one at a time (:meth:`EnsembleMLP.forward_shared`) and, past 128
candidates, as a cascade: the first member scores every candidate, the others its shortlist
(:class:`ScoringOptions`); or, in a model with a ``screen`` (a narrower one-member network,
``TrainOptions.screen_hidden``), the screen scores every candidate and every member its shortlist.

Architectures (``model_type``):

* ``base``: input -> ``hidden`` -> ReLU -> (``depth`` plain ReLU layers) -> 1;
* ``deep``: input -> ``hidden`` -> ReLU -> ``depth`` residual blocks ``h + ReLU(W h + b)`` -> 1.

File format (``format`` = ``torch-diode-model``, ``format_version`` = 6): a safetensors file whose
tensors are the network weights (float32) and, optionally, a neighbour memory (``memory.*``,
:mod:`torch_diode.neighbours`; ``memory.rel_flat`` is int32, every other tensor float32), an
ATen head (``aten_head.*``, float32, :mod:`torch_diode.aten_head`) and a ranking forest
(``forest.*``, :mod:`torch_diode.forest`; ``forest.features`` is int32) and a screening
network (``screen.*``, float32, the network's tensor names under the prefix), and
whose ``__metadata__`` (str -> str, JSON-encoded values) holds the hardware key and figures, the
feature spec, normalisation statistics, architecture, training-data hash, torch/triton versions,
training options and held-out metrics, plus ``tensors_sha256`` over the tensor bytes and
``metadata_sha256`` over the other metadata entries (since session 65; older files have none and
load as before; older torch-diode releases ignore the key), and
``neighbour_memory`` (its options and sizes) when the file has a memory, ``aten_head`` (its
options and input count) when it has a head, ``forest`` (its options) when it has a forest,
``screen`` (``{"architecture": ...}``) when it has a screening network, and
``scoring`` (:class:`ScoringOptions`; a file written before session 48 has none and scores
without the cascade, as it always did; older torch-diode releases ignore the key and score so).
Version 1 files (network only, written before session 9), version 2 files (no ATen head, before
session 13), version 3 files (no forest, before session 22), version 4 files (their memory's
problem descriptor without the operand-alignment columns, before session 37: they rank as they
always did) and version 5 files (no screening network, before session 54) still load; an older
torch-diode refuses a newer version with a message to upgrade, rather than misreading the file.
The header is written with sorted keys so a model always serialises to the same bytes
(``model_hash`` is the sha256 of the file).
:func:`load_model` checks all of it and raises :class:`~torch_diode.errors.ModelFormatError`
otherwise; it never unpickles anything.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as md
import json
import math
import os
import struct
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import numpy as np
import torch
from torch import nn

from torch_diode._text import plural
from torch_diode.errors import ModelFormatError
from torch_diode.features import FEATURE_SPEC, N_PROBLEM_FEATURES, FeatureSpec, GpuConstants, featurize_split_indexed
from torch_diode.hardware import valid_key
from torch_diode.neighbours import NeighbourMemory
from torch_diode.records import Choice, Problem

if TYPE_CHECKING:  # aten_head builds on this module's EnsembleMLP
    from torch_diode.aten_head import AtenHead
    from torch_diode.forest import RankingForest

FORMAT_NAME = "torch-diode-model"
_T = TypeVar("_T")
# 2: optional neighbour memory (memory.* tensors, int32 rel_flat); 3: optional ATen head; 4: optional forest;
# 5: the memory's problem descriptor may have the operand-alignment columns (neighbours.PROBLEM_COLUMNS);
# 6: optional screening network (screen.* tensors, ``screen`` metadata)
FORMAT_VERSION = 6
_READABLE_VERSIONS = ("1", "2", "3", "4", "5", "6")
#: The only int32 tensors of a model file; every other one is float32.
_INT32_TENSORS = frozenset({"memory.rel_flat", "forest.features"})
MODEL_TYPES: tuple[str, ...] = ("base", "deep")
#: Column of ``kind_aten`` in the per-choice part of the features (``featurize_split``).
_KIND_ATEN = FEATURE_SPEC.names.index("kind_aten") - N_PROBLEM_FEATURES
#: Default architecture per model type (``hidden``, ``depth``). Sized for the compile path: with a
#: 4-member ensemble, featurizing and scoring 1,500 candidates takes ~1.5 ms of one CPU core, and
#: 1.6-1.9 ms with a 365-problem neighbour memory (scripts/bench_scoring.py, session 9); the
#: network forward is ~1 ms of that. On session 12's CPU (an AMD EPYC core) the same is 2.0-2.2 ms
#: with a 425-problem memory: at the budget. On CPU, cost grows with
#: members x hidden^2 x depth, so wider or deeper presets break the 2 ms budget. ``deep`` has 2
#: residual blocks since session 31 (3 before): the 192-tree forest takes the third block's share
#: of the budget; with a 128-tree forest, two blocks rank as well as three in cross-validation
#: (regret@1 within 0.1 point on the H100, 0.4 better on the H200: ``benchmarks/models/cv-session31.md``).
ARCH_PRESETS: Mapping[str, Mapping[str, int]] = {
    "base": {"hidden": 48, "depth": 1},
    "deep": {"hidden": 32, "depth": 2},
}
# Metadata stored as plain strings; every other value is JSON.
_PLAIN_META = frozenset({"format", "format_version", "hardware", "tensors_sha256", "metadata_sha256"})
_REQUIRED_META = (
    "format",
    "format_version",
    "hardware",
    "gpu_constants",
    "feature_spec",
    "normalization",
    "architecture",
    "training_data_hash",
    "torch_version",
    "triton_version",
    "held_out_metrics",
    "tensors_sha256",
)


_THREADS_LOCK = threading.RLock()
#: How long :meth:`DiodeModel.predict` waits for another thread's :func:`torch_threads` block.
PREDICT_THREADS_WAIT_S = 0.2


@contextlib.contextmanager
def torch_threads(n: int | None, *, wait_s: float | None = None) -> Iterator[None]:
    """torch's intra-op thread count set to ``n`` inside the block (``None``: unchanged), and
    restored after it. The count is per thread with torch's OpenMP backend and process-wide with
    its native one, so one re-entrant lock serialises the blocks of different threads (nesting in
    one thread is fine): concurrent callers cannot leave the process with another caller's count.
    With ``wait_s`` a block waits at most that long for another thread's block (a training run,
    say) and then runs with the count as it is; ``None`` waits as long as it takes.

    Scoring one problem's candidates runs on one thread (:meth:`DiodeModel.predict`, which waits
    at most :data:`PREDICT_THREADS_WAIT_S` for another thread's block: long enough for another
    thread's prediction, a few ms, not for a training run): it is a few small matrix products,
    and inside ``torch.compile`` the CPU is shared with Inductor's compile workers, where OpenMP
    threads waiting for busy cores made a prediction 3x slower on the 2-core dev machine
    (``scripts/bench_scoring.py --threads 2 --busy 2``: 5.9 ms against 2.0 ms median) and took
    1.6-2.0 s over the 4 GEMMs of a ViT-B/16 block on a 16-core H200 host
    (``benchmarks/results/README.md``; 0.02 s on one thread).
    """
    if n is None or not _THREADS_LOCK.acquire(timeout=-1 if wait_s is None else wait_s):
        yield
        return
    try:
        before = torch.get_num_threads()
        if before != n:
            torch.set_num_threads(n)
        try:
            yield
        finally:
            if torch.get_num_threads() != before:
                torch.set_num_threads(before)
    finally:
        _THREADS_LOCK.release()


@dataclass(frozen=True, kw_only=True)
class Architecture:
    """Shape of the ensemble network."""

    model_type: str
    input_dim: int
    hidden: int
    depth: int
    members: int

    def __post_init__(self) -> None:
        if self.model_type not in MODEL_TYPES:
            raise ValueError(f"model_type: unknown model type {self.model_type!r}; use one of {', '.join(MODEL_TYPES)}")
        for name in ("input_dim", "hidden", "depth", "members"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: must be a positive integer, got {v!r}")

    @property
    def residual(self) -> bool:
        return self.model_type == "deep"

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_type": self.model_type,
            "input_dim": self.input_dim,
            "hidden": self.hidden,
            "depth": self.depth,
            "members": self.members,
            "activation": "relu",
            "residual": self.residual,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Architecture:
        arch = cls(
            model_type=d["model_type"],
            input_dim=d["input_dim"],
            hidden=d["hidden"],
            depth=d["depth"],
            members=d["members"],
        )
        # Written for the reader; a file that records another network than its model type runs is corrupt.
        own = arch.to_dict()
        for key in ("activation", "residual"):
            if key in d and d[key] != own[key]:
                raise ValueError(f"{key} {d[key]!r} is not what a {arch.model_type!r} network has ({own[key]!r})")
        return arch


class EnsembleMLP(nn.Module):
    """K independent MLPs evaluated together. ``forward(x [N, F]) -> [K, N]`` (normalised log time)."""

    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        k, f, h, d = arch.members, arch.input_dim, arch.hidden, arch.depth
        self.arch = arch
        self.w_in = nn.Parameter(torch.empty(k, f, h))
        self.b_in = nn.Parameter(torch.empty(k, 1, h))
        self.w_hidden = nn.Parameter(torch.empty(d, k, h, h))
        self.b_hidden = nn.Parameter(torch.empty(d, k, 1, h))
        self.w_out = nn.Parameter(torch.empty(k, h, 1))
        self.b_out = nn.Parameter(torch.empty(k, 1, 1))

    def reset_parameters(self, generator: torch.Generator) -> None:
        """He-uniform initialisation from ``generator`` (residual branches scaled by 1/sqrt(depth))."""
        a = self.arch

        def uni(t: torch.Tensor, fan_in: int, gain: float) -> None:
            bound = gain * math.sqrt(3.0 / fan_in)
            with torch.no_grad():
                t.copy_(torch.rand(t.shape, generator=generator, dtype=t.dtype) * 2 * bound - bound)

        uni(self.w_in, a.input_dim, math.sqrt(2.0))
        uni(self.w_hidden, a.hidden, math.sqrt(2.0) / (math.sqrt(a.depth) if a.residual else 1.0))
        uni(self.w_out, a.hidden, 1.0)
        with torch.no_grad():
            for b in (self.b_in, self.b_hidden, self.b_out):
                b.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = self.arch.members
        h = torch.relu(torch.baddbmm(self.b_in, x.unsqueeze(0).expand(k, -1, -1), self.w_in))  # [K, N, H]
        return self._tail(h)

    def _tail(self, h: torch.Tensor) -> torch.Tensor:
        for i in range(self.arch.depth):
            z = torch.relu(torch.baddbmm(self.b_hidden[i], h, self.w_hidden[i]))  # [K, N, H]
            h = h + z if self.arch.residual else z
        return torch.baddbmm(self.b_out, h, self.w_out).squeeze(-1)  # [K, N]

    def inference_weights(
        self, shared: int, normalization: Normalization | None = None
    ) -> tuple[tuple[torch.Tensor, ...], ...]:
        """Detached, contiguous weights for :meth:`forward_shared`, one tuple per member: the
        first layer split into its first ``shared`` inputs and the rest, then the hidden layers'
        weights and biases, then the output layer's.

        With ``normalization``, the standardisation of the per-candidate inputs (columns from
        ``shared`` on) and of the output are folded into the first and last layers (computed in
        float64): :meth:`forward_shared` then takes those inputs raw and returns log times,
        saving two passes over the ``[N, F - S]`` candidate matrix and one over the output on
        every call. The shared inputs stay standardised by the caller (one row).
        """
        d = self.arch.depth
        with torch.no_grad():
            out = []
            for k in range(self.arch.members):
                w_sh, w_rest, b_in = self.w_in[k, :shared, :], self.w_in[k, shared:, :], self.b_in[k, 0]
                w_out, b_out = self.w_out[k], self.b_out[k, 0]
                if normalization is not None:
                    mean = torch.from_numpy(normalization.x_mean[shared:].astype(np.float64))
                    inv = torch.from_numpy(1.0 / normalization.x_std[shared:].astype(np.float64))
                    w64 = w_rest.double()
                    b_in = (b_in.double() - (mean * inv) @ w64).float()  # (x - m) / s @ W + b
                    w_rest = (w64 * inv[:, None]).float()
                    y_std, y_mean = float(normalization.y_std), float(normalization.y_mean)
                    w_out = (w_out.double() * y_std).float()  # out * y_std + y_mean
                    b_out = (b_out.double() * y_std + y_mean).float()
                w = [w_sh, w_rest, b_in]
                w += [self.w_hidden[i, k] for i in range(d)] + [self.b_hidden[i, k, 0] for i in range(d)]
                w += [w_out, b_out]
                out.append(tuple(t.detach().contiguous() for t in w))
            return tuple(out)

    def forward_shared(
        self, x_shared: torch.Tensor, x_rest: torch.Tensor, weights: tuple[tuple[torch.Tensor, ...], ...]
    ) -> torch.Tensor:
        """Inference-only ``forward`` for rows that share their first ``S`` features (one problem).

        ``x_shared [S]``, ``x_rest [N, F-S]``, ``weights`` from :meth:`inference_weights`. The shared
        part of the first layer is computed once per member. Members go one at a time through 2-D
        matmuls with in-place activations: a member's activations (``N x H`` floats, ~190 KB for
        1,500 candidates of a 32-wide network) stay in the CPU's L2 cache, and on CPU each torch
        call costs ~5-10 us, so the op count is kept minimal (session 12, an AMD EPYC core: 0.98
        ms for 4 members x 1,500 candidates against 1.14 ms batched over members in row chunks
        of 512). ``weights`` may be a slice of the members' (the cascade of
        :meth:`DiodeModel.predict`). Returns ``[len(weights), N]``.
        """
        d, residual = self.arch.depth, self.arch.residual
        out = torch.empty(len(weights), x_rest.shape[0], dtype=x_rest.dtype)
        for k, w in enumerate(weights):
            w_sh, w_rest, b_in = w[:3]
            w_h, b_h, (w_out, b_out) = w[3 : 3 + d], w[3 + d : 3 + 2 * d], w[3 + 2 * d :]
            h = torch.addmm(torch.addmv(b_in, w_sh.t(), x_shared), x_rest, w_rest).relu_()  # [N, H]
            for i in range(d):
                z = torch.addmm(b_h[i], h, w_h[i]).relu_()  # [N, H]
                h = h.add_(z) if residual else z
            torch.addmm(b_out, h, w_out, out=out[k].unsqueeze(1))  # [N, 1]
        return out


@dataclass(frozen=True)
class ScoringOptions:
    """How :meth:`DiodeModel.predict` runs the network (stored in the ``scoring`` metadata).

    ``network_shortlist``: with more candidates than this, the network runs as a cascade: the
    first member scores every candidate, the other members only its ``network_shortlist`` best
    (the ATen choices always among them: the handler reads their spread), where the mean and
    spread are all members'. Elsewhere the mean is the first member's prediction shifted by the
    mean difference between the ensemble mean and the first member over the shortlist, and the
    spread is the shortlist's mean spread (estimates, for candidates that rank after the
    shortlist). 0: every member scores every candidate, as files written before session 48 (without
    ``scoring`` metadata) do. 128 ranks as the whole ensemble does and scores 1,500 candidates
    about 15% faster (``benchmarks/models/cv-session48.md``). In a model with a screening network
    (``DiodeModel.screen``), the screen takes the first member's place: it scores every
    candidate and every member of the ensemble its shortlist (with 0, or as many candidates as
    the shortlist or fewer, the screen is not used).
    """

    network_shortlist: int = 128

    def __post_init__(self) -> None:
        v = self.network_shortlist
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"network_shortlist: must be an integer >= 0 (0: no cascade), got {v!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"network_shortlist": self.network_shortlist}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScoringOptions:
        if not isinstance(d, Mapping):
            raise TypeError(f"scoring options must be an object, got {type(d).__name__}")
        unknown = set(d) - {"network_shortlist"}
        if unknown:
            raise ValueError(f"unknown scoring options {sorted(unknown)}")
        return cls(**d)


@dataclass(frozen=True)
class Prediction:
    """Predicted ``log(time_us)`` per choice (ensemble mean) and its uncertainty (ensemble std)."""

    log_time_us: np.ndarray  # [N] float32
    std: np.ndarray  # [N] float32, in log space

    @property
    def time_us(self) -> np.ndarray:
        return np.exp(self.log_time_us)


@dataclass(frozen=True)
class Normalization:
    """Feature and target standardisation (float32), fitted on the training rows."""

    x_mean: np.ndarray  # [F]
    x_std: np.ndarray  # [F]
    y_mean: float
    y_std: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "x_mean": [float(v) for v in self.x_mean],
            "x_std": [float(v) for v in self.x_std],
            "y_mean": float(self.y_mean),
            "y_std": float(self.y_std),
            "target": "log(time_us), natural log",
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Normalization:
        with np.errstate(over="ignore"):  # a value past float32's range becomes inf, which loading refuses
            return cls(
                x_mean=np.asarray(d["x_mean"], dtype=np.float32),
                x_std=np.asarray(d["x_std"], dtype=np.float32),
                y_mean=float(np.float32(d["y_mean"])),
                y_std=float(np.float32(d["y_std"])),
            )

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray) -> Normalization:
        mean = x.mean(axis=0, dtype=np.float64)
        std = x.std(axis=0, dtype=np.float64)
        std = np.where(std < 1e-6, 1.0, std)
        return cls(
            x_mean=mean.astype(np.float32),
            x_std=std.astype(np.float32),
            y_mean=float(np.float32(y.mean())),
            y_std=float(np.float32(max(float(y.std()), 1e-6))),
        )


class _Part(Generic[_T]):
    """An optional part of a :class:`DiodeModel` (stored as ``_<name>``): setting it forgets the
    model's cached file bytes and hash."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._attr = "_" + name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> _Part[_T]: ...
    @overload
    def __get__(self, obj: DiodeModel, objtype: type | None = None) -> _T | None: ...
    def __get__(self, obj: DiodeModel | None, objtype: type | None = None) -> _Part[_T] | _T | None:
        return self if obj is None else getattr(obj, self._attr)

    def __set__(self, obj: DiodeModel, value: _T | None) -> None:
        setattr(obj, self._attr, value)
        obj._changed()


_SHAPE_DIGEST = "sha256 of '<op> <dtype> <batch> <m> <n> <k>', first 12 hex digits"
_HEX_DIGITS = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class TrainedShapes:
    """The shapes (:attr:`Problem.shape`: op, sizes, dtype; any layout) of the problems a model
    was trained on, as its file lists them (``training_shapes`` metadata) so that a validation
    set can be checked against them. ``complete`` is False when a file it started from
    (``--init-from``, ``--init-forest-from``) did not list its own."""

    digests: frozenset[str]
    complete: bool

    def __contains__(self, problem: object) -> bool:
        return isinstance(problem, Problem) and problem.shape_digest() in self.digests

    def __len__(self) -> int:
        return len(self.digests)

    def to_dict(self) -> dict[str, Any]:
        return {"digest": _SHAPE_DIGEST, "complete": self.complete, "shapes": sorted(self.digests)}

    @classmethod
    def from_dict(cls, d: Any) -> TrainedShapes:
        """Raises ``ValueError`` saying what does not fit."""
        if not isinstance(d, Mapping) or set(d) != {"digest", "complete", "shapes"}:
            raise ValueError("not an object of digest, complete and shapes")
        if d["digest"] != _SHAPE_DIGEST:
            raise ValueError(f"digest {d['digest']!r}: this torch-diode reads {_SHAPE_DIGEST!r}")
        shapes = d["shapes"]
        if not isinstance(d["complete"], bool) or not isinstance(shapes, list):
            raise ValueError("complete must be true or false and shapes a list")
        bad = [s for s in shapes if not (isinstance(s, str) and len(s) == 12 and set(s) <= _HEX_DIGITS)]
        if bad:
            raise ValueError(f"{plural(len(bad), 'shape')} not 12 lowercase hex digits (e.g. {bad[0]!r})")
        if shapes != sorted(set(shapes)):
            raise ValueError("shapes are not sorted and distinct")
        return cls(frozenset(shapes), d["complete"])


class DiodeModel:
    """A trained kernel-time model for one GPU.

    Attributes:
        hardware: the hardware key it was trained for (``NVIDIA-H100`` ...).
        model_hash: sha256 (hex) of the model file's bytes (of the bytes ``save_model`` writes).
        metadata: the decoded metadata (every value parsed from its JSON string).
        memory: the neighbour memory blended into :meth:`predict` (None: the network alone).
        aten_head: the problem-level ATen-or-Triton model applied in :meth:`predict` after the
            memory (:mod:`torch_diode.aten_head`; None: none).
        forest: the ranking forest that re-ranks the shortlist last in :meth:`predict`
            (:mod:`torch_diode.forest`; None: none).
        screen: a one-member network of the same inputs and normalisation that scores every
            candidate when :meth:`predict` runs the network as a cascade, so that the ensemble
            (wider, slower) scores only its shortlist (:class:`ScoringOptions`; None: the
            ensemble's first member screens).
        scoring: how :meth:`predict` runs the network (:class:`ScoringOptions`; a new model gets
            the defaults, a file without ``scoring`` metadata, written before session 48, no
            cascade, as it was validated).
        trained_shapes: the shapes of its training problems (:class:`TrainedShapes`; None: the
            file does not list them, as files written before session 83 do not).
    """

    def __init__(
        self,
        net: EnsembleMLP,
        *,
        hardware: str,
        gpu: GpuConstants,
        normalization: Normalization,
        metadata: Mapping[str, Any],
        memory: NeighbourMemory | None = None,
        aten_head: AtenHead | None = None,
        forest: RankingForest | None = None,
        scoring: ScoringOptions | None = None,
        screen: EnsembleMLP | None = None,
    ) -> None:
        if gpu.key != hardware:
            raise ValueError(f"hardware {hardware!r} and the hardware figures' key {gpu.key!r} differ")
        self.net = net.eval()
        self._scoring = scoring or ScoringOptions()
        self._memory = memory
        self._aten_head = aten_head
        self._forest = forest
        self.arch = net.arch
        self.hardware = hardware
        self.gpu = gpu
        self.normalization = normalization
        self._inv_std = (1.0 / normalization.x_std).astype(np.float32)
        self._inference_weights: tuple[tuple[torch.Tensor, ...], ...] | None = None
        self._screen: EnsembleMLP | None = None
        self._screen_weights: tuple[tuple[torch.Tensor, ...], ...] | None = None
        if screen is not None:
            self.screen = screen
        self.metadata: dict[str, Any] = dict(metadata)
        self._bytes: bytes | None = None
        self._hash: str | None = None

    @property
    def trained_shapes(self) -> TrainedShapes | None:
        raw = self.metadata.get("training_shapes")
        return None if raw is None else TrainedShapes.from_dict(raw)

    def update_metadata(self, values: Mapping[str, Any]) -> None:
        """Add or replace metadata entries (JSON-serialisable values); ``model_hash`` follows."""
        self.metadata.update(values)
        self._changed()

    def _changed(self) -> None:
        """Forget the cached file bytes and hash (a part or the metadata changed)."""
        self._bytes = None
        self._hash = None

    # Replacing an optional part (the trainer does; so may a user comparing a model with and
    # without one) also changes what save_model writes and model_hash.
    memory: _Part[NeighbourMemory] = _Part()
    aten_head: _Part[AtenHead] = _Part()
    forest: _Part[RankingForest] = _Part()

    @property
    def scoring(self) -> ScoringOptions:
        return self._scoring

    @scoring.setter
    def scoring(self, value: ScoringOptions) -> None:
        self._scoring = value
        self._changed()

    @property
    def screen(self) -> EnsembleMLP | None:
        return self._screen

    @screen.setter
    def screen(self, value: EnsembleMLP | None) -> None:
        if value is not None:
            wrong = _screen_mismatch(value.arch, self.arch)
            if wrong:
                raise ValueError(f"screen: must be a one-member network of the model's inputs, {wrong}")
            value = value.eval()
        self._screen = value
        self._screen_weights = None
        self._changed()

    def out_of_coverage(self, problem: Problem, triton: Sequence[Choice]) -> str | None:
        """Why ``problem`` (with these Triton candidates) lies outside what the model was trained
        on, or None. Reads the ``coverage`` metadata the trainer writes (ops, dtypes, and whether
        fp32 training timings had TF32 on); a model file without it is not checked. fp32 with
        ``torch.backends.cuda.matmul.allow_tf32`` gives Inductor's configs ``ALLOW_TF32=True`` and
        cuBLAS TF32 kernels: other kernels than the IEEE fp32 ones the campaign measures."""
        cov = self.metadata.get("coverage")
        if not isinstance(cov, Mapping):
            return None
        if problem.op not in cov.get("ops", (problem.op,)):
            return f"the model was trained on {', '.join(cov['ops'])} problems, not {problem.op}"
        if problem.dtype not in cov.get("dtypes", (problem.dtype,)):
            return f"the model was trained on {', '.join(cov['dtypes'])} problems, not {problem.dtype}"
        if problem.dtype == "float32" and True not in cov.get("fp32_allow_tf32", (True,)):
            if any(c.allow_tf32 for c in triton):
                return (
                    "fp32 with TF32 on (torch.backends.cuda.matmul.allow_tf32 / set_float32_matmul_precision): "
                    "the model was trained on IEEE fp32 timings only"
                )
        return None

    # -- inference ----------------------------------------------------------------------------
    def predict(self, problem: Problem, choices: Sequence[Choice]) -> Prediction:
        """Predicted log time and uncertainty of every choice of ``problem`` (one batched call).

        The problem's features are the same on every row, so their share of the first layer is
        computed once (``EnsembleMLP.forward_shared``); the network's result equals
        ``predict_features`` on the same matrix up to float rounding, except that with more
        candidates than ``scoring.network_shortlist`` the members after the first (or, with a
        ``screen``, all of them) score only the first member's (the screen's) shortlist
        (:class:`ScoringOptions`). With a neighbour ``memory``,
        the mean log time is then blended with what the nearest training problems measured
        (:mod:`torch_diode.neighbours`); the uncertainty stays the network's. With an ``aten_head``,
        the ATen choices are then shifted by one constant (:meth:`AtenHead.adjust`). With a
        ``forest``, the shortlist's log times are last blended with the forest's order
        (:meth:`RankingForest.rerank`).
        """
        x_shared, x_rest, index = featurize_split_indexed(problem, choices, self.gpu)  # [S], [N, F-S]
        if len(choices) == 0:
            z = np.zeros(0, dtype=np.float32)
            return Prediction(z, z.copy())
        s = N_PROBLEM_FEATURES
        norm = self.normalization
        xs = (x_shared - norm.x_mean[:s]) * self._inv_std[:s]  # [S]
        aten = x_rest[:, _KIND_ATEN] > 0.5
        with torch_threads(1, wait_s=PREDICT_THREADS_WAIT_S), torch.inference_mode():
            if self._inference_weights is None:  # the candidates' standardisation folded in
                self._inference_weights = self.net.inference_weights(s, norm)
            pred = self._network(torch.from_numpy(xs), x_rest, aten, self._inference_weights)
        if self.memory is not None:
            pred = Prediction(self.memory.blend(problem, x_rest, pred.log_time_us, index), pred.std)
        if self.aten_head is not None:
            pred = Prediction(self.aten_head.adjust(pred.log_time_us, aten, x_shared), pred.std)
        if self.forest is not None:
            pred = Prediction(self.forest.rerank(pred.log_time_us, x_shared, x_rest), pred.std)
        return pred

    def _network(
        self, xs: torch.Tensor, x_rest: np.ndarray, aten: np.ndarray, weights: tuple[tuple[torch.Tensor, ...], ...]
    ) -> Prediction:
        """The ensemble's log times ``[N]`` and spread for one problem's candidates (standardised
        problem columns ``xs``, raw candidate columns ``x_rest``, ``aten`` their ATen rows, the
        members' ``weights`` from :meth:`EnsembleMLP.inference_weights`), as a cascade past
        ``scoring.network_shortlist`` candidates (:class:`ScoringOptions`), screened by the
        ensemble's first member or by the ``screen``."""
        m, n = self.scoring.network_shortlist, len(x_rest)
        screen = self.screen
        if m == 0 or n <= m or (screen is None and len(weights) < 2):
            return self._summarise(self.net.forward_shared(xs, torch.from_numpy(x_rest), weights).numpy())
        if screen is None:
            first = self.net.forward_shared(xs, torch.from_numpy(x_rest), weights[:1]).numpy()[0]  # [N]
        else:
            if self._screen_weights is None:  # the same inputs and normalisation as the ensemble's
                self._screen_weights = screen.inference_weights(N_PROBLEM_FEATURES, self.normalization)
            first = screen.forward_shared(xs, torch.from_numpy(x_rest), self._screen_weights).numpy()[0]
        # the ATen choices always in (their spread decides whether the handler benchmarks them)
        short = np.argpartition(np.where(aten, -np.inf, first), m - 1)[:m]
        if screen is None:  # the first member has scored the shortlist already
            others = self.net.forward_shared(xs, torch.from_numpy(x_rest[short]), weights[1:]).numpy()  # [K-1, M]
            top = self._summarise(np.concatenate([first[None, short], others]))
        else:
            top = self._summarise(self.net.forward_shared(xs, torch.from_numpy(x_rest[short]), weights).numpy())
        mean = first + np.mean(top.log_time_us - first[short])  # the screening network, shifted (float32)
        mean[short] = top.log_time_us
        std = np.full(n, np.mean(top.std), dtype=np.float32)
        std[short] = top.std
        return Prediction(mean, std)

    def _summarise(self, log_t: np.ndarray) -> Prediction:
        """The members' mean and spread of ``log_t [K, N]`` (natural-log times)."""
        # (torch.std over a [4, 1500] tensor costs ~0.2 ms on CPU, numpy ~0.02 ms)
        mean = log_t.mean(axis=0)
        std = np.sqrt(np.square(log_t - mean).mean(axis=0)) if self.arch.members > 1 else np.zeros_like(mean)
        return Prediction(mean, std)

    def predict_features(self, x: np.ndarray) -> Prediction:
        """The network's prediction from a feature matrix ``[N, F]`` computed by ``featurize``
        (no neighbour memory: the rows need not be one problem's)."""
        norm = self.normalization
        xn = (x - norm.x_mean) * self._inv_std  # [N, F] float32
        with torch.inference_mode():
            out = self.net(torch.from_numpy(np.ascontiguousarray(xn, dtype=np.float32)))  # [K, N]
        return self._summarise(out.numpy() * np.float32(norm.y_std) + np.float32(norm.y_mean))

    # -- serialisation ------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The model file's bytes (deterministic for a given model)."""
        if self._bytes is None:
            if self.gpu.key != self.hardware:  # both attributes may be set: a file must agree with itself
                raise ValueError(
                    f"model hardware {self.hardware!r} but its hardware figures are {self.gpu.key!r}'s; set .gpu to "
                    f"gpu_constants({self.hardware!r}) too"
                )
            tensors = _weights(self.net)
            meta = dict(self.metadata)
            meta.pop("neighbour_memory", None)
            meta.pop("aten_head", None)
            meta.pop("forest", None)
            meta.pop("screen", None)
            if self.memory is not None:
                tensors.update({k: torch.from_numpy(v) for k, v in self.memory.to_tensors().items()})
                meta["neighbour_memory"] = self.memory.metadata()
            if self.aten_head is not None:
                tensors.update({k: torch.from_numpy(v) for k, v in self.aten_head.to_tensors().items()})
                meta["aten_head"] = self.aten_head.metadata()
            if self.forest is not None:
                tensors.update({k: torch.from_numpy(v) for k, v in self.forest.to_tensors().items()})
                meta["forest"] = self.forest.metadata()
            if self.screen is not None:
                tensors.update(_weights(self.screen, "screen."))
                meta["screen"] = {"architecture": self.screen.arch.to_dict()}
            meta["scoring"] = self.scoring.to_dict()
            meta.update(
                format=FORMAT_NAME,
                format_version=FORMAT_VERSION,
                hardware=self.hardware,
                gpu_constants=self.gpu.to_dict(),
                architecture=self.arch.to_dict(),
                normalization=self.normalization.to_dict(),
            )
            meta.setdefault("feature_spec", FEATURE_SPEC.to_dict())
            self._bytes = _encode_safetensors(tensors, meta)
        return self._bytes

    @property
    def model_hash(self) -> str:
        if self._hash is None:
            self._hash = hashlib.sha256(self.to_bytes()).hexdigest()
        return self._hash

    def __reduce__(self) -> tuple[Any, tuple[bytes, str]]:
        # Pickled as its model-file bytes (the choices handler is pickled into Inductor's compile
        # subprocess); unpickling re-runs every check of load_model and never unpickles tensors.
        return (load_model_bytes, (self.to_bytes(), f"<pickled {self.hardware} model>"))

    def __repr__(self) -> str:
        a = self.arch
        return (
            f"DiodeModel({self.hardware}, {a.model_type} hidden={a.hidden} depth={a.depth} members={a.members}, "
            + (
                f"screen hidden={self.screen.arch.hidden} depth={self.screen.arch.depth}, "
                if self.screen is not None
                else ""
            )
            + f"sha256={self.model_hash[:12]})"
        )


# -- safetensors writing/reading (deterministic header) ------------------------------------------


def _encode_safetensors(tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, Any]) -> bytes:
    """A safetensors file with a sorted header, so equal models give equal bytes.

    (``safetensors.torch.save`` orders ``__metadata__`` keys by a randomly seeded hash map, so
    two processes would write different bytes for the same model.)
    """
    meta_str = {
        k: str(v) if k in _PLAIN_META else json.dumps(_nan_to_none(v), sort_keys=True, allow_nan=False)
        for k, v in metadata.items()
    }
    names = sorted(tensors)
    kinds = {n: ("I32", "<i4") if tensors[n].dtype == torch.int32 else ("F32", "<f4") for n in names}
    blobs = [tensors[n].numpy().astype(kinds[n][1], copy=False).tobytes() for n in names]
    data = b"".join(blobs)
    meta_str["tensors_sha256"] = hashlib.sha256(data).hexdigest()
    meta_str.pop("metadata_sha256", None)
    meta_str["metadata_sha256"] = _metadata_sha256(meta_str)
    header: dict[str, Any] = {"__metadata__": dict(sorted(meta_str.items()))}
    off = 0
    for n, b in zip(names, blobs):
        header[n] = {"dtype": kinds[n][0], "shape": list(tensors[n].shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
    hbytes = json.dumps(header, separators=(",", ":"), sort_keys=False).encode()
    hbytes += b" " * (-len(hbytes) % 8)
    return struct.pack("<Q", len(hbytes)) + hbytes + data


def _metadata_sha256(meta_str: Mapping[str, str]) -> str:
    """sha256 of a file's ``__metadata__`` (every entry but ``metadata_sha256`` itself, as sorted
    compact JSON): with ``tensors_sha256`` it makes a changed byte anywhere in a model file's
    contents detectable, the normalisation statistics and hardware figures included."""
    canon = {k: v for k, v in meta_str.items() if k != "metadata_sha256"}
    return hashlib.sha256(json.dumps(canon, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _weights(net: nn.Module, prefix: str = "") -> dict[str, torch.Tensor]:
    """``net``'s weights as a model file stores them (float32, contiguous, on the CPU), their
    names under ``prefix``."""
    return {prefix + k: v.detach().to("cpu", torch.float32).contiguous() for k, v in net.state_dict().items()}


def _nan_to_none(v: Any) -> Any:
    """Metadata is strict JSON: a NaN metric (nothing to measure) is stored as null."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, Mapping):
        return {str(k): _nan_to_none(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_nan_to_none(x) for x in v]
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    return v


def save_model(model: DiodeModel, path: str | os.PathLike[str]) -> Path:
    """Write ``model`` to ``path`` atomically (a per-process temp file, then ``os.replace``).

    Returns:
        The path written.
    """
    from torch_diode._files import atomic_write

    return atomic_write(path, model.to_bytes())


def _bad(path: object, what: str) -> ModelFormatError:
    return ModelFormatError(f"{path}: {what}")


def _looks_like(path: object, data: bytes) -> str:
    """What a file that is no safetensors file seems to be, as a clause of an error (or nothing)."""
    from torch_diode.dataset import FORMAT_NAME as DATASET_FORMAT

    if DATASET_FORMAT.encode() in data[:64]:  # the header both dataset formats begin with
        return ": it is a torch-diode dataset file (timings), not a model"
    if data[:4] == b"PK\x03\x04":
        return ": it is a zip archive (a torch.save checkpoint?)"
    if data.lstrip()[:1] in (b"{", b"["):
        return ": it is JSON text"
    suffix = Path(str(path)).suffix.lower()
    if suffix in (".msgpack", ".mpk", ".msgp"):
        return f": by its name ({suffix}) a dataset file?"
    return ""


def _read_header(path: object, data: bytes) -> dict[str, Any]:
    if len(data) < 8:
        raise _bad(path, f"file is {len(data)} bytes, too short for a safetensors model (truncated or not a model)")
    (n,) = struct.unpack("<Q", data[:8])
    # A safetensors file is an 8-byte header length, then the header's JSON object: a file whose
    # length field points past its end (or past any model header's size) and whose next byte does
    # not open an object is some other kind of file, not a damaged model.
    if (n > 100_000_000 or n > len(data) - 8) and data[8:9] not in (b"{", b""):  # b"": cut after the length
        raise _bad(path, f"not a .safetensors model file{_looks_like(path, data)}")
    if n > 100_000_000:
        raise _bad(path, f"header claims {n:,} bytes, over the 100 MB a model header may have (corrupt or not a model)")
    if n > len(data) - 8:
        raise _bad(
            path,
            f"file is truncated inside its header (or the header's length is damaged): {len(data):,} bytes where "
            f"the header alone takes {8 + n:,}; re-download or re-save it",
        )
    try:
        header = json.loads(data[8 : 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _bad(path, f"safetensors header is not valid JSON ({e}); the file is corrupt or not a model") from None
    if not isinstance(header, dict):
        raise _bad(path, "safetensors header is not an object; the file is corrupt or not a model")
    described = 8 + n + _tensor_bytes(header)
    if len(data) < described:  # a cut download or copy: said before any checksum would differ
        raise _bad(
            path,
            f"file is truncated: {len(data):,} bytes where its header describes {described:,}; re-download or "
            "re-save it",
        )
    return header


def _tensor_bytes(header: Mapping[str, Any]) -> int:
    """How many bytes of tensor data a safetensors header describes (the largest end offset; 0 for
    entries without well-formed offsets, which the safetensors reader refuses later)."""
    ends = [
        off[1]
        for name, spec in header.items()
        if name != "__metadata__" and isinstance(spec, dict)
        for off in [spec.get("data_offsets")]
        if isinstance(off, list) and len(off) == 2 and isinstance(off[1], int) and not isinstance(off[1], bool)
    ]
    return max(ends, default=0)


def load_model_bytes(data: bytes, source: str = "<bytes>") -> DiodeModel:
    """Load a model from the bytes of a model file (see :func:`load_model`)."""
    from safetensors import SafetensorError
    from safetensors.torch import load as st_load

    header = _read_header(source, data)  # its framing too: a truncated file is refused here
    meta_raw = header.get("__metadata__")
    if not isinstance(meta_raw, dict) or meta_raw.get("format") != FORMAT_NAME:
        raise _bad(source, f'not a torch-diode model (safetensors metadata has no "format": "{FORMAT_NAME}")')
    if meta_raw.get("format_version") not in _READABLE_VERSIONS:
        raise _bad(
            source,
            f"model format version {meta_raw.get('format_version')!r} is not supported (this torch-diode reads "
            f"versions {', '.join(_READABLE_VERSIONS)}); upgrade torch-diode-lib or retrain the model with `diode train`",
        )
    missing = [k for k in _REQUIRED_META if k not in meta_raw]
    if missing:
        raise _bad(source, f"model metadata lacks {', '.join(missing)}; the file is incomplete or corrupt")
    if not all(isinstance(v, str) for v in meta_raw.values()):
        raise _bad(source, "safetensors metadata holds a value that is not a string; the file is corrupt")
    # Files written before session 65 have no metadata_sha256 and load as they always did.
    if "metadata_sha256" in meta_raw and meta_raw["metadata_sha256"] != _metadata_sha256(meta_raw):
        raise _bad(
            source,
            "metadata does not match its recorded sha256 (metadata_sha256); the file is corrupt or was edited by "
            "hand: re-download it, or retrain the model",
        )
    meta: dict[str, Any] = {}
    for k, v in meta_raw.items():
        try:
            meta[k] = v if k in _PLAIN_META else json.loads(v)
        except (TypeError, json.JSONDecodeError):
            raise _bad(source, f"metadata {k!r} is not valid JSON; the file is corrupt") from None
    kinds = {"training_data_hash": str, "torch_version": str, "triton_version": str, "held_out_metrics": dict}
    mistyped = [f"{k} ({type(meta[k]).__name__})" for k, kind in kinds.items() if not isinstance(meta[k], kind)]
    if mistyped:
        raise _bad(
            source,
            f"metadata {', '.join(mistyped)} is not what a model file records (text hashes and versions, an object of "
            "held-out metrics); the file is corrupt",
        )
    if "training_shapes" in meta:
        try:
            TrainedShapes.from_dict(meta["training_shapes"])
        except ValueError as e:
            raise _bad(source, f"training_shapes metadata is malformed ({e}); the file is corrupt") from None
    try:
        spec = FeatureSpec.from_dict(meta["feature_spec"])
    except (KeyError, TypeError, ValueError) as e:
        raise _bad(source, f"feature_spec metadata is malformed ({e})") from None
    if spec.version != FEATURE_SPEC.version:
        raise _bad(
            source,
            f"model uses feature spec version {spec.version}, this torch-diode computes version "
            f"{FEATURE_SPEC.version}; install the torch-diode-lib release the model was trained with, or retrain it",
        )
    if spec != FEATURE_SPEC:
        diff = [
            f"{a!r} vs {b!r}" if a != b else f"{a!r} computed as {ta!r} vs {tb!r}"
            for a, b, ta, tb in zip(spec.names, FEATURE_SPEC.names, spec.transforms, FEATURE_SPEC.transforms)
            if (a, ta) != (b, tb)
        ][:3]
        raise _bad(
            source,
            f"model's feature spec (version {spec.version}, {len(spec)} features) differs from this torch-diode's "
            f"({len(FEATURE_SPEC)} features{'; first differences: ' + ', '.join(diff) if diff else ''}); retrain the model",
        )
    data_start = 8 + struct.unpack("<Q", data[:8])[0]
    if hashlib.sha256(data[data_start:]).hexdigest() != meta_raw["tensors_sha256"]:
        raise _bad(
            source, "tensor data does not match its recorded sha256; the file is corrupt (re-download or re-save it)"
        )
    try:
        arch = Architecture.from_dict(meta["architecture"])
        gpu = GpuConstants.from_dict(meta["gpu_constants"])
        norm = Normalization.from_dict(meta["normalization"])
    except (KeyError, TypeError, ValueError) as e:
        raise _bad(source, f"architecture, gpu_constants or normalization metadata is malformed ({e})") from None
    if (
        arch.input_dim != len(FEATURE_SPEC)
        or norm.x_mean.shape != (arch.input_dim,)
        or norm.x_std.shape != (arch.input_dim,)
    ):
        raise _bad(
            source,
            f"architecture input_dim {arch.input_dim}, normalisation x_mean {norm.x_mean.size} and x_std "
            f"{norm.x_std.size} values: each must be the {len(FEATURE_SPEC)} features; the file is corrupt",
        )
    if not (np.isfinite(norm.x_mean).all() and np.isfinite(norm.x_std).all() and (norm.x_std > 0).all()):
        raise _bad(source, "normalisation statistics are not finite and positive")
    if not (math.isfinite(norm.y_mean) and math.isfinite(norm.y_std) and norm.y_std > 0):
        raise _bad(
            source, f"target normalisation y_mean {norm.y_mean!r} / y_std {norm.y_std!r} is not finite with y_std > 0"
        )
    if not (valid_key(meta["hardware"]) and meta["hardware"] == gpu.key):
        raise _bad(
            source,
            f"hardware {meta['hardware']!r} is not a hardware key, or not the key of its gpu_constants ({gpu.key!r}); "
            "the file is corrupt",
        )
    try:
        tensors = st_load(data)
    except (SafetensorError, ValueError, RuntimeError) as e:
        raise _bad(source, f"safetensors could not read the tensors ({e}); the file is corrupt") from None
    for name, t in tensors.items():
        if name in _INT32_TENSORS:
            if t.dtype != torch.int32:
                raise _bad(source, f"tensor {name!r} is not int32")
        elif t.dtype != torch.float32 or not torch.isfinite(t).all():
            raise _bad(source, f"tensor {name!r} is not finite float32")

    def optional_part(prefix: str, key: str, what: str, read: Callable[[dict[str, np.ndarray], Any], _T]) -> _T | None:
        """An optional part of the file: its ``prefix`` tensors (taken out of ``tensors``) and its
        ``key`` metadata, read by ``read``; None when the file has neither."""
        part = {n: tensors.pop(n).numpy() for n in [n for n in tensors if n.startswith(prefix)]}
        if not part and key not in meta:
            return None
        try:
            return read(part, meta[key])
        except (KeyError, TypeError, ValueError) as e:
            raise _bad(source, f"{what} is malformed ({type(e).__name__}: {e}); the file is corrupt") from None

    from torch_diode.aten_head import AtenHead
    from torch_diode.forest import RankingForest

    memory = optional_part("memory.", "neighbour_memory", "neighbour memory", NeighbourMemory.from_tensors)
    aten_head = optional_part("aten_head.", "aten_head", "ATen head", AtenHead.from_tensors)
    if aten_head is not None and aten_head.inputs != N_PROBLEM_FEATURES:
        raise _bad(source, f"ATen head takes {aten_head.inputs} inputs, not the {N_PROBLEM_FEATURES} problem features")
    forest = optional_part("forest.", "forest", "ranking forest", RankingForest.from_tensors)
    screen = optional_part("screen.", "screen", "screening network", _read_screen)
    wrong = _screen_mismatch(screen.arch, arch) if screen is not None else None
    if wrong:
        raise _bad(source, f"screening network {wrong}; the file is corrupt")
    try:
        scoring = (
            ScoringOptions.from_dict(meta["scoring"]) if "scoring" in meta else ScoringOptions(network_shortlist=0)
        )
    except (TypeError, ValueError) as e:
        raise _bad(
            source,
            f"scoring options are malformed ({e}); the file is corrupt, or from a newer torch-diode-lib: upgrade it",
        ) from None
    with torch.device("meta"):
        net = EnsembleMLP(arch)
    try:
        net.load_state_dict(tensors, strict=True, assign=True)
    except RuntimeError as e:
        raise _bad(source, f"weights do not fit the recorded architecture: {e}") from None
    model = DiodeModel(
        net,
        hardware=meta["hardware"],
        gpu=gpu,
        normalization=norm,
        metadata=meta,
        memory=memory,
        aten_head=aten_head,
        forest=forest,
        scoring=scoring,
        screen=screen,
    )
    model._bytes = bytes(data)
    return model


def _screen_mismatch(screen: Architecture, model: Architecture) -> str | None:
    """What keeps a network of ``screen`` from screening for a model of ``model`` (None: nothing):
    it must be one member of the model's inputs."""
    if screen.members != 1 or screen.input_dim != model.input_dim:
        return f"has {plural(screen.members, 'member')} of {plural(screen.input_dim, 'input')}, not one of {model.input_dim}"
    return None


def _read_screen(tensors: dict[str, np.ndarray], meta: Mapping[str, Any]) -> EnsembleMLP:
    """The screening network of a model file: its ``screen.*`` tensors and ``screen`` metadata."""
    with torch.device("meta"):
        net = EnsembleMLP(Architecture.from_dict(meta["architecture"]))
    state = {name.removeprefix("screen."): torch.from_numpy(t) for name, t in tensors.items()}
    try:
        net.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as e:
        raise ValueError(f"its weights do not fit its architecture: {' '.join(str(e).split())}") from None
    return net


def load_model(path: str | os.PathLike[str]) -> DiodeModel:
    """Load a model file written by :func:`save_model`.

    The net is built on the meta device and the safetensors weights are assigned to it, so nothing
    is allocated twice and no pickle code runs.

    Raises:
        ModelFormatError: the file is missing, not a torch-diode model, of another format version or
            feature spec, truncated, or its contents do not match their checksums or architecture, or
            its normalisation, hardware key or hardware figures are not finite, positive and consistent.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise ModelFormatError(f"{p}: no such model file") from None
    except IsADirectoryError:
        raise ModelFormatError(f"{p}: is a directory, not a model file") from None
    except OSError as e:
        raise ModelFormatError(f"{p}: cannot read: {e.strerror or e}") from None
    return load_model_bytes(data, source=str(p))


def build_model(
    arch: Architecture,
    *,
    hardware: str,
    gpu: GpuConstants,
    normalization: Normalization,
    seed: int,
    metadata: Mapping[str, Any] | None = None,
) -> DiodeModel:
    """A freshly initialised (untrained) model (the network of :func:`init_network`)."""
    return DiodeModel(
        init_network(arch, seed), hardware=hardware, gpu=gpu, normalization=normalization, metadata=metadata or {}
    )


def init_network(arch: Architecture, seed: int) -> EnsembleMLP:
    """A freshly initialised network of ``arch`` from ``seed``; the trainer starts from this."""
    net = EnsembleMLP(arch)
    net.reset_parameters(torch.Generator().manual_seed(seed))
    return net


def versions() -> dict[str, str]:
    """torch, triton and torch-diode versions (recorded in model files)."""
    from torch_diode._version import __version__

    try:
        triton = md.version("triton")
    except md.PackageNotFoundError:
        triton = "not installed"
    return {"torch_version": torch.__version__, "triton_version": triton, "diode_version": __version__}
