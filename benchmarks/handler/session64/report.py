"""Session 64's compile-time breakdown from ``profile_compile.py``'s ``profile.json``: per cold
compile, its seconds, the choices kept, and Inductor's own phase timers (autotuning = the
benchmark of the kept choices, precompiling = compiling them for it, async_compile.wait = the
final kernels' compile), the rest being everything else (tracing, lowering, the handler).

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
    print(
        "| problem | setting | choices kept | compile s | autotuning s | per choice s | precompiling s | final kernels s | rest s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ph = phases(r["inductor_compile_times"])
        kept = r.get("diode", {}).get("candidates_kept")
        n = kept if kept is not None else _stock_choices(r)
        rest = r["compile_s"] - sum(ph.values())
        per = f"{ph['autotune'] / n:.3f}" if n and ph["autotune"] else "-"
        print(
            f"| {r['problem']} | {r['setting']} | {kept if kept is not None else f'{n} (stock)'} | {r['compile_s']:.2f} "
            f"| {ph['autotune']:.2f} | {per} | {ph['precompile']:.2f} | {ph['final']:.2f} | {rest:.2f} |"
        )
    return 0


STOCK_CHOICES = {"llm_lm_head": 20, "odd_small": 21, "resnet_im2col": 20, "vit_b_mlp": 22}  # from the run's log


def _stock_choices(row: dict) -> int:
    return STOCK_CHOICES[row["problem"]]


if __name__ == "__main__":
    raise SystemExit(main())
