"""GPU measurements shared by ``diode bench`` and ``diode demo``: the cold compile time and the
kernel (or step) time of one function in one mode.

* **Cold compile** (the README's metric): the wall time of the first call of the compiled function
  (tracing, lowering, autotuning, kernel compilation and one run), with the GPU synchronised before
  and after, in a new process whose Inductor and Triton cache folders are new and empty
  (:mod:`torch_diode.bench.isolate`: ``diode bench`` and ``diode demo`` measure so), after a warm-up
  compile there (:func:`warm_up`: Inductor's imports, its compile workers starting and the model's
  first use are not counted), with ``torch._dynamo.reset()``. In one long process
  (``measure(fresh_caches=True)``) each compile runs inside ``torch._inductor.utils.fresh_cache()``
  with Inductor's compile workers shut down first (:func:`cold_compile_state`: without that, a
  compile that benchmarks several choices took several times as long: with the worker pool ready,
  its kernels were compiled twice, :mod:`torch_diode.inductor.ptxas`).
* **Kernel time**: ``graph_iters`` calls of the compiled function captured in one CUDA graph, the
  graph replayed ``reps`` times between CUDA events, time per call = event time / ``graph_iters``;
  the median over the replays (every replay's time is kept too). Every mode compiles without
  Inductor's own CUDA graphs (``max-autotune-no-cudagraphs``), so the graph captures the kernels
  themselves, identically in every mode.

Modes (:data:`torch_diode.bench.suite.MODES`):

* ``default``: ``torch.compile(fn)``; no autotuning (ATen for GEMMs);
* ``max-autotune``: stock Inductor autotuning, ``mode="max-autotune-no-cudagraphs"`` (Inductor's
  DEFAULT GEMM search space);
* ``exhaustive``: the same with ``max_autotune_gemm_search_space="EXHAUSTIVE"``;
* ``diode-top1`` / ``diode-top3``: the same as ``max-autotune`` with torch-diode's choices handler
  installed (``top_k_configs`` 1 or 3, other options default). The model is passed already loaded:
  loading it happens once per process, not once per compile.

The stock modes run with any torch-diode handler taken out (``stock_inductor``): the torch-diode
meta-wheel registers a model at import, in ``diode bench`` too.

Modules run under ``torch.no_grad()`` (inference).
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch_diode.bench.suite import DIODE_TOP_K, MODES

log = logging.getLogger(__name__)

#: The torch.compile mode of every autotuning mode (no Inductor CUDA graphs: see the module docstring).
AUTOTUNE_MODE = "max-autotune-no-cudagraphs"
#: Handler statistics kept per diode measurement (``DiodeInductorChoices.get_stats()`` keys).
DIODE_STATS: tuple[str, ...] = (
    "gemm_calls",
    "model_selections",
    "lut_hits",
    "candidates_seen",
    "candidates_kept",
    "aten_kept",
    "single_choice",
    "low_confidence",
    "fallbacks_total",
    "fallbacks",
    "hook_time_s",
    "widen_time_s",
    "predict_time_s",
)


@dataclass
class Measurement:
    """One case in one mode.

    Attributes:
        compile_s: cold compile time (the first call), seconds.
        kernel_us: median time per call over the graph replays, microseconds.
        kernel_us_reps: the time per call of every replay.
        wall_s: the whole measurement (compile, capture and replays), seconds.
        diode: the handler's statistics for this compile (diode modes only).
    """

    compile_s: float
    kernel_us: float
    kernel_us_reps: list[float]
    wall_s: float
    diode: dict[str, Any] | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "compile_s": round(self.compile_s, 4),
            "kernel_us": round(self.kernel_us, 3),
            "kernel_us_reps": [round(t, 3) for t in self.kernel_us_reps],
            "wall_s": round(self.wall_s, 2),
        }
        if self.diode is not None:
            d["diode"] = self.diode
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Measurement:
        """The measurement of a :meth:`to_dict` (a new process's result)."""
        return cls(
            compile_s=d["compile_s"],
            kernel_us=d["kernel_us"],
            kernel_us_reps=list(d["kernel_us_reps"]),
            wall_s=d["wall_s"],
            diode=d.get("diode"),
        )


@contextlib.contextmanager
def cold_compile_state(*, fresh_caches: bool = True) -> Iterator[None]:
    """No FX-graph or autotuning cache from an earlier compile, inside the block (dynamo reset);
    with ``fresh_caches`` new Inductor and Triton cache folders too, the compile workers shut down
    first (:func:`torch_diode.inductor.compat.fresh_compile_folders`: without that, stock
    ``vit_b_mlp`` took 22.2 s on an H200 rather than 7.5 s, 8.3 s in a new process). Without
    ``fresh_caches`` (in a new process whose folders are new already,
    :mod:`torch_diode.bench.isolate`) the folders and the workers stay."""
    import torch

    from torch_diode.inductor.compat import fresh_compile_folders

    torch._dynamo.reset()
    try:
        with fresh_compile_folders() if fresh_caches else contextlib.nullcontext():
            yield
    finally:
        torch._dynamo.reset()


@contextlib.contextmanager
def mode_context(mode: str, model: Any = None) -> Iterator[Any]:
    """Inductor configured for ``mode``; yields the torch-diode handle in diode modes, else None.

    Raises:
        ValueError: unknown mode, or a diode mode without a model.
        RuntimeError: the handler could not be installed (torch < 2.10, ``TORCH_DIODE_DISABLE=1``).
    """
    if mode not in MODES:
        raise ValueError(f"mode: unknown mode {mode!r}; known: {', '.join(MODES)}")
    if mode in DIODE_TOP_K:
        if model is None:
            raise ValueError(f"mode {mode}: needs a torch-diode model")
        from torch_diode.inductor import install_diode_choices

        with install_diode_choices(model=model, top_k_configs=DIODE_TOP_K[mode]) as handle:
            if not handle.installed:
                raise RuntimeError(f"torch-diode's choices handler was not installed: {handle.reason}")
            yield handle
        return
    from torch._inductor import config as inductor_config

    from torch_diode.inductor.install import stock_inductor

    exhaustive = mode == "exhaustive"
    space = (
        inductor_config.patch(max_autotune_gemm_search_space="EXHAUSTIVE") if exhaustive else contextlib.nullcontext()
    )
    with stock_inductor(), space:  # a model registered in the process (the meta-wheel's) is not stock
        yield None


def compile_for(mode: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compile`` of ``fn`` as ``mode`` compiles it (static shapes, no Inductor CUDA graphs)."""
    import torch

    if mode == "default":
        return torch.compile(fn, dynamic=False)
    return torch.compile(fn, mode=AUTOTUNE_MODE, dynamic=False)


def first_call_s(compiled: Callable[..., Any], args: tuple[Any, ...]) -> float:
    """Wall time of one call, the GPU synchronised before and after (the cold compile when first)."""
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    compiled(*args)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def kernel_times_us(fn: Callable[..., Any], args: tuple[Any, ...], *, graph_iters: int, reps: int) -> list[float]:
    """Time per call of each of ``reps`` replays of a CUDA graph holding ``graph_iters`` calls."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside the graph, on a side stream as capture requires
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(graph_iters):
            fn(*args)
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / graph_iters)
    del graph
    return times


def _diode_stats(stats: dict[str, Any]) -> dict[str, Any]:
    return {k: round(float(stats.get(k, 0.0)), 4) if k.endswith("_time_s") else stats.get(k) for k in DIODE_STATS}


def measure(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    mode: str,
    *,
    model: Any = None,
    graph_iters: int = 20,
    reps: int = 20,
    fresh_caches: bool = True,
) -> Measurement:
    """Cold compile ``fn`` in ``mode``, then time its kernels (see the module docstring).

    Args:
        fn: the eager function or ``nn.Module``.
        args: its inputs, on the GPU.
        mode: one of :data:`~torch_diode.bench.suite.MODES`.
        model: a loaded ``DiodeModel`` (diode modes).
        graph_iters: calls captured in one CUDA graph.
        reps: timed graph replays (the median is ``kernel_us``).
        fresh_caches: compile inside ``fresh_cache()``; False in a new process whose cache folders
            are new already (:mod:`torch_diode.bench.isolate`), where moving them would make the
            compile workers' work miss.

    Raises:
        Whatever compiling or running raises (out of memory, a compile error); the caller records it.
    """
    import torch

    t0 = time.perf_counter()
    with torch.no_grad(), cold_compile_state(fresh_caches=fresh_caches), mode_context(mode, model) as handle:
        compiled = compile_for(mode, fn)
        compile_s = first_call_s(compiled, args)
        diode = _diode_stats(handle.get_stats()) if handle is not None else None
        reps_us = kernel_times_us(compiled, args, graph_iters=graph_iters, reps=reps)
        del compiled
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return Measurement(
        compile_s=compile_s,
        kernel_us=statistics.median(reps_us),
        kernel_us_reps=reps_us,
        wall_s=time.perf_counter() - t0,
        diode=diode,
    )


def warm_up(modes: Sequence[str], *, model: Any = None, fresh_caches: bool = True) -> None:
    """Compile a small GEMM once in each kind of mode asked for, so that no measured compile pays
    for imports, Inductor's compile workers starting or the model's first use. ``fresh_caches``:
    as :func:`measure`'s (False in a new process: the workers it starts use the process's folders
    and stay up for the measured compile; in one process with ``fresh_caches``, each measured
    compile's :func:`cold_compile_state` shuts them down, and new ones start during the compile)."""
    import torch

    from torch_diode.collect.inductor import gemm_function

    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    kinds = ["default"] if "default" in modes else []
    kinds += ["max-autotune"] if any(m != "default" for m in modes) else []
    kinds += [m for m in modes if m in DIODE_TOP_K][:1]
    for mode in kinds:
        t0 = time.perf_counter()
        with torch.no_grad(), cold_compile_state(fresh_caches=fresh_caches), mode_context(mode, model):
            compile_for(mode, gemm_function("mm"))(a, b)
            torch.cuda.synchronize()
        log.info("warm-up compile (%s): %.1f s, not counted", mode, time.perf_counter() - t0)


def wait_for_compile_workers(timeout_s: float = 120.0, *, poll_s: float = 0.25) -> dict[str, Any]:
    """Wait until Inductor's compile-worker pool is ready, as a compile late in a long process finds
    it: ``AsyncCompile.use_process_pool()`` true (the first call starts the readiness check).

    Until the pool (started in the background by a process's first compile) is ready, Inductor
    precompiles the Triton choices it benchmarks in threads of the main process, and the benchmark
    reuses them; once it is ready, in the workers, and on an H200 with torch 2.11 / triton 3.6 the
    main process compiled every one again while benchmarking (session 74: 20 of 20 ``make_cubin``
    calls in the main thread after the wait, 0-1 before; stock max-autotune of one GEMM took
    3.1-3.7x as long), its Triton cache keys carrying another ptxas version than the workers'
    (:mod:`torch_diode.inductor.ptxas`; not so with ``TRITON_PTXAS_PATH`` set before Python
    started). A compile measured after this wait is a long compile's later GEMM; one measured
    right after a new process's warm-up, its first.

    Returns ``{"compile_pool_ready": bool, "compile_pool_waited_s": float}``; not ready after
    ``timeout_s``, or at once where Inductor will use no worker pool (one compile thread, or
    ``use_process_pool()`` false without asking the pool, as in a daemon process).
    """
    from torch._inductor import async_compile
    from torch._inductor.async_compile import AsyncCompile

    t0 = time.monotonic()
    threads = getattr(async_compile, "get_compile_threads", None)
    pool = (threads() if threads is not None else async_compile.config.compile_threads or 1) > 1
    ready = pool and AsyncCompile.use_process_pool()
    pool = pool and getattr(AsyncCompile, "_ready_future", True) is not None  # asked the pool: it will come
    while pool and not ready and time.monotonic() - t0 < timeout_s:
        time.sleep(poll_s)
        ready = AsyncCompile.use_process_pool()
    return {"compile_pool_ready": bool(ready), "compile_pool_waited_s": round(time.monotonic() - t0, 2)}


def cpu_model() -> str:
    """The host CPU's model name (``/proc/cpuinfo``), or ``platform.processor()`` where there is
    none: what a CPU timing (scoring, model loading, compile workers) depends on most."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def environment() -> dict[str, Any]:
    """What the results were measured on: GPU, hardware key, driver, torch, CUDA, triton, torch-diode."""
    import torch

    from torch_diode.collect.runner import driver_version
    from torch_diode.hardware import detect
    from torch_diode.inductor.ptxas import check_ptxas
    from torch_diode.model import versions

    v = versions()
    return {
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "",
        "hardware_key": detect().key,
        "driver": driver_version(),
        "torch": v["torch_version"],
        "cuda": torch.version.cuda or "",
        "triton": v["triton_version"],
        "torch_diode": v["diode_version"],
        "python": platform.python_version(),
        "allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        # whether stock max-autotune's later compiles compile their kernels twice here
        # (torch_diode.inductor.ptxas), and the variable that avoids it ("" where unset)
        "ptxas_mismatch": check_ptxas().mismatch,
        "triton_ptxas_path": os.environ.get("TRITON_PTXAS_PATH", ""),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def measure_here(
    build: Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]],
    mode: str,
    *,
    model_path: str | None = None,
    graph_iters: int = 20,
    reps: int = 20,
) -> dict[str, Any]:
    """The measurement of a new process (:mod:`torch_diode.bench.isolate`), as a results entry:
    load the model (diode modes), build the function and its inputs (seeded), warm up and measure,
    all in this process's own cache folders (``fresh_caches=False``)."""
    import torch

    from torch_diode.model import load_model

    model = load_model(model_path) if mode in DIODE_TOP_K and model_path is not None else None
    torch.manual_seed(0)
    fn, args = build()
    warm_up([mode], model=model, fresh_caches=False)
    return measure(fn, args, mode, model=model, graph_iters=graph_iters, reps=reps, fresh_caches=False).to_dict()
