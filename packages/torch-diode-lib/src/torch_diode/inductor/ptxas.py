"""Do Inductor's compile workers and this process key Triton's cache with the same ptxas?

Triton's cache key for a kernel includes the ptxas version (``CUDABackend.hash()``), which Triton
reads once per process (``get_ptxas_version`` is ``functools.lru_cache``d). Inductor's compile
workers set ``TRITON_PTXAS_PATH`` to torch's own ``bin/ptxas`` (where the wheel has one) when they
start; the main process sets it only when it compiles a Triton kernel of a graph's output code
itself (before the worker pool is ready), and by then Triton has read the version of its own
bundled ptxas earlier in the same compile (session 78, torch 2.11: set by a pointwise graph's
compile and by max-autotune of a GEMM with an epilogue, not by one whose output code had no
Triton kernel, nor with one compile thread). Then the two keys never match: once the worker pool is ready, every
Triton choice that max-autotune has a worker precompile is compiled again in the main process
while it is benchmarked. Measured on an H200 (torch 2.11+cu130, triton 3.6: torch's ptxas 13.0,
Triton's 12.8; session 74): the main process's keys carried 12.8, the workers' 13.0, 20 of 20
choices were compiled again, and stock max-autotune of one GEMM took 3.1-3.7x as long as before
the pool was ready; with ``TRITON_PTXAS_PATH`` set before the first compile, 1.0-1.2x.

Where it applies: a torch wheel with its own ``bin/ptxas`` of another version than Triton's, and a
GPU for which Triton takes its ptxas from ``TRITON_PTXAS_PATH`` (Hopper with triton 3.6; Triton 3.9
takes sm_90's and newer from ``TRITON_PTXAS_BLACKWELL_PATH``, which Inductor does not set, so the
two agree there), with more than one compile thread (a worker pool).

:func:`check_ptxas` reads the version each side would key with, as Triton reads it, each in a new
Python process (this one's environment is left alone), and says whether they differ and what to
set. ``diode hardware`` prints it. Where the variable is set already, it also compares the version
this process's Triton remembers from an earlier read (a compile before Inductor set the variable)
against the variable's ptxas: the late case that :func:`pin_ptxas` mends. (Where this Triton
remembers versions per arch, 3.9, and holds only another arch's, that read makes it read and
remember the arch's version now, as its next compile for that arch would.)
:func:`align_with_new_processes` mends that late case for a process whose own compile processes
start without Inductor (the sweep collector's): it makes this process's Triton key with what a new
process reads (session 77).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import re
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: The environment variable both Triton and Inductor's workers read for the ptxas to use.
ENV = "TRITON_PTXAS_PATH"
#: Every variable by which Triton picks its ptxas: ``ENV``, and Triton 3.9's for sm_90 and newer.
VARIABLES = (ENV, "TRITON_PTXAS_BLACKWELL_PATH")
#: Said beside compile times measured where :func:`check_ptxas` finds a mismatch (``diode demo``,
#: ``diode bench``'s report, from ``environment()["ptxas_mismatch"]``).
NOTE = (
    "on this install Inductor's compile workers and the main process key Triton's cache with different "
    "ptxas versions (`diode hardware`), so a compile that starts once Inductor's worker pool is ready "
    "compiles the Triton choices it benchmarks twice, stock max-autotune's most; TRITON_PTXAS_PATH set "
    "before the first compile (or torch_diode.inductor.ptxas.pin_ptxas() at the top of the script) avoids it "
    '(README, "How the compile times are measured").'
)


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


#: Run in a new process: the ptxas version Triton keys its cache with for an arch, and the ptxas
#: it takes (``get_ptxas``, where this Triton has it), as JSON.
_READ = """
import inspect, json, sys
from triton.backends.nvidia import compiler as c
arch = int(sys.argv[1])
def call(f):
    return f(arch) if inspect.signature(f).parameters else f()
path = None
if hasattr(c, "get_ptxas"):
    tool = call(c.get_ptxas)
    path = getattr(tool, "path", tool)
