"""One cold compile per new process: what a compile costs a user's fresh process, not a warm one.

Measured in one long process, a compile inside ``torch._inductor.utils.fresh_cache()`` is not the
compile a fresh process pays. On an H200 (torch 2.11, session 71), after the first measured
compile of a process, Inductor compiled the Triton kernels it benchmarks again, one by one, in the
main thread: stock max-autotune's cold compile of ``llm_mlp_up`` took 10.2 s so, 2.6 s in a new
process. (:func:`torch_diode.bench.measure.cold_compile_state` now shuts Inductor's compile
workers down inside ``fresh_cache()``, which gave the new-process times in one process in
session 72, though not closely enough to stand in for them in session 73; why the workers matter
was found in session 74: once their pool is ready they precompile those kernels, and the main
process's Triton cache keys carry another ptxas version than theirs, :mod:`torch_diode.inductor.ptxas`.
A new process stays the measure of record: nothing of an earlier compile survives in it.)

:func:`run_in_new_process` runs a function in a new Python process whose ``TORCHINDUCTOR_CACHE_DIR``
and ``TRITON_CACHE_DIR`` are new, empty folders (its compile workers inherit them), and returns
what the function returned (a JSON object). The function does its own warm-up compile before it
measures (:func:`torch_diode.bench.measure.warm_up`), and compiles without ``fresh_cache()``
(``measure(..., fresh_caches=False)``): its folders are already fresh, and shared with its workers.

The new process is ``python -m torch_diode.bench.isolate REQUEST RESULT``; the request names the
function (``module:function``, importable from the child's ``sys.path`` plus ``paths``) and its
keyword arguments. A function that raises, a process that dies (a crash, running out of memory)
or one that runs past ``timeout_s`` comes back as ``{"error": ...}`` saying which, with the end
of the process's output; the process and everything it started (compile workers) are killed on a
timeout or an interrupt, and the folders are deleted.

The work folder's name says whose it is (``diode-isolated-PID-START-PIDNS-BOOT-XXXXXXXX``: the pid,
its start time, its pid namespace and the machine's boot id, from ``/proc``, ``x`` where unknown).
Where a process ends with no chance to delete its folder (a SIGKILL of it before its child started,
or of both: the OOM killer), the next :func:`run_in_new_process` of this user with the same
temporary directory on the same machine, since the same boot, deletes it
(:func:`_remove_leaked_folders`); a folder whose owner cannot be looked up from here (another
machine sharing the temporary directory, another pid namespace, no ``/proc``) is left alone.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: Characters of the child's output kept in an error (its end: the traceback).
ERROR_TAIL_CHARS = 1500
#: Set by :func:`run_in_new_process` for its child: its own pid, and the child's work folder.
_PARENT_ENV = "TORCH_DIODE_ISOLATE_PARENT"
_WORK_ENV = "TORCH_DIODE_ISOLATE_WORK"
#: A work folder's name: its owner's pid, start time (clock ticks after boot), pid namespace and
#: the machine's boot id (its first 12 hex digits) ("x": unknown), then mkdtemp's random part.
_PREFIX = "diode-isolated-"
_FOLDER = re.compile(re.escape(_PREFIX) + r"(\d+)-(\d+|x)-(\d+|x)-([0-9a-f]{12}|x)-[a-z0-9_]{8}")


def run_in_new_process(
    target: str,
    kwargs: Mapping[str, Any] | None = None,
    *,
    paths: Sequence[str | os.PathLike[str]] = (),
    timeout_s: float | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Call ``target(**kwargs)`` in a new process with new, empty Inductor and Triton cache folders.

    Args:
        target: ``"package.module:function"``; the function returns a JSON-serialisable dict.
        kwargs: its keyword arguments (JSON-serialisable).
        paths: folders put first on the child's ``sys.path`` (a script's folder).
        timeout_s: kill the child (and its compile workers) after this many seconds.
        env: more environment variables for the child.

    Returns:
        What the function returned, plus ``process_s`` (the child's whole wall time: start-up,
        warm-up and the function); or ``{"error": "...", "process_s": ...}`` when it did not return
        (the end of its output is logged as a warning), with ``"timed_out": True`` when it ran
        past ``timeout_s``.

    Raises:
        ValueError: ``target`` is not ``module:function``, or ``timeout_s`` is not positive.
        TypeError: ``kwargs`` is not JSON-serialisable.
    """
    module, sep, function = target.partition(":")
    if not (module and sep and function):
        raise ValueError(f"target: expected 'module:function', got {target!r}")
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"timeout_s: must be a positive number of seconds, got {timeout_s!r}")
    request = {"target": target, "kwargs": dict(kwargs or {}), "paths": [str(p) for p in paths]}
    payload = json.dumps(request)  # TypeError here, in the caller, for a value that cannot cross
    # Imported before the folder is made: a process killed between the two leaves the folder with no
    # child to delete it (the import took up to 0.7 s on a loaded 2-core machine).
    from torch_diode.collect.runner import sigterm_interrupts

    _remove_leaked_folders()
    work = Path(tempfile.mkdtemp(prefix=_folder_prefix()))
    try:
        (work / "request.json").write_text(payload)
        child_env = {
            **os.environ,
            **(env or {}),
            "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor"),
            "TRITON_CACHE_DIR": str(work / "triton"),
            "PYTHONUNBUFFERED": "1",
            _PARENT_ENV: str(os.getpid()),  # the child ends itself and its folder if this process goes
            _WORK_ENV: str(work),
        }
        cmd = [sys.executable, "-m", "torch_diode.bench.isolate", str(work / "request.json"), str(work / "result.json")]
        t0 = time.perf_counter()
        # kill or timeout on this process (SIGTERM) stops the wait as Ctrl-C does, so the child,
        # in a session of its own which their signal does not reach, is killed here too
        with open(work / "output.log", "wb") as output, sigterm_interrupts():
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, env=child_env,
                start_new_session=True,  # its own process group: a timeout kills its compile workers too
            )  # fmt: skip
            try:
                code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return {**_failure(work, f"did not finish within {timeout_s:g} s (killed)", t0), "timed_out": True}
            except BaseException:  # an interrupt: leave no process behind
                _kill_group(proc)
                raise
            finally:
                _kill_group(proc, only_others=True)
        result_path = work / "result.json"
        if code != 0 or not result_path.is_file():
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            return _failure(work, f"the measuring process {how}", t0)
        result = json.loads(result_path.read_text())
        result["process_s"] = round(time.perf_counter() - t0, 2)
        if "error" in result:  # the function reported a failure itself: keep what the process said
            log.warning("a measurement in a new process reported: %s\n%s", result["error"], _tail(work))
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _folder_prefix() -> str:
    """The start of this process's work folders' names: ``diode-isolated-PID-START-PIDNS-BOOT-``."""
    start = _start_time(os.getpid()) if _own_proc() else None
    return f"{_PREFIX}{os.getpid()}-{start or 'x'}-{_pid_namespace() or 'x'}-{_boot_id() or 'x'}-"


