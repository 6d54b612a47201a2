"""Datasets of timing records: the in-memory columnar ``Dataset`` and its two file formats.

File layout, the same for both formats:

* a stream of objects: one **header** ``{"format": "torch-diode-dataset", "schema_version": 1,
  "created_by": ...}`` (2 for a compressed msgpack file, below) followed by any number of **chunks**;
* a chunk defines the sources (provenance), problems and choices it introduces, each as
  ``[id, dict]`` pairs, and holds records as columns ``problem``, ``choice``, ``time_us``,
  ``source`` (ids into those tables) plus ``failures``.

msgpack files (``.msgpack``) are concatenated msgpack objects; the record columns are raw
little-endian arrays (int32, int32, float64, uint16), so a million records take about 18 MB and
load in well under a second. A msgpack file of schema version 2 (what ``write_dataset`` and
``DatasetWriter`` write unless told ``compress=False``) stores each chunk compressed: the object
``{"zlib": BYTES}``, where BYTES is the zlib stream of the chunk's msgpack encoding. Timing data
compresses about 5x (the repeated failure messages, the sorted ids, the times' exponents: the
H100's 355,000 training records take 2.3 MB instead of 12.1 MB, and read in 0.4 s instead of
0.6 s on the dev CPU). Version-1 files (plain chunks) are read as before, and a writer resuming
one keeps it plain. JSON files (``.json``/``.jsonl``) hold one JSON object per line, with
the columns as plain lists; Python's float repr makes every time round-trip exactly.

Because a chunk is self-contained and appended whole, a writer interrupted at any moment leaves
a file whose complete chunks are intact. Reading such a file raises ``TruncatedFileError``
unless ``recover=True``, which keeps the complete chunks (``DatasetWriter`` resumes this way).
A file whose end is not what an interrupted write leaves (damage inside its complete part: see
``_damage_in_tail``) is refused either way, and never cut.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

import msgpack
import numpy as np

from torch_diode._files import atomic_write
from torch_diode._text import plural
from torch_diode.errors import (
    DamagedFileError,
    DatasetFormatError,
    FileInUseError,
    SchemaVersionError,
    TruncatedFileError,
)
from torch_diode.records import Choice, FailureRecord, Problem, Provenance, TimingRecord

FORMAT_NAME = "torch-diode-dataset"
#: The schema version of compressed msgpack files (uncompressed files are written as version 1).
SCHEMA_VERSION = 2
#: The schema versions this torch-diode reads, per format: 1 (plain chunks), 2 (msgpack chunks
#: compressed; JSON files are always version 1).
READABLE_SCHEMA_VERSIONS: dict[str, tuple[int, ...]] = {"msgpack": (1, 2), "json": (1,)}
#: zlib level of compressed chunks (on the H100's training file, 9 makes it 6% smaller and compresses
#: 7x slower: 7.2 s against 1.0 s on the dev CPU; either decompresses in 0.05 s).
_ZLIB_LEVEL = 6
Format = Literal["json", "msgpack"]
FORMATS: tuple[str, ...] = ("json", "msgpack")

_COLUMNS: tuple[tuple[str, str], ...] = (("problem", "<i4"), ("choice", "<i4"), ("time_us", "<f8"), ("source", "<u2"))
#: The keys of a chunk (a compressed one's, once decompressed).
_CHUNK_KEYS = frozenset({"sources", "problems", "choices", "records", "failures"})
#: The first bytes of every msgpack chunk torch-diode writes (``_encode_chunk``'s object as msgpack
#: packs it): a compressed chunk ``{"zlib": BYTES}``, and a plain one, whose first key is "sources".
_CHUNK_STARTS = (b"\x81\xa4zlib", b"\x85\xa7sources")
#: A compressed chunk's BYTES: msgpack's bin header bytes, and how many bytes the length takes.
_BIN_LENGTH_BYTES = {0xC4: 1, 0xC5: 2, 0xC6: 4}


def _empty_columns() -> dict[str, list[Any]]:
    """One empty list per record column, named as in the files."""
    return {name: [] for name, _ in _COLUMNS}


def format_for_path(path: str | os.PathLike[str], fmt: str | None = None) -> Format:
    """The file format named by ``fmt`` or, when it is None, by the path's extension.

    Raises:
        DatasetFormatError: the path is a directory (whose name says nothing of a format).
        ValueError: neither says json or msgpack.
    """
    if fmt is None and Path(path).is_dir():  # its empty "extension" is not what is wrong with it
        raise DatasetFormatError(_is_a_directory(path))
    if fmt is not None:
        if fmt not in FORMATS:
            raise ValueError(f"format: unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
        return fmt  # type: ignore[return-value]
    suffix = Path(path).suffix.lower()
    if suffix == ".partial":  # a collection's checkpointed parts, OUT.<ext>.partial: OUT's format
        suffix = Path(Path(path).stem).suffix.lower()
    if suffix in (".json", ".jsonl"):
        return "json"
    if suffix in (".msgpack", ".mpk", ".msgp"):
        return "msgpack"
    # No flag is named here: not every command that reads or writes a dataset has a --format (the
    # CLI adds it where the command has one).
    raise ValueError(f"{path}: cannot tell the format from the extension {suffix!r}; name the file .json or .msgpack")


def _is_a_directory(path: str | os.PathLike[str]) -> str:
    """What is said of a directory given as a dataset file, to read or to write (a command with a
    directory option, such as ``--data-dir``, adds it)."""
    return f"{path}: is a directory, not a dataset file; name the dataset file(s) instead (.json or .msgpack)"


@dataclass(frozen=True)
class ProblemTimings:
    """All measurements of one problem: parallel arrays of choice ids and times (µs)."""

    problem: Problem
    choice_idx: np.ndarray  # [R] int32, ids into Dataset.choices
    time_us: np.ndarray  # [R] float64

    def median_by_choice(self) -> dict[int, float]:
        """Median time per choice id (repeated measurements collapse to their median)."""
        out: dict[int, float] = {}
        order = np.argsort(self.choice_idx, kind="stable")
        ids, starts = np.unique(self.choice_idx[order], return_index=True)
        bounds = [*starts[1:].tolist(), len(order)]
        for cid, s, e in zip(ids.tolist(), starts.tolist(), bounds):
            out[int(cid)] = float(np.median(self.time_us[order[s:e]]))
        return out


class Dataset:
    """A columnar set of timing records with provenance.

    ``problems``, ``choices`` and ``sources`` are de-duplicated tables; the arrays ``problem_idx``,
    ``choice_idx``, ``source_idx`` (ids into them) and ``time_us`` hold one entry per record.
    A record's hardware key is its source's. Build one with ``Dataset.from_records`` or
    ``read_dataset``; combine several with ``merge_datasets``.
    """

    def __init__(
        self,
        *,
        sources: Sequence[Provenance],
        problems: Sequence[Problem],
        choices: Sequence[Choice],
        problem_idx: np.ndarray,
        choice_idx: np.ndarray,
        time_us: np.ndarray,
        source_idx: np.ndarray,
        failures: Sequence[FailureRecord] = (),
    ) -> None:
        self.sources = list(sources)
        self.problems = list(problems)
        self.choices = list(choices)
        self.problem_idx = np.ascontiguousarray(problem_idx, dtype=np.int32)
        self.choice_idx = np.ascontiguousarray(choice_idx, dtype=np.int32)
        self.time_us = np.ascontiguousarray(time_us, dtype=np.float64)
        self.source_idx = np.ascontiguousarray(source_idx, dtype=np.uint16)
        self.failures = list(failures)
        n = len(self.time_us)
        if not (len(self.problem_idx) == len(self.choice_idx) == len(self.source_idx) == n):
            raise ValueError("records: the problem, choice, time_us and source columns differ in length")
        if n:
            _check_ids("problem", self.problem_idx, len(self.problems))
            _check_ids("choice", self.choice_idx, len(self.choices))
            _check_ids("source", self.source_idx, len(self.sources))
            bad = ~(np.isfinite(self.time_us) & (self.time_us > 0))
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ValueError(f"time_us: must be positive and finite, got {float(self.time_us[i])!r} at record {i}")

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def empty(cls, sources: Sequence[Provenance] = ()) -> Dataset:
        z = np.zeros(0)
        return cls(sources=sources, problems=[], choices=[], problem_idx=z, choice_idx=z, time_us=z, source_idx=z)

    @classmethod
    def from_records(
        cls,
        records: Iterable[TimingRecord],
        provenance: Provenance | Sequence[Provenance],
        failures: Iterable[FailureRecord] = (),
    ) -> Dataset:
        """Build a dataset from records. Each record's hardware key must match a given source;
        with several sources of one hardware key, records go to the first."""
        sources = [provenance] if isinstance(provenance, Provenance) else list(provenance)
        if not sources:
            raise ValueError("provenance: at least one source is needed")
        by_hw: dict[str, int] = {}
        for i, s in enumerate(sources):
            by_hw.setdefault(s.hardware, i)
        t = _Tables()
        cols = _empty_columns()
        for r in records:
            if r.hardware not in by_hw:
                raise ValueError(f"hardware: record of {r.hardware!r} has no source; sources: {sorted(by_hw)}")
            cols["problem"].append(t.problem_id(r.problem))
            cols["choice"].append(t.choice_id(r.choice))
            cols["time_us"].append(r.time_us)
            cols["source"].append(by_hw[r.hardware])
        fails = list(failures)
        for f in fails:
            if f.hardware not in by_hw:
                raise ValueError(f"hardware: failure of {f.hardware!r} has no source; sources: {sorted(by_hw)}")
        return cls(
            sources=sources,
            problems=t.problems,
            choices=t.choices,
            problem_idx=np.array(cols["problem"], dtype=np.int32),
            choice_idx=np.array(cols["choice"], dtype=np.int32),
            time_us=np.array(cols["time_us"], dtype=np.float64),
            source_idx=np.array(cols["source"], dtype=np.uint16),
            failures=fails,
        )

    # -- views ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.time_us)

    def __repr__(self) -> str:
        return (
            f"Dataset({plural(len(self), 'record')}, {plural(len(self.problems), 'problem')}, "
            f"{plural(len(self.choices), 'choice')}, hardware={self.hardware_keys}, "
            f"{plural(len(self.failures), 'failure')})"
        )

    def __eq__(self, other: object) -> bool:
        """Equal when both hold the same sources and the same multiset of records and failures."""
        if not isinstance(other, Dataset):
            return NotImplemented
        return (
            set(self.sources) == set(other.sources)
            and sorted(map(_record_key, self.records()), key=repr)
            == sorted(map(_record_key, other.records()), key=repr)
            and sorted(map(repr, self.failures)) == sorted(map(repr, other.failures))
        )

    __hash__ = None  # type: ignore[assignment]

    @property
    def hardware_keys(self) -> list[str]:
        return sorted({s.hardware for s in self.sources})

    @property
    def hardware(self) -> str:
        """The single hardware key of this dataset.

        Raises:
            ValueError: the dataset mixes GPUs (or has no source).
        """
        keys = self.hardware_keys
        if len(keys) != 1:
            raise ValueError(
                "hardware: the dataset holds no records"
                if not keys
                else f"hardware: the dataset holds the timings of {len(keys)} GPUs {keys}; give one GPU's files "
                "(`diode data stats` shows each file's hardware)"
            )
        return keys[0]

    def records(self) -> Iterator[TimingRecord]:
        """Every record as a ``TimingRecord`` (built lazily)."""
        hw = [s.hardware for s in self.sources]
        for p, c, t, s in zip(
            self.problem_idx.tolist(), self.choice_idx.tolist(), self.time_us.tolist(), self.source_idx.tolist()
        ):
            yield TimingRecord(problem=self.problems[p], choice=self.choices[c], time_us=t, hardware=hw[s])

    def measured_problems(self) -> set[Problem]:
        """The problems with at least one timing record."""
        return {self.problems[i] for i in np.unique(self.problem_idx).tolist()}

    def collected_problems(self) -> set[Problem]:
        """The problems a resumed collection skips: measured, or failed as a whole."""
        return self.measured_problems() | {f.problem for f in self.failures if f.choice is None}

    def measured_choices(self) -> dict[Problem, set[Choice]]:
        """Per problem, every choice with a timing record or a failure record (what a top-up
        collection leaves out)."""
        out: dict[Problem, set[Choice]] = {}
        if len(self):
            pairs = np.unique(np.stack([self.problem_idx, self.choice_idx], axis=1), axis=0)
            for pid, cid in pairs.tolist():
                out.setdefault(self.problems[pid], set()).add(self.choices[cid])
        for f in self.failures:
            if f.choice is not None:
                out.setdefault(f.problem, set()).add(f.choice)
        return out

    def by_problem(self) -> list[ProblemTimings]:
        """Measurements grouped by problem, in problem-table order (problems with no record skipped)."""
        order = np.argsort(self.problem_idx, kind="stable")
        pids, starts = np.unique(self.problem_idx[order], return_index=True)
        bounds = [*starts[1:].tolist(), len(order)]
        out = []
        for pid, s, e in zip(pids.tolist(), starts.tolist(), bounds):
            sel = order[s:e]
            out.append(ProblemTimings(self.problems[pid], self.choice_idx[sel], self.time_us[sel]))
        return out

    def select_problems(self, keep: Iterable[Problem]) -> Dataset:
        """A dataset with only the records and failures of the given problems (tables kept)."""
        keep_set = set(keep)
        mask_tbl = np.array([p in keep_set for p in self.problems], dtype=bool)
        mask = mask_tbl[self.problem_idx] if len(self) else np.zeros(0, dtype=bool)
        return Dataset(
            sources=self.sources,
            problems=self.problems,
            choices=self.choices,
            problem_idx=self.problem_idx[mask],
            choice_idx=self.choice_idx[mask],
            time_us=self.time_us[mask],
            source_idx=self.source_idx[mask],
            failures=[f for f in self.failures if f.problem in keep_set],
        ).compact()

    def compact(self) -> Dataset:
        """Drop table entries no record or failure refers to (ids are renumbered)."""
        used_p = set(self.problem_idx.tolist()) | {self.problems.index(f.problem) for f in self.failures}
        used_c = set(self.choice_idx.tolist()) | {
            self.choices.index(f.choice) for f in self.failures if f.choice is not None and f.choice in self.choices
        }
        pmap = np.full(len(self.problems), -1, dtype=np.int64)
        pmap[sorted(used_p)] = np.arange(len(used_p))
        cmap = np.full(len(self.choices), -1, dtype=np.int64)
        cmap[sorted(used_c)] = np.arange(len(used_c))
        return Dataset(
            sources=self.sources,
            problems=[self.problems[i] for i in sorted(used_p)],
            choices=[self.choices[i] for i in sorted(used_c)],
            problem_idx=pmap[self.problem_idx] if len(self) else self.problem_idx,
            choice_idx=cmap[self.choice_idx] if len(self) else self.choice_idx,
            time_us=self.time_us,
            source_idx=self.source_idx,
            failures=self.failures,
        )


def _record_key(r: TimingRecord) -> tuple[Problem, Choice, float, str]:
    return (r.problem, r.choice, r.time_us, r.hardware)


def _check_ids(name: str, ids: np.ndarray, n: int) -> None:
    if ids.min() < 0 or ids.max() >= n:
        raise ValueError(f"{name}: record refers to {name} id {int(ids.max())} but the table has {n} entries")


class _Tables:
    """Interning tables (object -> id) shared by the builders and the writer."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.choices: list[Choice] = []
        self.sources: list[Provenance] = []
        self._problem_ids: dict[Problem, int] = {}
        self._choice_ids: dict[Choice, int] = {}
        self._source_ids: dict[Provenance, int] = {}

    @staticmethod
    def _intern(table: list[Any], ids: dict[Any, int], obj: Any) -> int:
        i = ids.get(obj)
        if i is None:
            i = ids[obj] = len(table)
            table.append(obj)
        return i

    def problem_id(self, p: Problem) -> int:
        return self._intern(self.problems, self._problem_ids, p)

    def find_problem(self, p: Problem) -> int | None:
        """The id of ``p`` if it is in the table (no interning)."""
        return self._problem_ids.get(p)

    def choice_id(self, c: Choice) -> int:
        return self._intern(self.choices, self._choice_ids, c)

    def source_id(self, s: Provenance) -> int:
        return self._intern(self.sources, self._source_ids, s)


