"""``DiodeInductorChoices``: Inductor's choices handler with learned GEMM config selection.

For each mm/addmm/bmm/baddbmm lowering, Inductor calls ``_finalize_template_configs`` with lazy
generators of candidate configs (KTCs) per template. This handler

1. widens the Triton candidates to Inductor's EXHAUSTIVE space, for this call only
   (``config.patch`` around the enumeration; the user's config is left as it was). The KTCs are
   built as ``get_ktc`` builds them, from the kwargs of :func:`compat.mm_template_kwargs`, which
   evaluates Inductor's symbolic ``EVEN_K`` once per ``BLOCK_K`` instead of once per config
   (about half the hook's CPU time otherwise); heuristics it does not mirror go through
   ``get_ktc``;
2. returns the measured best choices of an exact hit in the kernel lookup table, if one is set
   (with ATen beside them where none is sure to fit in the GPU's shared memory:
   :func:`shared_memory_fallback`);
3. otherwise scores every Triton candidate and ATen in ONE batched ``model.predict`` call, and
   keeps the first ``top_k_configs`` Triton configs of the model's order (``torch_diode.ranking``:
   by prediction, one-warp configs on misaligned operands held back by ``cliff_guard``, a tile's
   ``num_stages`` variants spread out by ``diversity``) predicted within ``performance_threshold``
   of the best prediction, plus ATen unless the model is confident ATen loses and a single Triton
   config is kept (see :func:`select`).

Inductor then benchmarks only what is returned, and nothing when one choice is left. KTCs are
returned as Inductor's heuristic built them: kwargs (``EVEN_K``, ``ALLOW_TF32``,
``USE_FAST_ACCUM`` ...) are never rewritten.

Templates that are neither Triton nor ATen (``decompose_k``, ``contiguous_mm``,
``contiguous_addmm``: subgraph templates Inductor adds in special regimes) are passed through
unscored: the training data (the exhaustive Triton space plus ATen) does not cover them, so the
model cannot rank them, and Inductor benchmarks them as it would without torch-diode.

The widening patches ``max_autotune_gemm_search_space`` for the duration of the enumeration
only. From torch 2.12 config overrides are per thread, so nothing else sees it; on 2.10/2.11 the
patch is process-wide for those few milliseconds, and a compile running concurrently in another
thread could enumerate the exhaustive space too (it would only autotune more).

In ``tuned_addmm`` from torch 2.12, ATen gets its own earlier hook call and the Triton templates
a later one (2.13 adds a ``contiguous_addmm`` call between them). The ATen call holds
``aten::addmm`` alone on a 1-D bias (``nn.Linear``), and ``aten::bias_addmm`` too on a 2-D bias
broadcast along rows; of that pair the handler leaves out the variant the model confidently
predicts slower, where that call is trusted, as in a single call. In the Triton call the handler
scores the ATen choices the earlier call kept (a stand-in ``aten::addmm`` where none is known)
beside the Triton configs, so the same rule applies: when the model is confident ATen wins, no
Triton config is returned and ATen (from the other call) runs, without benchmarking where it is
the only choice. ATen cannot be left out there: its call came first. So where the model keeps
one Triton config, Inductor benchmarks it against ATen (on torch 2.10 / 2.11 one call holds both,
and the handler can keep the Triton config alone). The statistics count such a lowering once,
at its last call.

Any exception falls back to the stock behaviour for that call, counted by reason in
:meth:`DiodeInductorChoices.get_stats` and logged once per process (``enable_fallback=False``
re-raises instead). ``TORCH_DIODE_DISABLE=1`` turns the handler into stock Inductor per call.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch._inductor import config as inductor_config
from torch._inductor.choices import InductorChoices

from torch_diode._text import plural
from torch_diode.config import DiodeOptions
from torch_diode.config import config as diode_config
from torch_diode.inductor import compat
from torch_diode.inductor.convert import choices_from_ktcs, problem_from_kernel_inputs
from torch_diode.ranking import aten_variant_call_trusted, enough_warps, order_of, too_few_warps
from torch_diode.records import OPS, Choice, Problem, compile_cost

logger = logging.getLogger(__name__)

DISABLE_HINT = (
    "set TORCH_DIODE_DISABLE=1 (or call torch_diode.inductor.uninstall_diode_choices()) to turn torch-diode off"
)
#: Problems whose predictions the handler remembers (least recently used ones are forgotten).
PREDICTION_CACHE_SIZE = 2048

_logged_reasons: set[str] = set()
_log_lock = threading.Lock()


def _log_once(reason: str, message: str, *args: Any) -> None:
    """WARNING the first time a reason occurs in this process, DEBUG afterwards."""
    with _log_lock:
        first = reason not in _logged_reasons
        _logged_reasons.add(reason)
    logger.log(logging.WARNING if first else logging.DEBUG, message, *args)


class HandlerError(Exception):
    """A failure inside the handler, tagged with the fallback reason counted in the stats."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Selection:
    """Indices kept by :func:`select` and whether the model was confident."""

    triton: list[int]  # indices into the Triton candidates, best prediction first
    aten: list[int]  # indices into the ATen candidates that are kept
    confident: bool
    confidence: float = 1.0  # exp(-std) of the best prediction, in (0, 1]


def top_k_count(top_k: int | float, n: int) -> int:
    """``top_k`` as a count for ``n`` candidates: an int as is, a fraction rounded up, never 0."""
    if isinstance(top_k, float):
        return max(1, math.ceil(top_k * n))
    return max(1, int(top_k))


