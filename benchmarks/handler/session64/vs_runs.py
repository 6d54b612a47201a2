"""Session 64, rule 4: the seeded real-compile sample measured in session 63 and again in session
64 (stock max-autotune and torch-diode's defaults of each session), compared on the problems both
runs measured: each run's defaults over its own stock, the defaults' kernels across the runs, and
stock's across the runs.

    python benchmarks/handler/session64/vs_runs.py
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2] / "handler" / "NVIDIA-H200"


def load(pattern: str) -> dict[str, tuple[float, float, int]]:
    out = {}
    for f in sorted(glob.glob(str(ROOT / pattern))):
        for row in json.loads(Path(f).read_text())["rows"]:
            t = {r["variant"]: r for r in row["runs"] if "kernel_us" in r}
            if {"stock", "default"} <= set(t):
                out[row["key"]] = (
                    t["stock"]["kernel_us"],
                    t["default"]["kernel_us"],
                    t["default"]["diode"]["candidates_kept"],
                )
    return out


def gm(v: list[float]) -> float:
    return float(np.exp(np.mean(np.log(v))))


def main() -> None:
    a, b = load("session63-vs-stock/vs-stock-*.json"), load("session64/vs-stock/vs-stock-*.json")
    common = sorted(set(a) & set(b))
    changed = [k for k in common if a[k][2] != b[k][2]]
    print(f"session 63's run: {len(a)} problems; session 64's: {len(b)}; both: {len(common)}")
    print(
        f"on the {len(common)}: defaults / stock, session 63 {gm([a[k][1] / a[k][0] for k in common]):.4f}, "
        f"session 64 {gm([b[k][1] / b[k][0] for k in common]):.4f}"
    )
    print(
        f"  session 64's defaults / session 63's (kernel time) {gm([b[k][1] / a[k][1] for k in common]):.4f}; "
        f"stock's, session 64 / session 63 {gm([b[k][0] / a[k][0] for k in common]):.4f}"
    )
    if changed:
        print(
            f"  the {len(changed)} whose kept count differs: session 64's defaults / session 63's "
            f"{gm([b[k][1] / a[k][1] for k in changed]):.4f}"
        )


if __name__ == "__main__":
    main()