def merge_datasets(datasets: Iterable[Dataset], *, allow_mixed_hardware: bool = False) -> Dataset:
    """Join datasets into one. A record found in several inputs (same problem, choice, time and
    hardware) is kept once; repeated measurements are all kept, including repeats within one
    input that happen to have the same time (a key occurring n times in one input and m times in
    another is kept max(n, m) times, so ``merge([a, a]) == a`` and ``merge([a]) == a``).

    Raises:
        ValueError: the datasets are of different GPUs and ``allow_mixed_hardware`` is False.
    """
    parts = list(datasets)
    t = _Tables()
    # Times are compared by value; kept[key] = most occurrences of key in any one input so far.
    kept: dict[tuple[int, int, float, str], int] = {}
    cols = _empty_columns()
    failures: list[FailureRecord] = []
    fail_seen: set[FailureRecord] = set()
    for ds in parts:
        smap = [t.source_id(s) for s in ds.sources]
        pmap = [t.problem_id(p) for p in ds.problems]
        cmap = [t.choice_id(c) for c in ds.choices]
        local: dict[tuple[int, int, float, str], int] = {}
        for p, c, tm, s in zip(
            ds.problem_idx.tolist(), ds.choice_idx.tolist(), ds.time_us.tolist(), ds.source_idx.tolist()
        ):
            src = smap[s]
            key = (pmap[p], cmap[c], tm, t.sources[src].hardware)
            n = local[key] = local.get(key, 0) + 1
            if n <= kept.get(key, 0):
                continue
            kept[key] = n
            cols["problem"].append(pmap[p])
            cols["choice"].append(cmap[c])
            cols["time_us"].append(tm)
            cols["source"].append(src)
        for f in ds.failures:
            if f not in fail_seen:
                fail_seen.add(f)
                failures.append(f)
    keys = sorted({s.hardware for s in t.sources})
    if len(keys) > 1 and not allow_mixed_hardware:
        raise ValueError(
            f"hardware: refusing to merge timings of different GPUs {keys}; merge each GPU's files separately "
            f"(or pass allow_mixed_hardware=True / --allow-mixed-hardware if you really mean it)"
        )
    return Dataset(
        sources=t.sources,
        problems=t.problems,
        choices=t.choices,
        problem_idx=np.array(cols["problem"], dtype=np.int32),
        choice_idx=np.array(cols["choice"], dtype=np.int32),
        time_us=np.array(cols["time_us"], dtype=np.float64),
        source_idx=np.array(cols["source"], dtype=np.uint16),
        failures=failures,
    )