def select(
    triton_log: np.ndarray,
    triton_std: np.ndarray,
    aten_log: np.ndarray,
    aten_std: np.ndarray,
    options: DiodeOptions,
    *,
    keep_one_triton: bool,
    triton_order: np.ndarray | None = None,
    drop_slower_aten: bool = False,
) -> Selection:
    """The selection rule, on predicted log times (``[T]`` Triton, ``[A]`` ATen) and their stds.

    * ``best`` is the lowest predicted log time over Triton and ATen.
    * Confidence of a prediction is ``exp(-std)``. If the best one's confidence is below
      ``confidence_threshold``, keep ``2 * top_k`` and widen the threshold by ``exp(std_best)``.
    * Triton: the first ``top_k`` within ``threshold`` of ``best`` in ``triton_order``, the model's
      order of the Triton candidates (``torch_diode.ranking.order_of`` with ``options.diversity``
      and ``options.cliff_guard``); without it, the best predictions.
    * ATen: kept unless it is predicted beyond the threshold AND its own confidence reaches
      ``confidence_threshold`` AND a Triton config is kept, or, with ``drop_slower_aten``
      (``torch_diode.ranking.aten_variant_call_trusted``), whether or not one is: of addmm's two
      ATen variants (``aten::addmm``, ``aten::bias_addmm``) only the best-predicted one is then
      left where the other is clearly slower, and Inductor lowers it at once (the best prediction
      is never beyond the threshold, so something is always kept). With both kept Inductor
      benchmarks the two, and that short benchmark is erratic: on an H100 (session 42) it timed
      ``bias_addmm`` of ``addmm float16 6304x3072x768`` at 167 us, a kernel that takes 50 us,
      and the compiled graph ran ``addmm`` (94 us).
    * ``keep_one_triton``: the call has no ATen to fall back on, so keep the best Triton config
      even when none is within the threshold.
    * ``options.aten_alone_when_best``: where the best prediction is an ATen choice and confident,
      that choice alone (Inductor's autotuning over-times ATen: :class:`~torch_diode.config.DiodeOptions`);
      ``options.aten_alone_below_us``: the same where that prediction is also under so many
      microseconds (the predicted log times are of microseconds).
    * ``options.one_below_us``: where the best prediction is confident and under so many
      microseconds, that one choice alone, ATen or Triton (a Triton best: the first of
      ``triton_order``, the choice the Triton configs' selection would keep first).
    * Several choices and no ATen left: the best-predicted ATen choice is kept after all. Inductor
      defers the pick among several choices (a ``MultiTemplateBuffer``) and, when the picked
      template's input layouts conflict with a layout frozen later, falls back to an extern
      kernel; with none among the choices the compile fails (``No extern kernel detected``: seen
      on an H100 with torch 2.11, baddbmm bf16 with a strided input). A single choice is lowered
      at once and needs no fallback.
    """
    all_log = np.concatenate([triton_log, aten_log])
    all_std = np.concatenate([triton_std, aten_std])
    if all_log.size == 0:
        return Selection([], [], True, 1.0)
    if not (np.isfinite(all_log).all() and np.isfinite(all_std).all()):
        raise HandlerError("model_error", "the model predicted non-finite times or uncertainties")
    b = int(np.argmin(all_log))
    best, std_best = float(all_log[b]), float(all_std[b])
    confidence = math.exp(-std_best)
    confident = confidence >= options.confidence_threshold
    best_us, aten_best = math.exp(best), b >= len(triton_log)

    def below(limit_us: float | None) -> bool:
        return limit_us is not None and best_us < limit_us  # 0: never

    # the best choice alone: an ATen best (aten_alone_when_best, aten_alone_below_us) or any best
    # (one_below_us), where confident; a Triton best is the first of the model's order (without
    # one, the lowest prediction: b, as the stable argsort below would put first)
    if confident and (
        below(options.one_below_us)
        or (aten_best and (options.aten_alone_when_best or below(options.aten_alone_below_us)))
    ):
        if aten_best:
            return Selection([], [b - len(triton_log)], True, confidence)
        return Selection([b if triton_order is None else int(triton_order[0])], [], True, confidence)
    k = top_k_count(options.top_k_configs, len(triton_log))
    margin = math.log(options.performance_threshold)
    if not confident:
        k *= 2
        margin += std_best
    triton64 = np.asarray(triton_log, dtype=np.float64)  # float(x) - best, vectorised: same doubles
    order = np.argsort(triton64, kind="stable") if triton_order is None else np.asarray(triton_order)
    kept = [int(i) for i in order[(triton64[order] - best) <= margin + 1e-9][:k]]
    if not kept and keep_one_triton and len(order):
        kept = [int(order[0])]
    aten_kept = []
    for i in range(len(aten_log)):
        beyond = float(aten_log[i]) - best > margin + 1e-9
        sure = math.exp(-float(aten_std[i])) >= options.confidence_threshold
        if not (beyond and sure and (kept or drop_slower_aten)):
            aten_kept.append(i)
    if len(kept) > 1 and not aten_kept and len(aten_log):
        aten_kept.append(int(np.argmin(aten_log)))
    return Selection(kept, aten_kept, confident, confidence)


#: Triton templates whose shared memory :func:`fits_shared_memory` bounds (the GEMM templates
#: mm / addmm and bmm / baddbmm lower to; the persistent TMA templates, off by default, add an
#: epilogue buffer, and are never sure to fit).
SHARED_MEMORY_BOUNDED = frozenset({"triton::mm", "triton::bmm"})


def fits_shared_memory(problem: Problem, choice: Choice, limit: int) -> bool:
    """Whether a choice is sure to fit in ``limit`` bytes of shared memory a block.

    Inductor's bound of a GEMM config's shared memory (``get_shared_memory_estimation``):
    ``num_stages x (BLOCK_M x BLOCK_K + BLOCK_K x BLOCK_N) x itemsize + 128``. What Triton allocates
    is often less (one stage fewer, or fewer still), so a config over the bound may run; one within
    it always did: in the committed H100 and H200 datasets, none of the ~36,000 configs Triton
    refused for shared memory was within it. EXHAUSTIVE holds configs over the limit (on an H100 or
    H200, 227 KiB: 64x128x128 tiles with five bf16 stages need 240 KiB), which the model, trained on
    the configs that ran, cannot tell from those that run. ATen choices always fit (cuBLAS);
    Triton templates outside :data:`SHARED_MEMORY_BOUNDED`, or a config without its tile sizes,
    are never sure to (False)."""
    if choice.is_aten:
        return True
    bm, bn, bk, stages = choice.block_m, choice.block_n, choice.block_k, choice.num_stages
    if choice.template not in SHARED_MEMORY_BOUNDED or not (bm and bn and bk and stages):
        return False
    return stages * (bm * bk + bk * bn) * problem.itemsize + 128 <= limit


def _aten_kept_earlier(aten: Sequence[Any], op_name: str) -> bool:
    """addmm's Triton call on torch >= 2.12: its ATen choices came (and were kept) in a call of their own."""
    return not aten and op_name == "addmm" and compat.use_aten_gemm_kernels()


def shared_memory_fallback(
    problem: Problem,
    triton: Sequence[Choice],
    kept_triton: list[int],
    n_aten: int,
    limit: int,
    *,
    best_aten: int,
    order: Iterable[Any],
) -> tuple[list[int], list[int], bool]:
    """The kept Triton and ATen indices made safe to compile, and whether anything was added.

    Where no ATen choice is kept and no kept Triton config is sure to fit in ``limit`` bytes a
    block (:func:`fits_shared_memory`): a config Triton refuses for shared memory fails Inductor's
    benchmark (the others are used), but one kept alone is not benchmarked, and the compile fails
    ("No valid triton configs"). So the ATen choice ``best_aten`` is added or, with no ATen offered,
    the first config of ``order`` sure to fit; Inductor then benchmarks them and drops a config
    that fails. (Call it only where no ATen choice is kept.)"""
    if any(fits_shared_memory(problem, triton[i], limit) for i in kept_triton):
        return kept_triton, [], False
    if n_aten:
        return kept_triton, [best_aten], True
    spare = next((int(i) for i in order if fits_shared_memory(problem, triton[int(i)], limit)), None)
    if spare is None:  # (not kept: none kept fits)
        return kept_triton, [], False
    return [*kept_triton, spare], [], True


@functools.lru_cache(maxsize=64)
def _cuda_shared_memory(index: int) -> int | None:
    import torch

    if not torch.cuda.is_available():
        return None
    value = int(getattr(torch.cuda.get_device_properties(index), "shared_memory_per_block_optin", 0) or 0)
    return value or None


