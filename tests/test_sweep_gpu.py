"""The sweep collector on a CUDA GPU (skipped without one; run through scripts/run_gpu_tests.sh).

The full fidelity comparison with Inductor is scripts/sweep_fidelity.py; these tests check the
collector's contract on a few small problems.
"""

from __future__ import annotations

import pytest

from torch_diode.collect.sweep import SweepCollector, SweepOptions, stages_hook_supported
from torch_diode.records import Problem

pytestmark = pytest.mark.gpu


def _hw() -> str:
    from torch_diode.hardware import detect

    return detect().key or "custom-gpu"


@pytest.fixture(scope="module")
def collector():
    with SweepCollector(_hw(), SweepOptions(search_space="DEFAULT", workers=8)) as c:
        yield c


@pytest.mark.parametrize(
    "problem",
    [
        Problem(op="mm", m=1000, n=1000, k=1000, dtype="float16"),
        Problem(op="mm", m=256, n=512, k=768, dtype="bfloat16", stride_a=(1, 256)),
        Problem(op="addmm", m=300, n=200, k=100, dtype="float32"),
        Problem(op="bmm", m=128, n=64, k=64, batch=12, dtype="bfloat16"),
        Problem(op="baddbmm", m=100, n=60, k=70, batch=3, dtype="float16"),
    ],
    ids=lambda p: p.key(),
)
def test_measures_every_choice_or_records_why_not(collector, problem):
    from torch_diode.collect.sweep import inductor_choices

    records, failures = collector.measure(problem)
    expected = {it.choice for it in inductor_choices(problem, "DEFAULT")}
    timed = {r.choice for r in records}
    failed = {f.choice for f in failures}
    assert timed | failed == expected, "every choice is either timed or a failure record"
    assert not timed & failed
    assert any(c.is_aten for c in timed), "ATen is timed"
    assert sum(c.is_triton for c in timed) >= 5
    for r in records:
        assert r.problem == problem and r.time_us > 0 and r.hardware == collector.hardware
    for f in failures:
        assert f.choice is not None and f.reason in ("compile_error", "runtime_error") and f.message


def test_out_of_resources_is_a_failure_record_not_a_crash(collector):
    # 128x128x128 with 4 stages needs 256 KiB of shared memory: more than a Hopper SM has.
    p = Problem(op="mm", m=1024, n=1024, k=1024, dtype="float16")
    refused = collector.stats.refused_over_shared_memory
    records, failures = collector.measure(p)
    assert records
    oor = [f for f in failures if f.choice is not None and "OutOfResources" in f.message]
    if not oor:
        pytest.skip("this Inductor's DEFAULT space has no config beyond the shared-memory limit for this problem")
    assert all(f.reason == "compile_error" for f in oor)
    if stages_hook_supported():  # found by the compile processes before ptxas (shared_memory_guard)
        assert collector.shared_memory_limit() is not None
        assert 0 < collector.stats.refused_over_shared_memory - refused <= len({f.choice for f in oor})  # per kernel
        assert all(f"Hardware limit: {collector.shared_memory_limit()}" in f.message for f in oor)


def test_the_shared_memory_guard_changes_no_timing_only_when_a_kernel_fails(tmp_path, monkeypatch):
    """With and without the guard (fresh Triton caches): the same configs timed, the same ones
    refused for shared memory, with the same message."""
    p = Problem(op="mm", m=1024, n=1024, k=1024, dtype="float16")
    out = {}
    for guard in (True, False):
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / f"triton-{guard}"))
        with SweepCollector(_hw(), SweepOptions(search_space="DEFAULT", workers=4, shared_memory_guard=guard)) as c:
            records, failures = c.measure(p)
            out[guard] = (
                {r.choice for r in records},
                {(f.choice, f.message) for f in failures},
                c.stats.refused_over_shared_memory,
            )
    assert out[True][:2] == out[False][:2]
    assert out[False][2] == 0
    oor = sum("OutOfResources: out of resource: shared memory" in m for _, m in out[True][1])
    assert (0 < out[True][2] <= oor) if stages_hook_supported() and oor else out[True][2] == 0