# ---------------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------------


def _header(compress: bool) -> dict[str, Any]:
    from torch_diode._version import __version__

    version = SCHEMA_VERSION if compress else 1
    return {"format": FORMAT_NAME, "schema_version": version, "created_by": f"torch-diode {__version__}"}


def _compression(fmt: Format, compress: bool | None) -> bool:
    """Whether a new file of format ``fmt`` has compressed chunks (``None``: msgpack yes, JSON no)."""
    if compress is None:
        return fmt == "msgpack"
    if compress and fmt != "msgpack":
        raise ValueError("compress: only msgpack files are compressed; JSON files stay plain text")
    return bool(compress)


def _encode_chunk(
    fmt: Format,
    *,
    new_sources: Sequence[tuple[int, Provenance]],
    new_problems: Sequence[tuple[int, Problem]],
    new_choices: Sequence[tuple[int, Choice]],
    columns: Mapping[str, np.ndarray],
    failures: Sequence[Mapping[str, Any]],
    compress: bool = False,
) -> bytes:
    obj: dict[str, Any] = {
        "sources": [[i, s.to_dict()] for i, s in new_sources],
        "problems": [[i, p.to_dict()] for i, p in new_problems],
        "choices": [[i, c.to_dict()] for i, c in new_choices],
        "failures": list(failures),
    }
    if fmt == "msgpack":
        obj["records"] = {name: np.ascontiguousarray(columns[name], dtype=dt).tobytes() for name, dt in _COLUMNS}
        packed = msgpack.packb(obj, use_bin_type=True)
        return msgpack.packb({"zlib": zlib.compress(packed, _ZLIB_LEVEL)}, use_bin_type=True) if compress else packed
    obj["records"] = {name: np.asarray(columns[name]).tolist() for name, _ in _COLUMNS}
    return (json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n").encode()


def _encode_header(fmt: Format, compress: bool) -> bytes:
    if fmt == "msgpack":
        return msgpack.packb(_header(compress), use_bin_type=True)
    return (json.dumps(_header(compress)) + "\n").encode()


def _failure_dict(f: FailureRecord, t: _Tables, source: int) -> dict[str, Any]:
    return {
        "problem": t.problem_id(f.problem),
        "choice": None if f.choice is None else t.choice_id(f.choice),
        "reason": f.reason,
        "message": f.message,
        "source": source,
    }


def write_dataset(
    dataset: Dataset, path: str | os.PathLike[str], *, format: str | None = None, compress: bool | None = None
) -> Path:
    """Write a whole dataset to ``path`` atomically (a temp file, then ``os.replace``).

    ``compress``: a msgpack file's chunk compressed (schema version 2; the default for msgpack),
    or not (version 1, readable by torch-diode before version 2 existed); JSON is never compressed.

    Returns:
        The path written.

    Raises:
        FileInUseError: an open :class:`DatasetWriter` is appending to ``path`` (a collection into
            it is running): replacing the file would leave it writing to one no name reaches.
    """
    path = Path(path)
    fmt = format_for_path(path, format)
    compressed = _compression(fmt, compress)
    _refuse_in_use(path, "replace it")
    t = _Tables()
    # Tables given to Dataset() may repeat an entry; the file's tables are interned, so the
    # record columns are mapped onto the interned ids.
    smap = np.array([t.source_id(s) for s in dataset.sources], dtype=np.int64)
    pmap = np.array([t.problem_id(p) for p in dataset.problems], dtype=np.int64)
    cmap = np.array([t.choice_id(c) for c in dataset.choices], dtype=np.int64)
    src_of_hw = {s.hardware: t.source_id(s) for s in reversed(dataset.sources)}
    missing = sorted({f.hardware for f in dataset.failures} - set(src_of_hw))
    if missing:
        raise ValueError(f"hardware: failures of {missing} have no source; sources: {sorted(src_of_hw)}")
    failures = [_failure_dict(f, t, src_of_hw[f.hardware]) for f in dataset.failures]
    n = len(dataset)
    body = _encode_header(fmt, compressed) + _encode_chunk(
        fmt,
        new_sources=list(enumerate(t.sources)),
        new_problems=list(enumerate(t.problems)),
        new_choices=list(enumerate(t.choices)),
        columns={
            "problem": pmap[dataset.problem_idx] if n else dataset.problem_idx,
            "choice": cmap[dataset.choice_idx] if n else dataset.choice_idx,
            "time_us": dataset.time_us,
            "source": smap[dataset.source_idx] if n else dataset.source_idx,
        },
        failures=failures,
        compress=compressed,
    )
    return atomic_write(path, body)


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------


@dataclass
class _ReadState:
    """What the complete chunks of a file define; also how a writer resumes."""

    tables: _Tables
    id_sources: dict[int, int]
    id_problems: dict[int, int]
    id_choices: dict[int, int]
    columns: dict[str, list[np.ndarray]]
    failures: list[FailureRecord]
    chunks: int = 0
    good_bytes: int = 0
    records: int = 0
    version: int = 1  # the header's schema version
    damage: str | None = None  # why the end is damage, not an interrupted write (salvaged files only)


def _iter_objects(path: Path, data: bytes, fmt: Format) -> Iterator[tuple[Any, int, int]]:
    """Yield (object, end offset, index). Raises TruncatedFileError-ready info via _Truncated."""
    if fmt == "msgpack":
        unpacker = msgpack.Unpacker(io.BytesIO(data), raw=False, strict_map_key=False, max_buffer_size=0)
        i = 0
        pos = 0  # end of the last complete object
        while True:
            try:
                obj = unpacker.unpack()
            except msgpack.OutOfData:
                # tell() has moved past a partial object by now, so compare with the last good end.
                if pos < len(data):
                    raise _Truncated(
                        pos,
                        f"{plural(len(data) - pos, 'trailing byte')} {'does' if len(data) - pos == 1 else 'do'} not form a complete object",
                    ) from None
                return
            except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError, TypeError) as e:
                raise DatasetFormatError(f"{path}: not a valid msgpack stream at object {i}: {e}") from None
            pos = unpacker.tell()
            yield obj, pos, i
            i += 1
    else:
        pos = 0
        for i, line in enumerate(data.splitlines(keepends=True)):
            end = pos + len(line)
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                # A last line without its newline is an interrupted write, unless it is complete
                # JSON (a hand-edited file whose editor dropped the final newline).
                if not line.endswith(b"\n"):
                    raise _Truncated(pos, "the last line is incomplete") from None
                if i == 0 and _is_json_document(data):
                    raise DatasetFormatError(
                        f"{path}: not a torch-diode dataset (a JSON document over several lines; a dataset in JSON "
                        f'holds one object per line, the first a header with "format": "{FORMAT_NAME}")'
                    ) from None
                raise DatasetFormatError(f"{path}: line {i + 1} is not valid JSON: {e}") from None
            yield obj, end, i
            pos = end