def _own_proc() -> bool:
    """Whether ``/proc`` shows this process's pid namespace: a process in a pid namespace of its
    own that still sees its parent's ``/proc`` (``unshare --pid`` without ``--mount-proc``) finds
    another process under its pid there."""
    try:
        return os.readlink("/proc/self") == str(os.getpid())
    except OSError:
        return False


def _boot_id() -> str | None:
    """This machine's boot (the first 12 hex digits of ``/proc/sys/kernel/random/boot_id``): pids
    and start times are a boot's own, and machines sharing a temporary directory differ in it."""
    try:
        digits = Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "").lower()
    except OSError:
        return None
    return digits[:12] if re.fullmatch(r"[0-9a-f]{32}", digits) else None


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks after boot, /proc/PID/stat's 22nd field): with the
    pid, one process, a reused pid another; None where it is gone, a zombie, or there is no /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def _pid_namespace() -> str | None:
    """The inode of this process's pid namespace (pids of another, a container's sharing the
    temporary directory, are not this one's), or None without /proc."""
    try:
        return "".join(c for c in os.readlink("/proc/self/ns/pid") if c.isdigit()) or None
    except OSError:
        return None


def _owner_gone(pid: int, start: str, own_proc: bool) -> bool:
    """Whether process ``pid`` of this boot and pid namespace, whose name recorded its start time
    ``start`` ("x": none), is gone: for certain only, so that a live process's folder is never
    taken (``own_proc``: :func:`_own_proc`, whether ``/proc`` can tell)."""
    if start != "x":  # this pid's start time then: gone, or its pid is another process's now
        return own_proc and _start_time(pid) != start
    try:  # no start time recorded (its /proc was another pid namespace's): the pid alone (a reused pid keeps it)
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # someone else's process: there
        return False
    return False


