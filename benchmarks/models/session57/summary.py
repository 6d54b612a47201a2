"""Session 57: means over seeds of ``forest_xfer.py score``'s lines (``scores-KEY.txt``), and per
variant how many seeds beat the same seed's ``base`` forest (same shortlist).

    python benchmarks/models/session57/summary.py benchmarks/models/session57/scores-NVIDIA-H100.txt
"""

from __future__ import annotations

import math
import re
import sys
from collections import defaultdict

LINE = re.compile(
    r"^(?P<key>\S+) seeds? (?P<seed>\[[^\]]*\]|\d+) (?P<variant>\S+)(?: \(shortlist (?P<short>\d+)(?:, blend (?P<blend>[\d.]+))?\))?: "
    r"val top-1 / stock (?P<t1>[\d.]+), regret@1 (?P<r1>[\d.]+), regret@5 (?P<r5>[\d.]+) \(p95 (?P<p95>[\d.]+)\)"
)
NAMES = ("t1", "r1", "r5", "p95")


def main() -> None:
    runs: dict[tuple[str, str], dict[str, dict[str, float]]] = defaultdict(dict)
    for line in open(sys.argv[1]):
        m = LINE.match(line.strip())
        if m is None:
            continue
        short = (m["short"] or "512") + (f", blend {m['blend']}" if m["blend"] else "")
        variant, seed = m["variant"], m["seed"]
        if seed.startswith("["):  # a bag of those seeds' forests: one model
            variant, seed = f"{variant} of seeds {seed[1:-1].replace(' ', '')}", "-"
        runs[(variant, short)][seed] = {n: float(m[n]) for n in NAMES}
    print("variant (shortlist): seeds | top-1/stock | regret@1 | regret@5 | p95 regret@5 | top-1 better than base's")
    for (variant, short), by_seed in runs.items():
        seeds = sorted(by_seed)
        mean = {n: math.exp(sum(math.log(by_seed[s][n]) for s in seeds) / len(seeds)) for n in NAMES}
        base = runs.get(("base", short.split(",")[0]), {})
        paired = [s for s in seeds if s in base]
        wins = sum(by_seed[s]["t1"] < base[s]["t1"] for s in paired)
        vs = f"{wins} of {len(paired)}" if paired and variant != "base" else "-"
        print(
            f"{variant} ({short}): {','.join(seeds)} | {mean['t1']:.4f} | {mean['r1']:.4f} | {mean['r5']:.4f} | "
            f"{mean['p95']:.4f} | {vs}"
        )


if __name__ == "__main__":
    main()
