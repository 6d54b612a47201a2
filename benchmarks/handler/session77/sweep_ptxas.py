"""Session 77, rule 2 (PLAN.md): does the sweep collector compile its kernels twice in a process
where a ``torch.compile`` set ``TRITON_PTXAS_PATH`` after Triton had read its own ptxas?

Run from the repository root on the GPU machine with the lib's ``src`` on ``PYTHONPATH`` and
``TRITON_PTXAS_PATH`` unset. One process: a max-autotune ``torch.compile`` of a GEMM (meant to set the variable as
``test_collect_gpu.py::test_through_linear`` had before the precompile test; rule 2 found that this
compile of a lambda sets nothing, so its two arms tested nothing about the cause), then the sweep
collector times one problem's configs twice, each time with a new collector and a new, empty
Triton cache: first with its ptxas alignment turned off (the library before session 77), then on.
For each: the cache entries holding a cubin (one per kernel compiled: by the compile processes,
and again by this process where its keys differ) against the kernels the compile processes built.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import torch

from torch_diode.collect.sweep import SweepCollector, SweepOptions
from torch_diode.hardware import detect
from torch_diode.inductor import ptxas
from torch_diode.records import Problem


def remembered() -> str | None:
    v = ptxas._remembered_version(ptxas.triton_arch(torch.cuda.get_device_capability()))
    return ptxas._release(v) if v is not None else None


def sweep_once(align: bool) -> dict:
    cache = Path(tempfile.mkdtemp(prefix="triton-"))
    os.environ["TRITON_CACHE_DIR"] = str(cache)  # this process's loads and the compile processes'
    opts = SweepOptions(search_space="EXHAUSTIVE", max_configs=8, seed=3, workers=4, cache_dir=str(cache))
    with SweepCollector(detect().key or "custom-gpu", opts) as c:
        if not align:
            c._align_ptxas = lambda: None  # the library before session 77
        records, failures = c.measure(Problem(op="mm", m=700, n=300, k=1000, dtype="bfloat16"))
        built = c.stats.kernels_compiled
    entries = {p.parent for p in cache.rglob("*.cubin")}
    return {"align": align, "kernels_built_by_compile_processes": built, "cache_entries_with_a_cubin": len(entries),
            "timed": len(records), "failed": len(failures), "triton_remembers_after": remembered()}  # fmt: skip


def main() -> None:
    assert os.environ.get(ptxas.ENV) is None
    print(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name()}))
    a, b = torch.randn(512, 640, device="cuda"), torch.randn(640, 384, device="cuda")
    torch.compile(lambda x, y: x @ y, mode="max-autotune-no-cudagraphs")(a, b)
    print(json.dumps({"after torch.compile": {ptxas.ENV: os.environ.get(ptxas.ENV), "triton_remembers": remembered()}}))
    for align in (False, True):
        print(json.dumps(sweep_once(align)))


if __name__ == "__main__":
    main()
