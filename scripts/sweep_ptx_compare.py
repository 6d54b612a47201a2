#!/usr/bin/env python3
"""Compare the sweep's kernels with the kernels Inductor generated, instruction by instruction.

Inductor writes every template kernel it benchmarks to its cache directory (a Python file with
the ``@triton.jit`` source, ``triton_meta`` and the config). For each such file this script
compiles, for the same target GPU and with the same compile options (no GPU needed):

* Inductor's kernel as Inductor wrote it (sizes and strides as literals), and
* the sweep kernel for the same problem and config (sizes as run-time arguments, constexpr hints),

and compares what decides speed: shared memory, the tensor-core instructions (``wgmma``), the
global-to-shared copies by width (``cp.async`` 4/8/16 bytes), vector widths of global loads and
stores, barriers, and the PTX instruction histogram. Literal sizes fold into immediates in
Inductor's code, so a few integer instructions differ; the memory and matrix instructions must not.

Usage (any machine with triton installed; the GPU machine's is the reference):
    PYTHONPATH=packages/torch-diode-lib/src python scripts/sweep_ptx_compare.py \
        --kernels DIR_OF_INDUCTOR_FILES --problems PROBLEMS.json --out benchmarks/fidelity/ptx_compare.json
``PROBLEMS.json`` maps each sub-directory of DIR (one compile each) to a problem dict
(``Problem.to_dict()``). ``--target 90`` is Hopper.
"""

from __future__ import annotations

import argparse
import ast
import collections
import importlib.util
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from torch_diode.records import Choice, Problem

_DIRECTIVE = re.compile(r"^\s*(?:@%p\d+\s+)?([a-z_][a-z0-9_.]*)", re.I)
_PTR = {"float16": "*fp16", "bfloat16": "*bf16", "float32": "*fp32"}


def _parse_inductor_kernel(path: Path) -> dict[str, Any] | None:
    src = path.read_text()
    if "@triton_heuristics.template" not in src or "tl.dot" not in src:
        return None
    tree = ast.parse(src)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.decorator_list), None)
    deco = next((d for d in fn.decorator_list if isinstance(d, ast.Call)), None) if fn else None
    if fn is None or deco is None:  # a benchmark harness or a kernel without Inductor's decorator
        return None
    kw = {k.arg: k.value for k in deco.keywords}
    num_stages = ast.literal_eval(kw["num_stages"])
    num_warps = ast.literal_eval(kw["num_warps"])
    meta_src = ast.get_source_segment(src, kw["triton_meta"])
    imeta_src = ast.get_source_segment(src, kw["inductor_meta"])
    ns = {"DeviceProperties": lambda **k: None}
    triton_meta = eval(meta_src, ns)
    inductor_meta = eval(imeta_src, ns)
    body = ast.get_source_segment(src, fn)
    return {
        "name": fn.name,
        "source": "import triton\nimport triton.language as tl\n\n@triton.jit\n" + body + "\n",
        "signature": triton_meta["signature"],
        "config": inductor_meta["config_args"],
        "num_stages": num_stages,
        "num_warps": num_warps,
        "debug": bool(inductor_meta.get("assert_indirect_indexing", True)),
    }


