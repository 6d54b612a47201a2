"""Which cuBLAS kernel each ATen choice of a dataset runs (session 43's probe).

Export (dev machine, needs the datasets):
    python benchmarks/models/session43/cublas_kernels.py export KEY OUT.json
A dense sample of problems (no timings needed; seeded, the plan's sampler in four mixes):
    python benchmarks/models/session43/cublas_kernels.py sample N SEED OUT.json
GPU (reads only that JSON; appends to RESULT.jsonl, resumable):
    python benchmarks/models/session43/cublas_kernels.py probe IN.json RESULT.jsonl [--deadline S] [--light]

For every (problem, ATen choice) pair the sweep's own tensors (``SweepCollector.example_tensors``)
and ATen call (``_aten_runner``) run once as warm-up, then once under ``torch.profiler``; the
names of the CUDA kernels that call launched are recorded, in launch order. No timing is taken.
``--light``: uninitialised operands of the same strides and no float64 reference (the values do
not change cuBLAS's choice), for dense samples.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
from pathlib import Path


def parse(names: list[str]) -> tuple[str, int, int, int, int, int, int, int, int, int]:
    """What the kernel names of one ATen call say (the experiment's columns, ``cublas-features.patch``):
    (family, BLOCK_M, BLOCK_N, BLOCK_K, stages, warps, split-K, alignment in elements, cluster
    size, other kernels); 0 where the name does not give it. Families: ``nvjet`` (Hopper),
    ``cutlass75`` (sm75 WMMA), ``cutlass``, ``xmma`` (sm80), ``gemv`` (GEMV/gemmSN), ``other``."""
    fam, bm, bn, bk, st, wp, splitk, align, cluster, extra = "other", 0, 0, 0, 0, 4, 0, 0, 1, 0
    gemm = None
    for nm in names:
        if "splitKreduce" in nm:
            splitk = 1
        elif gemm is None and any(t in nm for t in ("nvjet", "cutlass", "xmma", "gemv", "gemmSN", "gemm", "magma")):
            gemm = nm
        else:
            extra += 1
    if gemm is None:
        return (fam, 0, 0, 0, 0, 4, splitk, 0, 1, extra)
    if "nvjet" in gemm:
        fam = "nvjet"
        m = re.search(r"nvjet_sm\d+_[a-z]+_(\d+)x(\d+)_(\d+)x(\d+)_(\d+)x(\d+)", gemm)
        if m:
            bm, bn, bk, st = (int(m.group(i)) for i in range(1, 5))
            cluster = int(m.group(5)) * int(m.group(6))
            wp = 8
    elif "cutlass" in gemm:
        fam = "cutlass75" if ("cutlass_75" in gemm or "wmma" in gemm) else "cutlass"
        m = re.search(r"_(\d+)x(\d+)_(\d+)x(\d+)_[a-z]{2}_align(\d+)", gemm)
        if m:
            bm, bn, bk, st = (int(m.group(i)) for i in range(1, 5))
            align = int(m.group(5))
    elif "gemv" in gemm.lower() or "gemmSN" in gemm:
        fam = "gemv"
    elif "xmma" in gemm:
        fam = "xmma"
        m = re.search(r"tilesize(\d+)x(\d+)x(\d+)_stage(\d+)_warpsize(\d+)x(\d+)x(\d+)", gemm)
        if m:
            bm, bn, bk, st = (int(m.group(i)) for i in range(1, 5))
            wp = int(m.group(5)) * int(m.group(6)) * int(m.group(7))
        m = re.search(r"aligna(\d+)", gemm)
        if m:
            align = int(m.group(1))
    return (fam, bm, bn, bk, st, wp, splitk, align, cluster, extra)


def export(key: str, out: str) -> None:
    from torch_diode.dataset import read_dataset

    items = []
    for split in ("train", "val"):
        ds = read_dataset(Path("data") / key / f"{split}.msgpack")
        for pt in ds.by_problem():
            atens = sorted({ds.choices[c].template for c in pt.median_by_choice() if ds.choices[c].is_aten})
            p = dataclasses.asdict(pt.problem)
            items.append({"split": split, "problem": p, "aten": atens})
    Path(out).write_text(json.dumps({"hardware": key, "items": items}))
    print(f"{out}: {len(items)} problems")


def aten_templates(p) -> list[str]:
    """The ATen choices Inductor benchmarks for a problem (``collect.sweep.inductor_choices``)."""
    if p.op == "addmm":
        return (
            ["aten::addmm", "aten::bias_addmm"]
            if p.stride_bias is not None and p.stride_bias[0] == 0
            else ["aten::addmm"]
        )
    return [f"aten::{p.op}"]


def sample(n: int, seed: int, out: str) -> None:
    from torch_diode.shapes.sampling import sample_problems

    ops = ("mm", "addmm", "bmm", "baddbmm")
    mixes = [
        dict(aligned_fraction=0.5, layouts=("row/row", "row/col", "col/row", "col/col")),
        dict(one_misaligned=True, layouts=("row/row", "col/row", "col/col")),
        dict(output_misaligned=True, layouts=("row/col", "col/col")),
        dict(layouts=("row/row", "row/col")),
    ]
    probs: list = []
    for i, mix in enumerate(mixes):
        probs += sample_problems(n // len(mixes), seed=seed * 10 + i, ops=ops, exclude=probs, **mix)
    items = [{"split": "dense", "problem": dataclasses.asdict(p), "aten": aten_templates(p)} for p in probs]
    Path(out).write_text(json.dumps({"items": items}))
    print(f"{out}: {len(items)} problems, {sum(len(i['aten']) for i in items)} ATen calls")


def probe(inp: str, result: str, deadline: float, light: bool = False, hardware: str = "") -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from torch_diode.collect.sweep import SweepCollector
    from torch_diode.records import Choice, Problem

    start = time.monotonic()
    spec = json.loads(Path(inp).read_text())
    done = set()
    res = Path(result)
    if res.exists():
        for line in res.read_text().splitlines():
            r = json.loads(line)
            done.add((json.dumps(r["problem"], sort_keys=True), r["aten"]))
    coll = SweepCollector(spec.get("hardware") or hardware)
    n = 0
    with res.open("a") as f:
        for it in spec["items"]:
            pd = it["problem"]
            todo = [a for a in it["aten"] if (json.dumps(pd, sort_keys=True), a) not in done]
            if not todo:
                continue
            if time.monotonic() - start > deadline:
                print(f"deadline: stopped with {n} new pairs")
                break
            prob = Problem(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in pd.items()})
            try:
                t = light_tensors(prob) if light else coll.example_tensors(prob)
            except Exception as e:  # e.g. out of memory: record and go on
                for a in todo:
                    f.write(json.dumps({"problem": pd, "aten": a, "error": repr(e)[:300]}) + "\n")
                continue
            for a in todo:
                ch = Choice(template=a)
                try:
                    run = coll._aten_runner(ch, t)
                    run()
                    torch.cuda.synchronize()
                    with profile(activities=[ProfilerActivity.CUDA]) as prof:
                        run()
                        torch.cuda.synchronize()
                    names = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
                    f.write(json.dumps({"problem": pd, "aten": a, "kernels": names}) + "\n")
                except Exception as e:
                    f.write(json.dumps({"problem": pd, "aten": a, "error": repr(e)[:300]}) + "\n")
                n += 1
            f.flush()
            del t
            torch.cuda.empty_cache()
    print(f"{res}: {n} new pairs in {time.monotonic() - start:.0f} s")


def light_tensors(p) -> dict:
    import torch

    from torch_diode.collect.sweep import _out_stride, _shapes, _storage_numel

    dt = getattr(torch, p.dtype)
    sa, sb, so = _shapes(p)

    def strided(shape, stride):
        return torch.as_strided(torch.empty(_storage_numel(shape, stride), device="cuda", dtype=dt), shape, stride)

    t = {"a": strided(sa, p.stride_a), "b": strided(sb, p.stride_b)}
    t["c"] = torch.empty_strided(so, _out_stride(p), device="cuda", dtype=getattr(torch, p.out_dtype))
    if p.stride_bias is not None:
        t["bias"] = strided(so, p.stride_bias)
    return t


if __name__ == "__main__":
    if sys.argv[1] == "export":
        export(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "sample":
        sample(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        dl = float(sys.argv[sys.argv.index("--deadline") + 1]) if "--deadline" in sys.argv else 1e9
        hw = sys.argv[sys.argv.index("--hardware") + 1] if "--hardware" in sys.argv else ""
        probe(sys.argv[2], sys.argv[3], dl, light="--light" in sys.argv, hardware=hw)
