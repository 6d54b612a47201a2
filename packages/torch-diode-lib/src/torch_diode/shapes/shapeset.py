"""Shape sets: named GEMM shapes in a JSON file, and how they become problems.

File format (``format: "torch-diode-shapeset"``, ``version: 1``)::

    {
      "format": "torch-diode-shapeset",
      "version": 1,
      "description": "what the set is and how it was made",
      "entries": [
        {"op": "mm", "m": 128, "n": 4096, "k": 4096, "batch": 1,
         "dtypes": ["bfloat16", "float16"], "layout": "row/col",
         "source": "Llama-3.1-8B self_attn.q_proj", "models": ["Llama-3.1-8B"],
         "tags": ["llm", "prefill"], "count": 32, "split": "train"}
      ]
    }

Entry fields:

* ``op`` (``mm``, ``addmm``, ``bmm``, ``baddbmm``), ``m``, ``n``, ``k`` (positive ints) and
  ``batch`` (1 unless bmm/baddbmm; default 1): ``out = A (M x K) @ B (K x N)``.
* ``dtypes``: the dtypes to collect the shape in (canonical names, e.g. ``bfloat16``); ``dtype``
  (one name) is accepted too.
* ``layout``: ``"<A>/<B>"`` with ``row`` (row-major, last stride 1) or ``col`` (column-major, a
  transposed operand); default ``row/row``. ``nn.Linear`` gives ``row/col`` (``x @ W.T``).
  Optional ``stride_a``/``stride_b``/``stride_bias`` give exact strides instead (padded or
  otherwise non-contiguous operands), as in :class:`~torch_diode.records.Problem`.
* ``source`` (free text: model and layer), ``models`` (model names), ``tags`` (e.g. ``llm``,
  ``decode``, ``prefill``, ``awkward``, ``prime``), ``count`` (calls per forward; summed when
  entries of one shape from several models or batch sizes are merged), all optional.
* ``split``: ``"train"`` or ``"val"``. Files written by torch-diode use :func:`split_of`, a hash
  of the shape (op, M, N, K, batch, layout; not the dtype or the source), so one shape is in
  one split whatever model it came from, and training and validation never share a shape.

Unknown fields are rejected, so a typo is an error, not a silently ignored setting.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch_diode._text import plural
from torch_diode.records import BATCHED_OPS, BIAS_OPS, OPS, Problem, canonical_dtype

FORMAT_NAME = "torch-diode-shapeset"
VERSION = 1
SPLITS: tuple[str, ...] = ("train", "val")
#: Share of shapes :func:`split_of` puts in the validation split.
VAL_FRACTION = 0.2
LAYOUTS: tuple[str, ...] = ("row/row", "row/col", "col/row", "col/col")

_FIELDS = frozenset(
    {
        "op",
        "m",
        "n",
        "k",
        "batch",
        "dtypes",
        "dtype",
        "layout",
        "stride_a",
        "stride_b",
        "stride_bias",
        "source",
        "models",
        "tags",
        "count",
        "split",
    }
)


class ShapeSetError(ValueError):
    """A shape-set file or entry is malformed; the message names the file, the entry and the field."""


def strides_for(op: str, m: int, n: int, k: int, layout: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Dense strides of A (M x K) and B (K x N) for a ``"row/col"``-style layout (batch-major for bmm)."""
    la, lb = layout.split("/")
    a2 = (k, 1) if la == "row" else (1, m)
    b2 = (n, 1) if lb == "row" else (1, k)
    if op in BATCHED_OPS:
        return (m * k, *a2), (k * n, *b2)
    return a2, b2


def split_of(op: str, m: int, n: int, k: int, batch: int = 1, layout: str = "row/row") -> str:
    """The deterministic split of a shape: ``"val"`` for about :data:`VAL_FRACTION` of shapes.

    Rule: the first 8 hex digits of ``sha256("op:m:n:k:batch:layout")`` as an integer, modulo
    1000, below ``1000 * VAL_FRACTION`` means validation.
    """
    key = f"{op}:{m}:{n}:{k}:{batch}:{layout}".encode()
    return "val" if int(hashlib.sha256(key).hexdigest()[:8], 16) % 1000 < 1000 * VAL_FRACTION else "train"


