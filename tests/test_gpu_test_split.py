"""scripts/run_gpu_tests_parallel.py deals the `gpu` tests to the GPUs: every one exactly once, the
multi-GPU ones apart (checked with --dry-run, which needs no GPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _collect(marks: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", marks, "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in out.stdout.splitlines() if "::" in line]


@pytest.mark.slow
def test_every_gpu_test_is_dealt_once_and_multi_gpu_ones_run_apart():
    out = subprocess.run(
        [sys.executable, "scripts/run_gpu_tests_parallel.py", "--dry-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    groups: list[list[str]] = []
    for line in out.splitlines():
        if not line.startswith("  "):
            groups.append([])
        else:
            groups[-1].append(line.strip())
    *per_gpu, multi = groups
    assert len(per_gpu) == 2  # a dry run without a GPU shows a two-GPU split
    dealt = [t for g in per_gpu for t in g]
    assert sorted(dealt) == sorted(_collect("gpu and not multi_gpu")) and len(set(dealt)) == len(dealt)
    assert abs(len(per_gpu[0]) - len(per_gpu[1])) <= 1
    assert multi == _collect("gpu and multi_gpu") == ["tests/test_collect_gpu.py::test_two_gpus_shard_and_merge"]


def _script():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "run_gpu_tests_parallel", ROOT / "scripts" / "run_gpu_tests_parallel.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_parts_are_of_about_equal_time_and_keep_collection_order():
    split = _script().split
    ids = [f"t{i}" for i in range(7)]
    seconds = {"t0": 10.0, "t1": 60.0, "t2": 20.0, "t3": 40.0, "t4": 5.0, "t5": 25.0}  # t6 not recorded: 30 s
    parts = split(ids, 3, seconds)
    assert sorted(t for p in parts for t in p) == ids
    loads = [sum(seconds.get(t, 30.0) for t in p) for p in parts]
    # longest first, each to the least loaded part (the first of equals): t1 t3 t6 | t5 to the third
    # (55), t2 to the second (60), t0 to the third (65), t4 to the first (65)
    assert loads == [65.0, 60.0, 65.0]
    assert parts == [["t1", "t4"], ["t2", "t3"], ["t0", "t5", "t6"]]
    assert split(ids, 3, seconds) == parts
    assert split(ids, 1, seconds) == [ids]


def test_a_part_must_be_k_of_n():
    mod = _script()
    assert mod.parse_part("2/3") == (2, 3)
    for bad in ("0/3", "4/3", "3", "a/b", "1/0"):
        with pytest.raises(Exception, match="give K/N"):
            mod.parse_part(bad)


def test_recorded_durations_sum_each_tests_phases(tmp_path):
    import gzip
    import json

    log = tmp_path / "gpu0.log.gz"
    log.write_bytes(
        gzip.compress(
            b"============ slowest durations ============\n"
            b"12.50s call     tests/test_a.py::test_one[mm float16 1x2x3 row/row]\n"
            b"0.50s setup    tests/test_a.py::test_one[mm float16 1x2x3 row/row]\n"
            b"3.00s call     tests/test_a.py::test_two\n"
            b"PASSED tests/test_a.py::test_one[mm float16 1x2x3 row/row]\n"
            b"PASSED tests/test_a.py::test_quick\n"
            b"FAILED tests/test_a.py::test_two - AssertionError: x - y\n"
        )
    )
    durations = tmp_path / "d.json"
    durations.write_text(json.dumps({"seconds": {"tests/test_a.py::test_two": 9.0, "tests/test_b.py::test_old": 4.0}}))
    mod = _script()
    assert mod.record([log], durations) == 0
    assert json.loads(durations.read_text())["seconds"] == {
        "tests/test_a.py::test_one[mm float16 1x2x3 row/row]": 13.0,
        "tests/test_a.py::test_quick": 0.0,
        "tests/test_a.py::test_two": 3.0,
        "tests/test_b.py::test_old": 4.0,
    }
    empty = tmp_path / "empty.log"
    empty.write_text("no durations here\n")
    with pytest.raises(SystemExit, match="holds no test durations"):
        mod.record([empty], durations)
    durations.write_text("{not json")
    with pytest.raises(SystemExit, match="is not a durations file"):
        mod.read_durations(durations)


@pytest.mark.slow
def test_the_parts_hold_every_gpu_test_once_and_the_multi_gpu_ones_last():
    dealt: list[str] = []
    for k in (1, 2, 3):
        out = subprocess.run(
            [sys.executable, "scripts/run_gpu_tests_parallel.py", "--part", f"{k}/3", "--dry-run"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        lines = out.splitlines()
        assert lines[0].startswith(f"part {k}/3: ")
        multi_at = next(i for i, line in enumerate(lines) if line.startswith("then on every GPU"))
        dealt += [line.strip() for line in lines[1:multi_at] if line.startswith("  ")]
        multi = [line.strip() for line in lines[multi_at + 1 :]]
        assert multi == (_collect("gpu and multi_gpu") if k == 3 else [])
    assert sorted(dealt) == sorted(_collect("gpu and not multi_gpu")) and len(set(dealt)) == len(dealt)


def test_a_logs_summary_is_pytests_last_outcome_line(tmp_path):
    summary = _script()._summary
    log = tmp_path / "multi.log"
    log.write_text(
        "s   [100%]\nSKIPPED [1] tests/test_collect_gpu.py:123: needs 2 GPUs\n======= 1 skipped in 16.48s =======\n"
    )
    assert summary(log) == "1 skipped in 16.48s"
    log.write_text("..F\n== 1 failed, 2 passed in 3.00s ==\n")
    assert summary(log) == "1 failed, 2 passed in 3.00s"
    log.write_text("# CUDA_VISIBLE_DEVICES=0: 3 test(s)\n..\n")
    assert summary(log) == "no summary (stopped before pytest reported)"