def device_shared_memory(kernel_inputs: Any) -> int | None:
    """The shared memory a block may use on the GEMM's GPU (CUDA's opt-in maximum, as Inductor's own
    shared-memory check reads it), or None where it cannot be read (no CUDA device: the CPU tests)."""
    try:
        import torch

        device = kernel_inputs.device()
        if device.type != "cuda":
            return None
        return _cuda_shared_memory(device.index if device.index is not None else torch.cuda.current_device())
    except Exception:  # a GPU that cannot say: the model file's figure is used
        return None


class _Stats:
    """Counters of one handler; thread-safe (compiles in several threads share a handler)."""

    FIELDS = (
        "calls",
        "gemm_calls",
        "model_selections",
        "lut_hits",
        "cache_hits",
        "decision_cache_hits",
        "candidates_seen",
        "candidates_kept",
        "aten_kept",
        "aten_dropped",
        "low_confidence",
        "single_choice",
        "compile_cost_skipped",
        "shared_memory_guard",
        "few_warps_skipped",
        "min_num_warps_unmet",
    )

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.fallbacks: Counter[str] = Counter()
        self.passthrough: Counter[str] = Counter()
        self.predict_time_s = 0.0
        self.widen_time_s = 0.0
        self.hook_time_s = 0.0
        self.confidence_sum = 0.0  # sum over model selections of the best prediction's confidence

    def add(self, **counts: int) -> None:
        with self.lock:
            self.counts.update(counts)

    def add_passthrough(self, reason: str) -> None:
        with self.lock:
            self.passthrough[reason] += 1

    def add_confidence(self, confidence: float) -> None:
        with self.lock:
            self.confidence_sum += confidence

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            d: dict[str, Any] = {f: int(self.counts.get(f, 0)) for f in self.FIELDS}
            d["fallbacks"] = dict(self.fallbacks)
            d["fallbacks_total"] = int(sum(self.fallbacks.values()))
            d["passthrough"] = dict(self.passthrough)
            d["predict_time_s"] = self.predict_time_s
            d["widen_time_s"] = self.widen_time_s
            d["hook_time_s"] = self.hook_time_s
            d["confidence_sum"] = self.confidence_sum
            return d


