#!/usr/bin/env python
"""GPU check of torch-diode's choices handler: correctness, and compile/kernel time against stock.

Correctness: every op (mm, addmm, bmm, baddbmm, nn.Linear) x dtype (fp16, bf16, fp32) x layout
case (K = 1001, not divisible by any BLOCK_K; transposed operands; non-contiguous slices), batch
sizes 1 and 3 for the batched ops, compiled with ``mode="max-autotune-no-cudagraphs"`` and the
handler installed, compared with eager within the dtype's tolerance. Each case also records
whether the handler really chose among Triton configs (``exercised``).

Speed: for each problem of ``SPEED_PROBLEMS`` (LLM and vision layers, small and odd shapes), a
cold compile of one GEMM under ``mode="max-autotune-no-cudagraphs"``, stock and with torch-diode
(alternating), each in a new process with new, empty Inductor and Triton cache folders after a
warm-up compile there (``torch_diode.bench.isolate``: in one long process, compiles that benchmark
several choices took longer after the first), then the kernel time of each compiled function
(in its process) and of eager ATen, by CUDA events over replays of a CUDA graph holding
``--graph-iters`` calls. Prints a table and writes everything to ``--output``. With
``--after-pool S`` each measured compile waits first (up to S s) for Inductor's compile-worker
pool, as a long compile's later GEMMs find it (``torch_diode.bench.measure.wait_for_compile_workers``:
where the workers and this process key Triton's cache with different ptxas versions, stock's
benchmarked kernels are then compiled twice; ``torch_diode.inductor.ptxas``).

    python scripts/check_handler_gpu.py --model NVIDIA-H100-matmul --output handler_gpu.json
    python scripts/check_handler_gpu.py --model m.safetensors --mode speed --problems llm_mlp_up,odd_mm
    python scripts/check_handler_gpu.py --model m.safetensors --mode speed --after-pool 120   # later GEMMs
    python scripts/check_handler_gpu.py --list        # the problems and cases, no GPU needed
    python scripts/check_handler_gpu.py --model m.safetensors --mode speed \
        --variant 'short={"aten_alone_below_us": 50}'  # also compiled with other handler options, same run

Dynamic shapes (``--mode dynamic``, not part of ``all``): each correctness op x dtype, with the
default GEMM backends and with ``TRITON`` alone (a Triton kernel certain to be what runs), compiled
once with ``dynamic=True`` (a case passes only as one graph for every size), its first call's sizes being the hints Inductor and the handler choose
kernels at, then called at the other sizes of ``DYNAMIC_SIZES`` with the same kernels (K = 1001
and 77 after a hint of K = 1024, which every BLOCK_K divides: a config whose ``EVEN_K`` were read
from the hint would skip the K tail) and compared with eager; and the LLM and linear layers of
``DYNAMIC_SPEED_PROBLEMS`` compiled cold once each (in a new process, as the speed check does),
stock and with torch-diode, with M (tokens) dynamic from its first call at the problem's M, then
timed at every M of ``DYNAMIC_M``.

    python scripts/check_handler_gpu.py --model NVIDIA-H200-matmul --mode dynamic --output dyn.json

Fusions (``--mode fusion``, not part of ``all``): GEMMs whose Triton templates Inductor fuses
pointwise work into (``FUSION_PATTERNS``: bias + ReLU, linear + GELU, SwiGLU, a residual add, a
scaled A operand: epilogues and a prologue) at odd sizes (K = 1001), in fp16, bf16 and fp32, with
Inductor's default GEMM backends and with ``TRITON`` alone (so a Triton template, and its fusion,
is certain to be picked), and the benchmark suite's five modules (Llama decoder blocks at prefill
and decode, ViT blocks), each compiled with the handler. Against a float64 reference, a compiled
result passes when its largest error is at most 4x eager's in the same dtype plus 1e-4 of the
reference's largest magnitude (a wrong kernel is off by far more; summation orders differ by less).

    python scripts/check_handler_gpu.py --model NVIDIA-H200-matmul --mode fusion --output fusion.json

Training (``--mode training``, not part of ``all``): a two-layer MLP at odd sizes (fp16, bf16,
fp32) and the suite's Llama-3.2-1B prefill and ViT-B/16 blocks (bf16), compiled with the handler,
forward and backward (the backward's GEMMs, on transposed operands, go through the handler too);
the loss's gradient with respect to the input and every parameter against a float64 reference,
each tensor passing as in ``--mode fusion``.

    python scripts/check_handler_gpu.py --model NVIDIA-H200-matmul --mode training --output training.json

``--variant NAME=JSON`` (repeatable) compiles each speed problem once more per variant, with the
handler's options changed by the JSON object, right after the ``diode`` compile (``diode:NAME``
columns; the summary gives each variant's kernel time over ``diode``'s).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import sys
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# cold_compile_state: new cache folders and compile workers per compile in one process (fresh_caches),
# or, in a new process whose folders are new already (isolated_compile), a dynamo reset only
from torch_diode.bench.measure import cold_compile_state, compile_for, environment, first_call_s, kernel_times_us


@dataclass(frozen=True)
class GemmProblem:
    name: str
    op: str  # mm | addmm | bmm | baddbmm
    m: int
    n: int
    k: int
    batch: int = 1
    dtype: str = "float16"
    transpose_b: bool = False  # B as the transpose of a row-major [N, K] weight (nn.Linear)

    def describe(self) -> str:
        b = f"{self.batch}x" if self.op in ("bmm", "baddbmm") else ""
        t = " B^T" if self.transpose_b else ""
        return f"{self.op} {self.dtype} {b}{self.m}x{self.n}x{self.k}{t}"


SPEED_PROBLEMS: list[GemmProblem] = [
    GemmProblem("llm_qkv_prefill", "mm", 2048, 12288, 4096, dtype="bfloat16", transpose_b=True),
    GemmProblem("llm_mlp_up", "mm", 2048, 11008, 4096, dtype="bfloat16", transpose_b=True),
    GemmProblem("llm_mlp_down", "mm", 2048, 4096, 11008, dtype="bfloat16", transpose_b=True),
    GemmProblem("llm_decode_m16", "mm", 16, 4096, 4096, dtype="bfloat16", transpose_b=True),
    GemmProblem("llm_lm_head", "mm", 512, 32000, 4096, dtype="bfloat16", transpose_b=True),
    GemmProblem("linear_bias_8k", "addmm", 8192, 1024, 1024, transpose_b=True),
    GemmProblem("vit_b_mlp", "addmm", 6304, 3072, 768, transpose_b=True),
    GemmProblem("vit_b_proj", "addmm", 6304, 768, 768, transpose_b=True),
    GemmProblem("bert_attn_scores", "bmm", 384, 384, 64, batch=96),
    GemmProblem("bert_attn_values", "bmm", 384, 64, 384, batch=96),
    GemmProblem("attn_baddbmm", "baddbmm", 512, 512, 64, batch=32),
    GemmProblem("resnet_im2col", "mm", 50176, 64, 576),
    GemmProblem("odd_mm", "mm", 1000, 1000, 1000),
    GemmProblem("odd_small", "mm", 127, 255, 383),
    GemmProblem("fp32_square", "mm", 1024, 1024, 1024, dtype="float32"),
]

#: (M, N, K, batch) of a dynamic-shape case's calls, in order; the first is the compile's hint.
#: No size is 1 (a size of 1 is specialised: another graph). nn.Linear's N and K are its weight's
#: (80 and 1024): only its M varies, as rows of a [batch, M, K] input.
DYNAMIC_SIZES = ((96, 80, 1024, 3), (200, 136, 1001, 5), (1000, 64, 77, 2), (7, 300, 4096, 2))
#: The speed problems whose M (tokens, rows) is made dynamic, and the Ms they are timed at (after
#: the compile's first call at the problem's own M).
DYNAMIC_SPEED_PROBLEMS = ("llm_qkv_prefill", "llm_mlp_up", "llm_mlp_down", "llm_lm_head", "linear_bias_8k", "vit_b_mlp")
DYNAMIC_M = (16, 333, 2048, 8192)

#: Pointwise work fused into a GEMM's Triton template (epilogues, one prologue), at (M, N, K) = FUSION_SIZES.
FUSION_PATTERNS = ("relu_addmm", "gelu_linear", "swiglu", "residual", "scaled_prologue")
FUSION_SIZES = (200, 136, 1001)

CORRECTNESS_OPS = ("mm", "addmm", "bmm", "baddbmm", "linear")
CORRECTNESS_DTYPES = ("float16", "bfloat16", "float32")
CORRECTNESS_CASES = ("odd_k", "transposed", "noncontiguous")
#: (rtol, atol) per dtype for outputs of magnitude ~1 (inputs scaled by 1/sqrt(K)).
TOLERANCE = {"float16": (1e-2, 1e-2), "bfloat16": (3e-2, 3e-2), "float32": (1e-4, 1e-4)}


# -- inputs -------------------------------------------------------------------------------------


def make_args(
    p: GemmProblem, *, case: str = "contiguous", seed: int = 0, device: str = "cuda"
) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """The eager function of ``p`` and its arguments on ``device``, in the given layout case."""
    import torch

    g = torch.Generator(device=device).manual_seed(seed)
    dt = getattr(torch, p.dtype)
    scale = 1.0 / math.sqrt(p.k)
    pre = (p.batch,) if p.op in ("bmm", "baddbmm") else ()

    def rand(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, device=device) * scale).to(dt)

    if case == "transposed" or (case == "contiguous" and p.transpose_b):
        a = rand(*pre, p.k, p.m).transpose(-1, -2) if case == "transposed" else rand(*pre, p.m, p.k)
        b = rand(*pre, p.n, p.k).transpose(-1, -2)
    elif case == "noncontiguous":
        a = rand(*pre, p.m, 2 * p.k)[..., ::2]  # stride 2 along K
        b = rand(*pre, p.k, p.n + 7)[..., : p.n]  # padded rows
    else:
        a, b = rand(*pre, p.m, p.k), rand(*pre, p.k, p.n)
    if p.op == "mm":
        return torch.mm, (a, b)
    if p.op == "bmm":
        return torch.bmm, (a, b)
    if p.op == "addmm":
        return torch.addmm, (rand(p.n), a, b)
    return torch.baddbmm, (rand(*pre, p.m, p.n), a, b)


def correctness_cases() -> list[tuple[str, GemmProblem, str]]:
    out = []
    for op in CORRECTNESS_OPS:
        for dtype in CORRECTNESS_DTYPES:
            for case in CORRECTNESS_CASES:
                batches = (1, 3) if op in ("bmm", "baddbmm") else (1,)
                for batch in batches:
                    name = f"{op}-{dtype}-{case}" + (f"-b{batch}" if op in ("bmm", "baddbmm") else "")
                    p = GemmProblem(name, "addmm" if op == "linear" else op, 96, 80, 1001, batch=batch, dtype=dtype)
                    out.append((op, p, case))
    return out


# -- measurement helpers ------------------------------------------------------------------------


def warm_up_compile(*, fresh_caches: bool = True) -> None:
    """One cold max-autotune compile of a small mm, so that no measured compile pays Inductor's
    start-up (and, in a new process, ``fresh_caches=False``, its compile workers'; in one process
    each measured compile's cold state starts them again)."""
    warm_fn, warm_args = make_args(GemmProblem("warmup", "mm", 256, 256, 256))
    with cold_compile_state(fresh_caches=fresh_caches):
        compile_for("max-autotune", warm_fn)(*warm_args)


def kernel_time_us(fn: Callable[..., Any], args: tuple[Any, ...], *, graph_iters: int, reps: int) -> float:
    """Median time per call, from CUDA events around replays of a CUDA graph of ``graph_iters`` calls."""
    return statistics.median(kernel_times_us(fn, args, graph_iters=graph_iters, reps=reps))


def stats_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "calls",
        "gemm_calls",
        "model_selections",
        "lut_hits",
        "decision_cache_hits",
        "candidates_seen",
        "candidates_kept",
        "aten_kept",
        "single_choice",
        "shared_memory_guard",
        "compile_cost_skipped",
        "few_warps_skipped",
        "min_num_warps_unmet",
    )
    d: dict[str, Any] = {k: after.get(k, 0) - before.get(k, 0) for k in keys}
    d["fallbacks"] = {
        k: v - before["fallbacks"].get(k, 0) for k, v in after["fallbacks"].items() if v - before["fallbacks"].get(k, 0)
    }
    d["hook_ms"] = round(1e3 * (after["hook_time_s"] - before["hook_time_s"]), 2)
    return d


