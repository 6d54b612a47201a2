"""File helpers shared by every writer: one atomic-write path for datasets, models, tables, plans."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(path: str | os.PathLike[str], data: bytes | str) -> Path:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one, never a part.

    The bytes go to a per-process temp file in the same directory, are fsynced, then
    ``os.replace``-d into place (the temp file is removed on any failure). Parent directories are
    created. Returns the path written.

    Raises:
        OSError: the file cannot be written; the error names ``path`` (or its directory, when that
            cannot be created), never the temp file.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)  # its errors name the directory: left as they are
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    except OSError as e:
        raise _naming(e, p) from None
    try:
        # mkstemp makes the file private (0600); give it the mode a plain open() would have (or
        # keep the mode of the file it replaces).
        try:
            mode = p.stat().st_mode & 0o777
        except OSError:
            mode = 0o666 & ~_umask()
        os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except OSError as e:
        raise _naming(e, p) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return p


def _naming(e: OSError, path: Path) -> OSError:
    """``e`` naming the path the caller asked for instead of the temp file (``/proc/.x.json.abc.tmp``,
    or ``.x.json.abc.tmp -> x.json`` for a directory in the way); OSError picks the same subclass
    (FileNotFoundError, IsADirectoryError, ...) from the errno."""
    if e.errno is None:
        return e
    return OSError(e.errno, e.strerror, str(path))


def _umask() -> int:
    """The process umask, read without changing it where the OS allows (os.umask can only be read
    by setting it, which would race with other threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask
