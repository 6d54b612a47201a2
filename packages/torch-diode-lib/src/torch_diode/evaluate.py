"""Ranking metrics of a kernel-time model against measured timings, as defined in the README's Metrics section.

For one problem, ``oracle`` is the fastest measured choice (the exhaustive Triton space plus ATen,
as far as the dataset measured it). With the model's order (:func:`torch_diode.ranking.order_of`:
ascending predicted time, one-warp configs on misaligned operands held back by ``cliff_guard``,
a tile's ``num_stages`` variants spread out by ``diversity``; the handler ranks the same way):

* ``regret@k`` = (fastest measured time among the model's top k) / oracle; reported as geomean,
  p95 (numpy's linear-interpolation percentile) and max over problems, with ``geomean_ci95``: a
  95% bootstrap interval of the geomean (problems resampled with replacement, percentile method,
  :data:`BOOTSTRAP_RESAMPLES` draws from a fixed seed, so a report is reproducible): on a few
  dozen validation problems it says how far the geomean could move with other problems;
* ``recall@k`` = share of problems whose oracle is in the model's top k (a choice whose measured
  time equals the oracle's counts as the oracle);
* ``kendall_tau`` = Kendall's tau-b between predicted and measured times (diagnostic; mean and
  median over problems);
* ``vs_max_autotune`` = measured time of the model's top-1 pick / measured time of stock
  max-autotune's pick (geomean, p95, max, and the share of problems where the model's pick is no
  slower), over the problems with a known stock pick;
* ``vs_aten`` = the same ratio against the ATen (cuBLAS) choice.

Every block is reported ``overall`` and ``per_op``.

Stock max-autotune's picks come from a solution file (:func:`read_max_autotune_solution`)::

    {"format": "torch-diode-max-autotune-solution", "version": 1, "hardware": "NVIDIA-H100",
     "solutions": [{"problem": {<Problem.to_dict()>}, "choice": {<Choice.to_dict()>},
                    "time_us": 12.5}, ...]}

``hardware`` (required) is the GPU the picks were made on: a pick is scored only in that GPU's
timings. A problem has one entry. ``time_us`` (optional; a positive finite number) is the pick's
time as max-autotune measured it; the dataset's measurement of the same choice is preferred when it
has one. A dataset collected by the Inductor collector in the DEFAULT search space is also a
solution: its fastest record per problem is exactly what stock max-autotune picked
(:func:`max_autotune_solution_from_dataset`).

Where stock's pick was made matters: picked as the fastest of its ~20 candidates *in the timings
it is then scored in* (a solution derived from the validation set itself), its time is low by
selection (the minimum of noisy times), while the model's pick, made from predictions, is not; a
pick made in a benchmark run of its own and scored in the dataset's timings is not biased so.
``vs_max_autotune`` counts three cases in ``stock_time`` (:data:`STOCK_TIME_SOURCES`): the pick's
recorded time equal to the dataset's, bit for bit (``same_time_here``); the pick timed in the
dataset, its recorded time another or none (``other_time_here``); the pick not in the dataset
(``from_solution``: the solution's own time, from another run, is used). :func:`markdown_table`
adds a note when at least half the picks carry the dataset's own times (then they were picked in
these timings: two runs agree bit for bit only now and then, on the timer's coarse steps) and
when any time comes from the solution.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from torch_diode._text import NO_MATPLOTLIB, plural
from torch_diode.ranking import (
    CLIFF_GUARD,
    DIVERSITY,
    check_min_num_warps,
    check_penalty,
    enough_warps,
    model_order,
    order_of,
)
from torch_diode.records import Choice, Problem

if TYPE_CHECKING:
    from torch_diode.dataset import Dataset
    from torch_diode.model import DiodeModel

log = logging.getLogger(__name__)

KS: tuple[int, ...] = (1, 3, 5, 10)
#: Where the time of stock's pick comes from (``ProblemEval.stock_source``; module docstring).
STOCK_TIME_SOURCES: tuple[str, ...] = ("same_time_here", "other_time_here", "from_solution")
SOLUTION_FORMAT = "torch-diode-max-autotune-solution"
SOLUTION_VERSION = 1


@dataclass(frozen=True)
class ProblemEval:
    """One problem's choices with measured and predicted times (parallel arrays)."""

    problem: Problem
    choices: Sequence[Choice]
    measured_us: np.ndarray  # [C] float64
    predicted_log_us: np.ndarray  # [C] (natural log)
    stock_us: float | None = None  # measured time of stock max-autotune's pick
    aten_us: float | None = None  # measured time of the ATen choice
    oracle_us: float | None = None  # best measured time of the whole space, when some choices are not candidates
    order: np.ndarray | None = None  # [C] the model's order (ranking.order_of); None: by prediction
    stock_source: str | None = None  # one of STOCK_TIME_SOURCES when stock_us is known

    def ranked(self) -> np.ndarray:
        """The model's order of ``choices``: ``order``, or ascending prediction where it is None."""
        return model_order(self.predicted_log_us) if self.order is None else self.order

    def with_stock(self, pick: StockPick | None) -> ProblemEval:
        """This problem with stock max-autotune's ``pick`` (None: none known): its time is this
        problem's measurement of the choice, else the pick's own ``time_us`` (``stock_source``
        says which: module docstring); the predictions and order are kept."""
        stock_us, source = None, None
        if pick is not None:
            if pick.choice in self.choices:
                stock_us = float(self.measured_us[list(self.choices).index(pick.choice)])
                source = (
                    "same_time_here" if pick.time_us is not None and pick.time_us == stock_us else "other_time_here"
                )
            elif pick.time_us is not None:
                stock_us, source = pick.time_us, "from_solution"
        return dataclasses.replace(self, stock_us=stock_us, stock_source=source)

    def with_predictions(
        self, predicted: np.ndarray, diversity: float = DIVERSITY, cliff_guard: float = CLIFF_GUARD
    ) -> ProblemEval:
        """This problem with other predicted log times, and the order made from them
        (:func:`~torch_diode.ranking.order_of`; a copy: ``dataclasses.replace`` of the predictions
        alone would keep the old order)."""
        predicted = np.asarray(predicted, dtype=np.float64)
        order = order_of(self.problem, self.choices, predicted, diversity=diversity, cliff_guard=cliff_guard)
        return dataclasses.replace(self, predicted_log_us=predicted, order=order)


