#!/usr/bin/env python3
"""Run the pytest tests marked ``gpu`` on every GPU of the machine at once, then the multi-GPU ones.

The tests marked ``gpu`` (but not ``multi_gpu``) are dealt round-robin, in collection order, to one
pytest process per GPU (``CUDA_VISIBLE_DEVICES=i``, each with a fresh Inductor cache); the tests
marked ``multi_gpu`` run afterwards with every GPU visible (with one GPU they are not started). One
H200 takes about 17 minutes for all of them (session 81: 366 + 314 + 327 s of pytest in three
calls), more than one device call allows.

    python3 scripts/run_gpu_tests_parallel.py             # every gpu test
    python3 scripts/run_gpu_tests_parallel.py tests/test_sweep_gpu.py --deadline-s 480
    python3 scripts/run_gpu_tests_parallel.py --dry-run   # print the split, run nothing (no GPU needed)

One device call (10 minutes) holds about a third of them on one GPU: ``--part K/N`` runs the K-th of
N parts of about equal recorded time (``scripts/gpu_test_durations.json``, the times of the last
runs; a test not recorded there counts ``DEFAULT_ESTIMATE_S``), the multi-GPU tests in the last
part (session 81's three calls: 426, 377 and 404 s of command). ``--wheels DIR`` installs the wheels in DIR (``nox -s build``'s ``dist/``) into a temporary
folder put after the sources on ``PYTHONPATH``, so the meta-wheel's plugin is active in every test
process. After the calls, ``--record LOG...`` adds the durations in their logs (plain or gzipped)
to the durations file:

    python3 scripts/run_gpu_tests_parallel.py --part 1/3 --wheels dist --deadline-s 540
    python3 scripts/run_gpu_tests_parallel.py --part 2/3 --dry-run
    python3 scripts/run_gpu_tests_parallel.py --record results/*/gpu0.log.gz

Results go to ``$OUT`` (the device tool's output folder) or ``./gpu-test-results``: ``env.txt``,
``gpu{i}.log`` per GPU and ``multi.log``, few files on purpose (the device tool returns at most
eight, so at most six GPUs are used). Each log holds pytest's full report (``-rA``, every test's
duration). ``--deadline-s`` stops the runs (SIGINT, then SIGKILL 20 s later) that many seconds
after the start, keeping ``--multi-s`` for the multi-GPU tests; pytest still writes the summary of
what ran. Exit status: 0 when every run passed, 1 when a test failed or a run was stopped, 3
without a GPU.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_PROCESSES = 6  # env.txt + six logs + multi.log: the device tool's eight files
DURATIONS = ROOT / "scripts" / "gpu_test_durations.json"
DEFAULT_ESTIMATE_S = 30.0  # a test with no recorded time (about the median of the recorded ones)


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    src = [str(ROOT / "packages" / p / "src") for p in ("torch-diode-lib", "torch-diode-models", "torch-diode")]
    env["PYTHONPATH"] = os.pathsep.join(src + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def _collect(paths: list[str], marks: str, env: dict[str, str]) -> list[str]:
    """The node ids pytest selects with ``-m marks`` under ``paths``, in collection order."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", marks, "--collect-only", "-q", "-p", "no:cacheprovider", *paths],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    ids = [line.strip() for line in out.stdout.splitlines() if "::" in line and not line.startswith(" ")]
    if out.returncode not in (0, 5):  # 5: nothing selected
        sys.exit(f"run_gpu_tests_parallel: collecting the tests failed:\n{out.stdout[-3000:]}{out.stderr[-3000:]}")
    return ids


def deal(ids: list[str], n: int) -> list[list[str]]:
    """``ids`` dealt round-robin to ``n`` processes (neighbouring cases of one test, often alike in
    cost, go to different GPUs)."""
    return [ids[i::n] for i in range(n)]


def parse_part(text: str) -> tuple[int, int]:
    """``"K/N"`` as (K, N), 1 <= K <= N."""
    k, sep, n = text.partition("/")
    try:
        part, parts = int(k), int(n)
    except ValueError:
        part = parts = 0
    if not sep or not 1 <= part <= parts:
        raise argparse.ArgumentTypeError(f"--part {text!r}: give K/N with 1 <= K <= N, e.g. 1/3")
    return part, parts


