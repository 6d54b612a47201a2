"""`scripts/campaign.py` ends with one line, not a traceback, when what a command needs is missing
(triton, matplotlib) or its input is not what it takes (a file that is not a campaign pack);
`benchmarks/models/session49/ship.py` says on stderr what it is doing; the library's sweep says
that triton is missing too."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from torch_diode.collect.campaign import CampaignOptions, plan_campaign

REPO = Path(__file__).resolve().parents[1]
SCRIPT = [sys.executable, str(REPO / "scripts" / "campaign.py")]
SMALL = CampaignOptions(train_lognormal=6, train_shapeset=4, val_lognormal=2, val_shapeset=2, seed=7)


def _without(module: str, tmp_path: Path) -> dict[str, str]:
    """The environment of a Python process (and of its children) in which ``module`` is not
    installed: a sitecustomize puts None in its sys.modules slot, so importing it raises
    ImportError and ``importlib.util.find_spec`` returns None, as for a package never installed."""
    site = tmp_path / f"without-{module}"
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"import sys\nsys.modules[{module!r}] = None\n")
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def _one_error_line(proc: subprocess.CompletedProcess, cmd: str) -> str:
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"campaign.py {cmd}: error: "), lines
    return lines[0]


def _val_file(path: Path) -> Path:
    """A one-problem validation set of the H100's."""
    from torch_diode.dataset import Dataset, write_dataset
    from torch_diode.records import Choice, Problem, Provenance, TimingRecord

    p = Problem(op="mm", m=64, n=64, k=64)
    recs = [TimingRecord(problem=p, choice=Choice.aten("mm"), time_us=5.0, hardware="NVIDIA-H100")]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_dataset(Dataset.from_records(recs, Provenance(hardware="NVIDIA-H100")), path)
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["stock"],
        ["target"],
        ["run", "--split", "val-stock", "--time-budget", "1", "--no-progress"],
    ],
    ids=["stock", "target", "run"],
)
def test_commands_that_need_triton_say_so_without_it(tmp_path: Path, args: list[str]) -> None:
    # Regression: without triton (the CPU torch wheel has none) Inductor's TritonConfig is a
    # placeholder and `stock` (and `run`) ended in "TypeError: object() takes no arguments".
    data = tmp_path / "data"
    _val_file(data / "NVIDIA-H100" / "val.msgpack")
    plan_campaign(SMALL, REPO / "data" / "shapesets" / "real_models.json").save(data / "NVIDIA-H100" / "plan.json")
    proc = subprocess.run(
        [*SCRIPT, "--data-dir", str(data), *args, "--hardware", "NVIDIA-H100"],
        capture_output=True,
        text=True,
        timeout=300,
        env=_without("triton", tmp_path),
    )
    line = _one_error_line(proc, args[0])
    assert "needs triton" in line and "pip install triton, the version that matches torch" in line, line
    assert not (data / "NVIDIA-H100" / "val-stock-picks.json").exists()


def test_plot_without_matplotlib_says_how_to_install_it(tmp_path: Path) -> None:
    # Regression: a raw ModuleNotFoundError; the message is the one `diode demo` gives.
    data = tmp_path / "data"
    plan_campaign(SMALL, REPO / "data" / "shapesets" / "real_models.json").save(data / "NVIDIA-H100" / "plan.json")
    proc = subprocess.run(
        [*SCRIPT, "--data-dir", str(data), "plot", "--hardware", "NVIDIA-H100"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_without("matplotlib", tmp_path),
    )
    line = _one_error_line(proc, "plot")
    assert line.endswith("matplotlib is not installed, so no plot was written; pip install 'torch-diode-lib[plot]'")
    assert not (data / "NVIDIA-H100" / "problem_mix.png").exists()


def test_unpack_of_what_is_not_a_pack_is_one_line(tmp_path: Path) -> None:
    # Regression: a file that is not a tar archive printed tarfile's list of the four ways it
    # tried to open it (five lines), and a truncated .tgz ended in an EOFError traceback.
    (tmp_path / "notes.txt").write_text("not an archive\n")
    src = tmp_path / "chunk" / "data" / "NVIDIA-H100"
    src.mkdir(parents=True)
    (src / "train.msgpack").write_bytes(os.urandom(200_000))  # incompressible: the cut falls inside it
    whole = tmp_path / "whole.tgz"
    with tarfile.open(whole, "w:gz") as tar:
        tar.add(src, arcname="data/NVIDIA-H100")
    (tmp_path / "cut.tgz").write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    (tmp_path / "cut-early.tgz").write_bytes(whole.read_bytes()[:100])  # inside the first tar header
    data = tmp_path / "data"
    for pack, expect in (
        ("notes.txt", "not a campaign pack: not a tar archive"),
        ("cut.tgz", "a truncated or damaged tar archive"),
        ("cut-early.tgz", "a truncated or damaged tar archive"),
        ("missing.tgz", "no such file, not a campaign pack"),
        ("chunk", "a directory, not a campaign pack"),
    ):
        proc = subprocess.run(
            [*SCRIPT, "--data-dir", str(data), "unpack", "--hardware", "NVIDIA-H100", str(tmp_path / pack)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        line = _one_error_line(proc, "unpack")
        assert expect in line, line
        assert not (data / "NVIDIA-H100" / "train.msgpack").exists()


@pytest.mark.slow
def test_ship_says_what_it_is_doing(tmp_path: Path) -> None:
    # Regression: the README's command printed nothing for minutes (about 8 for the H100 file).
    # The cheapest training it runs: one epoch of a small network, no forest.
    out = tmp_path / "m.safetensors"
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "models" / "session49" / "ship.py"), "--hw", "NVIDIA-H100",
         "--seed", "0", "--set", "num_epochs=1", "hidden=8", "ensemble_size=1", "forest_trees=0",
         "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert "reading NVIDIA-H100's training and held-out data: done in" in err, err
    assert "network: epoch 1/1, loss" in err and "training the network, then the held-out metrics: done in" in err
    assert f"writing {out}: done in" in err and "finished in" in err
    # stdout is what it was: the metrics and the file written
    assert proc.stdout.splitlines()[-1].startswith(f"wrote {out}: ") and out.is_file()


def test_the_sweeps_choices_without_triton_name_what_to_install(tmp_path):
    """The library's own check, under the script's: inductor_choices (``diode collect``'s sweep,
    stock's picks) says triton is missing instead of failing inside Inductor."""
    code = (
        "from torch_diode.collect.sweep import inductor_choices\n"
        "from torch_diode.records import Problem\n"
        "try:\n"
        "    inductor_choices(Problem(op='mm', m=64, n=64, k=64))\n"
        "except ModuleNotFoundError as e:\n"
        "    print(e.name, '|', e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=_without("triton", tmp_path), capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith(
        "triton | inductor_choices needs triton (Inductor's Triton configs), which is not installed: "
    ), (
        out.stdout,
        out.stderr,
    )
