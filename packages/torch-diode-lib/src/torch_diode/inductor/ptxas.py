"""Do Inductor's compile workers and this process key Triton's cache with the same ptxas?

Triton's cache key for a kernel includes the ptxas version (``CUDABackend.hash()``), which Triton
reads once per process (``get_ptxas_version`` is ``functools.lru_cache``d). Inductor's compile
workers set ``TRITON_PTXAS_PATH`` to torch's own ``bin/ptxas`` (where the wheel has one) when they
start; the main process sets it only on one compile path, often after Triton has read the version
of its own bundled ptxas. Then the two keys never match: once the worker pool is ready, every
Triton choice that max-autotune has a worker precompile is compiled again in the main process
while it is benchmarked. Measured on an H200 (torch 2.11+cu130, triton 3.6: torch's ptxas 13.0,
Triton's 12.8; session 74): the main process's keys carried 12.8, the workers' 13.0, 20 of 20
choices were compiled again, and stock max-autotune of one GEMM took 3.1-3.7x as long as before
the pool was ready; with ``TRITON_PTXAS_PATH`` set before Python started, 1.0-1.2x.

:func:`check_ptxas` reads both versions as Triton would (runs each ptxas with ``--version``) and
says whether they differ and what to set. It changes nothing; ``diode hardware`` prints it.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: The environment variable both Triton and Inductor's workers read for the ptxas to use.
ENV = "TRITON_PTXAS_PATH"


@dataclass(frozen=True)
class PtxasCheck:
    """The outcome of :func:`check_ptxas`: ``mismatch`` and why (``reason``), the two versions
    (``release X.Y`` where the output has it), torch's ptxas and what to do (``advice``)."""

    mismatch: bool
    reason: str
    torch_ptxas: str | None = None
    workers_version: str | None = None
    process_version: str | None = None
    advice: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def torch_bundled_ptxas() -> Path | None:
    """torch's own ``bin/ptxas`` (what Inductor's ``_set_triton_ptxas_path`` gives its workers), or
    None where the wheel has none (CPU builds, some CUDA builds)."""
    import torch

    path = Path(torch.__file__).resolve().parent / "bin" / "ptxas"
    return path if path.is_file() and os.access(path, os.X_OK) else None


@contextlib.contextmanager
def _ptxas_env(value: str | None) -> Iterator[None]:
    old = os.environ.get(ENV)
    if value is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = old


def _version_as_triton_reads_it(arch: int, ptxas_env: str | None) -> str:
    """Triton's ``get_ptxas_version`` (its uncached function) with ``TRITON_PTXAS_PATH`` as given."""
    import inspect

    from triton.backends.nvidia import compiler as nvidia

    read = getattr(nvidia.get_ptxas_version, "__wrapped__", nvidia.get_ptxas_version)
    with _ptxas_env(ptxas_env):
        return str(read(arch) if inspect.signature(read).parameters else read())


def _release(version: str) -> str:
    m = re.search(r"release (\d+\.\d+)", version)
    return m.group(1) if m else version.strip().splitlines()[-1] if version.strip() else "?"


def check_ptxas(*, arch: int = 90, torch_ptxas: Path | None = None) -> PtxasCheck:
    """Whether this process's Triton, if its first compile runs before Inductor sets
    ``TRITON_PTXAS_PATH`` (as a max-autotune compile's does), keys its cache with another ptxas
    version than Inductor's compile workers.

    ``arch``: the GPU's compute capability as Triton's backend gives it (90 for Hopper; Triton
    picks its ptxas by it). ``torch_ptxas``: torch's ptxas (default: :func:`torch_bundled_ptxas`).
    Never raises: a failure to read a version is a ``reason``.
    """
    set_to = os.environ.get(ENV)
    if set_to:
        return PtxasCheck(False, f"{ENV} is set ({set_to}): this process and the workers use it")
    ptxas = torch_ptxas if torch_ptxas is not None else torch_bundled_ptxas()
    if ptxas is None:
        return PtxasCheck(False, "torch has no bin/ptxas: the compile workers use the same ptxas as this process")
    try:
        workers = _version_as_triton_reads_it(arch, str(ptxas))
        process = _version_as_triton_reads_it(arch, None)
    except Exception as e:  # a diagnostic: say what failed, never fail the caller
        return PtxasCheck(False, f"could not read a ptxas version: {type(e).__name__}: {e}", str(ptxas))
    w, p = _release(workers), _release(process)
    if workers == process:
        return PtxasCheck(False, f"torch's ptxas and Triton's give the same version ({w})", str(ptxas), w, p)
    return PtxasCheck(
        True,
        f"Inductor's compile workers use torch's ptxas ({w}), this process's Triton its own ({p}): "
        "their cache keys differ, so max-autotune compiles every worker-precompiled choice again "
        "once the worker pool is ready",
        str(ptxas),
        w,
        p,
        f"set {ENV}={ptxas} before starting Python (export it in the shell)",
    )