# -- the two checks -----------------------------------------------------------------------------


def run_correctness(
    handle: Any, cases: list[tuple[str, GemmProblem, str]], *, device: str = "cuda"
) -> list[dict[str, Any]]:
    """Each (op, problem, layout) compiled cold with max-autotune and compared with eager within
    the dtype's ``TOLERANCE`` (``run_checked_cases``)."""
    import torch

    def case(op: str, p: GemmProblem, layout: str) -> tuple[str, dict[str, Any], Callable[[dict[str, Any]], None]]:
        rtol, atol = TOLERANCE[p.dtype]

        def check(row: dict[str, Any]) -> None:
            fn, args = make_args(p, case=layout, device=device)
            if op == "linear":
                lin = torch.nn.Linear(p.k, p.n, device=device, dtype=getattr(torch, p.dtype))
                x = args[1]
                if layout == "noncontiguous":
                    x = x.unsqueeze(0).expand(2, -1, -1)  # a 3-D input with a zero batch stride
                fn, args = lin, (x,)
            with cold_compile_state():
                compiled = compile_for("max-autotune", fn)
                with torch.no_grad():
                    got, want = compiled(*args), fn(*args)
            err = (got.float() - want.float()).abs()
            row.update(ok=bool((err <= atol + rtol * want.float().abs()).all()), max_abs_err=float(err.max()))

        fields = {
            "op": op,
            "dtype": p.dtype,
            "layout": layout,
            "batch": p.batch,
            "max_abs_err": None,
            "rtol": rtol,
            "atol": atol,
        }
        return p.name, fields, check

    return run_checked_cases(handle, [case(*c) for c in cases], lambda row: f"err {row['max_abs_err']!s:<24}")


