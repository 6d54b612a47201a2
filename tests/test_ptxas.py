"""``torch_diode.inductor.ptxas.check_ptxas``: Triton's own ptxas (the real one its wheel bundles)
against a stand-in for torch's ``bin/ptxas`` (a script answering ``--version``, as a CUDA wheel's
ptxas would), read the way Triton reads the version for its cache keys, in new processes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from torch_diode.inductor.ptxas import ENV, check_ptxas, torch_bundled_ptxas

pytest.importorskip("triton.backends.nvidia.compiler")
# Triton 3.9 picks its ptxas for sm_90+ by another variable (TRITON_PTXAS_BLACKWELL_PATH): the
# checks here use an Ampere arch, whose ptxas TRITON_PTXAS_PATH picks in every Triton version.
ARCH = 80


def fake_ptxas(folder: Path, release: str, *, exit_code: int = 0, sleep_s: int = 0) -> Path:
    path = folder / "ptxas"
    path.write_text(
        "#!/bin/sh\n"
        f"sleep {sleep_s}\n"
        f'echo "ptxas: NVIDIA (R) Ptx optimizing assembler"\n'
        f'echo "Cuda compilation tools, release {release}, V{release}.1"\n'
        f"exit {exit_code}\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture(autouse=True)
def no_ptxas_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)


def test_another_ptxas_for_the_workers_is_a_mismatch_with_advice(tmp_path: Path) -> None:
    ptxas = fake_ptxas(tmp_path, "99.9")
    got = check_ptxas(arch=ARCH, torch_ptxas=ptxas)
    assert got.mismatch is True
    assert got.workers_version == "99.9" and got.process_version not in (None, "99.9")
    assert got.advice is not None and got.advice.startswith(f"set {ENV}={ptxas} before the first compile")
    assert "compiles every worker-precompiled choice again" in got.reason
    assert ENV not in os.environ  # read in other processes: nothing set here


def test_the_same_version_or_the_variable_set_is_no_mismatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import triton

    own = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    (tmp_path / "torch-bin").mkdir()
    (tmp_path / "torch-bin" / "ptxas").symlink_to(own)  # the same binary under torch's name
    same = check_ptxas(arch=ARCH, torch_ptxas=tmp_path / "torch-bin" / "ptxas")
    assert same.mismatch is False and same.workers_version == same.process_version
    assert same.reason == f"torch's ptxas and Triton's give the same version ({same.process_version})"
    for value in (str(tmp_path / "ptxas"), ""):  # Inductor's workers keep even an empty one
        monkeypatch.setenv(ENV, value)
        got = check_ptxas(arch=ARCH, torch_ptxas=fake_ptxas(tmp_path, "99.9"))
        assert got.mismatch is False and got.reason.startswith(f"{ENV} is set ({value!r})")
        assert os.environ[ENV] == value


def test_a_ptxas_triton_does_not_take_is_no_mismatch(tmp_path: Path) -> None:
    """Triton falls back to its own ptxas where the one named does not answer (so too where it takes
    another variable for the arch): the two sides agree, and the reason says which Triton takes."""
    got = check_ptxas(arch=ARCH, torch_ptxas=fake_ptxas(tmp_path, "99.9", exit_code=3))
    assert got.mismatch is False and got.workers_version == got.process_version
    assert got.reason.startswith(f"Triton does not take torch's ptxas for sm_{ARCH} (it takes ")


def test_a_ptxas_that_hangs_is_a_reason_not_a_hang(tmp_path: Path) -> None:
    got = check_ptxas(arch=ARCH, torch_ptxas=fake_ptxas(tmp_path, "99.9", sleep_s=60), timeout_s=3)
    assert got.mismatch is False and got.reason.startswith("could not read a ptxas version: TimeoutExpired")


def test_without_torch_ptxas_there_is_nothing_to_compare() -> None:
    if torch_bundled_ptxas() is not None:
        pytest.skip("this torch wheel has a bin/ptxas")
    got = check_ptxas(arch=ARCH)
    assert got.mismatch is False and got.reason.startswith("torch has no bin/ptxas")
