"""What the CLI says about the wrong kind of input (session 81's audit): a directory given as a
dataset file, a file that is not a model given as one, a truncated model file; whether `diode
hardware` says where a model's weights are; and that every option's help shows its default."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
from test_cli_train_validate import diode
from test_registry import add_dist, model_bytes, site  # noqa: F401 (site: a fixture)

from torch_diode.cli import build_parser
from torch_diode.dataset import read_dataset, write_dataset

DATA = Path(__file__).parent / "data" / "small_synthetic.msgpack"  # NVIDIA-H100 timings
SHIPPED = Path(__file__).resolve().parents[1] / "packages/torch-diode-models/src/torch_diode_models"


def one_line_error(rc: int, err: str, *parts: str) -> str:
    assert rc == 2 and "Traceback" not in err, (rc, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for p in parts:
        assert p in lines[0], lines[0]
    return lines[0]


# -- 1. a directory where a dataset file is expected -------------------------------------------


def test_a_directory_given_as_a_dataset_file_is_called_one(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Every command that reads or writes dataset files says that a directory is one, not that its
    name has no extension; where the command reads directories (--data-dir) it says so."""
    d = tmp_path / "data"
    d.mkdir()
    ds = str(write_dataset(read_dataset(DATA), d / "a.msgpack"))
    out = str(tmp_path / "o.msgpack")
    said = "data: is a directory, not a dataset file; name the dataset file(s) instead (.json or .msgpack)"
    for args in (
        ("data", "stats", str(d)),
        ("data", "convert", str(d), out),
        ("data", "convert", str(d), out, "--input-format", "json"),
        ("data", "convert", ds, str(d)),  # an output
        ("data", "merge", out, ds, str(d)),
        ("data", "lut", str(d), "-o", str(tmp_path / "l.json")),
        ("data", "recover", str(d)),
        ("collect-problems", "--from", str(d), "-o", out, "--device", "cpu"),
        ("create-validation", "--train", str(d), "-o", out, "--device", "cpu", "-n", "1"),
        ("collect", "-n", "1", "-o", str(d), "--device", "cpu"),  # an output
    ):
        rc, _, err = diode(capsys, *args)
        line = one_line_error(rc, err, said)
        assert "extension" not in line and "--format" not in line, (args, line)
    model = tmp_path / "m.safetensors"
    model.write_bytes(model_bytes("NVIDIA-H100"))
    for args in (
        ("train", "--dataset", str(d), "--model", str(tmp_path / "new.safetensors")),
        ("validate-model", "--model", str(model), "--dataset", ds, str(d)),
        ("validate-max-autotune", "--model", str(model), "--dataset", str(d)),
    ):
        rc, _, err = diode(capsys, *args)
        one_line_error(rc, err, f"--dataset {d}: is a directory, not a dataset file; pass --data-dir {d} to read")


# -- 2., 3. a file that is not a model, and a truncated model ----------------------------------


def test_a_dataset_given_as_a_model_is_not_a_safetensors_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A dataset (msgpack or JSON, whatever its name) passed as --model: "not a .safetensors model
    file", with what it is, instead of the header size its first 8 bytes would make."""
    ds = read_dataset(DATA)
    for name in ("val.msgpack", "val.json", "renamed.safetensors"):
        path = tmp_path / name
        write_dataset(ds, path, format="json" if name.endswith(".json") else "msgpack")
        rc, _, err = diode(capsys, "validate-model", "--model", str(path), "--dataset", str(DATA))
        line = one_line_error(rc, err, f"{path}: not a .safetensors model file: it is a torch-diode dataset file")
        assert "header claims" not in line, line


