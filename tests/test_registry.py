"""torch_diode.registry: discovery through real installed distributions, resolution, registration.

Models packages are real distributions: a ``<dist>-1.0.dist-info`` directory with an
``entry_points.txt`` and a package directory holding ``manifest.json`` and real model files
(written by torch_diode.model), on a ``sys.path`` entry, exactly as pip lays them out.
``importlib.metadata`` is not patched. The packages' ``__init__.py`` raises, which proves that
discovery never imports them.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_hub import COMMIT, REPO_ID, FakeHub, SilentServer, tiny_model_bytes

from torch_diode import registry
from torch_diode.errors import ModelFormatError, ModelNotFoundError
from torch_diode.hub import HubOfflineError
from torch_diode.weights import ChecksumMismatchError, ModelEntry, write_manifest

REPO = Path(__file__).resolve().parents[1]
SRC_DIRS = [REPO / "packages" / p / "src" for p in ("torch-diode-lib", "torch-diode-models", "torch-diode")]
_BYTES: dict[tuple[str, int], bytes] = {}


def model_bytes(hardware: str, seed: int = 0, regret: float = 1.05) -> bytes:
    key = (hardware, seed)
    if key not in _BYTES:
        _BYTES[key] = tiny_model_bytes(hardware, seed=seed, regret=regret)
    return _BYTES[key]


def add_dist(
    site: Path,
    dist: str,
    *,
    group: str = "torch_diode.models",
    ep: str | None = None,
    package: str | None = None,
    models: dict[str, bytes] | None = None,
    ship_weights: bool = True,
    hub: bool = False,
    manifest_text: str | None = None,
) -> Path:
    """Lay out an installed distribution in ``site``; returns its package directory."""
    package = package or dist.replace("-", "_")
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{dist.replace('-', '_')} = {ep or package}\n")
    pkg = site / package
    if models is None and manifest_text is None:
        return pkg
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('discovery must not import a models package')\n")
    if manifest_text is not None:
        (pkg / "manifest.json").write_text(manifest_text)
        return pkg
    entries = []
    for name, data in (models or {}).items():
        entries.append(
            ModelEntry(
                name=name,
                hardware=name.rsplit("-", 1)[0],
                file=f"{name}.safetensors",
                size_bytes=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
                metrics={"overall.regret@1.geomean": float(data[-1]) / 100 + 1.0},
                hub_repo=REPO_ID if hub else None,
                hub_revision=COMMIT if hub else None,
            )
        )
        if ship_weights:
            (pkg / f"{name}.safetensors").write_bytes(data)
    write_manifest(pkg / "manifest.json", entries)
    return pkg


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh site directory on sys.path, a private HF cache, and a clean registry."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    for var in (
        "HF_HUB_OFFLINE",
        "HF_HOME",
        "HF_ENDPOINT",
        "TORCH_DIODE_HUB_TIMEOUT_S",
        "TORCH_DIODE_HARDWARE",
        "TORCH_DIODE_MODEL",
        "TORCH_DIODE_DISABLE",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    registry._reset_for_tests()
    yield site
    if registry.current_registration() is not None:
        registry.unregister_model()
    registry._reset_for_tests()


def names() -> set[str]:
    return {e.name for e in registry.list_available_models(refresh=True)}


# ---------------------------------------------------------------------------------------------
# Discovery and resolution
# ---------------------------------------------------------------------------------------------


def test_discovery_reads_manifests_without_importing(site: Path) -> None:
    pkg = add_dist(site, "acme-models", models={"TESTGPU-A-matmul": model_bytes("TESTGPU-A")})
    add_dist(site, "other-models", models={"TESTGPU-B-matmul": model_bytes("TESTGPU-B")})
    assert {"TESTGPU-A-matmul", "TESTGPU-B-matmul"} <= names()
    assert "acme_models" not in sys.modules and "other_models" not in sys.modules
    entry = registry.get_model_entry("TESTGPU-A-matmul")
    assert entry.package_dir == pkg and entry.hardware == "TESTGPU-A" and "acme_models" in entry.source
    assert registry.resolve("TESTGPU-A-matmul") == pkg / "TESTGPU-A-matmul.safetensors"


_UNINSTALLED_CHILD = """
import sys
from torch_diode import registry
from torch_diode.errors import ModelFormatError, ModelNotFoundError
print("NAMES", sorted(e.name for e in registry.list_available_models()))
try:
    print("RESOLVED", registry.resolve("TESTGPU-A-matmul"))