def _is_json_document(data: bytes) -> bool:
    try:
        json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return True


class _Truncated(Exception):
    def __init__(self, pos: int, detail: str) -> None:
        self.pos = pos
        self.detail = detail


def _damage_in_tail(data: bytes, pos: int) -> str | None:
    """Why the incomplete end ``data[pos:]`` of a msgpack dataset (from the end of its last complete
    object) is damage rather than an interrupted write; None when it can be an interrupted write.

    A writer appends each chunk whole in one write, fsyncs it before the next, and cuts off the
    part of one it knows it left (``DatasetWriter._after_interrupted_write``): an interrupted
    write leaves at most the start of ONE chunk, the last one. So the end is taken for one only
    when it can be the start of a chunk:

    * it begins as a chunk does: a map of one entry (compressed) or five (plain), which msgpack
      packs as the byte 0x81 or 0x85;
    * a compressed chunk's zlib stream is cut short: one that ends inside it means the whole chunk
      is there and its length is what is broken (one that does not decompress may be a partial
      chunk followed by the zero-filled pages a machine's crash can leave: the next rule decides);
    * no complete chunk starts after it, at any place where the first bytes of a chunk torch-diode
      writes occur (``_CHUNK_STARTS``). A broken length or type byte makes the reader take the
      rest of the file for one object and run out of data past complete chunks, which an
      interrupted write cannot leave behind it.

    Anything else is damage inside the complete part of the file: cutting it off (what resuming
    or recovering does to an interrupted write's end) would drop complete records.
    """
    tail = data[pos:]
    if tail[0] not in (0x81, 0x85):
        return "what follows does not begin as a chunk does"
    zipped = _CHUNK_STARTS[0]
    if tail.startswith(zipped) and len(tail) > len(zipped):
        width = _BIN_LENGTH_BYTES.get(tail[len(zipped)])
        if width is None:
            return "the compressed chunk there holds no binary data"
        stream = zlib.decompressobj()
        try:
            stream.decompress(tail[len(zipped) + 1 + width :])
        except zlib.error:
            pass  # a machine's crash can leave zero-filled pages after a partial chunk: decided below
        else:
            if stream.eof:
                return "the compressed chunk there is whole, but its length says it is longer"
    for start in _CHUNK_STARTS:
        at = data.find(start, pos + 1)
        while at >= 0:
            if _is_chunk_at(data, at):
                return f"a complete chunk follows at byte {at}"
            at = data.find(start, at + 1)
    return None


def _is_chunk_at(data: bytes, at: int) -> bool:
    """Whether a whole chunk (compressed or plain, with the keys of one) starts at byte ``at``."""
    try:  # unpackb limits lengths to the bytes given; a memoryview copies nothing
        obj = msgpack.unpackb(memoryview(data)[at:], raw=False, strict_map_key=False)
    except msgpack.ExtraData as e:  # a whole object, and more after it
        obj = e.unpacked
    except (msgpack.UnpackException, ValueError, TypeError):
        return False
    if isinstance(obj, dict) and set(obj) == {"zlib"} and isinstance(obj["zlib"], bytes):
        try:
            obj = msgpack.unpackb(zlib.decompress(obj["zlib"]), raw=False, strict_map_key=False)
        except (zlib.error, msgpack.UnpackException, ValueError, TypeError):
            return False
    return isinstance(obj, dict) and set(obj) == _CHUNK_KEYS