def split(ids: list[str], n: int, seconds: dict[str, float]) -> list[list[str]]:
    """``ids`` in ``n`` parts of about equal time (``seconds`` per test, ``DEFAULT_ESTIMATE_S`` for
    one not in it): the longest first, each to the part with the least so far; each part in
    collection order. The same ids and times give the same parts."""
    parts: list[list[str]] = [[] for _ in range(n)]
    load = [0.0] * n
    order = {t: i for i, t in enumerate(ids)}
    for t in sorted(ids, key=lambda t: (-seconds.get(t, DEFAULT_ESTIMATE_S), order[t])):
        i = min(range(n), key=lambda i: (load[i], i))
        parts[i].append(t)
        load[i] += seconds.get(t, DEFAULT_ESTIMATE_S)
    return [sorted(p, key=order.__getitem__) for p in parts]


_DURATION = re.compile(r"^([0-9.]+)s (setup|call|teardown) +(\S.*?)\s*$")
_OUTCOME = re.compile(r"^(?:PASSED|FAILED|ERROR) (\S.*?)(?: - .*)?$")  # -rA's summary lines


def durations_in(log: Path) -> dict[str, float]:
    """Seconds per test (setup, call and teardown summed) in a pytest log written with
    ``--durations=0`` (this script's logs; gzipped or not); 0 for a test that ran and took less
    than pytest shows (logs without ``--durations-min=0``)."""
    raw = log.read_bytes()
    text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode(errors="replace")
    found: dict[str, float] = {}
    for line in text.splitlines():
        m = _DURATION.match(line)
        if m:
            found[m.group(3)] = found.get(m.group(3), 0.0) + float(m.group(1))
    for line in text.splitlines():
        m = _OUTCOME.match(line)
        if m and "::" in m.group(1):
            found.setdefault(m.group(1), 0.0)
    return found