print(json.dumps({"version": str(call(c.get_ptxas_version)), "path": str(path) if path else None}))
"""


def _read_in_new_processes(arch: int, envs: list[dict[str, str]], timeout_s: float) -> list[dict[str, Any]]:
    """``_READ`` in one new Python process per environment, run side by side."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _READ, str(arch)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a group of its own: a ptxas that hangs goes with it
        )
        for env in envs
    ]
    out = []
    try:
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=timeout_s)
            if proc.returncode != 0:
                last = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit code {proc.returncode}"
                raise RuntimeError(last)
            out.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the group, the ptxas it ran included
            proc.wait()
    return out


def _release(version: str) -> str:
    m = re.search(r"release (\d+\.\d+)", version)
    return m.group(1) if m else version.strip().splitlines()[-1] if version.strip() else "?"


def triton_arch(compute_capability: tuple[int, int] | None) -> int:
    """A compute capability as Triton's CUDA backend takes it (``(9, 0)`` -> 90); 90 where unknown."""
    return compute_capability[0] * 10 + compute_capability[1] if compute_capability else 90


def check_ptxas(*, arch: int | None = None, torch_ptxas: Path | None = None, timeout_s: float = 60.0) -> PtxasCheck:
    """Whether this process's Triton, if its first compile runs before Inductor sets
    ``TRITON_PTXAS_PATH`` (as a max-autotune compile's does), keys its cache with another ptxas
    version than Inductor's compile workers, which set it to torch's ptxas when they start.

    ``arch``: the GPU's compute capability as Triton's backend takes it (90 for Hopper; Triton
    picks its ptxas by it; default: the current CUDA device's, :func:`triton_arch`). ``torch_ptxas``: torch's ptxas (default: :func:`torch_bundled_ptxas`).
    Each side is read in a new Python process (up to ``timeout_s``). Where ``TRITON_PTXAS_PATH`` is
    set, the workers keep it, and this process keys with it too unless its Triton read another
    version before it was set (then a mismatch, with :func:`pin_ptxas` as the advice). Never
    raises: a failure to read a version is a ``reason``.
    """
    try:
        import torch

        if torch.version.hip:
            return PtxasCheck(False, "a ROCm build: Triton does not use ptxas here")
        if arch is None:
            arch = triton_arch(torch.cuda.get_device_capability() if torch.cuda.is_available() else None)
        set_to = os.environ.get(ENV)
        if set_to is not None:  # Inductor's workers leave it as it is (they test ``is not None`` too)
            return _check_set_variable(set_to, arch, timeout_s)
        ptxas = torch_ptxas if torch_ptxas is not None else torch_bundled_ptxas()
        if ptxas is None:
            return PtxasCheck(False, "torch has no bin/ptxas: the compile workers use the same ptxas as this process")
        here = {k: v for k, v in os.environ.items() if k != ENV}
        process, workers = _read_in_new_processes(arch, [here, {**here, ENV: str(ptxas)}], timeout_s)
    except Exception as e:  # a diagnostic: say what failed, never fail the caller
        return PtxasCheck(False, f"could not read a ptxas version: {type(e).__name__}: {e}")
    w, p = _release(workers["version"]), _release(process["version"])
    if workers["version"] == process["version"]:
        taken = workers.get("path")
        if taken and Path(taken).resolve() != Path(ptxas).resolve():
            reason = f"Triton does not take torch's ptxas for sm_{arch} (it takes {taken}): the two agree ({p})"
        else:
            reason = f"torch's ptxas and Triton's give the same version ({w})"
        return PtxasCheck(False, reason, str(ptxas), w, p)
    return PtxasCheck(
        True,
        f"Inductor's compile workers key Triton's cache with torch's ptxas ({w}), this process with "
        f"Triton's own ({p}): with more than one compile thread, once the worker pool is ready, "
        "max-autotune compiles every worker-precompiled choice again",
        str(ptxas),
        w,
        p,
        f"set {ENV}={ptxas} before the first compile: in the environment that starts Python "
        f"(e.g. {ENV}=... python train.py, or this virtual environment's activate script), or in "
        "the script before its first compile with torch_diode.inductor.ptxas.pin_ptxas()",
    )