@dataclass(frozen=True, kw_only=True)
class ShapeEntry:
    """One shape of a shape set (see the module docstring for the fields)."""

    op: str
    m: int
    n: int
    k: int
    batch: int = 1
    dtypes: tuple[str, ...] = ("float16",)
    layout: str = "row/row"
    stride_a: tuple[int, ...] | None = None
    stride_b: tuple[int, ...] | None = None
    stride_bias: tuple[int, ...] | None = None
    source: str = ""
    models: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    count: int = 1
    split: str = ""

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"op: unknown op {self.op!r}; known: {', '.join(OPS)}")
        for name in ("m", "n", "k", "batch", "count"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name}: must be a positive integer, got {v!r}")
        if self.op not in BATCHED_OPS and self.batch != 1:
            raise ValueError(f"batch: must be 1 for op {self.op!r}, got {self.batch}")
        if isinstance(self.dtypes, str) or not self.dtypes:
            raise ValueError(f"dtypes: must be a non-empty list of dtype names, got {self.dtypes!r}")
        object.__setattr__(self, "dtypes", tuple(dict.fromkeys(canonical_dtype(d) for d in self.dtypes)))
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout: must be one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        for name in ("stride_a", "stride_b", "stride_bias"):
            v = getattr(self, name)
            if v is not None:
                object.__setattr__(self, name, tuple(v))
        object.__setattr__(self, "models", tuple(self.models))
        object.__setattr__(self, "tags", tuple(self.tags))
        if not self.split:
            object.__setattr__(self, "split", split_of(self.op, self.m, self.n, self.k, self.batch, self.layout))
        if self.split not in SPLITS:
            raise ValueError(f"split: must be one of {', '.join(SPLITS)}, got {self.split!r}")
        self.problems()  # validate strides now, not at collection time

    @property
    def shape_key(self) -> tuple[str, int, int, int, int, str]:
        return (self.op, self.m, self.n, self.k, self.batch, self.layout)

    def problems(self, dtypes: Sequence[str] | None = None) -> list[Problem]:
        """One problem per dtype (``dtypes`` restricts them to those also in the entry)."""
        sa, sb = strides_for(self.op, self.m, self.n, self.k, self.layout)
        if dtypes is None:
            want = self.dtypes
        else:
            asked = {canonical_dtype(x) for x in dtypes}
            want = tuple(d for d in self.dtypes if d in asked)
        return [
            Problem(
                op=self.op,
                m=self.m,
                n=self.n,
                k=self.k,
                batch=self.batch,
                dtype=d,
                stride_a=self.stride_a or sa,
                stride_b=self.stride_b or sb,
                stride_bias=self.stride_bias if self.op in BIAS_OPS else None,
            )
            for d in want
        ]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "op": self.op,
            "m": self.m,
            "n": self.n,
            "k": self.k,
            "batch": self.batch,
            "dtypes": list(self.dtypes),
            "layout": self.layout,
        }
        for name in ("stride_a", "stride_b", "stride_bias"):
            if getattr(self, name) is not None:
                d[name] = list(getattr(self, name))
        if self.source:
            d["source"] = self.source
        if self.models:
            d["models"] = list(self.models)
        if self.tags:
            d["tags"] = list(self.tags)
        if self.count != 1:
            d["count"] = self.count
        d["split"] = self.split
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ShapeEntry:
        if not isinstance(d, Mapping):
            raise ValueError(f"entry must be an object, got {type(d).__name__}")
        unknown = set(d) - _FIELDS
        if unknown:
            raise ValueError(
                f"{plural(len(unknown), 'unknown field')} {sorted(unknown)}; known: {', '.join(sorted(_FIELDS))}"
            )
        missing = {"op", "m", "n", "k"} - set(d)
        if missing:
            raise ValueError(f"{plural(len(missing), 'missing field')} {sorted(missing)}")
        kw = dict(d)
        if "dtype" in kw:
            if "dtypes" in kw:
                raise ValueError("give either 'dtype' or 'dtypes', not both")
            kw["dtypes"] = [kw.pop("dtype")]
        for name in ("dtypes", "models", "tags"):
            if name in kw:
                if isinstance(kw[name], str) or not isinstance(kw[name], list):
                    raise ValueError(f"{name}: must be a list, got {kw[name]!r}")
                kw[name] = tuple(kw[name])
        for name in ("source", "split", "layout", "op"):
            if name in kw and not isinstance(kw[name], str):
                raise ValueError(f"{name}: must be a string, got {kw[name]!r}")
        return cls(**kw)