def _damaged_file_error(path: Path, st: _ReadState, pos: int, detail: str) -> DamagedFileError:
    if st.chunks:
        what_to_do = (
            f"`diode data recover {path} --output FIXED{path.suffix}` copies the {plural(st.chunks, 'complete chunk')} "
            f"before it ({plural(st.records, 'record')}) to a new file, which a collection can resume"
        )
    else:
        what_to_do = (
            "no chunk before it is complete, so `diode data recover` has nothing to copy out of it; collect into "
            "another output"
        )
    return DamagedFileError(
        f"{path}: damaged: it cannot be read past byte {pos} ({detail}), which is not what an interrupted write "
        f"leaves (part of the last chunk alone); the file is left as is, neither read nor cut there; {what_to_do}"
    )


def _decode_column(path: Path, i: int, fmt: Format, name: str, dt: str, value: Any) -> np.ndarray:
    if fmt == "msgpack":
        if not isinstance(value, (bytes, bytearray)):
            raise DatasetFormatError(f"{path}: chunk {i}: column {name!r} must be binary, got {type(value).__name__}")
        size = np.dtype(dt).itemsize
        if len(value) % size:
            raise DatasetFormatError(
                f"{path}: chunk {i}: column {name!r} has {len(value)} bytes, not a multiple of {size}"
            )
        return np.frombuffer(value, dtype=dt)
    if not isinstance(value, list):
        raise DatasetFormatError(f"{path}: chunk {i}: column {name!r} must be a list, got {type(value).__name__}")
    try:
        arr = np.array(value, dtype=dt if name != "time_us" else np.float64)
    except (TypeError, ValueError, OverflowError) as e:
        raise DatasetFormatError(f"{path}: chunk {i}: column {name!r} holds a bad value: {e}") from None
    if arr.ndim != 1:
        raise DatasetFormatError(f"{path}: chunk {i}: column {name!r} must be a flat list")
    if name != "time_us" and not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise DatasetFormatError(f"{path}: chunk {i}: column {name!r} must hold integer ids")
    if name == "time_us" and not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        raise DatasetFormatError(f"{path}: chunk {i}: column 'time_us' must hold numbers")
    return arr


def _decompressed(where: str, obj: dict[str, Any], version: int) -> Any:
    """The chunk that a compressed chunk object ``{"zlib": BYTES}`` holds."""
    if version < 2:
        raise DatasetFormatError(
            f"{where}: a compressed chunk in a file of schema version {version} (compressed chunks need version 2)"
        )
    data = obj["zlib"]
    if not isinstance(data, (bytes, bytearray)):
        raise DatasetFormatError(f"{where}: compressed chunk: expected binary data, got {type(data).__name__}")
    try:
        raw = zlib.decompress(data)
    except zlib.error as e:
        raise DatasetFormatError(f"{where}: compressed chunk is corrupt ({e}); the file cannot be read") from None
    try:
        return msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError, TypeError) as e:
        raise DatasetFormatError(f"{where}: compressed chunk does not hold one msgpack object: {e}") from None


def _apply_chunk(path: Path, i: int, fmt: Format, obj: Any, st: _ReadState) -> None:
    where = f"{path}: chunk {i}"
    if fmt == "msgpack" and isinstance(obj, dict) and set(obj) == {"zlib"}:
        obj = _decompressed(where, obj, st.version)
    if not isinstance(obj, dict):
        raise DatasetFormatError(f"{where}: expected an object, got {type(obj).__name__}")
    if set(obj) != _CHUNK_KEYS:
        raise DatasetFormatError(
            f"{where}: expected keys {sorted(_CHUNK_KEYS)}, got {sorted(map(repr, obj))} (is this a torch-diode dataset?)"
        )
    try:
        for table, ids, make, intern in (
            ("sources", st.id_sources, Provenance.from_dict, st.tables.source_id),
            ("problems", st.id_problems, Problem.from_dict, st.tables.problem_id),
            ("choices", st.id_choices, Choice.from_dict, st.tables.choice_id),
        ):
            entries = obj[table]
            if not isinstance(entries, list):
                raise ValueError(f"{table}: expected a list of [id, object] pairs")
            for entry in entries:
                if not (
                    isinstance(entry, list)
                    and len(entry) == 2
                    and isinstance(entry[0], int)
                    and isinstance(entry[1], dict)
                ):
                    raise ValueError(f"{table}: expected [id, object] pairs, got {entry!r:.200}")
                if entry[0] in ids:
                    raise ValueError(f"{table}: id {entry[0]} is defined twice")
                ids[entry[0]] = intern(make(entry[1]))  # type: ignore[operator, arg-type]
        recs = obj["records"]
        if not isinstance(recs, dict) or set(recs) != {n for n, _ in _COLUMNS}:
            raise ValueError(f"records: expected columns {[n for n, _ in _COLUMNS]}")
        cols = {name: _decode_column(path, i, fmt, name, dt, recs[name]) for name, dt in _COLUMNS}
        n = len(cols["time_us"])
        if any(len(c) != n for c in cols.values()):
            raise ValueError(f"records: columns differ in length { ({k: len(v) for k, v in cols.items()}) }")
        mapped = {}
        for name, ids in (("problem", st.id_problems), ("choice", st.id_choices), ("source", st.id_sources)):
            raw = cols[name]
            if n:
                uniq = np.unique(raw)
                missing = [int(u) for u in uniq if int(u) not in ids]
                if missing:
                    raise ValueError(f"records: {name} id {missing[0]} is not defined")
                lut = np.zeros(int(uniq.max()) + 1, dtype=np.int64)
                for u in uniq.tolist():
                    lut[u] = ids[int(u)]
                mapped[name] = lut[raw]
            else:
                mapped[name] = raw.astype(np.int64)
        t = cols["time_us"]
        if n and not (np.isfinite(t) & (t > 0)).all():
            j = int(np.flatnonzero(~(np.isfinite(t) & (t > 0)))[0])
            raise ValueError(f"time_us: record {j} has time {float(t[j])!r}; times must be positive and finite")
        fails = obj["failures"]
        if not isinstance(fails, list):
            raise ValueError("failures: expected a list")
        new_failures = []
        for f in fails:
            if not isinstance(f, dict) or set(f) != {"problem", "choice", "reason", "message", "source"}:
                raise ValueError(f"failures: malformed entry {f!r:.200}")
            if f["problem"] not in st.id_problems or f["source"] not in st.id_sources:
                raise ValueError(f"failures: entry refers to an undefined id: {f!r:.200}")
            if f["choice"] is not None and f["choice"] not in st.id_choices:
                raise ValueError(f"failures: entry refers to an undefined choice id: {f!r:.200}")
            new_failures.append(
                FailureRecord(
                    problem=st.tables.problems[st.id_problems[f["problem"]]],
                    choice=None if f["choice"] is None else st.tables.choices[st.id_choices[f["choice"]]],
                    reason=f["reason"],
                    message=f["message"],
                    hardware=st.tables.sources[st.id_sources[f["source"]]].hardware,
                )
            )
    except (ValueError, TypeError, KeyError) as e:
        if isinstance(e, DatasetFormatError):
            raise
        raise DatasetFormatError(f"{where}: {e}") from None
    st.columns["problem"].append(mapped["problem"])
    st.columns["choice"].append(mapped["choice"])
    st.columns["source"].append(mapped["source"])
    st.columns["time_us"].append(cols["time_us"])
    st.failures.extend(new_failures)
    st.records += n


