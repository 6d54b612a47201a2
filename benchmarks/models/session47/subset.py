"""Write the problems of a dataset file whose operands have the given dtypes (session 47: the
fp16/bf16 part of ``data/NVIDIA-H200/train-cover2.msgpack``, trained on as an extra file).

Usage: python benchmarks/models/session47/subset.py IN OUT [--dtypes float16,bfloat16]
"""

from __future__ import annotations

import argparse
from collections import Counter

from torch_diode.dataset import read_dataset, write_dataset


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--dtypes", default="float16,bfloat16", help="comma-separated operand dtypes to keep")
    args = ap.parse_args()
    dtypes = set(args.dtypes.split(","))
    ds = read_dataset(args.src)
    keep = [p for p in ds.measured_problems() if p.dtype in dtypes]
    sub = ds.select_problems(keep).compact()
    write_dataset(sub, args.out)
    ops = ", ".join(f"{op} {n}" for op, n in sorted(Counter(p.op for p in keep).items()))
    print(f"{args.out}: {len(keep)} of {len(ds.measured_problems())} problems ({ops}), {len(sub)} records")


if __name__ == "__main__":
    main()
