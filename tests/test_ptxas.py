"""``torch_diode.inductor.ptxas``: ``check_ptxas`` compares Triton's own ptxas (the real one its
wheel bundles) against a stand-in for torch's ``bin/ptxas`` (a script answering ``--version``, as a
CUDA wheel's ptxas would), read the way Triton reads the version for its cache keys, in new
processes; ``pin_ptxas`` sets the variable and Triton's next read of the version is the pinned one."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from torch_diode.inductor.ptxas import (
    ENV,
    _forget_ptxas_version,
    align_with_new_processes,
    check_ptxas,
    pin_ptxas,
    torch_bundled_ptxas,
)

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
def no_ptxas_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(ENV, raising=False)
    _forget_ptxas_version()  # nor a version an earlier test of another file had Triton read
    yield
    os.environ.pop(ENV, None)  # what pin_ptxas set (monkeypatch restores only what it changed)
    _forget_ptxas_version()  # nor a stand-in's version left for later tests


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
    from triton.backends.nvidia.compiler import get_ptxas_version

    monkeypatch.delenv(ENV)
    get_ptxas_version(ARCH)  # a version remembered, then the variable set empty: nothing to read or compare
    monkeypatch.setenv(ENV, "")
    got = check_ptxas(arch=ARCH)
    assert got.mismatch is False and got.reason.startswith(f"{ENV} is set ('')"), got.reason


def test_a_version_read_before_the_variable_was_set_is_a_mismatch_until_pinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The late case (session 75, on the GPU: 20 of 20 choices compiled again): this process's
    Triton read its own ptxas's version (a first compile), then the variable was set (as Inductor
    does on one compile path) to a ptxas of another version, which the workers take; pin_ptxas()
    makes Triton forget what it read, and the two agree again."""
    from triton.backends.nvidia.compiler import get_ptxas_version

    ptxas = fake_ptxas(tmp_path, "99.9")
    monkeypatch.setenv(ENV, str(ptxas))
    assert check_ptxas(arch=ARCH).mismatch is False  # nothing read yet: the first compile reads the variable's
    assert get_ptxas_version.cache_info().currsize == 0  # and the check read nothing into Triton's memory
    monkeypatch.delenv(ENV)
    own = _release_of(get_ptxas_version(ARCH))  # the first compile, before the variable was set
    monkeypatch.setenv(ENV, str(ptxas))
    got = check_ptxas(arch=ARCH)
    assert got.mismatch is True and (got.workers_version, got.process_version) == ("99.9", own)
    assert got.reason.startswith(f"{ENV} is set ({str(ptxas)!r}) and Inductor's compile workers started with it")
    assert got.advice is not None and got.advice.startswith("call torch_diode.inductor.ptxas.pin_ptxas()")
    assert pin_ptxas(arch=ARCH).pinned is True
    assert "release 99.9" in get_ptxas_version(ARCH)  # the next compile's read
    after = check_ptxas(arch=ARCH)
    assert after.mismatch is False and after.reason.startswith(f"{ENV} is set")


def test_align_forgets_a_version_new_processes_would_not_key_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The sweep collector's step before its compile processes start (session 77, on an H200: a
    test's torch.compile had set the variable late, and the sweep then compiled every installed
    kernel again in the test's process): this process's Triton comes to key with what a new
    process with this environment keys with, and remembers it even if the variable changes next."""
    from triton.backends.nvidia.compiler import get_ptxas_version

    ptxas = fake_ptxas(tmp_path, "99.9")
    assert align_with_new_processes(ARCH) is None  # nothing remembered: nothing to align
    own = _release_of(get_ptxas_version(ARCH))  # a first compile, the variable unset
    assert align_with_new_processes(ARCH) is None  # a new process reads the same
    monkeypatch.setenv(ENV, str(ptxas))  # then set, as Inductor does on one compile path
    did = align_with_new_processes(ARCH)
    assert did is not None and did.startswith(f"this process's Triton keyed its cache with ptxas {own}, but a new")
    assert f"({ENV}={ptxas}) keys with 99.9: the ptxas variables changed after its first read" in did, did
    assert did.endswith("it now keys with 99.9, so it loads the kernels its compile processes build"), did
    monkeypatch.delenv(ENV)  # remembered at the alignment, not read again
    assert "release 99.9" in get_ptxas_version(ARCH)
    assert align_with_new_processes(ARCH) is not None  # and back: a new process takes Triton's own again
    assert _release_of(get_ptxas_version(ARCH)) == own
    monkeypatch.setenv(ENV, "")  # an empty variable: nothing a new process could read
    assert align_with_new_processes(ARCH) is None
    (tmp_path / "hangs").mkdir()
    monkeypatch.setenv(ENV, str(fake_ptxas(tmp_path / "hangs", "1.0", sleep_s=60)))
    with caplog.at_level(logging.WARNING, logger="torch_diode.inductor.ptxas"):
        assert align_with_new_processes(ARCH, timeout_s=3) is None  # a ptxas that hangs: logged, the caller goes on
    assert "could not align this process's ptxas version with a new process's: TimeoutExpired" in caplog.text
    assert _release_of(get_ptxas_version(ARCH)) == own  # and nothing forgotten


def _release_of(version: str) -> str:
    return version.split("release ", 1)[1].split(",", 1)[0]


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


def test_pin_sets_the_variable_and_triton_keys_with_the_pinned_ptxas(tmp_path: Path) -> None:
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend, get_ptxas_version

    backend = CUDABackend(GPUTarget("cuda", ARCH, 32))
    before, key_before = get_ptxas_version(ARCH), backend.hash()  # remembered, as after a first compile
    ptxas = fake_ptxas(tmp_path, "99.9")
    got = pin_ptxas(ptxas, arch=ARCH)
    assert got.pinned is True and got.set_variable is True
    assert got.path == str(ptxas) and os.environ[ENV] == str(ptxas)
    assert got.reason.startswith(
        f"{ENV}={ptxas}: this process and compile workers started from now on use it; Triton's remembered "
        "ptxas version cleared, so this process keys with that ptxas from now on"
    )
    assert "release 99.9" not in before and "release 99.9" in get_ptxas_version(ARCH)
    assert "release 99.9" not in key_before and "release 99.9" in backend.hash()  # the cache key's part


def test_pin_keeps_a_variable_that_is_set_and_clears_what_triton_remembers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The late call (session 75, on the GPU): the process's first compile read Triton's own ptxas,
    then Inductor set the variable to torch's; the pin keeps the variable and Triton keys with it."""
    from triton.backends.nvidia.compiler import get_ptxas_version

    before = get_ptxas_version(ARCH)
    ptxas = fake_ptxas(tmp_path, "99.9")
    monkeypatch.setenv(ENV, str(ptxas))  # as Inductor's _set_triton_ptxas_path() does, after the read
    assert get_ptxas_version(ARCH) == before  # what the cache keys would carry without the pin
    (tmp_path / "other").mkdir()
    other = fake_ptxas(tmp_path / "other", "98.1")
    got = pin_ptxas(other, arch=ARCH)
    assert got.pinned is True and got.set_variable is False and got.path == str(ptxas)
    assert got.reason.startswith(
        f"{ENV} is set already ({str(ptxas)!r}): left as it is ({other} not used); Triton's remembered "
        "ptxas version cleared, so this process keys with that ptxas from now on"
    )
    assert os.environ[ENV] == str(ptxas) and "release 99.9" in get_ptxas_version(ARCH)


