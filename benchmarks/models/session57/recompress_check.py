"""Session 57: every tracked msgpack dataset file against its version at a commit before the
compression (``a0b4e5f^``): the same tables, columns and failures in the same order and the same
``dataset_hash``, and the sizes before and after.

    python benchmarks/models/session57/recompress_check.py [--before a0b4e5f^]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from torch_diode.dataset import read_dataset
from torch_diode.train import dataset_hash

ROOT = Path(__file__).resolve().parents[3]


def same(a, b) -> bool:
    columns = ("problem_idx", "choice_idx", "time_us", "source_idx")
    return (
        a.problems == b.problems
        and a.choices == b.choices
        and a.sources == b.sources
        and all(np.array_equal(getattr(a, c), getattr(b, c)) for c in columns)
        and list(map(repr, a.failures)) == list(map(repr, b.failures))
        and dataset_hash(a) == dataset_hash(b)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default="a0b4e5f^", help="the commit whose files were plain")
    a = ap.parse_args()
    files = subprocess.run(
        ["git", "ls-files", "data/*.msgpack", "data/*.partial", "tests/data/*.msgpack"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    total_before = total_now = 0
    with tempfile.TemporaryDirectory() as d:
        for f in files:
            old = Path(d) / Path(f).name
            old.write_bytes(
                subprocess.run(["git", "show", f"{a.before}:{f}"], cwd=ROOT, capture_output=True, check=True).stdout
            )
            fmt = "msgpack"
            before, now = read_dataset(old, format=fmt), read_dataset(ROOT / f, format=fmt)
            s0, s1 = old.stat().st_size, (ROOT / f).stat().st_size
            total_before, total_now = total_before + s0, total_now + s1
            print(f"{f}: {s0} -> {s1} bytes ({s0 / s1:.1f}x), {len(now)} records, identical: {same(before, now)}")
    print(f"{len(files)} files: {total_before} -> {total_now} bytes")


if __name__ == "__main__":
    main()
