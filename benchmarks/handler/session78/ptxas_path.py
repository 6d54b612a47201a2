"""Session 78, rule 1 (PLAN.md): which Inductor compile path sets ``TRITON_PTXAS_PATH`` in the
main process (torch 2.11 on the GPU machine).

Reading torch's source (2.13 on the dev CPU; the same function in 2.11's, found by search):
``_set_triton_ptxas_path()`` runs in Inductor's compile workers at start, and in the main
process only in ``AsyncCompile.triton``'s in-process branch (a kernel of the compiled graph's
output code compiled in the main process: the worker pool not ready yet, or one compile thread).
If so: a compile whose output code has a Triton kernel sets it; one whose output code has none
(a max-autotune GEMM that ATen wins, session 77's lambda) does not; a one-thread compile does.

``python ptxas_path.py`` runs each variant in a new process (the variable unset) and prints one
JSON object per variant: the variable after the compile, the version Triton remembers, whether
the output code had a Triton kernel (Inductor's counters).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

VARIANTS = {
    "pointwise": "default mode, (x * 2).relu() (a Triton kernel in the output code)",
    "pointwise-1thread": "the same with TORCHINDUCTOR_COMPILE_THREADS=1",
    "mm-max-autotune": "max-autotune-no-cudagraphs, x @ y (fp16 1024^3; ATen or a Triton template wins)",
    "mm-relu-max-autotune": "max-autotune-no-cudagraphs, (x @ y).relu() + 1 (an epilogue)",
}


def one(variant: str) -> None:
    import torch
    from torch._dynamo.utils import counters

    from torch_diode.inductor import ptxas

    assert os.environ.get(ptxas.ENV) is None
    arch = ptxas.triton_arch(torch.cuda.get_device_capability())
    x = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    y = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    if variant.startswith("pointwise"):
        fn, mode = (lambda a, b: (a * 2).relu()), "default"
    elif variant == "mm-max-autotune":
        fn, mode = (lambda a, b: a @ b), "max-autotune-no-cudagraphs"
    else:
        fn, mode = (lambda a, b: (a @ b).relu() + 1), "max-autotune-no-cudagraphs"
    torch.compile(fn, mode=mode, dynamic=False)(x, y)
    torch.cuda.synchronize()
    v = ptxas._remembered_version(arch)
    print(
        json.dumps(
            {
                "variant": variant,
                "what": VARIANTS[variant],
                "variable_after": os.environ.get(ptxas.ENV),
                "triton_remembers": ptxas._release(v) if v else None,
                "inductor_counters": {k: v for k, v in counters["inductor"].items() if "compile" in k or "triton" in k},
            }
        ),
        flush=True,
    )


def main() -> int:
    if len(sys.argv) > 1:
        one(sys.argv[1])
        return 0
    bad = 0
    for variant in VARIANTS:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_PTXAS_PATH"}
        if variant.endswith("1thread"):
            env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
        r = subprocess.run([sys.executable, __file__, variant], env=env, capture_output=True, text=True, timeout=240)
        print(r.stdout.strip() or f"{variant}: exit {r.returncode}\n{r.stderr[-2000:]}", flush=True)
        bad += r.returncode != 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
