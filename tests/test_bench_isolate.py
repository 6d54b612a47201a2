# ruff: noqa: F811  (pytest fixtures imported from test_inductor_helpers are redefined as arguments)
"""``torch_diode.bench.isolate``: a function run in a new process with new, empty Inductor and
Triton cache folders (real processes, a real CPU Inductor compile), its result or its failure,
and nothing left behind; and the GPU measurements' entry points reached through it (on this CPU
machine they fail for want of CUDA, which shows the request reached them whole)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from procs import alive
from test_inductor_helpers import diode_dataset, model_path  # noqa: F401  (fixtures)

from torch_diode.bench.isolate import run_in_new_process
from torch_diode.demo import gpu_demo

REPO = Path(__file__).resolve().parents[1]

PROBE = textwrap.dedent(
    '''
    import os, signal, subprocess, sys, time
    from pathlib import Path


    def where(x):
        """The child's pid, its cache folders and whether they were empty, and its argument."""
        folders = {k: os.environ[k] for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
        empty = all(not os.path.exists(p) or not os.listdir(p) for p in folders.values())
        return {"pid": os.getpid(), "x": x, "empty": empty, "extra": os.environ.get("PROBE_EXTRA"), **folders}


    def compile_on_cpu():
        """A real Inductor compile: where its cache went, and what Inductor thinks its cache folder is."""
        import torch
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        fn = torch.compile(lambda a: (a.sin() + 1).sum(), backend="inductor")
        value = float(fn(torch.ones(8)))
        root = os.environ["TORCHINDUCTOR_CACHE_DIR"]
        written = sum(len(files) for _, _, files in os.walk(root))
        return {"value": value, "cache_dir": cache_dir(), "root": root, "files_written": written}


    def worker_folders_in_compiles():
        """Two CPU compiles as a new measuring process does them (a warm-up, then the measured one,
        each in ``cold_compile_state(fresh_caches=False)``): the Triton folder inside each compile,
        here and in a compile worker."""
        from functools import partial

        import torch
        from torch._inductor import config
        from torch._inductor.async_compile import AsyncCompile

        from torch_diode.bench.measure import cold_compile_state

        seen = []

        def look(graph):
            ask = partial(os.getenv, "TRITON_CACHE_DIR")
            seen.append([os.environ["TRITON_CACHE_DIR"], AsyncCompile.process_pool().submit(ask).result(timeout=300)])

        with config.patch(compile_threads=2, post_grad_custom_post_pass=look):
            for k in (1.0, 2.0):
                with cold_compile_state(fresh_caches=False):
                    torch.compile(lambda a: (a.sin() + k).sum())(torch.ones(8))
        return {"seen": seen}


    def nap(seconds):
        time.sleep(seconds)
        return {"slept": seconds}


    def report_error():
        print("what the compile said before it failed", flush=True)
        return {"error": "RuntimeError: the compile failed (reported by the function)"}


    def boom():
        raise ValueError("boom: the measured function failed")


    def not_a_dict():
        return [1, 2]


    def die(code):
        print("about to exit", flush=True)
        os._exit(code)


    def kill_self():
        print("about to be killed", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


    def tell_and_sleep(pid_file):
        """Write this process's pid and its work folder, then sleep (a long measurement)."""
        work = str(Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]).parent)
        Path(pid_file).write_text(f"{os.getpid()} {work}")
        time.sleep(120)
        return {}


    def leave_a_worker(pid_file, then_sleep_s=0.0):
        """Start a long-lived process (as Inductor starts compile workers), write its pid, sleep."""
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        Path(pid_file).write_text(str(worker.pid))
        time.sleep(then_sleep_s)
        return {"worker": worker.pid}
    '''
)


@pytest.fixture(autouse=True)
def private_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The new processes' folders go to a directory of this test's own (the processes it starts
    inherit TMPDIR): another job writing to the system's temporary directory cannot change what
    ``_isolated_folders()`` finds."""
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", str(private))


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    (tmp_path / "isolate_probe.py").write_text(PROBE)
    return tmp_path


def _wait_gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    return False


def _isolated_folders() -> set[str]:
    """The new processes' folders in the temporary directory now."""
    return {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("diode-isolated-")}


def test_runs_in_a_new_process_with_new_empty_cache_folders(probe: Path) -> None:
    before = _isolated_folders()
    got = [
        run_in_new_process("isolate_probe:where", {"x": [1, "a"]}, paths=[probe], env={"PROBE_EXTRA": "yes"})
        for _ in range(2)
    ]
    for r in got:
        assert r["pid"] != os.getpid() and r["x"] == [1, "a"] and r["empty"] and r["extra"] == "yes"
        assert r["process_s"] > 0
        assert Path(r["TRITON_CACHE_DIR"]).parent == Path(r["TORCHINDUCTOR_CACHE_DIR"]).parent
        assert not Path(r["TORCHINDUCTOR_CACHE_DIR"]).parent.exists()  # deleted after
    assert got[0]["pid"] != got[1]["pid"] and got[0]["TORCHINDUCTOR_CACHE_DIR"] != got[1]["TORCHINDUCTOR_CACHE_DIR"]
    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR") != got[0]["TORCHINDUCTOR_CACHE_DIR"]
    assert _isolated_folders() <= before


def test_inductor_in_the_new_process_compiles_into_its_folder(probe: Path) -> None:
    r = run_in_new_process("isolate_probe:compile_on_cpu", paths=[probe], timeout_s=300)
    assert "error" not in r, r
    assert r["value"] == pytest.approx(8 * (1 + 0.8414709848), rel=1e-5)
    assert r["cache_dir"] == r["root"] and r["files_written"] > 0
    assert not Path(r["root"]).exists()


@pytest.mark.parametrize(
    ("target", "kwargs", "expected"),
    [
        ("isolate_probe:boom", {}, "ValueError: boom: the measured function failed"),
        ("isolate_probe:not_a_dict", {}, "TypeError: isolate_probe:not_a_dict returned list, not a dict"),
        ("isolate_probe:die", {"code": 3}, "the measuring process exited with code 3; its output ended: about to exit"),
        (
            "isolate_probe:kill_self",
            {},
            "the measuring process was killed by signal 9; its output ended: about to be killed",
        ),
        ("isolate_probe:no_such_function", {}, "AttributeError: module 'isolate_probe' has no attribute"),
        ("isolate_probe:where", {"y": 1}, "TypeError: where() got an unexpected keyword argument 'y'"),
    ],
)
def test_a_failure_comes_back_as_an_error_saying_what(
    probe: Path, target: str, kwargs: dict, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    before = _isolated_folders()
    r = run_in_new_process(target, kwargs, paths=[probe])
    assert set(r) == {"error", "process_s"} and r["error"].startswith(expected), r
    logged = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(logged) == 1 and logged[0].startswith(f"a measurement in a new process failed: {r['error']}\n")
    assert ("Traceback" in logged[0]) != ("about to" in logged[0])  # the end of its output, logged
    assert _isolated_folders() <= before


def test_an_error_the_function_reports_keeps_the_process_output(probe: Path, caplog: pytest.LogCaptureFixture) -> None:
    r = run_in_new_process("isolate_probe:report_error", paths=[probe])
    assert r["error"] == "RuntimeError: the compile failed (reported by the function)" and "process_s" in r
    logged = [m.getMessage() for m in caplog.records if m.levelname == "WARNING"]
    assert len(logged) == 1 and logged[0].startswith(f"a measurement in a new process reported: {r['error']}\n")
    assert "what the compile said before it failed" in logged[0]


def test_a_timeout_kills_the_process_and_what_it_started(probe: Path) -> None:
    pid_file = probe / "worker.pid"
    t0 = time.monotonic()
    r = run_in_new_process(
        "isolate_probe:leave_a_worker",
        {"pid_file": str(pid_file), "then_sleep_s": 120},
        paths=[probe],
        timeout_s=8,
        # the probe needs no torch: without the plugins' import of it the child starts in 0.2 s, not
        # 2-3 s (18 s on a loaded 2-core machine: killed before it wrote the pid file)
        env={"TORCH_DIODE_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert time.monotonic() - t0 < 60
    assert r["error"].startswith("did not finish within 8 s (killed)"), r
    assert _wait_gone(int(pid_file.read_text()))


PARENT = """
import sys
from torch_diode.bench.isolate import run_in_new_process
from torch_diode.demo import gpu_demo
run_in_new_process("isolate_probe:tell_and_sleep", {"pid_file": sys.argv[1]}, paths=[sys.argv[2]])
"""


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGKILL"])
def test_the_process_goes_with_its_parent(probe: Path, signal_name: str) -> None:
    """``kill`` / ``timeout`` (SIGTERM) on the measuring tool, or SIGKILL, leaves no measurement
    running on the GPU and no folder behind: SIGTERM stops the wait as Ctrl-C does; after a
    SIGKILL the child notices its parent gone."""
    import signal
    import subprocess

    pid_file = probe / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(pid_file), str(probe)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (pid_file.is_file() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    child, work = pid_file.read_text().split()
    assert alive(int(child)) and Path(work).is_dir()
    parent.send_signal(getattr(signal, signal_name))
    _, err = parent.communicate(timeout=60)
    assert parent.returncode != 0
    if signal_name == "SIGTERM":
        assert b"Terminated: signal 15" in err, err
    assert _wait_gone(int(child))
    deadline = time.monotonic() + 10
    while Path(work).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(work).exists()


EARLY_DEATH = """
import os, signal, subprocess, sys, threading
from torch_diode.bench.isolate import run_in_new_process
started = threading.Event()
class Started(subprocess.Popen):
    def __init__(self, cmd, *args, **kwargs):
        super().__init__(cmd, *args, **kwargs)
        if "torch_diode.bench.isolate" in cmd:  # the measuring process: its work folder, told
            open(sys.argv[2], "w").write(os.path.dirname(cmd[-2]))
            started.set()
subprocess.Popen = Started
threading.Thread(target=run_in_new_process, args=("isolate_probe:nap", {"seconds": 120}),
                 kwargs={"paths": [sys.argv[1]]}, daemon=True).start()
started.wait(30)  # the child started and is still importing when this process is killed
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_parent_gone_while_the_process_starts_is_noticed(probe: Path) -> None:
    import subprocess

    before = _isolated_folders()
    told = probe / "work.txt"
    subprocess.run([sys.executable, "-c", EARLY_DEATH, str(probe), str(told)], timeout=60)
    work = Path(told.read_text())  # killed after the measuring process started, not before
    assert work.name.startswith("diode-isolated-") and work.name not in before
    deadline = time.monotonic() + 30
    while _isolated_folders() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _isolated_folders() <= before and not work.exists()


KILLED_BEFORE_THE_CHILD = """
import os, signal, sys
from torch_diode.bench.isolate import run_in_new_process


def at_popen(event, args):  # SIGKILLed once its work folder is made, as it starts the measuring process
    if event == "subprocess.Popen" and "torch_diode.bench.isolate" in list(args[1]):
        open(sys.argv[2], "w").write(os.path.dirname(args[1][-2]))
        os.kill(os.getpid(), signal.SIGKILL)


sys.addaudithook(at_popen)
run_in_new_process("isolate_probe:nap", {"seconds": 120}, paths=[sys.argv[1]])
"""


def _state(pid: int) -> str:
    """A process's state letter (``T``: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _start_parent(probe: Path, name: str) -> tuple[subprocess.Popen[bytes], int, Path]:
    """PARENT in a new process, measuring in a child of its own: (the parent, the child's pid, its work folder)."""
    pid_file = probe / f"{name}.pid"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(pid_file), str(probe)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (pid_file.is_file() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    child, work = pid_file.read_text().split()
    return parent, int(child), Path(work)


def test_folders_left_by_killed_processes_are_deleted_by_the_next_run(probe: Path) -> None:
    """A SIGKILL of the measuring tool between making its work folder and starting the measuring
    process, or of both at once (the OOM killer), left the folder (Inductor's and Triton's caches)
    in the temporary directory for good: the next run, in any process, deletes it. The folder of
    a run still going, another process's, is kept."""
    live_parent, live_child, live = _start_parent(probe, "live")
    try:
        told = probe / "work.txt"
        killed = subprocess.run([sys.executable, "-c", KILLED_BEFORE_THE_CHILD, str(probe), str(told)], timeout=120)
        assert killed.returncode == -signal.SIGKILL
        early = Path(told.read_text())
        assert early.name.startswith("diode-isolated-") and (early / "request.json").is_file()
        # the next run, of another process: it deletes that folder, and is then SIGKILLed with its child,
        # stopped first so that neither sees the other go (no one deletes its folder)
        parent, child, both = _start_parent(probe, "both")
        assert not early.exists()
        parent.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while _state(parent.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(child, signal.SIGKILL)
        parent.kill()
        parent.wait(60)
        assert _wait_gone(child) and (both / "request.json").is_file()
        r = run_in_new_process("isolate_probe:where", {"x": 1}, paths=[probe])
        assert "error" not in r, r
        assert not both.exists()
        assert (live / "request.json").is_file() and alive(live_child)
    finally:
        live_parent.terminate()
        live_parent.wait(60)
    assert _wait_gone(live_child)


def test_only_this_users_folders_of_processes_that_are_gone_are_deleted(probe: Path, tmp_path: Path) -> None:
    """What a work folder's name says, checked: a reused pid is not its owner (the start time in
    the name differs), a pid of another pid namespace or of another machine (boot id) sharing the
    temporary directory is not looked up here, nor one of an unknown machine, and nothing but this
    user's folders of that name is touched (a link to a folder, a file, another user's folder, a
    folder of an older torch-diode's name)."""

    def start_time(pid: int) -> int:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])

    if not Path("/proc/self/ns/pid").exists():
        pytest.skip("no /proc: folders are named without start times and namespaces")
    namespace = int("".join(c for c in os.readlink("/proc/self/ns/pid") if c.isdigit()))
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:12]
    other_boot = f"{(int(boot, 16) + 1) % 16**12:012x}"
    gone = subprocess.Popen(["sleep", "60"])
    gone_start = start_time(gone.pid)
    gone.kill()
    gone.wait()
    dead = f"{gone.pid}-{gone_start}-{namespace}-{boot}"
    me = f"{os.getpid()}-{start_time(os.getpid())}-{namespace}-{boot}"
    reused = f"{os.getpid()}-{start_time(os.getpid()) + 1}-{namespace}-{boot}"  # this pid, another process's start
    tmp = Path(tempfile.gettempdir())
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    deleted = [tmp / f"diode-isolated-{dead}-deadpid0", tmp / f"diode-isolated-{reused}-reused00"]
    kept = [
        tmp / f"diode-isolated-{me}-mine0000",  # this process's
        tmp / f"diode-isolated-{gone.pid}-{gone_start}-{namespace + 1}-{boot}-otherns0",
        tmp / f"diode-isolated-{gone.pid}-{gone_start}-{namespace}-{other_boot}-otherhst",  # another machine's
        tmp / f"diode-isolated-{gone.pid}-{gone_start}-{namespace}-x-nobootid",
        tmp / "diode-isolated-abcd1234",  # an older torch-diode's (no owner in the name)
    ]
    if os.geteuid() == 0:  # only root can give a folder to another user
        kept.append(tmp / f"diode-isolated-{dead}-otheruid")
    link, file = tmp / f"diode-isolated-{dead}-symlink0", tmp / f"diode-isolated-{dead}-afile000"
    try:
        for d in deleted + kept:
            d.mkdir()
            (d / "inductor").mkdir()
            (d / "inductor" / "cache.bin").write_bytes(b"x" * 100)
        if os.geteuid() == 0:
            os.chown(kept[-1], 65534, 65534)
        link.symlink_to(outside, target_is_directory=True)
        file.write_text("not a folder")
        r = run_in_new_process("isolate_probe:where", {"x": 1}, paths=[probe])
        assert "error" not in r, r
        assert [d.exists() for d in deleted] == [False, False]
        assert all((d / "inductor" / "cache.bin").is_file() for d in kept), [d.name for d in kept if not d.exists()]
        assert link.is_symlink() and (outside / "keep.txt").read_text() == "keep" and file.read_text() == "not a folder"
    finally:  # what the test made in the temporary directory, not left there
        for d in deleted + kept:
            shutil.rmtree(d, ignore_errors=True)
        link.unlink(missing_ok=True)
        file.unlink(missing_ok=True)


def test_a_process_that_sees_another_namespaces_proc_records_no_start_time() -> None:
    """In a pid namespace of its own that still sees its parent's ``/proc`` (``unshare --pid``
    without ``--mount-proc``), ``/proc/PID`` is another process: a start time read there would
    make the folder's owner look gone once that other process ends. None is recorded (``x``), and
    the pid alone is looked up."""
    import shutil as sh

    if sh.which("unshare") is None:
        pytest.skip("no unshare(1)")
    code = "import os; from torch_diode.bench.isolate import _folder_prefix; print(os.getpid(), _folder_prefix())"
    r = subprocess.run(["unshare", "--pid", "--fork", sys.executable, "-c", code], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot make a pid namespace here: {r.stderr.strip()[-200:]}")
    pid, prefix = r.stdout.split()
    assert prefix.startswith(f"diode-isolated-{pid}-x-"), prefix


def test_run_by_hand_the_process_deletes_nothing(probe: Path, tmp_path: Path) -> None:
    """``python -m torch_diode.bench.isolate REQUEST RESULT`` started by hand (no parent to watch)
    deletes nothing when whoever started it goes."""
    import subprocess

    work = tmp_path / "mine"
    work.mkdir()
    (work / "notes.txt").write_text("keep me")
    request = {"target": "isolate_probe:nap", "kwargs": {"seconds": 3}, "paths": [str(probe)]}
    (work / "request.json").write_text(json.dumps(request))
    run = f"{sys.executable} -m torch_diode.bench.isolate request.json result.json & sleep 0.5"
    subprocess.run(["/bin/sh", "-c", run], cwd=work, timeout=60, check=True)  # the shell goes first
    deadline = time.monotonic() + 60
    while not (work / "result.json").is_file() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert json.loads((work / "result.json").read_text()) == {"slept": 3}
    assert (work / "notes.txt").read_text() == "keep me"


def test_workers_left_behind_by_a_finished_process_are_stopped(probe: Path) -> None:
    pid_file = probe / "worker.pid"
    r = run_in_new_process("isolate_probe:leave_a_worker", {"pid_file": str(pid_file)}, paths=[probe])
    assert r["worker"] == int(pid_file.read_text())
    assert _wait_gone(r["worker"])


@pytest.mark.parametrize(
    ("target", "kwargs", "error", "match"),
    [
        ("isolate_probe.where", {}, ValueError, "expected 'module:function'"),
        ("isolate_probe:where", {"x": object()}, TypeError, "not JSON serializable"),
    ],
)
def test_a_bad_request_is_refused_before_starting(target: str, kwargs: dict, error: type, match: str) -> None:
    before = _isolated_folders()
    with pytest.raises(error, match=match):
        run_in_new_process(target, kwargs)
    with pytest.raises(ValueError, match="timeout_s: must be a positive number of seconds, got 0"):
        run_in_new_process("isolate_probe:where", {"x": 1}, timeout_s=0)
    assert _isolated_folders() <= before


# -- the measurements' entry points, reached through a new process --------------------------------


def _cuda_missing(error: str) -> bool:
    return "CUDA" in error or "cuda" in error


@pytest.fixture(scope="module")
def no_gpu() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU (the gpu tests measure for real)")


def test_bench_measurement_reaches_its_case_and_records_the_failure(no_gpu: None, model_path: Path) -> None:
    """Through a new process to the case's build on the GPU (a CUDA error here); a diode mode
    loads its model first (a model file that is not there says so); a case not in the suite is refused."""
    from torch_diode.bench.run import BenchOptions, _measure_one
    from torch_diode.bench.suite import quick_gemms, suite

    case = quick_gemms()[0]
    options = BenchOptions(out=Path("unused"))
    for mode, model in (("max-autotune", None), ("diode-top1", str(model_path))):
        entry = _measure_one(case, mode, model, options, timeout_s=300)
        assert set(entry) == {"error", "process_s"} and _cuda_missing(entry["error"]), entry
        assert "TypeError" not in entry["error"] and "ValueError" not in entry["error"]
    entry = _measure_one(case, "diode-top1", "/nowhere/m.safetensors", options, timeout_s=300)
    assert entry["error"].startswith("ModelFormatError: /nowhere/m.safetensors: no such model file"), entry
    other = dataclasses.replace(case, problem=dataclasses.replace(case.problem, m=12345))
    assert other.name not in {c.name for c in suite("quick")}
    entry = _measure_one(other, "default", None, options, timeout_s=300)
    assert entry["error"] == f"ValueError: case {other.name!r}: not in the quick suite", entry


def test_bench_measurement_stopped_by_the_time_budget_says_so() -> None:
    from torch_diode.bench.run import BenchOptions, _measure_one
    from torch_diode.bench.suite import quick_gemms

    # the new process cannot even import torch in 0.3 s
    entry = _measure_one(quick_gemms()[0], "max-autotune", None, BenchOptions(out=Path("unused")), timeout_s=0.3)
    assert entry["error"].startswith("did not finish within 0.3 s (killed)"), entry
    assert "that was the rest of --time-budget: a later run tries it again if its budget is larger" in entry["error"]
    assert entry["timed_out"] is True and entry["timeout_s"] == 0.3


def test_demo_measurement_reaches_the_mlp(no_gpu: None, model_path: Path) -> None:
    """Through a new process each to the MLP's build on the GPU; torch-diode's loads its model first."""
    from torch_diode.errors import MeasurementError

    with pytest.raises(MeasurementError, match="the GPU part's stock max-autotune compile failed: ") as e:
        gpu_demo(model_path, model_name="test")
    assert _cuda_missing(str(e.value)) and "TypeError" not in str(e.value) and "--cpu-only" in str(e.value)
    for model, expected in ((model_path, "CUDA"), ("/nowhere/m.safetensors", "ModelFormatError: /nowhere/m.saf")):
        kwargs = {"mode": "diode-top3", "model_path": str(model), "graph_iters": 2, "reps": 2}
        r = run_in_new_process("torch_diode.demo:measure_mlp", kwargs)
        assert expected in r["error"] and "TypeError" not in r["error"], r


def test_handler_check_compile_reaches_its_problem(no_gpu: None, model_path: Path) -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from check_handler_gpu import SPEED_PROBLEMS, compile_in_new_process
    finally:
        sys.path.remove(str(REPO / "scripts"))
    for dynamic, after_pool_s in ((False, None), (True, None), (False, 5.0)):
        r = compile_in_new_process(
            str(model_path),
            {"top_k_configs": 2},
            SPEED_PROBLEMS[0],
            graph_iters=2,
            reps=2,
            dynamic=dynamic,
            after_pool_s=after_pool_s,
        )
        assert set(r) == {"error", "process_s"} and _cuda_missing(r["error"]), r
        assert "TypeError" not in r["error"]
    json.dumps(r)


def test_a_new_process_compiles_in_the_folders_its_workers_have(probe: Path) -> None:
    """In a measuring process the warm-up starts the compile workers; the measured compile runs
    in the folders they have (Inductor's ``force_disable_caches`` would give each compile a folder
    of its own)."""
    r = run_in_new_process("isolate_probe:worker_folders_in_compiles", paths=[probe], timeout_s=400)
    assert "error" not in r, r
    (here1, worker1), (here2, worker2) = r["seen"]
    assert here1 == worker1 == here2 == worker2


# -- in one process: the compile workers follow each cold compile's folders -------------------------


def test_a_cold_compile_state_starts_compile_workers_on_its_own_folders() -> None:
    """Inductor's compile workers keep the cache folders they started with; each
    ``cold_compile_state()`` shuts them down, so the workers its compile starts use its folders."""
    from functools import partial

    from torch._inductor import config as inductor_config
    from torch._inductor.async_compile import AsyncCompile, shutdown_compile_workers

    from torch_diode.bench.measure import cold_compile_state

    seen = []
    try:
        with inductor_config.patch(compile_threads=2):
            for _ in range(2):
                with cold_compile_state():
                    ask = partial(os.getenv, "TRITON_CACHE_DIR")
                    in_worker = AsyncCompile.process_pool().submit(ask).result(timeout=300)
                    seen.append((os.environ["TRITON_CACHE_DIR"], in_worker))
    finally:
        shutdown_compile_workers()
    (here1, worker1), (here2, worker2) = seen
    assert here1 != here2
    assert (worker1, worker2) == (here1, here2)
