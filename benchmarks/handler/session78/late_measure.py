"""Session 78, rule 1 (PLAN.md): does the in-process ``measure()`` (bench.measure) compile
kernels twice in a process left in ptxas's late case, and does ``align_with_new_processes`` mend it?

Session 77's gpu tests: ``test_bench.py::test_measure_a_gemm_in_default_and_max_autotune_mode``
took 44 s after ``test_collect_gpu.py::test_through_linear`` in one process (which sets
``TRITON_PTXAS_PATH`` late), 8 s in session 68 with no such test before it. One process, the
variable unset at start, ``quick_gemms()[0]`` in stock max-autotune:

A. after ``warm_up``: ``measure()`` twice;
B. the late case made as Inductor makes it (the variable set to torch's ptxas after this
   process's Triton has read its own): ``measure()`` twice;
C. ``align_with_new_processes()``, then ``measure()`` twice.

Each line: compile_s, and the ``make_cubin`` calls in this process during the measure (Triton
compiling a kernel here, not loading it from the cache; counted with a wrapper). If the late case
costs in-process measures: B's compiles and cubins well above A's, C's back to A's.
"""

from __future__ import annotations

import json
import os
import sys
import threading

import torch
from triton.backends.nvidia import compiler as nv

from torch_diode.bench import measure
from torch_diode.bench.suite import quick_gemms
from torch_diode.inductor import ptxas

CUBINS = {"main": 0, "other": 0}
_make_cubin = nv.CUDABackend.make_cubin


def counting(self, *a, **k):
    CUBINS["main" if threading.current_thread() is threading.main_thread() else "other"] += 1
    return _make_cubin(self, *a, **k)


nv.CUDABackend.make_cubin = counting


def remembered(arch: int) -> str | None:
    v = ptxas._remembered_version(arch)
    return ptxas._release(v) if v else None


def phase(name: str, arch: int) -> None:
    case = quick_gemms()[0]
    fn, args = case.build("cuda")
    for i in range(2):
        before = dict(CUBINS)
        m = measure.measure(fn, args, "max-autotune", graph_iters=5, reps=5)
        print(
            json.dumps(
                {
                    "phase": name,
                    "i": i,
                    "case": case.name,
                    "compile_s": round(m.compile_s, 2),
                    "cubins_main_thread": CUBINS["main"] - before["main"],
                    "cubins_other_threads": CUBINS["other"] - before["other"],
                    "variable": os.environ.get(ptxas.ENV),
                    "triton_remembers": remembered(arch),
                }
            ),
            flush=True,
        )


def main() -> int:
    assert os.environ.get(ptxas.ENV) is None, f"run with {ptxas.ENV} unset"
    arch = ptxas.triton_arch(torch.cuda.get_device_capability())
    print(
        json.dumps(
            {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "check": ptxas.check_ptxas().to_dict()}
        )
    )
    measure.warm_up(["max-autotune"])
    print(json.dumps({"after_warm_up": {"variable": os.environ.get(ptxas.ENV), "triton_remembers": remembered(arch)}}))
    phase("A", arch)
    if os.environ.get(ptxas.ENV) is None:
        os.environ[ptxas.ENV] = str(ptxas.torch_bundled_ptxas())
    print(json.dumps({"late_check": ptxas.check_ptxas().to_dict()}), flush=True)
    phase("B", arch)
    print(json.dumps({"align": ptxas.align_with_new_processes(arch)}), flush=True)
    phase("C", arch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
