"""Named adapters for the places where Inductor differs between torch 2.10 and 2.14.

Everything version-dependent in the handler goes through this module, so the handler itself has
one code path. torch 2.9 and older (``get_mm_configs`` instead of ``_finalize_template_configs``)
are not supported: :func:`unsupported_reason` says why and the installer warns once.
Facts and line references: ``shared/reference/inductor-hooks.md``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import re
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

#: Oldest torch whose ``InductorChoices`` has ``_finalize_template_configs`` (the hook we override).
MIN_TORCH: tuple[int, int] = (2, 10)
#: Newest torch the adapters were written against; newer versions are tried, with a debug log.
MAX_TESTED_TORCH: tuple[int, int] = (2, 14)

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)")


def parse_torch_version(version: str) -> tuple[int, int]:
    """``"2.13.0+cpu"``, ``"2.14.0.dev20260101"``, ``"2.10.0a0+git1234"`` -> ``(2, 13)`` ...

    Raises:
        ValueError: the string does not start with ``MAJOR.MINOR``.
    """
    match = _VERSION_RE.match(version.strip())
    if match is None:
        raise ValueError(f"cannot parse a torch version from {version!r}; expected e.g. '2.13.0'")
    return int(match.group(1)), int(match.group(2))


def torch_version() -> tuple[int, int]:
    """The running torch's ``(major, minor)``, read at call time (never baked in at import)."""
    import torch

    return parse_torch_version(str(torch.__version__))


def unsupported_reason(version: tuple[int, int] | None = None) -> str | None:
    """Why the choices handler cannot run on this torch, or ``None`` when it can."""
    v = torch_version() if version is None else version
    if v < MIN_TORCH:
        return (
            f"torch {v[0]}.{v[1]} is too old for torch-diode's choices handler (needs torch >= "
            f"{MIN_TORCH[0]}.{MIN_TORCH[1]}, which has InductorChoices._finalize_template_configs); "
            "upgrade torch to use the learned kernel selection. Inductor's stock autotuning is unchanged"
        )
    return None


def triton_missing() -> str | None:
    """Why Inductor's Triton configs cannot be made here (triton is not installed: the CPU torch
    wheel ships none, and without it the configs are placeholders whose first use is a
    ``TypeError`` deep in Inductor), or ``None`` when triton is installed."""
    import importlib.util
    from importlib.metadata import PackageNotFoundError, version

    try:
        if importlib.util.find_spec("triton") is not None:
            return None
    except (ImportError, ValueError):  # a broken installation, or a module without a spec
        pass
    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = "installed here"
    return (
        "needs triton (Inductor's Triton configs), which is not installed: "
        f"pip install triton, the version that matches torch {torch_version}"
    )


def config_is_thread_local(version: tuple[int, int] | None = None) -> bool:
    """From 2.12, Inductor config overrides live in a ContextVar: other threads do not see them."""
    return (torch_version() if version is None else version) >= (2, 12)


def choices_factory_needs_uuid(version: tuple[int, int] | None = None) -> bool:
    """From 2.12, ``config.inductor_choices_class`` instances must implement ``uuid()`` (FX cache key)."""
    return (torch_version() if version is None else version) >= (2, 12)


def feedback_saver_arity(version: tuple[int, int] | None = None) -> int:
    """Positional arguments Inductor passes to a feedback saver: 6 from 2.11 (``precompile_times``), else 5."""
    return 6 if (torch_version() if version is None else version) >= (2, 11) else 5


@functools.cache
def template_heuristics_module(submodule: str = "") -> ModuleType:
    """Import Inductor's template-heuristics package (or one of its submodules, e.g. ``"triton"``).

    torch 2.14 moved ``torch._inductor.template_heuristics`` to ``torch._inductor.heuristics.template``
    and left a deprecated shim at the old path; we import the new path first. Cached: before 2.14
    the failed import of the new path costs ~30 us, and the handler's replay asks on every call.
    """
    suffix = f".{submodule}" if submodule else ""
    try:
        return importlib.import_module(f"torch._inductor.heuristics.template{suffix}")
    except ModuleNotFoundError:
        return importlib.import_module(f"torch._inductor.template_heuristics{suffix}")


def choices_virtual() -> object:
    """Inductor's ``Virtualized`` holder of the choices handler (``virtualized._choices``).

    Its ``_default`` factory builds a thread's handler on first use; replacing it is the only
    process-wide install route that reaches threads started later (the ``V.set_choices_handler``
    route and, from 2.12, ``config.inductor_choices_class`` are per thread).
    """
    from torch._inductor import virtualized

    return virtualized._choices


