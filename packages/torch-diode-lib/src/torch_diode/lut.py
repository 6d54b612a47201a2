"""A kernel lookup table: for each measured problem, its fastest measured choices.

Built from a dataset of one GPU; repeated measurements of a choice collapse to their median.
The choices handler uses exact hits; ``diode data lut`` writes the file. The file is JSON:

    {"format": "torch-diode-lut", "schema_version": 1, "hardware": "NVIDIA-H100", "top_k": 5,
     "provenance": {"created_by": ..., "records": ..., "problems": ..., "sources": [...]},
     "entries": [{"problem": {...}, "aten_time_us": 12.5 | null,
                  "choices": [{"choice": {...}, "time_us": 10.1}, ...]}, ...]}
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from torch_diode._text import plural
from torch_diode.dataset import Dataset
from torch_diode.errors import DatasetFormatError, SchemaVersionError
from torch_diode.records import Choice, Problem, Provenance

FORMAT_NAME = "torch-diode-lut"
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class LUTEntry:
    """The best measured choices of one problem, fastest first, with their median times (µs)."""

    problem: Problem
    choices: tuple[Choice, ...]
    time_us: tuple[float, ...]
    aten_time_us: float | None  # median time of the fastest ATen choice, when one was measured


def best_choices(
    ds: Dataset, *, top_k: int | None = None
) -> Iterator[tuple[Problem, list[tuple[Choice, float]], float | None]]:
    """For each problem of ``ds`` (in table order): its choices by median time (fastest first, at
    most ``top_k``) and the fastest ATen median (or None). Ties are broken by the choice's ``key()``.

    Vectorised over the whole dataset (a million records take well under a second)."""
    if not len(ds):
        return
    # Sort records by (problem, choice, time); each (problem, choice) run is one group.
    order = np.lexsort((ds.time_us, ds.choice_idx, ds.problem_idx))
    p, c, t = ds.problem_idx[order], ds.choice_idx[order], ds.time_us[order]
    new = np.ones(len(p), dtype=bool)
    new[1:] = (p[1:] != p[:-1]) | (c[1:] != c[:-1])
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, len(p)))
    # Median of a sorted run: the middle element, or the mean of the two middle ones (as np.median).
    med = (t[starts + (sizes - 1) // 2] + t[starts + sizes // 2]) / 2
    gp, gc = p[starts], c[starts]
    key_rank = np.empty(len(ds.choices), dtype=np.int64)
    key_rank[sorted(range(len(ds.choices)), key=lambda i: ds.choices[i].key())] = np.arange(len(ds.choices))
    g = np.lexsort((key_rank[gc], med, gp))
    gp, gc, med = gp[g], gc[g], med[g]
    is_aten = np.array([ch.is_aten for ch in ds.choices], dtype=bool)
    bounds = np.flatnonzero(np.r_[True, gp[1:] != gp[:-1]])
    ends = np.append(bounds[1:], len(gp))
    for s, e in zip(bounds.tolist(), ends.tolist()):
        stop = e if top_k is None else min(e, s + top_k)
        ranked = [(ds.choices[ci], mt) for ci, mt in zip(gc[s:stop].tolist(), med[s:stop].tolist())]
        aten_sel = is_aten[gc[s:e]]
        aten = float(med[s:e][aten_sel][0]) if aten_sel.any() else None
        yield ds.problems[int(gp[s])], ranked, aten


class KernelLUT:
    """Exact-hit lookup of the best measured choices per problem, for one hardware key."""

    def __init__(
        self,
        *,
        hardware: str,
        entries: Sequence[LUTEntry],
        top_k: int,
        provenance: Mapping[str, Any] | None = None,
    ) -> None:
        self.hardware = hardware
        self.top_k = top_k
        self.provenance: dict[str, Any] = dict(provenance or {})
        self._entries: dict[Problem, LUTEntry] = {}
        for e in entries:
            if e.problem in self._entries:
                raise ValueError(f"problem: {e.problem.key()} appears twice in the table")
            self._entries[e.problem] = e

    @classmethod
    def from_dataset(cls, ds: Dataset, *, top_k: int = 5) -> KernelLUT:
        """Build the table from a dataset of one GPU.

        Raises:
            ValueError: ``top_k`` < 1, or the dataset mixes hardware keys (or has no source).
        """
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k: must be a positive integer, got {top_k!r}")
        hardware = ds.hardware
        entries = [
            LUTEntry(p, tuple(c for c, _ in ranked), tuple(t for _, t in ranked), aten)
            for p, ranked, aten in best_choices(ds, top_k=top_k)
        ]
        from torch_diode._version import __version__

        provenance = {
            "created_by": f"torch-diode {__version__}",
            "records": len(ds),
            "problems": len(entries),
            "sources": [s.to_dict() for s in ds.sources],
        }
        return cls(hardware=hardware, entries=entries, top_k=top_k, provenance=provenance)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, problem: object) -> bool:
        return problem in self._entries

    def __iter__(self) -> Iterator[LUTEntry]:
        return iter(self._entries.values())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KernelLUT):
            return NotImplemented
        return (self.hardware, self.top_k, self._entries, self.provenance) == (
            other.hardware,
            other.top_k,
            other._entries,
            other.provenance,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"KernelLUT({self.hardware}, {plural(len(self), 'problem')}, top_k={self.top_k})"

    def lookup(self, problem: Problem) -> list[Choice] | None:
        """The best measured choices of ``problem`` (fastest first), or None when it was not measured."""
        e = self._entries.get(problem)
        return None if e is None else list(e.choices)

    def entry(self, problem: Problem) -> LUTEntry | None:
        """The whole entry of ``problem`` (choices with their times), or None."""
        return self._entries.get(problem)

    # -- files ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "schema_version": SCHEMA_VERSION,
            "hardware": self.hardware,
            "top_k": self.top_k,
            "provenance": self.provenance,
            "entries": [
                {
                    "problem": e.problem.to_dict(),
                    "aten_time_us": e.aten_time_us,
                    "choices": [{"choice": c.to_dict(), "time_us": t} for c, t in zip(e.choices, e.time_us)],
                }
                for e in self._entries.values()
            ],
        }

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the table as JSON, atomically (a per-process temp file, then ``os.replace``)."""
        from torch_diode._files import atomic_write

        return atomic_write(path, json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> KernelLUT:
        """Read a table written by ``save``.

        Raises:
            DatasetFormatError: the file is missing, unreadable, not JSON or not a valid table
                (the message names the file and what is wrong).
            SchemaVersionError: the table has another schema version.
        """
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise DatasetFormatError(f"{p}: no such file") from None
        except IsADirectoryError:
            raise DatasetFormatError(f"{p}: is a directory, not a lookup table") from None
        except UnicodeDecodeError:
            raise DatasetFormatError(f"{p}: not a lookup table (not UTF-8 text)") from None
        except OSError as e:
            raise DatasetFormatError(f"{p}: cannot read: {e.strerror or e}") from None
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise DatasetFormatError(f"{p}: not valid JSON: {e}") from None
        if not isinstance(obj, dict) or obj.get("format") != FORMAT_NAME:
            raise DatasetFormatError(f'{p}: not a torch-diode lookup table (no "format": "{FORMAT_NAME}")')
        if obj.get("schema_version") != SCHEMA_VERSION:
            raise SchemaVersionError(
                str(p),
                obj.get("schema_version"),
                SCHEMA_VERSION,
                "rebuild it with `diode data lut DATASET... --output LUT.json`",
            )
        try:
            return cls._from_obj(obj)
        except (ValueError, TypeError, KeyError) as e:
            raise DatasetFormatError(f"{p}: malformed lookup table: {_describe(e)}") from None

    @classmethod
    def _from_obj(cls, obj: Mapping[str, Any]) -> KernelLUT:
        expected = {"format", "schema_version", "hardware", "top_k", "provenance", "entries"}
        if set(obj) != expected:
            raise ValueError(f"expected keys {sorted(expected)}, got {sorted(obj)}")
        hardware, top_k, provenance = obj["hardware"], obj["top_k"], obj["provenance"]
        if not isinstance(hardware, str) or not hardware:
            raise ValueError(f"hardware: must be a non-empty string, got {hardware!r}")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k: must be a positive integer, got {top_k!r}")
        if not isinstance(provenance, dict):
            raise ValueError(f"provenance: must be an object, got {provenance!r:.100}")
        for s in provenance.get("sources", []):
            Provenance.from_dict(s)  # validates the stored sources
        if not isinstance(obj["entries"], list):
            raise ValueError("entries: must be a list")
        entries = []
        for i, e in enumerate(obj["entries"]):
            if not isinstance(e, dict) or set(e) != {"problem", "aten_time_us", "choices"}:
                raise ValueError(f"entry {i}: expected keys problem, aten_time_us, choices, got {e!r:.200}")
            try:
                entries.append(_entry_from_obj(e, top_k))
            except (ValueError, TypeError, KeyError) as err:
                raise ValueError(f"entry {i}: {_describe(err)}") from None
        return cls(hardware=hardware, entries=entries, top_k=top_k, provenance=provenance)


def _entry_from_obj(e: Mapping[str, Any], top_k: int) -> LUTEntry:
    problem = Problem.from_dict(e["problem"])
    if not isinstance(e["choices"], list) or not 1 <= len(e["choices"]) <= top_k:
        raise ValueError(f"choices: must be a list of 1 to {top_k} entries")
    choices, times = [], []
    for c in e["choices"]:
        if not isinstance(c, dict) or set(c) != {"choice", "time_us"}:
            raise ValueError(f"choices: expected {{choice, time_us}} objects, got {c!r:.200}")
        choices.append(Choice.from_dict(c["choice"]))
        times.append(_time(c["time_us"], "time_us"))
    if times != sorted(times):
        raise ValueError("choices: must be ordered fastest first")
    aten = e["aten_time_us"]
    return LUTEntry(problem, tuple(choices), tuple(times), None if aten is None else _time(aten, "aten_time_us"))


def _time(v: object, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name}: must be a positive finite number of microseconds, got {v!r}")
    return float(v)


def _describe(e: BaseException) -> str:
    # KeyError's str() is just the quoted key; say what it means.
    return f"missing field {e.args[0]!r}" if isinstance(e, KeyError) and e.args else str(e)
