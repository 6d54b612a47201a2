#!/usr/bin/env python
"""Session 69, rule 5 (PLAN.md): do the configs the sweep recorded as giving wrong results give
wrong results in Inductor's own template too?

Each case is a problem of the committed H200 datasets and a Triton config the sweep collector
failed with ``wrong result: max error X of max |ref|`` (X in ``sweep``), compiled by Inductor
with that config alone (a choices handler keeping that one EXHAUSTIVE config: no benchmark), then
called and compared with eager; with a config the sweep timed on the same problem as a control.

    python benchmarks/handler/session69/wrong_result.py OUT.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from torch._inductor import config as inductor_config
from torch._inductor.choices import InductorChoices
from torch._inductor.utils import fresh_cache
from torch._inductor.virtualized import V

# (name, op, dtype, batch, m, n, k, a_col, b_col, (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps), sweep's error or None)
CASES = [
    ("mm-2039x61x4093-Acol", "mm", "float16", 1, 2039, 61, 4093, True, False, (256, 16, 256, 3, 2), 0.705),
    ("mm-2039x61x4093-Acol", "mm", "float16", 1, 2039, 61, 4093, True, False, (64, 32, 64, 3, 4), None),
    ("mm-319x637x321", "mm", "bfloat16", 1, 319, 637, 321, False, False, (256, 16, 256, 3, 2), 0.808),
    ("addmm-1x33921x1347-Bcol", "addmm", "float16", 1, 1, 33921, 1347, False, True, (16, 16, 128, 3, 1), 0.676),
    ("addmm-1x33921x1347-Bcol", "addmm", "float16", 1, 1, 33921, 1347, False, True, (16, 64, 128, 3, 4), None),
    ("addmm-251x4093x127", "addmm", "float16", 1, 251, 4093, 127, False, False, (128, 64, 16, 2, 2), 0.105),
    ("addmm-1021x61x127-Acol", "addmm", "bfloat16", 1, 1021, 61, 127, True, False, (128, 64, 32, 2, 2), 0.133),
    ("baddbmm-26x95x1691x123-Bcol", "baddbmm", "float16", 26, 95, 1691, 123, False, True, (128, 64, 32, 1, 2), 0.119),
]


class OneConfig(InductorChoices):
    """Keeps, of a GEMM's Triton candidates in the EXHAUSTIVE space, the one config ``want`` alone."""

    def __init__(self, want: tuple[int, int, int, int, int]) -> None:
        super().__init__()
        self.want = want
        self.found = 0

    def _finalize_template_configs(self, template_choices, kernel_inputs, templates, op_name, kwarg_overrides=None):  # type: ignore[no-untyped-def]
        out: list[Any] = []
        with inductor_config.patch(max_autotune_gemm_search_space="EXHAUSTIVE"):
            for t in templates:
                if not t.uid.startswith("triton"):
                    continue
                for ktc in self.get_ktc(kernel_inputs, t, op_name, (kwarg_overrides or {}).get(t.uid, {})):
                    kw = ktc.params.to_kwargs()
                    if (kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], kw["num_stages"], kw["num_warps"]) == self.want:
                        out.append(ktc)
                        break
        self.found += len(out)
        return out[:1]


def inputs(op: str, dtype: str, batch: int, m: int, n: int, k: int, a_col: bool, b_col: bool) -> tuple[Any, tuple]:
    dt = getattr(torch, dtype)
    pre = (batch,) if op in ("bmm", "baddbmm") else ()
    g = torch.Generator(device="cuda").manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, device="cuda").to(dt)

    a = rand(*pre, k, m).transpose(-1, -2) if a_col else rand(*pre, m, k)
    b = rand(*pre, n, k).transpose(-1, -2) if b_col else rand(*pre, k, n)
    a = a / k**0.5
    fn = {"mm": torch.mm, "bmm": torch.bmm, "addmm": torch.addmm, "baddbmm": torch.baddbmm}[op]
    return (fn, (rand(n), a, b)) if op in ("addmm", "baddbmm") else (fn, (a, b))


def main() -> int:
    rows = []
    for name, op, dtype, batch, m, n, k, a_col, b_col, want, sweep in CASES:
        fn, args = inputs(op, dtype, batch, m, n, k, a_col, b_col)
        handler = OneConfig(want)
        row: dict[str, Any] = {"case": name, "op": op, "dtype": dtype, "config": want, "sweep_error": sweep}
        torch._dynamo.reset()
        try:
            with fresh_cache(), V.set_choices_handler(handler):
                got = torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False)(*args)
                torch.cuda.synchronize()
            want_out = fn(*args).float()
            err = float((got.float() - want_out).abs().max()) / float(want_out.abs().max())
            row.update(found=handler.found, error_of_max_ref=err, exception=None)
        except Exception as e:
            row.update(found=handler.found, error_of_max_ref=None, exception=f"{type(e).__name__}: {e}"[:300])
        rows.append(row)
        print(json.dumps(row), flush=True)
    Path(sys.argv[1]).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