except ModelNotFoundError as e:
    print("NOTFOUND", e)
print("IMPORTED", "torch_diode_models" in sys.modules)
"""


def test_own_models_package_on_sys_path_without_installing(tmp_path: Path) -> None:
    """A source checkout on PYTHONPATH: ``torch_diode_models`` has no dist-info, so no entry point,
    and is found by its import name (without importing it); without it the error says what is
    missing. Run with ``python -S`` so that no installed distribution is seen at all."""
    with_pkg = tmp_path / "with"
    add_dist(
        with_pkg,
        "torch-diode-models",
        package="torch_diode_models",
        models={"TESTGPU-A-matmul": model_bytes("TESTGPU-A")},
    )
    for info in with_pkg.glob("*.dist-info"):  # the package directory alone, as in a source tree
        for f in info.iterdir():
            f.unlink()
        info.rmdir()
    lib_src = str(REPO / "packages" / "torch-diode-lib" / "src")
    for path, names_line, expect in (
        (
            with_pkg,
            "NAMES ['TESTGPU-A-matmul']",
            f"RESOLVED {with_pkg / 'torch_diode_models' / 'TESTGPU-A-matmul.safetensors'}",
        ),
        (tmp_path / "without", "NAMES []", "no torch_diode_models package is on sys.path"),
    ):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), lib_src]), "HF_HUB_OFFLINE": "1"}
        proc = subprocess.run(
            [sys.executable, "-S", "-c", _UNINSTALLED_CHILD], env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        assert names_line in proc.stdout and expect in proc.stdout, (proc.stdout, proc.stderr)
        assert "IMPORTED False" in proc.stdout


def test_packaged_file_is_verified(site: Path) -> None:
    pkg = add_dist(site, "acme-models", models={"TESTGPU-A-matmul": model_bytes("TESTGPU-A")})
    weights = pkg / "TESTGPU-A-matmul.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01
    weights.write_bytes(bytes(data))
    with pytest.raises(ChecksumMismatchError, match=r"the sha256 of model 'TESTGPU-A-matmul'.*--force-reinstall"):
        registry.resolve("TESTGPU-A-matmul")


def test_unknown_name_lists_the_available_ones(site: Path) -> None:
    add_dist(site, "acme-models", models={"TESTGPU-A-matmul": model_bytes("TESTGPU-A")})
    with pytest.raises(
        ModelNotFoundError, match=r"unknown model 'NVIDIA-H999-matmul'; available models: .*TESTGPU-A-matmul"
    ):
        registry.resolve("NVIDIA-H999-matmul")


def test_a_model_installed_after_the_first_scan_is_found(site: Path) -> None:
    add_dist(site, "acme-models", models={"TESTGPU-A-matmul": model_bytes("TESTGPU-A")})
    assert "TESTGPU-A-matmul" in names()
    add_dist(site, "late-models", models={"TESTGPU-B-matmul": model_bytes("TESTGPU-B")})  # "pip install" now
    assert registry.get_model_entry("TESTGPU-B-matmul").hardware == "TESTGPU-B"


def test_explicit_paths(site: Path, tmp_path: Path) -> None:
    own = tmp_path / "mine.safetensors"
    own.write_bytes(model_bytes("TESTGPU-A"))
    assert registry.resolve(own) == own
    assert registry.resolve(str(own)) == own
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        registry.resolve(tmp_path / "missing.safetensors")
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        registry.resolve("missing.safetensors")
    with pytest.raises(ModelNotFoundError, match=r"is a directory; pass a \.safetensors model file or a model name"):
        registry.resolve(tmp_path)
    for bad in (None, "", 3):
        with pytest.raises(TypeError, match=r"expected a registered model name .* got"):
            registry.resolve(bad)  # type: ignore[arg-type]
    # a name the file system cannot look up (ENAMETOOLONG; a raw OSError before session 78)
    with pytest.raises(ModelNotFoundError, match="cannot be looked up: File name too long"):
        registry.resolve(tmp_path / ("a" * 300 + ".safetensors"))


def test_names_are_exact_but_a_near_miss_is_named(site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add_dist(site, "acme-models", models={"TESTGPU-A-matmul": model_bytes("TESTGPU-A")})
    for wrong in ("testgpu-a-matmul", "TESTGPU-A-matmull"):
        with pytest.raises(ModelNotFoundError, match=rf"unknown model {wrong!r} \(did you mean 'TESTGPU-A-matmul'\?\)"):
            registry.resolve(wrong)
    with pytest.raises(ModelNotFoundError) as info:
        registry.resolve("NVIDIA-H999-matmul")
    assert "did you mean" not in str(info.value)
    monkeypatch.chdir(tmp_path)  # the file name of a registered model, not in the current directory
    with pytest.raises(
        ModelNotFoundError,
        match=r"'TESTGPU-A-matmul.safetensors' does not exist \(to use the registered model of that name, pass 'TESTGPU-A-matmul'",
    ):
        registry.resolve("TESTGPU-A-matmul.safetensors")


def test_broken_packages_are_skipped_and_reported(site: Path, caplog: pytest.LogCaptureFixture) -> None:
    add_dist(site, "good-models", models={"TESTGPU-A-matmul": model_bytes("TESTGPU-A")})
    add_dist(site, "attr-models", ep="attr_models:thing")
    add_dist(site, "ghost-models", ep="no_such_package_anywhere")
    add_dist(site, "bad-models", manifest_text='{"format": "torch-diode-models-manifest", "schema_version": 99}')
    with caplog.at_level(logging.WARNING, logger="torch_diode.registry"):
        assert "TESTGPU-A-matmul" in names()
    text = caplog.text
    assert "without ':thing'" in text and "'no_such_package_anywhere' is not importable" in text
    assert "schema version 99 is not supported" in text
    with pytest.raises(ModelNotFoundError, match="skipped entry point bad_models"):
        registry.get_model_entry("nope")


def test_a_broken_package_is_warned_about_once_and_named_not_denied(
    site: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A broken manifest: its warning comes once, not at every lookup of an unknown name (each
    rescans); where no model is listed at all, the skipped package is named (before session 78
    the message also said no models package was on sys.path)."""
    add_dist(site, "bad-models", manifest_text='{"format": "torch-diode-models-manifest", "schema_version": 99}')
    with caplog.at_level(logging.WARNING, logger="torch_diode.registry"):
        for _ in range(3):
            with pytest.raises(ModelNotFoundError, match="skipped entry point bad_models"):
                registry.get_model_entry("nope")
    assert caplog.text.count("skipped a models package") == 1, caplog.text
    lone = registry._Catalog({}, ["entry point bad_models = 'bad_models': schema version 99"])
    assert registry._none_available(lone) == "none (skipped entry point bad_models = 'bad_models': schema version 99)"
    assert "on sys.path" in registry._none_available(registry._Catalog({}, []))


