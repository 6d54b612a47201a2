#!/usr/bin/env python
"""Session 70, rule 1 (PLAN.md): which Triton configs does Inductor's own GEMM template get wrong?

Session 69 (rule 5) found three addmm configs that Inductor's template computes wrongly on an
H200 (torch 2.11, triton 3.6). Here each of them is varied one factor at a time (op, bias shape,
num_warps, num_stages, BLOCK_K, K, M, N, layout), each case compiled by Inductor with that one
config alone (session 69's ``OneConfig`` handler: no benchmark) and compared with a float64
reference. A case records its error, where the wrong elements are (rows / columns within the
tile, which tiles), and whether three calls on the same inputs give the same bits.

    python benchmarks/handler/session70/wrong_configs.py cases OUT.jsonl [--workers N] [--only NAME,...]
    python benchmarks/handler/session70/wrong_configs.py one NAME      # one case, in this process
    python benchmarks/handler/session70/wrong_configs.py dump NAME DIR # one case, its kernel code kept
    python benchmarks/handler/session70/wrong_configs.py repeat NAME DIR  # one compile, many calls
    python benchmarks/handler/session70/wrong_configs.py warm NAME        # the caches as they are (for a sanitizer)
    python benchmarks/handler/session70/wrong_configs.py draw N SEED CASES.json   # rule 7's random cases (offline)
    python benchmarks/handler/session70/wrong_configs.py cases OUT.jsonl --from CASES.json [--workers N]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session69"))

from torch_diode.records import Problem

Config = tuple[int, int, int, int, int]  # BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps


def _problem(
    op: str,
    dtype: str,
    m: int,
    n: int,
    k: int,
    *,
    a_col: bool = False,
    b_col: bool = False,
    bias: str = "row",
    batch: int = 1,
) -> Problem:
    sa = (1, m) if a_col else (k, 1)
    sb = (1, k) if b_col else (n, 1)
    if op in ("bmm", "baddbmm"):
        sa = (m * k, *sa)
        sb = (k * n, *sb)
    sbias = None
    if op in ("addmm", "baddbmm"):
        sbias = {"row": (0, 1), "full": (n, 1), "col": (1, 0)}[bias]
        if op == "baddbmm":
            sbias = (0, *sbias) if bias == "row" else (m * n, *sbias)
    return Problem(
        op=op, m=m, n=n, k=k, batch=batch, dtype=dtype, out_dtype=dtype, stride_a=sa, stride_b=sb, stride_bias=sbias
    )


def cases() -> list[dict[str, Any]]:
    """The case list: each base (problem, config) of session 69's rule 5, varied one factor at a time."""
    out: list[dict[str, Any]] = []

    def add(name: str, problem: Problem, config: Config) -> None:
        out.append({"name": name, "problem": problem, "config": config})

    bases = [
        # (base name, op, dtype, m, n, k, a_col, b_col, config)
        ("A", "addmm", "float16", 251, 4093, 127, False, False, (128, 64, 16, 2, 2)),
        ("B", "addmm", "float16", 1, 33921, 1347, False, True, (16, 16, 128, 3, 1)),
        ("C", "addmm", "bfloat16", 1021, 61, 127, True, False, (128, 64, 32, 2, 2)),
    ]
    for base, op, dt, m, n, k, ac, bc, cfg in bases:
        bm, bn, bk, st, w = cfg

        base_args = {"op": op, "dtype": dt, "m": m, "n": n, "k": k, "a_col": ac, "b_col": bc}

        def p(base_args: dict[str, Any] = base_args, **kw: Any) -> Problem:
            args = {**base_args, **kw}
            o, d = args.pop("op"), args.pop("dtype")
            mm_, nn_, kk_ = args.pop("m"), args.pop("n"), args.pop("k")
            return _problem(o, d, mm_, nn_, kk_, **args)

        add(f"{base}-base", p(), cfg)
        add(f"{base}-mm", p(op="mm"), cfg)
        add(f"{base}-bias-full", p(bias="full"), cfg)
        add(f"{base}-other-dtype", p(dtype="bfloat16" if dt == "float16" else "float16"), cfg)
        add(f"{base}-fp32", p(dtype="float32"), cfg)
        add(f"{base}-a-col", p(a_col=not ac), cfg)
        add(f"{base}-b-col", p(b_col=not bc), cfg)
        for ww in (1, 2, 4, 8):
            if ww != w:
                add(f"{base}-w{ww}", p(), (bm, bn, bk, st, ww))
        for ss in (1, 2, 3, 4, 5):
            if ss != st:
                add(f"{base}-s{ss}", p(), (bm, bn, bk, ss, w))
        for bkk in (16, 32, 64, 128):
            if bkk != bk:
                add(f"{base}-bk{bkk}", p(), (bm, bn, bkk, st, w))
        k_even = -(-k // bk) * bk
        for kk in sorted({k - 1, k + 1, k_even, 2 * k_even}):
            add(f"{base}-k{kk}", p(k=kk), cfg)
        for mm_ in sorted({m + 1, max(1, m - 1), 2 * m, bm * max(1, -(-m // bm))} - {m}):
            add(f"{base}-m{mm_}", p(m=mm_), cfg)
        for nn_ in sorted({n + 1, n - 1, -(-n // bn) * bn} - {n}):
            add(f"{base}-n{nn_}", p(n=nn_), cfg)
    # session 69's two sweep-only mm configs, again with the other warps
    for ww in (1, 2, 4):
        add(
            f"D-mm-2039x61x4093-Acol-w{ww}",
            _problem("mm", "float16", 2039, 61, 4093, a_col=True),
            (256, 16, 256, 3, ww),
        )
    return out


def _drawing_handler(few_warps: bool, seed: int) -> Any:
    """A choices handler keeping one Triton config drawn (seeded) from the GEMM's own EXHAUSTIVE
    candidates with fewer than four warps (``few_warps``) or with four or more: Inductor clamps
    the tiles to small sizes, so a config must come from the problem's own list."""
    import random

    from torch._inductor import config as inductor_config
    from torch._inductor.choices import InductorChoices

    class Drawing(InductorChoices):
        def __init__(self) -> None:
            super().__init__()
            self.found = 0
            self.picked: list[int] | None = None

        def _finalize_template_configs(self, template_choices, kernel_inputs, templates, op_name, kwarg_overrides=None):  # type: ignore[no-untyped-def]
            pool: list[Any] = []
            with inductor_config.patch(max_autotune_gemm_search_space="EXHAUSTIVE"):
                for t in templates:
                    if t.uid not in ("triton::mm", "triton::bmm"):
                        continue
                    for ktc in self.get_ktc(kernel_inputs, t, op_name, (kwarg_overrides or {}).get(t.uid, {})):
                        kw = ktc.params.to_kwargs()
                        if (kw["num_warps"] < 4) == few_warps:
                            pool.append((ktc, kw))
            if not pool:
                return []
            ktc, kw = pool[random.Random(seed).randrange(len(pool))]
            self.found = len(pool)
            self.picked = [kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], kw["num_stages"], kw["num_warps"]]
            return [ktc]

    return Drawing()


def draw_cases(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` random (problem, config) cases: 16-bit addmm (1-D bias, half of them), mm and baddbmm
    (1-D bias), sizes log-uniform (M, N in 1-8192, K in 16-8192, batch 1-64), each operand's layout
    at random; three in four configs with one or two warps, one in four with four or eight, each
    drawn from the configs of that template the committed H200 datasets timed."""
    import numpy as np

    from torch_diode.dataset import read_dataset

    root = Path(__file__).resolve().parents[3]
    pools: dict[tuple[str, bool], list[Config]] = {}
    ds = read_dataset(root / "data/NVIDIA-H200/train.msgpack")
    for c in ds.choices:
        if c.template in ("triton::mm", "triton::bmm") and c.num_warps:
            cfg = (c.block_m, c.block_n, c.block_k, c.num_stages, c.num_warps)
            pools.setdefault((c.template, c.num_warps < 4), []).append(cfg)  # type: ignore[arg-type]
    pools = {k: sorted(set(v)) for k, v in pools.items()}
    rng = np.random.default_rng(seed)

    def logu(lo: int, hi: int) -> int:
        return round(float(np.exp(rng.uniform(np.log(lo), np.log(hi)))))

    out = []
    for i in range(n):
        op = str(rng.choice(["addmm", "addmm", "mm", "baddbmm"]))
        dt = str(rng.choice(["float16", "bfloat16"]))
        m, nn_, k = logu(1, 8192), logu(1, 8192), logu(16, 8192)
        batch = 1
        if op == "baddbmm":
            batch = max(1, min(logu(1, 64), (1 << 26) // max(m * k, k * nn_, m * nn_)))
        few = bool(rng.uniform() < 0.75)
        pool = pools[("triton::bmm" if op == "baddbmm" else "triton::mm", few)]
        cfg = pool[int(rng.integers(len(pool)))]
        a_col, b_col = bool(rng.uniform() < 0.5), bool(rng.uniform() < 0.5)
        problem = _problem(op, dt, m, nn_, k, a_col=a_col, b_col=b_col, batch=batch)
        out.append(
            {"name": f"r{i}", "problem": problem, "config": cfg, "few_warps": few, "draw_seed": seed * 100003 + i}
        )
    return out


def _case_to_json(c: dict[str, Any]) -> dict[str, Any]:
    from dataclasses import asdict

    return {**c, "problem": asdict(c["problem"]), "config": list(c["config"])}


def _case_from_json(d: dict[str, Any]) -> dict[str, Any]:
    p = dict(d["problem"])
    p = {k: tuple(v) if isinstance(v, list) else v for k, v in p.items()}
    return {**d, "problem": Problem(**p), "config": tuple(d["config"])}


def _err_row(got: Any, ref: Any, eager: Any, bm: int, bn: int) -> dict[str, Any]:
    import torch

    scale = float(ref.abs().max()) or 1.0
    diff = (got.double() - ref).abs()
    wrong = diff > 0.02 * scale
    row: dict[str, Any] = {
        "err": float(diff.max()) / scale,
        "eager_err": float((eager.double() - ref).abs().max()) / scale,
        "n_wrong": int(wrong.sum()),
        "frac_wrong": float(wrong.float().mean()),
    }
    if row["n_wrong"]:
        idx = torch.nonzero(wrong.reshape(-1, wrong.shape[-2], wrong.shape[-1]))
        rows, cols = idx[:, 1], idx[:, 2]
        row["rows_in_tile"] = sorted({int(r) for r in (rows % bm).unique()})[:40]
        row["cols_in_tile"] = sorted({int(c) for c in (cols % bn).unique()})[:40]
        tiles = sorted({(int(b), int(r) // bm, int(c) // bn) for b, r, c in idx.tolist()})
        row["n_tiles_wrong"] = len(tiles)
        row["tiles_wrong_first"] = tiles[:12]
        row["row_range"] = [int(rows.min()), int(rows.max())]
        row["col_range"] = [int(cols.min()), int(cols.max())]
    return row


def _padding() -> Any:
    """Inductor's shape padding as configured, or off with ``WRONG_CONFIGS_NO_PAD=1``.

    Shape padding (``pad_mm``) times the padded and unpadded ATen GEMM and pads when that is
    faster, so whether the template sees M = 251 or 256 can change between processes (rule 3).
    """
    import contextlib

    from torch._inductor import config as inductor_config

    if os.environ.get("WRONG_CONFIGS_NO_PAD") == "1":
        return inductor_config.patch(shape_padding=False)
    return contextlib.nullcontext()


def _rel_err(got: Any, ref: Any) -> float:
    return float((got.double() - ref).abs().max()) / (float(ref.abs().max()) or 1.0)


def _moved(args: tuple[Any, ...], pad: int) -> tuple[Any, ...]:
    """The same values in new allocations, ``pad`` bytes of other allocations before each."""
    import torch

    out = []
    for a in args:
        torch.empty(pad, dtype=torch.uint8, device="cuda")  # shifts the next block in the caching allocator
        b = torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="cuda")
        b.copy_(a)
        out.append(b)
    return tuple(out)


def _case_inputs(problem: Problem) -> tuple[Any, tuple[Any, ...], Any]:
    """The problem's eager function, its CUDA inputs (seed 0) and the float64 reference output."""
    import torch

    from torch_diode.collect.inductor import gemm_function, make_inputs

    fn = gemm_function(problem.op)
    torch.manual_seed(0)
    args = make_inputs(problem, "cuda")
    return fn, args, fn(*(a.double() for a in args))


def run_repeat(case: dict[str, Any], cache_dir: str) -> dict[str, Any]:
    """One compile, then calls on the same inputs and on copies at other addresses; the cubins' sha256."""
    import hashlib

    import torch
    from torch._inductor.utils import fresh_cache
    from torch._inductor.virtualized import V
    from wrong_result import OneConfig

    fn, args, ref = _case_inputs(case["problem"])
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    torch._dynamo.reset()
    handler = OneConfig(tuple(case["config"]))  # type: ignore[arg-type]
    with fresh_cache(dir=cache_dir, delete=False), V.set_choices_handler(handler), _padding():
        compiled = torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False)
        first = _rel_err(compiled(*args), ref)
        same = [_rel_err(compiled(*args), ref) for _ in range(5)]
        moved = []
        for i in range(12):
            margs = _moved(args, 512 * (i + 1) + 16 * i)
            moved.append({"err": _rel_err(compiled(*margs), ref), "ptr_mod_1024": [a.data_ptr() % 1024 for a in margs]})
    cubins = sorted(hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in Path(cache_dir).rglob("triton_tem*.cubin"))
    return {
        "name": case["name"],
        "found": handler.found,
        "first": first,
        "same": same,
        "moved": moved,
        "cubins": cubins,
    }


def run_case(case: dict[str, Any], dump_dir: str | None = None) -> dict[str, Any]:
    import torch
    from torch._inductor.utils import fresh_cache
    from torch._inductor.virtualized import V
    from wrong_result import OneConfig

    problem: Problem = case["problem"]
    cfg = tuple(case["config"])
    out: dict[str, Any] = {"name": case["name"], "problem": problem.key(), "config": list(cfg)}
    if "few_warps" in case:
        out["few_warps"] = case["few_warps"]
    fn, args, ref = _case_inputs(problem)
    eager = fn(*args)
    if case.get("draw_seed") is not None:  # rule 7: the config drawn from the problem's own candidates
        handler = _drawing_handler(bool(case["few_warps"]), int(case["draw_seed"]))
    else:
        handler = OneConfig(cfg)  # type: ignore[arg-type]
    torch._dynamo.reset()
    try:
        import contextlib

        if os.environ.get("WRONG_CONFIGS_WARM"):  # the caches as configured (a sanitizer's second run)
            cache: Any = contextlib.nullcontext()
        else:
            cache = fresh_cache(dir=dump_dir, delete=False) if dump_dir else fresh_cache()
        with cache, V.set_choices_handler(handler), _padding():
            compiled = torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False)
            got = compiled(*args)
            torch.cuda.synchronize()
            again = [compiled(*args) for _ in range(3)]
            torch.cuda.synchronize()
        out["found"] = handler.found
        if getattr(handler, "picked", None):
            cfg = tuple(handler.picked)
            out["config"] = list(cfg)
        out.update(_err_row(got, ref, eager, cfg[0], cfg[1]))
        out["same_bits_x3"] = all(torch.equal(got, x) for x in again)
        out["max_err_of_repeats"] = max(float((x.double() - ref).abs().max()) for x in again) / (
            float(ref.abs().max()) or 1.0
        )
        out["exception"] = None
    except Exception as e:  # a failed compile is a result too
        out.update(found=handler.found, exception=f"{type(e).__name__}: {e}"[:400])
    return out


def _worker_init() -> None:
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["cases", "one", "dump", "list", "repeat", "warm", "draw"])
    ap.add_argument("rest", nargs="*")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--only", default="")
    ap.add_argument("--from", dest="from_file", default=None)
    a = ap.parse_args()
    if a.mode == "draw":
        drawn = [_case_to_json(c) for c in draw_cases(int(a.rest[0]), int(a.rest[1]))]
        Path(a.rest[2]).write_text(json.dumps(drawn, indent=0))
        return 0
    all_cases = cases()
    if a.from_file:
        all_cases = [_case_from_json(d) for d in json.loads(Path(a.from_file).read_text())]
    by_name = {c["name"]: c for c in all_cases}
    if a.mode == "list":
        for c in all_cases:
            print(c["name"], c["problem"].key(), c["config"])
        print(len(all_cases), "cases")
        return 0
    if a.mode == "one":
        print(json.dumps(run_case(by_name[a.rest[0]])), flush=True)
        return 0
    if a.mode == "repeat":
        print(json.dumps(run_repeat(by_name[a.rest[0]], a.rest[1])), flush=True)
        return 0
    if a.mode == "warm":
        os.environ["WRONG_CONFIGS_WARM"] = "1"
        print(json.dumps(run_case(by_name[a.rest[0]])), flush=True)
        return 0
    if a.mode == "dump":
        Path(a.rest[1]).mkdir(parents=True, exist_ok=True)  # fresh_cache makes its temp dir inside
        print(json.dumps(run_case(by_name[a.rest[0]], dump_dir=a.rest[1])), flush=True)
        return 0
    todo = [c for c in all_cases if not a.only or c["name"] in a.only.split(",")]
    out_path = Path(a.rest[0])
    done = set()
    if out_path.exists():  # resumable: skip the cases already written
        done = {json.loads(line)["name"] for line in out_path.read_text().splitlines() if line.strip()}
    todo = [c for c in todo if c["name"] not in done]
    ctx = multiprocessing.get_context("spawn")
    with out_path.open("a") as fh, cf.ProcessPoolExecutor(a.workers, mp_context=ctx, initializer=_worker_init) as ex:
        futs = {ex.submit(run_case, c): c["name"] for c in todo}
        for f in cf.as_completed(futs):
            try:
                row = f.result()
            except Exception as e:  # a worker that died (a GPU fault) is a result too
                row = {"name": futs[f], "exception": f"worker: {type(e).__name__}: {e}"[:400]}
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(
                json.dumps({k: row.get(k) for k in ("name", "err", "n_wrong", "same_bits_x3", "exception")}), flush=True
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