def test_pin_leaves_an_empty_variable_and_pins_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from triton.backends.nvidia.compiler import get_ptxas_version

    get_ptxas_version(ARCH)
    monkeypatch.setenv(ENV, "")
    got = pin_ptxas(fake_ptxas(tmp_path, "99.9"), arch=ARCH)
    assert got.pinned is False and got.path == "" and os.environ[ENV] == ""
    assert got.reason == f"{ENV} is set but empty: no ptxas to pin; unset it, or name a ptxas, and call again"
    assert get_ptxas_version.cache_info().currsize == 1  # what Triton remembers is left too


def test_pin_does_nothing_where_triton_takes_another_variable_for_the_arch(tmp_path: Path) -> None:
    """Triton 3.9 takes sm_90's and newer ptxas from TRITON_PTXAS_BLACKWELL_PATH."""
    from triton.backends.nvidia.compiler import get_ptxas

    if get_ptxas(90).path == get_ptxas(ARCH).path:
        pytest.skip("this Triton takes one ptxas for sm_80 and sm_90")
    got = pin_ptxas(fake_ptxas(tmp_path, "99.9"), arch=90)
    assert got.pinned is False and got.set_variable is False
    assert got.reason.startswith(f"Triton does not take {ENV} for sm_90 (it takes {get_ptxas(90).path})")
    assert ENV not in os.environ  # set for the check, then taken out again


def test_pin_refuses_a_path_that_is_not_an_executable(tmp_path: Path) -> None:
    text = tmp_path / "ptxas.txt"
    text.write_text("not a program\n")
    for bad in (text, tmp_path / "missing"):
        with pytest.raises(ValueError, match=f"pin_ptxas: {bad} is not an executable file"):
            pin_ptxas(bad, arch=ARCH)
    assert ENV not in os.environ  # refused before anything was set


def test_pin_without_torch_ptxas_does_nothing() -> None:
    if torch_bundled_ptxas() is not None:
        pytest.skip("this torch wheel has a bin/ptxas")
    got = pin_ptxas(arch=ARCH)
    assert got.pinned is False and got.reason.startswith("torch has no bin/ptxas")
    assert ENV not in os.environ


def test_pin_after_the_compile_workers_started_says_they_may_keep_theirs(tmp_path: Path) -> None:
    """Inductor's real worker pool, started before the pin (in a process of its own, so that no
    workers or variable stay behind here): with the variable unset, and with it set after the pool
    started (by the user, to another ptxas than the workers take)."""
    ptxas = fake_ptxas(tmp_path, "99.9")
    child = textwrap.dedent(f"""
        import json, os
        from torch._inductor import config
        from torch._inductor.async_compile import AsyncCompile, shutdown_compile_workers
        from torch_diode.inductor.ptxas import ENV, pin_ptxas
        config.compile_threads = 2
        AsyncCompile.use_process_pool()  # asks for the pool: its workers start now
        try:
            unset = pin_ptxas({str(ptxas)!r}, arch={ARCH}).to_dict()
            os.environ.pop(ENV)
            os.environ[ENV] = {str(ptxas)!r}  # the user's, set after the workers started
            set_after = pin_ptxas(arch={ARCH}).to_dict()
            print(json.dumps([unset, set_after]))
        finally:
            shutdown_compile_workers()
    """)
    env = {k: v for k, v in os.environ.items() if k != ENV}
    out = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    unset, set_after = json.loads(out.stdout.strip().splitlines()[-1])
    workers = "torch" if torch_bundled_ptxas() is not None else "Triton"
    warning = (
        f"; Inductor's compile workers had started already, and unless they started with this {ENV} they "
        f"keep {workers}'s own ptxas, so their keys may still differ: call pin_ptxas() before the first compile"
    )
    assert unset["pinned"] is True and unset["set_variable"] is True and unset["reason"].endswith(warning)
    assert set_after["pinned"] is True and set_after["set_variable"] is False
    assert set_after["reason"].startswith(f"{ENV} is set already") and set_after["reason"].endswith(warning)
