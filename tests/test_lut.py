"""Kernel lookup tables: best measured choices per problem, medians, files and their errors."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from torch_diode.dataset import Dataset, merge_datasets
from torch_diode.errors import DatasetFormatError, SchemaVersionError
from torch_diode.lut import KernelLUT, best_choices
from torch_diode.records import Choice, Problem, Provenance, TimingRecord

HW = "NVIDIA-H100"
PROV = Provenance(hardware=HW, collector="test", date="2026-11-22")
ATEN = Choice.aten("mm")
CFG = [
    Choice(template="triton::mm", block_m=bm, block_n=bn, block_k=32, group_m=8, num_stages=3, num_warps=4)
    for bm in (32, 64, 128)
    for bn in (32, 64)
]
P1 = Problem(op="mm", m=128, n=256, k=512)
P2 = Problem(op="addmm", m=64, n=64, k=64)
P3 = Problem(op="bmm", m=32, n=32, k=32, batch=8)


def rec(p: Problem, c: Choice, t: float, hw: str = HW) -> TimingRecord:
    return TimingRecord(problem=p, choice=c, time_us=t, hardware=hw)


def dataset() -> Dataset:
    recs = [
        # P1: CFG[1] is best by median (3 repeats: 4, 5, 100 -> 5), CFG[0] has 2 repeats (5, 7 -> 6)
        rec(P1, ATEN, 10.0), rec(P1, ATEN, 12.0),
        rec(P1, CFG[0], 5.0), rec(P1, CFG[0], 7.0),
        rec(P1, CFG[1], 100.0), rec(P1, CFG[1], 4.0), rec(P1, CFG[1], 5.0),
        rec(P1, CFG[2], 8.0), rec(P1, CFG[3], 9.0), rec(P1, CFG[4], 20.0), rec(P1, CFG[5], 30.0),
        # P2: ATen wins
        rec(P2, ATEN, 2.0), rec(P2, CFG[0], 3.0), rec(P2, CFG[1], 2.5),
        # P3: no ATen measured
        rec(P3, CFG[5], 1.0),
    ]  # fmt: skip
    return Dataset.from_records(recs, PROV)


def test_from_dataset_medians_top_k_and_aten() -> None:
    lut = KernelLUT.from_dataset(dataset(), top_k=3)
    assert lut.hardware == HW and lut.top_k == 3 and len(lut) == 3
    assert lut.lookup(P1) == [CFG[1], CFG[0], CFG[2]]
    e = lut.entry(P1)
    assert e is not None and e.time_us == (5.0, 6.0, 8.0) and e.aten_time_us == 11.0
    assert lut.lookup(P2) == [ATEN, CFG[1], CFG[0]] and lut.entry(P2).aten_time_us == 2.0  # type: ignore[union-attr]
    assert lut.lookup(P3) == [CFG[5]] and lut.entry(P3).aten_time_us is None  # type: ignore[union-attr]
    assert lut.lookup(Problem(op="mm", m=1, n=1, k=1)) is None
    assert P1 in lut and Problem(op="mm", m=128, n=256, k=512, stride_b=(1, 512)) not in lut
    assert lut.provenance["records"] == len(dataset()) and lut.provenance["sources"] == [PROV.to_dict()]
    full = KernelLUT.from_dataset(dataset(), top_k=100)
    assert len(full.lookup(P1) or []) == 7


def test_ties_are_broken_by_choice_key() -> None:
    ds = Dataset.from_records([rec(P1, CFG[3], 2.0), rec(P1, CFG[0], 2.0), rec(P1, ATEN, 2.0)], PROV)
    got = KernelLUT.from_dataset(ds, top_k=3).lookup(P1)
    assert got == sorted([CFG[3], CFG[0], ATEN], key=lambda c: c.key())


def test_vectorised_medians_match_numpy() -> None:
    rng = np.random.default_rng(0)
    problems = [Problem(op="mm", m=int(m), n=64, k=64) for m in rng.integers(1, 4096, 30)]
    problems = list(dict.fromkeys(problems))
    recs = [
        rec(p, CFG[int(rng.integers(0, len(CFG)))], float(rng.lognormal(2, 1)))
        for p in problems
        for _ in range(int(rng.integers(1, 25)))
    ]
    ds = Dataset.from_records(recs, PROV)
    fast = {p: ranked for p, ranked, _ in best_choices(ds)}
    for pt in ds.by_problem():  # the lead's reference implementation (np.median per choice)
        med = pt.median_by_choice()
        want = sorted(((ds.choices[c], t) for c, t in med.items()), key=lambda ct: (ct[1], ct[0].key()))
        assert fast[pt.problem] == want


@pytest.mark.parametrize("top_k", [0, -1, 1.5, True])
def test_bad_top_k(top_k: Any) -> None:
    with pytest.raises(ValueError, match=rf"^top_k: must be a positive integer, got {top_k!r}"):
        KernelLUT.from_dataset(dataset(), top_k=top_k)


def test_mixed_hardware_refused() -> None:
    other = Dataset.from_records([rec(P1, ATEN, 1.0, hw="NVIDIA-A100")], Provenance(hardware="NVIDIA-A100"))
    mixed = merge_datasets([dataset(), other], allow_mixed_hardware=True)
    with pytest.raises(ValueError, match="dataset holds the timings of 2 GPUs"):
        KernelLUT.from_dataset(mixed)


def test_empty_dataset() -> None:
    lut = KernelLUT.from_dataset(Dataset.empty([PROV]))
    assert len(lut) == 0 and lut.lookup(P1) is None


def test_save_load_round_trip_and_atomic(tmp_path: Path) -> None:
    lut = KernelLUT.from_dataset(dataset(), top_k=4)
    path = lut.save(tmp_path / "lut.json")
    back = KernelLUT.load(path)
    assert back == lut and back.lookup(P1) == lut.lookup(P1)
    assert [e.time_us for e in back] == [e.time_us for e in lut]
    d = json.loads(path.read_text())
    assert d["format"] == "torch-diode-lut" and d["schema_version"] == 1 and d["hardware"] == HW
    KernelLUT.from_dataset(dataset(), top_k=1).save(path)  # replaces the file
    assert KernelLUT.load(path).top_k == 1
    assert os.listdir(tmp_path) == ["lut.json"]  # no temp files left


def _valid(tmp_path: Path) -> dict[str, Any]:
    return KernelLUT.from_dataset(dataset(), top_k=2).to_dict()


def _entry0(d: dict[str, Any], **over: Any) -> dict[str, Any]:
    d["entries"][0].update(over)
    return d


BAD = [
    ("not-json", lambda d: "{nope", "not valid JSON"),
    ("list", lambda d: [1, 2], "not a torch-diode lookup table"),
    (
        "dataset-file",
        lambda d: {"format": "torch-diode-dataset", "schema_version": 1},
        "not a torch-diode lookup table",
    ),
    ("missing-entries", lambda d: {k: v for k, v in d.items() if k != "entries"}, "expected keys"),
    ("bad-hardware", lambda d: {**d, "hardware": ""}, "hardware: must be a non-empty string"),
    ("bad-top-k", lambda d: {**d, "top_k": 0}, "top_k: must be a positive integer, got 0"),
    ("entries-not-list", lambda d: {**d, "entries": {}}, "entries: must be a list"),
    ("entry-keys", lambda d: _entry0(d, extra=1), "entry 0: expected keys"),
    (
        "bad-problem",
        lambda d: _entry0(d, problem={"op": "mm", "m": 0, "n": 1, "k": 1}),
        "entry 0: m: must be a positive integer, got 0",
    ),
    (
        "bad-choice",
        lambda d: _entry0(d, choices=[{"choice": {"BLOCK_M": 1}, "time_us": 1.0}]),
        "entry 0: choice: missing field 'template'",
    ),
    (
        "bad-time",
        lambda d: _entry0(d, choices=[{"choice": {"template": "aten::mm"}, "time_us": -2}]),
        "entry 0: time_us: must be a positive finite number of microseconds, got -2",
    ),
    ("bad-aten-time", lambda d: _entry0(d, aten_time_us="fast"), "entry 0: aten_time_us: must be a positive"),
    (
        "too-many-choices",
        lambda d: _entry0(d, choices=d["entries"][0]["choices"] * 2),
        "entry 0: choices: must be a list of 1 to 2 entries",
    ),
    (
        "unsorted",
        lambda d: _entry0(d, choices=d["entries"][0]["choices"][::-1]),
        "entry 0: choices: must be ordered fastest first",
    ),
    ("duplicate-problem", lambda d: {**d, "entries": [d["entries"][0], d["entries"][0]]}, "appears twice"),
    (
        "bad-source",
        lambda d: {**d, "provenance": {"sources": [{"gpu_name": "x"}]}},
        "provenance: missing field 'hardware'",
    ),
]


@pytest.mark.parametrize(("mutate", "expect"), [(m, e) for _, m, e in BAD], ids=[n for n, _, _ in BAD])
def test_load_errors_name_file_and_problem(tmp_path: Path, mutate: Any, expect: str) -> None:
    obj = mutate(_valid(tmp_path))
    path = tmp_path / "bad.json"
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    with pytest.raises(DatasetFormatError) as e:
        KernelLUT.load(path)
    assert type(e.value) is DatasetFormatError
    assert str(e.value).startswith(f"{path}: ") and expect in str(e.value), str(e.value)


@pytest.mark.parametrize("version", [2, None, "1"])
def test_load_other_schema_version(tmp_path: Path, version: Any) -> None:
    path = tmp_path / "v.json"
    path.write_text(json.dumps({**_valid(tmp_path), "schema_version": version}))
    with pytest.raises(
        SchemaVersionError, match=rf"^{path}: schema version {version!r} is not supported.*diode data lut"
    ):
        KernelLUT.load(path)


def test_load_missing_empty_binary_directory(tmp_path: Path) -> None:
    with pytest.raises(DatasetFormatError, match=rf"^{tmp_path / 'no.json'}: no such file"):
        KernelLUT.load(tmp_path / "no.json")
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(DatasetFormatError, match=r"empty\.json: not valid JSON"):
        KernelLUT.load(tmp_path / "empty.json")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(DatasetFormatError, match=r"bin\.json: not a lookup table"):
        KernelLUT.load(tmp_path / "bin.json")
    with pytest.raises(DatasetFormatError, match="is a directory"):
        KernelLUT.load(tmp_path)
