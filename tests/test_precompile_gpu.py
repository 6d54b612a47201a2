"""Precompiled kernels on a CUDA GPU (skipped without one; run through scripts/run_gpu_tests.sh).

tests/test_precompile.py checks the packing and the cache hits on CPU; here the GPU machine's
side: capturing its target, reproducing it by emulation, and a sweep that measures a problem
from installed kernels only (no compile of its own) with the same configs timed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from torch_diode.collect import precompile as pc
from torch_diode.collect.sweep import SweepCollector, SweepOptions
from torch_diode.records import Problem

pytestmark = pytest.mark.gpu


def _hw() -> str:
    from torch_diode.hardware import detect

    return detect().key or "custom-gpu"


def test_capture_emulate_install_and_measure(tmp_path, monkeypatch):
    target = pc.capture_target(_hw())
    assert target.arch >= 70 and len(target.references) == len(pc.REFERENCES)
    assert pc.local_target_id() == target.key_id()
    pc.verify_target(target)  # emulating this machine reproduces its compiles exactly

    problem = Problem(op="addmm", m=700, n=300, k=1000, dtype="bfloat16", stride_bias=(0, 1))
    opts = SweepOptions(search_space="EXHAUSTIVE", max_configs=12, seed=4, workers=2)
    chooser = SweepCollector(_hw(), opts)
    choices = [it.choice for it in chooser.choices(problem) if it.kind == "triton"]
    s = pc.precompile([problem], lambda p: choices, target, tmp_path / "p.tar.xz", cache_dir=tmp_path / "stage",
                      workers=2)  # fmt: skip
    assert s.problems == [problem] and 0 < s.kernels <= len(choices)

    cache = tmp_path / "triton"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))  # the compile processes inherit it
    assert pc.install(tmp_path / "p.tar.xz", pc.cache_dir()) == [problem]
    with SweepCollector(_hw(), opts) as c:
        c.shared_memory_limit()  # its self-check compiles a small kernel of its own: before the snapshot
        before = {str(f.relative_to(cache)) for f in cache.rglob("*") if f.is_file()}
        records, failures = c.measure(problem)
    after = {str(f.relative_to(cache)) for f in cache.rglob("*") if f.is_file()}
    new_ir = [n for n in after - before if Path(n).suffix in (".ptx", ".llir", ".ttgir")]
    assert not new_ir, f"{len(new_ir)} kernel(s) compiled on the GPU machine: the installed cache was missed"
    timed = {r.choice for r in records if r.choice.is_triton}
    failed = {f.choice for f in failures if f.choice is not None}
    assert timed | failed == set(choices) and timed
    assert any(r.choice.is_aten for r in records)


def test_a_packed_kernel_times_as_the_one_compiled_here(tmp_path, monkeypatch):
    """Packs carry cubins with their debuggers' PTX copy zeroed: the same configs, installed from a
    pack and compiled on this machine, pass the same result check and time alike."""
    target = pc.capture_target(_hw())
    problem = Problem(op="mm", m=1000, n=1536, k=2040, dtype="float16")
    opts = SweepOptions(search_space="EXHAUSTIVE", max_configs=16, seed=7, workers=4)
    choices = [it.choice for it in SweepCollector(_hw(), opts).choices(problem) if it.kind == "triton"]
    pc.precompile([problem], lambda p: choices, target, tmp_path / "p.tar.xz", cache_dir=tmp_path / "stage", workers=4)
    times = []
    for name, pack in (("installed", tmp_path / "p.tar.xz"), ("compiled", None)):
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / name))
        if pack is not None:
            assert pc.install(pack, pc.cache_dir()) == [problem]
        with SweepCollector(_hw(), opts) as c:
            records, failures = c.measure(problem)
        assert not [f for f in failures if f.reason != "compile_error"], failures
        times.append({r.choice: r.time_us for r in records if r.choice.is_triton})
    installed, compiled = times
    assert installed.keys() == compiled.keys() and len(installed) >= 8
    ratios = sorted(installed[c] / compiled[c] for c in installed)
    assert 0.97 <= ratios[len(ratios) // 2] <= 1.03, ratios
