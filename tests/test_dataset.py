"""Dataset files: exact round trips, clear errors on bad files, interrupted writers, recovery, merging."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import zlib
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torch_diode.dataset import (
    Dataset,
    DatasetWriter,
    merge_datasets,
    read_dataset,
    read_datasets,
    recover_dataset,
    write_dataset,
)
from torch_diode.errors import DatasetFormatError, SchemaVersionError, TruncatedFileError
from torch_diode.records import (
    DTYPE_ITEMSIZE,
    FAILURE_REASONS,
    OPS,
    Choice,
    FailureRecord,
    Problem,
    Provenance,
    TimingRecord,
)

HW = "NVIDIA-H100"
FORMATS = ["json", "msgpack"]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- strategies ----------------------------------------------------------------------------------------

sizes = st.integers(1, 2**20)  # default strides multiply two sizes; keep them in int64
strides = st.integers(0, 2**40)


@st.composite
def problems(draw: st.DrawFn) -> Problem:
    op = draw(st.sampled_from(OPS))
    batched = op in ("bmm", "baddbmm")
    ndim = 3 if batched else 2
    kw: dict[str, Any] = dict(
        op=op,
        m=draw(sizes),
        n=draw(sizes),
        k=draw(sizes),
        batch=draw(sizes) if batched else 1,
        dtype=draw(st.sampled_from(list(DTYPE_ITEMSIZE))),
        out_dtype=draw(st.sampled_from(["", *DTYPE_ITEMSIZE])),
    )
    if draw(st.booleans()):
        kw["stride_a"] = tuple(draw(st.lists(strides, min_size=ndim, max_size=ndim)))
        kw["stride_b"] = tuple(draw(st.lists(strides, min_size=ndim, max_size=ndim)))
    if op in ("addmm", "baddbmm") and draw(st.booleans()):
        kw["stride_bias"] = tuple(draw(st.lists(strides, min_size=ndim, max_size=ndim)))
    return Problem(**kw)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
pos = st.integers(1, 1024)


@st.composite
def choices(draw: st.DrawFn) -> Choice:
    extra = draw(st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True), scalars, max_size=3))
    if draw(st.booleans()):
        return Choice(template="aten::" + draw(st.sampled_from(OPS)), extra=tuple(extra.items()))
    return Choice(
        template=draw(st.sampled_from(["triton::mm", "triton::bmm", "triton::persistent_tma_mm"])),
        block_m=draw(pos),
        block_n=draw(pos),
        block_k=draw(pos),
        group_m=draw(st.none() | pos),
        num_stages=draw(pos),
        num_warps=draw(pos),
        even_k=draw(st.none() | st.booleans()),
        allow_tf32=draw(st.none() | st.booleans()),
        use_fast_accum=draw(st.none() | st.booleans()),
        acc_type=draw(st.none() | st.sampled_from(["tl.float32", "tl.float16"])),
        extra=tuple(extra.items()),
    )


provenances = st.builds(
    Provenance,
    hardware=st.sampled_from([HW, "NVIDIA-A100", "custom-gpu"]),
    gpu_name=st.text(max_size=30),
    driver=st.text(max_size=10),
    torch_version=st.text(max_size=10),
    triton_version=st.text(max_size=10),
    collector=st.sampled_from(["", "inductor", "sweep"]),
    command=st.text(max_size=40),
    date=st.text(max_size=25),
    seed=st.none() | st.integers(-(2**63), 2**63 - 1),
    extra=st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3).map(lambda d: tuple(d.items())),
)
times = st.floats(min_value=1e-6, max_value=1e9, allow_nan=False, allow_infinity=False, exclude_min=False)


@st.composite
def datasets(draw: st.DrawFn) -> Dataset:
    sources = draw(st.lists(provenances, min_size=1, max_size=3, unique=True))
    hw = sorted({s.hardware for s in sources})
    ps = draw(st.lists(problems(), min_size=1, max_size=4, unique=True))
    cs = draw(st.lists(choices(), min_size=1, max_size=4, unique=True))
    recs = draw(
        st.lists(
            st.builds(
                TimingRecord,
                problem=st.sampled_from(ps),
                choice=st.sampled_from(cs),
                time_us=times,
                hardware=st.sampled_from(hw),
            ),
            max_size=30,
        )
    )
    fails = draw(
        st.lists(
            st.builds(
                FailureRecord,
                problem=st.sampled_from(ps),
                choice=st.none() | st.sampled_from(cs),
                reason=st.sampled_from(FAILURE_REASONS),
                message=st.text(max_size=20),
                hardware=st.sampled_from(hw),
            ),
            max_size=3,
            unique=True,
        )
    )
    return Dataset.from_records(recs, sources, fails)


def bitwise_equal(a: Dataset, b: Dataset) -> bool:
    """Same records in the same order, times compared bit for bit."""
    ra, rb = list(a.records()), list(b.records())
    return (
        ra == rb
        and a.time_us.tobytes() == b.time_us.tobytes()
        and a.sources == b.sources
        and a.failures == b.failures
        and all(repr(x.problem) == repr(y.problem) and repr(x.choice) == repr(y.choice) for x, y in zip(ra, rb))
    )


# -- round trips -----------------------------------------------------------------------------------------


@SETTINGS
@given(problems())
def test_problem_dict_round_trip(p: Problem) -> None:
    assert Problem.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    assert Problem.from_dict(msgpack.unpackb(msgpack.packb(p.to_dict()))) == p


@SETTINGS
@given(choices())
def test_choice_dict_round_trip(c: Choice) -> None:
    for back in (json.loads(json.dumps(c.to_dict())), msgpack.unpackb(msgpack.packb(c.to_dict()))):
        c2 = Choice.from_dict(back)
        assert c2 == c and repr(c2) == repr(c)  # repr: 1 vs 1.0 vs True stay apart


@SETTINGS
@given(provenances)
def test_provenance_dict_round_trip(p: Provenance) -> None:
    assert Provenance.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    assert Provenance.from_dict(msgpack.unpackb(msgpack.packb(p.to_dict()))) == p


@SETTINGS
@given(datasets(), st.sampled_from(FORMATS))
def test_dataset_file_round_trip_is_exact(ds: Dataset, fmt: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = write_dataset(ds, Path(d) / f"ds.{fmt}")
        back = read_dataset(path)
        assert back == ds
        assert bitwise_equal(back, ds)
        # and through the other format
        other = "json" if fmt == "msgpack" else "msgpack"
        again = read_dataset(write_dataset(back, Path(d) / f"ds2.{other}"))
        assert bitwise_equal(again, ds)


@SETTINGS
@given(datasets(), st.sampled_from(FORMATS), st.integers(1, 7))
def test_writer_round_trip(ds: Dataset, fmt: str, flush_every: int) -> None:
    sources = [s for s in ds.sources if s.hardware == ds.sources[0].hardware]
    recs = [r for r in ds.records() if r.hardware == sources[0].hardware]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"w.{fmt}"
        with DatasetWriter(path, sources[0], flush_every=flush_every) as w:
            for r in recs:
                w.add(r)
        back = read_dataset(path)
    assert sorted(map(repr, back.records())) == sorted(map(repr, recs))


# -- small fixtures ---------------------------------------------------------------------------------------

PROV = Provenance(hardware=HW, gpu_name="NVIDIA H100 80GB HBM3", collector="test", date="2026-11-22")
TRITON = [
    Choice(template="triton::mm", block_m=bm, block_n=64, block_k=32, group_m=8, num_stages=3, num_warps=4)
    for bm in (32, 64, 128)
]
PROBLEMS = [Problem(op="mm", m=m, n=512, k=256) for m in (64, 128, 256, 512)]


def records(problem: Problem, hw: str = HW, scale: float = 1.0) -> list[TimingRecord]:
    out = [TimingRecord(problem=problem, choice=Choice.aten("mm"), time_us=10.0 * scale, hardware=hw)]
    out += [
        TimingRecord(problem=problem, choice=c, time_us=(5.0 + i) * scale, hardware=hw) for i, c in enumerate(TRITON)
    ]
    return out


def small(hw: str = HW, scale: float = 1.0) -> Dataset:
    prov = PROV if hw == HW else Provenance(hardware=hw)
    return Dataset.from_records([r for p in PROBLEMS for r in records(p, hw, scale)], prov)


def test_repr_counts_in_words() -> None:
    # Regression: the repr said "1 records, 1 problems, 1 choices" and "1234 records".
    one = Dataset.from_records(
        records(PROBLEMS[0])[:1],
        PROV,
        failures=[FailureRecord(problem=PROBLEMS[0], choice=TRITON[0], reason="oom", message="x", hardware=HW)],
    )
    assert repr(one) == "Dataset(1 record, 1 problem, 1 choice, hardware=['NVIDIA-H100'], 1 failure)"
    many = Dataset.from_records(
        [TimingRecord(problem=PROBLEMS[0], choice=TRITON[0], time_us=1.0 + i, hardware=HW) for i in range(1234)], PROV
    )
    assert repr(many) == "Dataset(1,234 records, 1 problem, 1 choice, hardware=['NVIDIA-H100'], 0 failures)"
    assert repr(small()) == "Dataset(16 records, 4 problems, 4 choices, hardware=['NVIDIA-H100'], 0 failures)"


# -- bad files -------------------------------------------------------------------------------------------


def _header(version: Any = 1, fmt: str = "torch-diode-dataset") -> dict[str, Any]:
    return {"format": fmt, "schema_version": version, "created_by": "test"}


def _chunk(**over: Any) -> dict[str, Any]:
    c: dict[str, Any] = {
        "sources": [[0, PROV.to_dict()]],
        "problems": [[0, PROBLEMS[0].to_dict()]],
        "choices": [[0, Choice.aten("mm").to_dict()]],
        "records": {"problem": [0], "choice": [0], "time_us": [1.5], "source": [0]},
        "failures": [],
    }
    c.update(over)
    return c


def _encode(objs: list[Any], fmt: str) -> bytes:
    if fmt == "json":
        return b"".join(json.dumps(o).encode() + b"\n" for o in objs)
    out = b""
    for o in objs:
        o = dict(o) if isinstance(o, dict) else o
        if isinstance(o, dict) and isinstance(o.get("records"), dict):
            dts = {"problem": "<i4", "choice": "<i4", "time_us": "<f8", "source": "<u2"}
            o["records"] = {
                k: (np.array(v, dtype=dts[k]).tobytes() if isinstance(v, list) and k in dts else v)
                for k, v in o["records"].items()
            }
        out += msgpack.packb(o, use_bin_type=True)
    return out


BAD_FILES: list[tuple[str, list[Any], str]] = [
    ("not-a-dataset-list", [[1, 2, 3]], "not a torch-diode dataset"),
    ("wrong-format-name", [_header(fmt="something-else")], "not a torch-diode dataset"),
    ("lut-instead-of-dataset", [{"format": "torch-diode-lut", "schema_version": 1}], "not a torch-diode dataset"),
    ("chunk-not-object", [_header(), [1]], "chunk 1: expected an object"),
    ("chunk-missing-keys", [_header(), {"records": {}}], "chunk 1: expected keys"),
    ("second-header", [_header(), _header()], "chunk 1: expected keys"),
    (
        "bad-problem",
        [_header(), _chunk(problems=[[0, {**PROBLEMS[0].to_dict(), "m": -4}]])],
        "m: must be a positive integer, got -4",
    ),
    (
        "unknown-op",
        [_header(), _chunk(problems=[[0, {**PROBLEMS[0].to_dict(), "op": "conv"}]])],
        "op: unknown op 'conv'",
    ),
    (
        "bad-choice",
        [_header(), _chunk(choices=[[0, {"template": "triton::mm", "BLOCK_M": 64}]])],
        "template: Triton template",
    ),
    ("bad-source", [_header(), _chunk(sources=[[0, {"gpu_name": "x"}]])], "provenance: missing field 'hardware'"),
    ("table-not-pairs", [_header(), _chunk(problems=[PROBLEMS[0].to_dict()])], "problems: expected [id, object] pairs"),
    (
        "duplicate-id",
        [_header(), _chunk(choices=[[0, {"template": "aten::mm"}], [0, {"template": "aten::bmm"}]])],
        "choices: id 0 is defined twice",
    ),
    (
        "undefined-id",
        [_header(), _chunk(records={"problem": [3], "choice": [0], "time_us": [1.0], "source": [0]})],
        "problem id 3 is not defined",
    ),
    (
        "negative-time",
        [_header(), _chunk(records={"problem": [0], "choice": [0], "time_us": [-1.0], "source": [0]})],
        "time_us: record 0 has time -1.0",
    ),
    (
        "nan-time",
        [_header(), _chunk(records={"problem": [0], "choice": [0], "time_us": [float("nan")], "source": [0]})],
        "time_us: record 0 has time nan",
    ),
    (
        "column-lengths",
        [_header(), _chunk(records={"problem": [0, 0], "choice": [0], "time_us": [1.0], "source": [0]})],
        "columns differ in length",
    ),
    (
        "missing-column",
        [_header(), _chunk(records={"problem": [0], "choice": [0], "time_us": [1.0]})],
        "records: expected columns",
    ),
    (
        "column-wrong-type",
        [_header(), _chunk(records={"problem": "x", "choice": [0], "time_us": [1.0], "source": [0]})],
        "column 'problem' must be",
    ),
    ("bad-failure", [_header(), _chunk(failures=[{"problem": 0}])], "failures: malformed entry"),
    (
        "failure-bad-reason",
        [_header(), _chunk(failures=[{"problem": 0, "choice": None, "reason": "boom", "message": "", "source": 0}])],
        "reason: unknown failure reason 'boom'",
    ),
    (
        "failure-undefined-id",
        [_header(), _chunk(failures=[{"problem": 9, "choice": None, "reason": "oom", "message": "", "source": 0}])],
        "failures: entry refers to an undefined id",
    ),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("objs", "expect"), [(o, e) for _, o, e in BAD_FILES], ids=[n for n, _, _ in BAD_FILES])
def test_malformed_files_name_the_file_and_problem(tmp_path: Path, fmt: str, objs: list[Any], expect: str) -> None:
    path = tmp_path / f"bad.{fmt}"
    path.write_bytes(_encode(objs, fmt))
    with pytest.raises(DatasetFormatError) as e:
        read_dataset(path)
    assert type(e.value) is DatasetFormatError
    assert str(e.value).startswith(str(path)), str(e.value)
    assert expect in str(e.value)


@pytest.mark.parametrize(("fmt", "version"), [(f, v) for f in FORMATS for v in (3, 0, "1", None, True)] + [("json", 2)])
def test_other_schema_version(tmp_path: Path, fmt: str, version: Any) -> None:
    """msgpack files are read in versions 1 and 2 (compressed chunks), JSON files in version 1."""
    path = tmp_path / f"v.{fmt}"
    path.write_bytes(_encode([_header(version), _chunk()], fmt))
    with pytest.raises(SchemaVersionError) as e:
        read_dataset(path)
    reads = "versions 1, 2" if fmt == "msgpack" else "version 1"
    assert str(e.value).startswith(
        f"{path}: schema version {version!r} is not supported (this torch-diode reads {reads})"
    )
    assert e.value.found == version and e.value.supported == ((1, 2) if fmt == "msgpack" else 1)


@pytest.mark.parametrize(
    ("name", "data", "expect"),
    [
        ("empty.msgpack", b"", "file is empty"),
        ("empty.json", b"", "file is empty"),
        ("garbage.json", b"\x00\xffhello\n", "line 1 is not valid JSON"),
        ("text.json", b"hello world\n", "line 1 is not valid JSON"),
        (
            "pretty.json",
            b'{\n "format": "torch-diode-dataset"\n}\n',
            "not a torch-diode dataset (a JSON document over several lines",
        ),
        ("garbage.msgpack", b"\xc1\xc1\xc1\xc1", "not a valid msgpack stream"),
        ("int.msgpack", b"\x01\x02\x03", "not a torch-diode dataset"),
        ("json-as-msgpack.msgpack", json.dumps(_header()).encode() + b"\n", "not a torch-diode dataset"),
    ],
)
def test_garbage_and_empty_files(tmp_path: Path, name: str, data: bytes, expect: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DatasetFormatError) as e:
        read_dataset(path)
    assert str(e.value).startswith(str(path)) and expect in str(e.value)


def test_msgpack_file_read_as_json_and_missing_paths(tmp_path: Path) -> None:
    mp = write_dataset(small(), tmp_path / "a.msgpack")
    wrong = tmp_path / "a.json"
    wrong.write_bytes(mp.read_bytes())
    with pytest.raises(DatasetFormatError, match=rf"^{wrong}: "):
        read_dataset(wrong)
    with pytest.raises(DatasetFormatError, match=rf"^{tmp_path / 'nope.json'}: no such file"):
        read_dataset(tmp_path / "nope.json")
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(DatasetFormatError, match="is a directory"):
        read_dataset(tmp_path / "dir.json")
    with pytest.raises(ValueError, match=r"cannot tell the format from the extension '.txt'"):
        read_dataset(tmp_path / "a.txt")
    assert len(read_dataset(wrong, format="msgpack")) == len(small())


def test_json_without_final_newline_is_complete(tmp_path: Path) -> None:
    path = write_dataset(small(), tmp_path / "a.json")
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    assert read_dataset(path) == small()


@pytest.mark.parametrize("held", ["records", "header"])
def test_a_writer_ends_a_last_line_without_its_newline_before_appending(tmp_path: Path, held: str) -> None:
    """Audit: a JSON file whose complete last line lost its newline (read as complete, above) got
    the resumed run's chunk glued onto that line, and then no reader could read it ("line 2 is
    not valid JSON: Extra data"), `diode data recover` included."""
    path = tmp_path / "a.json"
    before = small() if held == "records" else Dataset.empty()
    if held == "records":
        write_dataset(before, path)
    else:
        DatasetWriter(path, PROV).close()  # the header alone
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    new = records(Problem(op="mm", m=1024, n=512, k=256))
    with DatasetWriter(path, PROV) as w:
        assert w.problems_done == before.collected_problems() and w.recovered_bytes == 0
        for r in new:
            w.add(r)
    got = read_dataset(path)
    assert sorted(map(repr, got.records())) == sorted(map(repr, [*before.records(), *new]))
    assert path.read_bytes().count(b"\n") == (3 if held == "records" else 2)  # a line per object, each ended
    assert recover_dataset(path).dropped_bytes == 0