def read_durations(path: Path) -> dict[str, float]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        return {str(k): float(v) for k, v in data["seconds"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        sys.exit(f"run_gpu_tests_parallel: {path} is not a durations file ({e}); restore it from git or delete it")


def record(logs: list[Path], path: Path) -> int:
    """Add the durations in ``logs`` to the durations file at ``path`` (a test's newest time replaces its older one)."""
    seconds = read_durations(path)
    new: dict[str, float] = {}
    for log in logs:
        found = durations_in(log)
        if not found:
            sys.exit(f"run_gpu_tests_parallel: {log} holds no test durations (not a log of this script's runs?)")
        new.update(found)
    seconds.update(new)
    data = {
        "about": "seconds per gpu test (setup + call + teardown) in the runs of scripts/run_gpu_tests_parallel.py "
        "whose logs were recorded with --record; --part splits by them",
        "seconds": {k: round(v, 2) for k, v in sorted(seconds.items())},
    }
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{path}: {len(new)} test time(s) recorded, {len(seconds)} in all")
    return 0


def _install(wheels: Path) -> str:
    """The wheels in ``wheels`` installed (no dependencies, no index) into a new temporary folder; its path."""
    files = sorted(str(w) for w in wheels.glob("*.whl"))
    if not files:
        sys.exit(f"run_gpu_tests_parallel: no wheels in {wheels} (build them with `nox -s build`)")
    site = tempfile.mkdtemp(prefix="gpu-tests-site-")
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir"]
    subprocess.run([*pip, "--target", site, *files], check=True)
    return site


def _gpu_count(env: dict[str, str]) -> int:
    code = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    try:
        return int(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return 0


def _start(ids: list[str], log: Path, env: dict[str, str], devices: str) -> tuple[subprocess.Popen, object]:
    run_env = dict(env, CUDA_VISIBLE_DEVICES=devices, TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(prefix="inductor-"))
    fh = open(log, "w")  # closed by _wait
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "gpu",
        "-p",
        "no:cacheprovider",
        "-q",
        "-rA",
        "--durations=0",
        "--durations-min=0",
        *ids,
    ]
    fh.write(f"# CUDA_VISIBLE_DEVICES={devices}: {len(ids)} test(s)\n")
    fh.flush()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=run_env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, fh


def _wait(runs: list[tuple[subprocess.Popen, object]], deadline: float | None) -> list[int]:
    """Wait for ``runs``; at ``deadline`` send SIGINT to each one's group, SIGKILL 20 s later."""
    stopped = False
    while any(p.poll() is None for p, _ in runs):
        now = time.monotonic()
        if deadline is not None and now >= deadline and not stopped:
            for p, _ in runs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGINT)
            stopped, deadline = True, now + 20
        elif stopped and deadline is not None and now >= deadline:
            for p, _ in runs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
        time.sleep(0.5)
    for _, fh in runs:
        fh.close()  # type: ignore[attr-defined]
    return [p.returncode for p, _ in runs]


def _summary(log: Path) -> str:
    pattern = r"\b(passed|failed|errors?|skipped|deselected|no tests ran)\b"
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if re.search(pattern, ln)]
    return lines[-1].strip("= ") if lines else "no summary (stopped before pytest reported)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", default=["tests"], help="test files or node ids (default: tests)")
    ap.add_argument("--deadline-s", type=float, help="stop every run this many seconds after the start")
    ap.add_argument("--multi-s", type=float, default=60.0, help="seconds kept for the multi-GPU tests (default 60)")
    ap.add_argument("--dry-run", action="store_true", help="print the split and run nothing")
    ap.add_argument(
        "--part", type=parse_part, metavar="K/N", help="run the K-th of N parts of about equal recorded time"
    )
    ap.add_argument(
        "--durations", type=Path, default=DURATIONS, help=f"recorded test times (default {DURATIONS.relative_to(ROOT)})"
    )
    ap.add_argument(
        "--wheels", type=Path, metavar="DIR", help="install the wheels in DIR and test them (sources first)"
    )
    ap.add_argument(
        "--record",
        type=Path,
        nargs="+",
        metavar="LOG",
        help="add the durations in these logs to --durations, run nothing",
    )
    args = ap.parse_args(argv)
    if args.record:
        return record(args.record, args.durations)
    start = time.monotonic()
    env = _env()
    single = _collect(args.paths, "gpu and not multi_gpu", env)
    multi = _collect(args.paths, "gpu and multi_gpu", env)
    if args.part:
        k, n_parts = args.part
        seconds = read_durations(args.durations)
        single = split(single, n_parts, seconds)[k - 1]
        multi = multi if k == n_parts else []
        known = sum(seconds.get(t, DEFAULT_ESTIMATE_S) for t in single)
        guessed = sum(t not in seconds for t in single)
        print(
            f"part {k}/{n_parts}: {len(single)} test(s), about {known:.0f} s recorded"
            + (f" ({guessed} not recorded, {DEFAULT_ESTIMATE_S:.0f} s each assumed)" if guessed else "")
        )
    if args.wheels and not args.dry_run:
        site = _install(args.wheels)
        env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], site])
    gpus = _gpu_count(env)
    n = max(1, min(gpus or 2, MAX_PROCESSES))  # a dry run without a GPU shows a two-GPU split
    if args.dry_run:
        for i, part in enumerate(deal(single, n)):
            print(f"GPU {i}: {len(part)} test(s)")
            print("".join(f"  {t}\n" for t in part), end="")
        print(f"then on every GPU: {len(multi)} test(s)")
        print("".join(f"  {t}\n" for t in multi), end="")
        return 0
    if gpus == 0:
        print("run_gpu_tests_parallel: no CUDA GPU visible: the gpu tests would all be skipped", file=sys.stderr)
        return 3
    results = Path(os.environ.get("OUT") or ROOT / "gpu-test-results")
    results.mkdir(parents=True, exist_ok=True)
    probe = "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
    smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    versions = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True).stdout
    (results / "env.txt").write_text(smi + versions)
    print(smi + versions, end="")
    if multi and gpus < 2:  # each needs two GPUs and would skip itself after a pytest start
        print(f"{len(multi)} multi-GPU test(s) not run: one GPU")
        multi = []
    deadline = start + args.deadline_s - (args.multi_s if multi else 0) if args.deadline_s else None
    parts = [p for p in deal(single, n) if p]
    runs = [_start(part, results / f"gpu{i}.log", env, str(i)) for i, part in enumerate(parts)]
    codes = _wait(runs, deadline)
    logs = [results / f"gpu{i}.log" for i in range(len(parts))]
    if multi:
        everything = ",".join(str(i) for i in range(gpus))
        end = start + args.deadline_s if args.deadline_s else None
        codes += _wait([_start(multi, results / "multi.log", env, everything)], end)
        logs.append(results / "multi.log")
    for log, code in zip(logs, codes, strict=True):
        print(f"{log.name}: {_summary(log)} (exit {code})")
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
