"""Session 71, rule 4: ``min_num_warps=4`` on GEMMs whose every Triton config has one warp
(Inductor clamps small tiles' warps), where the option keeps ATen alone with the default GEMM
backends and, with ``TRITON`` alone, has to keep every config (``min_num_warps_unmet``).

Each case compiled cold with the handler (``max-autotune-no-cudagraphs``) and checked against a
float64 reference as ``check_handler_gpu.py --mode fusion`` checks (within 4x eager's error plus
1e-4 of the reference's largest magnitude), with the handler's stats:

    python benchmarks/handler/session71/tiny_check.py MODEL OUT.json
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "scripts"))

from check_handler_gpu import (  # noqa: E402
    GemmProblem,
    accuracy_row,
    backends_patch,
    cold_compile_state,
    make_args,
    run_checked_cases,
    warm_up_compile,
)

TINY = [
    GemmProblem("mm-8x8x64", "mm", 8, 8, 64),
    GemmProblem("mm-1x16x64-bf16", "mm", 1, 16, 64, dtype="bfloat16"),
    GemmProblem("addmm-8x8x64", "addmm", 8, 8, 64),
    GemmProblem("bmm-3x4x8x32", "bmm", 4, 8, 32, batch=3),
    GemmProblem("mm-32x32x64", "mm", 32, 32, 64),  # one-, two- and four-warp configs
]


def main() -> int:
    from torch_diode.bench.measure import compile_for, environment
    from torch_diode.inductor import install_diode_choices

    model, out = sys.argv[1], Path(sys.argv[2])
    warm_up_compile()

    def check(row: dict[str, Any], p: GemmProblem) -> None:
        from torch._inductor import config as inductor_config

        fn, args = make_args(p)
        with cold_compile_state(), inductor_config.patch(backends_patch(row["backends"])):
            row.update(accuracy_row(fn, args, compile_for("max-autotune", fn)))

    def describe(row: dict[str, Any]) -> str:
        d = row["diode"] if "diode" in row else {}
        return (
            f"err {row.get('max_abs_err', math.nan):.3g} (eager {row.get('eager_max_abs_err', math.nan):.3g})"
            f" {d.get('few_warps_skipped', '')} {d.get('min_num_warps_unmet', '')}"
        )

    cases = [
        (f"{p.name}-{backends}", {"backends": backends, "problem": p.describe()}, lambda row, p=p: check(row, p))
        for p in TINY
        for backends in ("default", "TRITON")
    ]
    with install_diode_choices(model=model, min_num_warps=4) as handle:
        rows = run_checked_cases(handle, cases, describe)
    out.write_text(json.dumps({"environment": environment(), "model": model, "rows": rows}, indent=1))
    print(f"{sum(r['ok'] for r in rows)} of {len(rows)} cases pass; wrote {out}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