def _compile(fn: Any, signature: dict[str, str], constexprs: dict[str, Any], target: int, opts: dict[str, Any]) -> Any:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = fn.arg_names
    sig = {n: ("constexpr" if n in constexprs else signature[n]) for n in names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if sig[n].startswith("*")}
    src = ASTSource(fn=fn, signature=sig, constexprs={(names.index(n),): v for n, v in constexprs.items()}, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", target, 32), options=opts)


def _compile_source(
    source: str, name: str, module: str, signature: dict[str, str], target: int, opts: dict[str, Any]
) -> Any:
    """Compile the ``@triton.jit`` function ``name`` of ``source`` (imported as ``module``)."""
    with tempfile.TemporaryDirectory() as d:
        mod_path = Path(d) / f"{module}.py"
        mod_path.write_text(source)
        spec = importlib.util.spec_from_file_location(module, mod_path)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[module] = mod
        spec.loader.exec_module(mod)
        return _compile(getattr(mod, name), signature, {}, target, opts)


def _compile_sweep(
    problem: Problem, choice: Choice, revision: int, target: int, opts: dict[str, Any], *, literal: bool = False
) -> Any:
    """Compile the sweep kernel of (problem, choice), sizes and strides typed i32."""
    from torch_diode.collect import sweep
    from torch_diode.collect.sweep_kernels import KERNELS

    cx = sweep._constexprs_for_triton(sweep.launch_constexprs(problem, choice, revision, literal=literal))
    kern = KERNELS[sweep.kernel_spec(problem).kernel]
    sig = {n: (_PTR[problem.dtype] if n in ("A", "B", "C", "BIAS") else "i32") for n in kern.arg_names}
    return _compile(kern, sig, cx, target, opts)


def count_ops(ptx: str, pattern: re.Pattern[str] = _DIRECTIVE) -> collections.Counter[str]:
    """How often each instruction of ``ptx`` occurs (its name: ``pattern``'s first group on each
    line that is no comment, directive, brace or label)."""
    ops: collections.Counter[str] = collections.Counter()
    for line in ptx.splitlines():
        s = line.strip()
        if not s or s.startswith(("//", ".", "{", "}", "$")) or s.endswith(":"):
            continue
        m = pattern.match(s)
        if m:
            ops[m.group(1)] += 1
    return ops


def ptx_profile(ptx: str) -> dict[str, Any]:
    """The instruction facts that decide a GEMM kernel's speed."""
    ops = count_ops(ptx)
    mem = {
        k: v
        for k, v in ops.items()
        if k.startswith(
            (
                "cp.async",
                "ld.global",
                "st.global",
                "wgmma",
                "mma",
                "ldmatrix",
                "stmatrix",
                "bar.",
                "ld.shared",
                "st.shared",
                "fence",
                "mbarrier",
            )
        )
    }
    return {"ops": dict(ops), "mem": mem, "n_instr": sum(ops.values())}


def compare_file(path: Path, problem: Problem, revision: int, target: int) -> dict[str, Any] | None:
    k = _parse_inductor_kernel(path)
    if k is None:
        return None
    cfg = dict(k["config"])
    template = "triton::bmm" if problem.op in ("bmm", "baddbmm") else "triton::mm"
    choice = Choice.from_kwargs(
        template, {**cfg, "num_stages": k["num_stages"], "num_warps": k["num_warps"]}, strict=False
    )
    opts = {"num_warps": k["num_warps"], "num_stages": k["num_stages"], "debug": k["debug"], "sanitize_overflow": False}
    ind = _compile_source(k["source"], k["name"], f"ind_{path.stem}", k["signature"], target, opts)
    ours = _compile_sweep(problem, choice, revision, target, opts)
    pi, po = ptx_profile(ind.asm["ptx"]), ptx_profile(ours.asm["ptx"])
    return {
        "file": path.name,
        "choice": choice.key(),
        "shared_bytes": [ind.metadata.shared, ours.metadata.shared],
        "mem_inductor": pi["mem"],
        "mem_sweep": po["mem"],
        "mem_equal": pi["mem"] == po["mem"],
        "shared_equal": ind.metadata.shared == ours.metadata.shared,
        "n_instr": [pi["n_instr"], po["n_instr"]],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=Path, required=True)
    ap.add_argument("--problems", type=Path, required=True)
    ap.add_argument("--revision", type=int, default=None, help="template revision (default: the installed torch's)")
    ap.add_argument("--target", type=int, default=90)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    from torch_diode.collect.sweep import template_revision

    rev = args.revision or template_revision()
    problems = {k: Problem.from_dict(v) for k, v in json.loads(args.problems.read_text()).items()}
    results: dict[str, Any] = {"revision": rev, "target": args.target, "problems": {}}
    n = same = same_shared = 0
    for name, p in problems.items():
        rows = []
        for f in sorted((args.kernels / name).glob("*.py")):
            try:
                r = compare_file(f, p, rev, args.target)
            except Exception as e:  # a kernel that does not compile is reported, not fatal
                r = {"file": f.name, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
            if r is None:
                continue
            rows.append(r)
            if "error" not in r:
                n += 1
                same += r["mem_equal"]
                same_shared += r["shared_equal"]
                flag = "same" if r["mem_equal"] and r["shared_equal"] else "DIFF"
                print(
                    f"{name:14s} {r['choice']:40s} {flag} shared={r['shared_bytes']} instr={r['n_instr']}", flush=True
                )
                if flag == "DIFF":
                    keys = sorted(set(r["mem_inductor"]) | set(r["mem_sweep"]))
                    print(
                        "   "
                        + "; ".join(
                            f"{k}: {r['mem_inductor'].get(k, 0)}/{r['mem_sweep'].get(k, 0)}"
                            for k in keys
                            if r["mem_inductor"].get(k, 0) != r["mem_sweep"].get(k, 0)
                        )
                    )
            else:
                print(f"{name:14s} {r['file']}: {r['error']}", flush=True)
        results["problems"][name] = {"problem": p.to_dict(), "kernels": rows}
    results["summary"] = {
        "kernels": n,
        "memory_and_matrix_instructions_equal": same,
        "shared_memory_equal": same_shared,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(f"{same}/{n} kernels: identical memory/matrix instruction counts; {same_shared}/{n}: identical shared memory")
    return 0


if __name__ == "__main__":
    sys.exit(main())