# -- truncation and recovery ----------------------------------------------------------------------------


def _chunked_file(
    path: Path, n_problems: int = 3, *, compress: bool | None = None
) -> tuple[list[int], list[list[TimingRecord]]]:
    """A file with one chunk per problem; returns the file size after each chunk and the records."""
    ends, recs = [], []
    with DatasetWriter(path, PROV, compress=compress) as w:
        ends.append(path.stat().st_size)  # the header alone
        recs.append([])
        for p in PROBLEMS[:n_problems]:
            rs = records(p)
            for r in rs:
                w.add(r)
            w.add_failure(FailureRecord(problem=p, choice=TRITON[0], reason="oom", message="x", hardware=HW))
            w.flush()
            ends.append(path.stat().st_size)
            recs.append(recs[-1] + rs)
    return ends, recs


@pytest.mark.parametrize("fmt", FORMATS)
def test_truncated_at_every_byte_offset(tmp_path: Path, fmt: str) -> None:
    full = tmp_path / f"full.{fmt}"
    ends, recs = _chunked_file(full, n_problems=2)
    data = full.read_bytes()
    assert ends[-1] == len(data)
    cut = tmp_path / f"cut.{fmt}"
    for n in range(len(data) + 1):
        cut.write_bytes(data[:n])
        # JSON: a last line missing only its newline is complete
        complete = [i for i, e in enumerate(ends) if e <= n or (fmt == "json" and e == n + 1)]
        if n == 0:
            with pytest.raises(DatasetFormatError, match="file is empty"):
                read_dataset(cut)
            continue
        if not complete:
            with pytest.raises(DatasetFormatError, match="truncated inside its header"):
                read_dataset(cut)
            continue
        want = recs[complete[-1]]
        at_boundary = n in ends or (fmt == "json" and n + 1 in ends)  # JSON: the last newline may be missing
        if at_boundary:
            ds = read_dataset(cut)
        else:
            with pytest.raises(TruncatedFileError) as e:
                read_dataset(cut)
            assert e.value.complete_records == len(want) and e.value.complete_chunks == complete[-1]
            if complete[-1] == 0:  # only the header is complete: nothing to keep, nothing promised
                assert "nothing to recover" in str(e.value) and "diode data recover" not in str(e.value)
            else:
                assert f"diode data recover {cut} --output FIXED.{fmt}" in str(e.value)
            ds = read_dataset(cut, recover=True)
        assert sorted(map(repr, ds.records())) == sorted(map(repr, want)), n
        assert len(ds.failures) == len(want) // 4


