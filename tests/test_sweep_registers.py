"""The sweep's literal-size kernels are Inductor's kernels down to register allocation (no GPU).

Compiles, for sm_90 with the installed triton, a template kernel Inductor 2.11 generated (from the
committed tarball, its literals rewritten for the problem) and the sweep kernel with
``literal_sizes``, and compares registers and spill bytes reported by triton's ptxas. The run-time
size variant (``literal_sizes=False``) differs for configs like this one (fp32, literal K loop:
Inductor's kernel spills): ``benchmarks/fidelity/NVIDIA-H100/register_compare.json``.
"""

from __future__ import annotations

import importlib.util
import sys
import tarfile
from pathlib import Path

import pytest

from torch_diode.records import Problem

REPO = Path(__file__).resolve().parents[1]
TARBALL = REPO / "benchmarks" / "fidelity" / "NVIDIA-H100" / "inductor_kernels_torch2.11.tar.gz"

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton (a lib dependency)")


@pytest.mark.parametrize(
    ("problem", "config"),
    [
        (Problem(op="bmm", m=1024, n=1024, k=512, batch=8, dtype="float32"), (64, 128, 64, 3, 4)),
        (Problem(op="mm", m=3000, n=5000, k=3001, dtype="bfloat16"), (128, 64, 32, 3, 4)),
    ],
    ids=["bmm-fp32-spilling", "mm-bf16-odd"],
)
def test_literal_sweep_kernel_has_inductors_registers(tmp_path: Path, problem: Problem, config: tuple) -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from sweep_ptx_compare import _parse_inductor_kernel
        from sweep_register_compare import BASE, compile_case
    finally:
        sys.path.remove(str(REPO / "scripts"))
    with tarfile.open(TARBALL) as tar:
        tar.extractall(tmp_path, filter="data")
    files = sorted((tmp_path / "gen" / BASE[problem.op]).glob("*.py"))
    base = next(f for f in files if _parse_inductor_kernel(f) is not None)
    row = compile_case(base, problem, config, revision=211)
    ind, lit = row["inductor"], row["sweep_literal"]
    assert ind["registers"] is not None and ind["spill_store_bytes"] is not None, row
    assert (lit["registers"], lit["spill_store_bytes"], lit["shared"]) == (
        ind["registers"],
        ind["spill_store_bytes"],
        ind["shared"],
    ), row
