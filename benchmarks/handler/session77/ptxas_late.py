"""Session 77, rule 1 (PLAN.md): session 76's late-case check of ``check_ptxas`` on a real GPU.

Run from the repository root on the GPU machine, with the lib's ``src`` on ``PYTHONPATH`` and
``TRITON_PTXAS_PATH`` unset. In this one process, in order:

0. ``check_ptxas()`` before any compile (the early case: the workers' version against Triton's own);
1. a Triton kernel compiled and run (Triton reads its own ptxas's version), then
   ``TRITON_PTXAS_PATH`` set to torch's ``bin/ptxas``, as Inductor's one compile path sets it late:
   ``check_ptxas()`` (the late case: expected a mismatch where the versions differ, advising
   ``pin_ptxas()``);
2. ``pin_ptxas()``, then ``check_ptxas()`` (expected: agree; Triton remembers no version);
3. another kernel compiled and run, then ``check_ptxas()`` (expected: agree; Triton now remembers
   the variable's ptxas) and the version Triton remembers.

Prints one JSON object per step and a summary line; exits 1 where an expectation fails.
"""

from __future__ import annotations

import json
import os
import sys

import torch
import triton
import triton.language as tl

from torch_diode.inductor import ptxas


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, SCALE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + SCALE * y, mask=mask)


def run_kernel(scale: float) -> None:
    """Compile (a new SCALE: a new kernel) and run a kernel; check its output."""
    n = 10_000
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    _add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024, SCALE=scale)
    torch.cuda.synchronize()
    err = ((out - (x + scale * y)).norm() / (x + scale * y).norm()).item()
    assert err < 1e-6, f"kernel output wrong: relative error {err}"


def remembered() -> str | None:
    v = ptxas._remembered_version(ptxas.triton_arch(torch.cuda.get_device_capability()))
    return ptxas._release(v) if v is not None else None


def main() -> int:
    assert os.environ.get(ptxas.ENV) is None, f"run with {ptxas.ENV} unset"
    print(json.dumps({"torch": torch.__version__, "triton": triton.__version__, "gpu": torch.cuda.get_device_name()}))
    failures = []

    def step(name: str, check: ptxas.PtxasCheck, expect_mismatch: bool | None) -> None:
        d = {"step": name, **check.to_dict(), "triton_remembers": remembered()}
        print(json.dumps(d))
        if expect_mismatch is not None and check.mismatch != expect_mismatch:
            failures.append(f"{name}: mismatch={check.mismatch}, expected {expect_mismatch}")

    early = ptxas.check_ptxas()
    step("0 early, before any compile", early, None)
    differ = early.mismatch  # torch's ptxas and Triton's give different versions on this install
    run_kernel(1.0)
    torch_ptxas = ptxas.torch_bundled_ptxas()
    assert torch_ptxas is not None, "this torch has no bin/ptxas: the late case cannot arise"
    os.environ[ptxas.ENV] = str(torch_ptxas)
    step("1 late: compiled, then the variable set", ptxas.check_ptxas(), differ)
    pin = ptxas.pin_ptxas()
    print(json.dumps({"step": "2a pin_ptxas", **pin.to_dict()}))
    if not pin.pinned:
        failures.append(f"pin_ptxas did not pin: {pin.reason}")
    step("2b after pin_ptxas", ptxas.check_ptxas(), False)
    run_kernel(2.0)
    step("3 after another compile", ptxas.check_ptxas(), False)
    print(f"SUMMARY early mismatch={differ}; failures: {failures or 'none'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