class DiodeInductorChoices(InductorChoices):
    """Inductor choices handler selecting GEMM kernel configs with a torch-diode model.

    Args:
        options: how to select (:class:`~torch_diode.config.DiodeOptions`); default: the
            process-wide :data:`torch_diode.config.config`.
        model: a loaded ``DiodeModel`` to use instead of loading ``options.model`` (it is never
            pickled: a pickled handler keeps only ``options.model``, its path or name).

    The handler is picklable (Inductor pickles it into the compile subprocess when
    ``TORCHINDUCTOR_FX_COMPILE_MODE=subprocess``): the state is the options; the model is loaded
    again, lazily, on the other side. Stats and the prediction cache start empty there.
    """

    _model: Any

    def __init__(self, options: DiodeOptions | None = None, *, model: Any = None) -> None:
        super().__init__()
        self.options = options if options is not None else diode_config.options()
        if self.options.model is None and self.options.lut is None and model is None:
            raise ValueError(
                "torch-diode needs a model: pass model=<path or registered name> (or lut=<path>), "
                "or set TORCH_DIODE_MODEL"
            )
        self._init_runtime()
        self._given_model = model
        if model is not None:
            if not callable(getattr(model, "predict", None)):
                raise TypeError(f"model: expected a torch_diode DiodeModel, got {type(model).__name__}")
            self._model = model
        self._active = True

    def _init_runtime(self) -> None:
        self._model = None
        self._uuid: str | None = None
        self._model_error: HandlerError | None = None
        self._lut: Any = None
        self._lut_loaded = False
        self._lut_error: Exception | None = None
        self._load_lock = threading.Lock()
        self._stats = _Stats()
        self._cache: OrderedDict[Any, dict[Choice, tuple[float, float]]] = OrderedDict()
        self._decisions: OrderedDict[Any, _Decision] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._split = threading.local()  # .pending: _SplitCalls of addmm's calls before its Triton call

    # -- pickling: only the options travel ------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        # The uuid rides along so that torch 2.10/2.11, which pickle the choices factory into the
        # FX-graph-cache key, get a key that changes with the model's hash too. A model object
        # given without a path travels as its model-file bytes (DiodeModel.__reduce__: the child
        # re-runs every check of load_model and never unpickles tensors).
        state: dict[str, Any] = {"options": self.options, "active": self._active, "uuid": self.uuid()}
        if self.options.model is None and self._given_model is not None:
            state["model"] = self._given_model
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        InductorChoices.__init__(self)
        self.options = state["options"]
        self._init_runtime()
        self._given_model = state.get("model")
        if self._given_model is not None:
            self._model = self._given_model
        self._active = state["active"]

    def __deepcopy__(self, memo: dict[int, Any]) -> DiodeInductorChoices:
        # torch.compile(mode=...) deep-copies Inductor's config, which holds the installed
        # handler; a copy must be the same handler (one model, one cache, one set of stats).
        return self

    def __repr__(self) -> str:
        if self.options.model is not None:
            what = f"model={self.options.model!r}"
        elif self._given_model is not None:
            what = f"model=<{getattr(self._given_model, 'hardware', '?')} model object>"
        else:
            what = f"lut={self.options.lut!r}"
        return f"DiodeInductorChoices({what}, top_k_configs={self.options.top_k_configs!r})"

    # -- identity -------------------------------------------------------------------------------
    def model_hash(self) -> str | None:
        """sha256 of the model file, or None without a model (or when it cannot be loaded)."""
        try:
            model = self._get_model()
        except HandlerError:
            return None
        try:
            return None if model is None else str(model.model_hash)
        except Exception:  # a model object of the user's without a file hash: uuid() answers all the same
            return None

    def uuid(self) -> str:
        """Changes with the torch-diode version, the model's hash and every option.

        Inductor puts it in the FX-graph-cache key (``config.inductor_choices_class``, 2.12+), so
        graphs compiled with another model, other options or no torch-diode are not reused.
        """
        if self._uuid is not None:
            return self._uuid
        from torch_diode._version import __version__

        lut_hash = None
        if self.options.lut is not None:
            try:
                with open(self.options.lut, "rb") as fh:
                    lut_hash = hashlib.sha256(fh.read()).hexdigest()
            except OSError:
                lut_hash = "unreadable"
        given = self._given_model
        key = {
            "torch_diode": __version__,
            # a model object without a hash: this process's object only (a cached graph is never reused for another)
            "model": self.model_hash()
            or (
                f"unloadable:{self.options.model}"
                if given is None
                else f"object:{type(given).__qualname__}:{id(given)}"
            ),
            "lut": lut_hash,
            "options": self.options.to_dict(),
        }
        self._uuid = "torch-diode-" + hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
        return self._uuid

    # -- stats ----------------------------------------------------------------------------------
    def get_stats(self) -> dict[str, Any]:
        """Counters since creation (or :meth:`reset_stats`).

        Keys: ``calls`` (hook calls), ``gemm_calls`` (calls with Triton candidates the handler
        acted on), ``model_selections``, ``lut_hits``, ``cache_hits`` (predictions reused), ``decision_cache_hits`` (a static problem
        seen before: its selection is replayed without enumerating or predicting),
        ``candidates_seen`` / ``candidates_kept`` (Triton + ATen, after widening),
        ``compile_cost_skipped`` (widened configs left out by ``max_compile_cost``),
        ``few_warps_skipped`` (Triton configs left out by ``min_num_warps``, in a selection or a
        stock fallback) and ``min_num_warps_unmet`` (GEMMs whose configs all stayed: none had
        enough warps, no ATen); a replayed decision counts these and ``compile_cost_skipped`` again,
        ``shared_memory_guard`` (selections, the model's or a lookup-table hit's, where no kept
        choice was sure to fit in shared memory, so one that is was added:
        :func:`shared_memory_fallback`),
        ``aten_kept`` / ``aten_dropped``, ``low_confidence``, ``single_choice`` (GEMM lowerings
        left with one choice: nothing to benchmark; addmm's separate calls on torch >= 2.12 count
        as one lowering, with the candidates and ATen choices of its earlier calls),
        ``fallbacks`` (reason -> count) and ``fallbacks_total``,
        ``passthrough`` (reason -> count of calls left to stock without being a failure),
        ``predict_time_s`` (model calls), ``widen_time_s`` (enumerating Inductor's candidates,
        widened or not), ``hook_time_s`` (the whole hook) and
        ``confidence_sum`` (sum over model selections of ``exp(-std)`` of the best prediction;
        divided by ``model_selections`` it is the average confidence).
        """
        return self._stats.snapshot()

    def reset_stats(self) -> None:
        self._stats = _Stats()

    # -- lazy resources -------------------------------------------------------------------------
    def preload(self) -> None:
        """Load the model and the lookup table now instead of at the first GEMM, raising what loading
        raises (:func:`~torch_diode.inductor.create_diode_choices` and ``install_diode_choices`` call it,
        so a wrong model or table is an error there, not a silent stock fallback in the compile).

        Raises:
            ModelNotFoundError: a model path that does not exist, or an unknown name.
            ModelFormatError / ChecksumMismatchError: a corrupt, foreign or altered model file.
            torch_diode.hub.HubError: a registered model whose file is not downloaded
                (``torch_diode_models.register_model`` fetches it).
            DatasetFormatError / SchemaVersionError: a lookup table that cannot be read.
        """
        with self._load_lock:
            if self._model is None and self.options.model is not None:
                self._model = _load_model(self.options.model)
                self._model_error = None
            if self.options.lut is not None and not self._lut_loaded:
                from torch_diode.lut import KernelLUT

                self._lut = KernelLUT.load(self.options.lut)
                self._lut_loaded, self._lut_error = True, None

    def _get_model(self) -> Any:
        if self._model is not None or self.options.model is None:
            return self._model
        if self._model_error is not None:
            raise self._model_error
        with self._load_lock:
            if self._model is None and self._model_error is None:
                try:
                    self._model = _load_model(self.options.model)
                except Exception as e:  # the one catch-all: a model that cannot load means stock behaviour
                    self._model_error = HandlerError(
                        "model_load_error", f"cannot load model {self.options.model!r}: {e}"
                    )
        if self._model_error is not None:
            raise self._model_error
        return self._model

    def _get_lut(self) -> Any:
        if self._lut_loaded or self.options.lut is None:
            return self._lut
        with self._load_lock:
            if not self._lut_loaded and self._lut_error is None:
                from torch_diode.lut import KernelLUT

                try:
                    self._lut = KernelLUT.load(self.options.lut)
                    self._lut_loaded = True
                except Exception as e:
                    self._lut_error = e
        if self._lut_error is not None:
            raise self._lut_error  # remembered: every later GEMM falls back the same way, not only the first
        return self._lut

    # -- the hook -------------------------------------------------------------------------------
    def _finalize_template_configs(
        self,
        template_choices: dict[str, Any],
        kernel_inputs: Any,
        templates: list[Any],
        op_name: str,
        kwarg_overrides: dict[str, dict[str, Any]] | None = None,
    ) -> list[Any]:
        t0 = time.perf_counter()
        self._stats.add(calls=1)
        split: _SplitCalls | None = None
        out: list[Any] = []
        try:
            split = self._split_calls(kernel_inputs, templates, op_name)
            skip = self._skip_reason(kernel_inputs, templates, op_name)
            if skip is not None:
                self._stats.add_passthrough(skip)
                out = super()._finalize_template_configs(
                    template_choices, kernel_inputs, templates, op_name, kwarg_overrides
                )
                return out
            out = self._select_ktcs(template_choices, kernel_inputs, templates, op_name, kwarg_overrides or {}, split)
            return out
        except Exception as e:
            reason = e.reason if isinstance(e, HandlerError) else "internal_error"
            with self._stats.lock:
                self._stats.fallbacks[reason] += 1
            if not self.options.enable_fallback:
                raise
            _log_once(
                reason,
                "torch-diode: %s for %s (%s: %s); using Inductor's stock autotuning for it; %s",
                reason.replace("_", " "),
                op_name,
                type(e).__name__,
                e,
                DISABLE_HINT,
            )
            # The generators may be partly consumed: rebuild them as get_template_configs does.
            fresh: dict[str, Any] = {
                t.uid: self.get_ktc(kernel_inputs, t, op_name, (kwarg_overrides or {}).get(t.uid, {}))
                for t in templates
            }
            if self.options.min_num_warps is not None:  # the user's ask holds in stock autotuning too
                fresh = self._fallback_without_few_warps(fresh, op_name)
            out = super()._finalize_template_configs(fresh, kernel_inputs, templates, op_name, kwarg_overrides)
            return out
        finally:
            if split is not None:
                try:
                    if not split.last_call:
                        split.add(out)
                    elif (
                        self._active
                        and not diode_config.disable
                        and kernel_inputs.device_type in self.options.device_types
                    ):
                        self._count_split(split, out)
                except Exception as e:  # statistics only: never a reason for a compile to fail
                    logger.debug("torch-diode: addmm's split calls not counted: %s", e)
            dt = time.perf_counter() - t0
            with self._stats.lock:
                self._stats.hook_time_s += dt

    def _split_calls(self, kernel_inputs: Any, templates: Sequence[Any], op_name: str) -> _SplitCalls | None:
        """The record of this addmm lowering's earlier hook calls: torch >= 2.12 asks for ATen (and
        2.13 for ``contiguous_addmm``) in calls of their own before the last call, the Triton
        templates' (whose list can be empty). An earlier call starts or extends the record
        (returned, for the hook to add its result to); the last call takes it (None when there is
        none: every other op, and torch 2.10 / 2.11's single addmm call), and its statistics
        count the whole lowering. Calls are told apart by their operands: the calls of one
        lowering share ``mat1`` and ``mat2`` and run one after the other in one thread."""
        if op_name != "addmm":
            return None
        try:
            nodes = kernel_inputs.nodes()
            key = (
                id(nodes[getattr(kernel_inputs, "_mat1_idx", -2)]),
                id(nodes[getattr(kernel_inputs, "_mat2_idx", -1)]),
            )
        except Exception:  # not an MMKernelInputs: no pairing
            return None
        pending: _SplitCalls | None = getattr(self._split, "pending", None)
        if not templates or any(_is_triton(t.uid) for t in templates):
            self._split.pending = None
            if pending is None or pending.key != key:
                return None
            pending.last_call = True
            return pending
        if pending is None or pending.key != key:
            pending = self._split.pending = _SplitCalls(key)
        return pending

    def _skip_reason(self, kernel_inputs: Any, templates: Sequence[Any], op_name: str) -> str | None:
        if not self._active:
            return "uninstalled"
        if diode_config.disable:
            return "disabled"
        if op_name not in OPS:
            return "unsupported_op"
        if not any(_is_triton(t.uid) for t in templates) and not _aten_variants_call(templates, op_name):
            return "no_triton_candidates"
        if kernel_inputs.device_type not in self.options.device_types:
            return "device_type"
        return None

    def _candidates(
        self,
        template_choices: dict[str, Any],
        kernel_inputs: Any,
        templates: Sequence[Any],
        op_name: str,
        overrides: dict[str, Any],
    ) -> dict[str, list[Any]]:
        """Every template's KTCs, the Triton ones widened to the exhaustive space when asked
        (and enumerated by :meth:`_triton_ktcs` where it applies, else by Inductor)."""
        out: dict[str, list[Any]] = {}
        widen = self._widens()
        for t in templates:
            if not _is_triton(t.uid):
                out[t.uid] = list(template_choices.get(t.uid, ()))
                continue
            over = overrides.get(t.uid, {})
            # Consume inside the patch: the heuristic reads the search space lazily. config.patch
            # is thread-local from 2.12 and restored on exit; the user's setting is unchanged.
            with inductor_config.patch(max_autotune_gemm_search_space="EXHAUSTIVE") if widen else nullcontext():
                ktcs = self._triton_ktcs(kernel_inputs, t, op_name, over)
                if ktcs is None:  # Inductor's own enumeration; without widening, the one it passed in
                    gen = self.get_ktc(kernel_inputs, t, op_name, over) if widen else template_choices.get(t.uid, ())
                    ktcs = list(gen)
            out[t.uid] = ktcs
        return out

    def _triton_ktcs(
        self, kernel_inputs: Any, template: Any, op_name: str, overrides: dict[str, Any]
    ) -> list[Any] | None:
        """``list(self.get_ktc(...))`` for a Triton template in the current search space, built as
        ``InductorChoices.get_ktc`` builds it but enumerated by :func:`compat.mm_template_kwargs`
        (``EVEN_K`` evaluated once per ``BLOCK_K``); ``None`` where that does not apply (a
        subclass with its own ``get_ktc``, another heuristic): the caller enumerates as usual."""
        if type(self).get_ktc is not InductorChoices.get_ktc:
            return None
        from torch._inductor.kernel_template_choice import make_ktc_generator

        heuristic = compat.template_heuristic(template.uid, kernel_inputs.device_type, op_name)
        configs = compat.mm_template_kwargs(heuristic, kernel_inputs, op_name)
        if configs is None:
            return None
        inputs = heuristic.adjust_kernel_inputs(kernel_inputs, op_name)
        extra_kwargs = heuristic.get_extra_kwargs(kernel_inputs, op_name)
        params_cls = compat.template_heuristics_module("params").DictKernelTemplateParams
        return list(
            make_ktc_generator(
                template=template,
                cs=(params_cls(kw) for kw in configs),
                extra_kwargs=extra_kwargs,
                overrides=overrides,
                layout=kernel_inputs.output_layout(),
                inputs=inputs,
            )
        )

    def _widens(self) -> bool:
        """Whether this call widens the Triton candidates beyond what Inductor enumerated itself."""
        return self.options.search_space == "EXHAUSTIVE" and (
            str(inductor_config.max_autotune_gemm_search_space).upper() != "EXHAUSTIVE"
        )

    def _select_ktcs(
        self,
        template_choices: dict[str, Any],
        kernel_inputs: Any,
        templates: Sequence[Any],
        op_name: str,
        overrides: dict[str, Any],
        split: _SplitCalls | None = None,
    ) -> list[Any]:
        try:
            problem = problem_from_kernel_inputs(kernel_inputs, op_name)
        except ValueError as e:
            raise HandlerError("unsupported_problem", str(e)) from e
        shared_memory = device_shared_memory(kernel_inputs)
        key = (
            self._decision_key(kernel_inputs, templates, op_name, overrides, shared_memory)
            if self.options.cache_predictions
            else None
        )
        if key is not None and split is not None:  # the addmm stand-ins: what ATen's own call kept
            key = (*key, split.aten)
        if key is not None:
            with self._cache_lock:
                decision = self._decisions.get(key)
            if decision is not None:
                result = self._replay(decision, template_choices, templates)
                if result is not None:
                    self._stats.add(
                        decision_cache_hits=1, gemm_calls=1, candidates_seen=decision.seen, **dict(decision.skipped)
                    )
                    self._count_kept(decision, result, split)
                    return result
        t_widen = time.perf_counter()
        cands = self._candidates(template_choices, kernel_inputs, templates, op_name, overrides)
        with self._stats.lock:
            self._stats.widen_time_s += time.perf_counter() - t_widen
        triton = [ktc for t in templates if _is_triton(t.uid) for ktc in cands[t.uid]]
        aten = [ktc for t in templates if _is_aten(t.uid) for ktc in cands[t.uid]]
        if not triton:
            if _aten_variants_call(templates, op_name) and len(aten) > 1:
                return self._aten_variants(problem, templates, cands, aten, split)
            self._stats.add_passthrough("no_triton_candidates")
            return [ktc for t in templates for ktc in cands[t.uid]]
        try:
            triton_choices = choices_from_ktcs(triton)
            aten_choices = choices_from_ktcs(aten)
        except ValueError as e:
            raise HandlerError("unconvertible_choice", str(e)) from e
        skipped: dict[str, int] = {}  # what the candidate filters left out, counted again on a replay
        if self.options.max_compile_cost is not None and self._widens():  # only widened configs are left out
            triton, triton_choices, skipped = self._affordable(
                problem, template_choices, templates, triton, triton_choices
            )
        if self.options.min_num_warps is not None:
            triton, triton_choices, warps = self._enough_warps(problem, triton, triton_choices, aten, op_name)
            skipped.update(warps)
        self._stats.add(gemm_calls=1, candidates_seen=len(triton) + len(aten))

        keep = self._lut_selection(problem, triton_choices, aten_choices, op_name=op_name, shared_memory=shared_memory)
        if keep is None:
            keep = self._model_selection(
                problem,
                op_name,
                triton_choices,
                aten_choices,
                split.aten if split is not None else None,
                shared_memory=shared_memory,
            )
        kept_triton, kept_aten = keep
        kept_ids = {id(triton[i]) for i in kept_triton} | {id(aten[i]) for i in kept_aten}
        result = [
            ktc
            for t in templates
            for ktc in (
                cands[t.uid]
                if not (_is_triton(t.uid) or _is_aten(t.uid))
                else [x for x in cands[t.uid] if id(x) in kept_ids]
            )
        ]
        decision = _Decision(
            triton=tuple((triton[i].template.uid, triton[i].params.to_kwargs()) for i in sorted(kept_triton)),
            aten=tuple(sorted(kept_aten)),
            n_aten=len(aten),
            seen=len(triton) + len(aten),
            skipped=tuple(sorted(skipped.items())),
        )
        self._stats.add(**skipped)  # here, once the selection stands (a failure's fallback counts its own)
        if key is not None:
            with self._cache_lock:
                self._decisions[key] = decision
                while len(self._decisions) > PREDICTION_CACHE_SIZE:
                    self._decisions.popitem(last=False)
        self._count_kept(decision, result, split)
        return result

    def _aten_variants(
        self,
        problem: Problem,
        templates: Sequence[Any],
        cands: dict[str, list[Any]],
        aten: list[Any],
        split: _SplitCalls | None,
    ) -> list[Any]:
        """addmm's ATen-only call (torch >= 2.12; its Triton configs come in a later call): of
        ``aten::addmm`` and ``aten::bias_addmm``, the one the model confidently predicts over the
        threshold slower is left out where its call between them is trusted
        (``aten_variant_call_trusted``), as in a call with both (``select``'s ``drop_slower_aten``);
        a lookup-table hit naming them keeps those. Otherwise, or without a model, both stay. The
        lowering's last call counts what was kept and dropped (``_count_split``)."""
        result = [ktc for t in templates for ktc in cands[t.uid]]
        kept = None
        if aten_variant_call_trusted(problem):
            try:
                aten_choices = choices_from_ktcs(aten)
            except ValueError as e:
                raise HandlerError("unconvertible_choice", str(e)) from e
            keep = self._lut_selection(problem, [], aten_choices)
            kept = keep[1] if keep is not None else self._aten_variant_selection(problem, aten_choices)
        if kept is None:
            self._stats.add_passthrough("no_triton_candidates")
            return result
        drop = {id(x) for i, x in enumerate(aten) if i not in kept}
        if split is not None:
            split.dropped += len(drop)
        return [ktc for ktc in result if id(ktc) not in drop]

    def _aten_variant_selection(self, problem: Problem, aten: list[Choice]) -> list[int] | None:
        """The ATen variants ``select`` keeps in a call without Triton configs, or None without a
        model. The rules that keep the best choice alone (``aten_alone_*``, ``one_below_us``) are
        not applied: they compare ATen with the Triton configs, which this call does not have."""
        model = self._covered_model(problem, [])
        if model is None:
            return None
        log_t, std = self._predict(model, problem, aten)
        options = self.options.replace(aten_alone_when_best=False, aten_alone_below_us=None, one_below_us=None)
        none = np.empty(0)
        return select(none, none, log_t, std, options, keep_one_triton=False, drop_slower_aten=True).aten

    def _affordable(
        self,
        problem: Problem,
        template_choices: dict[str, Any],
        templates: Sequence[Any],
        triton: list[Any],
        triton_choices: list[Choice],
    ) -> tuple[list[Any], list[Choice], dict[str, int]]:
        """The Triton candidates without the widened configs that cost more than
        ``max_compile_cost`` to compile (and the count to add, ``compile_cost_skipped``);
        Inductor's own candidates for the call always stay."""
        cap = self.options.max_compile_cost
        assert cap is not None
        costly = [i for i, c in enumerate(triton_choices) if compile_cost(problem, c) > cap]
        if not costly:  # the usual case (every non-fp32 problem): Inductor's own list is not needed
            return triton, triton_choices, {}

        def params_key(ktc: Any) -> tuple[str, tuple[tuple[str, Any], ...]]:
            return ktc.template.uid, tuple(sorted(ktc.params.to_kwargs().items()))

        stock = {params_key(x) for t in templates if _is_triton(t.uid) for x in template_choices.get(t.uid, ())}
        dropped = {i for i in costly if params_key(triton[i]) not in stock}
        if not dropped:
            return triton, triton_choices, {}
        keep = [i for i in range(len(triton)) if i not in dropped]
        return [triton[i] for i in keep], [triton_choices[i] for i in keep], {"compile_cost_skipped": len(dropped)}

    def _enough_warps(
        self, problem: Problem, triton: list[Any], triton_choices: list[Choice], aten: list[Any], op_name: str
    ) -> tuple[list[Any], list[Choice], dict[str, int]]:
        """The Triton candidates without those of fewer than ``min_num_warps`` warps, Inductor's own
        included, and the counts to add (``few_warps_skipped``, ``min_num_warps_unmet``): see
        :meth:`_warps_rule`."""
        low = self.options.min_num_warps
        assert low is not None
        keep = enough_warps(triton_choices, low)
        counts = self._warps_rule(len(triton), len(keep), bool(aten), op_name, problem)
        if counts.get("few_warps_skipped"):
            return [triton[i] for i in keep], [triton_choices[i] for i in keep], counts
        return triton, triton_choices, counts

    def _warps_rule(
        self, n_triton: int, n_kept: int, aten_offered: bool, op_name: str, problem: Problem | None
    ) -> dict[str, int]:
        """Whether ``min_num_warps`` leaves out the ``n_triton - n_kept`` few-warp configs of a call
        (``{"few_warps_skipped": n}``), or must keep them all (``{"min_num_warps_unmet": 1}``): none
        would be left and no ATen choice is offered, here or in addmm's earlier call (torch >=
        2.12), and a compile without choices fails. ``problem``: for the log (None: a stock fallback)."""
        if n_kept == n_triton:
            return {}
        if not n_kept and not aten_offered and not _aten_kept_earlier((), op_name):
            _log_once(
                "min_num_warps_unmet",
                "torch-diode: every Triton config of %s %s has fewer than min_num_warps=%d warps and no ATen "
                "choice is offered; keeping them, since a compile without choices fails",
                op_name,
                "(stock fallback)" if problem is None else problem.key(),
                self.options.min_num_warps,
            )
            return {"min_num_warps_unmet": 1}
        return {"few_warps_skipped": n_triton - n_kept}

    def _fallback_without_few_warps(self, fresh: dict[str, Any], op_name: str) -> dict[str, Any]:
        """Stock autotuning's candidates (a fallback) under ``min_num_warps``: the same rule as a
        selection's, read from each KTC's ``num_warps`` (the fallback may be there because the
        KTCs do not convert). Anything unexpected leaves the candidates as they are."""
        low = self.options.min_num_warps or 1  # (called with the option set)
        lists = {uid: list(ktcs) for uid, ktcs in fresh.items()}
        try:
            drop = {
                id(x)
                for uid, xs in lists.items()
                if _is_triton(uid)
                for x in xs
                if too_few_warps(x.params.to_kwargs().get("num_warps"), low)
            }
            n_triton = sum(len(xs) for uid, xs in lists.items() if _is_triton(uid))
            aten_offered = any(xs for uid, xs in lists.items() if _is_aten(uid))
            counts = self._warps_rule(n_triton, n_triton - len(drop), aten_offered, op_name, None)
        except Exception as e:  # never a reason for the fallback itself to fail
            logger.debug("torch-diode: min_num_warps not applied to the fallback: %s", e)
            return lists
        self._stats.add(**counts)
        if not counts.get("few_warps_skipped"):
            return lists
        return {uid: [x for x in xs if id(x) not in drop] for uid, xs in lists.items()}

    def _count_kept(self, decision: _Decision, result: list[Any], split: _SplitCalls | None) -> None:
        self._stats.add(
            candidates_kept=len(decision.triton) + len(decision.aten),
            aten_kept=len(decision.aten),
            aten_dropped=decision.n_aten - len(decision.aten),
            single_choice=int(split is None and len(result) == 1),  # a split lowering: _count_split
        )

    def _count_split(self, split: _SplitCalls, last: list[Any]) -> None:
        """The statistics of addmm's earlier calls (torch >= 2.12), counted with its last call."""
        self._stats.add(
            candidates_seen=split.n + split.dropped,
            candidates_kept=split.n,
            aten_kept=split.n_aten,
            aten_dropped=split.dropped,
            single_choice=int(split.n + len(last) == 1),
        )

    @staticmethod
    def _decision_key(
        kernel_inputs: Any, templates: Sequence[Any], op_name: str, overrides: dict[str, Any], shared_memory: int | None
    ) -> Any:
        """What a selection depends on, or None when shapes are dynamic (EVEN_K and the scaled
        block sizes then depend on the graph's guards, so the decision is not reused)."""
        shapes = kernel_inputs.shapes_symbolic()
        strides = kernel_inputs.strides_symbolic()
        if not all(_is_static(x) for dims in (*shapes, *strides) for x in dims):
            return None
        try:
            over = tuple(sorted((uid, tuple(sorted(kw.items()))) for uid, kw in overrides.items()))
            hash(over)
        except TypeError:
            return None
        return (
            op_name,
            kernel_inputs.device_type,
            shared_memory,  # the guard's limit: GPUs of one process may differ
            tuple(t.uid for t in templates),
            over,
            tuple(tuple(int(x) for x in dims) for dims in shapes),
            tuple(tuple(int(x) for x in dims) for dims in strides),
            tuple(str(d) for d in kernel_inputs.dtypes()),
            str(kernel_inputs.out_dtype()),
            str(inductor_config.max_autotune_gemm_search_space),
            inductor_config.test_configs.max_mm_configs,
            bool(inductor_config.max_autotune_prune_choices_based_on_shared_mem),
            # what else decides the kept set or the kwargs it replays: whether ATen is offered (the
            # addmm stand-in), and TF32 (a cached ALLOW_TF32 must not outlive the setting)
            compat.use_aten_gemm_kernels(),
            _tf32_state(),
        )

    @staticmethod
    def _replay(decision: _Decision, template_choices: dict[str, Any], templates: Sequence[Any]) -> list[Any] | None:
        """The KTCs of a cached decision, without enumerating the exhaustive space again.

        Each kept Triton config is rebuilt from the first KTC of its template's generator (same
        template, extra_kwargs, layout and inputs: they do not depend on the search space) and
        the exact kwargs the original KTC had, as ``make_ktc_generator`` builds KTCs.
        """
        from torch._inductor.kernel_template_choice import KernelTemplateChoice

        params_cls = compat.template_heuristics_module("params").DictKernelTemplateParams
        by_uid: dict[str, list[dict[str, Any]]] = {}
        for uid, kwargs in decision.triton:
            by_uid.setdefault(uid, []).append(kwargs)
        result: list[Any] = []
        for t in templates:
            uid = t.uid
            if _is_triton(uid):
                wanted = by_uid.get(uid)
                if not wanted:
                    continue
                base = next(iter(template_choices.get(uid, ())), None)
                if base is None:
                    return None
                result.extend(
                    KernelTemplateChoice(
                        template=base.template,
                        params=params_cls(dict(kw)),
                        extra_kwargs=base.extra_kwargs,
                        layout=base.layout,
                        inputs=base.inputs,
                    )
                    for kw in wanted
                )
            elif _is_aten(uid):
                ktcs = list(template_choices.get(uid, ()))
                result.extend(ktcs)  # filtered below by position among all ATen KTCs
            else:
                result.extend(template_choices.get(uid, ()))
        aten_all = [k for k in result if _is_aten(k.template.uid)]
        if len(aten_all) != decision.n_aten:
            return None
        drop = {id(k) for i, k in enumerate(aten_all) if i not in decision.aten}
        return [k for k in result if id(k) not in drop]

    def _lut_selection(
        self,
        problem: Problem,
        triton: list[Choice],
        aten: list[Choice],
        *,
        op_name: str = "",
        shared_memory: int | None = None,
    ) -> tuple[list[int], list[int]] | None:
        """The kept Triton and ATen indices of a lookup-table hit, or None (a miss: the model
        decides). ``shared_memory``: the GPU's bytes a block (None: not known, no guard)."""
        try:
            lut = self._get_lut()
        except Exception as e:
            raise HandlerError("lut_error", f"cannot load kernel lookup table {self.options.lut!r}: {e}") from e
        if lut is None:
            return None
        best = lut.lookup(problem)
        if not best:
            return None
        wanted = set(best)
        kept_triton = [i for i, c in enumerate(triton) if c in wanted]
        kept_aten = [i for i, c in enumerate(aten) if c in wanted]
        if not kept_triton and not kept_aten:
            return None  # the table's choices are not candidates here (another torch?): ask the model
        # The table's configs ran where they were measured, but over Inductor's bound they may not
        # run on this GPU (a table of a GPU with more shared memory a block): the first ATen
        # offered, or the first candidate sure to fit, is benchmarked beside them.
        kept_triton, kept_aten = self._guard_shared_memory(
            problem, triton, kept_triton, kept_aten, aten, op_name, shared_memory, best_aten=0, order=range(len(triton))
        )
        self._stats.add(lut_hits=1)
        return kept_triton, kept_aten

    def _covered_model(self, problem: Problem, triton: list[Choice]) -> Any:
        """The model (None without one), if ``problem`` with these Triton candidates lies within
        what it was trained on; else ``HandlerError("out_of_coverage")``."""
        model = self._get_model()
        if model is not None:
            outside = model.out_of_coverage(problem, triton)
            if outside is not None:
                raise HandlerError("out_of_coverage", f"{problem.key()}: {outside}")
        return model

    def _model_selection(
        self,
        problem: Problem,
        op_name: str,
        triton: list[Choice],
        aten: list[Choice],
        earlier_aten: tuple[Choice, ...] | None = None,
        *,
        shared_memory: int | None = None,
    ) -> tuple[list[int], list[int]]:
        """The kept Triton and ATen indices. ``shared_memory``: the GPU's bytes a block (None: the
        model file's figure for its GPU), which the kept choices must be sure to fit (below)."""
        model = self._covered_model(problem, triton)
        if model is None:
            raise HandlerError("no_model", f"no lookup-table hit for {problem.key()} and no model configured")
        scored_aten = list(aten)
        stand_in = _aten_kept_earlier(aten, op_name)
        if stand_in:  # the ATen choices addmm's earlier call kept, where known
            scored_aten = list(earlier_aten) if earlier_aten else [Choice.aten(op_name)]
        log_t, std = self._predict(model, problem, triton + scored_aten)
        nt = len(triton)
        order = order_of(
            problem, triton, log_t[:nt], diversity=self.options.diversity, cliff_guard=self.options.cliff_guard
        )
        sel = select(
            log_t[:nt],
            std[:nt],
            log_t[nt:],
            std[nt:],
            self.options,
            keep_one_triton=not aten and not stand_in,
            triton_order=order,
            drop_slower_aten=aten_variant_call_trusted(problem),
        )
        self._stats.add(model_selections=1, low_confidence=int(not sel.confident))
        self._stats.add_confidence(sel.confidence)
        limit = shared_memory or getattr(getattr(model, "gpu", None), "smem_per_block_bytes", None)
        # the best ATen choice by the model, else the first config of its order sure to fit
        return self._guard_shared_memory(
            problem,
            triton,
            list(sel.triton),
            list(sel.aten) if aten else [],
            aten,
            op_name,
            limit,
            best_aten=int(np.argmin(log_t[nt:])) if aten else 0,
            order=order,
        )

    def _guard_shared_memory(
        self,
        problem: Problem,
        triton: list[Choice],
        kept_triton: list[int],
        kept_aten: list[int],
        aten: list[Choice],
        op_name: str,
        limit: int | None,
        *,
        best_aten: int,
        order: Iterable[Any],
    ) -> tuple[list[int], list[int]]:
        """The kept indices with :func:`shared_memory_fallback` applied (counted as
        ``shared_memory_guard``) where the limit is known and no ATen choice is kept, here or in
        addmm's earlier call (torch >= 2.12, which always keeps one)."""
        if not limit or kept_aten or _aten_kept_earlier(aten, op_name):
            return kept_triton, kept_aten
        kept_triton, kept_aten, added = shared_memory_fallback(
            problem, triton, kept_triton, len(aten), limit, best_aten=best_aten, order=order
        )
        self._stats.add(shared_memory_guard=int(added))
        return kept_triton, kept_aten

    def _predict(self, model: Any, problem: Problem, choices: list[Choice]) -> tuple[np.ndarray, np.ndarray]:
        unique = list(dict.fromkeys(choices))
        cache_key = problem
        cached: dict[Choice, tuple[float, float]] | None = None
        if self.options.cache_predictions:
            with self._cache_lock:
                cached = self._cache.get(cache_key)
                if cached is not None:
                    self._cache.move_to_end(cache_key)
        if cached is not None and all(c in cached for c in unique):
            self._stats.add(cache_hits=1)
        else:
            t0 = time.perf_counter()
            try:
                pred = model.predict(problem, unique)
                log_t = np.asarray(pred.log_time_us, dtype=np.float64).reshape(-1)
                std = np.asarray(pred.std, dtype=np.float64).reshape(-1)
            except Exception as e:
                raise HandlerError("model_error", f"model prediction failed for {problem.key()}: {e}") from e
            finally:
                with self._stats.lock:
                    self._stats.predict_time_s += time.perf_counter() - t0
            if log_t.shape != (len(unique),) or std.shape != (len(unique),):
                raise HandlerError(
                    "model_error",
                    f"model returned {plural(log_t.shape[0], 'prediction')} and {plural(std.shape[0], 'std')} for "
                    f"{plural(len(unique), 'choice')}",
                )
            distinct = len(unique) == len(choices)  # the usual case: unique is choices, in order
            if distinct and not self.options.cache_predictions:
                return log_t.copy(), std.copy()
            fresh = dict(zip(unique, zip(log_t.tolist(), std.tolist())))  # Python floats, as float(x)
            cached = {**(cached or {}), **fresh}
            if self.options.cache_predictions:
                with self._cache_lock:
                    self._cache[cache_key] = cached
                    self._cache.move_to_end(cache_key)
                    while len(self._cache) > PREDICTION_CACHE_SIZE:
                        self._cache.popitem(last=False)
            if distinct:
                return log_t.copy(), std.copy()
        rows = np.array([cached[c] for c in choices], dtype=np.float64).reshape(-1, 2)
        return rows[:, 0], rows[:, 1]