def _remembered_version(arch: int) -> str | None:
    """The ptxas version this process's Triton read already for ``arch`` and keys with (its
    ``get_ptxas_version`` cache), or None where it has read none yet (its first compile reads the
    ptxas named then). Where the cache holds only another arch's (Triton 3.9 keys it by arch), this
    reads and remembers the version of the ptxas named now, as Triton's next compile for ``arch``
    would; that differs only where the variable changes before that compile."""
    from triton.backends.nvidia import compiler

    get = getattr(compiler, "get_ptxas_version", None)
    info = getattr(get, "cache_info", None)
    if info is None or info().currsize == 0:
        return None
    return str(_for_arch(get, arch))


def _remembered_against_new_process(arch: int, timeout_s: float) -> tuple[str, str] | None:
    """(the version this process's Triton remembers for ``arch``, the one a new process with this
    environment reads) where the two differ; None where they agree or nothing is remembered."""
    remembered = _remembered_version(arch)
    if remembered is None:
        return None
    (fresh,) = _read_in_new_processes(arch, [dict(os.environ)], timeout_s)
    return None if fresh["version"] == remembered else (remembered, fresh["version"])


def _check_set_variable(set_to: str, arch: int, timeout_s: float) -> PtxasCheck:
    """:func:`check_ptxas` where the variable is set: the workers take its ptxas; so does this
    process, unless its Triton read another version before the variable was set."""
    agree = PtxasCheck(
        False, f"{ENV} is set ({set_to!r}): Inductor's compile workers keep it, so they and this process agree"
    )
    if not set_to:  # nothing to read (Triton 3.9 cannot run an empty path)
        return agree
    differ = _remembered_against_new_process(arch, timeout_s)
    if differ is None:
        return agree
    p, w = (_release(v) for v in differ)
    return PtxasCheck(
        True,
        f"{ENV} is set ({set_to!r}) and Inductor's compile workers started with it key Triton's cache with "
        f"its ptxas ({w}), but this process's Triton read another version before it was set ({p}) and keys "
        "with that: once the worker pool is ready, max-autotune compiles every worker-precompiled choice again",
        set_to,
        w,
        p,
        "call torch_diode.inductor.ptxas.pin_ptxas() in this process (it makes Triton forget the version "
        f"it read), or set {ENV} before the first compile",
    )


def align_with_new_processes(arch: int, *, timeout_s: float = 60.0) -> str | None:
    """Make this process's Triton key its cache with the ptxas version that a Python process it
    starts now (this environment as it is) keys with: where it remembers a version read before
    the ptxas variables (:data:`VARIABLES`) changed (a compile before Inductor set
    ``TRITON_PTXAS_PATH``, the late case of :func:`check_ptxas`), it forgets that version and reads
    and remembers the one the environment names now. For a process that loads kernels its own
    compile processes built (the sweep collector, which also starts them with the variables as they
    were here, :func:`ptxas_variables`): otherwise it misses their cache entries and compiles every
    kernel again itself, as it times it (seen on an H200, session 77: 12 of 12 precompiled kernels
    compiled again in a test process where an earlier test's ``torch.compile`` had set the
    variable). Like :func:`pin_ptxas`, it changes Triton's memory in this process (its later
    compiles key with the ptxas the environment names, as a new process's would); kernels compiled
    before keep their cache entries.

    The new process imports Triton alone: it stands for compile processes that set no ptxas
    variable themselves (the sweep's do not; Inductor's set ``TRITON_PTXAS_PATH`` where it is
    unset, which :func:`check_ptxas` covers). ``arch``: as Triton's backend takes it
    (:func:`triton_arch`). Returns what it did, or None where nothing was remembered, the two
    agree, ``TRITON_PTXAS_PATH`` is set empty (Triton 3.9 cannot run it), or reading a version
    failed (logged: never fails the caller)."""
    if os.environ.get(ENV) == "":
        return None
    try:
        differ = _remembered_against_new_process(arch, timeout_s)
        if differ is None:
            return None
        remembered, fresh = differ
        from triton.backends.nvidia import compiler

        _forget_ptxas_version()
        # read here and remembered from now on, whatever the variables do next (Triton's next
        # compile would read it anyway, the same way)
        now = str(_for_arch(compiler.get_ptxas_version, arch))
    except Exception as e:  # a consistency step: say what failed, never fail the caller
        log.warning("could not align this process's ptxas version with a new process's: %s: %s", type(e).__name__, e)
        return None
    named = ", ".join(f"{k}={v}" for k, v in ptxas_variables().items() if v is not None) or f"{ENV} unset"
    return (
        f"this process's Triton keyed its cache with ptxas {_release(remembered)}, but a new process with "
        f"this environment ({named}) keys with {_release(fresh)}: the ptxas variables changed after "
        f"its first read; it now keys with {_release(now)}, so it loads the kernels its compile processes build"
    )