def _remove_leaked_folders() -> None:
    """Delete the work folders, in the temporary directory, of processes that are gone: this
    user's directories whose names are :func:`run_in_new_process`'s only (nothing else, and no
    link, is touched), of this machine's boot and this pid namespace (another's owner, or an unknown
    one's, cannot be looked up here). Another process deleting the same folder meanwhile is fine; a
    failure is logged, never raised (a measurement does not depend on it)."""
    try:
        boot, namespace, own_proc = _boot_id(), _pid_namespace() or "x", _own_proc()
        if boot is None:  # no folder's machine can be told
            return
        uid = os.getuid()
        with os.scandir(tempfile.gettempdir()) as entries:
            found = [
                (e, m)
                for e in entries
                if (m := _FOLDER.fullmatch(e.name)) is not None and m[4] == boot and m[3] == namespace
            ]
        for e, m in found:
            try:  # gone meanwhile (another process deleted it): OSError, nothing to do
                if not e.is_dir(follow_symlinks=False) or e.stat(follow_symlinks=False).st_uid != uid:
                    continue
            except OSError:
                continue
            if _owner_gone(int(m[1]), m[2], own_proc):
                shutil.rmtree(e.path, ignore_errors=True)
                if not os.path.lexists(e.path):
                    log.info("deleted %s, left by process %s, which is gone", e.path, m[1])
    except Exception as e:  # a clean-up: never the measurement's failure
        log.warning("could not look for measurement folders left by processes that are gone: %s", e)


def _kill_group(proc: subprocess.Popen[bytes], *, only_others: bool = False) -> None:
    """Kill ``proc``'s process group (it leads one); with ``only_others`` after it exited, what it left."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return  # the group is gone
    if not only_others:
        proc.wait()


def _failure(work: Path, what: str, t0: float) -> dict[str, Any]:
    """The error entry of a child that did not return: the function's own error where it raised
    (the child wrote it), else ``what`` with the last line of the child's output."""
    tail = _tail(work)
    try:
        error = str(json.loads((work / "result.json").read_text())["error"])
    except (OSError, ValueError, KeyError, TypeError):
        error = f"{what}; its output ended: {tail.splitlines()[-1] if tail else '(nothing)'}"
    log.warning("a measurement in a new process failed: %s\n%s", error, tail)
    return {"error": error[:500], "process_s": round(time.perf_counter() - t0, 2)}


def _tail(work: Path) -> str:
    """The end of the child's output."""
    try:
        return (work / "output.log").read_bytes()[-ERROR_TAIL_CHARS:].decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _end_with_parent(parent: int, work: Path, every_s: float = 0.5) -> None:
    """Once ``parent`` is not this process's parent (it went without killing this process: a
    SIGKILL, or a SIGTERM before it could), kill this process's group (this process and its
    compile workers) and then delete ``work``, from a detached shell, so nothing writes into the
    folder while it goes. Also at once when ``parent`` went before this started."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        if os.getpgid(0) == os.getpid():  # this process leads its group (run_in_new_process's child)
            script = 'kill -9 -- -"$1"; sleep 0.5; rm -rf -- "$2"'
            subprocess.Popen(["/bin/sh", "-c", script, "sh", str(os.getpid()), str(work)], start_new_session=True)
            time.sleep(5)  # the shell kills this process
        else:
            shutil.rmtree(work, ignore_errors=True)
        os._exit(1)

    threading.Thread(target=watch, name="diode-parent-watch", daemon=True).start()


def _child(request_path: str, result_path: str) -> int:
    """The new process: call the requested function, write its result (or its error) as JSON."""
    import importlib
    import traceback

    parent, work = os.environ.get(_PARENT_ENV), os.environ.get(_WORK_ENV)
    if parent and work:  # started by run_in_new_process (by hand: no watch, nothing deleted)
        _end_with_parent(int(parent), Path(work))
    request = json.loads(Path(request_path).read_text())
    sys.path[:0] = request["paths"]
    module, _, function = request["target"].partition(":")
    out = Path(result_path)
    try:
        result = getattr(importlib.import_module(module), function)(**request["kwargs"])
        if not isinstance(result, dict):
            raise TypeError(f"{request['target']} returned {type(result).__name__}, not a dict")
        text = json.dumps(result)
    except Exception as e:
        traceback.print_exc()
        out.write_text(json.dumps({"error": f"{type(e).__name__}: {e}"[:500]}))
        return 1
    tmp = out.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(out)  # whole or absent
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    sys.exit(_child(sys.argv[1], sys.argv[2]))