def compile_and_time(
    model: str,
    options: dict[str, Any] | None,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    graph_iters: int,
    reps: int,
    kernel_digits: int = 2,
    fresh_caches: bool = True,
) -> dict[str, Any]:
    """One cold ``max-autotune`` compile of ``fn`` (stock Inductor when ``options`` is None, else
    with torch-diode's handler installed with those options) and its kernel time: ``compile_s``
    (the first call), ``diode`` (the handler's stats over the compile), ``kernel_us`` (rounded to
    ``kernel_digits``), in that order; ``error`` instead of what a failure left unmeasured."""
    out: dict[str, Any] = {}
    try:
        with contextlib.ExitStack() as stack:
            handle = _enter_handler(stack, model, options)
            before = handle.get_stats() if handle else None
            stack.enter_context(cold_compile_state(fresh_caches=fresh_caches))
            compiled = compile_for("max-autotune", fn)
            out["compile_s"] = round(first_call_s(compiled, args), 3)
            if handle is not None:
                out["diode"] = stats_delta(before, handle.get_stats())
            out["kernel_us"] = round(kernel_time_us(compiled, args, graph_iters=graph_iters, reps=reps), kernel_digits)
    except Exception as e:  # reported with the result; the caller's other compiles go on
        traceback.print_exc()  # into the measuring process's output, logged with the error
        out["error"] = f"{type(e).__name__}: {e}"[:500]
    return out


def _enter_handler(stack: contextlib.ExitStack, model: str, options: dict[str, Any] | None) -> Any:
    """torch-diode's handler with ``options`` for the rest of ``stack`` (its handle), or stock
    Inductor when ``options`` is None (any handler installed, by the torch-diode meta-wheel's
    auto-registration too, taken out: None)."""
    from torch_diode.inductor import install_diode_choices, stock_inductor

    if options is None:
        stack.enter_context(stock_inductor())
        return None
    return stack.enter_context(install_diode_choices(model=model, **options))


def warm_up_new_process(model: str, options: dict[str, Any] | None) -> None:
    """A new measuring process's warm-up: a compile of another GEMM, stock and, with ``options``,
    with the handler too (Inductor's start-up, its compile workers, the model's first use), in the
    process's folders (new already, ``torch_diode.bench.isolate``)."""
    for opts in (None, options) if options is not None else (None,):
        with contextlib.ExitStack() as stack:
            _enter_handler(stack, model, opts)
            warm_up_compile(fresh_caches=False)


def isolated_compile(
    *,
    model: str,
    options: dict[str, Any] | None,
    problem: dict[str, Any],
    graph_iters: int,
    reps: int,
    dynamic: bool = False,
    after_pool_s: float | None = None,
) -> dict[str, Any]:
    """In a new process (``torch_diode.bench.isolate``, whose cache folders are new): the warm-up
    (``warm_up_new_process``), with ``after_pool_s`` a wait of up to that long for Inductor's
    compile-worker pool (``wait_for_compile_workers``: the compile is then a long compile's later
    GEMM, not a process's first), then one cold compile of ``problem`` and its kernel time(s):
    ``compile_and_time``'s result, or ``dynamic_compile_and_time``'s."""
    from torch_diode.bench.measure import wait_for_compile_workers

    p = GemmProblem(**problem)
    fn_args = None if dynamic else make_args(p)  # (dynamic: built at every M there)
    warm_up_new_process(model, options)
    pool = wait_for_compile_workers(after_pool_s) if after_pool_s is not None else {}
    if fn_args is None:
        got = dynamic_compile_and_time(model, options, p, graph_iters=graph_iters, reps=reps, fresh_caches=False)
    else:
        got = compile_and_time(model, options, *fn_args, graph_iters=graph_iters, reps=reps, fresh_caches=False)
    return {**got, **pool}


def compile_in_new_process(
    model: str,
    options: dict[str, Any] | None,
    p: GemmProblem,
    *,
    graph_iters: int,
    reps: int,
    dynamic: bool = False,
    after_pool_s: float | None = None,
    timeout_s: float = 540,
) -> dict[str, Any]:
    """``isolated_compile`` in a new process; its result plus ``process_s`` (or ``error``)."""
    from torch_diode.bench.isolate import run_in_new_process

    kwargs = {
        "model": model,
        "options": options,
        "problem": asdict(p),
        "graph_iters": graph_iters,
        "reps": reps,
        "dynamic": dynamic,
        "after_pool_s": after_pool_s,
    }
    return run_in_new_process(
        "check_handler_gpu:isolated_compile", kwargs, paths=[Path(__file__).resolve().parent], timeout_s=timeout_s
    )


def add_result(row: dict[str, Any], variant: str, result: dict[str, Any]) -> None:
    """One compile's result into a problem's row: keys ``VARIANT_compile_s``, ``VARIANT_kernel_us``
    (or ``VARIANT_us_m<M>``), ``VARIANT_error``, ``VARIANT_process_s``..., and ``VARIANT`` for the
    handler's stats (``diode``)."""
    row.update({variant if k == "diode" else f"{variant}_{k}": v for k, v in result.items()})