@dataclass(frozen=True)
class _Decision:
    """A selection, remembered per static problem: the kept Triton configs' exact kwargs and the
    positions of the kept ATen KTCs."""

    triton: tuple[tuple[str, dict[str, Any]], ...]
    aten: tuple[int, ...]
    n_aten: int
    seen: int
    skipped: tuple[tuple[str, int], ...] = ()  # the candidate filters' counts (statistics)


def _tf32_state() -> tuple[str, ...]:
    """The float32 matmul precision settings Inductor's ALLOW_TF32 follows, as they are now."""
    import torch

    state = [str(getattr(torch.backends.cuda.matmul, "fp32_precision", ""))]
    try:
        state.append(str(torch.backends.cuda.matmul.allow_tf32))
    except Exception:  # a build where the old switch is gone or refuses to be read
        state.append("?")
    state.append(str(torch.get_float32_matmul_precision()))
    return tuple(state)


def _is_static(x: Any) -> bool:
    try:
        int(x)
    except TypeError:
        return False
    return bool(getattr(x, "is_number", True))


def _aten_variants_call(templates: Sequence[Any], op_name: str) -> bool:
    """Whether a call without Triton templates is addmm's ATen call with several ATen templates
    (``aten::addmm`` and ``aten::bias_addmm``), which the handler selects among."""
    return op_name == "addmm" and sum(_is_aten(t.uid) for t in templates) > 1