def test_duplicate_names_first_entry_point_wins(site: Path, caplog: pytest.LogCaptureFixture) -> None:
    first = add_dist(site, "aaa-models", models={"TESTGPU-A-matmul": model_bytes("TESTGPU-A", seed=1)})
    add_dist(site, "zzz-models", models={"TESTGPU-A-matmul": model_bytes("TESTGPU-A", seed=2)})
    with caplog.at_level(logging.WARNING, logger="torch_diode.registry"):
        assert registry.get_model_entry("TESTGPU-A-matmul").package_dir == first
    assert "listed twice" in caplog.text


def test_best_model_for_a_gpu_ranks_by_held_out_regret(site: Path) -> None:
    a, b = model_bytes("TESTGPU-A", seed=3), model_bytes("TESTGPU-A", seed=4)
    add_dist(site, "acme-models", models={"TESTGPU-A-matmul": a, "TESTGPU-A-matmul2": b})
    ranked = [e.name for e in registry.models_for_hardware("TESTGPU-A")]
    expected = sorted(
        ["TESTGPU-A-matmul", "TESTGPU-A-matmul2"], key=lambda n: {"TESTGPU-A-matmul": a, "TESTGPU-A-matmul2": b}[n][-1]
    )
    assert ranked == expected
    assert registry.models_for_hardware("TESTGPU-Z") == []