def ptxas_variables() -> dict[str, str | None]:
    """The values of :data:`VARIABLES` in this process's environment (None: unset)."""
    return {name: os.environ.get(name) for name in VARIABLES}


def set_ptxas_variables(values: dict[str, str | None]) -> None:
    """Set (or, for None, unset) the ptxas variables to ``values`` (:func:`ptxas_variables`'s)."""
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@dataclass(frozen=True)
class PinResult:
    """What :func:`pin_ptxas` did: ``pinned`` (this process keys Triton's cache with the ptxas the
    variable names from now on), ``set_variable`` (it set the variable; False where it was set
    already), the variable's ptxas (``path``) and why (``reason``, with a warning where compile
    workers that started before may keep another ptxas)."""

    pinned: bool
    reason: str
    path: str | None = None
    set_variable: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _compile_pool_started() -> bool:
    """Whether Inductor has a compile-worker pool in this process (its workers, started with the
    environment of that moment, set the variable to torch's ptxas themselves where it was unset)."""
    mod = sys.modules.get("torch._inductor.async_compile")
    if mod is None:
        return False
    if getattr(mod, "_pool_set", None):  # every pool Inductor created and has not shut down
        return True
    return getattr(getattr(mod, "AsyncCompile", None), "_ready_future", None) is not None


def _forget_ptxas_version() -> bool:
    """Clear Triton's per-process memory of the ptxas version (``get_ptxas_version``, and
    ``CUDABackend.hash``, which holds it per backend object), so that the next compile reads the
    ptxas now named; False where this Triton remembers neither. Inductor's own memory of Triton's
    backend hash (``torch.utils._triton.triton_hash_with_backend``, in its autotune-cache keys) is
    left: it only names cache entries, and the kernels' own keys are Triton's."""
    try:
        from triton.backends.nvidia import compiler
    except Exception:
        return False
    cleared = False
    for f in (
        getattr(compiler, "get_ptxas_version", None),
        getattr(getattr(compiler, "CUDABackend", None), "hash", None),
    ):
        clear = getattr(f, "cache_clear", None)
        if clear is not None:
            clear()
            cleared = True
    return cleared


def _for_arch(f: Any, arch: int) -> Any:
    """Call one of Triton's per-arch ptxas functions (``get_ptxas``, ``get_ptxas_version``), which
    take the arch in Triton 3.9 and nothing in 3.6."""
    return f(arch) if inspect.signature(f).parameters else f()


def _ptxas_taken(arch: int) -> str | None:
    """The ptxas this process's Triton takes for ``arch`` now (``get_ptxas``), or None where this
    Triton cannot say (no ``get_ptxas``, or it fails)."""
    try:
        from triton.backends.nvidia import compiler

        get = getattr(compiler, "get_ptxas", None)
        if get is None:
            return None
        tool = _for_arch(get, arch)
        path = getattr(tool, "path", tool)
        return str(path) if path else None
    except Exception:
        return None


def _same_file(a: str | os.PathLike[str] | None, b: str | os.PathLike[str] | None) -> bool:
    return a is not None and b is not None and Path(a).resolve() == Path(b).resolve()