def run_speed(
    model: str,
    options: dict[str, Any],
    problems: list[GemmProblem],
    *,
    graph_iters: int,
    reps: int,
    variants: dict[str, dict[str, Any]] | None = None,
    on_row: Callable[[list[dict[str, Any]]], None] | None = None,
    after_pool_s: float | None = None,
) -> list[dict[str, Any]]:
    """Each problem compiled cold stock, with torch-diode (``options``) and with each of
    ``variants`` (more handler option sets, ``options`` updated with the variant's, in row keys
    ``diode:NAME_...``), each compile in a new process (``compile_in_new_process``, after the
    compile-worker pool is ready with ``after_pool_s``); eager ATen timed here. ``on_row`` gets the
    rows so far after each problem (to save them)."""
    import torch

    runs: dict[str, dict[str, Any] | None] = {"stock": None, "diode": options}
    runs.update({f"diode:{name}": {**options, **extra} for name, extra in (variants or {}).items()})
    rows = []
    for p in problems:
        fn, args = make_args(p)
        row: dict[str, Any] = {"problem": p.name, "shape": p.describe(), **asdict(p)}
        for variant, opts in runs.items():
            got = compile_in_new_process(model, opts, p, graph_iters=graph_iters, reps=reps, after_pool_s=after_pool_s)
            if after_pool_s is not None and got.get("compile_pool_ready") is False:
                print(
                    f"warning: {p.name} {variant}: the compile-worker pool was not ready after "
                    f"{got.get('compile_pool_waited_s')} s; measured as a process's first GEMM",
                    file=sys.stderr,
                    flush=True,
                )
            add_result(row, variant, got)
        row["aten_kernel_us"] = round(kernel_time_us(fn, args, graph_iters=graph_iters, reps=reps), 2)
        rows.append(row)
        if on_row is not None:
            on_row(rows)
        extra = "".join(
            f" {row.get(f'{v}_compile_s', math.nan):>8.2f} {row.get(f'{v}_kernel_us', math.nan):>9.1f}"
            for v in runs
            if v.startswith("diode:")
        )
        print(
            f"{p.name:<18} {p.describe():<34} {row.get('stock_compile_s', float('nan')):>8.2f} "
            f"{row.get('diode_compile_s', float('nan')):>8.2f} {row.get('stock_kernel_us', float('nan')):>9.1f} "
            f"{row.get('diode_kernel_us', float('nan')):>9.1f} {row['aten_kernel_us']:>9.1f}{extra}",
            flush=True,
        )
        torch.cuda.empty_cache()
    return rows


def compile_dynamic(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compile`` of ``fn`` as the speed check compiles it, with every size dynamic."""
    import torch

    from torch_diode.bench.measure import AUTOTUNE_MODE

    return torch.compile(fn, mode=AUTOTUNE_MODE, dynamic=True)


def _graphs_compiled() -> int:
    import torch._dynamo.utils

    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def dynamic_case_calls(
    op: str, dtype: str, *, device: str = "cuda"
) -> list[tuple[Callable[..., Any], tuple[Any, ...]]]:
    """The eager function and arguments of each of a dynamic case's calls (``DYNAMIC_SIZES``), one
    function for all of them (nn.Linear: one module)."""
    import torch

    calls = []
    lin = None
    for i, (m, n, k, batch) in enumerate(DYNAMIC_SIZES):
        if op == "linear":
            if lin is None:
                lin = torch.nn.Linear(
                    DYNAMIC_SIZES[0][2], DYNAMIC_SIZES[0][1], device=device, dtype=getattr(torch, dtype)
                )
            _, args = make_args(
                GemmProblem("dyn", "mm", batch * m, 8, lin.in_features, dtype=dtype), seed=i, device=device
            )
            calls.append((lin, (args[0].view(batch, m, lin.in_features),)))
        else:
            calls.append(make_args(GemmProblem("dyn", op, m, n, k, batch=batch, dtype=dtype), seed=i, device=device))
    return calls


def run_checked_cases(
    handle: Any, cases: list[tuple[str, dict[str, Any], Callable[[dict[str, Any]], None]]], describe: Callable[..., str]
) -> list[dict[str, Any]]:
    """Each case's ``check(row)`` (a cold compile with the handler and its comparison, writing its
    figures and ``ok`` into the row), with the handler's stats over it; an exception is a failed case
    with its cause. Prints one line a case: ``describe(row)`` between the name and the stats."""
    import torch

    rows = []
    for name, fields, check in cases:
        row: dict[str, Any] = {"case": name, **fields}
        before = handle.get_stats()
        try:
            check(row)
            row["error"] = None
        except Exception as e:  # a failed compile or call is a failed case, reported with its cause
            row.update(ok=False, error=f"{type(e).__name__}: {e}"[:500])
        row["diode"] = stats_delta(before, handle.get_stats())
        row["exercised"] = row["diode"]["gemm_calls"] > 0
        rows.append(row)
        print(
            f"{'PASS' if row['ok'] else 'FAIL'} {name:<50} {describe(row)} kept {row['diode']['candidates_kept']}/"
            f"{row['diode']['candidates_seen']} in {row['diode']['gemm_calls']} GEMMs "
            f"{'' if row['exercised'] else '(hook not exercised)'} {row['error'] or ''}",
            flush=True,
        )
        torch.cuda.empty_cache()
    return rows


def case_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A check's rows with how many passed, and which failed or never reached the handler."""
    return {
        "cases": rows,
        "passed": sum(r["ok"] for r in rows),
        "failed": [r["case"] for r in rows if not r["ok"]],
        "not_exercised": [r["case"] for r in rows if not r["exercised"]],
    }