# ---------------------------------------------------------------------------------------------
# Slim packages: the Hub fallback
# ---------------------------------------------------------------------------------------------


@pytest.mark.network
def test_slim_package_fetches_from_the_hub_then_works_offline(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = model_bytes("TESTGPU-S")
    add_dist(site, "slim-models", models={"TESTGPU-S-matmul": data}, ship_weights=False, hub=True)
    with FakeHub() as hub:
        hub.add(REPO_ID, COMMIT, "TESTGPU-S-matmul.safetensors", data)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        path = registry.resolve("TESTGPU-S-matmul", timeout_s=30)
    assert path.read_bytes() == data and "snapshots" in path.parts
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert registry.resolve("TESTGPU-S-matmul") == path  # the server is gone: the cache serves it


@pytest.mark.network
def test_slim_package_offline_and_not_cached(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add_dist(site, "slim-models", models={"TESTGPU-S-matmul": model_bytes("TESTGPU-S")}, ship_weights=False, hub=True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubOfflineError, match="HF_HUB_OFFLINE=1"):
        registry.resolve("TESTGPU-S-matmul")


def test_listed_model_without_weights_or_hub(site: Path) -> None:
    add_dist(site, "thin-models", models={"TESTGPU-T-matmul": model_bytes("TESTGPU-T")}, ship_weights=False)
    with pytest.raises(ModelNotFoundError, match="not installed and the manifest names no Hub repository"):
        registry.resolve("TESTGPU-T-matmul")


# ---------------------------------------------------------------------------------------------
# autoregister
# ---------------------------------------------------------------------------------------------


def diode_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("torch_diode") and r.levelno >= logging.INFO]


def test_autoregister_without_gpu_says_so_once(site: Path, monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    monkeypatch.setenv("TORCH_DIODE_HARDWARE", "none")
    with caplog.at_level(logging.INFO, logger="torch_diode"):
        assert registry.autoregister() is None
        assert registry.autoregister() is None  # once per process
    [record] = diode_records(caplog)
    assert record.levelno == logging.INFO and "registered no model" in record.getMessage()


def test_autoregister_unknown_gpu_warns_once(site: Path, monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    add_dist(site, "acme-models", models={"TESTGPU-A-matmul": model_bytes("TESTGPU-A")})
    monkeypatch.setenv("TORCH_DIODE_HARDWARE", "custom:NOMODEL-GPU")
    with caplog.at_level(logging.INFO, logger="torch_diode"):
        assert registry.autoregister() is None
    [record] = diode_records(caplog)
    message = record.getMessage()
    assert record.levelno == logging.WARNING
    assert "no installed model for NOMODEL-GPU" in message and "TESTGPU-A" in message


def test_autoregister_with_a_malformed_option_variable_warns(
    site: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    """A bad TORCH_DIODE_* handler variable must not make ``import torch_diode_models`` fail: one
    warning, nothing registered."""
    pytest.importorskip("torch._inductor.choices")
    add_dist(site, "acme-models", models={"TESTGPU-A-matmul": model_bytes("TESTGPU-A")})
    monkeypatch.setenv("TORCH_DIODE_HARDWARE", "custom:TESTGPU-A")
    monkeypatch.setenv("TORCH_DIODE_TOP_K", "abc")
    with caplog.at_level(logging.INFO, logger="torch_diode"):
        assert registry.autoregister() is None
    [record] = [r for r in diode_records(caplog) if r.levelno >= logging.WARNING]
    assert (
        "stock Inductor autotuning is used" in record.getMessage() and "TORCH_DIODE_TOP_K='abc'" in record.getMessage()
    )
    assert registry.current_registration() is None


def test_autoregister_bad_hardware_override_warns(site: Path, monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    monkeypatch.setenv("TORCH_DIODE_HARDWARE", "NVIDIA-H999")
    with caplog.at_level(logging.INFO, logger="torch_diode"):
        assert registry.autoregister() is None
    [record] = diode_records(caplog)
    assert record.levelno == logging.WARNING and "NVIDIA-H999" in record.getMessage()


@pytest.mark.network
def test_autoregister_falls_back_when_the_hub_is_silent(site: Path, monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    add_dist(site, "slim-models", models={"TESTGPU-S-matmul": model_bytes("TESTGPU-S")}, ship_weights=False, hub=True)
    monkeypatch.setenv("TORCH_DIODE_HARDWARE", "custom:TESTGPU-S")
    monkeypatch.setenv("TORCH_DIODE_HUB_TIMEOUT_S", "1")
    with SilentServer() as server, caplog.at_level(logging.INFO, logger="torch_diode"):
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        start = time.monotonic()
        assert registry.autoregister() is None
        elapsed = time.monotonic() - start
    assert elapsed < 4, elapsed
    [record] = [r for r in diode_records(caplog) if r.levelno >= logging.WARNING]
    assert "stock Inductor autotuning is used" in record.getMessage() and "within 1 s" in record.getMessage()
    assert registry.current_registration() is None


def test_autoregister_installs_the_handler_once(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch._inductor.choices")
    from torch_diode.inductor.install import installed_handler

    pkg = add_dist(site, "acme-models", models={"TESTGPU-A-matmul": model_bytes("TESTGPU-A")})
    monkeypatch.setenv("TORCH_DIODE_HARDWARE", "custom:TESTGPU-A")
    registration = registry.autoregister()
    assert registration is not None and registration.name == "TESTGPU-A-matmul"
    assert registration.path == pkg / "TESTGPU-A-matmul.safetensors" and registration.hardware == "TESTGPU-A"
    handler = installed_handler()
    assert handler is registration.handle.handler
    assert handler.options.model == str(registration.path)
    assert handler._model is not None, "the weights are loaded and checked at registration, not at the first GEMM"
    assert registry.autoregister() is registration and installed_handler() is handler  # idempotent

    stats = registry.prediction_stats()
    assert (stats.total_predictions, stats.fallbacks_to_autotune, stats.average_confidence) == (0, 0, None)

    assert registry.unregister_model() is True
    assert installed_handler() is None and registry.current_registration() is None
    assert registry.unregister_model() is False


def test_autoregister_uses_the_model_torch_diode_model_names(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    """TORCH_DIODE_MODEL (a path or a registered name) is the model auto-registration registers,
    not the GPU's best; one it cannot use is said, and nothing else is registered in its place."""
    pytest.importorskip("torch._inductor.choices")
    add_dist(site, "acme-models", models={"TESTGPU-A-matmul": model_bytes("TESTGPU-A")})
    mine = tmp_path / "mine.safetensors"
    mine.write_bytes(model_bytes("TESTGPU-A", seed=1))
    monkeypatch.setenv("TORCH_DIODE_HARDWARE", "custom:TESTGPU-A")
    monkeypatch.setenv("TORCH_DIODE_MODEL", str(mine))
    registration = registry.autoregister()
    assert registration is not None and registration.path == mine
    registry.unregister_model()

    monkeypatch.setattr(registry, "_autoregistered", False)
    monkeypatch.setenv("TORCH_DIODE_MODEL", str(tmp_path / "typo.safetensors"))
    with caplog.at_level(logging.INFO, logger="torch_diode"):
        assert registry.autoregister() is None
    [record] = [r for r in diode_records(caplog) if r.levelno >= logging.WARNING]
    assert "TORCH_DIODE_MODEL=" in record.getMessage() and "typo.safetensors" in record.getMessage()
    assert registry.current_registration() is None


def test_autoregister_with_torch_diode_disable_says_so_quietly(
    site: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    """The user turned torch-diode off: one INFO line, not a warning on every import."""
    add_dist(site, "acme-models", models={"TESTGPU-A-matmul": model_bytes("TESTGPU-A")})
    monkeypatch.setenv("TORCH_DIODE_HARDWARE", "custom:TESTGPU-A")
    monkeypatch.setenv("TORCH_DIODE_DISABLE", "1")
    with caplog.at_level(logging.INFO, logger="torch_diode"):
        assert registry.autoregister() is None
    [record] = diode_records(caplog)
    assert record.levelno == logging.INFO and "TORCH_DIODE_DISABLE" in record.getMessage()


def test_register_model_by_path_and_failures_install_nothing(site: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch._inductor.choices")
    from torch_diode.inductor.install import installed_handler

    own = tmp_path / "TESTGPU-A-mine.safetensors"
    own.write_bytes(model_bytes("TESTGPU-A"))
    registration = registry.register_model(own, top_k_configs=2)
    assert registration.name == "TESTGPU-A-mine" and registration.hardware == "TESTGPU-A"  # read from the file
    assert installed_handler().options.top_k_configs == 2
    assert installed_handler().options.model == str(own) and installed_handler()._model is not None  # loaded now
    registry.unregister_model()
    # a file given by path is checked at registration: a bad one installs nothing
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    truncated = tmp_path / "TESTGPU-A-cut.safetensors"
    truncated.write_bytes(model_bytes("TESTGPU-A")[:5000])
    for bad in (text, truncated):
        with pytest.raises(ModelFormatError, match=str(bad)):
            registry.register_model(bad)
        assert installed_handler() is None and registry.current_registration() is None
    with pytest.raises(ModelNotFoundError, match="unknown model"):
        registry.register_model("NVIDIA-H999-matmul")
    assert installed_handler() is None and registry.current_registration() is None


def test_a_new_registration_replaces_the_previous_one(site: Path) -> None:
    """register_model replaces the model registered before: its handler is uninstalled (before
    session 78 they stacked, each keeping its model in memory, and removing the newer one brought
    back an older handler while the registry still named the newer model)."""
    pytest.importorskip("torch._inductor.choices")
    from torch_diode.inductor.install import installed_handler, is_installed

    add_dist(site, "acme-models", models={f"TESTGPU-{g}-matmul": model_bytes(f"TESTGPU-{g}") for g in "AB"})
    first = registry.register_model("TESTGPU-A-matmul")
    second = registry.register_model("TESTGPU-B-matmul")
    assert installed_handler() is second.handle.handler and not is_installed(first.handle.handler)
    assert registry.current_registration() is second
    again = registry.register_model("TESTGPU-B-matmul")  # the same model and options: the same install
    assert again.handle is second.handle and installed_handler() is second.handle.handler
    assert registry.unregister_model() is True
    assert installed_handler() is None and registry.current_registration() is None


def test_a_registration_uninstalled_by_other_means_is_gone(site: Path) -> None:
    """uninstall_diode_choices() (or the handle's uninstall) takes the registration with it: the
    registry no longer names a model that is not in use, nor reads its handler's stats."""
    pytest.importorskip("torch._inductor.choices")
    from torch_diode.inductor.install import uninstall_diode_choices

    add_dist(site, "acme-models", models={"TESTGPU-A-matmul": model_bytes("TESTGPU-A")})
    registry.register_model("TESTGPU-A-matmul")
    assert uninstall_diode_choices() is True
    assert registry.current_registration() is None and registry.prediction_stats().total_predictions == 0
    assert registry.unregister_model() is False  # nothing registered any more: nothing to say
    registration = registry.register_model("TESTGPU-A-matmul")
    registration.handle.uninstall()
    assert registry.current_registration() is None


def test_a_registration_takes_over_an_equal_handler_installed_by_hand(site: Path) -> None:
    """register_model of the model (and options) a hand install already put in place uses that
    install and owns it: the next registration replaces it rather than stacking over it. Before,
    the registration's handle owned nothing, so register_model(B) left A's handler beneath B's
    (two installed, A's model kept in memory), and removing B's brought A's back while the
    registry named no model. The hand install's handle then removes nothing, and says so."""
    pytest.importorskip("torch._inductor.choices")
    from torch_diode.inductor.install import install_diode_choices, installed_handler, is_installed

    add_dist(site, "acme-models", models={f"TESTGPU-{g}-matmul": model_bytes(f"TESTGPU-{g}") for g in "AB"})
    mine = install_diode_choices(model=str(registry.resolve("TESTGPU-A-matmul")))
    first = registry.register_model("TESTGPU-A-matmul")
    assert first.handle.handler is mine.handler and installed_handler() is mine.handler  # used, not doubled
    second = registry.register_model("TESTGPU-B-matmul")
    assert installed_handler() is second.handle.handler and not is_installed(mine.handler)  # one handler: B's
    assert registry.current_registration() is second
    with pytest.warns(RuntimeWarning, match=r"taken over by register_model\('TESTGPU-A-matmul'\)"):
        assert mine.uninstall() is False
    assert installed_handler() is second.handle.handler  # the registered model stays
    assert second.handle.uninstall() is True
    assert installed_handler() is None and registry.current_registration() is None  # not A's back

    # the hand install's handle still removes it while it is registered: the registration goes with it
    with install_diode_choices(model=str(registry.resolve("TESTGPU-A-matmul"))):
        registry.register_model("TESTGPU-A-matmul")
    assert installed_handler() is None and registry.current_registration() is None
    # unregistered meanwhile: the with exit removes nothing (nothing is left to remove) and says so
    with pytest.warns(RuntimeWarning, match="nothing was uninstalled now"):
        with install_diode_choices(model=str(registry.resolve("TESTGPU-A-matmul"))):
            registry.register_model("TESTGPU-A-matmul")
            assert registry.unregister_model() is True and installed_handler() is None
    assert installed_handler() is None


def test_a_manifest_naming_another_gpu_than_its_file_is_refused(site: Path) -> None:
    """A manifest entry whose file is another GPU's model (a hand-edited or stale manifest):
    refused at registration, nothing installed; not registered for the wrong GPU."""
    pytest.importorskip("torch._inductor.choices")
    from torch_diode.inductor.install import installed_handler

    add_dist(site, "swapped-models", models={"TESTGPU-A-matmul": model_bytes("TESTGPU-B")})
    with pytest.raises(ModelFormatError, match=r"lists it for TESTGPU-A, but its file .* is a model for TESTGPU-B"):
        registry.register_model("TESTGPU-A-matmul")
    assert installed_handler() is None and registry.current_registration() is None


@pytest.mark.network
def test_register_model_with_torch_diode_disable_downloads_nothing(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kill switch is checked before the weights are fetched (before session 78 a slim
    package's registration downloaded them, then declined to install)."""
    from torch_diode.errors import HandlerNotInstalledError

    data = model_bytes("TESTGPU-S")
    add_dist(site, "slim-models", models={"TESTGPU-S-matmul": data}, ship_weights=False, hub=True)
    monkeypatch.setenv("TORCH_DIODE_DISABLE", "1")
    with FakeHub() as hub:
        hub.add(REPO_ID, COMMIT, "TESTGPU-S-matmul.safetensors", data)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        with pytest.raises(HandlerNotInstalledError, match="TORCH_DIODE_DISABLE is set"):
            registry.register_model("TESTGPU-S-matmul", timeout_s=30)
        assert hub.requests == []


def test_prediction_stats_from_handler_counters() -> None:
    raw = {"model_selections": 4, "fallbacks_total": 1, "hook_time_s": 0.002, "confidence_sum": 3.2}
    stats = registry._stats_from_handler(raw)
    assert stats.total_predictions == 4 and stats.fallbacks_to_autotune == 1
    assert stats.time_spent_us == pytest.approx(2000.0) and stats.average_confidence == pytest.approx(0.8)
    delta = stats - registry._stats_from_handler({"model_selections": 1, "confidence_sum": 0.5})
    assert delta.total_predictions == 3 and delta.average_confidence == pytest.approx(0.9)
    assert "3 predictions, average confidence 0.90" in delta.summary()
    assert "4 predictions, average confidence 0.80, 1 fallback to autotune, 2.0 ms" in stats.summary()
    no_conf = registry._stats_from_handler({"model_selections": 2})
    assert no_conf.average_confidence is None and "average confidence n/a" in no_conf.summary()


# ---------------------------------------------------------------------------------------------
# torch_diode_models in fresh interpreters: import order, idempotence, the user API
# ---------------------------------------------------------------------------------------------

_CHILD = """
import logging, sys
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
for name in sys.argv[1:]:
    __import__(name)
import torch_diode_models as tdm
from torch_diode.inductor.install import installed_handler
from torch_diode import registry
r = registry.current_registration()
print("REGISTERED", r.name if r else None, installed_handler() is (r.handle.handler if r else None))
print("HARDWARE", tdm.get_detected_hardware().key)
print("AVAILABLE", sorted(e.name for e in tdm.list_available_models()))
with tdm.profile_predictions() as prof:
    pass
print("PROFILE", prof.stats.total_predictions, tdm.get_prediction_stats().total_predictions)
tdm.set_log_level("DEBUG")
print("LEVEL", logging.getLogger("torch_diode").level)
print("UNREGISTERED", tdm.unregister_model(), installed_handler())
"""


def test_import_order_does_not_matter(site: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch._inductor.choices")
    add_dist(site, "acme-models", models={"TESTGPU-A-matmul": model_bytes("TESTGPU-A")})
    # The two wheels of torch-diode as pip would install them: their package directories come
    # from the source tree (PYTHONPATH), their entry points from these dist-info directories.
    add_dist(site, "torch-diode-models", package="torch_diode_models")
    add_dist(site, "torch-diode", group="torch_diode.plugins", ep="torch_diode_autoregister:register")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), *map(str, SRC_DIRS)]),
        "TORCH_DIODE_HARDWARE": "custom:TESTGPU-A",
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
    }
    env.pop("TORCH_DIODE_DISABLE_PLUGIN_AUTOLOAD", None)
    orders = [["torch_diode", "torch_diode_models"], ["torch_diode_models", "torch_diode"]]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, *order], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for order in orders
    ]
    for order, proc in zip(orders, procs):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"{order}:\n{out}\n{err}"
        assert "REGISTERED TESTGPU-A-matmul True" in out, (order, out, err)
        assert err.count("torch-diode registered model TESTGPU-A-matmul") == 1, (order, err)
        assert "HARDWARE TESTGPU-A" in out and "'TESTGPU-A-matmul'" in out
        assert "PROFILE 0 0" in out and "LEVEL 10" in out and "UNREGISTERED True None" in out


def test_a_bad_hardware_override_is_reported_not_raised(tmp_path: Path) -> None:
    """``import torch_diode_models`` and ``get_detected_hardware()`` with an unknown
    ``TORCH_DIODE_HARDWARE``: the import registers nothing (one warning) and the call says why in
    ``reason``, as documented, instead of raising."""
    child = "import torch_diode_models as tdm; h = tdm.get_detected_hardware(); print('KEY', h.key); print('REASON', h.reason)"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(map(str, SRC_DIRS)),
        "TORCH_DIODE_HARDWARE": "bogus",
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
    }
    env.pop("TORCH_DIODE_DISABLE_PLUGIN_AUTOLOAD", None)
    proc = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (
        "KEY None" in proc.stdout and "REASON TORCH_DIODE_HARDWARE='bogus' is not a known hardware key" in proc.stdout
    )
    assert "torch-diode registered no model" in proc.stderr
