"""``diode data`` through the real CLI in a subprocess: every subcommand, --help, --version, exit 2."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import msgpack
import pytest

from torch_diode._version import __version__
from torch_diode.cli import build_parser, main
from torch_diode.dataset import Dataset, DatasetWriter, read_dataset, write_dataset
from torch_diode.lut import KernelLUT
from torch_diode.records import Choice, FailureRecord, Problem, Provenance, TimingRecord

HW = "NVIDIA-H100"
ATEN = Choice.aten("mm")
CFG = [
    Choice(template="triton::mm", block_m=bm, block_n=64, block_k=32, group_m=8, num_stages=3, num_warps=4)
    for bm in (32, 64)
]
P_MM = Problem(op="mm", m=128, n=256, k=512)
P_BMM = Problem(op="bmm", m=64, n=64, k=64, batch=4)


def make(hw: str = HW, scale: float = 1.0) -> Dataset:
    recs = [
        TimingRecord(problem=P_MM, choice=ATEN, time_us=10.0 * scale, hardware=hw),
        TimingRecord(problem=P_MM, choice=CFG[0], time_us=4.0 * scale, hardware=hw),
        TimingRecord(problem=P_MM, choice=CFG[1], time_us=6.0 * scale, hardware=hw),
        TimingRecord(problem=P_MM, choice=CFG[1], time_us=5.0 * scale, hardware=hw),
        TimingRecord(problem=P_BMM, choice=Choice.aten("bmm"), time_us=3.0 * scale, hardware=hw),
        TimingRecord(problem=P_BMM, choice=CFG[0], time_us=3.5 * scale, hardware=hw),
    ]
    fails = [FailureRecord(problem=P_BMM, choice=CFG[1], reason="compile_error", message="x", hardware=hw)]
    return Dataset.from_records(recs, Provenance(hardware=hw, collector="test"), fails)


def one_line_error(proc, *parts: str) -> str:
    """Exit 2, no traceback, exactly one line on stderr containing every part."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for p in parts:
        assert p in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    return {
        "mp": write_dataset(make(), tmp_path / "a.msgpack"),
        "js": write_dataset(make(), tmp_path / "a.json"),
        "rep": write_dataset(make(scale=1.5), tmp_path / "repeat.msgpack"),
        "a100": write_dataset(make(hw="NVIDIA-A100"), tmp_path / "a100.msgpack"),
    }


# -- help and version -----------------------------------------------------------------------------------


def test_version_and_help(run_diode) -> None:
    proc = run_diode("--version", check=True)
    assert proc.stdout.strip() == f"diode (torch-diode) {__version__}"
    top = run_diode("--help", check=True).stdout
    assert "data" in top and "hardware" in top
    for sub in ("stats", "convert", "merge", "lut", "recover"):
        out = run_diode("data", sub, "--help", check=True).stdout
        assert out.startswith(f"usage: diode data {sub}"), out
    assert "SUBCOMMAND" in run_diode("data", "--help", check=True).stdout
    bare = run_diode("data")
    assert bare.returncode == 2 and "usage: diode data" in bare.stderr and "Traceback" not in bare.stderr


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {
        name: sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    }


def test_every_help_has_a_user_facing_description(capsys: pytest.CaptureFixture[str]) -> None:
    # Regression: `diode collect --help` printed the module's docstring (reST markup and developer
    # notes), and collect-shapeset and shapes printed no description at all.
    commands = [(name,) for name in _subcommands(build_parser())]
    commands += [("data", name) for name in _subcommands(_subcommands(build_parser())["data"])]
    assert ("collect",) in commands and ("shapes",) in commands and ("data", "stats") in commands
    for command in commands:
        with pytest.raises(SystemExit) as e:
            main([*command, "--help"])
        assert e.value.code == 0
        out = capsys.readouterr().out
        usage, description = out.split("\n\n")[:2]
        assert usage.startswith(f"usage: diode {' '.join(command)}"), out
        assert not description.startswith(("options:", "positional arguments:")), (command, out)
        assert description[0].isupper() and "``" not in out and "::" not in out, (command, description)


# -- stats ----------------------------------------------------------------------------------------------


