"""Session 74: why, once Inductor's compile-worker pool is ready, the main process compiles again
every Triton choice a worker has just precompiled (``session73/pool_ready.py``, rule 1: 20 of 20
``make_cubin`` calls in the main thread after the wait, 0-1 before it). Each case runs in a new
process (``torch_diode.bench.isolate``: new, empty Inductor and Triton folders): the stock warm-up
compile, the wait for ``AsyncCompile.use_process_pool()``, then one stock max-autotune cold compile
of a speed-check problem. Recorded: the main process's and a worker's ptxas / libdevice settings,
``make_cubin`` calls per thread, and, for every kernel the Triton cache folder holds more than once
after the compile, which fields of Triton's metadata files differ between the copies (the
metadata holds the compile options and Triton's cache-invalidating environment variables; the
ptxas version, also in the cache key, is not in it).

    python benchmarks/handler/session74/pool_cache.py OUT.json PROBLEM [--fix none,ptxas]

With ``keylog/`` on ``PYTHONPATH`` and ``DIODE_KEYLOG_DIR`` set (``keylog/sitecustomize.py``), every
process, the compile workers too, logs the parts of each Triton cache key; each case's row then
says, for the kernels both the main process and a worker compiled, which parts differ (``keys``).

``--fix ptxas``: the main process calls Inductor's ``_set_triton_ptxas_path()`` (what every compile
worker calls at its start) before the compile; ``--fix ptxas-clear`` also clears Triton's cached ptxas
version (``get_ptxas_version``, which its cache keys include). Session 75: ``--fix pin`` calls
``torch_diode.inductor.ptxas.pin_ptxas()`` there instead (after the warm-up compile and the wait: a
late call), ``--fix pin-early`` before the warm-up (at the top of a script); the row keeps its
result (``pin``). ``OUT`` is rewritten after each case.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE.parents[2] / "scripts"
SESSION71 = HERE.parent / "session71"
#: What ``--fix`` takes (module docstring).
FIXES = ("none", "ptxas", "ptxas-clear", "pin", "pin-early")
for _p in (SCRIPTS, SESSION71):
    sys.path.insert(0, str(_p))


def settings() -> dict[str, Any]:
    """This process's ptxas and libdevice settings, as Triton resolves them."""
    import torch
    from triton import knobs

    out: dict[str, Any] = {
        k: os.environ.get(k) for k in ("TRITON_PTXAS_PATH", "TRITON_LIBDEVICE_PATH", "TRITON_CACHE_DIR")
    }
    out["torch_bin_ptxas_exists"] = (Path(torch.__file__).parent / "bin" / "ptxas").exists()
    try:
        tool = knobs.nvidia.ptxas
        out["ptxas_resolved"] = [tool.path, tool.version]
    except Exception as e:  # a diagnostic: record what failed
        out["ptxas_resolved"] = f"{type(e).__name__}: {e}"
    out["libdevice_knob"] = knobs.nvidia.libdevice_path
    return out


def cache_copies(folder: Path) -> dict[str, Any]:
    """Kernels that Triton's cache folder holds more than once, and the metadata fields that differ."""
    by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
    files = 0
    for meta in folder.glob("*/*.json"):
        if meta.name.startswith("__grp__"):
            continue
        try:
            m = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(m, dict) and "name" in m:
            by_name[m["name"]].append(m)
            files += 1
    twice = {n: ms for n, ms in by_name.items() if len(ms) > 1}
    diffs: dict[str, dict[str, list[Any]]] = {}
    for name, ms in twice.items():
        keys = set().union(*ms) - {"hash"}
        d = {
            k: [m.get(k) for m in ms]
            for k in sorted(keys)
            if len({json.dumps(m.get(k), sort_keys=True) for m in ms}) > 1
        }
        diffs[name] = d
    fields = sorted({k for d in diffs.values() for k in d})
    return {
        "metadata_files": files,
        "kernels": len(by_name),
        "kernels_more_than_once": len(twice),
        "fields_that_differ": fields,
        "example": next(iter(diffs.items()), None),
    }