def test_timings_are_repeatable(collector):
    p = Problem(op="mm", m=2048, n=2048, k=2048, dtype="bfloat16")
    a, _ = collector.measure(p)
    b, _ = collector.measure(p)
    ta = {r.choice: r.time_us for r in a}
    ratios = sorted(r.time_us / ta[r.choice] for r in b if r.choice in ta)
    assert ratios and 0.95 <= ratios[len(ratios) // 2] <= 1.05


def test_sampled_sweep_and_runner(tmp_path):
    from torch_diode.collect.runner import CollectOptions, collect
    from torch_diode.dataset import read_dataset

    problems = [
        Problem(op="mm", m=512, n=512, k=512, dtype="float16"),
        Problem(op="mm", m=384, n=640, k=512, dtype="float16"),
    ]
    opts = CollectOptions(
        collector="sweep",
        search_space="EXHAUSTIVE",
        hardware=_hw(),
        progress=False,
        sweep_options={"max_configs": 24, "seed": 7, "sample": "shared", "workers": 8},
    )
    out = tmp_path / "sweep.msgpack"
    summary = collect(problems, opts, out)
    assert summary.problems_measured == 2 and summary.records >= 2 * 20
    ds = read_dataset(out)
    per = {pt.problem: len(pt.choice_idx) for pt in ds.by_problem()}
    assert set(per) == set(problems)
    # resumable: a second run skips both problems
    again = collect(problems, opts, out)
    assert again.problems_skipped == 2
    # top-up: raising max_configs measures only the configs each problem lacks, with ATen again
    before = {pt.problem: {ds.choices[i] for i in pt.choice_idx.tolist()} for pt in ds.by_problem()}
    more = CollectOptions(
        collector="sweep",
        search_space="EXHAUSTIVE",
        hardware=_hw(),
        progress=False,
        top_up=True,
        sweep_options={"max_configs": 32, "seed": 7, "sample": "shared", "workers": 8},
    )
    topped = collect(problems, more, out)
    assert topped.problems_measured == 2
    ds2 = read_dataset(out)
    for pt in ds2.by_problem():
        new = [ds2.choices[i] for i in pt.choice_idx.tolist()]
        repeated = [c for c in new if new.count(c) > 1]
        assert repeated and all(c.is_aten for c in repeated), pt.problem.key()  # only ATen timed twice
        assert len(set(new)) > len(before[pt.problem])
    assert collect(problems, more, out).problems_skipped == 2  # nothing lacks now


def test_checkpointed_parts_cover_the_problem_once(tmp_path):
    """``measure(on_part=...)``: the parts handed over while kernels still compile and the final
    return cover every sampled choice exactly once (ATen timed in each part). The runner's side
    (``OUT.partial``, resuming with the choices a problem lacks) is tests/test_sweep.py's."""
    from torch_diode.collect.sweep import inductor_choices

    problem = Problem(op="mm", m=768, n=640, k=1536, dtype="float16")
    parts: list[tuple[list, list]] = []
    opts = SweepOptions(search_space="EXHAUSTIVE", max_configs=32, seed=5, workers=2)
    with SweepCollector(_hw(), opts) as c:
        records, failures = c.measure(problem, on_part=lambda r, f: parts.append((r, f)), part_s=0.5)
    assert parts, "two compile processes for 32 kernels take longer than 0.5 s: expected checkpoints"
    chunks = [*parts, (records, failures)]
    triton = [r.choice for rs, _ in chunks for r in rs if r.choice.is_triton]
    failed = [f.choice for _, fs in chunks for f in fs if f.choice is not None]
    assert len(triton) == len(set(triton)) and not set(triton) & set(failed)
    sampled = {it.choice for it in SweepCollector(_hw(), opts).choices(problem) if it.kind == "triton"}
    assert set(triton) | set(failed) == sampled
    # ATen is timed beside every part that times kernels (a part may hold failed compiles only)
    assert all(any(r.choice.is_aten for r in rs) for rs, _ in chunks if rs)
    assert sampled <= {it.choice for it in inductor_choices(problem, "EXHAUSTIVE")}


def test_a_problem_is_checkpointed_while_its_compiled_kernels_are_timed(monkeypatch):
    """Once every kernel is compiled, ``measure(on_part=...)`` times them in slices of
    ``TIMING_SLICE`` and hands a part over every ``part_s`` seconds (session 18: a chunk's deadline
    cut a problem of large kernels after 200 s of timing, and none of it was kept). The parts and
    the return cover the sample once, each with ATen timed once as its reference."""
    from torch_diode.collect import sweep

    monkeypatch.setattr(sweep, "TIMING_SLICE", 8)
    problem = Problem(op="addmm", m=640, n=384, k=1000, dtype="bfloat16")
    opts = SweepOptions(search_space="EXHAUSTIVE", max_configs=40, seed=3, workers=2)
    with SweepCollector(_hw(), opts) as c:
        c.measure(problem)  # compiles every kernel: the second measure's compiles are done at once
        parts: list[tuple[list, list]] = []
        records, failures = c.measure(problem, on_part=lambda r, f: parts.append((r, f)), part_s=1e-6)
        sampled = {it.choice for it in c.choices(problem) if it.kind == "triton"}
        aten = {it.choice for it in c.choices(problem) if it.kind == "aten"}
    chunks = [*parts, (records, failures)]
    assert len(parts) >= 3, f"40 configs (a few may fail) in slices of 8, part_s ~0: got {len(parts)} parts"
    triton = [r.choice for rs, _ in chunks for r in rs if r.choice.is_triton]
    failed = [f.choice for _, fs in chunks for f in fs if f.choice is not None]
    assert len(triton) == len(set(triton)) and not set(triton) & set(failed)
    assert set(triton) | set(failed) == sampled
    for rs, _ in chunks:
        if any(r.choice.is_triton for r in rs):
            timed_aten = sorted(r.choice.template for r in rs if r.choice.is_aten)
            assert timed_aten == sorted(a.template for a in aten), timed_aten  # once per part


def test_a_compile_over_the_time_limit_is_a_timeout_failure(tmp_path, monkeypatch):
    """``compile_timeout_s``: kernels not compiled in time are failure records (reason timeout),
    and the problem still completes with ATen timed. A fresh Triton cache: a cached kernel
    compiles in milliseconds."""
    problem = Problem(op="mm", m=512, n=384, k=1000, dtype="float32")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))  # the compile workers inherit it
    opts = SweepOptions(search_space="DEFAULT", workers=2, compile_timeout_s=0.05)
    with SweepCollector(_hw(), opts) as c:
        records, failures = c.measure(problem)
    timeouts = [f for f in failures if f.reason == "timeout"]
    assert timeouts, "a 0.05 s limit stops fp32 compiles (seconds each)"
    assert all(
        f.choice is not None and f.choice.is_triton and "not compiled within 0.05 s" in f.message for f in timeouts
    )
    assert any(r.choice.is_aten for r in records)
    assert not {r.choice for r in records} & {f.choice for f in timeouts}


