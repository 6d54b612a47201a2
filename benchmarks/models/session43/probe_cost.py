"""What a compile-time probe of cuBLAS's kernel choice would cost: for a few GEMMs, the time to
allocate the operands, run the ATen op once (warm-up, cuBLAS's heuristic), and run it once more
under torch.profiler (CUDA activity) to read the kernel names; the first profiled call of the
process pays the profiler's start-up. CUDA is initialised first, as it is in a compile.

    python benchmarks/models/session43/probe_cost.py
"""

import time

import torch
from torch.profiler import ProfilerActivity, profile

GEMMS = [  # (name, m, n, k, dtype, B transposed)
    ("llm_qkv_prefill", 2048, 12288, 4096, torch.bfloat16, True),
    ("llm_decode_m16", 16, 4096, 4096, torch.bfloat16, True),
    ("odd_small", 127, 255, 383, torch.float16, False),
    ("fp32_square", 1024, 1024, 1024, torch.float32, False),
    ("odd_mm", 1000, 1000, 1000, torch.float16, False),
]

torch.zeros(1, device="cuda")
torch.cuda.synchronize()
for rnd in range(2):
    for name, m, n, k, dt, bt in GEMMS:
        t0 = time.perf_counter()
        a = torch.randn(m, k, device="cuda", dtype=dt)
        b = torch.randn(n, k, device="cuda", dtype=dt).t() if bt else torch.randn(k, n, device="cuda", dtype=dt)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        torch.mm(a, b)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch.mm(a, b)
            torch.cuda.synchronize()
        names = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
        t3 = time.perf_counter()
        print(
            f"round {rnd} {name:16s} alloc {1e3 * (t1 - t0):7.1f} ms  warm-up call {1e3 * (t2 - t1):7.1f} ms  "
            f"profiled call {1e3 * (t3 - t2):7.1f} ms  {names[0][:70] if names else '-'}"
        )