def run_dynamic_correctness(handle: Any, ops: list[str], *, device: str = "cuda") -> list[dict[str, Any]]:
    """Each op x dtype x GEMM backends compiled once with ``dynamic=True`` and called at every size
    of ``DYNAMIC_SIZES``; each call compared with eager, and one graph for all of them."""
    import torch
    from torch._inductor import config as inductor_config

    def check(row: dict[str, Any]) -> None:
        rtol, atol = TOLERANCE[row["dtype"]]
        row["calls"] = []
        graphs = _graphs_compiled()
        with cold_compile_state(), inductor_config.patch(backends_patch(row["backends"])):
            compiled = None
            for fn, args in dynamic_case_calls(row["op"], row["dtype"], device=device):
                if compiled is None:
                    compiled = compile_dynamic(fn)
                with torch.no_grad():
                    got, want = compiled(*args), fn(*args)
                err = (got.float() - want.float()).abs()
                ok = bool((err <= atol + rtol * want.float().abs()).all())
                row["calls"].append({"sizes": [list(a.shape) for a in args], "ok": ok, "max_abs_err": float(err.max())})
            row["graphs"] = _graphs_compiled() - graphs
        # one graph for every size: with a recompile per size each size would be its own hint
        row["ok"] = (
            len(row["calls"]) == len(DYNAMIC_SIZES) and all(c["ok"] for c in row["calls"]) and row["graphs"] == 1
        )

    def describe(row: dict[str, Any]) -> str:
        errs = " ".join(f"{c['max_abs_err']:.2g}" for c in row.get("calls", []))
        return f"graphs {row.get('graphs', '?')} errors {errs:<28}"

    cases = [
        (f"dynamic-{op}-{dtype}-{backends}", {"op": op, "dtype": dtype, "backends": backends}, check)
        for backends in ("default", "TRITON")  # TRITON: a Triton kernel certain to be what runs
        for op in ops
        for dtype in CORRECTNESS_DTYPES
    ]
    return run_checked_cases(handle, cases, describe)


def dynamic_compile_and_time(
    model: str,
    options: dict[str, Any] | None,
    p: GemmProblem,
    *,
    graph_iters: int,
    reps: int,
    fresh_caches: bool = True,
) -> dict[str, Any]:
    """``p`` compiled cold once (stock when ``options`` is None, else with the handler) with M
    dynamic from a first call at ``p.m``, then timed at every M of ``DYNAMIC_M``: ``compile_s``,
    ``diode`` (the handler's stats), ``us_m<M>``, ``graphs`` (graphs compiled); ``error`` instead
    of what a failure left unmeasured."""
    import dataclasses

    import torch

    from torch_diode.bench.measure import AUTOTUNE_MODE

    at_m = {m: make_args(dataclasses.replace(p, m=m)) for m in (p.m, *DYNAMIC_M)}
    fn, hint_args = at_m[p.m]
    out: dict[str, Any] = {}
    try:
        with contextlib.ExitStack() as stack:
            handle = _enter_handler(stack, model, options)
            before = handle.get_stats() if handle else None
            stack.enter_context(cold_compile_state(fresh_caches=fresh_caches))
            torch._dynamo.mark_dynamic(hint_args[-2], 0)  # A's rows: M
            compiled = torch.compile(fn, mode=AUTOTUNE_MODE)
            graphs = _graphs_compiled()
            out["compile_s"] = round(first_call_s(compiled, hint_args), 3)
            if handle is not None:
                out["diode"] = stats_delta(before, handle.get_stats())
            for m in DYNAMIC_M:
                out[f"us_m{m}"] = round(kernel_time_us(compiled, at_m[m][1], graph_iters=graph_iters, reps=reps), 2)
            out["graphs"] = _graphs_compiled() - graphs
    except Exception as e:  # reported with the result; the other compiles go on
        traceback.print_exc()  # into the measuring process's output, logged with the error
        out["error"] = f"{type(e).__name__}: {e}"[:500]
    return out


def run_dynamic_speed(
    model: str,
    options: dict[str, Any],
    problems: list[GemmProblem],
    *,
    graph_iters: int,
    reps: int,
    on_row: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Each problem compiled cold once, stock and with torch-diode, each in a new process
    (``dynamic_compile_and_time`` there); eager ATen timed here at every M of ``DYNAMIC_M``.
    ``on_row`` as ``run_speed``'s."""
    import dataclasses

    import torch

    rows = []
    for p in problems:
        row: dict[str, Any] = {"problem": p.name, "shape": p.describe(), "hint_m": p.m, **asdict(p)}
        for variant, opts in (("stock", None), ("diode", options)):
            add_result(
                row, variant, compile_in_new_process(model, opts, p, graph_iters=graph_iters, reps=reps, dynamic=True)
            )
        for m in DYNAMIC_M:
            fn, args = make_args(dataclasses.replace(p, m=m))
            row[f"aten_us_m{m}"] = round(kernel_time_us(fn, args, graph_iters=graph_iters, reps=reps), 2)
        rows.append(row)
        if on_row is not None:
            on_row(rows)
        cells = " ".join(
            f"{row.get(f'stock_us_m{m}', math.nan):>8.1f}/{row.get(f'diode_us_m{m}', math.nan):<8.1f}"
            for m in DYNAMIC_M
        )
        print(
            f"{p.name:<18} {p.describe():<34} {row.get('stock_compile_s', math.nan):>8.2f} "
            f"{row.get('diode_compile_s', math.nan):>8.2f} {cells}",
            flush=True,
        )
        torch.cuda.empty_cache()
    return rows


def summarize_dynamic_speed(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Kernel time with torch-diode over stock's, per M and over every (problem, M)."""
    pairs = {
        (r["problem"], m): r[f"diode_us_m{m}"] / r[f"stock_us_m{m}"]
        for r in rows
        for m in DYNAMIC_M
        if f"diode_us_m{m}" in r and f"stock_us_m{m}" in r
    }
    if not pairs:
        return {"pairs": 0}
    ok = [r for r in rows if "stock_compile_s" in r and "diode_compile_s" in r]
    return {
        "pairs": len(pairs),
        "median_stock_compile_s": round(statistics.median(r["stock_compile_s"] for r in ok), 3) if ok else None,
        "median_diode_compile_s": round(statistics.median(r["diode_compile_s"] for r in ok), 3) if ok else None,
        "geomean_kernel_ratio_diode_over_stock": round(geomean(list(pairs.values())), 4),
        "max_kernel_ratio_diode_over_stock": round(max(pairs.values()), 4),
        "min_kernel_ratio_diode_over_stock": round(min(pairs.values()), 4),
        "geomean_by_m": {
            str(m): round(geomean([v for (_, mm), v in pairs.items() if mm == m]), 4)
            for m in DYNAMIC_M
            if any(mm == m for _, mm in pairs)
        },
        "ratio": {f"{name}@{m}": round(v, 4) for (name, m), v in pairs.items()},
    }


def fusion_case(pattern: str, dtype: str, *, device: str = "cuda") -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """The eager function of a ``FUSION_PATTERNS`` pattern and its arguments."""
    import torch
    import torch.nn.functional as F

    m, n, k = FUSION_SIZES
    g = torch.Generator(device=device).manual_seed(0)
    dt = getattr(torch, dtype)

    def rand(*shape: int, scale: float = 1.0 / math.sqrt(k)) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, device=device) * scale).to(dt)

    x, w, w2 = rand(m, k, scale=1.0), rand(n, k), rand(n, k)
    fns: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
        "relu_addmm": (lambda x, w, b: torch.relu(torch.addmm(b, x, w.t())), (x, w, rand(n, scale=1.0))),
        "gelu_linear": (lambda x, w, b: F.gelu(F.linear(x, w, b)), (x, w, rand(n, scale=1.0))),
        "swiglu": (lambda x, w, w2: F.silu(x @ w.t()) * (x @ w2.t()), (x, w, w2)),
        "residual": (lambda x, w, r: r + 0.5 * (x @ w.t()), (x, w, rand(m, n, scale=1.0))),
        "scaled_prologue": (lambda x, s, w: (x * s) @ w.t(), (x, rand(k, scale=1.0), w)),
    }
    if pattern not in fns:
        raise ValueError(f"unknown fusion pattern {pattern!r}; known: {', '.join(fns)}")
    return fns[pattern]


