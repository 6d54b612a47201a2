"""``collect()`` and the collect CLI on CPU: resume after a killed run, shards and merge, failure exits.

Real compiles of tiny bmm problems (the op Inductor autotunes on CPU); structure only, no timings.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from procs import alive

pytest.importorskip("torch")

from torch_diode.cli import main
from torch_diode.collect import (
    CollectOptions,
    collect,
    defer_stalled,
    merge_shards,
    partial_path,
    resumed_problems,
    shard,
    shard_path,
    stalled_problems,
)
from torch_diode.collect.runner import shard_files
from torch_diode.dataset import Dataset, DatasetWriter, file_in_use, read_dataset, write_dataset
from torch_diode.errors import CollectionError, DatasetFormatError, FileInUseError
from torch_diode.evaluate import read_max_autotune_solution
from torch_diode.records import Choice, FailureRecord, Problem, Provenance, TimingRecord
from torch_diode.shapes.sampling import sample_problems
from torch_diode.shapes.shapeset import ShapeEntry, save_shapeset, strides_for

REPO = Path(__file__).resolve().parents[1]
CPU = dict(device="cpu", progress=False, hardware="cpu-test")


def bmm(m: int, n: int = 8, k: int = 24, batch: int = 2) -> Problem:
    return Problem(op="bmm", m=m, n=n, k=k, batch=batch, dtype="float32")


def _pairs(ds: Dataset) -> list[tuple[Problem, Choice]]:
    return [(r.problem, r.choice) for r in ds.records()]


def test_shard_is_a_partition():
    ps = [bmm(m) for m in range(8, 20)] + [bmm(8)]  # a duplicate is collected once
    shards = [shard(ps, r, 3) for r in range(3)]
    flat = [p for s in shards for p in s]
    assert sorted(flat, key=repr) == sorted(set(ps), key=repr) and len(flat) == len(set(ps))
    assert shard(ps, 1, 3) == shard(list(ps), 1, 3)  # deterministic
    assert shard_path("/x/out.msgpack", 2) == Path("/x/out.rank2.msgpack")


def test_options_validate():
    with pytest.raises(ValueError, match="collector"):
        CollectOptions(collector="magic")
    with pytest.raises(ValueError, match="rank"):
        CollectOptions(rank=2, world_size=2)
    with pytest.raises(ValueError, match="rank and world_size"):
        CollectOptions(rank=0)
    with pytest.raises(ValueError, match="format"):
        CollectOptions(format="csv")
    # Each error names the field and, for a CLI user, the flag.
    with pytest.raises(ValueError, match=r"^top_up \(--top-up\): only the sweep collector \(--collector sweep\)"):
        CollectOptions(top_up=True)  # the Inductor collector measures whole problems
    with pytest.raises(ValueError, match=r"^checkpoint_s \(--checkpoint\): only the sweep collector"):
        CollectOptions(checkpoint_s=30.0)
    with pytest.raises(ValueError, match=r"^checkpoint_s \(--checkpoint\): must be a positive number of seconds"):
        CollectOptions(collector="sweep", checkpoint_s=0.0)
    with pytest.raises(ValueError, match=r"^workers \(--workers\): must be a positive integer or None, got 0"):
        CollectOptions(workers=0)
    assert CollectOptions(collector="sweep", top_up=True).top_up
    with pytest.raises(TypeError):
        CollectOptions("inductor")  # keyword-only
    with pytest.raises(AttributeError):
        CollectOptions().device = "cpu"  # type: ignore[misc]  # frozen


def test_ranks_write_shards_and_merge(tmp_path, monkeypatch):
    out = tmp_path / "out.msgpack"
    problems = [bmm(16), bmm(24)]
    # Rank 0 by explicit options, rank 1 as torchrun would start it (environment variables).
    s0 = collect(problems, CollectOptions(rank=0, world_size=2, **CPU), out)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    s1 = collect(problems, CollectOptions(**CPU), out)
    assert s0.shards == [shard_path(out, 0)] and s1.shards == [shard_path(out, 1)]
    assert not out.exists()
    assert read_dataset(shard_path(out, 0)).problems == [problems[0]]
    assert read_dataset(shard_path(out, 1)).problems == [problems[1]]
    merge_shards(out, [shard_path(out, 0), shard_path(out, 1)])
    merged = read_dataset(out)
    assert set(merged.problems) == set(problems) and len(merged) == 2
    assert not shard_path(out, 0).exists() and not shard_path(out, 1).exists()


def test_nothing_collected_raises_and_exits_nonzero(tmp_path, capsys):
    decomposed = bmm(1, n=1)  # [2,1,16] @ [2,16,1]: pointwise on CPU, nothing benchmarked
    out = tmp_path / "none.json"
    with pytest.raises(
        CollectionError, match=r"collected nothing: 1 problem measured, 0 records \(no_valid_config x1\)"
    ):
        collect([decomposed], CollectOptions(**CPU), out)
    ds = read_dataset(out)
    assert len(ds) == 0 and [f.reason for f in ds.failures] == ["no_valid_config"]

    shapes = tmp_path / "s.json"
    save_shapeset([ShapeEntry(op="bmm", m=1, n=1, k=16, batch=2, dtypes=("float32",))], shapes)
    rc = main(
        [
            "collect-shapeset",
            "--shapeset",
            str(shapes),
            "--device",
            "cpu",
            "--output",
            str(tmp_path / "n2.json"),
            "--no-progress",
        ]
    )
    assert rc == 1
    assert "collected nothing" in capsys.readouterr().err
    with pytest.raises(ValueError, match="nothing to collect"):
        collect([], CollectOptions(**CPU), out)


def test_cli_fails_fast_without_cuda(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert main(["collect", "--output", str(tmp_path / "x.msgpack"), "-n", "2"]) == 2
    assert "no CUDA GPU visible" in capsys.readouterr().err
    assert main(["collect", "--output", str(tmp_path / "x.msgpack"), "-n", "2", "--device", "cpu"]) == 2
    assert "only bmm can be collected with --device cpu" in capsys.readouterr().err
    assert not (tmp_path / "x.msgpack").exists()


def test_cli_checkpoint_is_for_the_sweep(tmp_path, capsys):
    out = tmp_path / "x.msgpack"
    args = ["collect", "--output", str(out), "-n", "2", "--device", "cpu", "--ops", "bmm"]
    assert main([*args, "--checkpoint", "30"]) == 2
    assert "--checkpoint applies to --collector sweep (the Inductor collector saves a problem whole)" in (
        capsys.readouterr().err
    )
    assert main([*args, "--checkpoint", "0", "--collector", "sweep"]) == 2  # wrong on any machine: said first
    assert "--checkpoint: must be a positive number of seconds, got 0" in capsys.readouterr().err
    assert main([*args, "--checkpoint", "30", "--collector", "sweep"]) == 2  # the sweep needs a GPU
    assert "--collector sweep needs a CUDA GPU" in capsys.readouterr().err
    assert not out.exists()


def test_cli_compile_timeout_is_for_the_sweep_and_positive(tmp_path, capsys):
    out = tmp_path / "x.msgpack"
    args = ["collect", "--output", str(out), "-n", "2", "--device", "cpu", "--ops", "bmm"]
    assert main([*args, "--compile-timeout", "300"]) == 2
    assert "--compile-timeout applies to --collector sweep" in capsys.readouterr().err
    assert main([*args, "--compile-timeout", "0", "--collector", "sweep"]) == 2
    assert "--compile-timeout: must be a positive number of seconds, got 0" in capsys.readouterr().err
    assert not out.exists()


def test_create_validation_refuses_the_training_seed(tmp_path, capsys):
    train = tmp_path / "train.json"
    rec = TimingRecord(problem=bmm(16), choice=Choice.aten("bmm"), time_us=5.0, hardware="cpu-test")
    write_dataset(Dataset.from_records([rec], Provenance(hardware="cpu-test", seed=3)), train)
    args = [
        "create-validation",
        "--train",
        str(train),
        "--output",
        str(tmp_path / "v.json"),
        "-n",
        "1",
        "--device",
        "cpu",
        "--ops",
        "bmm",
    ]
    assert main([*args, "--seed", "3"]) == 2
    assert "use another seed" in capsys.readouterr().err


def _training_file(path: Path, problems: list[Problem]) -> Path:
    recs = [TimingRecord(problem=p, choice=Choice.aten("bmm"), time_us=5.0, hardware="cpu-test") for p in problems]
    write_dataset(Dataset.from_records(recs, Provenance(hardware="cpu-test", seed=0)), path)
    return path


def _shape(p: Problem) -> tuple[Any, ...]:
    return (p.op, p.m, p.n, p.k, p.batch, p.dtype)


def _in_layout(p: Problem, layout: str) -> Problem:
    sa, sb = strides_for(p.op, p.m, p.n, p.k, layout)
    return Problem(op=p.op, m=p.m, n=p.n, k=p.k, batch=p.batch, dtype=p.dtype, stride_a=sa, stride_b=sb)


POW2_BMM = dict(sampler="pow2", ops=("bmm",), dtypes=("float32",), layouts=("row/row", "row/col"), min_dim=16)
CV_OPTIONS = ("--sampler", "pow2", "--ops", "bmm", "--dtypes", "float32", "--min-dim", "16", "--device", "cpu")
CV_OPTIONS += ("--hardware", "cpu-test", "--no-progress")


@pytest.mark.slow
def test_create_validation_draws_on_past_training_shapes_in_another_layout(tmp_path, run_diode):
    """Regression: a sampled problem whose shape training holds in another layout was dropped after
    the draws, and the set came out short of -n (with a warning to ask for more). The draws now go
    on to -n; the same seed gives the same problems, those of a smaller -n first, so a rerun with a
    larger -n resumes the file."""
    space = dict(POW2_BMM, max_dim=32)
    first = sample_problems(1, seed=1, **space)[0]
    train = _training_file(
        tmp_path / "train.json", [_in_layout(first, "row/col" if first.layout_b == "row" else "row/row")]
    )
    # The seed's draws without that shape (what `sample_problems(..., exclude_shapes=)` gives).
    want = [p for p in sample_problems(10, seed=1, **space) if _shape(p) != _shape(first)][:3]
    out = tmp_path / "val.json"
    cmd = ("create-validation", "--train", str(train), "--output", str(out), "--seed", "1", *CV_OPTIONS)
    cmd += ("--layouts", "row/row,row/col", "--max-dim", "32")
    proc = run_diode(*cmd, "-n", "2")
    assert proc.returncode == 0, proc.stderr
    assert "validation: 2 problems, disjoint from 1 training problem" in proc.stderr
    assert "asked for" not in proc.stderr and set(read_dataset(out).problems) == set(want[:2])
    proc = run_diode(*cmd, "-n", "3")
    assert proc.returncode == 0, proc.stderr
    assert "1 problem measured (0 failed), 2 already done" in proc.stdout
    assert set(read_dataset(out).problems) == set(want)


@pytest.mark.slow
def test_create_validation_says_when_training_shapes_leave_too_few(tmp_path, run_diode):
    """16x16x16 bmm in 7 batches (1 to 64): training holds 5 of them (in the other layout), so 2
    are left: -n 3 warns and collects those 2; -n 8, more than the space holds at all, is refused."""
    train = [_in_layout(bmm(16, 16, 16, batch=b), "row/col") for b in (1, 2, 4, 8, 16)]
    train_file = _training_file(tmp_path / "train.json", train)
    out = tmp_path / "val.json"
    cmd = ("create-validation", "--train", str(train_file), "--output", str(out), "--seed", "1", *CV_OPTIONS)
    cmd += ("--layouts", "row/row", "--max-dim", "16")
    proc = run_diode(*cmd, "-n", "8")
    assert proc.returncode == 2 and not out.exists(), proc.stderr
    assert proc.stderr.strip() == (
        "diode create-validation: error: --num-shapes/-n 8: the space holds only 7 distinct problems, 5 of them "
        "training shapes (of --train, in any layout); lower --num-shapes/-n to at most 2, or widen the space "
        "(--min-dim/--max-dim, --ops, --dtypes, --layouts)"
    )
    proc = run_diode(*cmd, "-n", "3")
    assert proc.returncode == 0, proc.stderr
    assert (
        "validation: 2 problems, not the 3 asked for: --num-shapes/-n 3: the space holds only 7 distinct problems, "
        "5 of them training shapes (of --train, in any layout); lower --num-shapes/-n to at most 2"
    ) in proc.stderr
    assert sorted(p.batch for p in read_dataset(out).problems) == [32, 64]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_resume_after_kill_loses_nothing_and_duplicates_nothing(tmp_path, sig):
    """A one-process collection killed (SIGKILL: nothing can run) or stopped (SIGTERM: as on
    Ctrl-C, exit status 143 and one line; before session 66 Python's default ended it at once)
    keeps every finished problem, and a rerun measures only the rest."""
    problems = [bmm(16), bmm(24)]
    out = tmp_path / "run.json"
    returncode = _stop_after_a_problem(tmp_path, problems, out, sig)
    if sig == signal.SIGTERM:
        text = (tmp_path / "stderr.txt").read_text()
        assert returncode == 143, text[-3000:]
        assert text.splitlines()[-1] == "diode collect-shapeset: terminated (SIGTERM)", text[-3000:]
        read_dataset(out)  # strict: nothing half-written
    before = read_dataset(out, recover=True)
    assert 1 <= len(before.problems) < len(problems)
    # Simulate a write cut off mid-chunk as well: a partial JSON line at the end.
    with open(out, "ab") as f:
        f.write(b'{"sources": [[1, {"hardw')

    summary = collect(problems, CollectOptions(**CPU), out)
    assert summary.problems_skipped == len(before.problems)
    assert summary.problems_measured == len(problems) - len(before.problems)
    after = read_dataset(out)  # complete again: the partial tail was cut off
    assert set(after.problems) == set(problems)
    counts = collections.Counter(_pairs(after))
    assert all(n == 1 for n in counts.values()), counts
    assert set(_pairs(before)) <= set(counts)  # nothing written before the kill was lost

    # A second rerun finds everything done and measures nothing.
    again = collect(problems, CollectOptions(**CPU), out)
    assert again.problems_measured == 0 and again.problems_skipped == len(problems)
    assert len(read_dataset(out)) == len(after)


@pytest.mark.slow
@pytest.mark.parametrize("verbose", [False, True], ids=["quiet", "-v"])
def test_a_stopped_command_ends_on_its_line_not_on_finalizer_noise(tmp_path, monkeypatch, verbose):
    """CI, session 77: SIGTERM during an Inductor compile, then, as the interpreter exited, "Exception
    ignored in: <generator object Virtualized._set_handler...>" (an AttributeError of torch's) after
    the command's "terminated (SIGTERM)". A command stopped by a signal now ends on its line; with
    -v Python's report stays. The failing finalizer here is a stand-in for the interrupted library's:
    a module (sitecustomize, imported at start-up) holding an object whose __del__ fails."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "class _FailsAtExit:\n"
        "    def __del__(self):\n"
        "        raise AttributeError(\"'NoneType' object has no attribute '__torchinductor_debug'\")\n"
        "\n"
        "_held = _FailsAtExit()\n"
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "run.json"
    returncode = _stop_after_a_problem(tmp_path, [bmm(16), bmm(24)], out, signal.SIGTERM, ["-v"] if verbose else [])
    text = (tmp_path / "stderr.txt").read_text()
    assert returncode == 143, text[-3000:]
    noise = "Exception ignored in: <function _FailsAtExit.__del__"
    if verbose:
        assert noise in text.split("diode collect-shapeset: terminated (SIGTERM)")[-1], text[-3000:]
    else:
        assert text.splitlines()[-1] == "diode collect-shapeset: terminated (SIGTERM)", text[-3000:]
        assert noise not in text, text[-3000:]


def test_problems_stopped_by_the_compile_limit_are_collected_last(tmp_path):
    """A problem whose saved parts hold compile timeouts (a pathological compile, session 7's
    validation head) goes after the others; other failures and whole-problem failures do not
    defer a problem, and ``defer_stalled=False`` keeps the given order."""
    out = tmp_path / "out.msgpack"
    a, b, c = bmm(16), bmm(24), bmm(32)
    tile = Choice(template="triton::bmm", block_m=16, block_n=16, block_k=16, num_stages=2, num_warps=2)
    big = Choice(template="triton::bmm", block_m=32, block_n=16, block_k=16, num_stages=2, num_warps=2)
    # the parts of an earlier run of this one's settings (another collector's would be refused)
    with DatasetWriter(partial_path(out), Provenance(hardware="cpu-test", collector="inductor")) as w:
        for ch in (tile, big):
            w.add_failure(FailureRecord(problem=a, choice=ch, reason="timeout", message="300 s", hardware="cpu-test"))
        w.add_failure(FailureRecord(problem=b, choice=tile, reason="compile_error", message="x", hardware="cpu-test"))
        w.add_failure(FailureRecord(problem=c, choice=None, reason="oom", message="x", hardware="cpu-test"))
    assert stalled_problems(out) == {a: 2}
    assert defer_stalled([a, b, c], out) == [b, c, a]
    assert defer_stalled([b, c], out) == [b, c]
    assert stalled_problems(tmp_path / "none.msgpack") == {}

    kept = tmp_path / "kept.msgpack"
    partial_path(kept).write_bytes(partial_path(out).read_bytes())
    collect([a, b], CollectOptions(defer_stalled=False, **CPU), kept)
    assert read_dataset(kept).problems == [a, b]
    collect([a, b], CollectOptions(**CPU), out)
    done = read_dataset(out)
    assert done.problems == [b, a]
    # a's saved parts entered the output with it; the sidecar keeps only what is unfinished.
    assert {(f.problem, f.reason) for f in done.failures if f.choice is not None} >= {(a, "timeout")}
    assert stalled_problems(out) == {}


def test_problems_a_resumed_run_did_not_finish_are_collected_last(tmp_path):
    """Session 15: `addmm float32 1024x1024x65536` (1,400 full-space fp32 kernels) took the whole
    of a resumed validation chunk and is still unfinished. A problem whose saved parts were timed
    by two or more runs goes after the others; one run's parts (an ordinary interrupted problem)
    are resumed first as before."""
    out = tmp_path / "out.msgpack"
    a, b, c = bmm(16), bmm(24), bmm(32)
    aten = Choice(template="aten::bmm")
    tile = Choice(template="triton::bmm", block_m=16, block_n=16, block_k=16, num_stages=2, num_warps=2)
    for date, problems in (("2026-11-25T00:57:06Z", (a, b)), ("2026-11-25T01:15:07Z", (a,))):
        with DatasetWriter(partial_path(out), Provenance(hardware="cpu-test", collector="inductor", date=date)) as w:
            for p in problems:
                w.add(TimingRecord(problem=p, choice=aten, time_us=10.0, hardware="cpu-test"))
                if date.endswith("00:57:06Z"):
                    w.add(TimingRecord(problem=p, choice=tile, time_us=12.0, hardware="cpu-test"))
    assert resumed_problems(out) == {a: 2}
    assert stalled_problems(out) == {}
    assert defer_stalled([a, b, c], out) == [b, c, a]  # b (one run's parts) keeps its place
    assert resumed_problems(tmp_path / "none.msgpack") == {}

    kept = tmp_path / "kept.msgpack"
    partial_path(kept).write_bytes(partial_path(out).read_bytes())
    collect([a, b, c], CollectOptions(defer_stalled=False, **CPU), kept)
    assert read_dataset(kept).problems == [a, b, c]
    collect([a, b, c], CollectOptions(**CPU), out)
    done = read_dataset(out)
    assert done.problems == [b, c, a]
    assert resumed_problems(out) == {}


def test_local_gpu_workers_share_the_compile_cpus():
    """Each of several sweep processes on one host gets its share of the CPUs for compiling,
    unless the caller chose the pool size; other collectors are left alone."""
    from torch_diode.collect.runner import _share_compile_cpus

    cpus = os.cpu_count() or 2
    sweep_opts = CollectOptions(collector="sweep", sweep_options=(("max_configs", 5),))
    shared = dict(_share_compile_cpus(sweep_opts, 2).sweep_options)
    assert shared == {"max_configs": 5, "workers": max(1, cpus // 2 - 1)}
    assert _share_compile_cpus(sweep_opts, 1) is sweep_opts
    chosen = CollectOptions(collector="sweep", sweep_options=(("workers", 3),))
    assert _share_compile_cpus(chosen, 4) is chosen
    inductor = CollectOptions(collector="inductor")
    assert _share_compile_cpus(inductor, 4) is inductor


def _start_collect(
    tmp_path: Path, problems: list[Problem], out: Path, workers: int, *, options: list[str] | None = None
) -> tuple[subprocess.Popen, Any]:
    """`diode collect-shapeset` of ``problems`` into ``out`` on CPU with ``workers`` processes, in its
    own session (a signal reaches its main process only, so it must stop its workers itself), with
    stderr in tmp_path/stderr.txt (the returned file: the caller closes it). SIGINT's default action
    restored: a shell's background job (a CI runner's `cmd &`) inherits it ignored, and Python then
    installs no KeyboardInterrupt handler."""
    shapes = tmp_path / "s.json"
    save_shapeset(
        [ShapeEntry(op="bmm", m=p.m, n=p.n, k=p.k, batch=p.batch, dtypes=("float32",)) for p in problems], shapes
    )
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "packages" / "torch-diode-lib" / "src"), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "torch_diode", *(options or []), "collect-shapeset", "--shapeset", str(shapes)]
    cmd += ["--device", "cpu", "--hardware", "cpu-test", "--output", str(out)]
    cmd += ["--workers", str(workers), "--no-progress"]
    log = open(tmp_path / "stderr.txt", "wb")
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    return proc, log


def _stop_after_a_problem(
    tmp_path: Path, problems: list[Problem], out: Path, sig: int, options: list[str] | None = None
) -> int:
    """A one-process `diode collect-shapeset` (``_start_collect``) sent ``sig`` once its output
    holds a finished problem; its exit status."""
    proc, log = _start_collect(tmp_path, problems, out, workers=1, options=options)
    try:
        _wait_for_a_problem(proc, [out], tmp_path)
        proc.send_signal(sig)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        log.close()
    return proc.returncode


def _problems_in(files: list[Path]) -> set[Problem]:
    """The finished problems that the shard ``files`` hold so far. An empty file is skipped, as
    the library's merge does: a writer creates its file, then writes the header (CI, session 75:
    this poll read a shard in between and failed on "file is empty")."""
    return {p for f in files if f.exists() and f.stat().st_size > 0 for p in read_dataset(f, recover=True).problems}


def _wait_for_a_problem(proc: subprocess.Popen, files: list[Path], tmp_path: Path) -> set[Problem]:
    """Wait until ``files`` hold a finished problem (while ``proc`` runs); returns their problems."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if _problems_in(files):
            break
        time.sleep(0.2)
    assert proc.poll() is None, (
        f"the collector exited ({proc.returncode}) before it could be stopped:\n"
        + (tmp_path / "stderr.txt").read_text()[-3000:]
    )
    return _problems_in(files)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_workers_merge_what_they_finished(tmp_path, sig):
    """SIGINT (Ctrl-C, `timeout --signal=INT`) or SIGTERM (`kill`, `timeout`'s default) to the main
    process of a two-worker run: it stops the workers and merges every finished problem of both
    shards into the output before exiting. A second signal while it stops them (`timeout` signals
    the process, then its group) changes nothing (session 8: it cut the clean-up short and left
    the shards unmerged). SIGTERM ended the process at once (Python's default) before session 66:
    shards unmerged, the workers running on as orphans."""
    problems = [bmm(m) for m in range(16, 96, 8)]  # 5 per worker: more than the 10 s grace can finish
    out = tmp_path / "run.msgpack"
    shards = [shard_path(out, r) for r in range(2)]
    proc, log = _start_collect(tmp_path, problems, out, workers=2)
    try:
        flushed = _wait_for_a_problem(proc, shards, tmp_path)
        workers = _workers_of(proc.pid)
        assert len(workers) == 2, workers
        proc.send_signal(sig)
        time.sleep(1.0)  # inside the clean-up: the workers get a 10 s grace to stop
        proc.send_signal(sig)
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        log.close()
    err = (tmp_path / "stderr.txt").read_text()
    assert rc == (143 if sig == signal.SIGTERM else 130), err[-3000:]
    assert ("terminated (SIGTERM)" if sig == signal.SIGTERM else "interrupted") in err.splitlines()[-1], err[-3000:]
    assert not any(alive(w) for w in workers), err[-3000:]
    assert not any(s.exists() for s in shards), err[-3000:]  # merged, then removed
    merged = read_dataset(out)  # complete: strict read
    assert flushed <= set(merged.problems) and len(merged.problems) < len(problems), err[-3000:]
    assert "are merged into it" in err, err[-3000:]

    summary = collect(problems, CollectOptions(workers=2, **CPU), out)
    assert summary.problems_skipped == len(merged.problems)
    after = read_dataset(out)
    assert set(after.problems) == set(problems)
    assert all(n == 1 for n in collections.Counter(_pairs(after)).values())


def _workers_of(pid: int) -> list[int]:
    """The collect worker processes (multiprocessing spawn) whose parent is ``pid`` (Linux /proc)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmdline = (d / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"spawn_main" in cmdline:
            found.append(int(d.name))
    return sorted(found)


@pytest.mark.slow
def test_workers_end_with_a_killed_parent_and_a_rerun_merges_their_shards(tmp_path):
    """SIGKILL to the main process of a two-worker run (no clean-up can run): its workers end by
    themselves (before session 66 they ran on, then waited for work forever), and a rerun with
    one worker merges the shards they left before measuring anything, so it measures only the
    rest and keeps no duplicate (before, it measured the shards' problems again and left the
    shard files beside the output)."""
    problems = [bmm(m) for m in range(16, 64, 8)]
    out = tmp_path / "run.msgpack"
    shards = [shard_path(out, r) for r in range(2)]
    proc, log = _start_collect(tmp_path, problems, out, workers=2)
    try:
        _wait_for_a_problem(proc, shards, tmp_path)
        workers = _workers_of(proc.pid)
        assert len(workers) == 2, workers
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(alive(w) for w in workers):
            time.sleep(0.2)
        outlived = [w for w in workers if alive(w)]
    finally:
        for w in _workers_of(proc.pid) if proc.poll() is None else []:
            os.kill(w, signal.SIGKILL)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        log.close()
    for w in outlived:
        os.kill(w, signal.SIGKILL)
    assert not outlived, f"worker(s) {outlived} outlived their killed parent by 20 s"
    # A thread of an ending process may hold its files a moment after the process reads as ended.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(file_in_use(s) for s in shards):
        time.sleep(0.1)
    left = _problems_in(shards)
    assert 1 <= len(left) < len(problems) and not out.exists()

    summary = collect(problems, CollectOptions(workers=1, **CPU), out)
    assert summary.problems_skipped == len(left)
    assert summary.problems_measured == len(problems) - len(left)
    after = read_dataset(out)
    assert set(after.problems) == set(problems)
    assert all(n == 1 for n in collections.Counter(_pairs(after)).values())
    assert not any(s.exists() for s in shards)


def test_a_run_merges_the_shards_another_left_and_measures_the_rest(tmp_path):
    """Shards left beside the output (a multi-worker run killed before its merge; here written by
    two ranks) are merged into it first: a run with another number of workers skips their
    problems (it measured them again and kept both measurements), and removes the shards."""
    out = tmp_path / "out.msgpack"
    problems = [bmm(16), bmm(24), bmm(32)]
    for r in range(2):
        collect(problems[:2], CollectOptions(rank=r, world_size=2, **CPU), out)
    before = {r: read_dataset(shard_path(out, r)) for r in range(2)}
    summary = collect(problems, CollectOptions(**CPU), out)
    assert summary.problems_skipped == 2 and summary.problems_measured == 1
    after = read_dataset(out)
    assert set(after.problems) == set(problems)
    assert all(n == 1 for n in collections.Counter(_pairs(after)).values())
    for ds in before.values():
        assert set(ds.records()) <= set(after.records())  # the shards' timings, as measured
    assert not shard_path(out, 0).exists() and not shard_path(out, 1).exists()


def test_a_rank_skips_problems_in_the_shards_of_an_earlier_world_size(tmp_path):
    """Under torchrun, after a run with another WORLD_SIZE: rank 0 of 2 skips a problem that
    rank 2 of 3 already measured into its shard (it measured it again: two measurements of one
    problem once the shards were merged)."""
    out = tmp_path / "out.msgpack"
    problems = [bmm(16), bmm(24), bmm(32), bmm(40)]
    first = collect(problems, CollectOptions(rank=2, world_size=3, **CPU), out)
    assert first.problems_measured == 1 and read_dataset(shard_path(out, 2)).problems == [problems[2]]
    second = collect(problems, CollectOptions(rank=0, world_size=2, **CPU), out)
    assert second.problems_skipped == 1 and second.problems_measured == 1
    assert read_dataset(shard_path(out, 0)).problems == [problems[0]]


def test_a_shard_being_written_is_not_merged(tmp_path):
    """A shard an open writer holds (a collection into the same output still running) is neither
    merged nor removed: the run is refused, saying so."""
    out = tmp_path / "out.msgpack"
    aten = Choice(template="aten::bmm")
    with DatasetWriter(shard_path(out, 1), Provenance(hardware="cpu-test", collector="inductor")) as w:
        w.add(TimingRecord(problem=bmm(16), choice=aten, time_us=10.0, hardware="cpu-test"))
        w.flush()
        with pytest.raises(FileInUseError, match=r"shard file out\.rank1\.msgpack is being written by another process"):
            collect([bmm(24)], CollectOptions(**CPU), out)
    assert shard_path(out, 1).exists() and not out.exists()
    assert read_dataset(shard_path(out, 1)).problems == [bmm(16)]


def _write(path: Path, problems: list[Problem], *, chunks: int = 1) -> None:
    """``path`` with one ATen timing of each of ``problems``, ``chunks`` chunks of them each."""
    with DatasetWriter(path, Provenance(hardware="cpu-test", collector="inductor"), format="msgpack") as w:
        for i in range(chunks):
            for p in problems:
                w.add(
                    TimingRecord(problem=p, choice=Choice(template=f"aten::bmm{i}"), time_us=10.0, hardware="cpu-test")
                )
            w.flush()


def test_a_damaged_checkpointed_part_keeps_no_shard_out_of_the_merge(tmp_path):
    """The merge at the end of a multi-worker run (or of one stopped): a damaged ``OUT.partial``
    beside it raises, after the shards' finished problems are merged into OUT (as before the read
    of each file once), not with them left out."""
    out = tmp_path / "out.msgpack"
    _write(out, [bmm(16)])
    _write(shard_path(out, 0), [bmm(24)])
    _write(shard_path(out, 1), [bmm(32)])
    part = partial_path(out)
    _write(part, [bmm(40)], chunks=4)
    damaged = bytearray(part.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    damaged[len(damaged) // 2 + 1] ^= 0xFF
    part.write_bytes(bytes(damaged))
    with pytest.raises(DatasetFormatError):
        merge_shards(out, shard_files(out))
    assert sorted(p.m for p in read_dataset(out).problems) == [16, 24, 32]
    assert shard_files(out) == [] and part.read_bytes() == bytes(damaged)


def test_shards_of_an_output_without_a_dataset_extension_merge_in_the_format_given(tmp_path):
    """``--format`` alone may say an output's format (``data.bin``): its shards (``data.rank0.bin``)
    and the output are read in it."""
    out = tmp_path / "data.bin"
    _write(shard_path(out, 0), [bmm(24)])
    _write(shard_path(out, 1), [bmm(32)])
    merge_shards(out, shard_files(out), format="msgpack")
    assert sorted(p.m for p in read_dataset(out, format="msgpack").problems) == [24, 32]


def _as_if_on_a_gpu(monkeypatch, name: str, sm_count: int) -> None:
    """The driver's answers on a GPU machine (the outside world: this CPU machine has no GPU)."""
    import types

    import torch

    props = types.SimpleNamespace(name=name, major=9, minor=0, multi_processor_count=sm_count, total_memory=150 * 2**30)
    monkeypatch.setattr(torch.version, "cuda", torch.version.cuda or "13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    monkeypatch.delenv("TORCH_DIODE_HARDWARE", raising=False)


def test_timings_are_not_recorded_under_another_gpus_key(tmp_path, monkeypatch):
    """Session 23's device calls asked for one GPU kind and got the other: the key given must be the GPU's."""
    from torch_diode.collect import runner

    def key(hardware: str, device: str = "cuda") -> str:
        return runner._hardware_key(CollectOptions(device=device, hardware=hardware, progress=False))

    _as_if_on_a_gpu(monkeypatch, "NVIDIA H200", 132)
    with pytest.raises(CollectionError, match=r"NVIDIA H200 \(hardware key NVIDIA-H200\).*recorded as NVIDIA-H100"):
        key("NVIDIA-H100")
    out = tmp_path / "h100.msgpack"
    options = CollectOptions(device="cuda", hardware="NVIDIA-H100", progress=False)
    with pytest.raises(CollectionError, match="Pass --hardware NVIDIA-H200"):
        runner._run_rank([bmm(1)], options, out, device="cuda")
    assert not out.exists()  # refused before anything is written
    # the GPU's own key, a CPU run, and the user's explicit override are taken at their word
    assert key("NVIDIA-H200") == "NVIDIA-H200" and key("NVIDIA-H100", device="cpu") == "NVIDIA-H100"
    monkeypatch.setenv("TORCH_DIODE_HARDWARE", "NVIDIA-H100")
    assert key("NVIDIA-H100") == "NVIDIA-H100"
    # so is any key on a GPU torch-diode does not know
    _as_if_on_a_gpu(monkeypatch, "ACME X1", 100)
    assert key("custom-gpu") == "custom-gpu"


def test_collect_problems_measures_a_datasets_problems_in_a_run_of_their_own(tmp_path, capsys):
    """``diode collect-problems --from V``: V's problems (not its choices) collected again, with
    Inductor's own autotuning here: the file ``validate-max-autotune --max-autotune-solution``
    reads stock's picks from. A rerun resumes; a file that is not a dataset is refused."""
    problems = [bmm(16), bmm(24)]
    src = tmp_path / "val.json"
    recs = [TimingRecord(problem=p, choice=Choice.aten("bmm"), time_us=5.0, hardware="cpu-test") for p in problems]
    fail = FailureRecord(problem=bmm(32), choice=None, reason="timeout", message="x", hardware="cpu-test")
    write_dataset(Dataset.from_records(recs, Provenance(hardware="cpu-test"), failures=[fail]), src)
    out = tmp_path / "stock.msgpack"
    args = ["collect-problems", "--from", str(src), "--output", str(out), "--device", "cpu", "--hardware", "cpu-test"]
    assert main([*args, "--no-progress"]) == 0
    got = read_dataset(out)
    assert set(got.problems) == set(read_dataset(src).problems) == {*problems, bmm(32)}
    assert len(got) >= 3 and dict(got.sources[0].extra)["search_space"] == "DEFAULT"  # timed here
    assert all(r.time_us != 5.0 for r in got.records())
    picks = read_max_autotune_solution(out)  # stock's pick per problem: its fastest record here
    assert set(picks) == {p for p in got.problems if any(r.problem == p for r in got.records())}
    capsys.readouterr()
    assert main([*args, "--no-progress"]) == 0  # everything is there: a rerun measures nothing
    assert "0 problems measured (0 failed), 3 already done" in capsys.readouterr().out
    assert len(read_dataset(out)) == len(got)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert (
        main(["collect-problems", "--from", str(bad), "--output", str(tmp_path / "x.msgpack"), "--device", "cpu"]) == 2
    )
    assert "--from:" in capsys.readouterr().err and not (tmp_path / "x.msgpack").exists()
    assert main(["collect-problems", "--from", str(src), "--output", str(src), "--device", "cpu"]) == 2
    assert "--from and --output are the same file" in capsys.readouterr().err


def test_sigterm_becomes_an_interrupt_only_in_place_of_pythons_default():
    """collect() turns SIGTERM into Terminated (a KeyboardInterrupt) only where Python's default
    would end the process at once: a program's own handler, or an ignored SIGTERM, is left alone;
    the default comes back after the block."""
    from torch_diode.collect.runner import sigterm_interrupts
    from torch_diode.errors import Terminated

    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with sigterm_interrupts():
            with pytest.raises(Terminated):
                signal.raise_signal(signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL

        def own(signum, frame):
            pass

        for handler in (own, signal.SIG_IGN):
            signal.signal(signal.SIGTERM, handler)
            with sigterm_interrupts():
                assert signal.getsignal(signal.SIGTERM) is handler
                signal.raise_signal(signal.SIGTERM)  # handled by the program's own handler, or ignored
            assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_second_run_into_an_output_being_collected_is_refused(tmp_path, capsys):
    """Session 66's audit: a second collection into an output another one is writing got past
    the writer's lock (merging replaces OUT and OUT.partial by new files) and both exited 0 while
    the first one's later problems went to a file no name reached. The run holds OUT.lock for its
    whole length: a second local run, or `diode data merge` into OUT, is refused before any work;
    torchrun ranks share it (and keep a local run out meanwhile)."""
    from torch_diode.dataset import lock_path, output_lock

    out = tmp_path / "out.msgpack"
    other = tmp_path / "other.msgpack"
    aten = Choice(template="aten::bmm")
    with DatasetWriter(other, Provenance(hardware="cpu-test", collector="inductor")) as w:
        w.add(TimingRecord(problem=bmm(16), choice=aten, time_us=10.0, hardware="cpu-test"))
    with output_lock(out):  # as a running collection into `out` holds it
        with pytest.raises(FileInUseError, match=r"another collection \(or merge\) is writing it now"):
            collect([bmm(16)], CollectOptions(**CPU), out)
        with pytest.raises(FileInUseError):
            collect([bmm(16)], CollectOptions(rank=0, world_size=2, **CPU), out)
        assert main(["data", "merge", str(out), str(other)]) == 2
        assert "out.msgpack.lock is locked" in capsys.readouterr().err
    assert not out.exists() and not shard_path(out, 0).exists()  # nothing was measured or written
    with output_lock(out, shared=True):  # a torchrun rank is running
        with pytest.raises(FileInUseError):
            collect([bmm(16)], CollectOptions(**CPU), out)
    collect([bmm(16)], CollectOptions(**CPU), out)
    assert read_dataset(out).problems == [bmm(16)] and not lock_path(out).exists()


def _worker_that_ignores(signals: tuple[int, ...], started: Path) -> None:
    """A rank stuck where signals do not reach Python (as in a device call): it ignores them."""
    for sig in signals:
        signal.signal(sig, signal.SIG_IGN)
    started.touch()
    time.sleep(300)


@pytest.mark.parametrize(
    ("ignored", "killed"),
    [((signal.SIGINT,), False), ((signal.SIGINT, signal.SIGTERM), True)],
    ids=["stops-on-sigterm", "killed"],
)
def test_stop_workers_is_bounded(
    tmp_path: Path, ignored: tuple[int, ...], killed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The clean-up after an interrupt: a worker that ignores SIGINT gets SIGTERM, one that
    ignores that too is killed; either way the clean-up ends (grace 1 s: 1 + 3 + 1 s; with 0.2 s a
    worker on a loaded 2-core machine could take longer than the grace to end on SIGTERM)."""
    import concurrent.futures
    import logging
    import multiprocessing

    from torch_diode.collect.runner import _stop_workers

    pool = concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    started = tmp_path / "started"
    future = pool.submit(_worker_that_ignores, ignored, started)
    deadline = time.monotonic() + 120
    while not started.exists():
        assert time.monotonic() < deadline and not future.done(), "the worker did not start"
        time.sleep(0.05)
    (proc,) = pool._processes.values()  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING, logger="torch_diode.collect.runner"):
        _stop_workers(pool, [future], grace_s=1.0)
    assert not proc.is_alive()
    assert proc.exitcode == (-signal.SIGKILL if killed else -signal.SIGTERM)
    assert ("did not stop: killed" in caplog.text) == killed


@pytest.mark.parametrize("rank", ["5", "-1"])
def test_a_torchrun_rank_out_of_range_is_refused_before_writing(tmp_path, monkeypatch, rank):
    """RANK outside [0, WORLD_SIZE) from the environment (before session 78: a header-only
    `x.rank5` shard, or an `x.rank-1` one that no later run merged or read)."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", rank)
    out = tmp_path / "x.msgpack"
    with pytest.raises(ValueError, match=rf"RANK={rank} and WORLD_SIZE=2: RANK must be in \[0, WORLD_SIZE\)"):
        collect([bmm(16)], CollectOptions(**CPU), out)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("workers", [1, 2])
def test_a_file_of_another_search_space_is_not_resumed(tmp_path, workers):
    """A collection resumes a file only where its settings are the file's (before session 78 a run
    of the EXHAUSTIVE space resumed a DEFAULT one: '2 of 2 problem(s) already collected'); with
    several workers too, which read the output without a writer of their own (their shards would
    be merged into it)."""
    out = tmp_path / "c.msgpack"
    collect([bmm(16)], CollectOptions(**CPU), out)
    before = out.read_bytes()
    with pytest.raises(
        ValueError, match="holds timings collected with search_space 'DEFAULT', not this run's 'EXHAUSTIVE'"
    ):
        collect([bmm(16), bmm(24)], CollectOptions(workers=workers, search_space="EXHAUSTIVE", **CPU), out)
    assert out.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["c.msgpack"]


def test_checkpointed_parts_of_another_search_space_are_not_resumed(tmp_path):
    """OUT.partial of a run of other settings (stopped in its first problem: OUT holds only its
    header) is refused before its choices are skipped or merged (session 78's review)."""
    from torch_diode.collect.runner import partial_path

    out = tmp_path / "c.msgpack"
    collect([bmm(16)], CollectOptions(**CPU), out)
    partial_path(out).write_bytes(out.read_bytes())  # parts of a DEFAULT run
    with pytest.raises(ValueError, match=r"c\.msgpack\.partial: holds timings collected with search_space 'DEFAULT'"):
        collect([bmm(24)], CollectOptions(search_space="EXHAUSTIVE", **CPU), tmp_path / "c.msgpack")


def test_every_setting_a_run_records_is_compared_when_its_file_is_resumed(tmp_path):
    """The settings a run records in its provenance (``collect.runner._settings_of``) and those a
    resumed file is compared on (``dataset.RUN_SETTINGS``) were two lists kept in step by hand: a
    setting in the first only was recorded and never compared (files of both values mixed), one in
    the second only was never recorded. Each setting a run records refuses a file that records
    another value of it, and every compared setting is recorded by some run."""
    from dataclasses import replace

    from torch_diode.collect.runner import _provenance, _settings_of
    from torch_diode.dataset import RUN_SETTINGS

    runs = [
        CollectOptions(**CPU),
        CollectOptions(collector="sweep", search_space="EXHAUSTIVE", via_linear=True, **CPU),
        CollectOptions(collector="sweep", sweep_options=(("literal_sizes", False),), **CPU),
    ]
    recorded: set[str] = set()
    for i, options in enumerate(runs):
        run = _provenance(options, "cpu-test")
        path = tmp_path / f"run{i}.msgpack"
        with DatasetWriter(path, run) as w:
            w.add(TimingRecord(problem=bmm(16), choice=Choice(template="aten::bmm"), time_us=10.0, hardware="cpu-test"))
        for name, value in _settings_of(options).items():
            recorded.add(name)
            other = f"not-{value}"
            if name == "collector":
                assert run.collector == value
                changed = replace(run, collector=other)
            else:
                assert dict(run.extra)[name] == value
                changed = replace(run, extra=tuple((k, other if k == name else v) for k, v in run.extra))
            with pytest.raises(ValueError, match=f"collected with {name} {value!r}, not this run's {other!r}"):
                DatasetWriter(path, changed)
        with DatasetWriter(path, run):  # the run itself resumes it
            pass
    assert recorded == set(RUN_SETTINGS)


_READS = """
import json, os, sys

report, code = sys.argv[1:3]
reads, replaced = {}, set()


def watch(event, args):
    # reads of each file until it is first replaced or removed: those of the file an earlier run left
    if event == "open" and isinstance(args[0], (str, os.PathLike)) and isinstance(args[1], str) and args[1] == "r":
        path = os.path.abspath(args[0])
        if path not in replaced:
            reads[path] = reads.get(path, 0) + 1
    elif event == "os.rename":
        replaced.add(os.path.abspath(args[1]))
    elif event == "os.remove":
        replaced.add(os.path.abspath(args[0]))


sys.addaudithook(watch)
exec(code)
with open(report, "w") as f:
    json.dump(reads, f)
"""


@pytest.mark.parametrize("torchrun", [False, True], ids=["local", "torchrun-rank"])
def test_a_resume_reads_each_file_an_earlier_run_left_once(tmp_path, torchrun):
    """A resume checked the run settings of the shards and checkpointed parts an earlier run left
    in a read of its own, then read them again to merge them, settle them, or skip their problems:
    each is now checked where it is read, once (a torchrun rank's own shard is read twice still:
    checked in its turn, then resumed by its writer). Seen by an audit hook on ``open``."""
    from torch_diode.collect.runner import _provenance

    out = tmp_path / "out.msgpack"
    run = _provenance(CollectOptions(**CPU), "cpu-test")
    aten = Choice(template="aten::bmm")
    left = {
        shard_path(out, 0): bmm(16),
        shard_path(out, 1): bmm(24),
        out: bmm(32),
        partial_path(out): bmm(40),
        tmp_path / "out.rank1.msgpack.partial": bmm(48),
    }
    for path, problem in left.items():
        with DatasetWriter(path, run, format="msgpack") as w:
            w.add(TimingRecord(problem=problem, choice=aten, time_us=10.0, hardware="cpu-test"))
    ranks = "rank=0, world_size=2, " if torchrun else ""
    code = (
        "from torch_diode.collect import CollectOptions, collect\n"
        "from torch_diode.records import Problem\n"
        "ps = [Problem(op='bmm', m=m, n=8, k=24, batch=2, dtype='float32') for m in (16, 24, 32)]\n"
        f"s = collect(ps, CollectOptions({ranks}device='cpu', progress=False, hardware='cpu-test'), {str(out)!r})\n"
        "assert s.problems_measured == 0, s\n"
    )
    report = tmp_path / "reads.json"
    r = subprocess.run(
        [sys.executable, "-c", _READS, str(report), code], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    reads = {Path(p).name: n for p, n in json.loads(report.read_text()).items() if Path(p).parent == tmp_path}
    once = {p.name: 1 for p in left}
    if torchrun:
        once["out.rank0.msgpack"] = 2
    assert reads == once
    if not torchrun:
        assert set(read_dataset(out).problems) == set(left.values()) - {bmm(40), bmm(48)}
        assert sorted(read_dataset(partial_path(out), format="msgpack").problems, key=repr) == [bmm(40), bmm(48)]


@pytest.mark.parametrize("bad", ["shard", "partial", "both"])
@pytest.mark.parametrize("torchrun", [False, True], ids=["local", "torchrun-rank"])
def test_leftovers_of_other_settings_are_refused_before_anything_is_merged(tmp_path, torchrun, bad):
    """A leftover shard or checkpointed part of another search space is refused, naming it (the
    shards before the parts), while every file beside the output is as it was: none merged,
    settled or removed."""
    from torch_diode.collect.runner import _provenance

    out = tmp_path / "c.msgpack"
    run = _provenance(CollectOptions(**CPU), "cpu-test")
    other = _provenance(CollectOptions(search_space="EXHAUSTIVE", **CPU), "cpu-test")
    aten = Choice(template="aten::bmm")
    files = {
        shard_path(out, 1): (bmm(16), other if bad in ("shard", "both") else run),
        partial_path(out): (bmm(24), other if bad in ("partial", "both") else run),
        out: (bmm(32), run),
    }
    for path, (problem, prov) in files.items():
        with DatasetWriter(path, prov, format="msgpack") as w:
            w.add(TimingRecord(problem=problem, choice=aten, time_us=10.0, hardware="cpu-test"))
    before = {f.name: f.read_bytes() for f in tmp_path.iterdir()}
    named = shard_path(out, 1) if bad != "partial" else partial_path(out)
    ranks: dict[str, Any] = {"rank": 0, "world_size": 2} if torchrun else {}
    with pytest.raises(ValueError) as e:
        collect([bmm(16), bmm(24), bmm(40)], CollectOptions(**ranks, **CPU), out)
    assert str(e.value).startswith(
        f"{named}: holds timings collected with search_space 'EXHAUSTIVE', not this run's 'DEFAULT'"
    ), e.value
    assert {f.name: f.read_bytes() for f in tmp_path.iterdir()} == before