class _SplitCalls:
    """What addmm's hook calls before its last one returned, in one thread (torch >= 2.12)."""

    def __init__(self, key: tuple[int, int]) -> None:
        self.key = key
        self.n = 0  # choices returned
        self.n_aten = 0  # ATen choices returned
        self.dropped = 0  # ATen variants left out
        self.aten: tuple[Choice, ...] | None = ()  # the ATen choices returned; None where one did not convert
        self.last_call = False

    def add(self, ktcs: Sequence[Any]) -> None:
        self.n += len(ktcs)
        aten = [k for k in ktcs if _is_aten(k.template.uid)]
        self.n_aten += len(aten)
        if self.aten is not None and aten:
            try:
                self.aten += tuple(choices_from_ktcs(aten))
            except ValueError:
                self.aten = None


def _is_triton(uid: str) -> bool:
    return uid.startswith("triton::")


def _is_aten(uid: str) -> bool:
    return uid.startswith(Choice.ATEN_PREFIX)


def _load_model(ref: str) -> Any:
    """Load a model from a file path or a registered name (resolved without network access:
    a compile never downloads; registration fetches ahead of time)."""
    from torch_diode.model import load_model
    from torch_diode.registry import resolve

    path = resolve(ref, local_files_only=True)
    model = load_model(path)
    _check_hardware(model, ref)
    return model


def _check_hardware(model: Any, ref: str) -> None:
    """Warn once when the model was trained for another GPU than the one present."""
    import torch

    if not torch.cuda.is_available():
        return
    try:
        from torch_diode.hardware import current_key

        key = current_key()
    except Exception as e:  # hardware detection is best effort here: it only decides a warning
        logger.debug("torch-diode: could not detect the GPU to check model %s: %s", ref, e)
        return
    if key is not None and key != model.hardware:
        _log_once(
            "hardware_mismatch",
            "torch-diode: model %s was trained for %s but this GPU is %s; its rankings may be poor (%s)",
            ref,
            model.hardware,
            key,
            DISABLE_HINT,
        )


__all__ = ["DiodeInductorChoices", "HandlerError", "Selection", "select", "top_k_count"]