def thread_local_store() -> object:
    """The ``threading.local`` in which ``Virtualized`` keeps each thread's handler."""
    from torch._inductor import virtualized

    return virtualized.threadlocal


def use_aten_gemm_kernels() -> bool:
    """Whether Inductor offers ATen GEMM kernels (``"ATEN"`` in ``max_autotune_gemm_backends``)."""
    from torch._inductor.utils import use_aten_gemm_kernels as _use

    return bool(_use())


def template_heuristic(template_uid: str, device_type: str, op_name: str) -> Any:
    """Inductor's heuristic for a template on a device and op, as ``InductorChoices.get_ktc`` finds it."""
    return template_heuristics_module("registry").get_template_heuristic(template_uid, device_type, op_name)


def mm_template_kwargs(heuristic: Any, kernel_inputs: Any, op_name: str) -> list[dict[str, Any]] | None:
    """The kwargs dicts of ``heuristic.get_template_configs(kernel_inputs, op_name)``, in order, in
    the current search space; ``None`` when ``heuristic`` is not the plain Triton GEMM heuristic
    mirrored here (the caller then enumerates through Inductor as usual).

    Inductor's ``MMTemplateConfigMixin._get_template_configs_impl`` (the same loop in 2.10-2.14;
    2.13 ``template_heuristics/triton.py:2114-2366``) converts each scaled config with
    ``_convert_config_to_template_kwargs`` (2.13 ``:2368-2400``), which evaluates ``EVEN_K``
    symbolically per config (2.12+: ``Eq(Mod(K, BLOCK_K), 0)``, ~8 us): ~11 ms for the ~1,400
    configs of the EXHAUSTIVE space, which has only ~5 distinct ``BLOCK_K``. Here the configs
    come from the heuristic's own generator, and Inductor's converter runs on the first two
    configs of each ``(BLOCK_K, kwarg names)``; every other config's dict is the first one's with
    the config's own ``num_stages``, ``num_warps`` and kwargs written over it (in 2.10-2.14 the
    rest, ``EVEN_K``, ``USE_FAST_ACCUM``, ``ACC_TYPE``, 2.12's ``OUT_DTYPE`` and the default
    ``GROUP_M``, depends only on K, ``BLOCK_K``, the output dtype and which kwargs the config
    has). If the second config's dict is not exactly Inductor's (names, order, values and their
    types), the converter depends on more than that (another torch) and ``None`` is returned.

    Used only when the heuristic inherits the three methods involved (``get_template_configs``,
    ``_get_template_configs_impl``, ``_convert_config_to_template_kwargs``) unchanged, and without
    ROCm's origami selector (another branch of ``_get_template_configs_impl``, 2.13+).
    """
    try:
        base = template_heuristics_module("base").TemplateConfigHeuristics
        triton = template_heuristics_module("triton")
        mixin = triton.MMTemplateConfigMixin
    except (ImportError, AttributeError):
        return None
    if getattr(triton, "origami", None) is not None or not hasattr(kernel_inputs, "mnk_symbolic"):
        return None
    cls = type(heuristic)
    for name, owner in (
        ("get_template_configs", base),
        ("_get_template_configs_impl", mixin),
        ("_convert_config_to_template_kwargs", mixin),
    ):
        if name in vars(heuristic) or getattr(cls, name, None) is not getattr(owner, name, None):
            return None
    if not all(callable(getattr(heuristic, name, None)) for name in ("should_run", "_valid", "_get_config_generator")):
        return None
    if not heuristic.should_run(kernel_inputs):
        return []
    if len(kernel_inputs.nodes()) < 2:
        return None  # Inductor raises its own error for this
    if not heuristic._valid(kernel_inputs):
        return []
    m, n, k = kernel_inputs.mnk_symbolic()
    out_dtype = kernel_inputs.out_dtype()
    configs = heuristic._get_config_generator()
    convert = heuristic._convert_config_to_template_kwargs
    first: dict[tuple[Any, ...], dict[str, Any]] = {}
    checked: set[tuple[Any, ...]] = set()
    out: list[dict[str, Any]] = []
    for c in configs(m, n, k, dtype_size=kernel_inputs.dtype().itemsize, op_name=op_name):
        key = (c.kwargs["BLOCK_K"], tuple(c.kwargs))
        rep = first.get(key)
        if rep is None:
            first[key] = rep = convert(c, m, n, k, out_dtype)
            out.append(rep)
            continue
        kw = dict(rep)
        kw["num_stages"] = c.num_stages
        kw["num_warps"] = c.num_warps
        kw.update(c.kwargs)
        if key not in checked:
            checked.add(key)
            real = convert(c, m, n, k, out_dtype)
            if [(name, type(v), v) for name, v in real.items()] != [(name, type(v), v) for name, v in kw.items()]:
                return None
        out.append(kw)
    return out


