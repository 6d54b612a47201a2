"""``diode train`` and ``diode validate-model`` as a user sees them (session 79's audit): the help
of ``--max-compile-cost`` says what it does in each command, ``validate-model --json`` names the
model, GPU and data as ``validate-max-autotune``'s report does, counts of one are in the singular,
and ``train --model`` never replaces an installed model's file."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest
from test_registry import add_dist, model_bytes, site  # noqa: F401 (site: a fixture)

from torch_diode.cli import main
from torch_diode.model import load_model
from torch_diode.weights import file_sha256

DATA = Path(__file__).parent / "data" / "small_synthetic.msgpack"  # NVIDIA-H100 timings, 26 problems
FAST = ("--num-epochs", "1", "--ensemble-size", "1", "--threads", "1", "--forest-trees", "1", "--no-progress")
SHIPPED = "NVIDIA-H200-matmul"  # a model of the models package installed with the checkout


def diode(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``diode ARGS`` in this process: (exit status, stdout, stderr)."""
    try:
        rc = main(list(args))
    except SystemExit as e:  # argparse (--help, usage errors)
        rc = int(e.code or 0)
    out = capsys.readouterr()
    return rc, out.out, out.err


def option_help(capsys: pytest.CaptureFixture[str], command: str, option: str) -> str:
    """The help text of ``option`` in ``diode COMMAND --help``, on one line."""
    rc, out, _ = diode(capsys, command, "--help")
    assert rc == 0
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(option))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("-")), len(lines))
    return " ".join(" ".join(lines[start:end]).split()).replace("- ", "-")


@pytest.fixture(scope="module")
def one_member_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A model of one member and a forest of one tree, trained one epoch with one validation
    problem, and what ``diode train`` printed."""
    import contextlib
    import io

    path = tmp_path_factory.mktemp("m") / "m.safetensors"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["train", "--dataset", str(DATA), "--model", str(path), "--val-fraction", "0.05", *FAST]) == 0
    return path, out.getvalue()


def test_max_compile_cost_help_says_what_it_does_in_each_command(
    capsys: pytest.CaptureFixture[str], one_member_model: tuple[Path, str]
) -> None:
    """validate-model reports no regret: its --max-compile-cost said "regret is still against the
    best of every measured choice". It says which predictions the option leaves out, as they are:
    'none' predicts every measured (problem, choice), a lower cost fewer."""
    text = option_help(capsys, "validate-model", "--max-compile-cost")
    assert "regret" not in text and "rank" not in text, text
    assert "left out of the MSE, RMSE and worst predictions" in text and "'none' predicts every measured choice" in text
    assert "regret is still against the best of every measured choice" in option_help(
        capsys, "validate-max-autotune", "--max-compile-cost"
    )
    assert "with --held-out-dataset" in option_help(capsys, "train", "--max-compile-cost")
    model, _ = one_member_model
    rows = []
    for cost in ("none", "131072", "5000"):
        rc, out, err = diode(capsys, "validate-model", "--model", str(model), "--dataset", str(DATA), "--json",
                             "--max-compile-cost", cost)  # fmt: skip
        assert rc == 0, err
        rows.append(json.loads(out)["rows"])
    assert rows[0] == 2256 > rows[1] > rows[2] > 0  # every measured (problem, choice) of the slice, then fewer


def test_validate_model_json_names_the_model_gpu_and_data_as_validate_max_autotune_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, one_member_model: tuple[Path, str]
) -> None:
    model, _ = one_member_model
    rc, out, err = diode(capsys, "validate-model", "--model", str(model), "--dataset", str(DATA), "--json",
                         "--top-n-worst", "2")  # fmt: skip
    assert rc == 0, err
    rep = json.loads(out)
    report = tmp_path / "r.json"
    rc, _, err = diode(capsys, "validate-max-autotune", "--model", str(model), "--dataset", str(DATA),
                       "--output", str(report))  # fmt: skip
    assert rc == 0, err
    full = json.loads(report.read_text())
    for key in ("hardware", "model", "dataset"):
        assert rep[key] == full[key], key
    assert rep["hardware"] == "NVIDIA-H100" and rep["model"]["sha256"] == file_sha256(model)
    assert rep["dataset"] == {"records": 2256, "problems": 26, "hardware": ["NVIDIA-H100"]}
    assert rep["candidates"] == {"max_compile_cost": full["candidates"]["max_compile_cost"]}
    assert rep["rows"] == 2245 and len(rep["worst"]) == 2
    assert 1.0 < rep["rmse_exp"] == pytest.approx(math.exp(rep["rmse"]))


def test_counts_of_one_are_singular(capsys: pytest.CaptureFixture[str], one_member_model: tuple[Path, str]) -> None:
    """`diode train` printed "1 members", "1 trees", "1 validation problems", "1 epochs";
    validate-model "1 worst predictions"."""
    model, printed = one_member_model
    assert load_model(model).arch.members == 1
    assert " (deep, 1 member of width " in printed and ", a ranking forest of 1 tree, sha256 " in printed, printed
    assert "  25 training / 1 validation problem, " in printed and "; 1 epoch (best 1) in " in printed, printed
    rc, out, err = diode(capsys, "validate-model", "--model", str(model), "--dataset", str(DATA), "--top-n-worst", "1")
    assert rc == 0 and "\n1 worst prediction:\n" in out and out.startswith("2,245 predictions of NVIDIA-H100 model "), (
        err
    )


@pytest.fixture(scope="module")
def installed() -> Path:
    """The installed file of the models package's H200 model (never written by these tests)."""
    from torch_diode.registry import get_model_entry

    path = get_model_entry(SHIPPED).packaged_path
    if path is None or not path.is_file():
        pytest.skip(f"{SHIPPED}'s weights are not installed (a slim models wheel)")
    return path


