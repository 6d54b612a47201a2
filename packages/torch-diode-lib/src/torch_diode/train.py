"""The trainer: fit a kernel-time ensemble on a dataset of one GPU's timings.

``train(dataset, options)`` splits the problems (never the rows) into training and validation,
featurizes every measured (problem, choice) once with :func:`torch_diode.features.featurize`,
and minimises, per ensemble member,

    MSE(normalised log time) + ranking_weight * ListNet(problem) + pairwise_weight * Pairwise(problem)

(a problem's ATen rows, and the pairs with an ATen choice, weighted ``aten_weight`` times; the MSE
an expectile loss with ``regression_expectile`` other than 0.5),
where the ListNet term is the KL divergence between softmax(-log t / T) of the measured and of
the predicted times over the choices of each problem (``T`` = ``ranking_temperature``), and the
pairwise term is a logistic loss on every (fast, slower) pair of a problem's choices whose fast
member is among its ``pairwise_top`` fastest, weighted by exp(-(log t_fast - log t_best) / T):
both reward getting the order of the fast choices right, which is what regret measures. By
grouped cross-validation on the H200 data (``scripts/cv_model.py``), the pairwise term alone
ranks best, so ListNet is off by default (``ranking_weight=0``). Members differ by their
initialisation and by Bayesian-bootstrap weights (an Exponential(1) weight per member and
training problem), which gives the ensemble its spread.

Each epoch visits every training problem once, in batches of ``batch_size`` problems, with at most
``max_choices_per_problem`` of each problem's choices sampled per visit, its ATen choices always
among them (they are one or two rows of a problem's ~300, and ATen against the best Triton config
is the call the handler makes first; AdamW, cosine learning rate). An exponential moving average of
the weights (``ema_decay`` per step) is what gets validated and shipped. After each epoch the
validation problems are scored (regret@1, regret@5, MSE). By default the last epoch's averaged
weights ship and the validation problems only measure (``early_stopping=False``: on a few dozen
validation problems, picking the best epoch selected noise, sometimes a barely trained model). With
``early_stopping``, training stops after ``patience`` epochs without improvement of ``mean log
regret@1 + mean log regret@5 + 0.001 * MSE`` and the best epoch's averaged weights are restored.
After the network, a ranking forest (boosted oblivious trees, LambdaRank; :mod:`torch_diode.forest`,
``forest_trees``) is fit on the training split's rows; it re-ranks the network's shortlist in
``DiodeModel.predict``. With ``screen_hidden``, a one-member network of that width is trained
after the ensemble by the same loop (``_fit_network``), on the same rows from the same seed: the
model's screen, which scores every candidate of the network cascade so that the ensemble scores
only its shortlist. The same seed gives the same model, bit for bit, on the same machine with the same number of CPU
threads (``num_threads``; a different thread count changes float rounding; the count used is
recorded in the model's ``training`` metadata).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import torch

from torch_diode._text import plural
from torch_diode.aten_head import AtenHead, AtenHeadOptions
from torch_diode.dataset import Dataset
from torch_diode.evaluate import problem_evals, regret_at_k, summarize
from torch_diode.features import FEATURE_SPEC, N_PROBLEM_FEATURES, GpuConstants, featurize, gpu_constants
from torch_diode.forest import ForestOptions, RankingForest
from torch_diode.model import (
    ARCH_PRESETS,
    MODEL_TYPES,
    Architecture,
    DiodeModel,
    EnsembleMLP,
    Normalization,
    ScoringOptions,
    TrainedShapes,
    init_network,
    load_model,
    torch_threads,
    versions,
)
from torch_diode.neighbours import NeighbourMemory, NeighbourOptions

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class TrainOptions:
    """Options of :func:`train`.

    Attributes:
        model_type: ``base`` (plain MLP) or ``deep`` (residual MLP).
        hidden, depth: override the architecture preset of ``model_type`` (``model.ARCH_PRESETS``).
        ensemble_size: number of ensemble members (their spread is the uncertainty).
        batch_size: problems per optimiser step (each contributes up to ``max_choices_per_problem`` rows).
        max_choices_per_problem: choices of a problem sampled per visit (all when fewer).
        num_epochs: number of passes over the training problems (the most, with ``early_stopping``).
        learning_rate: AdamW learning rate (cosine-annealed to 1/10 over ``num_epochs``).
        weight_decay: AdamW weight decay.
        seed: seeds the split, the initialisation and the sampling.
        val_fraction: share of shapes held out (:func:`split_problems`: each with all its layouts):
            their problems' metrics go into the model's metadata (and drive early stopping when it
            is on); 0: none.
        patience: with ``early_stopping``, epochs without validation improvement before stopping.
        ranking_weight: weight of the listwise ranking term.
        ranking_temperature: softmax temperature of the ranking term, in natural-log time units;
            also the scale of the pairwise term and of its weighting of the top choices.
        pairwise_weight: weight of the top-weighted pairwise term (:func:`_pairwise`): each of a
            problem's ``pairwise_top`` fastest sampled choices against every slower one.
        pairwise_top: how many of each problem's fastest sampled choices the pairwise term ranks.
        regression_expectile: the expectile ``tau`` of the regression term: a row whose measured
            time is above its prediction weighs ``2 * tau``, one below ``2 * (1 - tau)`` (0.5: the
            plain MSE). Above 0.5 the network predicts an upper expectile of a choice's time, so
            that choices whose times scatter around what the features say (kernels that fall off a
            cliff now and then) are placed later: a risk-averse first pick.
        aten_weight: weight of a problem's ATen rows in the MSE term and of the pairs with an ATen
            choice in the pairwise term, relative to Triton rows (1: equal). A problem has one or
            two ATen rows beside hundreds of Triton configs, yet ATen-or-Triton is the call that
            costs most when it goes wrong. 3 (the default since session 8) makes what the choices
            handler keeps for Inductor to benchmark better on both GPUs in paired cross-validation
            (``benchmarks/models/cv-session8.md``).
        neighbours: how many nearest training problems vote on a new problem's order (the
            neighbour memory saved in the model file, :mod:`torch_diode.neighbours`); 0: none,
            the network alone. 8 since session 9 (``benchmarks/models/cv-session9.md``).
        neighbour_bandwidth: distance scale of a neighbour's weight ``exp(-d² / bandwidth²)``.
        neighbour_prior: how many votes the network's own order counts for.
        neighbour_alignment: added to the squared distance per operand whose rows are 16-byte
            aligned in one problem and not the other (0: alignment ignored, as before session 37;
            ``benchmarks/models/cv-session37.md``).
        aten_head_blend: weight of the ATen head (:mod:`torch_diode.aten_head`, fit on one row
            per training problem after the network) in the call between ATen and the best Triton
            config: the gap between the two is this share of the head's predicted gap and the
            rest the network's; 0: no head. 0.5 since session 13 (``cv-session13.md``), 0.75 since
            session 35 (``cv-session35.md``).
        forest_trees: boosting rounds of the ranking forest (:mod:`torch_diode.forest`, fit on the
            training split after the network) that re-ranks the network's shortlist; 0: no
            forest. 192 since session 31 (``benchmarks/models/cv-session31.md``; 64 from session 22,
            ``cv-session22.md``).
        forest_depth, forest_learning_rate: the forest's tree depth and shrinkage.
        forest_blend: the forest's weight in the blend over the shortlist (0.5).
        forest_shortlist: how many of the network's best candidates the forest re-ranks (512).
        network_shortlist: past this many candidates of a problem, scoring runs the network as a
            cascade (:class:`~torch_diode.model.ScoringOptions`, stored in the model file); 0:
            every member scores every candidate. 128 since session 48 (``cv-session48.md``).
        screen_hidden: also train a one-member network of this width (the same type and depth,
            the same split, rows, normalisation and seed: what ``ensemble_size=1,
            hidden=screen_hidden`` trains) as the model's screen: it scores every candidate of
            the cascade and the ensemble its shortlist, so a wider ensemble costs little more
            scoring time (``DiodeModel.screen``); None or 0: the ensemble's first member screens
            (0 says so explicitly: with an ``init_from`` file that has a screen, None is refused,
            so that the file's screen is never dropped unasked).
        init_from: a model file (``.safetensors``), or a registered model's name
            (``NVIDIA-H200-matmul``: resolved and checked as :func:`torch_diode.registry.resolve`
            does), whose networks this training starts from
            instead of a fresh initialisation, with that file's normalisation: fine-tuning, e.g.
            of another GPU's shipped model on this GPU's timings (usually with a lower
            ``learning_rate``). Its ensemble must be of this training's architecture
            (``model_type``, ``hidden``, ``depth``, ``ensemble_size``); its screen, when it has
            one, of ``screen_hidden`` (0: the file's screen is left out; a file without one: the
            screen starts fresh). Only the networks come from it: the neighbour memory, ATen head
            and ranking forest are built from the training data as always (the forest continues
            the file's with ``init_forest``). The file is recorded
            in the new model's ``training.init_from`` metadata (the path or name given, sha256,
            hardware key, training-data hash). None: a fresh initialisation from ``seed``.
        init_forest: with ``init_from``, the ranking forest starts from that file's too: its trees
            are kept as they are and ``forest_trees`` more are boosted on this training's rows
            from its scores (``RankingForest.fit``'s ``start``), so the new file's forest has
            both (its ``trees`` their sum). Session 57 (``benchmarks/models/cv-session57.md``):
            the H100's forest started from the H200 file's, with 96 H100 trees, makes the top-1
            pick 0.85 points faster on the H100's validation set (five seeds, all better); the
            H200's started from the H100 file's is 1.0 point slower (the H100's forest is fit on
            half the problems). The file needs a forest of ``forest_depth``.
        init_forest_from: a model file, or a registered model's name, whose ranking forest this
            training's continues as ``init_forest`` continues ``init_from``'s (its trees kept,
            ``forest_trees`` more boosted on this training's rows from its scores), whatever the
            networks start from: a fresh initialisation, or ``init_from``'s. The shipped H200 file
            is made so in one training: its networks trained from scratch, its forest session 54's
            file's continued by 288 trees (``benchmarks/models/cv-session60.md``). Recorded in
            ``training.init_forest_from`` (the path or name given, sha256, hardware key,
            training-data hash, its trees). Not with ``init_forest``; the file needs a forest of
            ``forest_depth``.
        early_stopping: keep the best validation epoch and stop after ``patience`` epochs
            without improvement; False trains ``num_epochs`` and keeps the last epoch (the
            validation problems then only measure).
        ema_decay: per-step decay of the exponential moving average of the weights that is
            validated and shipped (0 disables it; validation of raw weights is much noisier).
        device: ``auto`` (CUDA when available), ``cpu`` or ``cuda[:N]``.
        num_threads: CPU threads for torch during training (None: torch's current setting). On a
            busy shared machine, 1 can be ten times faster than 2 for small batches.
        progress: show a tqdm progress bar when tqdm is installed.
    """

    model_type: str = "deep"
    hidden: int | None = None
    depth: int | None = None
    ensemble_size: int = 4
    batch_size: int = 64
    max_choices_per_problem: int = 256
    num_epochs: int = 160
    learning_rate: float = 1e-3
    weight_decay: float = 1e-5
    seed: int = 0
    val_fraction: float = 0.1
    patience: int = 20
    ranking_weight: float = 0.0
    ranking_temperature: float = 0.1
    pairwise_weight: float = 3.0
    pairwise_top: int = 32
    regression_expectile: float = 0.5
    aten_weight: float = 3.0
    neighbours: int = 8
    neighbour_bandwidth: float = 3.0
    neighbour_prior: float = 1.0
    neighbour_alignment: float = NeighbourOptions.alignment_weight
    aten_head_blend: float = AtenHeadOptions.blend
    forest_trees: int = ForestOptions.trees
    forest_depth: int = ForestOptions.depth
    forest_learning_rate: float = ForestOptions.learning_rate
    forest_blend: float = ForestOptions.blend
    forest_shortlist: int = ForestOptions.shortlist  # the forest's defaults are ForestOptions'
    network_shortlist: int = ScoringOptions.network_shortlist
    screen_hidden: int | None = None
    init_from: str | None = None
    init_forest: bool = False
    init_forest_from: str | None = None
    early_stopping: bool = False
    ema_decay: float = 0.98
    device: str = "auto"
    num_threads: int | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        if self.model_type not in MODEL_TYPES:
            raise ValueError(f"model_type: unknown model type {self.model_type!r}; use one of {', '.join(MODEL_TYPES)}")
        counts = ("ensemble_size", "batch_size", "max_choices_per_problem", "num_epochs", "patience", "pairwise_top")
        for name in counts:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: must be a positive integer, got {v!r}")
        for name in ("hidden", "depth", "num_threads"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"{name}: must be a positive integer or None, got {v!r}")
        v = self.screen_hidden
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ValueError(f"screen_hidden: must be a non-negative integer (0: no screen) or None, got {v!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError(f"seed: must be an integer, got {self.seed!r}")
        if not 0 <= self.seed < 2**63:
            raise ValueError(f"seed: must be from 0 to 2^63-1, got {self.seed!r}")
        for name in ("learning_rate", "ranking_temperature", "aten_weight"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name}: must be a positive number, got {v!r}")
        for name in ("weight_decay", "ranking_weight", "pairwise_weight"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{name}: must be a non-negative number, got {v!r}")
        tau = self.regression_expectile
        if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not 0 < tau < 1:
            raise ValueError(f"regression_expectile: must be a number in (0, 1) (0.5: plain MSE), got {tau!r}")
        if self.init_from is not None and not isinstance(self.init_from, str):
            raise TypeError(
                f"init_from: must be a model file's path or a model name (a str) or None, got {self.init_from!r}"
            )
        if self.init_from == "":
            raise ValueError("init_from: empty; give a model file (.safetensors), a registered model name, or None")
        if not isinstance(self.init_forest, bool):
            raise TypeError(f"init_forest: must be a bool, got {self.init_forest!r}")
        if self.init_forest and self.init_from is None:
            raise ValueError("init_forest: starts the forest from init_from's model file; give init_from too")
        if self.init_forest and self.forest_trees == 0:
            raise ValueError("init_forest: needs forest_trees >= 1 (the trees boosted after the file's)")
        if self.init_forest_from is not None:
            if not isinstance(self.init_forest_from, str) or not self.init_forest_from:
                raise ValueError(
                    "init_forest_from: must be a model file's path or a registered model's name (a non-empty str) "
                    f"or None, got {self.init_forest_from!r}"
                )
            if self.init_forest:
                raise ValueError(
                    "init_forest_from and init_forest both say where the ranking forest starts: give one "
                    "(init_forest: init_from's forest)"
                )
            if self.forest_trees == 0:
                raise ValueError("init_forest_from: needs forest_trees >= 1 (the trees boosted after the file's)")
        if not isinstance(self.early_stopping, bool):
            raise TypeError(f"early_stopping: must be a bool, got {self.early_stopping!r}")
        if not isinstance(self.ema_decay, (int, float)) or not 0 <= self.ema_decay < 1:
            raise ValueError(f"ema_decay: must be in [0, 1), got {self.ema_decay!r}")
        if not isinstance(self.val_fraction, (int, float)) or not 0 <= self.val_fraction < 1:
            raise ValueError(f"val_fraction: must be in [0, 1), got {self.val_fraction!r}")
        if self.early_stopping and self.val_fraction == 0:
            raise ValueError(
                "early_stopping: needs validation problems to stop on, but val_fraction is 0; hold some out "
                "(val_fraction > 0) or train without early_stopping"
            )
        self.neighbour_options()  # raises on a bad neighbours / bandwidth / prior / alignment
        self.aten_head_options()  # raises on a bad blend
        self.forest_options()  # raises on bad forest options
        self.scoring_options()  # raises on a bad network shortlist
        if not isinstance(self.device, str) or not (self.device in ("auto", "cpu") or self.device.startswith("cuda")):
            raise ValueError(f"device: must be 'auto', 'cpu' or 'cuda[:N]', got {self.device!r}")

    def neighbour_options(self) -> NeighbourOptions:
        return NeighbourOptions(
            k=self.neighbours,
            bandwidth=self.neighbour_bandwidth,
            prior_weight=self.neighbour_prior,
            alignment_weight=self.neighbour_alignment,
        )

    def aten_head_options(self) -> AtenHeadOptions:
        if isinstance(self.aten_head_blend, bool) or not isinstance(self.aten_head_blend, (int, float)):
            raise ValueError(f"aten_head_blend: must be a number in [0, 1], got {self.aten_head_blend!r}")
        return AtenHeadOptions(blend=float(self.aten_head_blend))

    def forest_options(self) -> ForestOptions | None:
        """The ranking forest's options, or None with ``forest_trees`` 0."""
        if isinstance(self.forest_trees, bool) or not isinstance(self.forest_trees, int) or self.forest_trees < 0:
            raise ValueError(f"forest_trees: must be a non-negative integer, got {self.forest_trees!r}")
        if self.forest_trees == 0:
            return None
        return ForestOptions(
            trees=self.forest_trees,
            depth=self.forest_depth,
            learning_rate=self.forest_learning_rate,
            blend=self.forest_blend,
            shortlist=self.forest_shortlist,
        )

    def scoring_options(self) -> ScoringOptions:
        return ScoringOptions(network_shortlist=self.network_shortlist)

    def architecture(self) -> Architecture:
        preset = ARCH_PRESETS[self.model_type]
        return Architecture(
            model_type=self.model_type,
            input_dim=len(FEATURE_SPEC),
            hidden=self.hidden or preset["hidden"],
            depth=self.depth or preset["depth"],
            members=self.ensemble_size,
        )

    def screen_architecture(self) -> Architecture:
        """The screening network's architecture (``screen_hidden`` must be set)."""
        if not self.screen_hidden:
            raise ValueError(f"screen_architecture: screen_hidden is {self.screen_hidden} (no screening network)")
        return replace(self.architecture(), hidden=self.screen_hidden, members=1)


@dataclass
class TrainReport:
    """What happened during training."""

    hardware: str
    train_problems: int
    val_problems: int
    train_rows: int
    val_rows: int
    epochs_run: int
    best_epoch: int
    stopped_early: bool
    seconds: float
    device: str
    history: list[dict[str, float]] = field(default_factory=list)
    held_out: dict[str, Any] = field(default_factory=dict)
    screen_history: list[dict[str, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- data preparation -----------------------------------------------------------------------------


@dataclass
class _Rows:
    x: np.ndarray  # [R, F] float32
    y: np.ndarray  # [R] float32, log(time_us)
    starts: np.ndarray  # [P] int64, row offset of each problem
    counts: np.ndarray  # [P] int64
    aten: np.ndarray  # [R] bool, the row is an ATen choice (always in a problem's sample)


def _featurize_problems(dataset: Dataset, groups: list[Any], hardware: str | GpuConstants) -> _Rows:
    xs, ys, counts, aten = [], [], [], []
    for pt in groups:
        med = pt.median_by_choice()
        ids = list(med)
        xs.append(featurize(pt.problem, [dataset.choices[i] for i in ids], hardware))
        aten.append(np.array([dataset.choices[i].is_aten for i in ids], dtype=bool))
        ys.append(np.log(np.array([med[i] for i in ids], dtype=np.float64)).astype(np.float32))
        counts.append(len(ids))
    c = np.array(counts, dtype=np.int64)
    return _Rows(
        x=np.concatenate(xs) if xs else np.zeros((0, len(FEATURE_SPEC)), np.float32),
        y=np.concatenate(ys) if ys else np.zeros(0, np.float32),
        starts=np.concatenate([[0], np.cumsum(c)[:-1]]).astype(np.int64) if len(c) else c,
        counts=c,
        aten=np.concatenate(aten) if aten else np.zeros(0, bool),
    )


def _measured(rows: _Rows, problems: list[Any]) -> Iterator[tuple[Any, np.ndarray, np.ndarray]]:
    """Per problem of ``rows``: the problem, its non-problem feature columns and its log times
    (what ``NeighbourMemory.from_measurements`` takes)."""
    for p, s, n in zip(problems, rows.starts.tolist(), rows.counts.tolist()):
        yield p, rows.x[s : s + n, N_PROBLEM_FEATURES:], rows.y[s : s + n]


def _memory_of(
    rows_tr: _Rows,
    rows_va: _Rows,
    problems: list[Any],
    train_ids: list[int],
    val_ids: list[int],
    nopts: NeighbourOptions,
) -> NeighbourMemory | None:
    """The neighbour memory a model file keeps: every problem, training split first (None with ``k`` 0)."""
    if not nopts.k:
        return None
    parts = [*_measured(rows_tr, [problems[i] for i in train_ids]), *_measured(rows_va, [problems[i] for i in val_ids])]
    return NeighbourMemory.from_measurements(parts, nopts)


def _split_rows(
    dataset: Dataset, groups: list[Any], opts: TrainOptions
) -> tuple[list[Any], list[int], list[int], _Rows, _Rows, GpuConstants]:
    """The problems of ``groups`` (``dataset.by_problem()``), their split into training and
    validation indices, both splits' rows and the GPU's constants: what training starts from."""
    problems = [g.problem for g in groups]
    train_ids, val_ids = split_problems(problems, opts.val_fraction, opts.seed)
    if opts.val_fraction > 0 and not val_ids and len(problems) > 1:
        log.warning(
            "no validation split: the dataset's %s of one shape (each shape's layouts stay on one side); "
            "nothing is held out and early stopping, if on, follows the training loss",
            plural(len(problems), "problem is", "problems are"),
        )
    gpu = gpu_constants(dataset.hardware)
    rows_tr = _featurize_problems(dataset, [groups[i] for i in train_ids], gpu)
    rows_va = _featurize_problems(dataset, [groups[i] for i in val_ids], gpu)
    return problems, train_ids, val_ids, rows_tr, rows_va, gpu


def training_memory(dataset: Dataset, opts: TrainOptions) -> NeighbourMemory | None:
    """The neighbour memory ``train(dataset, opts)`` puts in its model file, without training (the
    same split, rows and order): ``scripts/rebuild_memory.py`` gives a model file written by an
    older torch-diode this torch-diode's memory."""
    problems, train_ids, val_ids, rows_tr, rows_va, _ = _split_rows(dataset, dataset.by_problem(), opts)
    return _memory_of(rows_tr, rows_va, problems, train_ids, val_ids, opts.neighbour_options())


def _aten_gaps(rows: _Rows) -> tuple[np.ndarray, np.ndarray]:
    """The ATen head's training rows: per problem of ``rows`` with both an ATen and a Triton
    choice, its feature columns and its measured log ratio of best ATen to best Triton time."""
    xs, ys = [], []
    for s, n in zip(rows.starts.tolist(), rows.counts.tolist()):
        aten, y = rows.aten[s : s + n], rows.y[s : s + n]
        if aten.any() and not aten.all():
            xs.append(rows.x[s, :N_PROBLEM_FEATURES])
            ys.append(float(y[aten].min()) - float(y[~aten].min()))
    return np.array(xs, dtype=np.float64).reshape(-1, N_PROBLEM_FEATURES), np.array(ys, dtype=np.float64)


def _fit_aten_head(parts: list[_Rows], options: AtenHeadOptions, seed: int) -> AtenHead | None:
    """The ATen head fit on the problems of ``parts`` (None with a zero blend or < 2 problems)."""
    if options.blend == 0.0:
        return None
    gaps = [_aten_gaps(r) for r in parts]
    x, y = np.concatenate([g[0] for g in gaps]), np.concatenate([g[1] for g in gaps])
    if len(y) < 2:
        return None
    return AtenHead.fit(x, y, options, seed)


def _sample_choices(rng: np.random.Generator, aten: np.ndarray, cap: int) -> np.ndarray:
    """The rows of one problem (``aten``: which are ATen choices) to train on in one visit: all of
    them when there are at most ``cap``, else its ATen rows and a uniform sample of the others."""
    n = len(aten)
    if n <= cap:
        return np.arange(n)
    keep, rest = np.flatnonzero(aten)[:cap], np.flatnonzero(~aten)
    return np.concatenate([keep, rng.choice(rest, size=cap - len(keep), replace=False)])


def dataset_hash(dataset: Dataset) -> str:
    """sha256 of a dataset's records, independent of record and table order."""
    pj = [json.dumps(p.to_dict(), sort_keys=True) for p in dataset.problems]
    cj = [json.dumps(c.to_dict(), sort_keys=True) for c in dataset.choices]
    prank = np.argsort(np.argsort(np.array(pj, dtype=object), kind="stable"), kind="stable") if pj else np.zeros(0, int)
    crank = np.argsort(np.argsort(np.array(cj, dtype=object), kind="stable"), kind="stable") if cj else np.zeros(0, int)
    hw = np.array([s.hardware for s in dataset.sources] or [""], dtype=object)
    p = prank[dataset.problem_idx].astype(np.int64) if len(dataset) else np.zeros(0, np.int64)
    c = crank[dataset.choice_idx].astype(np.int64) if len(dataset) else np.zeros(0, np.int64)
    order = np.lexsort((dataset.time_us, c, p))
    h = hashlib.sha256()
    for s in sorted(set(pj)):
        h.update(s.encode())
    for s in sorted(set(cj)):
        h.update(s.encode())
    h.update("|".join(sorted({str(x) for x in hw})).encode())
    h.update(p[order].tobytes())
    h.update(c[order].tobytes())
    h.update(dataset.time_us[order].astype("<f8").tobytes())
    return h.hexdigest()


def coverage(dataset: Dataset) -> dict[str, list[Any]]:
    """What the training data spans, for the handler's out-of-distribution check
    (``DiodeModel.out_of_coverage``): ops, dtypes, and the ``ALLOW_TF32`` values of the fp32
    problems' Triton timings."""
    groups = dataset.by_problem()
    problems = {t.problem for t in groups}
    tf32 = {
        bool(dataset.choices[i].allow_tf32)
        for t in groups
        if t.problem.dtype == "float32"
        for i in set(t.choice_idx.tolist())
        if dataset.choices[i].is_triton
    }
    return {
        "ops": sorted({p.op for p in problems}),
        "dtypes": sorted({p.dtype for p in problems}),
        "fp32_allow_tf32": sorted(tf32),
    }


def split_problems(problems: list[Any], val_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Indices of training and validation problems, ``val_fraction`` of the shapes
    (:attr:`Problem.shape`) held out: the layouts of one shape fall on one side. The split depends
    only on the problems themselves (ordered by their JSON) and the seed, not on the order the
    dataset lists them."""
    keys = [json.dumps(p.to_dict(), sort_keys=True) for p in problems]
    by_shape: dict[Any, list[int]] = {}
    for i in sorted(range(len(problems)), key=keys.__getitem__):
        by_shape.setdefault(problems[i].shape, []).append(i)
    canonical = list(by_shape.values())  # ordered by each shape's first problem
    n = len(canonical)
    perm = np.random.default_rng(seed).permutation(n)
    n_val = round(val_fraction * n) if val_fraction > 0 and n >= 2 else 0
    n_val = min(max(n_val, 1 if val_fraction > 0 and n >= 2 else 0), max(n - 1, 0))
    val = sorted(i for j in perm[:n_val] for i in canonical[j])
    train = sorted(i for j in perm[n_val:] for i in canonical[j])
    return train, val


# -- the loss -----------------------------------------------------------------------------------


def _loss(
    pred: torch.Tensor,
    y: torch.Tensor,
    mask: torch.Tensor,
    w: torch.Tensor,
    y_std: float,
    opts: TrainOptions,
    aten: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """pred [K, B, C] and y [B, C] normalised log time; mask [B, C]; w [K, B] member weights;
    aten [B, C]: which rows are ATen choices (weighted by ``opts.aten_weight``)."""
    m = mask.unsqueeze(0)  # [1, B, C]
    wm = w.unsqueeze(-1) * m  # [K, B, C]
    rw = None  # [B, C] row weights
    if aten is not None and opts.aten_weight != 1:
        rw = 1 + (opts.aten_weight - 1) * aten.to(pred.dtype)
        wm = wm * rw.unsqueeze(0)
    err = pred - y.unsqueeze(0)  # [K, B, C]: > 0 where the prediction is slower than measured
    if opts.regression_expectile != 0.5:  # expectile weights: under-predictions weigh 2 tau
        wm = wm * torch.where(err < 0, 2 * opts.regression_expectile, 2 * (1 - opts.regression_expectile))
    mse = (err**2 * wm).sum() / wm.sum().clamp_min(1e-12)
    scale = y_std / opts.ranking_temperature
    neg = torch.finfo(pred.dtype).min / 4
    target = torch.softmax(torch.where(mask, -y * scale, neg), dim=-1)  # [B, C]
    logp = torch.log_softmax(torch.where(m, -pred * scale, neg), dim=-1)  # [K, B, C]
    target_ent = -(target * torch.log(target.clamp_min(1e-30))).sum(-1)  # [B]
    ce = -(target.unsqueeze(0) * logp * m).sum(-1) - target_ent.unsqueeze(0)  # [K, B]: KL(target || model)
    rank = (ce * w).sum() / w.sum().clamp_min(1e-12)
    loss = mse + opts.ranking_weight * rank
    if opts.pairwise_weight > 0:
        loss = loss + opts.pairwise_weight * _pairwise(pred, y, mask, w, scale, opts.pairwise_top, rw)
    return loss, mse, rank


def _pairwise(
    pred: torch.Tensor,
    y: torch.Tensor,
    mask: torch.Tensor,
    w: torch.Tensor,
    scale: float,
    top: int,
    row_w: torch.Tensor | None = None,
) -> torch.Tensor:
    """Top-weighted pairwise logistic loss: each of a problem's ``top`` fastest choices i against
    every slower choice j, softplus(-(pred_j - pred_i) * scale), weighted by exp(-(y_i - y_best) * scale)
    and, with ``row_w`` [B, C], by the larger of the two rows' weights."""
    big = torch.finfo(y.dtype).max / 4
    ym = torch.where(mask, y, big)  # [B, C]
    t = min(top, y.shape[-1])
    y_top, i_top = torch.topk(ym, t, dim=-1, largest=False)  # [B, T]
    valid_top = torch.gather(mask, -1, i_top)  # [B, T]
    gain = torch.exp(-(y_top - y_top[:, :1]) * scale) * valid_top  # [B, T]
    p_top = torch.gather(pred, -1, i_top.unsqueeze(0).expand(pred.shape[0], -1, -1))  # [K, B, T]
    pair = (y.unsqueeze(1) > y_top.unsqueeze(-1)) & mask.unsqueeze(1)  # [B, T, C]: j slower than i
    pw = gain.unsqueeze(-1) * pair  # [B, T, C]
    if row_w is not None:
        pw = pw * torch.maximum(torch.gather(row_w, -1, i_top).unsqueeze(-1), row_w.unsqueeze(1))
    sp = torch.nn.functional.softplus(-(pred.unsqueeze(2) - p_top.unsqueeze(-1)) * scale)  # [K, B, T, C]
    per = (sp * pw).sum((-1, -2)) / pw.sum((-1, -2)).clamp_min(1e-12)  # [K, B]
    return (per * w).sum() / w.sum().clamp_min(1e-12)


class _AdamW:
    """AdamW (decoupled weight decay), as ``torch.optim.AdamW`` with default betas.

    Written out because constructing any ``torch.optim`` optimizer imports ``torch._dynamo``
    (about 5 s of start-up on a small CPU machine, per ``diode train`` run).
    """

    def __init__(
        self,
        params: list[torch.nn.Parameter],
        *,
        weight_decay: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.params = params
        self.wd = weight_decay
        self.b1, self.b2 = betas
        self.eps = eps
        self.t = 0
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, lr: float) -> None:
        self.t += 1
        c1 = 1 - self.b1**self.t
        c2 = 1 - self.b2**self.t
        for p, m, v in zip(self.params, self.m, self.v):
            if p.grad is None:
                continue
            g = p.grad
            p.mul_(1 - lr * self.wd)
            m.mul_(self.b1).add_(g, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            denom = (v / c2).sqrt_().add_(self.eps)
            p.addcdiv_(m, denom, value=-lr / c1)


def _resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0 or (device.index or 0) >= n:
            raise ValueError(
                f"device: {name!r} but torch {torch.__version__} sees "
                + (plural(n, "CUDA GPU") if n else "no CUDA GPU (torch.cuda.is_available() is False)")
                + "; train on 'cpu', or 'auto' (CUDA when there is one)"
            )
    return device


def _progress(total: int, enabled: bool, desc: str = "train") -> Any:
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit="epoch", leave=True)


# -- training -------------------------------------------------------------------------------------


def train(
    dataset: Dataset,
    options: TrainOptions | None = None,
    *,
    on_epoch: Callable[[dict[str, float]], None] | None = None,
    held_out: Dataset | None = None,
    held_out_max_compile_cost: float | None = None,
) -> tuple[DiodeModel, TrainReport]:
    """Train a model on one GPU's dataset.

    Args:
        dataset: timing records of a single hardware key.
        options: see :class:`TrainOptions`.
        on_epoch: called after each epoch with that epoch's history entry.
        held_out: a separate validation set of the same GPU (no problem of a shape ``dataset`` or a
            file the training starts from has: :func:`check_held_out`), only
            measured, after training, with the finished model: its metrics become the model's
            ``held_out_metrics`` (those of the split's validation problems, if any, are kept under
            ``training.split_metrics``). It plays no part in training or early stopping.
        held_out_max_compile_cost: rank only the choices of ``held_out`` that the choices handler
            would consider with this ``max_compile_cost`` (as ``diode validate-max-autotune``).

    Returns:
        The model (best validation epoch's weights; metadata includes the held-out metrics) and
        a :class:`TrainReport`.

    Raises:
        ValueError: the dataset is empty or mixes hardware keys, or ``held_out`` is of another GPU,
            empty, or shares shapes with ``dataset`` or a start file, or ``options.init_from``'s networks are of
            other architectures than ``options``'.
        ModelNotFoundError: ``options.init_from`` names no existing file nor registered model.
        ModelFormatError: ``options.init_from``'s file is not a readable model of this feature
            schema (or is corrupt).
    """
    opts = options or TrainOptions()
    if held_out is not None:  # again with the start files' shapes once _train has read them
        check_held_out(dataset, held_out)
    with torch_threads(opts.num_threads):
        return _train(dataset, opts, on_epoch, held_out, held_out_max_compile_cost)


def check_held_out(
    dataset: Dataset, held_out: Dataset, started_from: Sequence[tuple[str, TrainedShapes | None]] = ()
) -> None:
    """Refuse a held-out set that cannot measure a model trained on ``dataset``: another GPU's,
    empty, or sharing shapes (:attr:`Problem.shape`, in any layout) with it or with the shapes
    that the files the training starts from list (``started_from``: each file's name and shapes;
    its metrics would not be held out)."""
    if len(held_out) == 0:
        raise ValueError("held-out dataset: no timing records")
    if len(held_out.hardware_keys) != 1 or held_out.hardware != dataset.hardware:
        raise ValueError(
            f"held-out dataset: its timings are of {held_out.hardware_keys}, the training data's of "
            f"{dataset.hardware}; give a validation set measured on the same GPU"
        )
    shapes = {p.shape for p in dataset.measured_problems()}
    common = [p for p in held_out.measured_problems() if p.shape in shapes]
    whose = "a training problem"
    for name, listed in started_from:
        if not common and listed is not None:
            common = [p for p in held_out.measured_problems() if p in listed]
            whose = f"a problem {name}, which this training starts from, was trained on"
    if common:
        example = sorted(p.key() for p in common)[0]
        raise ValueError(
            f"held-out dataset: {plural(len(common), 'problem')} {'has' if len(common) == 1 else 'have'} the shape "
            f"of {whose} (op, sizes and dtype, in any layout; e.g. {example}); its metrics would not be held out: "
            "use a validation set of other shapes (diode create-validation --train ...)"
        )


def _train(
    dataset: Dataset,
    opts: TrainOptions,
    on_epoch: Callable[[dict[str, float]], None] | None = None,
    held_out_ds: Dataset | None = None,
    held_out_max_compile_cost: float | None = None,
) -> tuple[DiodeModel, TrainReport]:
    t0 = time.perf_counter()
    hardware = dataset.hardware
    groups = dataset.by_problem()
    if not groups:
        raise ValueError("dataset: no timing records to train on")
    start = _start_of(opts)
    forest_start = _forest_start_of(opts)  # read before training, so that a bad file fails at once
    started_from = ([(str(opts.init_from), start.shapes)] if start is not None else []) + (
        [(str(opts.init_forest_from), forest_start[2])] if forest_start is not None else []
    )
    if held_out_ds is not None:
        check_held_out(dataset, held_out_ds, started_from)
    problems, train_ids, val_ids, rows_tr, rows_va, gpu = _split_rows(dataset, groups, opts)
    norm = start.normalization if start is not None else Normalization.fit(rows_tr.x, rows_tr.y)
    arch = opts.architecture()
    device = _resolve_device(opts.device)
    data = _TrainData.of(rows_tr, rows_va, norm, device)
    fit = _fit_network(arch, opts, data, on_epoch, "train", start.net if start is not None else None)
    net, history, best_epoch, epoch = fit.net, fit.history, fit.best_epoch, fit.epochs_run
    screen_fit = None
    if opts.screen_hidden:  # what `train(hidden=screen_hidden, ensemble_size=1)` trains
        t_screen = time.perf_counter()
        screen_start = start.screen if start is not None else None
        screen_fit = _fit_network(opts.screen_architecture(), opts, data, None, "screen", screen_start)
        log.info("screening network trained in %.1f s", time.perf_counter() - t_screen)
    model = DiodeModel(
        net,
        hardware=hardware,
        gpu=gpu,
        normalization=norm,
        metadata={},
        scoring=opts.scoring_options(),
        screen=screen_fit.net if screen_fit is not None else None,
    )
    memory = _memory_of(rows_tr, rows_va, problems, train_ids, val_ids, opts.neighbour_options())
    fopts = opts.forest_options()
    if fopts is not None:  # the training split's rows, as the network's: held-out metrics describe the file's forest
        t_forest = time.perf_counter()
        log.info("fitting a ranking forest of %s on %s", plural(fopts.trees, "tree"), plural(len(rows_tr.y), "row"))
        begin = forest_start[0] if forest_start is not None else start.forest if start is not None else None
        model.forest = RankingForest.fit(rows_tr.x, rows_tr.y, rows_tr.counts, fopts, opts.seed + 2, start=begin)
        log.info("ranking forest fit in %.1f s", time.perf_counter() - t_forest)
    hopts = opts.aten_head_options()
    held_out: dict[str, Any] = {}
    inherited = _trained_shapes([], [s for _, s in started_from])  # what the start files list
    scored = [problems[i] for i in val_ids if problems[i] not in inherited]
    if scored:
        val_ds = dataset.select_problems(scored)
        # The held-out problems are measured against a memory and a head that have not seen them.
        if memory is not None:
            model.memory = memory.select(range(len(train_ids)))
        model.aten_head = _fit_aten_head([rows_tr], hopts, opts.seed)
        held_out = summarize(problem_evals(model, val_ds), with_tau=True)
    model.memory = memory
    model.aten_head = _fit_aten_head([rows_tr, rows_va], hopts, opts.seed)
    split_metrics: dict[str, Any] = {}
    held_out_from = (
        "the validation problems of the split (also used for early stopping); "
        "with a neighbour memory and an ATen head, those built from the training problems of the split "
        "only (the memory and head in this file also have the validation problems; the network and the "
        "ranking forest were trained on the training problems of the split only)"
        + (
            f"; {plural(len(val_ids) - len(scored), 'validation problem')} of a shape that a file this training "
            "started from was trained on left out"
            if len(scored) < len(val_ids)
            else ""
        )
        + (
            "; a file this training started from lists no training shapes, so the validation problems were not "
            "checked against its"
            if not inherited.complete
            else ""
        )
    )
    if held_out_ds is not None:
        split_metrics = held_out
        held_out = summarize(
            problem_evals(model, held_out_ds, max_compile_cost=held_out_max_compile_cost), with_tau=True
        )
        held_out_from = (
            f"a separate held-out dataset of {plural(len(held_out_ds.measured_problems()), 'problem')} (sha256 "
            f"{dataset_hash(held_out_ds)[:16]}), none of them of a training problem's shape"
            + (" or of one the files this training started from list" if started_from else "")
            + (" (a file it started from lists none: not checked against that one's)" if not inherited.complete else "")
            + ", measured after training with the model in this file ("
            + (
                "every measured choice ranked)"
                if held_out_max_compile_cost is None
                else f"Triton configs over compile cost {held_out_max_compile_cost:g} not ranked, as in the handler)"
            )
        )
    meta: dict[str, Any] = {
        "feature_spec": FEATURE_SPEC.to_dict(),
        "training_data_hash": dataset_hash(dataset),
        "training_shapes": _trained_shapes(problems, [inherited]).to_dict(),
        "training": {
            "options": asdict(opts),
            "train_problems": len(train_ids),
            "val_problems": len(val_ids),
            "held_out_metrics_are_from": held_out_from,
            **({"split_metrics": split_metrics} if split_metrics else {}),
            "train_rows": len(rows_tr.y),
            "best_epoch": best_epoch,
            **({"init_from": start.record} if start is not None else {}),
            **({"init_forest_from": forest_start[1]} if forest_start is not None else {}),
            "threads": torch.get_num_threads(),
            "device": str(device),
            "epochs_run": epoch,
            **(
                {"screen": {"best_epoch": screen_fit.best_epoch, "epochs_run": screen_fit.epochs_run}}
                if screen_fit is not None
                else {}
            ),
            "sources": [s.to_dict() for s in dataset.sources],
        },
        "held_out_metrics": held_out,
        "coverage": coverage(dataset),
        **versions(),
    }
    model.update_metadata(meta)
    report = TrainReport(
        hardware=hardware,
        train_problems=len(train_ids),
        val_problems=len(val_ids),
        train_rows=len(rows_tr.y),
        val_rows=len(rows_va.y),
        epochs_run=epoch,
        best_epoch=best_epoch,
        stopped_early=epoch < opts.num_epochs,
        seconds=time.perf_counter() - t0,
        device=str(device),
        history=history,
        held_out=held_out,
        screen_history=screen_fit.history if screen_fit is not None else [],
    )
    return model, report


def _trained_shapes(problems: list[Any], started_from: list[TrainedShapes | None]) -> TrainedShapes:
    """The shapes of ``problems`` (every problem of the training data: the validation split's too,
    which chose the epoch and are in the memory and ATen head) and those listed by the files the
    training started from (``started_from``: each one's shapes, None for a file that lists none,
    which leaves the result incomplete)."""
    digests = {p.shape_digest() for p in problems}
    complete = True
    for s in started_from:
        if s is None:
            complete = False
        else:
            digests |= s.digests
            complete = complete and s.complete
    return TrainedShapes(frozenset(digests), complete)


@dataclass
class _Start:
    """What a training starts from instead of a fresh initialisation (``TrainOptions.init_from``)."""

    net: EnsembleMLP
    screen: EnsembleMLP | None  # None: the screen (if one is trained) starts fresh
    normalization: Normalization
    record: dict[str, Any]  # the new model's ``training.init_from`` metadata
    shapes: TrainedShapes | None  # the shapes the file lists as its training problems'
    forest: RankingForest | None = None  # ``init_forest``: the forest the training's forest continues


def _start_of(opts: TrainOptions) -> _Start | None:
    """The networks and normalisation of ``opts.init_from``'s model (a file, or a registered
    model's name), checked against the architectures ``opts`` trains (None without ``init_from``).

    Raises:
        ModelNotFoundError: no such file, nor a registered model of that name.
        ModelFormatError: the file is not a readable model of this feature schema.
        ValueError: its networks are of other architectures than ``opts``'.
    """
    if opts.init_from is None:
        return None
    from torch_diode.registry import resolve

    src = load_model(resolve(opts.init_from))
    arch = opts.architecture()
    a, s = src.arch, (src.screen.arch if src.screen is not None else None)
    # A screen this trainer can continue: one member of the ensemble's type and depth.
    continuable = s is not None and s == replace(a, hidden=s.hidden, members=1)
    # Every architecture flag the file needs: following the advice starts all its networks.
    flags = f"--model-type {a.model_type} --hidden {a.hidden} --depth {a.depth} --ensemble-size {a.members}"
    if s is not None:  # a screen this trainer cannot continue is left out on purpose
        flags += f" --screen-hidden {s.hidden if continuable else 0}"
    drop = " (or with --screen-hidden 0, without a screen)" if continuable else ""
    if src.arch != arch:
        raise ValueError(
            f"init_from: {opts.init_from}'s network is a {a.model_type} MLP of {plural(a.members, 'member')}, "
            f"width {a.hidden}, depth {a.depth}"
            + (f", with a screening network {s.hidden} wide" if s is not None else "")
            + f"; this training's a {arch.model_type} MLP of {plural(arch.members, 'member')}, width {arch.hidden}, "
            f"depth {arch.depth}: train with {flags} to start from it{drop}"
        )
    screen = None
    if s is not None and opts.screen_hidden != 0:  # dropping the file's screen is asked for, never silent
        if not continuable:
            raise ValueError(
                f"init_from: {opts.init_from}'s screening network is a {s.model_type} MLP of depth {s.depth}, not of "
                "its ensemble's type and depth as a screen this trainer trains: no training starts from it; train "
                "with --screen-hidden 0 to start from the ensemble alone"
            )
        if opts.screen_hidden is None:
            raise ValueError(
                f"init_from: {opts.init_from} has a screening network {s.hidden} wide, which this training (no "
                f"--screen-hidden) would drop: train with {flags} to start from it{drop}"
            )
        if s != opts.screen_architecture():
            raise ValueError(
                f"init_from: {opts.init_from}'s screening network is {s.hidden} wide, this training's "
                f"{opts.screen_hidden}: train with {flags} to start from it{drop}"
            )
        screen = src.screen
    elif s is not None:
        log.info("init_from: not starting from %s's screening network (--screen-hidden 0)", opts.init_from)
    forest = _forest_to_continue(src, opts.init_from, opts, "init_forest") if opts.init_forest else None
    networks = ["ensemble", *(["screen"] if screen is not None else [])]
    record = {
        **_source_record(opts.init_from, src),
        "networks": networks,
        **({"forest_trees": forest.options.trees} if forest is not None else {}),
    }
    log.info(
        "starting from %s (%s, sha256 %s): its %s and its normalisation%s",
        opts.init_from,
        src.hardware,
        src.model_hash[:16],
        " and ".join(networks),
        f", and its forest's {plural(forest.options.trees, 'tree')}" if forest is not None else "",
    )
    return _Start(
        net=src.net,
        screen=screen,
        normalization=src.normalization,
        record=record,
        shapes=src.trained_shapes,
        forest=forest,
    )


def _source_record(name: str, src: DiodeModel) -> dict[str, Any]:
    """What a new model records of a model file it starts from (``name`` as given): the path or
    name, sha256, hardware key and training-data hash."""
    return {
        "file": str(name),
        "sha256": src.model_hash,
        "hardware": src.hardware,
        "training_data_hash": src.metadata.get("training_data_hash"),
    }


def _forest_to_continue(src: DiodeModel, name: str, opts: TrainOptions, option: str) -> RankingForest:
    """``src``'s ranking forest (the model ``name``, given to ``option``), checked to be there and
    of ``opts.forest_depth``; ``ValueError`` names the option's flag otherwise."""
    flag = "--" + option.replace("_", "-")
    if src.forest is None:
        raise ValueError(f"{option}: {name} has no ranking forest to start from; train without {flag}")
    if src.forest.options.depth != opts.forest_depth:
        raise ValueError(
            f"{option}: {name}'s forest trees are {src.forest.options.depth} deep, this "
            f"training's {opts.forest_depth}: train with --forest-depth {src.forest.options.depth} to start from it"
        )
    return src.forest


def _forest_start_of(opts: TrainOptions) -> tuple[RankingForest, dict[str, Any], TrainedShapes | None] | None:
    """``opts.init_forest_from``'s ranking forest, the new model's ``training.init_forest_from``
    record and the shapes the file lists as its training problems' (None without it). Raises as
    :func:`_start_of` does for the file or name."""
    if opts.init_forest_from is None:
        return None
    from torch_diode.registry import resolve

    src = load_model(resolve(opts.init_forest_from))
    forest = _forest_to_continue(src, opts.init_forest_from, opts, "init_forest_from")
    record = {**_source_record(opts.init_forest_from, src), "trees": forest.options.trees}
    log.info(
        "the ranking forest starts from %s's (%s, sha256 %s): its %s",
        opts.init_forest_from,
        src.hardware,
        src.model_hash[:16],
        plural(forest.options.trees, "tree"),
    )
    return forest, record, src.trained_shapes


@dataclass
class _TrainData:
    """What a network trains on: both splits' rows, their normalisation and the standardised rows
    on the training device."""

    rows_tr: _Rows
    rows_va: _Rows
    norm: Normalization
    device: torch.device
    x_tr: torch.Tensor  # [R, F]
    y_tr: torch.Tensor  # [R]
    aten_tr: torch.Tensor  # [R] bool
    x_va: torch.Tensor  # [R_val, F]

    @classmethod
    def of(cls, rows_tr: _Rows, rows_va: _Rows, norm: Normalization, device: torch.device) -> _TrainData:
        def norm_x(x: np.ndarray) -> torch.Tensor:
            return torch.from_numpy((x - norm.x_mean) / norm.x_std).to(device)

        return cls(
            rows_tr=rows_tr,
            rows_va=rows_va,
            norm=norm,
            device=device,
            x_tr=norm_x(rows_tr.x),
            y_tr=torch.from_numpy((rows_tr.y - norm.y_mean) / norm.y_std).to(device),
            aten_tr=torch.from_numpy(rows_tr.aten).to(device),
            x_va=norm_x(rows_va.x),
        )


@dataclass
class _Fit:
    net: EnsembleMLP  # the shipped (averaged) weights, on the CPU, in eval mode
    history: list[dict[str, float]]
    best_epoch: int
    epochs_run: int


def _fit_network(
    arch: Architecture,
    opts: TrainOptions,
    data: _TrainData,
    on_epoch: Callable[[dict[str, float]], None] | None,
    desc: str,
    start: EnsembleMLP | None = None,
) -> _Fit:
    """Train one ensemble network of ``arch`` on ``data``, from ``start``'s weights (a copy) or
    else a fresh initialisation from ``opts.seed`` (the training loop of :func:`train`; ``desc``
    labels the progress bar)."""
    rows_tr, rows_va, norm, device = data.rows_tr, data.rows_va, data.norm, data.device
    net = (init_network(arch, opts.seed) if start is None else copy.deepcopy(start)).to(device).train()
    # The averaged weights (what is validated, early-stopped on and shipped), starting as a copy.
    avg = copy.deepcopy(net).eval().requires_grad_(False)
    avg_params = list(avg.parameters())

    x_tr, y_tr, aten_tr, x_va = data.x_tr, data.y_tr, data.aten_tr, data.x_va
    rng = np.random.default_rng(opts.seed + 1)
    k = arch.members
    n_tr = len(rows_tr.counts)
    member_w = torch.from_numpy(
        rng.exponential(1.0, size=(k, n_tr)).astype(np.float32) if k > 1 else np.ones((1, n_tr), np.float32)
    ).to(device)  # [K, P_train]
    optim = _AdamW(list(net.parameters()), weight_decay=opts.weight_decay)
    cap = opts.max_choices_per_problem
    best_score, best_epoch, best_state = math.inf, 0, None
    history: list[dict[str, float]] = []
    bar = _progress(opts.num_epochs, opts.progress, desc)
    stale = 0
    epoch = 0
    try:
        for epoch in range(1, opts.num_epochs + 1):
            net.train()
            # cosine annealing from learning_rate to learning_rate / 10 over num_epochs
            lr = opts.learning_rate * (0.1 + 0.45 * (1 + math.cos(math.pi * (epoch - 1) / opts.num_epochs)))
            order = rng.permutation(n_tr)
            tot, tot_mse, tot_rank, nb = 0.0, 0.0, 0.0, 0
            for b0 in range(0, n_tr, opts.batch_size):
                batch = order[b0 : b0 + opts.batch_size]
                c = int(min(cap, rows_tr.counts[batch].max()))
                idx = np.zeros((len(batch), c), dtype=np.int64)
                mask = np.zeros((len(batch), c), dtype=bool)
                for j, p in enumerate(batch.tolist()):
                    n = int(rows_tr.counts[p])
                    sel = _sample_choices(rng, rows_tr.aten[rows_tr.starts[p] : rows_tr.starts[p] + n], cap)
                    idx[j, : len(sel)] = rows_tr.starts[p] + sel
                    mask[j, : len(sel)] = True
                    idx[j, len(sel) :] = rows_tr.starts[p]
                idx_t = torch.from_numpy(idx).to(device)
                mask_t = torch.from_numpy(mask).to(device)
                xb = x_tr[idx_t.view(-1)]  # [B*C, F]
                pred = net(xb).view(k, len(batch), c)  # [K, B, C]
                loss, mse, rank = _loss(
                    pred,
                    y_tr[idx_t],
                    mask_t,
                    member_w[:, torch.from_numpy(batch).to(device)],
                    norm.y_std,
                    opts,
                    aten_tr[idx_t] & mask_t,
                )
                optim.zero_grad()
                loss.backward()
                optim.step(lr)
                with torch.no_grad():
                    for a, w in zip(avg_params, net.parameters()):
                        a.lerp_(w, 1.0 - opts.ema_decay)
                tot += loss.item()
                tot_mse += mse.item()
                tot_rank += rank.item()
                nb += 1
            entry: dict[str, float] = {
                "epoch": epoch,
                "loss": tot / nb,
                "mse": tot_mse / nb,
                "rank": tot_rank / nb,
                "lr": lr,
            }
            if len(rows_va.counts):
                val = _validate(avg, x_va, rows_va, norm)
                entry.update(val)
                score = val["val_log_regret1"] + val["val_log_regret5"] + 1e-3 * val["val_mse"]
            else:
                score = entry["loss"]
            entry["score"] = score
            history.append(entry)
            if not opts.early_stopping:  # the last epoch ships: nothing to snapshot
                best_score, best_epoch = score, epoch
            elif score < best_score - 1e-12:
                best_score, best_epoch, stale = score, epoch, 0
                best_state = {n: t.detach().clone() for n, t in avg.state_dict().items()}
            else:
                stale += 1
            if on_epoch is not None:
                on_epoch(entry)
            if bar is not None:
                post = {"loss": f"{entry['loss']:.4f}"}
                if len(rows_va.counts):
                    post.update(
                        r1=f"{math.exp(entry['val_log_regret1']):.3f}",
                        r5=f"{math.exp(entry['val_log_regret5']):.3f}",
                        rec1=f"{entry['val_recall1']:.2f}",
                        rmse=f"{math.sqrt(entry['val_mse']):.3f}",
                    )
                bar.set_postfix(post)
                bar.update(1)
            else:
                log.debug("epoch %d: %s", epoch, entry)
            if stale >= opts.patience:
                break
    finally:
        if bar is not None:
            bar.close()
    if best_state is not None:  # None without early stopping, or if every epoch's score was NaN
        avg.load_state_dict(best_state)
    avg.to("cpu").eval()
    return _Fit(net=avg, history=history, best_epoch=best_epoch, epochs_run=epoch)


@torch.no_grad()
def _validate(net: torch.nn.Module, x_va: torch.Tensor, rows: _Rows, norm: Normalization) -> dict[str, float]:
    net.eval()
    outs = [net(chunk) for chunk in x_va.split(16384)]
    pred = (torch.cat(outs, dim=1).mean(0).cpu().numpy() * norm.y_std + norm.y_mean).astype(np.float64)  # [R]
    y = rows.y.astype(np.float64)
    r1, r5, rec1 = [], [], []
    for s, n in zip(rows.starts.tolist(), rows.counts.tolist()):
        r = regret_at_k(np.exp(y[s : s + n]), pred[s : s + n], (1, 5))
        r1.append(math.log(r[1]))
        r5.append(math.log(r[5]))
        rec1.append(r[1] <= 1.0)
    return {
        "val_mse": float(np.mean((pred - y) ** 2)),
        "val_log_regret1": float(np.mean(r1)),
        "val_log_regret5": float(np.mean(r5)),
        "val_recall1": float(np.mean(rec1)),
    }