def within_bound(got: Any, want: Any, ref: Any) -> tuple[bool, float, float, float]:
    """The acceptance rule of ``--mode fusion`` and ``--mode training``: the compiled result's
    (``got``) largest error against the float64 reference ``ref`` is at most 4x eager's (``want``)
    plus 1e-4 of the reference's largest magnitude. Returns (ok, error, eager's error, bound)."""
    err = float((got.double() - ref).abs().max())
    err_eager = float((want.double() - ref).abs().max())
    bound = 4 * err_eager + 1e-4 * float(ref.abs().max())
    return err <= bound, err, err_eager, bound


def backends_patch(backends: str) -> dict[str, Any]:
    """Inductor config for a case's GEMM backends (``"default"``: none changed)."""
    return {} if backends == "default" else {"max_autotune_gemm_backends": backends}


def _as_float64(x: Any) -> Any:
    import torch

    return x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def accuracy_row(fn: Callable[..., Any], args: tuple[Any, ...], compiled: Callable[..., Any]) -> dict[str, Any]:
    """The compiled function's and eager's largest errors against a float64 reference (``fn``
    on float64 copies of the arguments; a module: a float64 copy of it), and whether the compiled
    one is within 4x eager's plus 1e-4 of the reference's largest magnitude."""
    import copy

    import torch

    ref_fn = copy.deepcopy(fn).double() if isinstance(fn, torch.nn.Module) else fn
    with torch.no_grad():
        got, want = compiled(*args), fn(*args)
        ref = ref_fn(*(_as_float64(a) for a in args))
    ok, err, err_eager, bound = within_bound(got, want, ref)
    return {"ok": ok, "max_abs_err": err, "eager_max_abs_err": err_eager, "bound": bound}


def _grads(fn: Any, x: Any, compiled: Callable[..., Any] | None = None) -> list[Any]:
    """The gradients of ``out.float().square().mean()`` (``out`` = ``(compiled or fn)(x)``) with
    respect to ``x`` and each of ``fn``'s parameters, in that order."""
    x = x.detach().clone().requires_grad_(True)
    for p in fn.parameters():
        p.grad = None
    out = (compiled if compiled is not None else fn)(x)  # not `or`: a module without __len__ has no truth value
    out.float().square().mean().backward()
    return [x.grad, *(p.grad for p in fn.parameters())]


def accuracy_grads_row(module: Any, x: Any, compile_fn: Callable[[Any], Callable[..., Any]]) -> dict[str, Any]:
    """:func:`accuracy_row`'s test for training: the compiled module's and eager's gradients of
    the loss (input and every parameter) against a float64 copy's; every tensor must pass."""
    import copy

    import torch

    reference = [g.double() for g in _grads(copy.deepcopy(module).double(), x.double())]
    eager = _grads(module, x)
    compiled = _grads(module, x, compile_fn(module))
    worst = 0.0
    ok = True
    for got, want, ref in zip(compiled, eager, reference):
        passed, err, err_eager, _ = within_bound(got, want, ref)
        ok &= passed
        worst = max(worst, err / max(err_eager, torch.finfo(torch.float64).tiny))
    return {"ok": bool(ok), "tensors": len(reference), "worst_err_over_eager": worst}


def run_training(handle: Any, *, device: str = "cuda") -> list[dict[str, Any]]:
    """``--mode training``'s cases, each compiled cold with the handler and checked by
    :func:`accuracy_grads_row`."""
    import torch

    from torch_diode.bench.suite import QUICK_MODULES

    def mlp(dtype: str) -> tuple[Any, Any]:
        m, n, k = FUSION_SIZES
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(k, n), torch.nn.GELU(), torch.nn.Linear(n, 333))
        net = net.to(device=device, dtype=getattr(torch, dtype))
        return net, torch.randn(m, k, device=device, dtype=getattr(torch, dtype))

    def block(case: Any) -> tuple[Any, Any]:
        torch.manual_seed(0)
        module, args = case.build(device)
        return module.train(), args[0]

    def check(row: dict[str, Any], build: Callable[[], tuple[Any, Any]]) -> None:
        module, x = build()
        with cold_compile_state():
            row.update(accuracy_grads_row(module, x, lambda f: compile_for("max-autotune", f)))

    def describe(row: dict[str, Any]) -> str:
        return f"{row.get('tensors', '?')} gradients, worst error {row.get('worst_err_over_eager', math.nan):.3g}x eager's;"

    builds = [(f"train mlp-{dtype}", lambda d=dtype: mlp(d)) for dtype in CORRECTNESS_DTYPES]
    builds += [(f"train {c.name}", lambda c=c: block(c)) for c in QUICK_MODULES]
    cases = [(name, {}, lambda row, b=b: check(row, b)) for name, b in builds]
    return run_checked_cases(handle, cases, describe)


def run_fusion(handle: Any, *, device: str = "cuda") -> list[dict[str, Any]]:
    """Each ``FUSION_PATTERNS`` pattern x dtype x GEMM backends, then the suite's modules, compiled
    cold with the handler (``max-autotune-no-cudagraphs``) and checked by :func:`accuracy_row`."""
    from torch._inductor import config as inductor_config

    from torch_diode.bench.suite import MORE_MODULES, QUICK_MODULES

    cases: list[tuple[str, Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]], str | None]] = [
        (
            f"{pattern}-{dtype}-{backends or 'default'}",
            lambda p=pattern, d=dtype: fusion_case(p, d, device=device),
            backends,
        )
        for pattern in FUSION_PATTERNS
        for dtype in CORRECTNESS_DTYPES
        for backends in (None, "TRITON")
    ]
    cases += [(m.name, lambda m=m: m.build(device), None) for m in (*QUICK_MODULES, *MORE_MODULES)]

    def check(row: dict[str, Any], build: Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]) -> None:
        fn, args = build()
        with cold_compile_state(), inductor_config.patch(backends_patch(row["backends"])):
            row.update(accuracy_row(fn, args, compile_for("max-autotune", fn)))

    def describe(row: dict[str, Any]) -> str:
        return f"err {row.get('max_abs_err', math.nan):.3g} (eager {row.get('eager_max_abs_err', math.nan):.3g})"

    return run_checked_cases(
        handle,
        [
            (name, {"backends": backends or "default"}, lambda row, b=build: check(row, b))
            for name, build, backends in cases
        ],
        describe,
    )


