"""Compile one sweep kernel for sm_90 (H100/H200) on a machine without a GPU, with triton 3.6.

Diagnostic for benchmarks/compile-stall/README.md, not part of the package. Reads
/tmp/diag/choices.json (written by the snippet in that README: the problem, the 16 Triton configs
of highest compile cost and their launch constexprs) and compiles config IDX of set NAME through
``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))``; triton 3.6 is imported from
/tmp/t36 (``pip install --no-deps --target /tmp/t36 triton==3.6.0``). Watch ``ps`` for the
``ptxas`` child to see where the time goes.

    python compile_one_kernel.py stall 0
"""

import importlib.util
import json
import os
import sys
import time

sys.path.insert(0, "/tmp/t36")  # triton 3.6 (the GPU machines' version), not the local torch's

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

SWEEP_KERNELS = os.path.join(
    os.path.dirname(__file__), "../../packages/torch-diode-lib/src/torch_diode/collect/sweep_kernels.py"
)


def main() -> None:
    assert triton.__version__.startswith("3.6"), triton.__version__
    spec = importlib.util.spec_from_file_location("sweep_kernels", SWEEP_KERNELS)
    sk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sk)
    name, idx = sys.argv[1], int(sys.argv[2])
    d = json.load(open("/tmp/diag/choices.json"))[name]
    c = d["choices"][idx]
    cx = dict(d["cx"][idx])
    for k in ("ACC_TYPE", "INDEX_DTYPE"):
        cx[k] = getattr(tl, cx[k].split(".")[-1])
    fn = sk.sweep_bmm_kernel
    sig = {a: "*fp32" if a in ("A", "B", "C", "BIAS") else "constexpr" if a in cx else "i32" for a in fn.arg_names}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(4)}  # 16-byte aligned pointers, as launched
    src = ASTSource(fn, sig, constexprs=cx, attrs=attrs)
    os.environ["TRITON_CACHE_DIR"] = f"/tmp/diag/cache-{name}-{idx}"
    print(name, idx, c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], "s", c["num_stages"], "w", c["num_warps"],
          "K_LIT", cx.get("K_LIT"), flush=True)  # fmt: skip
    t0 = time.time()
    options = {"num_warps": c["num_warps"], "num_stages": c["num_stages"], "debug": False, "sanitize_overflow": False}
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
    print(f"compiled in {time.time() - t0:.1f} s", flush=True)
    print({x: getattr(kernel.metadata, x, None) for x in ("shared", "num_warps", "num_stages")})


if __name__ == "__main__":
    main()