def test_stats_text(run_diode, files: dict[str, Path]) -> None:
    out = run_diode("data", "stats", str(files["mp"]), check=True).stdout
    assert "6 records, 1 failure, hardware NVIDIA-H100" in out
    assert "  bmm: 1 problem, 2 configs, 2 records, 1 failure" in out
    assert "  mm: 1 problem, 3 configs, 4 records, 0 failures" in out
    mm_line = next(line for line in out.splitlines() if "128x256x512" in line)
    assert "4.00 us" in mm_line and "triton::mm 32x64x32" in mm_line and "2.50x vs aten" in mm_line
    bmm_line = next(line for line in out.splitlines() if "4x64x64x64" in line)
    assert "3.00 us" in bmm_line and "aten::bmm" in bmm_line and "1.00x vs aten" in bmm_line


def test_stats_json_many_files_and_hardware(run_diode, files: dict[str, Path]) -> None:
    proc = run_diode(
        "data", "stats", "--json", str(files["mp"]), str(files["js"]), str(files["rep"]), str(files["a100"]), check=True
    )
    d = json.loads(proc.stdout)
    assert d["records"] == 18 and sorted(d["hardware"]) == ["NVIDIA-A100", HW]  # a.json duplicates a.msgpack
    h100 = d["hardware"][HW]
    assert h100["mm"]["records"] == 8 and h100["mm"]["problems"] == 1 and h100["mm"]["configs"] == 3
    best = h100["mm"]["best"][0]
    assert best["choice"].startswith("triton::mm 32x64x32") and best["time_us"] == 5.0  # median of 4.0, 6.0
    assert best["aten_time_us"] == 12.5 and best["speedup_vs_aten"] == 2.5
    assert d["hardware"]["NVIDIA-A100"]["bmm"]["failures"] == 1


def test_stats_counts_problems_with_failures_only(run_diode, tmp_path: Path) -> None:
    # Regression: a problem with failure records and no timing (it failed as a whole, or every
    # choice failed) was counted nowhere: not in "problems", and only as a failure.
    whole = Problem(op="mm", m=64, n=64, k=64)
    fails = [
        FailureRecord(problem=whole, choice=None, reason="compile_error", message="x", hardware=HW),
        # P_MM has timings too: not a problem with failures only
        FailureRecord(problem=P_MM, choice=CFG[0], reason="compile_error", message="x", hardware=HW),
        FailureRecord(problem=P_BMM, choice=None, reason="compile_error", message="x", hardware=HW),
        FailureRecord(problem=P_BMM, choice=CFG[1], reason="compile_error", message="x", hardware=HW),
    ]
    recs = [TimingRecord(problem=P_MM, choice=ATEN, time_us=10.0, hardware=HW)]
    path = write_dataset(Dataset.from_records(recs, Provenance(hardware=HW), fails), tmp_path / "f.msgpack")
    out = run_diode("data", "stats", str(path), check=True).stdout
    assert "  bmm: 0 problems, 0 configs, 0 records, 2 failures, 1 problem with failures only" in out
    assert "  mm: 1 problem, 1 config, 1 record, 2 failures, 1 problem with failures only" in out
    d = json.loads(run_diode("data", "stats", "--json", str(path), check=True).stdout)
    assert d["problems"] == 1 and d["failures"] == 4 and d["failed_problems"] == 2
    assert d["hardware"][HW]["mm"]["failed_problems"] == 1 and d["hardware"][HW]["mm"]["problems"] == 1
    assert d["hardware"][HW]["bmm"]["failed_problems"] == 1 and d["hardware"][HW]["bmm"]["problems"] == 0


def test_counts_of_one_are_singular(run_diode, tmp_path: Path) -> None:
    """Counts go through plural(): a one-record file is "1 record" from "1 file", not "1 records"
    from "1 file(s)", in every `diode data` command's output."""
    rec = TimingRecord(problem=P_MM, choice=ATEN, time_us=10.0, hardware=HW)
    one = write_dataset(Dataset.from_records([rec], Provenance(hardware=HW)), tmp_path / "one.msgpack")
    out = run_diode("data", "stats", str(one), check=True).stdout
    assert f"{one}: 1 record, 0 failures, hardware {HW}" in out
    assert "  mm: 1 problem, 1 config, 1 record, 0 failures, 0 problems with failures only" in out
    proc = run_diode("data", "merge", str(tmp_path / "m.msgpack"), str(one), check=True)
    assert f"1 record from 1 file (0 duplicates dropped), 1 problem, hardware {HW}" in proc.stdout
    proc = run_diode("data", "lut", str(one), "--output", str(tmp_path / "lut.json"), "--top-k", "1", check=True)
    assert f"1 problem, top 1 choice each, hardware {HW}" in proc.stdout
    proc = run_diode("data", "convert", str(one), str(tmp_path / "one.json"), check=True)
    assert "(json, 1 record, " in proc.stdout
    proc = run_diode("data", "recover", str(one), check=True)
    assert "complete (1 chunk, 1 record); nothing to recover" in proc.stdout