def geomean(xs: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in xs))


def summarize_variant(rows: list[dict[str, Any]], variant: str) -> dict[str, Any]:
    """A ``--variant``'s figures against ``diode``'s on the problems both compiled."""
    ok = [r for r in rows if f"{variant}_kernel_us" in r and "diode_kernel_us" in r]
    if not ok:
        return {"problems": 0}
    ratio = {r["problem"]: r[f"{variant}_kernel_us"] / r["diode_kernel_us"] for r in ok}
    return {
        "problems": len(ok),
        "median_compile_s": round(statistics.median(r[f"{variant}_compile_s"] for r in ok), 3),
        "geomean_kernel_ratio_over_diode": round(geomean(list(ratio.values())), 4),
        "max_kernel_ratio_over_diode": round(max(ratio.values()), 4),
        "min_kernel_ratio_over_diode": round(min(ratio.values()), 4),
        "geomean_kernel_ratio_over_stock": round(
            geomean([r[f"{variant}_kernel_us"] / r["stock_kernel_us"] for r in ok if "stock_kernel_us" in r]), 4
        )
        if any("stock_kernel_us" in r for r in ok)
        else None,
        "geomean_kernel_ratio_over_aten": round(
            geomean([r[f"{variant}_kernel_us"] / r["aten_kernel_us"] for r in ok]), 4
        ),
        "ratio_over_diode": {k: round(v, 4) for k, v in ratio.items()},
    }