# -- per-problem metrics ------------------------------------------------------------------------


def regret_at_k(
    measured: np.ndarray,
    predicted: np.ndarray,
    ks: Sequence[int] = KS,
    *,
    oracle_us: float | None = None,
    order: np.ndarray | None = None,
) -> dict[int, float]:
    """``regret@k`` of one problem for each k (k larger than the choice count means all choices),
    against ``oracle_us`` when given (the best of a space wider than the ranked choices), with the
    choices in ``order`` (default: ascending ``predicted``)."""
    order = model_order(predicted) if order is None else order
    best_prefix = np.minimum.accumulate(measured[order])  # [C]
    oracle = float(measured.min()) if oracle_us is None else min(float(oracle_us), float(measured.min()))
    return {k: float(best_prefix[min(k, len(order)) - 1]) / oracle for k in ks}


def kendall_tau(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b of two equally long arrays (ties handled as scipy's ``kendalltau``).

    Returns NaN when either array is constant or has fewer than two entries.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = len(x)
    if n < 2:
        return math.nan
    s = 0.0
    tx = ty = 0.0
    chunk = max(1, 2_000_000 // n)
    for i0 in range(0, n, chunk):
        dx = np.sign(x[i0 : i0 + chunk, None] - x[None, :])  # [c, n]
        dy = np.sign(y[i0 : i0 + chunk, None] - y[None, :])
        s += float((dx * dy).sum())
        tx += float((dx == 0).sum())
        ty += float((dy == 0).sum())
    # Each unordered pair was counted twice; the diagonal adds n ties to each count.
    n0 = n * (n - 1) / 2.0
    n1 = (tx - n) / 2.0
    n2 = (ty - n) / 2.0
    denom = math.sqrt((n0 - n1) * (n0 - n2))
    return (s / 2.0) / denom if denom > 0 else math.nan


# -- aggregation --------------------------------------------------------------------------------


#: Bootstrap draws behind each ``geomean_ci95`` (and the generator's seed: reports are reproducible).
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


def geomean_ci95(ratios: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """95% bootstrap interval (percentile method) of the geomean of ``ratios``, resampling the
    values with replacement :data:`BOOTSTRAP_RESAMPLES` times from a fixed seed; NaNs when empty."""
    logs = np.log(np.asarray(ratios, dtype=np.float64))
    if len(logs) == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    idx = rng.integers(0, len(logs), size=(BOOTSTRAP_RESAMPLES, len(logs)))
    means = logs[idx].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(np.exp(lo)), float(np.exp(hi))


def _ratio_stats(r: Sequence[float]) -> dict[str, Any]:
    a = np.asarray(r, dtype=np.float64)
    if len(a) == 0:
        return {"geomean": math.nan, "geomean_ci95": [math.nan, math.nan], "p95": math.nan, "max": math.nan}
    return {
        "geomean": float(np.exp(np.mean(np.log(a)))),
        "geomean_ci95": list(geomean_ci95(a)),
        "p95": float(np.percentile(a, 95)),
        "max": float(a.max()),
    }


def _block(evals: Sequence[ProblemEval], with_tau: bool) -> dict[str, Any]:
    regrets: dict[int, list[float]] = {k: [] for k in KS}
    taus: list[float] = []
    vs_stock: list[float] = []
    stock_sources = dict.fromkeys(STOCK_TIME_SOURCES, 0)
    vs_aten: list[float] = []
    picks_aten = 0
    for e in evals:
        order = e.ranked()
        r = regret_at_k(e.measured_us, e.predicted_log_us, oracle_us=e.oracle_us, order=order)
        for k in KS:
            regrets[k].append(r[k])
        pick = int(order[0])
        pick_us = float(e.measured_us[pick])
        picks_aten += e.choices[pick].is_aten
        if e.stock_us is not None:
            vs_stock.append(pick_us / e.stock_us)
            if e.stock_source in stock_sources:
                stock_sources[e.stock_source] += 1
        if e.aten_us is not None:
            vs_aten.append(pick_us / e.aten_us)
        if with_tau:
            t = kendall_tau(e.predicted_log_us, e.measured_us)
            if not math.isnan(t):
                taus.append(t)
    out: dict[str, Any] = {"problems": len(evals)}
    for k in KS:
        out[f"regret@{k}"] = _ratio_stats(regrets[k])
    for k in KS:
        out[f"recall@{k}"] = float(np.mean(np.asarray(regrets[k]) <= 1.0)) if evals else math.nan
    if with_tau:
        out["kendall_tau"] = {
            "mean": float(np.mean(taus)) if taus else math.nan,
            "median": float(np.median(taus)) if taus else math.nan,
        }
    for name, vals in (("vs_max_autotune", vs_stock), ("vs_aten", vs_aten)):
        blk: dict[str, Any] = {"problems": len(vals), **_ratio_stats(vals)}
        blk["no_slower_share"] = float(np.mean(np.asarray(vals) <= 1.0)) if vals else math.nan
        out[name] = blk
    out["vs_max_autotune"]["stock_time"] = stock_sources
    out["model_picks_aten_share"] = picks_aten / len(evals) if evals else math.nan
    return out


def summarize(evals: Sequence[ProblemEval], *, with_tau: bool = True) -> dict[str, Any]:
    """The metrics report: ``{"overall": {...}, "per_op": {op: {...}}}`` (see the module docstring)."""
    per_op: dict[str, list[ProblemEval]] = {}
    for e in evals:
        per_op.setdefault(e.problem.op, []).append(e)
    return {
        "overall": _block(evals, with_tau),
        "per_op": {op: _block(v, with_tau) for op, v in sorted(per_op.items())},
    }


# -- max-autotune solutions ---------------------------------------------------------------------


@dataclass(frozen=True)
class StockPick:
    choice: Choice
    time_us: float | None


def read_max_autotune_solution(
    path: str | os.PathLike[str], *, hardware: str | None = None
) -> dict[Problem, StockPick]:
    """Stock max-autotune's pick per problem, from a solution JSON file or a dataset file.

    Args:
        hardware: the GPU the picks will be scored on; a file of another GPU is refused (stock's
            picks on one GPU say nothing about another's). None: not checked.

    Raises:
        ValueError: the file is neither, or of another GPU, or a solution without its GPU, with a
            time that is not a positive finite number, or with two entries of one problem (the
            message names the file and what is wrong).
    """
    p = Path(path)
    text = None
    try:
        text = p.read_text()
        obj = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        if text is not None and f'"{SOLUTION_FORMAT}"' in text[:4096]:
            raise ValueError(
                f"{p}: a max-autotune solution that is not valid JSON ({e}); it is truncated or damaged: write it "
                "again (scripts/campaign.py writes the validation set's)"
            ) from None
        obj = None
    except OSError as e:
        raise ValueError(f"{p}: cannot read the max-autotune solution: {e.strerror or e}") from None
    if isinstance(obj, dict) and obj.get("format") == SOLUTION_FORMAT:
        if obj.get("version") != SOLUTION_VERSION:
            raise ValueError(
                f"{p}: solution version {obj.get('version')!r} is not supported (this torch-diode reads {SOLUTION_VERSION})"
            )
        theirs = obj.get("hardware")
        if not isinstance(theirs, str) or not theirs:
            what = 'has no "hardware"' if theirs is None else f'has "hardware": {json.dumps(theirs)}'
            raise ValueError(
                f"{p}: the max-autotune solution {what}, the key of the GPU its picks were made on (a pick is "
                'compared with the timings of its GPU); add it, e.g. "hardware": "NVIDIA-H200", or write the file '
                "again (scripts/campaign.py stock)"
            )
        _check_solution_hardware(p, theirs, hardware)
        out: dict[Problem, StockPick] = {}
        entry: dict[Problem, int] = {}  # the index of each problem's entry
        for i, s in enumerate(obj.get("solutions", [])):
            try:
                problem = Problem.from_dict(s["problem"])
                choice = Choice.from_dict(s["choice"])
                t = s.get("time_us")
            except KeyError as e:
                raise ValueError(f"{p}: solutions[{i}] is malformed: it has no {e}") from None
            except (AttributeError, TypeError, ValueError) as e:
                raise ValueError(f"{p}: solutions[{i}] is malformed: {e}") from None
            if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < math.inf):
                raise ValueError(
                    f"{p}: solutions[{i}]: time_us must be a positive finite number of microseconds, got {t!r}; "
                    "leave it out where the time is unknown (the dataset's time of the pick is used)"
                )
            if problem in entry:
                raise ValueError(
                    f"{p}: solutions[{entry[problem]}] and solutions[{i}] are both of problem {problem.key()}: "
                    "stock max-autotune makes one pick per problem; keep one of them"
                )
            entry[problem] = i
            out[problem] = StockPick(choice, None if t is None else float(t))
        return out
    from torch_diode.dataset import read_dataset

    try:
        ds = read_dataset(p)
    except ValueError as e:
        raise ValueError(
            f'{p}: not a max-autotune solution (no "format": "{SOLUTION_FORMAT}") and not a dataset ({e})'
        ) from None
    _check_solution_hardware(p, ds.hardware if len(ds.hardware_keys) == 1 else ds.hardware_keys, hardware)
    return max_autotune_solution_from_dataset(ds)


def _check_solution_hardware(path: Path, theirs: object, ours: str | None) -> None:
    if ours is not None and theirs is not None and theirs != ours:
        raise ValueError(
            f"{path}: stock max-autotune's picks of {theirs}, but the dataset is of {ours}: a pick is compared "
            "with the timings of the GPU it was made on; give that GPU's solution"
        )


def max_autotune_solution_from_dataset(ds: Dataset) -> dict[Problem, StockPick]:
    """The fastest record per problem of a dataset max-autotune measured (its pick)."""
    out: dict[Problem, StockPick] = {}
    for pt in ds.by_problem():
        med = pt.median_by_choice()
        cid = min(med, key=med.__getitem__)
        out[pt.problem] = StockPick(ds.choices[cid], med[cid])
    return out


def write_max_autotune_solution(
    picks: Mapping[Problem, StockPick], path: str | os.PathLike[str], *, hardware: str
) -> Path:
    """Write a solution file (the format of :func:`read_max_autotune_solution`), atomically."""
    from torch_diode._files import atomic_write

    obj = {
        "format": SOLUTION_FORMAT,
        "version": SOLUTION_VERSION,
        "hardware": hardware,
        "solutions": [
            {
                "problem": p.to_dict(),
                "choice": s.choice.to_dict(),
                **({"time_us": s.time_us} if s.time_us is not None else {}),
            }
            for p, s in picks.items()
        ],
    }
    return atomic_write(path, json.dumps(obj, indent=1) + "\n")


# -- model evaluation ---------------------------------------------------------------------------


def problem_evals(
    model: DiodeModel,
    dataset: Dataset,
    *,
    stock: Mapping[Problem, StockPick] | None = None,
    max_compile_cost: float | None = None,
    min_num_warps: int | None = None,
    diversity: float = DIVERSITY,
    cliff_guard: float = CLIFF_GUARD,
) -> list[ProblemEval]:
    """Predict every measured choice of every problem (repeated measurements: their median).

    ``max_compile_cost``: rank only the choices the choices handler would consider with the same
    option (Triton configs over that compile cost are left out, as the handler's widening leaves
    them out; no DEFAULT candidate is that costly), while regret stays measured against the best
    of the whole measured space (``oracle_us``), so leaving a fast config out counts.
    ``min_num_warps``: likewise, Triton configs of fewer warps are not ranked (the handler's option
    of that name; :func:`~torch_diode.ranking.enough_warps`), unless none would be left (no ATen
    measured), where the handler keeps them all too.
    ``diversity``, ``cliff_guard``: the model's order (``ProblemEval.order``) as
    :func:`~torch_diode.ranking.order_of` makes it with those options, as the handler does with the
    same ``DiodeOptions`` fields."""
    from torch_diode.records import compile_cost

    diversity = check_penalty(diversity, "diversity")
    cliff_guard = check_penalty(cliff_guard, "cliff_guard")
    min_num_warps = check_min_num_warps(min_num_warps)
    out = []
    for pt in dataset.by_problem():
        med = pt.median_by_choice()
        ids = list(med)
        oracle_us = None
        if max_compile_cost is not None or min_num_warps is not None:
            oracle_us = float(min(med.values()))
        if max_compile_cost is not None:
            ids = [i for i in ids if compile_cost(pt.problem, dataset.choices[i]) <= max_compile_cost]
        if min_num_warps is not None:  # as the handler: with none left (no ATen measured), all stay
            ids = [ids[j] for j in enough_warps([dataset.choices[i] for i in ids], min_num_warps)] or ids
        choices = [dataset.choices[i] for i in ids]
        measured = np.array([med[i] for i in ids], dtype=np.float64)
        pred = model.predict(pt.problem, choices)
        predicted = pred.log_time_us.astype(np.float64)
        aten = [measured[j] for j, c in enumerate(choices) if c.is_aten]
        e = ProblemEval(
            pt.problem,
            choices,
            measured,
            predicted,
            aten_us=float(min(aten)) if aten else None,
            oracle_us=oracle_us,
            order=order_of(pt.problem, choices, predicted, diversity=diversity, cliff_guard=cliff_guard),
        )
        out.append(e.with_stock(stock.get(pt.problem)) if stock is not None else e)
    return out


def evaluate_model(
    model: DiodeModel,
    dataset: Dataset,
    *,
    stock: Mapping[Problem, StockPick] | None = None,
    max_compile_cost: float | None = None,
    min_num_warps: int | None = None,
    diversity: float = DIVERSITY,
    cliff_guard: float = CLIFF_GUARD,
) -> tuple[dict[str, Any], list[ProblemEval]]:
    """The full ``validate-max-autotune`` report of ``model`` on ``dataset`` (``max_compile_cost``,
    ``min_num_warps``, ``diversity``, ``cliff_guard``: see :func:`problem_evals`).

    Raises:
        ValueError: ``stock`` has no pick of any problem ``dataset`` measured (picks of another
            dataset's problems), or an option is out of range.
    """
    min_num_warps = check_min_num_warps(min_num_warps)
    if stock is not None and picks_of_other_problems(dataset, stock):
        raise ValueError(
            f"no problem of the max-autotune solution is in the dataset (solution: {plural(len(stock), 'problem')}, "
            f"dataset: {plural(len(dataset.measured_problems()), 'measured problem')}): its picks are of another dataset's problems; pass stock's picks of this "
            "dataset's (`diode collect-problems --from <this dataset>` on the GPU, or scripts/campaign.py stock)"
        )
    evals = problem_evals(
        model,
        dataset,
        stock=stock,
        max_compile_cost=max_compile_cost,
        min_num_warps=min_num_warps,
        diversity=diversity,
        cliff_guard=cliff_guard,
    )
    report = {
        **report_identity(model, dataset, problems=len(evals)),
        "definitions": "README.md#metrics (the torch-diode repository) and torch_diode.evaluate; p95 = numpy linear-interpolation percentile",
        "candidates": {"max_compile_cost": max_compile_cost, "min_num_warps": min_num_warps},
        "order": {"diversity": diversity, "cliff_guard": cliff_guard},
        **summarize(evals),
    }
    if stock is not None and report["overall"]["vs_max_autotune"]["problems"] == 0:
        log.warning("no problem of the dataset has a max-autotune pick; vs_max_autotune is empty")
    return report, evals


def picks_of_other_problems(dataset: Dataset, stock: Mapping[Problem, StockPick]) -> bool:
    """Whether stock's picks ``stock`` are of none of the problems ``dataset`` measured (it measured
    some): picks of another dataset, which :func:`evaluate_model` refuses."""
    measured = dataset.measured_problems()
    return bool(measured) and measured.isdisjoint(stock)


def report_identity(model: DiodeModel, dataset: Dataset, *, problems: int) -> dict[str, Any]:
    """What a report measured, under the same keys in every report (``validate-max-autotune``'s
    and ``validate-model``'s): ``hardware`` (the model's GPU key), ``model`` (its file's sha256 and
    its architecture), ``dataset`` (its records, the ``problems`` evaluated, its hardware keys) and
    ``trained_shapes`` (:func:`trained_shapes_in`)."""
    return {
        "hardware": model.hardware,
        "model": {
            "sha256": model.model_hash,
            **model.arch.to_dict(),
            **({"screen": model.screen.arch.to_dict()} if model.screen is not None else {}),
        },
        "dataset": {"records": len(dataset), "problems": problems, "hardware": dataset.hardware_keys},
        "trained_shapes": trained_shapes_in(model, dataset)[1],
    }


def trained_shapes_in(model: DiodeModel, dataset: Dataset) -> tuple[list[Problem], dict[str, Any]]:
    """The measured problems of ``dataset`` that have the shape of a problem ``model`` was trained
    on (op, sizes and dtype, in any layout: figures over them are not held out), sorted, and the
    reports' ``trained_shapes`` block: ``listed`` (whether the model's file lists its training
    shapes; files written before session 83 do not, and then nothing else is known), ``complete``
    (False: it started from a file that lists none, so a problem not found may still be trained)
    and ``problems`` (how many were found)."""
    shapes = model.trained_shapes
    if shapes is None:
        return [], {"listed": False}
    trained = sorted((p for p in dataset.measured_problems() if p in shapes), key=str)
    return trained, {"listed": True, "complete": shapes.complete, "problems": len(trained)}


def trained_shapes_note(block: Mapping[str, Any] | None) -> str:
    """What a report's ``trained_shapes`` block means for its figures, as a line (or "")."""
    if not block:
        return ""
    if not block.get("listed"):
        return "The model file does not list the shapes it was trained on: whether these problems are held out is not checked.\n"
    n, excluded = block["problems"], block.get("excluded", 0)
    lines = []
    if n:
        lines.append(
            f"{plural(n, 'problem')} of the dataset {'has' if n == 1 else 'have'} the shape of a problem the model was "
            "trained on (op, sizes and dtype, in any layout): these figures are not held out (--exclude-trained "
            "scores the rest)."
        )
    if excluded:
        lines.append(
            f"{plural(excluded, 'problem')} of the dataset with the shape of a problem the model was trained on "
            f"{'was' if excluded == 1 else 'were'} left out (--exclude-trained)."
        )
    if not block["complete"]:
        lines.append(
            "The model's file lists only part of its training shapes (it started from a file that lists none): "
            + ("the others" if n else "these problems")
            + " may have been trained on too."
        )
    return "".join(line + "\n" for line in lines)


@dataclass(frozen=True)
class RegressionStats:
    """``validate-model``: pointwise accuracy of predicted log time."""

    rows: int
    mse: float  # of natural-log time
    rmse: float
    rmse_exp: float  # exp(rmse): typical multiplicative error (1.10 = within x/÷ 1.10)
    worst: list[dict[str, Any]]


def regression_stats(evals: Iterable[ProblemEval], *, top_n_worst: int = 10) -> RegressionStats:
    errs: list[np.ndarray] = []
    worst: list[tuple[float, Problem, Choice, float, float]] = []
    for e in evals:
        err = e.predicted_log_us - np.log(e.measured_us)
        errs.append(err)
        if top_n_worst:
            for j in np.argsort(-np.abs(err))[:top_n_worst].tolist():
                worst.append(
                    (
                        abs(float(err[j])),
                        e.problem,
                        e.choices[j],
                        float(np.exp(e.predicted_log_us[j])),
                        float(e.measured_us[j]),
                    )
                )
    all_err = np.concatenate(errs) if errs else np.zeros(0)
    mse = float(np.mean(all_err**2)) if len(all_err) else math.nan
    worst.sort(key=lambda w: -w[0])
    return RegressionStats(
        rows=len(all_err),
        mse=mse,
        rmse=math.sqrt(mse),
        rmse_exp=math.exp(math.sqrt(mse)),
        worst=[
            {"problem": p.key(), "choice": c.key(), "predicted_us": pr, "measured_us": me, "ratio": pr / me}
            for _, p, c, pr, me in worst[:top_n_worst]
        ],
    )


def regression_report(
    model: DiodeModel, dataset: Dataset, *, max_compile_cost: float | None = None, top_n_worst: int = 10
) -> dict[str, Any]:
    """The ``validate-model`` report of ``model`` on ``dataset``: what was measured (the keys of
    :func:`report_identity`, as in ``validate-max-autotune``'s report), which choices were predicted
    (``candidates.max_compile_cost``: Triton configs over that compile cost are left out, as the
    choices handler leaves them out; see :func:`problem_evals`) and the :class:`RegressionStats`
    of those predictions (``rows``, ``mse``, ``rmse``, ``rmse_exp``, ``worst``)."""
    evals = problem_evals(model, dataset, max_compile_cost=max_compile_cost)
    stats = regression_stats(evals, top_n_worst=top_n_worst)
    return {
        **report_identity(model, dataset, problems=len(evals)),
        "candidates": {"max_compile_cost": max_compile_cost},
        **dataclasses.asdict(stats),
    }


# -- writers ------------------------------------------------------------------------------------


def _fmt(v: Any) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


def markdown_table(report: Mapping[str, Any]) -> str:
    """A markdown table of the report: one row for ``overall`` and one per op."""
    head = (
        "| scope | problems | regret@1 geomean / p95 / max | regret@3 geomean | regret@5 geomean / p95 / max "
        "| regret@10 geomean | recall@1 | recall@5 | Kendall tau (mean) | vs max-autotune (geomean, no-slower share) "
        "| vs ATen (geomean) |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    scopes = [("overall", report["overall"])] + [(op, b) for op, b in report.get("per_op", {}).items()]
    for name, b in scopes:
        r1, r5 = b["regret@1"], b["regret@5"]
        vs, va = b["vs_max_autotune"], b["vs_aten"]
        tau = b.get("kendall_tau", {}).get("mean", math.nan)
        rows.append(
            f"| {name} | {b['problems']} | {_fmt(r1['geomean'])} / {_fmt(r1['p95'])} / {_fmt(r1['max'])} "
            f"| {_fmt(b['regret@3']['geomean'])} | {_fmt(r5['geomean'])} / {_fmt(r5['p95'])} / {_fmt(r5['max'])} "
            f"| {_fmt(b['regret@10']['geomean'])} | {_fmt(b['recall@1'])} | {_fmt(b['recall@5'])} | {_fmt(tau)} "
            f"| {_fmt(vs['geomean'])} ({plural(vs['problems'], 'problem')}, {_fmt(vs['no_slower_share'])}) "
            f"| {_fmt(va['geomean'])} |"
        )
    hw = report.get("hardware", "")
    title = f"Model vs measured timings on {hw} ({plural(report['overall']['problems'], 'problem')})\n\n" if hw else ""
    o = report["overall"]
    cis = [
        f"{label} [{_fmt(ci[0])}, {_fmt(ci[1])}]"
        for label, ci in (
            ("regret@1", o["regret@1"].get("geomean_ci95")),
            ("regret@5", o["regret@5"].get("geomean_ci95")),
            ("vs max-autotune", o["vs_max_autotune"].get("geomean_ci95")),
        )
        if ci is not None and not any(v is None or math.isnan(v) for v in ci)
    ]
    note = f"\n95% bootstrap intervals of the overall geomeans (problems resampled): {'; '.join(cis)}.\n" if cis else ""
    warps = (report.get("candidates") or {}).get("min_num_warps")
    if warps is not None:
        note += (
            f"\nmin_num_warps={warps}: Triton configs of fewer than {warps} warps were not ranked; regret is "
            "against the best of every measured choice.\n"
        )
    held = trained_shapes_note(report.get("trained_shapes"))
    note += f"\n{held}" if held else ""
    return title + head + "\n".join(rows) + "\n" + note + _stock_time_note(o["vs_max_autotune"])


def stock_picked_here(vs: Mapping[str, Any]) -> bool:
    """Whether a report's ``vs_max_autotune`` block has stock's picks made in the timings they are
    scored in: at least half of them carry the dataset's own times bit for bit (module docstring)."""
    n = vs.get("problems", 0)
    return bool(n) and 2 * (vs.get("stock_time") or {}).get("same_time_here", 0) >= n


def _stock_time_note(vs: Mapping[str, Any]) -> str:
    """What the reader of ``vs max-autotune`` should know about where stock's times come from
    (``stock_time``; module docstring); empty when nothing needs saying."""
    src, n = vs.get("stock_time") or {}, vs.get("problems", 0)
    lines = []
    if stock_picked_here(vs):
        same = src["same_time_here"]
        lines.append(
            f"Stock's pick carries this dataset's own time, bit for bit, on {same} of {plural(n, 'problem')}: the "
            "picks were made in the timings they are scored in, where the fastest of stock's candidates is low by "
            "selection, so `vs max-autotune` favours stock. Picks from a run of their own (`diode "
            "collect-problems --from <this dataset>` on the GPU, passed as --max-autotune-solution) are not biased so."
        )
    if src.get("from_solution"):
        lines.append(
            f"Stock's pick is not among this dataset's timings on {src['from_solution']} of {plural(n, 'problem')}: "
            "the solution's own time is used there, measured in another run."
        )
    return "".join(f"\n{line}\n" for line in lines)


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    raise TypeError(f"not JSON serialisable: {o!r}")


def report_json(report: Mapping[str, Any]) -> str:
    """The report as JSON (NaN written as null)."""

    def clean(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return None
        if isinstance(v, Mapping):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    return json.dumps(clean(report), indent=2, default=_json_default) + "\n"


def write_report(report: Mapping[str, Any], evals: Sequence[ProblemEval], path: str | os.PathLike[str]) -> list[Path]:
    """Write ``path`` (JSON), a markdown table beside it (``.md``), both atomically, and, when
    matplotlib is installed, a PNG (``.png``) with predicted-vs-measured times and the regret
    distribution.

    Returns:
        The paths written.
    """
    from torch_diode._files import atomic_write

    out = atomic_write(path, report_json(report))
    written = [out, atomic_write(out.with_suffix(".md"), markdown_table(report))]
    png = plot_report(evals, out.with_suffix(".png"), title=str(report.get("hardware", "")))
    if png is not None:
        written.append(png)
    return written


RATIO_TICKS = (1, 1.02, 1.05, 1.1, 1.2, 1.3, 1.5, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000)


def ratio_axis(axis: Any) -> None:
    """Label a log-scaled matplotlib axis of time ratios (regret) with plain numbers (1.05, 1.2, 2)
    instead of matplotlib's ``1.2 x 10^0``, thinned so that labels do not overlap at any range."""
    import matplotlib.ticker

    class RatioLocator(matplotlib.ticker.Locator):
        def __call__(self) -> Sequence[float]:
            if self.axis is None:  # not attached to an axis yet
                return []
            lo, hi = self.axis.get_view_interval()
            return self.tick_values(lo, hi)

        def tick_values(self, vmin: float, vmax: float) -> Sequence[float]:
            lo, hi = sorted((max(vmin, 1e-12), max(vmax, 1e-12)))
            span = math.log(hi / lo) or 1.0
            ticks: list[float] = []
            for t in RATIO_TICKS:
                if lo <= t <= hi and (not ticks or math.log(t / ticks[-1]) >= 0.08 * span):
                    ticks.append(t)
            if len(ticks) < 2:  # a narrow range: evenly spaced plain values instead
                return [float(t) for t in matplotlib.ticker.MaxNLocator(4).tick_values(lo, hi)]
            return ticks

    axis.set_major_locator(RatioLocator())
    axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def plot_report(evals: Sequence[ProblemEval], path: str | os.PathLike[str], *, title: str = "") -> Path | None:
    """Predicted vs measured time (log-log) and the CDF of regret@1/@5. Needs matplotlib (the
    ``plot`` extra); without it, logs how to install it and returns None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning(NO_MATPLOTLIB)
        return None
    rng = np.random.default_rng(0)
    meas = np.concatenate([e.measured_us for e in evals]) if evals else np.zeros(0)
    pred = np.exp(np.concatenate([e.predicted_log_us for e in evals])) if evals else np.zeros(0)
    if len(meas) > 20_000:
        sel = rng.choice(len(meas), 20_000, replace=False)
        meas, pred = meas[sel], pred[sel]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    ax1.scatter(meas, pred, s=2, alpha=0.3)
    if len(meas):
        lo, hi = float(min(meas.min(), pred.min())), float(max(meas.max(), pred.max()))
        ax1.plot([lo, hi], [lo, hi], "k--", lw=1)
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xlabel("measured time (us)")
    ax1.set_ylabel("predicted time (us)")
    ax1.set_title("predicted vs measured")
    for k in (1, 5):
        r = np.sort(
            [
                regret_at_k(e.measured_us, e.predicted_log_us, (k,), oracle_us=e.oracle_us, order=e.ranked())[k]
                for e in evals
            ]
        )
        ax2.plot(r, np.arange(1, len(r) + 1) / max(len(r), 1), label=f"regret@{k}")
    ax2.set_xscale("log")
    ratio_axis(ax2.xaxis)
    ax2.set_xlabel("regret (time of best in top-k / oracle)")
    ax2.set_ylabel("share of problems")
    ax2.set_title("regret distribution (CDF)")
    ax2.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
