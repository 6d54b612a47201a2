"""Session 75: does the ptxas that compiles Triton's GEMM kernels change how fast they run, or how
long max-autotune takes? Torch's wheel carries its own ``bin/ptxas`` (13.0 with torch 2.11+cu130)
and Triton its own (12.8 with triton 3.6); Inductor's compile workers use torch's, the main process
often Triton's (session 74). Setting ``TRITON_PTXAS_PATH`` before the first compile makes both use
one; this measures which one is the better to set.

Each arm is one new Python process with ``TRITON_PTXAS_PATH`` set when it starts (``triton``:
Triton's bundled ptxas; ``torch``: torch's ``bin/ptxas``), which runs ``InductorCollector`` (stock
max-autotune's DEFAULT search space) over the same problems of session 63's seeded sample of H200
validation problems, keeping every choice's benchmarked time and each problem's ``measure()``
time. The arms alternate (``--arms triton,torch,triton,torch``), so that each arm's two runs give
the run-to-run noise beside the difference between arms; ATen's choices, which ptxas does not
build, are a control.

    python benchmarks/handler/session75/ptxas_speed.py run OUT.json [--arms A,B,...] [--pick 0,1,...]
        [--timeout S]
    python benchmarks/handler/session75/ptxas_speed.py report OUT.json

``OUT`` is rewritten after every arm (an interrupted run keeps the arms it finished).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "benchmarks/handler/session63/sample-H200.json"
#: 16-bit problems of the sample and one fp32 (fp32's baddbmm takes 17 s each to collect).
DEFAULT_PICK = "0,1,2,4,5,8,10,12,14,19,11"


def ptxas_paths() -> dict[str, str]:
    import triton

    from torch_diode.inductor.ptxas import torch_bundled_ptxas

    bundled = Path(triton.__file__).resolve().parent / "backends" / "nvidia" / "bin" / "ptxas"
    torch_ptxas = torch_bundled_ptxas()
    if not bundled.is_file() or torch_ptxas is None:
        raise SystemExit(f"need both ptxas binaries: triton's {bundled} ({bundled.is_file()}), torch's {torch_ptxas}")
    return {"triton": str(bundled), "torch": str(torch_ptxas)}


def child(arm: str, pick: str, out: Path) -> int:
    """In the arm's new process: the ptxas version Triton keys with, then the collection."""
    import torch
    from triton.backends.nvidia import compiler as c

    from torch_diode.collect.inductor import InductorCollector
    from torch_diode.hardware import detect
    from torch_diode.inductor.ptxas import _for_arch, triton_arch
    from torch_diode.records import Problem

    version = _for_arch(c.get_ptxas_version, triton_arch(torch.cuda.get_device_capability()))
    sample = json.loads(SAMPLE.read_text())["problems"]
    result: dict = {
        "arm": arm,
        "TRITON_PTXAS_PATH": os.environ.get("TRITON_PTXAS_PATH"),
        "ptxas_version": str(version).strip().splitlines()[-1],
        "rows": [],
    }
    key = detect().key
    if not key:
        raise SystemExit("torch-diode knows no hardware key for this GPU (diode hardware); set TORCH_DIODE_HARDWARE")
    t_all = time.perf_counter()
    with InductorCollector(hardware=key, search_space="DEFAULT", mode="max-autotune") as col:
        for i in pick.split(","):
            p = Problem.from_dict(sample[int(i)]["problem"])
            t0 = time.perf_counter()
            records, failures = col.measure(p)
            result["rows"].append(
                {
                    "problem": p.key(),
                    "measure_s": round(time.perf_counter() - t0, 3),
                    "times_us": {r.choice.key(): round(r.time_us, 4) for r in records},
                    "failures": len(failures),
                }
            )
            result["total_s"] = round(time.perf_counter() - t_all, 2)
            out.write_text(json.dumps(result))
            print(json.dumps({k: v for k, v in result["rows"][-1].items() if k != "times_us"}), flush=True)
    return 0