def test_train_never_replaces_an_installed_models_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, installed: Path
) -> None:
    """--model naming the installed file of a registered model, by any path, with or without
    --init-from that model's name (only a path was protected before: the name resolves to the same
    file), is refused before any work. The dataset here does not exist: whatever the order of the
    checks, nothing can train, so the installed file is never written even where it is not refused."""
    before = (file_sha256(installed), installed.stat().st_mtime_ns)
    listing = sorted(os.listdir(installed.parent))
    link = tmp_path / "link.safetensors"
    link.symlink_to(installed)
    relative = Path(os.path.relpath(installed))
    missing = str(tmp_path / "missing.msgpack")
    for target in (installed, relative, link):
        for start in ((), ("--init-from", SHIPPED), ("--init-forest-from", SHIPPED)):
            rc, _, err = diode(capsys, "train", "--dataset", missing, "--model", str(target), *start, *FAST)
            assert rc == 2 and len(err.strip().splitlines()) == 1, (target, start, err)
            assert f"--model {target} is the installed file of the registered model {SHIPPED}, listed by " in err, err
            assert "write the new model elsewhere" in err, err
    assert (file_sha256(installed), installed.stat().st_mtime_ns) == before
    assert sorted(os.listdir(installed.parent)) == listing  # not even a probe file


def test_train_writes_a_copy_of_an_installed_models_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, installed: Path
) -> None:
    """A file with the installed model's bytes elsewhere is no installed model: it is replaced
    (what is refused is the installed file itself, not its content or its name)."""
    copy = tmp_path / installed.name
    shutil.copy(installed, copy)
    before = file_sha256(installed)
    rc, out, err = diode(capsys, "train", "--dataset", str(DATA), "--model", str(copy), *FAST)
    assert rc == 0 and f"wrote {copy} " in out, err
    assert load_model(copy).hardware == "NVIDIA-H100" and file_sha256(installed) == before


def test_train_never_replaces_the_cached_file_its_init_from_name_resolves_to(
    capsys: pytest.CaptureFixture[str],
    site: Path,  # noqa: F811 (test_registry's fixture)
    tmp_path: Path,
) -> None:
    """A registered model of a slim package (weights on the Hub only) resolves to its file in the
    Hugging Face cache: --model naming that file with --init-from the name is refused as one of the
    inputs (before, only an --init-from path was; the name's file was not among them)."""
    from test_hub import COMMIT, REPO_ID

    from torch_diode.registry import resolve

    data = model_bytes("TESTGPU-S")
    add_dist(site, "slim-models", models={"TESTGPU-S-matmul": data}, ship_weights=False, hub=True)
    snapshot = tmp_path / "hf-cache" / f"models--{REPO_ID.replace('/', '--')}" / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    cached = snapshot / "TESTGPU-S-matmul.safetensors"
    cached.write_bytes(data)  # as a download leaves it (the site fixture's private cache)
    assert resolve("TESTGPU-S-matmul", local_files_only=True) == cached
    missing = str(tmp_path / "missing.msgpack")
    for start in ("--init-from", "--init-forest-from"):
        rc, _, err = diode(
            capsys, "train", "--dataset", missing, "--model", str(cached), start, "TESTGPU-S-matmul", *FAST
        )
        assert rc == 2 and len(err.strip().splitlines()) == 1, (start, err)
        assert f"--model {cached}" in err and "input" in err, err
    assert cached.read_bytes() == data


def test_an_empty_init_from_is_a_usage_error_not_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Regression (session 79): resolving --init-from '' for the protected inputs raised TypeError
    # before train() could say what was wrong.
    rc, _, err = diode(capsys, "train", "--dataset", str(DATA), "--model", str(tmp_path / "m.safetensors"),
                       "--init-from", "", *FAST)  # fmt: skip
    assert rc == 2 and err.startswith("diode train: error: --init-from: empty"), err