def pin_ptxas(path: str | os.PathLike[str] | None = None, *, arch: int | None = None) -> PinResult:
    """Opt in: make this process and Inductor's compile workers build and key Triton's kernels with
    one ptxas, by setting ``TRITON_PTXAS_PATH`` where it is unset (to ``path``, or to torch's own
    ``bin/ptxas`` as the workers take it) and making Triton forget the ptxas version it read
    already. Best called at the top of a script, before the first ``torch.compile``, and not while
    another thread compiles; stock max-autotune's later GEMMs then no longer compile every choice
    twice where :func:`check_ptxas` finds a mismatch (session 74: 3.1-3.7x the compile time
    otherwise). Between the two ptxas binaries no difference in kernel or compile time was detected
    on an H200 (session 75, a few percent not excluded), so the default is torch's: what the
    workers use anyway.

    Where the variable is set already (by the user, or by Inductor itself on a compile path it took
    in this process) it is left as it is, and only Triton's remembered version is cleared: a process
    whose first compile read Triton's own ptxas, before Inductor set the variable, keys with the
    variable's ptxas from then on (session 75: the late call is this case). An empty variable is
    left alone too, and nothing is pinned (Triton 3.9 cannot run an empty path: every compile for
    sm_80 fails on it). Setting the variable changes the process's environment (inherited by every
    process it starts), and so applies to stock compiles too; it is never done at import.

    ``arch``: the GPU's compute capability as Triton takes it (default: the current CUDA device's,
    :func:`triton_arch`; none without a device). Where Triton does not take ``TRITON_PTXAS_PATH``
    for that arch (Triton 3.9 on sm_90 and newer), nothing is pinned or set: the workers and this
    process take the same ptxas already. Nothing either on a ROCm build, or where the variable is
    unset, torch has no ``bin/ptxas`` and no ``path`` is given. Kernels compiled before the call keep
    their cache entries; compile workers started before the variable was set keep the ptxas they
    started with (the result says so where that may differ). Raises ``ValueError`` for a ``path``
    that is not an executable file.
    """
    import torch

    if torch.version.hip:
        return PinResult(False, "a ROCm build: Triton does not use ptxas here")
    if path is not None:
        chosen = Path(path)
        if not (chosen.is_file() and os.access(chosen, os.X_OK)):
            raise ValueError(f"pin_ptxas: {chosen} is not an executable file; give the path of a ptxas binary")
    if arch is None and torch.cuda.is_available():
        arch = triton_arch(torch.cuda.get_device_capability())
    torch_ptxas = torch_bundled_ptxas()
    set_to = os.environ.get(ENV)
    if set_to == "":
        return PinResult(
            False, f"{ENV} is set but empty: no ptxas to pin; unset it, or name a ptxas, and call again", ""
        )
    if set_to is not None:
        chosen, set_variable = Path(set_to), False
        reason = f"{ENV} is set already ({set_to!r}): left as it is"
        if path is not None and not _same_file(path, set_to):
            reason += f" ({path} not used)"
    else:
        if path is None:
            if torch_ptxas is None:
                return PinResult(
                    False,
                    "torch has no bin/ptxas: the compile workers use the same ptxas as this process, nothing to pin",
                )
            chosen = torch_ptxas
        os.environ[ENV] = str(chosen)
        set_variable = True
        reason = f"{ENV}={chosen}: this process and compile workers started from now on use it"
    if arch is not None:
        taken = _ptxas_taken(arch)
        if taken is not None and not _same_file(taken, chosen):
            if set_variable:
                del os.environ[ENV]  # not taken for this arch: leave the environment as it was
            return PinResult(
                False,
                f"Triton does not take {ENV} for sm_{arch} (it takes {taken}): the compile workers and this "
                "process use the same ptxas already, nothing to pin"
                + ("" if set_variable else f"; {ENV} left as it is ({set_to!r})"),
                set_to,
            )
    if _forget_ptxas_version():
        reason += "; Triton's remembered ptxas version cleared, so this process keys with that ptxas from now on"
    # workers started with the variable unset take torch's ptxas (Triton's own where torch has none)
    if _compile_pool_started() and not _same_file(torch_ptxas, chosen):
        reason += (
            "; Inductor's compile workers had started already, and unless they started with this "
            f"{ENV} they keep {'torch' if torch_ptxas is not None else 'Triton'}'s own ptxas, so their "
            "keys may still differ: call pin_ptxas() before the first compile"
        )
    return PinResult(True, reason, str(chosen), set_variable=set_variable)
