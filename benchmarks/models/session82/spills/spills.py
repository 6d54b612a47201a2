#!/usr/bin/env python3
"""Do register spills / missing cp.async explain the timing cliffs of odd-stride 16-bit GEMMs on H100?

Compiles the sweep kernel (literal sizes, template revision 211, sm_90) of measured Triton configs of
odd-stride bf16 problems of the H100 dataset, reads registers and spill bytes from ``ptxas -v`` and
counts cp.async / global-load instructions in the PTX, and puts them next to the measured times.
The same configs are compiled for an aligned contrast problem (no times). No GPU needed.

    pip install --no-deps --target /tmp/t36 triton==3.6.0      # the GPU machines' triton
    PYTHONPATH=/tmp/t36:packages/torch-diode-lib/src:scripts taskset -c 1 \\
        python benchmarks/models/session82/spills/spills.py --out benchmarks/models/session82/spills/spills.json
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "packages/torch-diode-lib/src"))

from sweep_fidelity import spearman as fidelity_spearman  # noqa: E402
from sweep_ptx_compare import _compile_sweep, count_ops  # noqa: E402
from sweep_register_compare import ptxas_stats  # noqa: E402

from torch_diode.dataset import read_dataset  # noqa: E402
from torch_diode.records import Choice, Problem  # noqa: E402

REVISION, TARGET = 211, 90
ODD = Problem(op="mm", m=4093, n=1021, k=4093, dtype="bfloat16", stride_a=(4093, 1), stride_b=(1, 4093))
ALIGNED = Problem(op="mm", m=4096, n=1024, k=4096, dtype="bfloat16", stride_a=(4096, 1), stride_b=(1, 4096))
_OP = re.compile(r"^\s*(?:@!?%p\d+\s+)?([a-z_][a-z0-9_.:]*)", re.I)


def cfg_str(c: Choice) -> str:
    return f"{c.block_m}x{c.block_n}x{c.block_k} s{c.num_stages} w{c.num_warps}"


def measured(path: str, pred) -> dict[Problem, dict[str, tuple[Choice, float]]]:
    """{problem: {choice key: (choice, fastest finite time)}} of the Triton records matching ``pred``."""
    out: dict[Problem, dict[str, tuple[Choice, float]]] = collections.defaultdict(dict)
    for r in read_dataset(ROOT / path).records():
        if not pred(r.problem) or not r.choice.is_triton or not math.isfinite(r.time_us):
            continue
        d = out[r.problem]
        k = r.choice.key()
        if k not in d or r.time_us < d[k][1]:
            d[k] = (r.choice, r.time_us)
    return out


def select(rows: list[tuple[Choice, float]], n: int, n_end: int, must: list[str]) -> list[tuple[Choice, float]]:
    """Fastest ``n_end``, slowest ``n_end``, an even spread in log-time between, plus ``must`` configs and
    enough to cover BLOCK_K x warps combinations present."""
    rows = sorted(rows, key=lambda x: x[1])
    picked: dict[int, None] = {i: None for i in list(range(n_end)) + list(range(len(rows) - n_end, len(rows)))}
    for i, (c, _) in enumerate(rows):
        if cfg_str(c) in must:
            picked[i] = None
    # one config per (BLOCK_K, warps) combination: the fastest and the median of that group
    groups: dict[tuple[int, int], list[int]] = collections.defaultdict(list)
    for i, (c, _) in enumerate(rows):
        groups[(c.block_k, c.num_warps)].append(i)
    for g in sorted(groups):
        idx = groups[g]
        picked.setdefault(idx[0], None)
        picked.setdefault(idx[len(idx) // 2], None)
    lo, hi = math.log(rows[n_end][1]), math.log(rows[-n_end - 1][1])
    steps = max(n - len(picked), 2)
    for j in range(steps):
        target = lo + (hi - lo) * (j + 0.5) / steps
        best = min((i for i in range(len(rows)) if i not in picked), key=lambda i: abs(math.log(rows[i][1]) - target))
        picked[best] = None
    return [rows[i] for i in sorted(picked)]


def ptx_counts(ptx: str) -> dict[str, Any]:
    ops = count_ops(ptx, _OP)  # _OP also takes negated predicates (@!%p) and ':' in names
    cp_sizes = collections.Counter()
    for line in ptx.splitlines():
        if "cp.async.c" in line and "shared.global" in line:
            parts = [p.strip() for p in line.split(";")[0].split(",")]
            cp_sizes[parts[2] if len(parts) > 2 else "?"] += 1
    gl = {k: v for k, v in ops.items() if k.startswith("ld.global")}
    width = collections.Counter()
    for k, v in gl.items():
        vec = re.search(r"\.v(\d)", k)
        elt = re.search(r"\.[bfu](8|16|32|64)$", k)
        bits = (int(vec.group(1)) if vec else 1) * (int(elt.group(1)) if elt else 0)
        width[f"{bits}b"] += v
    return {
        "cp_async": sum(
            v
            for k, v in ops.items()
            if k.startswith("cp.async") and not k.startswith("cp.async.bulk") and "commit" not in k and "wait" not in k
        ),
        "cp_async_sizes": dict(cp_sizes),
        "cp_async_bulk": sum(v for k, v in ops.items() if k.startswith("cp.async.bulk")),
        "ld_global": sum(gl.values()),
        "ld_global_ops": gl,
        "ld_global_by_width": dict(width),
        "st_shared": sum(v for k, v in ops.items() if k.startswith("st.shared")),
        "wgmma": sum(v for k, v in ops.items() if k.startswith("wgmma.mma_async")),
        "mma": sum(v for k, v in ops.items() if k.startswith("mma.")),
        "ldmatrix": sum(v for k, v in ops.items() if k.startswith("ldmatrix")),
        "local_ld_st": sum(v for k, v in ops.items() if k.startswith(("ld.local", "st.local"))),
    }


def compile_row(p: Problem, c: Choice, t: float | None, best: float | None) -> dict[str, Any]:
    opts = {"num_warps": c.num_warps, "num_stages": c.num_stages, "debug": True, "sanitize_overflow": False}
    ch = Choice.from_kwargs(
        "triton::mm",
        {"BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "BLOCK_K": c.block_k, "GROUP_M": c.group_m or 8,
         "EVEN_K": p.k % c.block_k == 0, "ALLOW_TF32": False, "USE_FAST_ACCUM": False, "ACC_TYPE": "tl.float32",
         "num_stages": c.num_stages, "num_warps": c.num_warps},
        strict=False,
    )  # fmt: skip
    row: dict[str, Any] = {
        "problem": p.key(), "config": cfg_str(c), "block_m": c.block_m, "block_n": c.block_n, "block_k": c.block_k,
        "num_stages": c.num_stages, "num_warps": c.num_warps, "group_m": c.group_m, "even_k": p.k % c.block_k == 0,
        "time_us": t, "time_over_best": (t / best) if t is not None else None,
    }  # fmt: skip
    t0 = time.time()
    try:
        k = _compile_sweep(p, ch, REVISION, TARGET, opts, literal=True)
        ptx = k.asm["ptx"]
        row.update(ptxas_stats(ptx))
        row["shared_bytes"] = k.metadata.shared
        row.update(ptx_counts(ptx))
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    row["compile_s"] = round(time.time() - t0, 1)
    return row


def spearman(x: list[float], y: list[float]) -> float | None:
    """``sweep_fidelity.spearman``, None for fewer than 3 pairs or a constant side (JSON null)."""
    if len(x) < 3:
        return None
    r = fidelity_spearman(x, y)
    return None if math.isnan(r) else r


def correlations(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if r.get("registers") is not None and r.get("time_us")]
    lt = [math.log(r["time_over_best"]) for r in ok]
    out = {"n": len(ok)}
    for f in ("spill_store_bytes", "spill_load_bytes", "registers", "cp_async", "ld_global", "shared_bytes"):
        out[f"spearman_logtime_{f}"] = spearman(lt, [float(r[f]) for r in ok])
    out["spearman_logtime_spills_plus_regs"] = spearman(lt, [r["registers"] + r["spill_store_bytes"] for r in ok])
    return out


def stage_check(p: Problem, cfgs: list[tuple[int, int, int, int]]) -> list[dict[str, Any]]:
    """Is the PTX the same for every num_stages (odd strides: nothing to pipeline without cp.async)?"""
    import hashlib

    out = []
    for bm, bn, bk, nw in cfgs:
        hs = set()
        for ns in (1, 2, 3, 4, 5):
            ch = Choice.from_kwargs("triton::mm", {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8,
                                                   "EVEN_K": p.k % bk == 0, "num_stages": ns, "num_warps": nw},
                                    strict=False)  # fmt: skip
            opts = {"num_warps": nw, "num_stages": ns, "debug": True, "sanitize_overflow": False}
            k = _compile_sweep(p, ch, REVISION, TARGET, opts, literal=True)
            hs.add(hashlib.md5(re.sub(r"//.*", "", k.asm["ptx"]).encode()).hexdigest() + f"/{k.metadata.shared}")
        out.append({"config": f"{bm}x{bn}x{bk} w{nw}", "distinct_ptx_over_stages_1_to_5": len(hs)})
        print("stage check", out[-1], flush=True)
    return out


def full(p: Problem, d: dict[str, tuple[Choice, float]], tag: str) -> dict[str, Any]:
    """Every measured config of ``p``: one compile per (BLOCK_M, BLOCK_N, BLOCK_K, warps) (the PTX does not
    depend on num_stages for these odd-stride problems, see stage_check), its stats shared by all stages."""
    best = min(t for _, t in d.values())
    groups: dict[tuple[int, int, int, int], list[tuple[Choice, float]]] = collections.defaultdict(list)
    for c, t in d.values():
        groups[(c.block_m, c.block_n, c.block_k, c.num_warps)].append((c, t))
    urows, allrows = [], []
    for g in sorted(groups, key=lambda g: min(t for _, t in groups[g])):
        cs = sorted(groups[g], key=lambda x: x[1])
        r = compile_row(p, cs[0][0], cs[0][1], best)
        r["config"] = f"{g[0]}x{g[1]}x{g[2]} w{g[3]}"
        r["stages_measured"] = {c.num_stages: round(t, 1) for c, t in cs}
        for k in ("ld_global_ops", "cp_async_sizes"):
            r.pop(k, None)
        urows.append(r)
        print(
            f"{tag} {r['config']:16s} {cs[0][1]:9.1f}us regs {r.get('registers')} spill {r.get('spill_store_bytes')} "
            f"cp.async {r.get('cp_async')} ldg {r.get('ld_global_by_width')} {r.get('error', '')}",
            flush=True,
        )
        for c, t in cs:
            allrows.append({**r, "time_us": t, "time_over_best": t / best, "num_stages": c.num_stages})
    return {"problem": p.key(), "n_configs": len(allrows), "n_kernels": len(urows), "best_us": best,
            "correlations_all_configs": correlations(allrows), "correlations_per_kernel_best_stage": correlations(urows),
            "kernels": urows}  # fmt: skip


def print_row(name: str, r: dict[str, Any], t: float) -> None:
    print(
        f"{name:7s} {r['config']:20s} {t:9.1f}us regs {r.get('registers')} spill {r.get('spill_store_bytes')}/"
        f"{r.get('spill_load_bytes')} cp.async {r.get('cp_async')} {r.get('cp_async_sizes')} ldg "
        f"{r.get('ld_global_by_width')} {r.get('error', '')} [{r['compile_s']}s]",
        flush=True,
    )


def tables(result: dict[str, Any]) -> str:
    """Markdown tables of the selected rows (odd with the aligned contrast side by side, and the extra problem)."""
    fmt_w = lambda d: " ".join(f"{k}:{v}" for k, v in sorted(d.items())) or "-"  # noqa: E731
    al = {r["config"]: r for r in result["problems"]["aligned"]["rows"]}
    lines = [f"### {result['problems']['odd']['problem']} (val), with the aligned 4096x1024x4096 contrast (compile only)", "",
             "| config | us | t/best | regs | spill st/ld B | cp.async | ld.global by width | aligned regs | aligned spill st B | aligned cp.async (size) | aligned ld.global |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in sorted(result["problems"]["odd"]["rows"], key=lambda r: r["time_us"]):
        a = al[r["config"]]
        lines.append(f"| {r['config']} | {r['time_us']:.1f} | {r['time_over_best']:.2f} | {r['registers']} | "
                     f"{r['spill_store_bytes']}/{r['spill_load_bytes']} | {r['cp_async']} | {fmt_w(r['ld_global_by_width'])} | "
                     f"{a['registers']} | {a['spill_store_bytes']} | {a['cp_async']} ({fmt_w(a['cp_async_sizes'])}) | "
                     f"{fmt_w(a['ld_global_by_width'])} |")  # fmt: skip
    if "extra" in result["problems"]:
        x = result["problems"]["extra"]
        lines += [
            "",
            f"### {x['problem']} (train), strides (6077, 1) / (1, 6077)",
            "",
            "| config | us | t/best | regs | spill st/ld B | cp.async | ld.global by width |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in sorted(x["rows"], key=lambda r: r["time_us"]):
            lines.append(
                f"| {r['config']} | {r['time_us']:.1f} | {r['time_over_best']:.2f} | {r['registers']} | "
                f"{r['spill_store_bytes']}/{r['spill_load_bytes']} | {r['cp_async']} | {fmt_w(r['ld_global_by_width'])} |"
            )
    return "\n".join(lines) + "\n"


EXTRA = Problem(op="mm", m=727, n=6875, k=6077, dtype="bfloat16", stride_a=(6077, 1), stride_b=(1, 6077))
MUST = [
    "128x128x32 s5 w8",
    "128x128x32 s1 w4",
    "128x128x64 s3 w4",
    "64x128x64 s5 w4",
    "128x64x64 s4 w4",
    "64x128x32 s4 w4",
    "64x64x32 s1 w4",
]


def main(argv: list[str] | None = None) -> int:
    import triton

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/models/session82/spills/spills.json")
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--n3", type=int, default=25, help="configs for the extra odd problem (train set); 0 skips it")
    ap.add_argument("--tables", type=Path, help="only print the markdown tables of an existing --out JSON to this file")
    ap.add_argument(
        "--no-full", action="store_true", help="skip compiling every measured (tile, warps) of the odd problems"
    )
    args = ap.parse_args(argv)
    if args.tables:
        args.tables.write_text(tables(json.loads(args.out.read_text())))
        return 0
    t_start = time.time()
    result: dict[str, Any] = {"triton": triton.__version__, "target": "sm_90a", "revision": REVISION,
                              "literal": True, "problems": {}}  # fmt: skip

    def save():
        args.out.write_text(json.dumps(result, indent=1))

    odd = measured("data/NVIDIA-H100/val.msgpack", lambda p: p == ODD)[ODD]
    rows = list(odd.values())
    best = min(t for _, t in rows)
    sel = select(rows, args.n, 8, must=MUST)
    print(f"odd problem: {len(rows)} measured triton configs, best {best:.1f} us; compiling {len(sel)}", flush=True)
    for name, p, timed in (("odd", ODD, True), ("aligned", ALIGNED, False)):
        out = []
        result["problems"][name] = {"problem": p.key(), "source": "val" if timed else "none (compile only)",
                                    "best_us": best if timed else None, "rows": out}  # fmt: skip
        for c, t in sel:
            r = compile_row(p, c, t if timed else None, best if timed else None)
            if not timed:
                r["odd_time_us"] = t
                r["odd_time_over_best"] = t / best
            out.append(r)
            print_row(name, r, t)
            save()
        if timed:
            result["problems"][name]["correlations"] = correlations(out)
            print(json.dumps(result["problems"][name]["correlations"]), flush=True)
        save()
    result["stage_check_odd"] = stage_check(ODD, [(128, 128, 32, 4), (128, 128, 32, 8), (64, 64, 64, 4)])
    save()

    if args.n3:
        d = measured("data/NVIDIA-H100/train.msgpack", lambda p: p == EXTRA)[EXTRA]
        d3 = list(d.values())
        b3 = min(t for _, t in d3)
        sel3 = select(d3, args.n3, 5, must=[])
        print(f"extra problem {EXTRA.key()}: {len(d3)} configs, best {b3:.1f} us; compiling {len(sel3)}", flush=True)
        out = []
        result["problems"]["extra"] = {"problem": EXTRA.key(), "source": "train", "best_us": b3, "rows": out}
        for c, t in sel3:
            r = compile_row(EXTRA, c, t, b3)
            out.append(r)
            print_row("extra", r, t)
            save()
        result["problems"]["extra"]["correlations"] = correlations(out)
        print(json.dumps(result["problems"]["extra"]["correlations"]), flush=True)
        save()
    if not args.no_full:
        result["full_odd"] = full(ODD, odd, "full-odd")
        print(json.dumps(result["full_odd"]["correlations_all_configs"]), flush=True)
        save()
        if args.n3:
            result["full_extra"] = full(EXTRA, d, "full-extra")
            print(json.dumps(result["full_extra"]["correlations_all_configs"]), flush=True)
    result["elapsed_s"] = round(time.time() - t_start)
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