#: The warp size :func:`gpu_warp_without_a_gpu` reports: every NVIDIA GPU's (the only GPUs whose
#: spaces are enumerated without the GPU: the sweep's and campaign's checks on a CPU machine).
NVIDIA_WARP_SIZE = 32
_no_gpu_lock = threading.RLock()  # re-entrant: a block may enumerate inside another


class _WarpOnlyProperties:
    """Device properties holding a warp size alone; any other property is missing (AttributeError)."""

    warp_size = NVIDIA_WARP_SIZE

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"no CUDA device here: only warp_size is known ({name!r} asked)")


@contextlib.contextmanager
def gpu_warp_without_a_gpu() -> Iterator[None]:
    """Enumerate Inductor's GEMM configs on a machine without a CUDA GPU as a GPU would.

    torch 2.14's ``BaseConfigHeuristic._prune_reg_spill_configs`` (the register-spill prune of
    the EXHAUSTIVE space, ``acc_regs > 255``) reads the warp size from
    ``torch.cuda.get_device_properties``, and prunes nothing when that fails: on a CPU machine
    2.14 enumerated 1,650 Triton configs for an fp16 1024x1024x2048 mm where 2.10-2.13 (which
    assume 32 lanes, on any machine) enumerate 1,400, as 2.14 does where a GPU reports its 32
    lanes (read from its source; the GPU machines have 2.11). The 250 more are tiles of 128x128
    and more with two warps, and the like, whose accumulators alone exceed 255 registers a
    thread. Inside this block, without a CUDA device on torch 2.14+, ``torch.cuda.current_device()``
    is 0 and its properties hold ``warp_size`` = 32 alone; elsewhere nothing changes.
    Process-wide while it lasts (one block at a time).
    """
    import torch

    if torch_version() < (2, 14) or torch.cuda.is_available():
        yield
        return
    with _no_gpu_lock:
        saved = torch.cuda.current_device, torch.cuda.get_device_properties
        torch.cuda.current_device = lambda: 0  # type: ignore[assignment]
        torch.cuda.get_device_properties = lambda *args, **kwargs: _WarpOnlyProperties()  # type: ignore[assignment]
        try:
            yield
        finally:
            torch.cuda.current_device, torch.cuda.get_device_properties = saved  # type: ignore[assignment]


@contextlib.contextmanager
def fresh_compile_folders() -> Iterator[None]:
    """New, empty Inductor and Triton cache folders for the block (Inductor's ``fresh_cache()``:
    in-memory caches cleared, the folders deleted after), with Inductor's compile workers shut
    down on entry and on exit: the workers a compile inside starts are started in these folders,
    and none is left holding folders about to be deleted.

    In one long process, a compile after the first had the kernels it benchmarks compiled,
    one by one, in the main process; with the workers shut down before it, not (on an H200,
    session 72: stock max-autotune of ``vit_b_mlp`` 22.2 s, 7.5 s so, 8.3 s in a new process).
    Why (session 74): with the worker pool ready, the workers precompile those kernels, and the
    main process's Triton cache keys carry another ptxas version than theirs
    (:mod:`torch_diode.inductor.ptxas`), so it compiles each again; shut down, the pool is not
    ready again until the next compile is under way. Nothing here sets ``force_disable_caches``,
    which has Inductor compile each graph in a new folder of its own (``with_fresh_cache_if_config``).

    Any compile workers of the process are stopped (a compile running meanwhile in another thread
    would lose them); the next compile after the block starts new ones in the restored folders.
    The stop on exit costs wall time: with torch 2.11 on a 16-CPU H200 machine, 5.8-9.6 s after
    each of three one-GEMM compiles (the pool ready each time; session 78, rule 3), outside any
    compile measured inside the block.
    torch 2.13's ``fresh_cache()`` restores its two environment variables on exit; some older
    versions restore the whole ``os.environ`` (``mock.patch.dict``), undoing anything set in it
    inside the block.
    """
    from torch._inductor import utils
    from torch._inductor.async_compile import shutdown_compile_workers

    fresh = getattr(utils, "fresh_cache", None) or utils.fresh_inductor_cache  # the older name, torch < 2.8
    with fresh():
        shutdown_compile_workers()  # new ones start, from these folders, when a compile needs them
        try:
            yield
        finally:
            shutdown_compile_workers()  # none is left holding folders about to be deleted