@dataclass
class ShapeSet:
    """A loaded shape set: its entries plus the file's description."""

    entries: list[ShapeEntry]
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def select(
        self, *, split: str | None = None, ops: Iterable[str] | None = None, tags: Iterable[str] | None = None
    ) -> list[ShapeEntry]:
        """Entries of one split (``None``/"all" = both), of the given ops, having any of the tags."""
        opset = set(ops) if ops is not None else None
        tagset = set(tags) if tags is not None else None
        return [
            e
            for e in self.entries
            if (split in (None, "all") or e.split == split)
            and (opset is None or e.op in opset)
            and (tagset is None or tagset & set(e.tags))
        ]

    def problems(
        self,
        *,
        split: str | None = None,
        ops: Iterable[str] | None = None,
        tags: Iterable[str] | None = None,
        dtypes: Sequence[str] | None = None,
    ) -> list[Problem]:
        """The problems of the entries :meth:`select` picks (``dtypes`` as :meth:`ShapeEntry.problems`),
        de-duplicated, in file order."""
        return list(dict.fromkeys(p for e in self.select(split=split, ops=ops, tags=tags) for p in e.problems(dtypes)))


def load_shapeset(path: str | os.PathLike[str]) -> ShapeSet:
    """Read and validate a shape-set JSON file.

    Raises:
        ShapeSetError: the file is missing, not JSON, not a shape set, of another version, or an
            entry is invalid (the message names the entry index and the field).
    """
    p = Path(path)
    try:
        obj = json.loads(p.read_text())
    except FileNotFoundError:
        raise ShapeSetError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ShapeSetError(f"{p}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise ShapeSetError(f"{p}: not valid JSON: {e}") from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT_NAME:
        raise ShapeSetError(f'{p}: not a shape set (expected an object with "format": "{FORMAT_NAME}")')
    if obj.get("version") != VERSION:
        raise ShapeSetError(
            f"{p}: shape-set version {obj.get('version')!r} is not supported (this torch-diode reads {VERSION})"
        )
    entries = obj.get("entries")
    if not isinstance(entries, list):
        raise ShapeSetError(f'{p}: "entries" must be a list')
    out = []
    for i, d in enumerate(entries):
        try:
            out.append(ShapeEntry.from_dict(d))
        except (ValueError, TypeError) as e:
            raise ShapeSetError(f"{p}: entry {i}: {e}") from None
    extra = {k: v for k, v in obj.items() if k not in ("format", "version", "description", "entries")}
    return ShapeSet(out, str(obj.get("description", "")), extra)


def save_shapeset(
    entries: Iterable[ShapeEntry], path: str | os.PathLike[str], *, description: str = "", **extra: Any
) -> Path:
    """Write a shape set (one entry per line, so diffs stay readable)."""
    p = Path(path)
    head = {"format": FORMAT_NAME, "version": VERSION, "description": description, **extra}
    lines = [json.dumps(e.to_dict(), separators=(", ", ": ")) for e in entries]
    body = json.dumps(head, indent=2)[:-2] + ',\n  "entries": [\n    ' + ",\n    ".join(lines) + "\n  ]\n}\n"
    json.loads(body)  # never write a file we cannot read back
    from torch_diode._files import atomic_write

    return atomic_write(p, body)


def merge_entries(entries: Iterable[ShapeEntry]) -> list[ShapeEntry]:
    """Merge entries of the same shape (op, M, N, K, batch, layout, strides): dtypes, models and tags
    are united, counts added, the first source kept. Order follows first appearance."""
    merged: dict[tuple[Any, ...], ShapeEntry] = {}
    for e in entries:
        key = (*e.shape_key, e.stride_a, e.stride_b, e.stride_bias)
        old = merged.get(key)
        if old is None:
            merged[key] = e
            continue
        merged[key] = ShapeEntry(
            op=e.op,
            m=e.m,
            n=e.n,
            k=e.k,
            batch=e.batch,
            layout=e.layout,
            stride_a=e.stride_a,
            stride_b=e.stride_b,
            stride_bias=e.stride_bias,
            dtypes=tuple(dict.fromkeys(old.dtypes + e.dtypes)),
            source=old.source,
            models=tuple(dict.fromkeys(old.models + e.models)),
            tags=tuple(dict.fromkeys(old.tags + e.tags)),
            count=old.count + e.count,
            split=old.split,
        )
    return list(merged.values())
