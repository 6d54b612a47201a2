"""The model commands' outputs and inputs (session 65 audit): an output never destroys an input
or lands where it cannot be written after the work is done; stock's picks of another GPU are
refused; a truncated file gets advice that loses nothing; errors name the flags."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest

from torch_diode.cli import main
from torch_diode.dataset import Dataset, DatasetWriter, read_dataset, write_dataset
from torch_diode.evaluate import max_autotune_solution_from_dataset, write_max_autotune_solution

DATA = Path(__file__).parent / "data" / "small_synthetic.msgpack"  # NVIDIA-H100 timings
FAST = ("--num-epochs", "1", "--ensemble-size", "1", "--threads", "1", "--forest-trees", "2", "--no-progress")


def relabel(ds: Dataset, hardware: str) -> Dataset:
    """``ds``'s timings filed under another GPU's key."""
    return Dataset(
        sources=[dataclasses.replace(s, hardware=hardware) for s in ds.sources],
        problems=ds.problems,
        choices=ds.choices,
        problem_idx=ds.problem_idx,
        choice_idx=ds.choice_idx,
        time_us=ds.time_us,
        source_idx=ds.source_idx,
    )


def diode(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``diode ARGS`` in this process: (exit status, stdout, stderr)."""
    try:
        rc = main(list(args))
    except SystemExit as e:  # argparse
        rc = int(e.code or 0)
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("m") / "m.safetensors"
    assert main(["train", "--dataset", str(DATA), "--model", str(path), *FAST]) == 0
    return path


def test_an_output_that_is_an_input_is_refused_and_the_input_kept(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, model_file: Path
) -> None:
    victim = tmp_path / "victim.msgpack"
    shutil.copy(DATA, victim)
    before = victim.read_bytes()
    rc, _, err = diode(capsys, "train", "--dataset", str(victim), "--model", str(victim), *FAST)
    assert rc == 2 and "--model" in err and "expected a .safetensors file name" in err
    sol = write_max_autotune_solution(
        max_autotune_solution_from_dataset(read_dataset(DATA)), tmp_path / "stock.json", hardware="NVIDIA-H100"
    )
    for args in (
        ("validate-max-autotune", "--model", str(model_file), "--dataset", str(victim), "--output", str(sol),
         "--max-autotune-solution", str(sol)),
        ("train", "--dataset", str(victim), "--model", str(tmp_path / "x.safetensors"), "--report",
         str(tmp_path / "." / "stock.json"), "--held-out-dataset", str(sol), *FAST),
    ):  # fmt: skip
        rc, _, err = diode(capsys, *args)
        assert rc == 2 and "is also an input" in err and "write elsewhere" in err, err
    link = tmp_path / "same.msgpack"
    os.link(victim, link)  # the same file by another name
    rc, _, err = diode(capsys, "validate-max-autotune", "--model", str(model_file), "--dataset", str(link),
                       "--output", str(tmp_path / "victim.json"))  # fmt: skip
    assert rc == 0, err  # victim.json / .md / .png are not the dataset
    assert victim.read_bytes() == before and not (tmp_path / "x.safetensors").exists()


def test_a_report_path_must_be_json_and_nothing_is_overwritten_by_its_siblings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, model_file: Path
) -> None:
    for name in ("rep.md", "rep.png", "rep"):
        rc, _, err = diode(capsys, "validate-max-autotune", "--model", str(model_file), "--dataset", str(DATA),
                           "--output", str(tmp_path / name))  # fmt: skip
        assert rc == 2 and "expected a .json file name" in err, err
    assert list(tmp_path.iterdir()) == []
    sol = write_max_autotune_solution(
        max_autotune_solution_from_dataset(read_dataset(DATA)), tmp_path / "rep.md", hardware="NVIDIA-H100"
    )  # a solution named like the table that would be written beside rep.json
    rc, _, err = diode(capsys, "validate-max-autotune", "--model", str(model_file), "--dataset", str(DATA),
                       "--max-autotune-solution", str(sol), "--output", str(tmp_path / "rep.json"))  # fmt: skip
    assert rc == 2 and f"--output {tmp_path / 'rep.md'} is also an input" in err


