"""Compile one sweep kernel for sm_90 (H100/H200) on a machine without a GPU, with triton 3.6.

Diagnostic for benchmarks/compile-stall/README.md, not part of the package. Reads
/tmp/diag/choices.json (written by the snippet in that README: the problem, the 16 Triton configs
of highest compile cost and their launch constexprs) and compiles config IDX of set NAME through
``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))``; triton 3.6 is imported from
/tmp/t36 (``pip install --no-deps --target /tmp/t36 triton==3.6.0``). Watch ``ps`` for the
``ptxas`` child to see where the time goes.

    python compile_one_kernel.py stall 0
"""

import json, sys, time, os

sys.path.insert(0, "/tmp/t36")
sys.path.insert(1, "/work/main/packages/torch-diode-lib/src")
import triton, triton.language as tl
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget

assert triton.__version__.startswith("3.6"), triton.__version__
import importlib.util

spec = importlib.util.spec_from_file_location(
    "sk", "/work/main/packages/torch-diode-lib/src/torch_diode/collect/sweep_kernels.py"
)
sk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sk)
name, idx = sys.argv[1], int(sys.argv[2])
d = json.load(open("/tmp/diag/choices.json"))[name]
c = d["choices"][idx]
cx = dict(d["cx"][idx])
cx["ACC_TYPE"] = getattr(tl, cx["ACC_TYPE"].split(".")[-1])
cx["INDEX_DTYPE"] = getattr(tl, cx["INDEX_DTYPE"].split(".")[-1])
fn = sk.sweep_bmm_kernel
sig = {}
for a in fn.arg_names:
    if a in ("A", "B", "C", "BIAS"):
        sig[a] = "*fp32"
    elif a in cx:
        sig[a] = "constexpr"
    else:
        sig[a] = "i32"
attrs = {(i,): [["tt.divisibility", 16]] for i in range(4)}
src = ASTSource(fn, sig, constexprs={k: v for k, v in cx.items()}, attrs=attrs)
os.environ["TRITON_CACHE_DIR"] = f"/tmp/diag/cache-{name}-{idx}"
t0 = time.time()
print(
    name,
    idx,
    c["BLOCK_M"],
    c["BLOCK_N"],
    c["BLOCK_K"],
    "s",
    c["num_stages"],
    "w",
    c["num_warps"],
    "K_LIT",
    cx.get("K_LIT"),
    flush=True,
)
k = triton.compile(
    src,
    target=GPUTarget("cuda", 90, 32),
    options={"num_warps": c["num_warps"], "num_stages": c["num_stages"], "debug": False, "sanitize_overflow": False},
)
print(
    "compiled in %.1f s; regs %s spills %s"
    % (time.time() - t0, k.n_regs if hasattr(k, "n_regs") else "?", k.n_spills if hasattr(k, "n_spills") else "?"),
    flush=True,
)
md = k.metadata
print({x: getattr(md, x, None) for x in ("shared", "num_warps", "num_stages")})
