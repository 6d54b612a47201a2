"""The torch-diode exception hierarchy: every error we raise on purpose derives from DiodeError."""

from __future__ import annotations

from pathlib import Path

from torch_diode._text import plural


class DiodeError(Exception):
    """Base class of every torch-diode error."""


class DatasetFormatError(DiodeError, ValueError):
    """A dataset file is malformed, truncated or of an unknown kind. The message names the file."""


class SchemaVersionError(DatasetFormatError):
    """A file was written with a schema version this torch-diode cannot read."""

    def __init__(self, path: str, found: object, supported: int | tuple[int, ...], regenerate: str = "") -> None:
        self.path = path
        self.found = found
        self.supported = supported
        hint = regenerate or (
            "upgrade torch-diode-lib if the file is newer, or regenerate it with the matching `diode` command"
        )
        reads = (
            f"version {supported}"
            if isinstance(supported, int)
            else f"version{'s' if len(supported) > 1 else ''} {', '.join(map(str, supported))}"
        )
        super().__init__(f"{path}: schema version {found!r} is not supported (this torch-diode reads {reads}); {hint}")


class DamagedFileError(DatasetFormatError):
    """A dataset file damaged inside its complete part: not what an interrupted write leaves, so it
    is neither read nor cut there (the message says what ``diode data recover`` can copy out)."""


class TruncatedFileError(DatasetFormatError):
    """A dataset stream ends in the middle of a chunk (an interrupted writer).

    ``complete_records`` says how many records the complete chunks before the break hold; read
    the file with ``recover=True`` (or ``diode data recover``) to keep them.
    """

    def __init__(self, path: str, complete_chunks: int, complete_records: int, detail: str) -> None:
        self.path = path
        self.complete_chunks = complete_chunks
        self.complete_records = complete_records
        if complete_chunks == 0:
            what = (
                f"{path}: file is truncated ({detail}) inside its first chunk of records: no record of it is "
                "complete, so there is nothing to recover; collect it again (a collector resumes its own "
                "interrupted output by itself)"
            )
        else:
            what = (
                f"{path}: file is truncated after {plural(complete_chunks, 'complete chunk')} holding "
                f"{plural(complete_records, 'record')} ({detail}); `diode data recover {path} --output FIXED{Path(path).suffix}` writes the "
                "complete part to a new file (in Python: read_dataset(path, recover=True))"
            )
        super().__init__(what)


class ModelFormatError(DiodeError, ValueError):
    """A model file is not a torch-diode model, has another schema, or is corrupt."""


class HardwareError(DiodeError):
    """The GPU could not be identified or does not match what was asked for."""


class ModelNotFoundError(DiodeError, LookupError):
    """No model of the requested name or hardware key is available."""


class HandlerNotInstalledError(DiodeError):
    """The choices handler could not be installed (torch older than 2.10, ``TORCH_DIODE_DISABLE=1``)."""


class FileInUseError(DiodeError):
    """A dataset file is being written by another open writer (another collection into it)."""


class CollectionError(DiodeError):
    """A collection run failed as a whole (for example it measured nothing)."""


class MeasurementError(DiodeError):
    """A GPU measurement (a benchmark's compile or run, in a process of its own) failed."""


class Terminated(KeyboardInterrupt):
    """SIGTERM stopped a collection (``kill``, ``timeout``): raised in place of Python's immediate
    exit so that it is cleaned up as an interrupt is. A ``KeyboardInterrupt``: code that handles
    Ctrl-C handles it too. The ``diode`` CLI exits with 143 (128 + SIGTERM) for it."""