def test_an_unwritable_output_is_refused_before_training(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "dir.safetensors").mkdir()
    cases = {
        str(tmp_path / "dir.safetensors"): "is a directory",
        "/proc/diode-test.safetensors": "cannot write in '/proc'",
    }
    for path, why in cases.items():
        rc, out, err = diode(capsys, "train", "--dataset", str(DATA), "--model", path, *FAST)
        assert rc == 2 and why in err and "wrote" not in out and ".tmp" not in err, err
    # a report's directory is created, as the model's is
    rc, _, err = diode(capsys, "train", "--dataset", str(DATA), "--model", str(tmp_path / "a" / "m.safetensors"),
                       "--report", str(tmp_path / "b" / "r.json"), *FAST)  # fmt: skip
    assert rc == 0, err
    assert json.loads((tmp_path / "b" / "r.json").read_text())["epochs_run"] == 1


def test_stock_picks_of_another_gpu_are_refused_and_the_report_names_its_solution(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, model_file: Path
) -> None:
    picks = max_autotune_solution_from_dataset(read_dataset(DATA))
    other = write_max_autotune_solution(picks, tmp_path / "h200.json", hardware="NVIDIA-H200")
    rc, _, err = diode(capsys, "validate-max-autotune", "--model", str(model_file), "--dataset", str(DATA),
                       "--max-autotune-solution", str(other))  # fmt: skip
    assert rc == 2 and "stock max-autotune's picks of NVIDIA-H200, but the dataset is of NVIDIA-H100" in err
    ds = read_dataset(DATA)
    relabelled = write_dataset(relabel(ds, "NVIDIA-H200"), tmp_path / "h200.msgpack")
    rc, _, err = diode(capsys, "validate-max-autotune", "--model", str(model_file), "--dataset", str(DATA),
                       "--max-autotune-solution", str(relabelled))  # fmt: skip
    assert rc == 2 and "picks of NVIDIA-H200" in err
    own = write_max_autotune_solution(picks, tmp_path / "h100.json", hardware="NVIDIA-H100")
    rc, _, err = diode(capsys, "validate-max-autotune", "--model", str(model_file), "--dataset", str(DATA),
                       "--max-autotune-solution", str(own), "--output", str(tmp_path / "r.json"))  # fmt: skip
    assert rc == 0, err
    assert json.loads((tmp_path / "r.json").read_text())["max_autotune_solution"] == str(own)


def test_a_damaged_solution_says_what_is_wrong(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, model_file: Path
) -> None:
    sol = write_max_autotune_solution(
        max_autotune_solution_from_dataset(read_dataset(DATA)), tmp_path / "s.json", hardware="NVIDIA-H100"
    )
    cut = tmp_path / "cut.json"
    cut.write_bytes(sol.read_bytes()[:500])
    obj = json.loads(sol.read_text())
    del obj["solutions"][0]["choice"]
    nochoice = tmp_path / "nochoice.json"
    nochoice.write_text(json.dumps(obj))
    for path, why in (
        (cut, "a max-autotune solution that is not valid JSON"),
        (nochoice, "solutions[0] is malformed: it has no 'choice'"),
    ):
        rc, _, err = diode(capsys, "validate-max-autotune", "--model", str(model_file), "--dataset", str(DATA),
                           "--max-autotune-solution", str(path))  # fmt: skip
        assert rc == 2 and why in err, err