def summarize_speed(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if "stock_kernel_us" in r and "diode_kernel_us" in r]
    if not ok:
        return {"problems": 0}
    ratio = [r["diode_kernel_us"] / r["stock_kernel_us"] for r in ok]
    vs_aten = [r["diode_kernel_us"] / r["aten_kernel_us"] for r in ok]
    med_diode = statistics.median(r["diode_compile_s"] for r in ok)
    geo = geomean(ratio)
    return {
        "problems": len(ok),
        "median_stock_compile_s": round(statistics.median(r["stock_compile_s"] for r in ok), 3),
        "median_diode_compile_s": round(med_diode, 3),
        "geomean_kernel_ratio_diode_over_stock": round(geo, 4),
        "max_kernel_ratio_diode_over_stock": round(max(ratio), 4),
        "geomean_kernel_ratio_diode_over_aten": round(geomean(vs_aten), 4),
        "meets_compile_bar_1_5s": med_diode <= 1.5,
        "meets_kernel_bar_geomean_le_stock": geo <= 1.0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="model file or registered model name")
    ap.add_argument("--mode", choices=("all", "correctness", "speed", "dynamic", "fusion", "training"), default="all")
    ap.add_argument("--problems", help="comma-separated SPEED_PROBLEMS names (default: all)")
    ap.add_argument("--ops", help="comma-separated correctness ops (default: all)")
    ap.add_argument("--top-k", type=int, default=None, help="top_k_configs (default: the handler's)")
    ap.add_argument("--performance-threshold", type=float, default=None)
    ap.add_argument(
        "--aten-alone-when-best", action="store_true", help="the handler's aten_alone_when_best (default: off)"
    )
    ap.add_argument(
        "--aten-alone-below-us",
        type=float,
        default=None,
        help="the handler's aten_alone_below_us (default: the handler's, 50 us; 0 turns it off)",
    )
    ap.add_argument(
        "--one-below-us",
        type=float,
        default=None,
        help="the handler's one_below_us (default: the handler's, 20 us; 0 turns it off)",
    )
    ap.add_argument(
        "--min-num-warps",
        type=int,
        default=None,
        help="the handler's min_num_warps (default: the handler's, off; 4 leaves out one- and two-warp configs)",
    )
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="speed: also compile with these option changes, e.g. 'short={\"aten_alone_below_us\": 50}' (repeatable)",
    )
    ap.add_argument(
        "--after-pool",
        type=float,
        default=None,
        metavar="S",
        help="speed: before each measured compile wait (up to S s) for Inductor's compile-worker pool, "
        "so the compile is a long compile's later GEMM, not a process's first (default: no wait)",
    )
    ap.add_argument("--graph-iters", type=int, default=20, help="calls captured in one CUDA graph")
    ap.add_argument("--reps", type=int, default=20, help="timed graph replays (median)")
    ap.add_argument("--output", type=Path, help="write the results as JSON")
    ap.add_argument("--list", action="store_true", help="print the problems and cases and exit")
    args = ap.parse_args(argv)
    problems = SPEED_PROBLEMS
    if args.problems:
        wanted = set(args.problems.split(","))
        unknown = wanted - {p.name for p in SPEED_PROBLEMS}
        if unknown:
            ap.error(f"unknown problem(s) {sorted(unknown)}; known: {', '.join(p.name for p in SPEED_PROBLEMS)}")
        problems = [p for p in SPEED_PROBLEMS if p.name in wanted]
    if args.after_pool is not None and (args.mode not in ("all", "speed") or not args.after_pool > 0):
        ap.error(f"--after-pool {args.after_pool}: a wait in seconds > 0, for --mode speed or all only")
    cases = correctness_cases()
    dynamic_ops = list(CORRECTNESS_OPS)
    if args.ops:
        cases = [c for c in cases if c[0] in set(args.ops.split(","))]
        dynamic_ops = [op for op in dynamic_ops if op in set(args.ops.split(","))]
    dynamic_problems = [p for p in problems if p.name in DYNAMIC_SPEED_PROBLEMS]
    options = {
        k: v
        for k, v in (
            ("top_k_configs", args.top_k),
            ("performance_threshold", args.performance_threshold),
            ("aten_alone_when_best", args.aten_alone_when_best or None),
            ("aten_alone_below_us", args.aten_alone_below_us),
            ("one_below_us", args.one_below_us),
            ("min_num_warps", args.min_num_warps),
        )
        if v is not None
    }
    variants: dict[str, dict[str, Any]] = {}
    for spec in args.variant:
        name, sep, raw = spec.partition("=")
        try:
            extra = json.loads(raw) if sep and name else None
        except json.JSONDecodeError as e:
            ap.error(f"--variant {spec!r}: the options after '=' are not JSON ({e})")
        if not isinstance(extra, dict) or name in variants:
            ap.error(
                f"--variant {spec!r}: expected a new NAME=JSON object, e.g. 'short={{\"aten_alone_below_us\": 50}}'"
            )
        nulls = sorted(k for k, v in extra.items() if v is None)
        if nulls:
            ap.error(
                f"--variant {name}: null for {', '.join(nulls)} would keep the handler's configured value; "
                "give the value itself (0 turns aten_alone_below_us or one_below_us off)"
            )
        variants[name] = extra
    from torch_diode.config import DiodeOptions

    for name, extra in {"": {}, **variants}.items():
        try:
            DiodeOptions(model="check", **{**options, **extra})
        except (TypeError, ValueError) as e:
            ap.error(f"{'--variant ' + name if name else 'options'}: {e}")
    if args.list:
        for p in problems:
            print(f"speed        {p.name:<18} {p.describe()}")
        for op, p, case in cases:
            print(f"correctness  {p.name:<34} {op} {case}")
        for op in dynamic_ops:
            for dtype in CORRECTNESS_DTYPES:
                print(f"dynamic      {'dynamic-' + op + '-' + dtype:<34} {op} at (M, N, K, batch) {DYNAMIC_SIZES}")
        for p in dynamic_problems:
            print(f"dynamic      {p.name:<18} {p.describe()} at M {p.m}, then {DYNAMIC_M}")
        return 0
    import torch

    if not torch.cuda.is_available():
        print("check_handler_gpu.py needs a CUDA GPU (run it on the GPU machine); --list works without one")
        return 2
    if not args.model:
        ap.error("--model is required (a model file or a registered model name)")
    from torch_diode.inductor import install_diode_choices

    result: dict[str, Any] = {
        "environment": environment(),
        "model": args.model,
        "options": options,
        "after_pool_s": args.after_pool,
    }

    def save(what: dict[str, Any]) -> None:
        """Write ``--output`` (whole or not at all); also after each speed problem, marked partial."""
        from torch_diode._files import atomic_write

        if args.output:
            atomic_write(args.output, json.dumps(what, indent=2, default=str))

    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 compared at fp32 precision
    with install_diode_choices(model=args.model, **options) as handle:
        if not handle.installed:
            print(f"torch-diode was not installed: {handle.reason}")
            return 2
        result["model_hash"] = handle.handler.model_hash()
        result["uuid"] = handle.handler.uuid()
        if args.mode in ("all", "correctness"):
            print(f"== correctness ({len(cases)} cases, mode=max-autotune-no-cudagraphs)")
            rows = run_correctness(handle, cases)
            result["correctness"] = case_summary(rows)
        if args.mode == "fusion":
            print(
                f"== fusion: {len(FUSION_PATTERNS)} patterns x {len(CORRECTNESS_DTYPES)} dtypes x 2 backend sets, 5 modules"
            )
            rows = run_fusion(handle)
            result["fusion"] = case_summary(rows)
        if args.mode == "training":
            print("== training: forward and backward, gradients against a float64 reference")
            rows = run_training(handle)
            result["training"] = case_summary(rows)
        if args.mode == "dynamic":
            print(f"== dynamic shapes: {2 * len(dynamic_ops) * len(CORRECTNESS_DTYPES)} cases, sizes {DYNAMIC_SIZES}")
            rows = run_dynamic_correctness(handle, dynamic_ops)
            result["dynamic_correctness"] = {"sizes": DYNAMIC_SIZES, **case_summary(rows)}
    if args.mode in ("all", "speed"):
        names = ["diode"] + [f"diode:{v}" for v in variants]
        print(f"== speed ({len(problems)} problems, cold compile per GEMM, stock then {', '.join(names)})")
        extra = "".join(f" {v[:8] + ' s':>8} {v[:8] + ' us':>9}" for v in variants)
        print(
            f"{'problem':<18} {'shape':<34} {'stock s':>8} {'diode s':>8} {'stock us':>9} {'diode us':>9} {'aten us':>9}"
            + extra
        )
        rows = run_speed(
            args.model,
            options,
            problems,
            graph_iters=args.graph_iters,
            reps=args.reps,
            variants=variants,
            on_row=lambda rows: save({**result, "speed": {"problems": rows, "partial": True}}),
            after_pool_s=args.after_pool,
        )
        summary = summarize_speed(rows)
        if variants:
            summary["variants"] = {
                v: {"options": {**options, **extra}, **summarize_variant(rows, f"diode:{v}")}
                for v, extra in variants.items()
            }
        result["speed"] = {"problems": rows, "summary": summary}
        print(json.dumps(summary, indent=2))
    if args.mode == "dynamic" and dynamic_problems:
        print(f"== dynamic M: {len(dynamic_problems)} problems, compiled cold at their M, timed at M {DYNAMIC_M}")
        print(
            f"{'problem':<18} {'shape':<34} {'stock s':>8} {'diode s':>8} "
            + " ".join(f"{'us M=' + str(m):>17}" for m in DYNAMIC_M)
        )
        rows = run_dynamic_speed(
            args.model,
            options,
            dynamic_problems,
            graph_iters=args.graph_iters,
            reps=args.reps,
            on_row=lambda rows: save({**result, "dynamic_speed": {"m": DYNAMIC_M, "problems": rows, "partial": True}}),
        )
        summary = summarize_dynamic_speed(rows)
        result["dynamic_speed"] = {"m": DYNAMIC_M, "problems": rows, "summary": summary}
        print(json.dumps(summary, indent=2))
    for key in ("correctness", "dynamic_correctness", "fusion", "training"):
        if key in result:
            c = result[key]
            print(f"{key}: {c['passed']}/{len(c['cases'])} passed; failed: {c['failed'] or 'none'}")
    save(result)
    if args.output:
        print(f"wrote {args.output}")
    failed = any(
        result.get(key, {}).get("failed") for key in ("correctness", "dynamic_correctness", "fusion", "training")
    )
    failed |= any(
        k.endswith("_error")
        for part in ("speed", "dynamic_speed")
        for r in result.get(part, {}).get("problems", [])
        for k in r
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
