#!/usr/bin/env python
"""Session 69, rule 4 (PLAN.md): the problems of ``smem-guard-problems.json`` (found on the dev CPU:
where the handler, with the shipped file named, keeps one Triton config alone that is not sure to fit
in shared memory), each compiled cold on the GPU with torch-diode's handler, with the shared-memory
guard as committed (``guard``) or with ``fits_shared_memory`` answering True for everything
(``no-guard``: the selection before the guard), and called once; compared with eager.

    python benchmarks/handler/session69/smem_guard.py guard|no-guard OUT.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch._inductor.utils import fresh_cache

import torch_diode.inductor.choices as choices
from torch_diode.inductor import install_diode_choices

HERE = Path(__file__).resolve().parent


def inputs(p: dict) -> tuple:
    dt = getattr(torch, p["dtype"])
    pre = (p["batch"],) if p["op"] in ("bmm", "baddbmm") else ()
    m, n, k = p["m"], p["n"], p["k"]
    a = (
        torch.randn(*pre, k, m, device="cuda", dtype=dt).transpose(-1, -2)
        if p["ta"]
        else torch.randn(*pre, m, k, device="cuda", dtype=dt)
    )
    b = (
        torch.randn(*pre, n, k, device="cuda", dtype=dt).transpose(-1, -2)
        if p["tb"]
        else torch.randn(*pre, k, n, device="cuda", dtype=dt)
    )
    a, b = a / k**0.5, b
    fn = {"mm": torch.mm, "bmm": torch.bmm, "addmm": torch.addmm, "baddbmm": torch.baddbmm}[p["op"]]
    if p["op"] in ("addmm", "baddbmm"):
        return fn, (torch.randn(n, device="cuda", dtype=dt), a, b)
    return fn, (a, b)


def main() -> int:
    mode, out = sys.argv[1], Path(sys.argv[2])
    if mode == "no-guard":
        choices.fits_shared_memory = lambda problem, choice, limit: True
    rows = []
    for p in json.loads((HERE / "smem-guard-problems.json").read_text()):
        fn, args = inputs(p)
        row = {**p, "mode": mode}
        with install_diode_choices(model=p["model"]) as handle:
            torch._dynamo.reset()
            with fresh_cache():
                try:
                    got = torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False)(*args)
                    torch.cuda.synchronize()
                    want = fn(*args)
                    err = float((got.float() - want.float()).abs().max())
                    row.update(ok=err <= 3e-2 + 3e-2 * float(want.float().abs().max()), max_abs_err=err, error=None)
                except Exception as e:  # the failure this rule looks for
                    row.update(ok=False, max_abs_err=None, error=f"{type(e).__name__}: {e}"[:400])
            s = handle.get_stats()
            row["stats"] = {
                k: s[k] for k in ("candidates_kept", "single_choice", "shared_memory_guard", "fallbacks_total")
            }
        rows.append(row)
        print(
            f"{mode:<8} {'ok  ' if row['ok'] else 'FAIL'} {p['model']:<20} {p['op']} {p['dtype']} {p['batch']}x{p['m']}x{p['n']}x{p['k']} "
            f"ta={p['ta']} tb={p['tb']} kept {row['stats']['candidates_kept']} guard {row['stats']['shared_memory_guard']} "
            f"err {row['max_abs_err']} {row['error'] or ''}",
            flush=True,
        )
    out.write_text(json.dumps(rows, indent=1))
    print(f"{mode}: {sum(r['ok'] for r in rows)} of {len(rows)} ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