def run(a: argparse.Namespace) -> int:
    from torch_diode._files import atomic_write
    from torch_diode.bench.measure import environment

    paths = ptxas_paths()
    arms = a.arms.split(",")
    unknown = sorted(set(arms) - set(paths))
    if unknown:
        raise SystemExit(f"--arms: unknown {unknown}; known: {sorted(paths)}")
    doc: dict = {"environment": environment(), "paths": paths, "pick": a.pick, "runs": []}
    deadline = time.monotonic() + a.timeout
    for n, arm in enumerate(arms):
        left = deadline - time.monotonic()
        if left < 60:
            print(f"stopping before run {n} ({arm}): {left:.0f} s left", flush=True)
            break
        part = Path(tempfile.gettempdir()) / f"ptxas-speed-{os.getpid()}-{n}.json"
        env = {**os.environ, "TRITON_PTXAS_PATH": paths[arm]}
        t0 = time.perf_counter()
        rc: int | str
        try:
            proc = subprocess.run(
                [sys.executable, __file__, "child", arm, a.pick, str(part)], env=env, timeout=left, check=False
            )
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        got = json.loads(part.read_text()) if part.exists() else {"arm": arm, "rows": []}
        part.unlink(missing_ok=True)
        got.update(rc=rc, process_s=round(time.perf_counter() - t0, 2))
        doc["runs"].append(got)
        atomic_write(a.output, json.dumps(doc, indent=1))
        print(f"run {n} {arm}: rc={rc}, {len(got['rows'])} problems, {got['process_s']} s", flush=True)
    return 0


def _geo(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))] if s else float("nan")


def report(a: argparse.Namespace) -> int:
    doc = json.loads(a.output.read_text())
    runs = doc["runs"]
    print(f"ptxas: {doc['paths']}")
    for n, r in enumerate(runs):
        print(
            f"run {n}: {r['arm']} (keys with {r.get('ptxas_version')}), rc={r['rc']}, {len(r['rows'])} problems, "
            f"collection {r.get('total_s')} s, process {r['process_s']} s"
        )

    def pair(x: dict, y: dict, label: str) -> None:
        """y / x per choice (Triton and ATen apart), per problem's best, and measure() time."""
        xr = {row["problem"]: row for row in x["rows"]}
        tri: list[float] = []
        aten: list[float] = []
        best: list[float] = []
        meas: list[float] = []
        for row in y["rows"]:
            other = xr.get(row["problem"])
            if not other:
                continue
            for k, t in row["times_us"].items():
                if k in other["times_us"] and t > 0 and other["times_us"][k] > 0:
                    (aten if k.startswith("aten::") else tri).append(t / other["times_us"][k])
            if row["times_us"] and other["times_us"]:  # best of ATen and Triton together
                best.append(min(row["times_us"].values()) / min(other["times_us"].values()))
            meas.append(row["measure_s"] / other["measure_s"])
        print(
            f"{label}: {len(best)} problems; Triton choices {len(tri)}: geomean {_geo(tri):.4f} "
            f"(p5 {_pct(tri, 0.05):.3f}, p95 {_pct(tri, 0.95):.3f}); ATen {len(aten)}: geomean {_geo(aten):.4f}; "
            f"best per problem geomean {_geo(best):.4f}; measure() time geomean {_geo(meas):.3f}"
        )

    by: dict[str, list[dict]] = {}
    for r in runs:
        by.setdefault(r["arm"], []).append(r)
    for arm, rs in by.items():
        for i in range(1, len(rs)):
            pair(rs[0], rs[i], f"{arm} run {i + 1} / run 1 (noise)")
    versions = {r.get("ptxas_version") for r in runs}
    if versions and len(versions) < len(by):
        print("WARNING: the arms keyed with the same ptxas version: this Triton may not take TRITON_PTXAS_PATH here")
    if "triton" in by and "torch" in by:
        for i, (x, y) in enumerate(zip(by["triton"], by["torch"], strict=False)):
            pair(x, y, f"torch / triton, pair {i + 1}")
    return 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        return child(sys.argv[2], sys.argv[3], Path(sys.argv[4]))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("output", type=Path)
    r.add_argument("--arms", default="triton,torch,triton,torch")
    r.add_argument("--pick", default=DEFAULT_PICK)
    r.add_argument("--timeout", type=float, default=480.0)
    p = sub.add_parser("report")
    p.add_argument("output", type=Path)
    a = ap.parse_args()
    return run(a) if a.cmd == "run" else report(a)


if __name__ == "__main__":
    sys.exit(main())