@pytest.mark.parametrize("fmt", FORMATS)
def test_recover_dataset_in_place_and_to_output(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"a.{fmt}"
    ends, recs = _chunked_file(path)
    cut_at = (ends[2] + ends[3]) // 2
    path.write_bytes(path.read_bytes()[:cut_at])
    res = recover_dataset(path, output=tmp_path / "out.msgpack")
    assert res.chunks == 2 and res.kept_bytes == ends[2] and res.dropped_bytes == cut_at - ends[2]
    assert path.stat().st_size == cut_at  # left alone
    assert read_dataset(tmp_path / "out.msgpack") == res.dataset
    res2 = recover_dataset(path)
    assert path.stat().st_size == ends[2]
    assert read_dataset(path) == res2.dataset == res.dataset
    assert recover_dataset(path).dropped_bytes == 0
    assert len(res.dataset) == len(recs[2])


@pytest.mark.parametrize(
    "compress, damaged, at, byte",
    [
        (None, 1, 7, 0xFF),  # the audit's: the first byte of a compressed chunk's 16-bit length
        (None, 2, 6, 0xC6),  # its bin header made a bin32's, whose length runs past the end
        (None, 1, 0, 0xC6),  # so made of the chunk's map header
        (None, 2, 0, 0xC6),
        (False, 1, 0, 0xC6),
        (False, 2, 0, 0xC6),
    ],
)
def test_damage_before_complete_chunks_is_refused_not_cut(
    tmp_path: Path, compress: bool | None, damaged: int, at: int, byte: int
) -> None:
    """Audit: one damaged byte in a msgpack chunk followed by complete ones read as an interrupted
    write's end: resuming cut the file there ("cut off 631 byte(s) of an interrupted write;
    resuming"), dropping the complete records after it. An interrupted write leaves only part of
    the last chunk; anything else is refused, naming where, and the file is left byte for byte."""
    path = tmp_path / "d.msgpack"
    ends, recs = _chunked_file(path, n_problems=3, compress=compress)
    start = ends[damaged - 1]  # the damaged chunk's first byte; a complete chunk follows it
    data = bytearray(path.read_bytes())
    assert data[start:].startswith(b"\x81\xa4zlib" if compress is None else b"\x85\xa7sources")
    assert at != 7 or data[start + 6] == 0xC5  # a bin16 header: its length's first byte is damaged
    data[start + at] = byte
    path.write_bytes(bytes(data))
    damage = rf"{path}: damaged: it cannot be read past byte {start} \("
    if damaged == 1:
        hint = "no chunk before it is complete, so `diode data recover` has nothing to copy out of it"
    else:
        hint = f"`diode data recover {path} --output FIXED.msgpack` copies the 1 complete chunk before it (4 record"
    with pytest.raises(DatasetFormatError, match=damage) as e:
        DatasetWriter(path, PROV)
    assert hint in str(e.value) and not isinstance(e.value, TruncatedFileError)
    assert path.read_bytes() == data
    for recover in (False, True):
        with pytest.raises(DatasetFormatError, match=damage):
            read_dataset(path, recover=recover)
    with pytest.raises(DatasetFormatError, match=damage):
        recover_dataset(path)  # in place: it would cut the complete chunks off too
    assert path.read_bytes() == data
    res = recover_dataset(path, output=tmp_path / "fixed.msgpack")  # what the error points to
    assert res.chunks == damaged - 1 and res.kept_bytes == start and path.read_bytes() == data
    assert sorted(map(repr, read_dataset(tmp_path / "fixed.msgpack").records())) == sorted(map(repr, recs[damaged - 1]))


def test_a_partial_last_chunk_then_zero_filled_pages_is_an_interrupted_write(tmp_path: Path) -> None:
    """A machine's crash can leave the start of the last chunk followed by zero-filled pages: its
    zlib stream fails to decompress, but no complete chunk follows, so it is an interrupted write's
    end (cut on resume), not damage (the review of session 78's first version of the rule)."""
    path = tmp_path / "d.msgpack"
    ends, recs = _chunked_file(path, n_problems=3, compress=None)
    data = path.read_bytes()
    cut = ends[1] + (ends[2] - ends[1]) // 5  # inside the second chunk, the last one left
    assert ends[2] - cut > 64  # the zeros end before the chunk's length does: its read runs out of data
    path.write_bytes(data[:cut] + bytes(64))  # these zeros make its zlib stream fail, not just end
    assert sorted(map(repr, read_dataset(path, recover=True).records())) == sorted(map(repr, recs[0] + recs[1]))
    with DatasetWriter(path, PROV) as w:
        assert w.recovered_bytes == cut + 64 - ends[1]


WRITER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from torch_diode.dataset import DatasetWriter
    from torch_diode.records import Choice, Problem, Provenance, TimingRecord
    prov = Provenance(hardware="NVIDIA-H100", collector="killed")
    with DatasetWriter(sys.argv[1], prov, flush_every=50) as w:
        for m in range(1, 100000):
            p = Problem(op="mm", m=m, n=64, k=64)
            for bm in (16, 32, 64, 128, 256):
                c = Choice(template="triton::mm", block_m=bm, block_n=32, block_k=32, num_stages=2, num_warps=4)
                w.add(TimingRecord(problem=p, choice=c, time_us=float(m + bm), hardware="NVIDIA-H100"))
            if m % 20 == 0:
                print(m, flush=True)
    """
)


@pytest.mark.parametrize("fmt", FORMATS)
def test_killed_writer_keeps_complete_chunks_and_resumes(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"killed.{fmt}"
    proc = subprocess.Popen([sys.executable, "-c", WRITER_SCRIPT, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        for _ in range(30):  # let it write a few hundred problems
            assert proc.stdout.readline(), "writer died"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    try:
        ds = read_dataset(path)  # killed between chunks: complete
    except TruncatedFileError:
        ds = read_dataset(path, recover=True)
    assert len(ds) >= 500  # every 50 records (10 problems) were flushed; 600 problems were announced
    # A chunk never splits a problem: every problem has all five configs.
    per_problem = np.bincount(ds.problem_idx)
    assert (per_problem == 5).all()
    ms = sorted(p.m for p in ds.problems)
    assert ms == list(range(1, len(ms) + 1))
    # Resume: complete problems are reported done, the partial tail is cut, new records append
    # (under a source of their own: the same collector, another command line).
    with DatasetWriter(path, Provenance(hardware=HW, collector="killed", command="resumed")) as w:
        assert w.problems_done == set(ds.problems) and w.records_before == len(ds)
        todo = [Problem(op="mm", m=m, n=64, k=64) for m in range(1, len(ms) + 11)]
        todo = [p for p in todo if p not in w.problems_done]
        assert len(todo) == 10
        for p in todo:
            w.add(TimingRecord(problem=p, choice=Choice.aten("mm"), time_us=1.0, hardware=HW))
    final = read_dataset(path)
    assert len(final) == len(ds) + 10 and len(final.sources) == 2


# -- compressed msgpack files (schema version 2) -----------------------------------------------------------


def _objects(path: Path) -> list[Any]:
    """The raw msgpack objects of a file (the header, then its chunks as stored)."""
    return list(msgpack.Unpacker(open(path, "rb"), raw=False, strict_map_key=False))


def test_msgpack_is_compressed_by_default_and_plain_on_request(tmp_path: Path) -> None:
    """A msgpack file is written with zlib-compressed chunks (schema version 2) unless
    ``compress=False`` (version 1, as before); both hold the same records, bit for bit, and the
    compressed file of the committed test slice is several times smaller."""
    ds = read_dataset(Path(__file__).parent / "data" / "small_synthetic.msgpack")
    packed = write_dataset(ds, tmp_path / "z.msgpack")
    plain = write_dataset(ds, tmp_path / "p.msgpack", compress=False)
    zh, *zchunks = _objects(packed)
    ph, *pchunks = _objects(plain)
    assert zh["schema_version"] == 2 and ph["schema_version"] == 1
    assert [set(c) for c in zchunks] == [{"zlib"}]
    assert set(pchunks[0]) == {"sources", "problems", "choices", "records", "failures"}
    assert msgpack.unpackb(zlib.decompress(zchunks[0]["zlib"]), raw=False) == pchunks[0]
    assert bitwise_equal(read_dataset(packed), ds) and bitwise_equal(read_dataset(plain), ds)
    assert packed.stat().st_size * 3 < plain.stat().st_size
    # JSON stays text, and version 1
    with pytest.raises(ValueError, match="only msgpack files are compressed"):
        write_dataset(ds, tmp_path / "x.json", compress=True)
    assert json.loads((write_dataset(ds, tmp_path / "x.json")).read_text().splitlines()[0])["schema_version"] == 1


def test_writer_compresses_new_files_and_keeps_a_resumed_files_kind(tmp_path: Path) -> None:
    """A new msgpack file gets compressed chunks; resuming a version-1 file appends plain chunks
    (its header still says version 1, so older readers still read it), and asking to compress
    one is refused with what to do; resuming a version-2 file appends compressed chunks."""
    new = tmp_path / "new.msgpack"
    with DatasetWriter(new, PROV) as w:
        for r in records(PROBLEMS[0]):
            w.add(r)
    with DatasetWriter(new, PROV) as w:
        for r in records(PROBLEMS[1]):
            w.add(r)
    head, *chunks = _objects(new)
    assert head["schema_version"] == 2 and len(chunks) == 2 and all(set(c) == {"zlib"} for c in chunks)
    old = tmp_path / "old.msgpack"
    write_dataset(Dataset.from_records(records(PROBLEMS[0]), PROV), old, compress=False)
    with pytest.raises(ValueError, match=r"written uncompressed \(schema version 1\).*diode data convert"):
        DatasetWriter(old, PROV, compress=True)
    with DatasetWriter(old, PROV) as w:
        for r in records(PROBLEMS[1]):
            w.add(r)
    head, *chunks = _objects(old)
    assert head["schema_version"] == 1 and len(chunks) == 2 and not any("zlib" in c for c in chunks)
    with DatasetWriter(new, PROV, compress=False) as w:  # plain chunks may join a version-2 file
        for r in records(PROBLEMS[2]):
            w.add(r)
    head, *chunks = _objects(new)
    assert head["schema_version"] == 2 and [set(c) == {"zlib"} for c in chunks] == [True, True, False]
    assert sorted(map(repr, read_dataset(new).records())) == sorted(
        map(repr, records(PROBLEMS[0]) + records(PROBLEMS[1]) + records(PROBLEMS[2]))
    )
    assert sorted(map(repr, read_dataset(old).records())) == sorted(
        map(repr, records(PROBLEMS[0]) + records(PROBLEMS[1]))
    )


def _zchunk(payload: Any) -> dict[str, Any]:
    return {"zlib": payload}


def _packed_chunk() -> bytes:
    return _encode([_chunk()], "msgpack")


@pytest.mark.parametrize(
    ("name", "objs", "expect"),
    [
        (
            "in-version-1",
            [_header(1), _zchunk(zlib.compress(_packed_chunk()))],
            "a compressed chunk in a file of schema version 1",
        ),
        (
            "corrupt",
            [_header(2), _zchunk(zlib.compress(_packed_chunk())[:-6] + b"garbage")],
            "compressed chunk is corrupt",
        ),
        ("not-binary", [_header(2), _zchunk("text")], "compressed chunk: expected binary data, got str"),
        (
            "two-objects",
            [_header(2), _zchunk(zlib.compress(_packed_chunk() * 2))],
            "does not hold one msgpack object",
        ),
        (
            "bad-inner-chunk",
            [_header(2), _zchunk(zlib.compress(msgpack.packb({"records": {}})))],
            "chunk 1: expected keys",
        ),
    ],
)
def test_bad_compressed_chunks_are_refused(tmp_path: Path, name: str, objs: list[Any], expect: str) -> None:
    """A compressed chunk that is corrupt, not binary, holds anything but one chunk, or stands in a
    version-1 file is refused with the file and chunk named; nothing is half-loaded."""
    path = tmp_path / f"{name}.msgpack"
    path.write_bytes(b"".join(msgpack.packb(o, use_bin_type=True) for o in objs))
    with pytest.raises(DatasetFormatError) as e:
        read_dataset(path)
    assert str(e.value).startswith(f"{path}: chunk 1"), str(e.value)
    assert expect in str(e.value)
    with pytest.raises(DatasetFormatError):
        read_dataset(path, recover=True)  # corrupt is not truncated: recovery refuses it too


def test_writer_flushes_only_between_problems(tmp_path: Path) -> None:
    path = tmp_path / "w.msgpack"
    w = DatasetWriter(path, PROV, flush_every=2)
    for r in records(PROBLEMS[0]):  # 4 records: no flush inside the problem
        w.add(r)
    assert read_dataset(path).problems == []
    w.add(records(PROBLEMS[1])[0])  # a new problem starts: the first one is flushed
    assert read_dataset(path).problems == [PROBLEMS[0]]
    # Simulated crash: never closed. Resuming keeps PROBLEMS[0] only and does not call PROBLEMS[1] done.
    w._fh.close()
    w2 = DatasetWriter(path, PROV)
    assert w2.problems_done == {PROBLEMS[0]}
    w2.close()


def test_writer_resume_problems_done_with_failures(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    with DatasetWriter(path, PROV) as w:
        for r in records(PROBLEMS[0]):
            w.add(r)
        w.add_failure(FailureRecord(problem=PROBLEMS[1], choice=None, reason="oom", message="", hardware=HW))
        w.add_failure(
            FailureRecord(problem=PROBLEMS[2], choice=TRITON[0], reason="compile_error", message="", hardware=HW)
        )
    with DatasetWriter(path, PROV) as w:
        # a whole-problem failure counts as done; a failed choice alone does not
        assert w.problems_done == {PROBLEMS[0], PROBLEMS[1]}
        # per problem, every choice with a record or a failure record (what a top-up leaves out)
        assert w.choices_done == {PROBLEMS[0]: {r.choice for r in records(PROBLEMS[0])}, PROBLEMS[2]: {TRITON[0]}}
        for r in records(PROBLEMS[2]):
            w.add(r)
    ds = read_dataset(path)
    assert len(ds) == 8 and len(ds.failures) == 2 and len(ds.sources) == 1


def test_writer_refuses_other_hardware(tmp_path: Path) -> None:
    path = tmp_path / "w.msgpack"
    with DatasetWriter(path, PROV) as w:
        w.add(records(PROBLEMS[0])[0])
        with pytest.raises(ValueError, match="hardware: record of 'NVIDIA-A100'"):
            w.add(records(PROBLEMS[0], hw="NVIDIA-A100")[0])
    with pytest.raises(ValueError, match=r"holds timings of \['NVIDIA-H100'\], not 'NVIDIA-A100'"):
        DatasetWriter(path, Provenance(hardware="NVIDIA-A100"))


def test_writer_refuses_a_run_of_other_settings(tmp_path: Path) -> None:
    """Audit: resuming checked the hardware alone, so a run of another search space or collector
    added its timings to the file ("2 of 2 problem(s) already collected; 0 to go"). Each setting
    `diode collect` records is compared where both runs record it; other provenance (date,
    command line) may differ, and a source that lacks a setting (written by hand) conflicts with
    none."""
    settings = {"search_space": "DEFAULT", "search_mode": "max-autotune", "via_linear": "False", "device": "cuda"}
    run = Provenance(hardware=HW, collector="sweep", date="2026-11-22", extra=tuple(settings.items()))
    path = tmp_path / "w.msgpack"
    with DatasetWriter(path, run) as w:
        w.add(records(PROBLEMS[0])[0])
    data = path.read_bytes()
    for name, other in (
        ("collector", "inductor"),
        ("search_space", "EXHAUSTIVE"),
        ("search_mode", "max-autotune-no-cudagraphs"),
        ("via_linear", "True"),
    ):
        extra = {**settings, name: other} if name in settings else settings
        prov = Provenance(hardware=HW, collector=other if name == "collector" else "sweep", extra=tuple(extra.items()))
        with pytest.raises(ValueError) as e:
            DatasetWriter(path, prov)
        was = "sweep" if name == "collector" else settings[name]
        assert str(e.value) == (
            f"{path}: holds timings collected with {name} {was!r}, not this run's {other!r}, and one file must not "
            f"mix them; collect into another output (or run with {name} {was!r} to resume this one)"
        )
        assert path.read_bytes() == data
    # the same settings from another day and command line (and device) resume it
    later = Provenance(hardware=HW, collector="sweep", date="2026-11-23", command="diode collect", extra=run.extra)
    with DatasetWriter(path, later) as w:
        assert w.problems_done == {PROBLEMS[0]}
        w.add(records(PROBLEMS[1])[0])
    assert len(read_dataset(path).sources) == 2
    bare = tmp_path / "bare.msgpack"  # recorded nothing of its settings
    write_dataset(Dataset.from_records(records(PROBLEMS[0]), Provenance(hardware=HW)), bare)
    with DatasetWriter(bare, run) as w:
        assert w.problems_done == {PROBLEMS[0]}


# -- merging -------------------------------------------------------------------------------------------


def test_merge_dedups_identical_and_keeps_repeats(tmp_path: Path) -> None:
    a = small()
    assert merge_datasets([a]) == a
    assert merge_datasets([a, a]) == a
    repeat = small(scale=1.1)  # the same measurements repeated, other times
    both = merge_datasets([a, repeat, a])
    assert len(both) == 2 * len(a)
    # Repeats inside one dataset with the very same time are distinct measurements: kept.
    r = records(PROBLEMS[0])[1]
    twice = Dataset.from_records([r, r, r], PROV)
    assert len(merge_datasets([twice])) == 3
    assert len(merge_datasets([twice, Dataset.from_records([r], PROV)])) == 3
    # Through files and read_datasets
    pa = write_dataset(a, tmp_path / "a.msgpack")
    pb = write_dataset(repeat, tmp_path / "b.json")
    pt = write_dataset(twice, tmp_path / "t.json")
    merged = read_datasets([pa, pb, pa, pt])
    assert len(merged) == 2 * len(a) + 2  # 'twice' holds r three times, a holds it once
    assert merged.hardware == HW and len(merged.problems) == len(PROBLEMS)


def test_merge_refuses_mixed_hardware(tmp_path: Path) -> None:
    a, b = small(), small(hw="NVIDIA-A100")
    with pytest.raises(
        ValueError, match=r"refusing to merge timings of different GPUs \['NVIDIA-A100', 'NVIDIA-H100'\]"
    ):
        merge_datasets([a, b])
    mixed = merge_datasets([a, b], allow_mixed_hardware=True)
    assert mixed.hardware_keys == ["NVIDIA-A100", HW] and len(mixed) == len(a) + len(b)
    with pytest.raises(ValueError, match="dataset holds the timings of 2 GPUs"):
        _ = mixed.hardware
    back = read_dataset(write_dataset(mixed, tmp_path / "mixed.msgpack"))
    assert back == mixed


def test_select_problems_and_by_problem() -> None:
    ds = small()
    sub = ds.select_problems(PROBLEMS[:2])
    assert sorted(p.m for p in sub.problems) == [64, 128] and len(sub) == 8
    pt = {t.problem: t for t in ds.by_problem()}[PROBLEMS[0]]
    med = pt.median_by_choice()
    assert sorted(med.values()) == [5.0, 6.0, 7.0, 10.0]


def test_dataset_rejects_bad_columns() -> None:
    with pytest.raises(ValueError, match=r"time_us: must be positive and finite, got -1\.0 at record 0"):
        Dataset(
            sources=[PROV], problems=PROBLEMS[:1], choices=TRITON[:1],
            problem_idx=np.zeros(1), choice_idx=np.zeros(1), time_us=np.array([-1.0]), source_idx=np.zeros(1),
        )  # fmt: skip
    with pytest.raises(ValueError, match="choice id 3"):
        Dataset(
            sources=[PROV], problems=PROBLEMS[:1], choices=TRITON[:1],
            problem_idx=np.zeros(1), choice_idx=np.array([3]), time_us=np.ones(1), source_idx=np.zeros(1),
        )  # fmt: skip
    with pytest.raises(ValueError, match="has no source"):
        Dataset.from_records(records(PROBLEMS[0], hw="NVIDIA-A100"), PROV)


def test_write_is_atomic(tmp_path: Path) -> None:
    path = write_dataset(small(), tmp_path / "a.msgpack")
    write_dataset(small(scale=2.0), path)
    assert read_dataset(path) == small(scale=2.0)
    assert os.listdir(tmp_path) == ["a.msgpack"]


def test_write_dataset_with_repeated_table_entries(tmp_path: Path) -> None:
    # Regression: write_dataset interned the tables but wrote the original ids, so a Dataset built
    # with a repeated problem/choice/source wrote records pointing at the wrong (or no) entry.
    p0, p1 = PROBLEMS[0], PROBLEMS[1]
    ds = Dataset(
        sources=[PROV, PROV], problems=[p0, p0, p1], choices=[TRITON[0], TRITON[0], TRITON[1]],
        problem_idx=np.array([0, 1, 2]), choice_idx=np.array([2, 1, 0]), time_us=np.array([1.0, 2.0, 3.0]),
        source_idx=np.array([1, 0, 1]),
    )  # fmt: skip
    for fmt in FORMATS:
        back = read_dataset(write_dataset(ds, tmp_path / f"rep.{fmt}"))
        assert back == ds and len(back.problems) == 2 and len(back.choices) == 2
    orphan = Dataset.from_records(records(p0), PROV)
    orphan.failures.append(FailureRecord(problem=p0, choice=None, reason="oom", message="", hardware="NVIDIA-A100"))
    with pytest.raises(ValueError, match=r"hardware: failures of \['NVIDIA-A100'\] have no source"):
        write_dataset(orphan, tmp_path / "orphan.json")


def test_bench_script_runs_small(tmp_path: Path) -> None:
    """scripts/bench_dataset_io.py stays runnable (the 1M-record run is reported, not tested)."""
    script = Path(__file__).resolve().parents[1] / "scripts" / "bench_dataset_io.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--records", "20000", "--repeats", "1", "--json", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["records"] == 20000 and res["round_trip_exact"] and res["size_bytes"] < 20000 * 30


def test_atomic_write_gives_the_usual_file_mode(tmp_path):
    """Files written atomically are readable like any other file (not mkstemp's private 0600),
    and a replaced file keeps its mode."""
    import os
    import stat

    from torch_diode._files import atomic_write

    old = os.umask(0o022)
    try:
        new = atomic_write(tmp_path / "a.json", "{}")
        assert stat.S_IMODE(new.stat().st_mode) == 0o644
        new.chmod(0o600)
        atomic_write(new, "[]")
        assert stat.S_IMODE(new.stat().st_mode) == 0o600
        assert new.read_text() == "[]"
    finally:
        os.umask(old)


def test_atomic_write_errors_name_the_path_not_the_temp_file(tmp_path: Path) -> None:
    # Regression: the error named the internal temp file (".x.json.abc123.tmp", or ".tmp -> x.json")
    # instead of the path the caller gave.
    from torch_diode._files import atomic_write
    from torch_diode.shapes.shapeset import save_shapeset

    (tmp_path / "d.json").mkdir()
    cases = [(tmp_path / "d.json", IsADirectoryError)]
    if os.path.isdir("/proc/self"):  # Linux: nothing can be created in /proc
        cases.append((Path("/proc/x.json"), FileNotFoundError))
    for path, error in cases:
        for write in (lambda q: atomic_write(q, "{}"), lambda q: save_shapeset([], q)):
            with pytest.raises(error) as e:
                write(path)
            assert e.value.filename == str(path) and e.value.filename2 is None, e.value
            assert ".tmp" not in str(e.value) and str(e.value).endswith(f": {str(path)!r}"), e.value
    assert os.listdir(tmp_path) == ["d.json"] and os.listdir(tmp_path / "d.json") == []


def test_a_chunk_with_a_key_that_is_not_text_is_refused_as_such(tmp_path: Path) -> None:
    """A flipped byte can turn a msgpack key into an integer: one clear refusal, not a TypeError
    from comparing an int with a str."""
    chunk = _chunk()
    chunk[7] = chunk.pop("failures")
    path = tmp_path / "k.msgpack"
    path.write_bytes(_encode([_header(2), chunk], "msgpack"))
    with pytest.raises(DatasetFormatError, match=r"chunk 1: expected keys .* got \[.*'7'.*\]"):
        read_dataset(path)


def test_a_file_being_written_is_locked_against_a_second_writer(tmp_path: Path) -> None:
    """Two writers of one file (two collections into the same output) interleaved their chunks,
    and the second cut off the first one's chunk in progress when it opened the file: the second
    is refused, saying so, and the file is unchanged; once the first is closed it resumes."""
    from torch_diode.dataset import file_in_use
    from torch_diode.errors import FileInUseError

    path = tmp_path / "d.msgpack"
    first = DatasetWriter(path, PROV)
    for r in records(PROBLEMS[0]):
        first.add(r)
    first.flush()
    assert file_in_use(path)
    data = path.read_bytes()
    with pytest.raises(FileInUseError, match=r"d\.msgpack: another process is writing it"):
        DatasetWriter(path, PROV)
    assert path.read_bytes() == data
    first.close()
    assert not file_in_use(path) and not file_in_use(tmp_path / "missing.msgpack")
    with DatasetWriter(path, PROV) as again:
        assert again.problems_done == {PROBLEMS[0]}
    with pytest.raises(ValueError, match="holds timings of"):  # another GPU's file: refused as before
        DatasetWriter(path, Provenance(hardware="NVIDIA-H200", collector="test"))
    assert not file_in_use(path)  # the refused writer let go of the file
    assert len(read_dataset(path)) == len(records(PROBLEMS[0]))


def test_a_closed_writer_lets_go_of_its_file_in_a_forked_child_too(tmp_path: Path) -> None:
    """A process forked while a writer is open (a compile worker pool started with fork) shares
    the open file: closing the writer releases the lock explicitly, so the next writer of the file
    is not refused while that process lives on."""
    import multiprocessing
    import time

    from torch_diode.dataset import file_in_use

    path = tmp_path / "d.msgpack"
    writer = DatasetWriter(path, PROV)
    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,), daemon=True)
    child.start()
    try:
        writer.close()
        assert not file_in_use(path)
        with DatasetWriter(path, PROV) as again:
            assert again.problems_done == set()
    finally:
        child.kill()
        child.join(timeout=30)


def test_a_chunk_on_disk_is_not_written_again_after_an_interrupt(tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C or SIGTERM landing just after a chunk reached the disk (here: as its fsync returns)
    left the chunk counted as unwritten, and close() wrote it a second time: duplicate records."""
    path = tmp_path / "d.msgpack"
    real_fsync = os.fsync
    calls = []

    def fsync_then_interrupt(fd: int) -> None:  # the OS call, then the signal's exception
        real_fsync(fd)
        calls.append(fd)
        if len(calls) == 2:  # the header's fsync is the first
            raise KeyboardInterrupt

    rs = records(PROBLEMS[0])
    monkeypatch.setattr(os, "fsync", fsync_then_interrupt)
    w = DatasetWriter(path, PROV)
    for r in rs:
        w.add(r)
    with pytest.raises(KeyboardInterrupt):
        w.flush()
    w.close()
    monkeypatch.undo()
    assert len(read_dataset(path)) == len(rs)


def test_a_file_being_appended_to_is_not_replaced_or_cut(tmp_path: Path) -> None:
    """Replacing (write_dataset: data merge, convert) or cutting (recover in place) a file that an
    open writer appends to left that writer writing to a file no name reaches: refused."""
    from torch_diode.errors import FileInUseError

    path = tmp_path / "d.msgpack"
    with DatasetWriter(path, PROV) as w:
        for r in records(PROBLEMS[0]):
            w.add(r)
        w.flush()
        with open(path, "ab") as fh:
            fh.write(b"\x85\xa1")  # a torn tail (a map cut short), for recover to cut
        with pytest.raises(FileInUseError, match="an open writer is appending to it"):
            write_dataset(read_dataset(path, recover=True), path)
        with pytest.raises(FileInUseError, match="an open writer is appending to it"):
            recover_dataset(path)


def test_the_output_lock(tmp_path: Path) -> None:
    """OUT.lock: one exclusive holder (a local collection, a merge), or any number of shared ones
    (torchrun ranks) and then no exclusive one; the exclusive holder removes it at the end."""
    from torch_diode.dataset import lock_path, output_lock
    from torch_diode.errors import FileInUseError

    out = tmp_path / "out.msgpack"
    with output_lock(out):
        assert lock_path(out).exists()
        for shared in (False, True):
            with pytest.raises(FileInUseError, match=r"out\.msgpack\.lock is locked"):
                with output_lock(out, shared=shared):
                    pass
    assert not lock_path(out).exists()
    with output_lock(out, shared=True), output_lock(out, shared=True):
        with pytest.raises(FileInUseError):
            with output_lock(out):
                pass
    with output_lock(out):  # free again
        pass


@pytest.mark.parametrize("code", ["EBADF", "ENOLCK"])
def test_a_lock_the_file_system_refuses_is_not_taken_for_a_free_file(tmp_path: Path, monkeypatch, code: str) -> None:
    """NFS emulates flock with POSIX locks and answers EBADF to an exclusive lock on a file not
    open for writing: that must not read as "nobody holds it" (a live shard was merged and
    removed). A file system without locks (ENOLCK) is written unlocked, as before."""
    import errno
    import fcntl

    from torch_diode.dataset import file_in_use

    path = tmp_path / "d.msgpack"
    with DatasetWriter(path, PROV):
        pass

    def refusing_flock(fd: int, op: int) -> None:  # the file system's answer
        raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)))

    monkeypatch.setattr(fcntl, "flock", refusing_flock)
    if code == "EBADF":
        with pytest.raises(OSError, match="Bad file descriptor"):
            file_in_use(path)
        with pytest.raises(OSError):
            DatasetWriter(path, PROV)
    else:
        assert not file_in_use(path)
        with DatasetWriter(path, PROV) as w:
            assert w.problems_done == set()