def test_stats_truncated_and_recover(run_diode, tmp_path: Path) -> None:
    path = tmp_path / "partial.msgpack"
    with DatasetWriter(path, Provenance(hardware=HW)) as w:
        for r in make().records():
            w.add(r)
            w.flush()
    full = path.read_bytes()
    path.write_bytes(full[:-3])
    line = one_line_error(run_diode("data", "stats", str(path)), str(path), "truncated", f"diode data recover {path}")
    assert line.startswith("diode data stats: error: ")
    out = run_diode("data", "stats", "--recover", "--json", str(path), check=True).stdout
    assert json.loads(out)["records"] == 5
    # recover to another file (input left alone), then in place
    proc = run_diode("data", "recover", str(path), "--output", str(tmp_path / "fixed.json"), check=True)
    assert "kept 5 complete chunks with 5 records" in proc.stdout and "left as is" in proc.stdout
    assert path.stat().st_size == len(full) - 3 and len(read_dataset(tmp_path / "fixed.json")) == 5
    proc = run_diode("data", "recover", str(path), check=True)
    assert "cut back in place" in proc.stdout and len(read_dataset(path)) == 5
    proc = run_diode("data", "recover", str(path), check=True)
    assert "nothing to recover" in proc.stdout


# -- convert, merge, lut -------------------------------------------------------------------------------


def test_convert_round_trip(run_diode, files: dict[str, Path], tmp_path: Path) -> None:
    proc = run_diode("data", "convert", str(files["mp"]), str(tmp_path / "b.json"), check=True)
    assert "wrote" in proc.stdout and "(json, 6 records" in proc.stdout
    run_diode("data", "convert", str(tmp_path / "b.json"), str(tmp_path / "c.msgpack"), check=True)
    assert read_dataset(tmp_path / "c.msgpack") == make()
    run_diode("data", "convert", str(tmp_path / "b.json"), str(tmp_path / "d.bin"), "--format", "msgpack", check=True)
    assert read_dataset(tmp_path / "d.bin", format="msgpack") == make()
    run_diode(
        "data", "convert", str(tmp_path / "d.bin"), str(tmp_path / "e.json"), "--input-format", "msgpack", check=True
    )
    assert (tmp_path / "e.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_convert_and_merge_compress_msgpack_unless_told_not_to(
    run_diode, files: dict[str, Path], tmp_path: Path
) -> None:
    """A msgpack OUT is written compressed (schema version 2) by default, plain (version 1) with
    --no-compress; the records are the same. JSON is always plain text of version 1."""

    def version(path: Path) -> int:
        return next(iter(msgpack.Unpacker(open(path, "rb"), raw=False)))["schema_version"]

    run_diode("data", "convert", str(files["js"]), str(tmp_path / "z.msgpack"), check=True)
    run_diode("data", "convert", str(files["js"]), str(tmp_path / "p.msgpack"), "--no-compress", check=True)
    assert version(tmp_path / "z.msgpack") == 2 and version(tmp_path / "p.msgpack") == 1
    assert read_dataset(tmp_path / "z.msgpack") == read_dataset(tmp_path / "p.msgpack") == read_dataset(files["js"])
    run_diode("data", "merge", str(tmp_path / "m.msgpack"), str(files["mp"]), str(files["rep"]), check=True)
    run_diode(
        "data", "merge", str(tmp_path / "n.msgpack"), str(files["mp"]), str(files["rep"]), "--no-compress", check=True
    )
    assert version(tmp_path / "m.msgpack") == 2 and version(tmp_path / "n.msgpack") == 1
    assert read_dataset(tmp_path / "m.msgpack") == read_dataset(tmp_path / "n.msgpack")
    run_diode("data", "convert", str(tmp_path / "z.msgpack"), str(tmp_path / "z.json"), "--no-compress", check=True)
    assert json.loads((tmp_path / "z.json").read_text().splitlines()[0])["schema_version"] == 1


