"""Process helpers shared by the tests that start and stop processes (Linux ``/proc``)."""

from __future__ import annotations

from pathlib import Path


def alive(pid: int) -> bool:
    """Running: not gone and not a zombie. A zombie has ended, only its exit status waits to be
    read (an orphan's by init, which in a container may never read it), and ``os.kill(pid, 0)``
    succeeds on it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
