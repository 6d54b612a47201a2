"""Session 56: means over seeds of ``session54/screen.py`` lines, each variant paired with a base
variant's lines of the same seeds (how many seeds it is better on).

    python benchmarks/models/session56/paired.py NVIDIA-H100 tw benchmarks/models/session54/screen-NVIDIA-H100.txt \
        benchmarks/models/session56/screen-NVIDIA-H100.txt
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict

LINE = re.compile(
    r"^(?P<key>\S+) seed (?P<seed>\d+) (?P<variant>\S+) .*val top-1 / stock (?P<top1>[\d.]+), regret@1 (?P<r1>[\d.]+), "
    r"regret@5 (?P<r5>[\d.]+) \(p95 (?P<p95>[\d.]+)\)"
)
FIGURES = ("top1", "r1", "r5", "p95")
HEADS = ("val top-1 / stock", "regret@1", "regret@5", "p95 regret@5")


def read(files: list[str], key: str) -> dict[str, dict[int, dict[str, float]]]:
    """``variant -> seed -> figure -> value`` of ``key``'s lines in ``files`` (a later line wins)."""
    out: dict[str, dict[int, dict[str, float]]] = defaultdict(dict)
    for f in files:
        for line in open(f):
            m = LINE.match(line)
            if m and m["key"] == key:
                out[m["variant"]][int(m["seed"])] = {k: float(m[k]) for k in FIGURES}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("key")
    ap.add_argument("base", help="the variant the others are paired with")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    runs = read(a.files, a.key)
    base = runs[a.base]
    print(f"{a.key}: means over seeds (in brackets: seeds better than {a.base}'s, of those both have)")
    print("| variant (seeds) | " + " | ".join(HEADS) + " |")
    print("|---" * (len(HEADS) + 1) + "|")
    for variant, seeds in sorted(runs.items(), key=lambda kv: (kv[0] != a.base, kv[0])):
        paired = variant != a.base
        both = [s for s in seeds if s in base]
        cells = []
        for k in FIGURES:
            cell = f"{sum(s[k] for s in seeds.values()) / len(seeds):.4f}"
            if paired:
                cell += f" ({sum(seeds[s][k] < base[s][k] for s in both)} of {len(both)})"
            cells.append(cell)
        if paired:  # the base's top-1 on the same seeds
            cells[0] += f" [{a.base} {sum(base[s]['top1'] for s in both) / len(both):.4f}]"
        print(f"| {variant} ({', '.join(map(str, sorted(seeds)))}) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