def keys_report(folder: Path, main_pid: int) -> dict[str, Any]:
    """From ``keylog``'s files: for each kernel source the main process (``main_pid``) and another
    process both compiled, the key parts that differ between them; counted over the kernels."""
    recs: list[dict[str, Any]] = []
    for f in folder.glob("keys-*.jsonl"):
        recs += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    main = defaultdict(list)
    other = defaultdict(list)
    for r in recs:
        (main if r["pid"] == main_pid else other)[r.get("source_sha")].append(r)
    both = [s for s in main if s in other]
    parts = ("fn_cache_key", "attrs", "signature", "constants", "src_hash", "backend", "options", "env", "key")
    differ: dict[str, int] = defaultdict(int)
    example = None
    for s in both:  # a source compiled with several option sets: compare the sets of each part
        d = [k for k in parts if {r.get(k) for r in main[s]} != {r.get(k) for r in other[s]}]
        for k in d:
            differ[k] += 1
        if d and example is None:
            example = {k: [sorted({str(r.get(k)) for r in rs}) for rs in (main[s], other[s])] for k in d if k != "key"}
    return {
        "records": len(recs),
        "errors": sorted({r["error"] for r in recs if "error" in r})[:3],
        "main_process_compiles": sum(len(v) for v in main.values()),
        "sources_in_main_and_a_worker": len(both),
        "parts_that_differ": dict(differ),
        "example": example,
    }


def probe(*, problem: str, fix: str, wait_s: float) -> dict[str, Any]:
    """In the new process: warm-up, wait for the pool, the settings (here and in a worker), one stock
    cold compile, the cache folder's copies."""
    import compile_method as cm
    from check_handler_gpu import SPEED_PROBLEMS, make_args, warm_up_compile
    from torch._inductor.async_compile import AsyncCompile

    from torch_diode.bench.measure import cold_compile_state, compile_for, first_call_s, wait_for_compile_workers
    from torch_diode.inductor import stock_inductor
    from torch_diode.inductor.ptxas import pin_ptxas

    cm.count_cubins()
    fn, args = make_args(next(p for p in SPEED_PROBLEMS if p.name == problem))
    pinned = pin_ptxas().to_dict() if fix == "pin-early" else None
    warm_up_compile(fresh_caches=False)
    out: dict[str, Any] = {"problem": problem, "fix": fix, "pid": os.getpid(), **wait_for_compile_workers(wait_s)}
    out["main_before"] = settings()
    pool = AsyncCompile.process_pool()
    out["worker"] = {
        k: pool.submit(os.getenv, k).result(timeout=60) for k in ("TRITON_PTXAS_PATH", "TRITON_LIBDEVICE_PATH")
    }
    if fix in ("ptxas", "ptxas-clear"):
        from torch._inductor.runtime.compile_tasks import _set_triton_ptxas_path

        _set_triton_ptxas_path()
    if fix == "ptxas-clear":  # Triton keeps the first ptxas version it read (functools.lru_cache)
        from triton.backends.nvidia.compiler import get_ptxas_version

        get_ptxas_version.cache_clear()
    if fix == "pin":
        pinned = pin_ptxas().to_dict()
    if pinned is not None:
        out["pin"] = pinned
    out["main_at_compile"] = settings()
    cm.CUBINS.clear()
    with stock_inductor(), cold_compile_state(fresh_caches=False):
        out["compile_s"] = round(first_call_s(compile_for("max-autotune", fn), args), 3)
    out["make_cubin"] = dict(cm.CUBINS)
    out["triton_cache"] = cache_copies(Path(os.environ["TRITON_CACHE_DIR"]))
    out["worker_cache_dir_after"] = pool.submit(os.getenv, "TRITON_CACHE_DIR").result(timeout=60)
    if os.environ.get("DIODE_KEYLOG_DIR"):
        out["keys"] = keys_report(Path(os.environ["DIODE_KEYLOG_DIR"]), os.getpid())
    return out


def main() -> int:
    from torch_diode._files import atomic_write
    from torch_diode.bench.isolate import run_in_new_process
    from torch_diode.bench.measure import environment

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("output", type=Path)
    ap.add_argument("problem")
    ap.add_argument("--fix", default="none,ptxas")
    ap.add_argument("--wait-s", type=float, default=120.0)
    a = ap.parse_args()
    unknown = sorted(set(a.fix.split(",")) - set(FIXES))
    if unknown:
        ap.error(f"--fix: unknown {unknown}; known: {', '.join(FIXES)}")
    result: dict[str, Any] = {"environment": environment(), "rows": []}
    for fix in a.fix.split(","):
        r = run_in_new_process(
            "pool_cache:probe",
            {"problem": a.problem, "fix": fix, "wait_s": a.wait_s},
            paths=[HERE, SCRIPTS, SESSION71],
            timeout_s=300,
        )
        result["rows"].append(r)
        print(json.dumps(r), flush=True)
        atomic_write(a.output, json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