def test_merge(run_diode, files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "merged.msgpack"
    proc = run_diode("data", "merge", str(out), str(files["mp"]), str(files["js"]), str(files["rep"]), check=True)
    assert "wrote" in proc.stdout and "12 records from 3 files (6 duplicates dropped)" in proc.stdout
    assert len(read_dataset(out)) == 12
    # an existing OUT is replaced only when it is among the inputs (merged into)
    before = out.read_bytes()
    one_line_error(run_diode("data", "merge", str(out), str(files["a100"])), "exists and is not among the inputs")
    assert out.read_bytes() == before
    mixed = tmp_path / "mixed.msgpack"
    line = one_line_error(
        run_diode("data", "merge", str(mixed), str(files["mp"]), str(files["a100"])),
        "NVIDIA-A100",
        "--allow-mixed-hardware",
    )
    assert "refusing to merge" in line
    run_diode("data", "merge", str(mixed), str(files["mp"]), str(files["a100"]), "--allow-mixed-hardware", check=True)
    assert read_dataset(mixed).hardware_keys == ["NVIDIA-A100", HW]
    run_diode("data", "merge", str(out), str(out), str(files["a100"]), "--allow-mixed-hardware", check=True)
    assert len(read_dataset(out)) > 12 and read_dataset(out).hardware_keys == ["NVIDIA-A100", HW]


def test_lut(run_diode, files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "lut.json"
    proc = run_diode(
        "data", "lut", str(files["mp"]), str(files["rep"]), "--output", str(out), "--top-k", "2", check=True
    )
    assert "2 problems, top 2 choices each, hardware NVIDIA-H100" in proc.stdout
    lut = KernelLUT.load(out)
    assert lut.lookup(P_MM) == [CFG[0], CFG[1]] and lut.lookup(P_BMM) == [Choice.aten("bmm"), CFG[0]]
    one_line_error(run_diode("data", "lut", str(files["mp"]), str(files["a100"]), "-o", str(out)), "different GPUs")
    one_line_error(
        run_diode("data", "lut", str(files["mp"]), "-o", str(out), "--top-k", "0"), "--top-k: must be at least 1, got 0"
    )
    one_line_error(
        run_diode("data", "lut", str(files["mp"]), "-o", str(tmp_path / "lut.msgpack")), "lut.msgpack", "name it .json"
    )


# -- exit 2 with one clear line -------------------------------------------------------------------------


@pytest.mark.parametrize("sub", ["stats", "lut", "recover", "convert", "merge"])
def test_unreadable_inputs(run_diode, tmp_path: Path, sub: str) -> None:
    garbage = tmp_path / "garbage.msgpack"
    garbage.write_bytes(b"\x93\x01\x02\x03")
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    newer = tmp_path / "newer.json"
    newer.write_text('{"format": "torch-diode-dataset", "schema_version": 99}\n')
    document = tmp_path / "plan.json"  # valid JSON, over several lines: not a dataset's JSON lines
    document.write_text('{\n  "format": "torch-diode-dataset",\n  "schema_version": 1\n}\n')
    out = str(tmp_path / "out.json")
    for bad, expect in (
        (tmp_path / "missing.msgpack", "no such file"),
        (garbage, "not a torch-diode dataset"),
        (empty, "file is empty"),
        (document, "not a torch-diode dataset (a JSON document over several lines"),
        (newer, "schema version 99 is not supported"),
        (tmp_path / "notes.txt", "cannot tell the format"),
    ):
        args = {
            "stats": ["stats", str(bad)],
            "lut": ["lut", str(bad), "-o", out],
            "recover": ["recover", str(bad)],
            "convert": ["convert", str(bad), out],
            "merge": ["merge", out, str(bad)],
        }[sub]
        one_line_error(run_diode("data", *args), str(bad), expect)


def test_bad_outputs_and_arguments(run_diode, files: dict[str, Path], tmp_path: Path) -> None:
    src = str(files["mp"])
    one_line_error(
        run_diode("data", "convert", src, "/nonexistent-dir/x.json"), "/nonexistent-dir/x.json", "does not exist"
    )
    one_line_error(run_diode("data", "convert", src, str(tmp_path / "x.csv")), "x.csv", "cannot tell the format")
    one_line_error(run_diode("data", "convert", src, src), "same file")
    (tmp_path / "d.json").mkdir()
    one_line_error(run_diode("data", "merge", str(tmp_path / "d.json"), src), "is a directory")
    one_line_error(run_diode("data", "recover", src, "-o", str(tmp_path / "nope" / "x.json")), "does not exist")
    # argparse's own errors: exit 2, usage plus one error line, no traceback
    for args in (("data", "stats"), ("data", "merge", "out.json"), ("data", "lut", src), ("data", "lut", src, "-o", "x.json", "--top-k", "two"),
                 ("data", "convert", src, "x.json", "--format", "csv"), ("data", "frobnicate"), ("frobnicate",)):  # fmt: skip
        proc = run_diode(*args)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert proc.stderr.strip().splitlines()[-1].startswith("diode"), proc.stderr