def _check_header(path: Path, fmt: Format, obj: Any) -> int:
    """The header's schema version (one this torch-diode reads)."""
    if not isinstance(obj, dict) or obj.get("format") != FORMAT_NAME:
        raise DatasetFormatError(
            f'{path}: not a torch-diode dataset (the first object has no "format": "{FORMAT_NAME}")'
        )
    version = obj.get("schema_version")
    if "schema_version" not in obj:
        raise DatasetFormatError(
            f'{path}: its header has "format": "{FORMAT_NAME}" but no schema_version: a damaged or hand-made '
            "file, not one torch-diode wrote"
        )
    readable = READABLE_SCHEMA_VERSIONS[fmt]
    if isinstance(version, bool) or version not in readable:
        raise SchemaVersionError(str(path), version, readable if len(readable) > 1 else readable[0])
    return int(version)


def _read_state(path: Path, fmt: Format, *, recover: bool, salvage: bool = False) -> _ReadState:
    """What the complete chunks of ``path`` define. ``recover``: a file an interrupted write left
    unfinished yields its complete chunks instead of raising :class:`TruncatedFileError`.
    ``salvage``: so does a damaged one (those before the damage), which is otherwise refused."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DatasetFormatError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DatasetFormatError(_is_a_directory(path)) from None
    except OSError as e:
        raise DatasetFormatError(f"{path}: cannot read: {e.strerror or e}") from None
    st = _ReadState(_Tables(), {}, {}, {}, _empty_columns(), [])
    if not data:
        raise DatasetFormatError(f"{path}: file is empty (not a torch-diode dataset)")
    try:
        for obj, end, i in _iter_objects(path, data, fmt):
            if i == 0:
                st.version = _check_header(path, fmt, obj)
            else:
                _apply_chunk(path, i, fmt, obj, st)
                st.chunks += 1
            st.good_bytes = end
    except _Truncated as t:
        if st.good_bytes == 0:
            raise DatasetFormatError(
                f"{path}: not a torch-diode dataset, or one truncated inside its header ({t.detail})"
            ) from None
        # JSON: only a last line without its newline gets here; a damaged line before it is malformed.
        damage = _damage_in_tail(data, t.pos) if fmt == "msgpack" else None
        if damage is not None and not salvage:
            raise _damaged_file_error(path, st, t.pos, damage) from None
        st.damage = damage
        if not recover:
            raise TruncatedFileError(str(path), st.chunks, st.records, t.detail) from None
    return st


def _state_to_dataset(st: _ReadState) -> Dataset:
    def cat(name: str, dt: Any) -> np.ndarray:
        parts = st.columns[name]
        return np.concatenate(parts).astype(dt, copy=False) if parts else np.zeros(0, dtype=dt)

    return Dataset(
        sources=st.tables.sources,
        problems=st.tables.problems,
        choices=st.tables.choices,
        problem_idx=cat("problem", np.int32),
        choice_idx=cat("choice", np.int32),
        time_us=cat("time_us", np.float64),
        source_idx=cat("source", np.uint16),
        failures=st.failures,
    )


def read_dataset(path: str | os.PathLike[str], *, format: str | None = None, recover: bool = False) -> Dataset:
    """Read a dataset file.

    Args:
        path: a ``.json``/``.jsonl`` or ``.msgpack`` file (or any name with ``format`` given).
        format: ``"json"`` or ``"msgpack"``; by default the extension decides.
        recover: keep the complete chunks of a truncated file instead of raising.

    Raises:
        DatasetFormatError: the file is missing, malformed, damaged (even with ``recover``: damage in
            its complete part is no interrupted write) or not a dataset (message names the file).
        SchemaVersionError: the file has a schema version this torch-diode does not read.
        TruncatedFileError: the file ends inside a chunk and ``recover`` is False.
    """
    p = Path(path)
    return _state_to_dataset(_read_state(p, format_for_path(p, format), recover=recover))


def read_datasets(
    paths: Iterable[str | os.PathLike[str]], *, recover: bool = False, allow_mixed_hardware: bool = False
) -> Dataset:
    """Read and merge several dataset files (see ``merge_datasets``)."""
    return merge_datasets((read_dataset(p, recover=recover) for p in paths), allow_mixed_hardware=allow_mixed_hardware)


@dataclass(frozen=True)
class RecoverResult:
    """What ``recover_dataset`` kept and dropped."""

    dataset: Dataset
    chunks: int  # complete chunks kept
    kept_bytes: int  # length of the complete part of the input
    dropped_bytes: int  # length of the partial tail (0: the file was complete)
    damaged: bool = False  # the tail follows damage (``output`` only): complete chunks may be in it


def recover_dataset(
    path: str | os.PathLike[str],
    *,
    output: str | os.PathLike[str] | None = None,
    format: str | None = None,
    output_format: str | None = None,
    keep_nothing: bool = True,
) -> RecoverResult:
    """Keep the complete chunks of a (possibly truncated) dataset file.

    Without ``output`` the file is cut back in place to its complete chunks, byte for byte (a
    ``DatasetWriter`` can then resume it); with ``output`` the complete part is written there as a
    new file (format from ``output_format`` or its extension) and the input is left alone.

    ``keep_nothing=False`` refuses a file cut inside its first chunk (nothing complete to keep):
    it raises :class:`TruncatedFileError` and writes and cuts nothing.

    A msgpack file damaged inside its complete part (its end is not what an interrupted write
    leaves: see ``_damage_in_tail``) is never cut in place, which would drop the complete chunks
    after the damage; with ``output`` the complete chunks before it are copied there.

    Raises:
        DatasetFormatError: the file is malformed (not merely truncated), truncated inside its header,
            or (without ``output``) damaged.
        TruncatedFileError: ``keep_nothing`` is False and no chunk before the break is complete.
    """
    p = Path(path)
    st = _read_state(p, format_for_path(p, format), recover=True, salvage=output is not None)
    size = p.stat().st_size
    if not keep_nothing and st.chunks == 0 and size > st.good_bytes:
        raise TruncatedFileError(
            str(p),
            0,
            0,
            f"{plural(size - st.good_bytes, 'byte')} after the header {'forms' if size - st.good_bytes == 1 else 'form'} no complete chunk",
        )
    ds = _state_to_dataset(st)
    if output is not None:
        write_dataset(ds, output, format=output_format)
    elif size > st.good_bytes:
        _refuse_in_use(p, "cut it")
        with open(p, "r+b") as fh:
            fh.truncate(st.good_bytes)
            fh.flush()
            os.fsync(fh.fileno())
    return RecoverResult(ds, st.chunks, st.good_bytes, size - st.good_bytes, damaged=st.damage is not None)


def find_dataset_files(
    directory: str | os.PathLike[str], extensions: Sequence[str] = ("msgpack", "json")
) -> list[Path]:
    """Dataset files below ``directory`` with one of the extensions, sorted."""
    exts = {"." + e.lstrip(".").lower() for e in extensions}
    return sorted(
        p for p in Path(directory).rglob("*") if p.is_file() and p.suffix.lower() in exts and not p.name.startswith(".")
    )


# ---------------------------------------------------------------------------------------------
# Append-friendly writing
# ---------------------------------------------------------------------------------------------


_RW = os.O_RDWR | getattr(os, "O_BINARY", 0)  # binary on Windows, as open(..., "r+b") is


def _locked_fd(path: Path, *, shared: bool = False) -> int | None:
    """``path`` opened for reading and writing (created empty when missing, never truncated) and
    locked (:func:`_try_lock`): its descriptor, or None (closed again) when another holds a
    conflicting lock."""
    fd = os.open(path, _RW | os.O_CREAT, 0o666)
    try:
        locked = _try_lock(fd, shared=shared)
    except BaseException:
        os.close(fd)
        raise
    if not locked:
        os.close(fd)
        return None
    return fd


def _open_locked(path: Path) -> BinaryIO:
    """``path`` opened for reading and writing (created empty when missing, never truncated),
    with an exclusive lock (``flock``) held until it is closed. On a file system without locks
    it is opened unlocked.

    Raises:
        FileInUseError: another open writer holds the lock.
    """
    fd = _locked_fd(path)
    if fd is None:
        raise FileInUseError(
            f"{path}: another process is writing it (a collection still running?); wait for it to end, "
            "or write to another file"
        )
    return os.fdopen(fd, "r+b")


def _try_lock(fd: int, *, shared: bool = False) -> bool:
    """Take an exclusive (or ``shared``) ``flock`` on ``fd`` without waiting: False when another
    open file holds a conflicting one; True when taken, or when the platform or file system has no
    such locks (ENOLCK, ENOSYS, EOPNOTSUPP). Other errors are raised: NFS emulates ``flock`` with
    POSIX locks and refuses an exclusive one on a file not open for writing (EBADF), which must
    not pass for "nobody holds it"."""
    import errno

    try:
        import fcntl
    except ImportError:  # not POSIX
        return True
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as e:
        if e.errno in (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP):
            return True
        raise
    return True


def _unlock(fd: int) -> None:
    """Release ``fd``'s lock explicitly before it is closed: a process forked meanwhile (a compile
    worker pool started with fork) shares the open file, and closing ours alone would leave the
    lock held until that process ends."""
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_UN)
    except (ImportError, OSError):
        pass


def _unlock_and_close(fh: BinaryIO) -> None:
    _unlock(fh.fileno())
    fh.close()


def file_in_use(path: str | os.PathLike[str]) -> bool:
    """Whether an open :class:`DatasetWriter` (of any process) is writing ``path`` now, or a
    collection holds ``path`` as its :func:`output_lock`. Opened for writing to ask (an exclusive
    lock needs it on NFS); a file this process cannot open for writing it cannot write either, and
    is not reported in use."""
    try:
        fd = os.open(path, _RW)
    except OSError:
        return False
    try:
        return not _try_lock(fd)
    finally:
        os.close(fd)  # closing releases a lock taken here


def _refuse_in_use(path: Path, doing: str) -> None:
    if file_in_use(path):
        raise FileInUseError(
            f"{path}: an open writer is appending to it (a collection still running?), so this would {doing} under "
            "it; wait for it to end"
        )


def lock_path(output: str | os.PathLike[str]) -> Path:
    """``OUT.lock``: the file a collection into ``OUT`` holds locked for the whole run. ``OUT``
    itself cannot carry that lock: merging replaces it (a new file) while a run goes on."""
    p = Path(output)
    return p.with_name(p.name + ".lock")


#: How long :func:`output_lock` asks again for ``OUT.lock`` held by another run before it refuses:
#: a holder that leaves holds the file exclusively for a moment, to remove it.
_LOCK_GRACE_S = 0.5


def _names(path: Path, fd: int) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (not removed, nor replaced by another)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


def _last_holder(fd: int) -> bool:
    """Whether ``fd``'s shared ``flock`` could be made exclusive at once: no other open file holds a
    lock on the file. Converting is not atomic: refused, the shared lock may be gone already (Linux
    drops it first), so only a holder that is leaving asks. False where there are no such locks
    (not POSIX, a file system without them): there no holder can know it is the last."""
    try:
        import fcntl
    except ImportError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _take_output_lock(output: str | os.PathLike[str], path: Path, shared: bool) -> int:
    """``path`` (``OUT.lock``) opened and locked (:func:`_locked_fd`) while it is still the file of
    that name: its descriptor. A file removed or replaced meanwhile (by the holder before us, as it
    left) is let go and the new one opened; one locked by another holder is asked for again for
    :data:`_LOCK_GRACE_S` (a holder that leaves holds it exclusively for a moment) before it is
    refused."""
    deadline = time.monotonic() + _LOCK_GRACE_S
    replaced = 0
    while True:
        fd = _locked_fd(path, shared=shared)
        if fd is not None:
            if _names(path, fd):
                return fd
            os.close(fd)  # removed or replaced: open the file that bears the name now
            replaced += 1
            if replaced == 5:
                raise FileInUseError(f"{output}: could not take {path.name} (other runs keep replacing it); try again")
        elif time.monotonic() >= deadline:
            raise FileInUseError(
                f"{output}: another collection (or merge) is writing it now ({path.name} is locked); wait for it "
                "to end, or write to another output"
            )
        else:
            time.sleep(0.01)


@contextlib.contextmanager
def output_lock(output: str | os.PathLike[str], *, shared: bool = False) -> Iterator[None]:
    """Hold :func:`lock_path` (``OUT.lock``) for the block: exclusively for a run that writes,
    merges or replaces ``OUT`` and its sidecars, ``shared`` for a torchrun rank, which writes only
    its own shard (ranks run together; a run that merges waits for none of them). The last holder
    removes the lock file at the end: an exclusive one, or the last of the shared ones (a shared
    holder leaving takes the file exclusively, without waiting, to know it is the last; refused,
    another rank still holds it and keeps it).

    Raises:
        FileInUseError: another run holds a conflicting lock.
    """
    path = lock_path(output)
    fd = _take_output_lock(output, path, shared)
    try:
        yield
    finally:
        # Removed while still held: a run that opened it meanwhile sees it removed and opens anew.
        # One that cannot be looked up or removed is left (the next run takes it), never held on to.
        with contextlib.suppress(OSError):
            if (not shared or _last_holder(fd)) and _names(path, fd):
                os.unlink(path)
        _unlock(fd)
        os.close(fd)


#: The settings of a collection that decide what its timings measure, beside the hardware: the
#: collector (each times kernels its own way), Inductor's search and the sweep's kernels, which
#: ``diode collect`` records in a source's ``extra``. A file resumed by a run of other settings
#: would mix two kinds of timings. The one list of their names: a run's values are built from it
#: (``torch_diode.collect.runner._settings_of``).
RUN_SETTINGS = ("collector", "search_space", "search_mode", "via_linear", "sweep_kernels")


def _run_settings(source: Provenance) -> dict[str, str]:
    """The :data:`RUN_SETTINGS` that ``source`` records (one written by hand, or by an older
    torch-diode, may lack some: nothing is known of those)."""
    values = {"collector": source.collector, **{k: v for k, v in source.extra if k in RUN_SETTINGS}}
    return {k: values[k] for k in RUN_SETTINGS if values.get(k, "") != ""}


def check_run_settings(path: str | os.PathLike[str], sources: Sequence[Provenance], new: Mapping[str, str]) -> None:
    """Refuse to add the records of a run of settings ``new`` (:data:`RUN_SETTINGS` names, as a
    source records them) to the file ``path`` whose ``sources`` record another value of one of them
    (compared where both record it).

    Raises:
        ValueError: a setting differs (the message names it, both values and what to do).
    """
    for source in sources:
        for name, value in _run_settings(source).items():
            if name in new and new[name] != value:
                raise ValueError(
                    f"{path}: holds timings collected with {name} {value!r}, not this run's {new[name]!r}, and one "
                    f"file must not mix them; collect into another output (or run with {name} {value!r} to "
                    "resume this one)"
                )


class DatasetWriter:
    """Appends records to a dataset file in self-contained chunks, for collectors.

    Every ``flush()`` appends one chunk and fsyncs it, so an interruption at any moment keeps every
    flushed record. Opening an existing file resumes it: the complete chunks are kept, a partial
    tail (from an earlier interruption) is cut off, and ``problems_done`` tells which problems are
    already there so a collector can skip them. A file of other hardware, or collected with other
    settings (collector, search space, search mode, via_linear; compared where both runs record
    them), is refused, and so is a damaged one (left as is: its end is not an interrupted write's).

    A new msgpack file's chunks are compressed (schema version 2) unless ``compress`` is False. A
    resumed file keeps its own kind unless ``compress`` says otherwise: plain chunks may be
    appended to a version-2 file, but compressed ones not to a version-1 file (refused;
    ``diode data convert`` rewrites it compressed).

    The file is locked (``flock``) while the writer is open: a second writer of it, in this
    process or another, is refused with :class:`~torch_diode.errors.FileInUseError`.

    Use as a context manager; leaving the block flushes what is buffered.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        provenance: Provenance,
        *,
        format: str | None = None,
        flush_every: int = 10_000,
        compress: bool | None = None,
    ) -> None:
        self.path = Path(path)
        self.format: Format = format_for_path(self.path, format)
        self.compress = _compression(self.format, compress)
        self.provenance = provenance
        self.flush_every = flush_every
        self._tables = _Tables()
        self._written_sources = 0
        self._written_problems = 0
        self._written_choices = 0
        self._buf = _empty_columns()
        self._fail_buf: list[dict[str, Any]] = []
        self.problems_done: set[Problem] = set()
        self._existing: Dataset | None = None  # what the file held when opened (for choices_done)
        self._choices_done: dict[Problem, set[Choice]] | None = None
        self.records_before = 0
        self.recovered_bytes = 0
        # Opened (created when missing, never truncated) and locked before it is read: a second
        # writer of the same file (two collections into one output) would cut off the first one's
        # chunk in progress and interleave their chunks.
        self._fh: BinaryIO = _open_locked(self.path)
        try:
            self._resume_or_start(provenance, compress)
        except BaseException:
            _unlock_and_close(self._fh)
            raise
        self._source = self._tables.source_id(provenance)

    def _resume_or_start(self, provenance: Provenance, compress: bool | None) -> None:
        size = os.fstat(self._fh.fileno()).st_size
        if size == 0:
            self._fh.write(_encode_header(self.format, self.compress))
            self._sync()
            return
        st = _read_state(self.path, self.format, recover=True)
        if compress and st.version < 2:
            raise ValueError(
                f"{self.path}: written uncompressed (schema version {st.version}), so its chunks cannot be "
                "compressed; rewrite it with `diode data convert IN OUT` first, or pass compress=False"
            )
        self.compress = st.version >= 2 if compress is None else bool(compress)
        hw = {s.hardware for s in st.tables.sources}
        if hw and hw != {provenance.hardware}:
            raise ValueError(
                f"{self.path}: holds timings of {sorted(hw)}, not {provenance.hardware!r}; write to another file"
            )
        check_run_settings(self.path, st.tables.sources, _run_settings(provenance))
        self._tables = st.tables
        self._written_sources = len(st.tables.sources)
        self._written_problems = len(st.tables.problems)
        self._written_choices = len(st.tables.choices)
        self._existing = _state_to_dataset(st)
        self.problems_done = self._existing.collected_problems()
        self.records_before = st.records
        self.recovered_bytes = size - st.good_bytes
        self._fh.truncate(st.good_bytes)
        self._fh.seek(st.good_bytes - 1)  # the header's end at least
        last = self._fh.read(1)
        self._fh.seek(st.good_bytes)
        if self.format == "json" and last != b"\n":
            # The last line is complete JSON without its newline (an editor dropped it): end it, or
            # the next chunk would go on the same line and no reader could read the file again.
            self._fh.write(b"\n")
            self._sync()

    @property
    def choices_done(self) -> dict[Problem, set[Choice]]:
        """Per problem the file held when opened, every choice with a record or a failure record
        (computed on first use: only a top-up collection needs it)."""
        if self._choices_done is None:
            self._choices_done = self._existing.measured_choices() if self._existing is not None else {}
        return self._choices_done

    def _sync(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def add(self, record: TimingRecord) -> None:
        if record.hardware != self.provenance.hardware:
            raise ValueError(f"hardware: record of {record.hardware!r} in a file of {self.provenance.hardware!r}")
        # Flush only when a new problem starts, so a chunk never splits a problem's records and
        # a resumed writer's problems_done holds only problems whose records were all written.
        buf = self._buf["problem"]
        if len(buf) >= self.flush_every and buf[-1] != self._tables.find_problem(record.problem):
            self.flush()
        self._buf["problem"].append(self._tables.problem_id(record.problem))
        self._buf["choice"].append(self._tables.choice_id(record.choice))
        self._buf["time_us"].append(record.time_us)
        self._buf["source"].append(self._source)

    def add_failure(self, failure: FailureRecord) -> None:
        self._fail_buf.append(_failure_dict(failure, self._tables, self._source))

    def flush(self) -> None:
        """Append the buffered records and failures as one chunk and fsync it."""
        t = self._tables
        if not self._buf["time_us"] and not self._fail_buf:
            return  # a new source is written with its first record, so empty reruns add nothing
        chunk = _encode_chunk(
            self.format,
            new_sources=list(enumerate(t.sources))[self._written_sources :],
            new_problems=list(enumerate(t.problems))[self._written_problems :],
            new_choices=list(enumerate(t.choices))[self._written_choices :],
            columns={k: np.array(v) for k, v in self._buf.items()},
            failures=self._fail_buf,
            compress=self.compress,
        )
        start = self._fh.tell()
        try:
            self._fh.write(chunk)
            self._sync()
            self._chunk_written()
        except BaseException:
            self._after_interrupted_write(start, len(chunk))
            raise

    def _after_interrupted_write(self, start: int, size: int) -> None:
        """Interrupted (Ctrl-C, SIGTERM) during or just after a chunk's write: a chunk on disk
        whole counts as written (close() would otherwise write it again: duplicate records); a
        part of one is cut off and its records stay buffered."""
        try:
            self._fh.flush()
            whole = os.fstat(self._fh.fileno()).st_size >= start + size
        except Exception:
            return  # cannot tell: a resumed writer's recovery cuts off what is incomplete
        if whole:
            self._chunk_written()
            return
        with contextlib.suppress(Exception):
            self._fh.truncate(start)
            self._fh.seek(start)

    def _chunk_written(self) -> None:
        """The buffered chunk is on disk: count its tables written and empty the buffers (safe to
        repeat)."""
        t = self._tables
        self._written_sources = len(t.sources)
        self._written_problems = len(t.problems)
        self._written_choices = len(t.choices)
        for v in self._buf.values():
            v.clear()
        self._fail_buf = []

    def close(self) -> None:
        if not self._fh.closed:
            try:
                self.flush()
            finally:
                _unlock_and_close(self._fh)

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
