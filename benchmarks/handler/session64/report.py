"""Session 64's compile-time breakdown from ``profile_compile.py``'s ``profile.json``: per cold
compile, its seconds, the choices kept, and Inductor's own phase timers (autotuning = the
benchmark of the kept choices, precompiling = compiling them for it, async_compile.wait = the
final kernels' compile), the rest being everything else (tracing, lowering, the handler). Stock's number of choices is
read from the run's ``profile.log.gz`` beside the JSON.

    python benchmarks/handler/session64/report.py benchmarks/handler/NVIDIA-H200/session64/call2/profile.json.gz
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

PHASES = {
    "autotune": re.compile(r"^\w+_template_autotuning$"),
    "precompile": re.compile(r"^\w+_template_precompiling$"),
    "final": re.compile(r"^async_compile\.wait$"),
}


def phases(text: str) -> dict[str, float]:
    out = dict.fromkeys(PHASES, 0.0)
    for line in text.splitlines():
        m = re.match(r"^(\S.*?)\s{2,}([\d.]+)\s*$", line)
        if m:
            for key, pat in PHASES.items():
                if pat.match(m.group(1)):
                    out[key] += float(m.group(2))
    return out


def main() -> int:
    path = Path(sys.argv[1])
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    rows = [r for r in json.loads(raw)["rows"] if not r["profiled"]]
    stock_n = stock_choices(path.with_name("profile.log.gz"))
    print(
        "| problem | setting | choices kept | compile s | autotuning s | per choice s | precompiling s | final kernels s | rest s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ph = phases(r["inductor_compile_times"])
        kept = r.get("diode", {}).get("candidates_kept")
        n = kept if kept is not None else stock_n[r["problem"]]
        rest = r["compile_s"] - sum(ph.values())
        per = f"{ph['autotune'] / n:.3f}" if n and ph["autotune"] else "-"
        print(
            f"| {r['problem']} | {r['setting']} | {kept if kept is not None else f'{n} (stock)'} | {r['compile_s']:.2f} "
            f"| {ph['autotune']:.2f} | {per} | {ph['precompile']:.2f} | {ph['final']:.2f} | {rest:.2f} |"
        )
    return 0


def stock_choices(log: Path) -> dict[str, int]:
    """Per problem, how many choices stock max-autotune benchmarked: the ``... for N choices`` line
    of Inductor's AUTOTUNE log that comes last before the run's ``PROBLEM stock time`` line."""
    out: dict[str, int] = {}
    last = None
    for line in gzip.decompress(log.read_bytes()).decode().splitlines():
        m = re.search(r"AUTOTUNE benchmarking takes .* for (\d+) choices", line)
        if m:
            last = int(m.group(1))
        parts = line.split()
        if len(parts) >= 3 and parts[1:3] == ["stock", "time"] and last is not None:
            out[parts[0]] = last
    return out


if __name__ == "__main__":
    raise SystemExit(main())