def test_an_interrupt_during_timing_is_handled_within_a_graph():
    """Session 10's chunk s10f: with every graph of a large fp32 problem queued and then one
    synchronize(), the deadline's SIGINT waited 30 s and the run was killed. The timing passes now
    queue at most two graphs of about `max_queued_us` each and wait in Python."""
    import os
    import signal
    import threading
    import time

    import torch

    a = torch.randn(8192, 8192, device="cuda")  # fp32 without TF32: ~15-20 ms a product on Hopper
    b = torch.randn(8192, 8192, device="cuda")
    c = torch.empty(8192, 8192, device="cuda")
    fns = [lambda: torch.mm(a, b, out=c)] * 150  # the estimating pass alone: 300 products, 5 s or more
    with SweepCollector(_hw(), SweepOptions(workers=1)) as col:
        col.time_callables(fns[:2])  # warm up (cuBLAS handle, workspace, the L2 flush buffer)
        timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
        t0 = time.monotonic()
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                col.time_callables(fns)
            waited = time.monotonic() - t0 - 1.0
        finally:
            timer.cancel()
            torch.cuda.synchronize()
    assert waited < 1.5, f"the interrupt was handled {waited:.2f} s after it came"


def test_loads_what_its_compile_processes_built_after_a_late_ptxas_variable(tmp_path, monkeypatch, caplog):
    """Session 77 (an H200): where this process's Triton read its own ptxas's version before
    TRITON_PTXAS_PATH named another (as a torch.compile sets it on one path), its keys differed
    from its compile processes' and every kernel was compiled twice, the second time here, as it
    was timed. The collector now aligns this process first: one cache entry per kernel."""
    import logging
    import subprocess

    import torch
    from triton.backends.nvidia.compiler import get_ptxas_version

    from torch_diode.inductor.ptxas import (
        ENV,
        _for_arch,
        _forget_ptxas_version,
        _release,
        torch_bundled_ptxas,
        triton_arch,
    )

    torch_ptxas = torch_bundled_ptxas()
    if torch_ptxas is None:
        pytest.skip("this torch has no bin/ptxas: nothing sets the variable to another ptxas")
    theirs = _release(subprocess.check_output([str(torch_ptxas), "--version"], text=True))
    arch = triton_arch(torch.cuda.get_device_capability())
    monkeypatch.delenv(ENV, raising=False)
    _forget_ptxas_version()
    try:
        own = _release(str(_for_arch(get_ptxas_version, arch)))  # a first compile's read, the variable unset
        if own == theirs:
            pytest.skip(f"torch's ptxas and Triton's give the same version ({own}) here: no late case")
        monkeypatch.setenv(ENV, str(torch_ptxas))  # late, after Triton read its own
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # this process's loads and the compile processes'
        opts = SweepOptions(search_space="EXHAUSTIVE", max_configs=6, seed=3, workers=4, cache_dir=str(tmp_path))
        with caplog.at_level(logging.WARNING, logger="torch_diode.collect.sweep"), SweepCollector(_hw(), opts) as c:
            records, failures = c.measure(Problem(op="mm", m=700, n=300, k=1000, dtype="bfloat16"))
            built = c.stats.kernels_compiled
        now = _release(str(_for_arch(get_ptxas_version, arch)))  # what this process keys with after the sweep
    finally:
        _forget_ptxas_version()  # no version of this test's left for later tests
    assert built >= 2 and sum(r.choice.is_triton for r in records) == built, (records, failures)
    assert now == theirs and f"keyed its cache with ptxas {own}, but a new process" in caplog.text, caplog.text
    # the shared-memory guard's self-check kernel aside, one entry per kernel built
    entries = {p.parent for p in tmp_path.rglob("*.cubin")}
    assert len(entries) <= built + 1, f"{len(entries)} cache entries for {built} kernels: compiled twice"
