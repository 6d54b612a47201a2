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
