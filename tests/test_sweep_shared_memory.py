"""The sweep's compile processes refuse a kernel over the GPU's shared memory before ``ptxas`` (no GPU).

Compiles the sweep's literal-size kernel for sm_90 with the installed triton, with and without
``sweep.shared_memory_guard``, through a ``ptxas`` wrapper that logs what it is asked to assemble:
a tile over the limit fails with the ``OutOfResources`` that loading it would raise (Triton's own
shared-memory figure) and no ``ptxas`` run, a tile that fits compiles to the same binary as
without the guard, and the previous stages hook is back afterwards.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path

import pytest

from torch_diode.collect import sweep
from torch_diode.records import Choice, Problem

REPO = Path(__file__).resolve().parents[1]
H100_SHARED = 232448  # cudaDevAttrMaxSharedMemoryPerBlockOptin on H100 and H200 (the campaign's failures)

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton (a lib dependency)"),
    pytest.mark.skipif(not sweep.stages_hook_supported(), reason="this triton has no stages hook"),
]


def _choice(bm: int, bn: int, bk: int, stages: int, warps: int) -> Choice:
    return Choice.from_kwargs(
        "triton::mm",
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "EVEN_K": True, "ALLOW_TF32": False,
         "USE_FAST_ACCUM": False, "ACC_TYPE": "tl.float32", "num_stages": stages, "num_warps": warps},
        strict=False,
    )  # fmt: skip


@pytest.fixture
def compile_sm90(tmp_path, monkeypatch):
    """``compile(problem, choice)`` for sm_90 in a fresh Triton cache, and the ``ptxas`` log."""
    from triton import knobs

    log = tmp_path / "ptxas.log"
    for tool in ("ptxas", "ptxas_blackwell"):  # triton 3.9 assembles sm_90 with its ptxas-blackwell
        if getattr(knobs.nvidia, tool, None) is None:
            continue
        wrapper = tmp_path / tool
        wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {getattr(knobs.nvidia, tool).path} "$@"\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv(f"TRITON_{tool.upper()}_PATH", str(wrapper))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from sweep_ptx_compare import _compile_sweep
    finally:
        sys.path.remove(str(REPO / "scripts"))

    def compile(problem: Problem, choice: Choice) -> object:
        opts = {"num_warps": choice.num_warps, "num_stages": choice.num_stages, **sweep.compile_options()}
        return _compile_sweep(problem, choice, sweep.template_revision(), 90, opts, literal=True)

    def assembled() -> int:  # ptxas runs that assembled a kernel (not `ptxas --version`)
        lines = log.read_text().splitlines() if log.exists() else []
        return sum("--version" not in line for line in lines)

    return compile, assembled


def test_a_kernel_over_the_limit_is_refused_before_ptxas_with_tritons_numbers(compile_sm90):
    from triton import knobs
    from triton.runtime.errors import OutOfResources

    compile, assembled = compile_sm90
    p = Problem(op="mm", m=1024, n=1024, k=1024, dtype="float16")
    big, small = _choice(128, 128, 128, 4, 4), _choice(64, 64, 32, 3, 4)
    unguarded_big = compile(p, big)  # ptxas does not check shared memory: loading it would fail
    need = unguarded_big.metadata.shared
    assert need > H100_SHARED
    unguarded_small = compile(p, small)
    before = assembled()
    assert before == 2

    previous = knobs.runtime.add_stages_inspection_hook
    with sweep.shared_memory_guard(H100_SHARED):
        assert isinstance(knobs.runtime.add_stages_inspection_hook, sweep._SharedMemoryGuard)
        with pytest.raises(OutOfResources) as e:
            compile(p, big)
        assert assembled() == before, "the refused kernel reached ptxas"
        guarded_small = compile(p, small)
        compile(*sweep._GUARD_CHECK)  # the collector's self-check kernel compiles under the guard
    assert knobs.runtime.add_stages_inspection_hook is previous
    assert assembled() == before + 2

    # the message the campaign's load-time failures carry, with the unguarded compile's figure
    assert f"out of resource: shared memory, Required: {need}, Hardware limit: {H100_SHARED}" in str(e.value)
    # a kernel that fits is the same binary (only the cache key tells the two compiles apart)
    assert guarded_small.metadata.shared == unguarded_small.metadata.shared
    assert guarded_small.asm["cubin"] == unguarded_small.asm["cubin"]
    assert guarded_small.hash != unguarded_small.hash


def test_the_guard_is_a_cache_key_constant_and_off_without_a_limit():
    from triton import knobs

    a, b = sweep._SharedMemoryGuard(232448), sweep._SharedMemoryGuard(101376)
    assert a() == b()  # the limit decides only kernels that fail, and those are never cached
    key, digest = a()
    assert key == sweep._SharedMemoryGuard.KEY and len(digest) == 64
    previous = knobs.runtime.add_stages_inspection_hook
    with sweep.shared_memory_guard(None):
        assert knobs.runtime.add_stages_inspection_hook is previous
    stages = {"ttir": 1}
    assert a(object(), stages, None, None, 90) is None and stages == {"ttir": 1}  # no LLVM-IR stage: untouched


def test_the_collector_passes_no_limit_where_it_cannot_ask_a_gpu(monkeypatch):
    """On this CPU machine the device cannot be asked: kernels are compiled in full, as before."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") is None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    c = sweep.SweepCollector("NVIDIA-H100", sweep.SweepOptions(workers=1))
    try:
        assert c.shared_memory_limit() is None
    finally:
        c.close()
    off = sweep.SweepCollector("NVIDIA-H100", sweep.SweepOptions(workers=1, shared_memory_guard=False))
    assert off.shared_memory_limit() is None
