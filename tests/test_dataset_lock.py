"""``OUT.lock`` (``dataset.output_lock``) held by real processes: torchrun ranks share it, and the
last of them to leave removes it, as an exclusive holder (a local run, a merge) does."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from torch_diode.dataset import lock_path, output_lock
from torch_diode.errors import FileInUseError

#: Holds ``output_lock(argv[1], shared=argv[2] == "shared")`` until a line comes on stdin.
HOLDER = """
import sys
from torch_diode.dataset import output_lock

with output_lock(sys.argv[1], shared=sys.argv[2] == "shared"):
    print("held", flush=True)
    sys.stdin.readline()
"""

#: The moment a last holder leaves: the lock file ``argv[1]`` locked exclusively until a line comes
#: on stdin, then removed, then let go (as ``output_lock`` does it, from ``flock`` itself).
LEAVING = """
import fcntl, os, sys

fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("held", flush=True)
sys.stdin.readline()
os.unlink(sys.argv[1])
"""


class _Holder:
    """A process running ``code`` with ``args``, once it has said "held"."""

    def __init__(self, code: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line != "held\n":
            self.proc.kill()
            raise AssertionError(f"the holder did not take the lock: {line!r} {self.proc.communicate(timeout=60)}")

    def leave(self) -> None:
        """Let it leave the block and end; it must end cleanly."""
        _, err = self.proc.communicate("\n", timeout=60)
        assert self.proc.returncode == 0, err

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=60)


def _refused(out: Path, *, shared: bool) -> bool:
    try:
        with output_lock(out, shared=shared):
            return False
    except FileInUseError as e:
        assert "out.msgpack.lock is locked" in str(e), e
        return True


def test_the_last_torchrun_rank_to_leave_removes_the_lock_file(tmp_path: Path) -> None:
    """Shared holders (torchrun ranks) left OUT.lock behind: none knew it was the last. A rank
    that leaves while another still runs keeps the file and the other's lock (a local run is
    still refused, another rank still joins the same file); the last one removes it."""
    out = tmp_path / "out.msgpack"
    lock = lock_path(out)
    first = _Holder(HOLDER, str(out), "shared")
    second = _Holder(HOLDER, str(out), "shared")
    try:
        inode = lock.stat().st_ino
        first.leave()
        assert lock.exists() and lock.stat().st_ino == inode
        assert _refused(out, shared=False)  # the second rank's lock holds
        with output_lock(out, shared=True):  # a rank joining it takes the same file
            assert lock.stat().st_ino == inode
        assert lock.exists() and lock.stat().st_ino == inode  # not the last either
        assert _refused(out, shared=False)
        second.leave()
        assert not lock.exists()
    finally:
        first.close()
        second.close()
    with output_lock(out):  # a local run after the ranks, as before
        assert lock.exists()
    assert not lock.exists()


def test_ranks_that_leave_together_remove_the_lock_file(tmp_path: Path) -> None:
    """Several ranks leaving at once: each asks for the file exclusively as it leaves, and the
    last to ask gets it (a refused ask lets go of the asker's shared lock), so none is left."""
    out = tmp_path / "out.msgpack"
    holders = [_Holder(HOLDER, str(out), "shared") for _ in range(4)]
    try:
        for h in holders:
            assert h.proc.stdin is not None
            h.proc.stdin.write("\n")
            h.proc.stdin.flush()
        for h in holders:
            h.leave()
    finally:
        for h in holders:
            h.close()
    assert not lock_path(out).exists()


def test_an_exclusive_holder_keeps_out_the_ranks_and_removes_the_file(tmp_path: Path) -> None:
    """A local run (exclusive) in another process: a rank is refused while it runs, and the lock
    file goes with it, as before."""
    out = tmp_path / "out.msgpack"
    run = _Holder(HOLDER, str(out), "exclusive")
    try:
        assert _refused(out, shared=True) and _refused(out, shared=False)
        run.leave()
    finally:
        run.close()
    assert not lock_path(out).exists()
    assert not _refused(out, shared=True)
    assert not lock_path(out).exists()  # that rank was the last, and the only one


@pytest.mark.parametrize("shared", [True, False], ids=["rank", "local"])
def test_a_run_starting_while_the_last_holder_removes_the_file_is_not_refused(tmp_path: Path, shared: bool) -> None:
    """The last holder leaving holds the file exclusively for a moment, to remove it. A run that
    asks just then (a rank of a later torchrun, a local run) waits for that moment instead of
    being refused as if a collection were running, and takes the new lock file."""
    out = tmp_path / "out.msgpack"
    lock = lock_path(out)
    leaving = _Holder(LEAVING, str(lock))
    timer = threading.Timer(0.05, leaving.leave)  # while this run asks for the lock
    timer.start()
    try:
        with output_lock(out, shared=shared):
            assert lock.exists()
    finally:
        timer.join()
        leaving.close()
    assert not lock.exists()
