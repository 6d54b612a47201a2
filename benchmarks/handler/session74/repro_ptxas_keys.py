"""Standalone reproducer (torch and triton only) for the upstream report (``upstream-report.md``):
once Inductor's compile-worker pool is ready, max-autotune compiles every Triton choice twice,
because the main process's Triton cache keys carry another ptxas version than the workers'.

Needs a CUDA GPU and a torch wheel with its own ``bin/ptxas`` whose version differs from Triton's
bundled one (torch 2.11.0+cu130 with triton 3.6.0: 13.0 against 12.8). Run with
``TRITON_PTXAS_PATH`` unset:

    python repro_ptxas_keys.py            # the second compile: ~20 main-thread make_cubin calls
    python repro_ptxas_keys.py --fix      # the same after _set_triton_ptxas_path() + cache_clear(): ~0
    TRITON_PTXAS_PATH=$(python -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "bin", "ptxas"))') \\
        python repro_ptxas_keys.py        # ~0 as well

Prints, for a compile before the pool is ready and one after: the wall time, Triton's
``make_cubin`` calls in the main thread and in other threads of this process, and the ptxas version
the process's Triton keys its cache with (read at the end, so reading it changes nothing).
"""

from __future__ import annotations

import inspect
import os
import sys
import tempfile
import threading
import time

_work = tempfile.mkdtemp(prefix="ptxas-keys-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(_work, "inductor")  # empty caches, before torch
os.environ["TRITON_CACHE_DIR"] = os.path.join(_work, "triton")

import torch  # noqa: E402
from torch._inductor.async_compile import AsyncCompile  # noqa: E402
from triton.backends.nvidia import compiler as nvidia  # noqa: E402

CUBINS = {"main_thread": 0, "other_threads": 0}
_make_cubin = nvidia.CUDABackend.make_cubin


def _counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
    main = threading.current_thread() is threading.main_thread()
    CUBINS["main_thread" if main else "other_threads"] += 1
    return _make_cubin(self, *args, **kwargs)


nvidia.CUDABackend.make_cubin = _counted


def compile_mm(m: int, n: int, k: int) -> dict:
    """One cold max-autotune compile of ``a @ b`` (fp16): its wall time and make_cubin calls."""
    torch._dynamo.reset()
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    f = torch.compile(lambda x, y: x @ y, mode="max-autotune-no-cudagraphs", dynamic=False)
    CUBINS.update(main_thread=0, other_threads=0)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    f(a, b)
    torch.cuda.synchronize()
    return {"shape": (m, n, k), "compile_s": round(time.perf_counter() - t0, 2), **CUBINS}


def main() -> int:
    print("TRITON_PTXAS_PATH at start:", os.environ.get("TRITON_PTXAS_PATH"))
    print("warm-up (starts the worker pool):", compile_mm(256, 256, 256))
    print("before the pool is ready:", AsyncCompile.use_process_pool() is False, compile_mm(127, 255, 383))
    t0 = time.monotonic()
    while not AsyncCompile.use_process_pool():
        time.sleep(0.25)
    print(f"pool ready after {time.monotonic() - t0:.1f} s more")
    if "--fix" in sys.argv:
        from torch._inductor.runtime.compile_tasks import _set_triton_ptxas_path

        _set_triton_ptxas_path()
        nvidia.get_ptxas_version.cache_clear()
        print("fix: _set_triton_ptxas_path() and get_ptxas_version.cache_clear()")
    print("after the pool is ready:", compile_mm(383, 255, 127))
    arch = torch.cuda.get_device_capability()
    read = nvidia.get_ptxas_version  # takes the arch in newer Triton versions
    keyed = read(arch[0] * 10 + arch[1]) if inspect.signature(read).parameters else read()
    print("ptxas version in this process's Triton cache keys:", keyed.strip().splitlines()[-2:])
    print("TRITON_PTXAS_PATH now:", os.environ.get("TRITON_PTXAS_PATH"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