def test_truncated_files_get_advice_that_loses_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    one_chunk = tmp_path / "one.msgpack"
    one_chunk.write_bytes(DATA.read_bytes()[: DATA.stat().st_size // 2])  # write_dataset writes one chunk
    rc, _, err = diode(capsys, "data", "stats", str(one_chunk))
    assert rc == 2 and "no record of it is complete, so there is nothing to recover" in err
    before = one_chunk.read_bytes()
    rc, _, err = diode(capsys, "data", "recover", str(one_chunk))
    assert rc == 2 and "the file is left as is" in err and one_chunk.read_bytes() == before
    # a collector's file (several chunks) cut inside its last one: recover into a new file
    ds = read_dataset(DATA)
    chunks = tmp_path / "chunks.msgpack"
    with DatasetWriter(chunks, ds.sources[0]) as w:
        for i, record in enumerate(ds.records()):
            w.add(record)
            if i % 500 == 499:
                w.flush()
    data = chunks.read_bytes()
    chunks.write_bytes(data[:-20])
    rc, _, err = diode(capsys, "data", "stats", str(chunks))
    assert rc == 2 and f"`diode data recover {chunks} --output FIXED.msgpack` writes the complete part" in err, err
    assert "recover=True or run" not in err


def test_option_errors_name_the_flags(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = str(tmp_path / "m.safetensors")
    for args, why in (
        (("--batch-size", "0"), "--batch-size: must be a positive integer, got 0"),
        (("--threads", "0"), "--threads: must be a positive integer or None, got 0"),
        (("--ema-decay", "2"), "--ema-decay: "),
        (("--seed", "-1"), "--seed: expected an integer from 0 to 2^63-1, got '-1'"),
        (("--seed", "99999999999999999999"), "--seed: expected an integer from 0 to 2^63-1"),
    ):
        rc, _, err = diode(capsys, "train", "--dataset", str(DATA), "--model", out, *args)
        assert rc == 2 and why in err, (args, err)
    assert not Path(out).exists()


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a machine without CUDA")
def test_a_cuda_device_without_cuda_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, _, err = diode(capsys, "train", "--dataset", str(DATA), "--model", str(tmp_path / "m.safetensors"),
                       "--device", "cuda", *FAST)  # fmt: skip
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "sees no CUDA GPU" in err and "'cpu'" in err, err


def test_mixed_gpus_are_refused_in_the_commands_terms(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    other = write_dataset(relabel(read_dataset(DATA), "NVIDIA-H200"), tmp_path / "h200.msgpack")
    rc, _, err = diode(capsys, "train", "--dataset", str(DATA), str(other), "--model", str(tmp_path / "m.safetensors"))
    assert rc == 2 and "mixes the timings of several GPUs ['NVIDIA-H100', 'NVIDIA-H200']" in err
    assert "--allow-mixed-hardware" not in err and "allow_mixed_hardware" not in err


def test_not_a_dataset_is_not_called_truncated(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rand = tmp_path / "rand.json"
    rand.write_bytes(os.urandom(4096).replace(b"\n", b" "))
    rc, _, err = diode(capsys, "data", "stats", str(rand))
    assert rc == 2 and "not a torch-diode dataset, or one truncated inside its header" in err
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"format": "torch-diode-dataset"}) + "\n")
    rc, _, err = diode(capsys, "data", "stats", str(bare))
    assert rc == 2 and "no schema_version" in err and "None" not in err


def test_registered_names_are_models_here_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    val = Path(__file__).resolve().parents[1] / "data" / "NVIDIA-H200" / "val.msgpack"
    ds = read_dataset(val)
    small = write_dataset(ds.select_problems(ds.problems[:3]), tmp_path / "val3.msgpack")
    rc, out, err = diode(
        capsys, "validate-model", "--model", "NVIDIA-H200-matmul", "--dataset", str(small), "--top-n-worst", "1"
    )
    assert rc == 0 and "predictions of NVIDIA-H200 model" in out, err


def test_create_validation_guards(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    train = tmp_path / "train.msgpack"
    shutil.copy(DATA, train)
    before = train.read_bytes()
    common = ("create-validation", "--train", str(train), "--device", "cpu", "--ops", "bmm", "--no-progress")
    rc, _, err = diode(capsys, *common, "--output", str(train), "--num-shapes", "1", "--hardware", "cpu-test")
    assert rc == 2 and "is also an input" in err and train.read_bytes() == before
    rc, _, err = diode(
        capsys, *common, "--output", str(tmp_path / "v.msgpack"), "--num-shapes", "1", "--hardware", "NVIDIA-H200"
    )
    assert rc == 2 and "would file those timings as that GPU's" in err
    rc, _, err = diode(
        capsys, *common, "--output", str(tmp_path / "v.msgpack"), "--num-shapes", "0", "--hardware", "cpu-test"
    )
    assert rc == 2 and "no problems selected: check --num-shapes/--ops/--dtypes" in err and "--tags" not in err
    assert not (tmp_path / "v.msgpack").exists()


def test_create_validation_shapeset_refuses_sampling_options(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Regression: with --shapeset the 'val' entries are taken as they are, and --sampler, --min-dim,
    # --max-dim (and the other sampling options) were silently ignored.
    shapes = str(Path(__file__).resolve().parents[1] / "data" / "shapesets" / "real_models.json")
    out = tmp_path / "v.msgpack"
    common = ("create-validation", "--train", str(DATA), "--shapeset", shapes, "-n", "1", "--device", "cpu")
    common += ("--ops", "bmm", "--dtypes", "float32", "--no-progress", "--output", str(out))
    for given, named in (
        (("--sampler", "pow2", "--min-dim", "4096", "--max-dim", "8192"), "--sampler, --min-dim, --max-dim"),
        (("--log-normal",), "--log-normal"),
        (("--seed", "0", "--layouts", "row/row"), "--seed, --layouts"),  # a given default counts too
    ):
        rc, _, err = diode(capsys, *common, "--hardware", "cpu-test", *given)
        assert rc == 2 and f"--shapeset takes the shape set's 'val' entries, so {named} (sampling only)" in err, err
        assert len(err.strip().splitlines()) == 1 and not out.exists()
    # The defaults do not trigger it: this run gets as far as the --hardware check, after it ...
    rc, _, err = diode(capsys, *common, "--hardware", "NVIDIA-H200")
    assert rc == 2 and "would file those timings as that GPU's" in err, err
    # ... and this one collects; a shape set's entries are not sampled, so no seed is recorded.
    rc, _, err = diode(capsys, *common, "--hardware", "cpu-test")
    assert rc == 0, err
    assert [s.seed for s in read_dataset(out).sources] == [None]


def test_format_advice_names_only_the_commands_own_flag(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # Regression: every command told "or pass --format json|msgpack" for a path of an unknown
    # extension, also commands without --format, and for inputs whose --format is the output's.
    odd = tmp_path / "x.bin"
    shutil.copy(DATA, odd)
    good, out = str(DATA), str(tmp_path / "y.bin")
    for args, flag in (
        (("data", "stats", str(odd)), None),
        (("data", "lut", str(odd), "-o", str(tmp_path / "l.json")), None),
        (("data", "recover", str(odd)), None),
        (("data", "merge", str(tmp_path / "m.json"), str(odd)), None),  # --format is OUT's
        (("data", "convert", str(odd), str(tmp_path / "c.json")), "--input-format"),
        (("data", "convert", good, out), "--format"),
        (("data", "merge", out, good), "--format"),
        (("data", "recover", good, "-o", out), "--format"),
        (("train", "--dataset", str(odd), "--model", str(tmp_path / "m.safetensors")), None),
        (("collect-problems", "--from", str(odd), "--device", "cpu", "-o", str(tmp_path / "p.msgpack")), None),
        (("create-validation", "--train", str(odd), "-n", "1", "--device", "cpu", "-o", str(tmp_path / "v.msgpack")), None),
        (("collect", "-n", "1", "--ops", "bmm", "--device", "cpu", "-o", out), "--format"),
        (("collect-problems", "--from", good, "--device", "cpu", "-o", out), "--format"),
    ):  # fmt: skip
        rc, _, err = diode(capsys, *args)
        assert rc == 2 and "cannot tell the format from the extension '.bin'" in err, (args, err)
        assert len(err.strip().splitlines()) == 1, err
        if flag is None:
            assert "--format" not in err and "pass" not in err, (args, err)
        else:
            assert err.strip().endswith(f"or pass {flag} json|msgpack"), (args, err)


def test_unwritable_outputs_are_named_as_given(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # Regression: an output in /proc, or a directory, gave an error naming the internal temp file
    # (".x.json.abc123.tmp"); collect's was a bare "[Errno 2] ..." from deep in the collector.
    shapes = ("shapes", "--model", "BERT-base", "-o")
    collect = ("collect", "-n", "1", "--ops", "bmm", "--device", "cpu", "--hardware", "cpu-test", "--no-progress", "-o")
    outs = [
        (shapes, str(tmp_path / "d.json"), "is a directory"),
        (collect, str(tmp_path / "d.msgpack"), "is a directory"),
    ]
    for _, out, _ in outs:
        Path(out).mkdir()
    if os.path.isdir("/proc/self"):  # Linux: nothing can be created in /proc
        outs += [
            (shapes, "/proc/x.json", "cannot write in '/proc'"),
            (collect, "/proc/x.msgpack", "cannot write in '/proc'"),
        ]
    for args, out, why in outs:
        rc, _, err = diode(capsys, *args, out)
        assert rc == 2 and f"--output {out}: {why}" in err and ".tmp" not in err, (args, err)
        assert len(err.strip().splitlines()) == 1, err


def test_data_and_shapes_outputs_never_replace_an_input_or_a_dataset(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    as_json = tmp_path / "s.json"
    assert main(["data", "convert", str(DATA), str(as_json)]) == 0
    capsys.readouterr()
    before = as_json.read_bytes()
    rc, _, err = diode(capsys, "data", "lut", str(as_json), "-o", str(as_json))
    assert rc == 2 and "is also an input" in err and as_json.read_bytes() == before
    victim = tmp_path / "victim.msgpack"
    shutil.copy(DATA, victim)
    rc, _, err = diode(capsys, "data", "recover", str(victim), "-o", str(victim))
    assert rc == 2 and "is also an input" in err and victim.read_bytes() == DATA.read_bytes()
    for out, why in ((victim, "expected a .json file name"), (as_json, "exists and is not a shape set")):
        rc, _, err = diode(capsys, "shapes", "--model", "BERT-base", "-o", str(out))
        assert rc == 2 and why in err, err
    assert victim.read_bytes() == DATA.read_bytes() and as_json.read_bytes() == before
    shapes = tmp_path / "bert.json"
    assert diode(capsys, "shapes", "--model", "BERT-base", "-o", str(shapes))[0] == 0
    assert (
        diode(capsys, "shapes", "--model", "BERT-base", "--batch", "2", "-o", str(shapes))[0] == 0
    )  # a shape set: replaced
    rc, _, err = diode(capsys, "shapes", "--model", "Llama-3.1-8B", "--batch", "-1")
    assert rc == 2 and "--batch: must be at least 1, got -1" in err and len(err.strip().splitlines()) == 1


def test_collect_options_are_checked_before_collecting(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = str(tmp_path / "c.msgpack")
    cpu = ("--device", "cpu", "--no-progress", "--output", out)
    shapes = str(Path(__file__).resolve().parents[1] / "data" / "shapesets" / "real_models.json")
    for args, why in (
        (("collect", "--ops", "bmm", "-n", "1", "--hardware", "bad key/..", *cpu), "--hardware 'bad key/..': a hardware key is"),
        (("collect", "--ops", "bmm", "-n", "1", "--hardware", "cpu-test", "--max-configs", "0", *cpu), "--max-configs applies to --collector sweep"),
        (("collect-shapeset", "--shapeset", shapes, "--ops", "bmm", "--limit", "0", "--hardware", "cpu-test", *cpu), "--limit: must be at least 1, got 0"),
        (("collect-problems", "--from", str(DATA), "--hardware", "cpu-test", *cpu), "give a --from file of those problems only"),
    ):  # fmt: skip
        rc, _, err = diode(capsys, *args)
        assert rc == 2 and why in err, (args, err)
        assert args[0] != "collect-problems" or "--ops" not in err  # that command has no --ops
    assert not Path(out).exists()


def test_a_table_of_several_gpus_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    other = write_dataset(relabel(read_dataset(DATA), "NVIDIA-H200"), tmp_path / "h200.msgpack")
    both = tmp_path / "both.msgpack"
    assert main(["data", "merge", str(both), str(DATA), str(other), "--allow-mixed-hardware"]) == 0
    capsys.readouterr()
    rc, _, err = diode(capsys, "data", "lut", str(both), "-o", str(tmp_path / "t.json"))
    assert rc == 2 and "the timings of 2 GPUs ['NVIDIA-H100', 'NVIDIA-H200']" in err and "split it" not in err


def test_recover_writes_no_empty_dataset(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cut = tmp_path / "cut.msgpack"
    cut.write_bytes(DATA.read_bytes()[: DATA.stat().st_size // 2])  # inside its only chunk
    rc, _, err = diode(capsys, "data", "recover", str(cut), "-o", str(tmp_path / "fixed.msgpack"))
    assert rc == 2 and "nothing was written" in err and not (tmp_path / "fixed.msgpack").exists()


def test_data_commands_never_replace_an_existing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """convert, recover -o and lut leave an existing file alone (before session 78 they replaced it,
    a dataset included, and said they had written it); lut rebuilds a lookup table in place."""
    victim = tmp_path / "victim.msgpack"
    shutil.copy(DATA, victim)
    as_json = tmp_path / "victim.json"
    assert main(["data", "convert", str(DATA), str(as_json)]) == 0
    capsys.readouterr()
    before = {p: p.read_bytes() for p in (victim, as_json)}
    for args in (
        ("data", "convert", str(as_json), str(victim)),
        ("data", "recover", str(as_json), "-o", str(victim)),
        ("data", "lut", str(DATA), "-o", str(as_json)),
    ):
        rc, _, err = diode(capsys, *args)
        assert rc == 2 and "it is left as is" in err and len(err.strip().splitlines()) == 1, (args, err)
    assert all(p.read_bytes() == b for p, b in before.items())
    table = tmp_path / "t.json"
    assert diode(capsys, "data", "lut", str(DATA), "-o", str(table))[0] == 0
    assert diode(capsys, "data", "lut", str(DATA), "-o", str(table), "--top-k", "2")[0] == 0  # a table: rebuilt


def test_stats_recover_of_nothing_complete_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cut = tmp_path / "cut.msgpack"
    cut.write_bytes(DATA.read_bytes()[:5000])  # inside its only chunk
    rc, out, err = diode(capsys, "data", "stats", "--recover", str(cut))
    assert rc == 2 and "nothing to read, even with --recover" in err and "0 records" not in out
    header_only = tmp_path / "header.msgpack"  # a collection stopped before its first problem: complete
    DatasetWriter(header_only, read_dataset(DATA).sources[0]).close()
    assert diode(capsys, "data", "stats", "--recover", str(header_only))[0] == 0


def test_a_refused_command_leaves_no_empty_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The output checks create the output's folder (to probe it); a command refused after them
    removes what they created, where it is still empty (before session 78 it stayed)."""
    empty = tmp_path / "empty.msgpack"
    empty.write_bytes(b"")
    rc, _, err = diode(
        capsys, "train", "--dataset", str(empty), "--model", str(tmp_path / "a" / "b" / "m.safetensors"), *FAST
    )
    assert rc == 2 and not (tmp_path / "a").exists(), err
    rc, _, err = diode(
        capsys, "train", "--dataset", str(DATA), "--model", str(tmp_path / "c" / "m.safetensors"), *FAST,
        "--val-fraction", "0", "--early-stopping",
    )  # fmt: skip
    assert rc == 2 and "--early-stopping: needs validation problems to stop on" in err and not (tmp_path / "c").exists()


def test_create_validation_stays_disjoint_and_takes_no_negative_count(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A resumed validation file is checked against the training files too (before session 78 a
    second --train file could overlap what it held, silently); -n is never a slice from the end."""
    train = tmp_path / "train.msgpack"
    shutil.copy(DATA, train)
    held = tmp_path / "val.msgpack"
    shutil.copy(DATA, held)  # a "validation" file whose problems are the training file's
    before = held.read_bytes()
    common = ("create-validation", "--train", str(train), "--device", "cpu", "--ops", "bmm", "--no-progress")
    rc, _, err = diode(capsys, *common, "--output", str(held), "-n", "1", "--seed", "99", "--hardware", "cpu-test")
    assert rc == 2 and "already holds" in err and "whose shapes the training file(s) hold too" in err, err
    assert held.read_bytes() == before
    shapes = str(Path(__file__).resolve().parents[1] / "data" / "shapesets" / "real_models.json")
    rc, _, err = diode(
        capsys,
        *common,
        "--shapeset",
        shapes,
        "--output",
        str(tmp_path / "v.msgpack"),
        "-n",
        "-1",
        "--hardware",
        "cpu-test",
    )
    assert rc == 2 and "--num-shapes/-n: must be a non-negative integer, got -1" in err, err
    rc, _, err = diode(capsys, "collect", "--device", "cpu", "--ops", "bmm", "--dtypes", "float16,int8", "-n", "2",
                       "--output", str(tmp_path / "c.msgpack"), "--hardware", "cpu-test", "--no-progress")  # fmt: skip
    assert rc == 2 and "--dtypes: int8 cannot be collected" in err, err
    assert not (tmp_path / "v.msgpack").exists() and not (tmp_path / "c.msgpack").exists()


def test_more_refusals_before_any_work(capsys: pytest.CaptureFixture[str], tmp_path: Path, model_file: Path) -> None:
    """Session 78's audit: a --format that contradicts the file name (the file was then unreadable
    by every command), --model replacing the --init-from model, a --plot-dir that is a file (a raw
    error after the evaluation), `shapes --dtypes ,` (each model's default, silently), and the
    forest options' errors in the command line's terms."""
    before = model_file.read_bytes()
    for args, why in (
        (("collect", "--device", "cpu", "--ops", "bmm", "-n", "1", "--hardware", "cpu-test", "--no-progress",
          "--format", "json", "--output", str(tmp_path / "c.msgpack")), "--format json contradicts the name"),
        (("data", "convert", str(DATA), str(tmp_path / "d.json"), "--format", "msgpack"),
         "--format msgpack contradicts the name"),
        (("train", "--dataset", str(DATA), "--model", str(model_file), "--init-from", str(model_file), *FAST),
         "is also an input"),
        (("demo", "--cpu-only", "--model", str(model_file), "--dataset", str(DATA), "--plot-dir", str(model_file)),
         "exists and is not a directory"),
        (("shapes", "--model", "BERT-base", "--dtypes", ","), "--dtypes ',': give at least one dtype"),
        (("train", "--dataset", str(DATA), "--model", str(tmp_path / "m.safetensors"), *FAST, "--forest-shortlist", "0"),
         "--forest-shortlist: must be a positive integer"),
    ):  # fmt: skip
        rc, _, err = diode(capsys, *args)
        assert rc == 2 and why in err and len(err.strip().splitlines()) == 1, (args, err)
    assert model_file.read_bytes() == before
    assert not any(tmp_path.iterdir())


def test_recover_of_a_damaged_file_says_what_it_did_not_copy(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """recover -o of a file damaged before complete chunks copies the chunks before the damage and
    says the rest was not copied (it said "dropped a partial tail", as of an interrupted write)."""
    from test_dataset import _chunked_file

    path = tmp_path / "d.msgpack"
    ends, _ = _chunked_file(path, n_problems=3, compress=None)
    data = bytearray(path.read_bytes())
    data[ends[1]] = 0xC6  # the second chunk's first byte: complete chunks follow it
    path.write_bytes(bytes(data))
    rc, out, _ = diode(capsys, "data", "recover", str(path), "-o", str(tmp_path / "fixed.msgpack"))
    assert rc == 0 and f"damaged at byte {ends[1]}" in out and "not copied: keep the original" in out, out
    assert "partial tail" not in out and path.read_bytes() == bytes(data)