def test_a_truncated_model_is_called_truncated(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The first 300 kB of a shipped model: "truncated: N bytes where its header describes M",
    not a checksum mismatch (and never loaded)."""
    full = (SHIPPED / "NVIDIA-H200-matmul.safetensors").read_bytes()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(full[:300_000])
    rc, _, err = diode(capsys, "validate-model", "--model", str(cut), "--dataset", str(DATA))
    line = one_line_error(rc, err, f"{cut}: file is truncated: 300,000 bytes where its header describes {len(full):,}")
    assert "sha256" not in line, line


# -- 5. diode hardware: where each model's weights are ----------------------------------------


def test_hardware_says_which_models_weights_are_on_disk(
    capsys: pytest.CaptureFixture[str],
    site: Path,  # noqa: F811 (test_registry's fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full models package (weights in it), and a slim one (manifest only) with one model in the
    Hugging Face cache and one not: the listing says which are on disk and which would be fetched,
    and, offline, that those cannot be. Nothing is downloaded (no server exists)."""
    from test_hub import COMMIT, REPO_ID

    data = {n: model_bytes("TESTGPU-S", seed=i) for i, n in enumerate(("full", "cached", "fetched"))}
    add_dist(site, "full-models", models={"TESTGPU-S-full": data["full"]})
    add_dist(
        site,
        "slim-models",
        models={"TESTGPU-S-cached": data["cached"], "TESTGPU-S-fetched": data["fetched"]},
        ship_weights=False,
        hub=True,
    )
    snapshot = tmp_path / "hf-cache" / f"models--{REPO_ID.replace('/', '--')}" / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (snapshot / "TESTGPU-S-cached.safetensors").write_bytes(data["cached"])  # as a download leaves it
    monkeypatch.setenv("TORCH_DIODE_HARDWARE", "custom:TESTGPU-S")
    rc, out, err = diode(capsys, "hardware", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["model_weights"] == {"TESTGPU-S-full": "package", "TESTGPU-S-cached": "cache", "TESTGPU-S-fetched": "hub"}
    assert sorted(d["models"]) == sorted(d["model_weights"])
    rc, out, err = diode(capsys, "hardware")
    assert rc == 0, err
    models = next(line for line in out.splitlines() if line.startswith("models:"))
    assert "TESTGPU-S-full (weights on disk)" in models
    assert "TESTGPU-S-cached (weights on disk, in the Hugging Face cache)" in models
    assert "TESTGPU-S-fetched (weights not on disk: fetched from the Hugging Face Hub on first use)" in models
    assert "HF_HUB_OFFLINE" not in out
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rc, out, err = diode(capsys, "hardware")
    assert rc == 0 and "HF_HUB_OFFLINE is set: a model whose weights are not on disk cannot be fetched" in out


# -- 6. every option's help shows its default --------------------------------------------------


def _parsers(parser: argparse.ArgumentParser, name: str = "diode") -> dict[str, argparse.ArgumentParser]:
    out = {name: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, p in action.choices.items():
                out |= _parsers(p, f"{name} {sub}")
    return out


def _written_forms(v: object) -> set[str]:
    """The ways a help text may write the value ``v``: 1000 as "1000" or "1,000", 0.001 as "0.001"
    or "1e-3", 0.05 also as "5%", a list joined by commas or spaces."""
    if isinstance(v, bool) or not isinstance(v, (int, float, list, tuple)):
        return {str(v)}
    if isinstance(v, int):
        return {str(v), f"{v:,}"}
    if isinstance(v, float):
        mantissa, exponent = f"{v:e}".split("e")
        forms = {repr(v), f"{v:g}", f"{v:,}", f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"}
        return forms | ({f"{v * 100:g}%"} if 0 < v < 1 else set())
    return {",".join(map(str, v)), " ".join(map(str, v)), ", ".join(map(str, v)), str(v)}


def _shows_default(a: argparse.Action) -> bool:
    """Whether ``a``'s help, as ``--help`` prints it, says its default's value: "default" then the
    value within a few words ("default: 1e-3", "default 64 per problem"), or the value followed a
    few words on by a bare "default" ("cuda (default) or cpu", "auto (CUDA when available; the
    default)")."""
    text = (a.help or "") % {**vars(a), "default": a.default}
    gap = r"\W+(?:[\w'-]+\W+){0,6}?"
    for form in _written_forms(a.default):
        value = r"(?<![\w.])" + re.escape(form) + r"(?!\w)"
        if re.search(r"default\w*" + gap + value, text) or re.search(value + gap + r"default(?=[),;]|$)", text):
            return True
    return False


def test_every_option_with_a_default_shows_it_in_its_help() -> None:
    """`diode collect --help` did not show --collector's default (inductor) while the other options
    showed theirs; nor did `diode shapes --tokens` nor `diode train --device`. Each help, as
    ``--help`` prints it, writes the default's value itself, so a changed default with a stale help
    text is caught too."""
    missing = []
    for name, parser in _parsers(build_parser()).items():
        for a in parser._actions:
            if not a.option_strings or a.default in (None, False, argparse.SUPPRESS) or a.nargs == 0:
                continue
            if not _shows_default(a):
                missing.append(f"{name} {a.option_strings[0]} (default {a.default!r}): {a.help!r}")
    assert not missing, "\n".join(missing)


def test_a_default_written_wrong_in_a_help_is_caught() -> None:
    """The check above compares values, not the word "default"."""
    parser = argparse.ArgumentParser()
    right = parser.add_argument("--lr", type=float, default=0.001, help="learning rate (default: 1e-3)")
    wrong = parser.add_argument("--epochs", type=int, default=100, help="epochs (default: 50)")
    shown = parser.add_argument("--tokens", type=int, default=4096, help="tokens (default: %(default)s)")
    named = parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    elsewhere = parser.add_argument("--block", type=int, default=100, help="blocks of 100 rows; default 5")
    unsaid = parser.add_argument("--rows", type=int, default=8, help="8 rows per block")
    got = [_shows_default(a) for a in (right, wrong, shown, named, elsewhere, unsaid)]
    assert got == [True, False, True, True, False, False]
