"""The Inductor collector: timings exactly as max-autotune measures them, read through its feedback saver.

For each :class:`~torch_diode.records.Problem` the collector builds inputs with the problem's
shape, dtype and strides, compiles one GEMM with ``torch.compile(mode="max-autotune")`` (caches
off, a fresh ``torch._dynamo.reset()``), and records every choice Inductor benchmarked, ATen
included, from the feedback saver registered with
``torch._inductor.select_algorithm.add_feedback_saver``.

* The problem and each choice come from :mod:`torch_diode.inductor.convert` (the one conversion
  path the choices handler uses too): the problem from the saver's ``input_nodes``, the choice
  from ``caller.annotations["ktc"]``. Times arrive in milliseconds and are stored in
  microseconds (``time_us = 1000 * ms``).
* **Choices without a KTC are skipped and counted.** CUTLASS, CK, NVGEMM and CPU C++ GEMM choices
  are appended outside Inductor's choices hook, so they carry no ``ktc``, no config a model could
  reproduce, and the choices handler can never pick them. They are not part of the oracle (the
  exhaustive Triton space plus ATen, see the README's Metrics), so the collector leaves them out and reports
  how many it skipped per backend (``FeedbackRecorder.skipped``, ``CollectSummary.skipped_choices``).
* A failed choice (Inductor reports ``inf``) becomes a ``FailureRecord`` for that choice; a failed
  problem (out of memory, compile error, nothing benchmarked) becomes a ``FailureRecord`` for the
  problem plus one log line, and the run goes on.
* An error raised by the saver itself is never recorded as a per-problem compile error: it aborts
  the run with ``CollectionError`` (a saver that breaks on every problem would otherwise turn a
  whole run into "compile errors").

Needs torch >= 2.10 (``ChoiceCaller.annotations["ktc"]``). Accepts both feedback-saver forms:
5 arguments (torch 2.10) and 6 (2.11+, ``precompile_times``).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from torch_diode._text import plural
from torch_diode.errors import CollectionError
from torch_diode.records import BATCHED_OPS, BIAS_OPS, Choice, FailureRecord, Problem, TimingRecord

log = logging.getLogger(__name__)

SEARCH_SPACES: tuple[str, ...] = ("DEFAULT", "EXHAUSTIVE")
SEARCH_MODES: tuple[str, ...] = ("max-autotune", "max-autotune-no-cudagraphs")

#: Ops whose max-autotune benchmarks two or more choices on CPU (ATen plus the C++ bmm template),
#: so they can be collected without a GPU (for tests). mm/addmm on CPU have one choice.
CPU_OPS: frozenset[str] = frozenset({"bmm"})


@dataclass
class FeedbackEvent:
    """One call of the feedback saver: the problem Inductor autotuned and what each choice took."""

    name: str
    problem: Problem
    timings_ms: list[tuple[Choice, float]]
    skipped: dict[str, int] = field(default_factory=dict)


def _caller_backend(caller: Any) -> str:
    """A readable name for a choice that has no KTC, e.g. ``"CPP"`` or ``"CUTLASS"``."""
    try:
        info = caller.info_dict()
    except Exception:  # info_dict of a foreign caller type: the type name is enough for a count
        info = {}
    backend = info.get("backend") if isinstance(info, Mapping) else None
    return str(backend or type(caller).__name__)


class FeedbackRecorder:
    """The feedback saver: converts each autotuning result into :class:`FeedbackEvent` s.

    Inductor calls savers as ``fn(timings, name, input_nodes, choices, profiled_time,
    precompile_times)``; torch 2.10 passes the first five only, hence ``precompile_times=None``.
    A saver error must never pass for a problem failure (the known trap: a saver whose
    ``TypeError`` is swallowed records nothing while the run looks healthy). So ``error`` keeps
    what the saver raised and ``calls`` counts its calls; the collector aborts the run when the
    saver raised (caught by Inductor or not), when Inductor could not call it (wrong arity, see
    :func:`raised_by_saver`), or when Inductor benchmarked without calling it at all.
    """

    def __init__(self) -> None:
        self.events: list[FeedbackEvent] = []
        self.ignored: collections.Counter[str] = collections.Counter()
        self.error: BaseException | None = None
        self.calls = 0  # times Inductor called this saver

    def __call__(
        self,
        timings: Mapping[Any, float],
        name: str,
        input_nodes: Sequence[Any],
        choices: Sequence[Any],
        profiled_time: Callable[..., Any] | None,
        precompile_times: Mapping[Any, float] | None = None,
    ) -> None:
        self.calls += 1
        try:
            self._record(timings, name, input_nodes)
        except BaseException as e:
            self.error = e
            raise

    def _record(self, timings: Mapping[Any, float], name: str, input_nodes: Sequence[Any]) -> None:
        from torch_diode.inductor.convert import canonical_op, choice_from_ktc, problem_from_input_nodes

        try:
            canonical_op(name)
        except ValueError:
            # Another autotuned op in the same graph (conv, packed_linear, scaled_mm): not ours.
            self.ignored[name] += 1
            return
        problem = problem_from_input_nodes(name, input_nodes)
        rows: list[tuple[Choice, float]] = []
        skipped: collections.Counter[str] = collections.Counter()
        for caller, ms in timings.items():
            ktc = (getattr(caller, "annotations", None) or {}).get("ktc")
            if ktc is None:
                skipped[_caller_backend(caller)] += 1
                continue
            rows.append((choice_from_ktc(ktc), float(ms)))
        self.events.append(FeedbackEvent(name, problem, rows, dict(skipped)))

    def take(self) -> list[FeedbackEvent]:
        """The events recorded since the last ``take`` (and forget them)."""
        events, self.events = self.events, []
        return events


def _exception_chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__, getattr(e, "inner_exception", None)]


def raised_by_saver(exc: BaseException, recorder: FeedbackRecorder) -> bool:
    """Whether a compile failed because of the feedback saver rather than the problem.

    True when the saver itself raised (``recorder.error``) or Inductor could not even call it: a
    ``TypeError`` naming ``FeedbackRecorder.__call__`` (a feedback-function arity this collector
    does not accept). Such errors must abort the run, not become per-problem compile errors.
    """
    if recorder.error is not None:
        return True
    return any(
        isinstance(e, TypeError) and f"{FeedbackRecorder.__name__}.__call__" in str(e) for e in _exception_chain(exc)
    )


def classify_failure(exc: BaseException) -> str:
    """The ``FailureRecord.reason`` of an exception raised while compiling or running a problem."""
    import torch

    chain = list(_exception_chain(exc))
    if any(isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e).lower() for e in chain):
        return "oom"
    if any(type(e).__name__ == "NoValidChoicesError" for e in chain):
        return "no_valid_config"
    if any(isinstance(e, torch._dynamo.exc.BackendCompilerFailed) for e in chain):
        return "compile_error"
    return "runtime_error"


def _one_line(exc: BaseException, limit: int = 300) -> str:
    inner = exc
    for e in _exception_chain(exc):
        inner = e  # the innermost cause says most
    text = f"{type(inner).__name__}: {inner}".strip().replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _saver_failed(problem: Problem, error: BaseException) -> CollectionError:
    """The run-aborting error for a feedback saver that failed (never a per-problem failure)."""
    import torch

    return CollectionError(
        f"the feedback saver failed on {problem.key()} ({_one_line(error)}); this is a torch-diode bug or an "
        f"unsupported torch {torch.__version__}, not a problem failure"
    )


# ---------------------------------------------------------------------------------------------
# Inputs and GEMM functions
# ---------------------------------------------------------------------------------------------


def strided_tensor(shape: Sequence[int], stride: Sequence[int], dtype: Any, device: Any) -> Any:
    """A random tensor of ``shape`` with exactly ``stride`` (padded, transposed or broadcast).

    ``torch.empty_strided`` allocates just the storage the strides reach; the whole storage is
    filled (through a flat view) so that stride-0 dimensions and padding hold defined values.
    """
    import torch

    t = torch.empty_strided(tuple(shape), tuple(stride), dtype=dtype, device=device)
    extent = 1 + sum((s - 1) * st for s, st in zip(shape, stride))
    flat = t.as_strided((extent,), (1,), t.storage_offset())
    flat.normal_()
    return t


def _bias_tensor(problem: Problem, dtype: Any, device: Any) -> Any:
    assert problem.stride_bias is not None
    batched = problem.op in BATCHED_OPS
    out_shape = ((problem.batch,) if batched else ()) + (problem.m, problem.n)
    if all(s == 0 for s in problem.stride_bias[:-1]) and problem.stride_bias[-1] == 1:
        # A vector bias broadcast over rows (nn.Linear's): pass it 1-D, as models do.
        return strided_tensor((problem.n,), (1,), dtype, device)
    return strided_tensor(out_shape, problem.stride_bias, dtype, device)


def make_inputs(problem: Problem, device: Any, *, via_linear: bool = False) -> tuple[Any, ...]:
    """Tensors realising ``problem`` on ``device``: ``(a, b)`` or ``(bias, a, b)``.

    With ``via_linear`` (mm/addmm only) the second operand is the Linear weight ``b.T``
    (``[N, K]``) and the order is ``(a, weight[, bias])``, for :func:`gemm_function`.

    Raises:
        ValueError: the problem asks for an output dtype other than its input dtype.
    """
    import torch

    if problem.out_dtype != problem.dtype:
        raise ValueError(f"{problem.key()}: out_dtype {problem.out_dtype} != dtype {problem.dtype} is not collected")
    dtype = getattr(torch, problem.dtype)
    batched = problem.op in BATCHED_OPS
    pre = (problem.batch,) if batched else ()
    a = strided_tensor((*pre, problem.m, problem.k), problem.stride_a, dtype, device)
    if via_linear and not batched:
        sb = problem.stride_b
        w = strided_tensor((problem.n, problem.k), (sb[1], sb[0]), dtype, device)
        return (a, w) + ((_bias_tensor(problem, dtype, device),) if problem.op in BIAS_OPS else ())
    b = strided_tensor((*pre, problem.k, problem.n), problem.stride_b, dtype, device)
    if problem.op in BIAS_OPS:
        return (_bias_tensor(problem, dtype, device), a, b)
    return (a, b)


def _mm(a: Any, b: Any) -> Any:
    import torch

    return torch.mm(a, b)


def _addmm(bias: Any, a: Any, b: Any) -> Any:
    import torch

    return torch.addmm(bias, a, b)


def _bmm(a: Any, b: Any) -> Any:
    import torch

    return torch.bmm(a, b)


def _baddbmm(bias: Any, a: Any, b: Any) -> Any:
    import torch

    return torch.baddbmm(bias, a, b)


def _linear(a: Any, w: Any, bias: Any = None) -> Any:
    import torch.nn.functional as F

    return F.linear(a, w, bias)


_FUNCTIONS: Mapping[str, Callable[..., Any]] = {"mm": _mm, "addmm": _addmm, "bmm": _bmm, "baddbmm": _baddbmm}


def gemm_function(op: str, *, via_linear: bool = False) -> Callable[..., Any]:
    """The eager function whose compile lowers to ``op`` (``F.linear`` for mm/addmm ``via_linear``)."""
    if via_linear and op in ("mm", "addmm"):
        return _linear
    return _FUNCTIONS[op]


# ---------------------------------------------------------------------------------------------
# The collector
# ---------------------------------------------------------------------------------------------


def _selector_cache() -> Any:
    from torch._inductor import select_algorithm as sa

    getter = getattr(sa, "get_algorithm_selector_cache", None)
    if getter is not None:
        return getter()
    # torch 2.9/2.10 keep the cache in a module global that add_feedback_saver creates.
    return sa._ALGORITHM_SELECTOR_CACHE


@contextmanager
def registered_saver(saver: Callable[..., None]) -> Iterator[None]:
    """Register ``saver`` with Inductor for the block; on exit remove exactly that saver (savers
    registered by others, e.g. AutoHeuristic's, stay)."""
    from torch._inductor import select_algorithm as sa

    sa.add_feedback_saver(saver)
    try:
        yield
    finally:
        fns = _selector_cache().feedback_saver_fns
        for i in range(len(fns) - 1, -1, -1):
            if fns[i] is saver:
                del fns[i]
                break


class InductorCollector:
    """Collects max-autotune's own timings, one compile per problem.

    Use as a context manager (it registers its saver and new, private Inductor and Triton cache
    folders, stopping the process's Inductor compile workers on entry and on exit:
    :func:`torch_diode.inductor.compat.fresh_compile_folders`), then call :meth:`measure` per
    problem::

        with InductorCollector(hardware="NVIDIA-H100", search_space="EXHAUSTIVE") as c:
            records, failures = c.measure(problem)

    Args:
        hardware: the hardware key written into every record.
        device: ``"cuda"`` (the current GPU), ``"cuda:N"`` or ``"cpu"`` (bmm only; for tests).
        search_space: ``"DEFAULT"`` or ``"EXHAUSTIVE"`` (``max_autotune_gemm_search_space``).
        mode: ``"max-autotune"`` or ``"max-autotune-no-cudagraphs"`` (the ``torch.compile`` mode).
        via_linear: compile mm/addmm problems through ``F.linear`` (what ``nn.Linear`` lowers to).
        config_overrides: extra ``torch._inductor.config`` values patched during each compile.
    """

    name = "inductor"

    def __init__(
        self,
        *,
        hardware: str,
        device: str = "cuda",
        search_space: str = "DEFAULT",
        mode: str = "max-autotune",
        via_linear: bool = False,
        config_overrides: Mapping[str, Any] | None = None,
    ) -> None:
        if search_space not in SEARCH_SPACES:
            raise ValueError(f"search_space: must be one of {', '.join(SEARCH_SPACES)}, got {search_space!r}")
        if mode not in SEARCH_MODES:
            raise ValueError(f"mode: must be one of {', '.join(SEARCH_MODES)}, got {mode!r}")
        self.hardware = hardware
        self.device = device
        self.search_space = search_space
        self.mode = mode
        self.via_linear = via_linear
        self.config_overrides = dict(config_overrides or {})
        self.recorder = FeedbackRecorder()
        self.skipped: collections.Counter[str] = collections.Counter()
        self._stack: ExitStack | None = None
        self._warned_view = False

    def __enter__(self) -> InductorCollector:
        import torch._inductor.select_algorithm  # noqa: F401  (fail here, not mid-run, if Inductor is missing)

        from torch_diode.inductor.compat import fresh_compile_folders
        from torch_diode.inductor.install import stock_inductor

        stack = ExitStack()
        # what stock Inductor measures, even where a model is registered in this process (the
        # torch-diode meta-wheel registers one at import, in the CLI and in every worker)
        stack.enter_context(stock_inductor())
        # new Inductor and Triton cache folders for the collection, with the compile workers
        # started in them (none from before, none left after)
        stack.enter_context(fresh_compile_folders())
        stack.enter_context(registered_saver(self.recorder))
        self._stack = stack
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None

    def _config_patch(self) -> dict[str, Any]:
        from torch._inductor import config

        patch: dict[str, Any] = {
            "max_autotune": True,
            "max_autotune_gemm_search_space": self.search_space,
            # no cached graph or autotuning result may stand in for a benchmark. Not
            # force_disable_caches: it compiles each graph in a new folder of its own, away from the
            # one the compile workers were started in (compat.fresh_compile_folders; on an H200 a
            # cost of it here was not shown, session 73: 67.0 s against 59.7 s, one run each)
            "autotune_local_cache": False,
            "fx_graph_cache": False,
            # Inductor's pad_mm pass would pad odd sizes before lowering (K 3001 -> 3008 for
            # mm bf16 3000x5000x3001 on an H100, torch 2.11) and benchmark a problem other than the
            # one asked for; the collector measures the problem as given.
            "shape_padding": False,
        }
        # (remote_gemm_autotune_cache: a remote best config would narrow the choices benchmarked)
        for name in ("autotune_remote_cache", "fx_graph_remote_cache", "remote_gemm_autotune_cache"):
            if hasattr(config, name):
                patch[name] = False
        patch.update(self.config_overrides)
        return patch

    def measure(self, problem: Problem) -> tuple[list[TimingRecord], list[FailureRecord]]:
        """Compile ``problem`` once under max-autotune and return what Inductor measured.

        Returns:
            ``(records, failures)``: one record per benchmarked choice with a config, and failures
            for choices Inductor timed as ``inf`` or, when the problem as a whole failed, one
            failure with ``choice=None``.

        Raises:
            CollectionError: the feedback saver failed (fatal for the whole run).
            KeyboardInterrupt: passed through (the runner has flushed every finished problem).
        """
        if self._stack is None:
            raise RuntimeError(
                "InductorCollector.measure() needs the collector entered: use `with InductorCollector(...)`"
            )
        import torch
        from torch._inductor import config

        def failed(reason: str, message: str) -> tuple[list[TimingRecord], list[FailureRecord]]:
            log.warning("%s: %s: %s", problem.key(), reason, message)
            return [], [
                FailureRecord(problem=problem, choice=None, reason=reason, message=message, hardware=self.hardware)
            ]

        from torch._dynamo.utils import counters

        if not any(fn is self.recorder for fn in _selector_cache().feedback_saver_fns):
            raise CollectionError(
                "the collector's feedback saver is no longer registered with Inductor (something called "
                "torch._inductor.select_algorithm.clear_feedback_savers()); nothing more would be recorded"
            )
        torch._dynamo.reset()
        self.recorder.take()
        self.recorder.error = None
        calls_before = self.recorder.calls
        benchmarks_before = counters["inductor"]["select_algorithm_autotune"]
        try:
            inputs = make_inputs(problem, self.device, via_linear=self.via_linear)
            fn = torch.compile(
                gemm_function(problem.op, via_linear=self.via_linear), mode=self.mode, dynamic=False, fullgraph=True
            )
            with config.patch(self._config_patch()):
                fn(*inputs)
            if str(self.device).startswith("cuda"):
                torch.cuda.synchronize()
        except Exception as e:
            if raised_by_saver(e, self.recorder):
                raise _saver_failed(problem, self.recorder.error or e) from e
            reason = classify_failure(e)
            if reason == "oom" and torch.cuda.is_available():
                torch.cuda.empty_cache()
            self.recorder.take()
            return failed(reason, _one_line(e))
        finally:
            torch._dynamo.reset()
        if self.recorder.error is not None:  # raised inside the saver, and Inductor swallowed it
            raise _saver_failed(problem, self.recorder.error) from self.recorder.error
        benchmarked = counters["inductor"]["select_algorithm_autotune"] - benchmarks_before
        if benchmarked and self.recorder.calls == calls_before:
            raise CollectionError(
                f"Inductor benchmarked {problem.key()} ({plural(benchmarked, 'time')}) but never called the feedback saver; "
                f"torch {torch.__version__} may call savers differently (an error in the call swallowed?)"
            )
        return self._convert(problem, self.recorder.take(), failed)

    def _convert(
        self,
        problem: Problem,
        events: list[FeedbackEvent],
        failed: Callable[[str, str], tuple[list[TimingRecord], list[FailureRecord]]],
    ) -> tuple[list[TimingRecord], list[FailureRecord]]:
        ours = [ev for ev in events if ev.problem.op == problem.op]
        if not ours:
            seen = ", ".join(sorted({ev.name for ev in events})) or "none"
            return failed(
                "no_valid_config",
                f"Inductor benchmarked no {problem.op} choices (autotuned ops seen: {seen}); a single candidate "
                f"is not benchmarked, and some shapes are decomposed into pointwise code",
            )
        records: list[TimingRecord] = []
        failures: list[FailureRecord] = []
        seen_choices: set[Choice] = set()
        for ev in ours:
            if ev.problem != problem and not self._warned_view:
                self._warned_view = True
                log.warning(
                    "Inductor saw %s for the requested %s (records use Inductor's view: %s vs %s)",
                    ev.problem.key(),
                    problem.key(),
                    ev.problem.to_dict(),
                    problem.to_dict(),
                )
            for backend, n in ev.skipped.items():
                self.skipped[backend] += n
            for choice, ms in ev.timings_ms:
                if choice in seen_choices:  # a later re-benchmark of the same choice (epilogue fusion)
                    continue
                seen_choices.add(choice)
                us = ms * 1000.0
                if us > 0 and us != float("inf") and us == us:
                    records.append(TimingRecord(problem=ev.problem, choice=choice, time_us=us, hardware=self.hardware))
                else:
                    failures.append(
                        FailureRecord(
                            problem=ev.problem,
                            choice=choice,
                            reason="error",
                            message=f"Inductor timed this choice as {ms!r} ms (it failed to compile or run)",
                            hardware=self.hardware,
                        )
                    )
        if not records:
            _, failure = failed(
                "no_valid_config",
                "the one benchmarked choice failed"
                if len(failures) == 1
                else f"all {len(failures):,} benchmarked choices failed",
            )
            return [], failures + failure
        return records, failures
