"""The three wheels and sdists, built from the working tree the way ``nox -s build`` builds them:
one version from torch-diode-lib's ``_version.py``, lockstep pins, entry points, and contents
(the lib carries no weights, the models wheel its manifest and weights, the meta-wheel only its
plugin). Each wheel is built from its sdist (``python -m build``), so the sdists are checked too.
"""

from __future__ import annotations

import configparser
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

pytest.importorskip("build", reason="needs the `build` package (installed by `nox -s tests`)")
pytest.importorskip("hatchling", reason="needs hatchling (installed by `nox -s tests`)")

REPO = Path(__file__).resolve().parents[1]
PACKAGES = REPO / "packages"
LIB, MODELS, META = "torch-diode-lib", "torch-diode-models", "torch-diode"
MODELS_SRC = PACKAGES / MODELS / "src" / "torch_diode_models"


def _version() -> str:
    text = (PACKAGES / LIB / "src" / "torch_diode" / "_version.py").read_text()
    match = re.search(r"""^__version__\s*=\s*["']([^"']+)["']""", text, re.MULTILINE)
    assert match, "_version.py must define __version__"
    return match.group(1)


VERSION = _version()


def _build(package: str, outdir: Path, *, slim: bool = False) -> tuple[Path, Path]:
    env = dict(os.environ)
    env.pop("TORCH_DIODE_SLIM", None)
    if slim:
        env["TORCH_DIODE_SLIM"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(outdir), str(PACKAGES / package)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, f"building {package} failed:\n{proc.stdout}\n{proc.stderr}"
    (wheel,) = outdir.glob("*.whl")
    (sdist,) = outdir.glob("*.tar.gz")
    return wheel, sdist


@pytest.fixture(scope="module")
def sources() -> dict[str, set[str]]:
    """The source files of each import package, listed before the builds start."""
    return {
        LIB: _source_files(PACKAGES / LIB / "src" / "torch_diode")
        | _source_files(PACKAGES / LIB / "src" / "_torch_diode_cli"),
        MODELS: _source_files(MODELS_SRC),
        META: _source_files(PACKAGES / META / "src" / "torch_diode_autoregister"),
    }


@pytest.fixture(scope="module")
def dists(sources: dict[str, set[str]], tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    root = tmp_path_factory.mktemp("dist")
    built = {name: _build(name, root / name) for name in (LIB, MODELS, META)}
    built["slim"] = _build(MODELS, root / "slim", slim=True)
    return built


def _wheel_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def _metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return Parser().parsestr(zf.read(name).decode())


def _entry_points(wheel: Path) -> dict[str, dict[str, str]]:
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
        if not names:
            return {}
        parser = configparser.ConfigParser(delimiters=("=",))
        parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep names' case
        parser.read_string(zf.read(names[0]).decode())
    return {section: dict(parser[section]) for section in parser.sections()}


def _source_files(package_dir: Path) -> set[str]:
    return {
        str(p.relative_to(package_dir.parent))
        for p in package_dir.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    }


@pytest.mark.parametrize("name", [LIB, MODELS, META, "slim"])
def test_every_artifact_has_the_lockstep_version(dists: dict[str, tuple[Path, Path]], name: str) -> None:
    wheel, sdist = dists[name]
    dist_name = META if name == META else (MODELS if name == "slim" else name)
    stem = dist_name.replace("-", "_")
    assert wheel.name == f"{stem}-{VERSION}-py3-none-any.whl"
    assert sdist.name == f"{stem}-{VERSION}.tar.gz"
    metadata = _metadata(wheel)
    assert metadata["Name"] == dist_name
    assert metadata["Version"] == VERSION
    assert metadata["Requires-Python"] == ">=3.10"
    # BSD-3-Clause asks binary redistributions to carry the notice: each artifact holds the license
    license_text = (REPO / "LICENSE").read_text()
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert zf.read(name).decode() == license_text
    with tarfile.open(sdist) as tf:
        member = tf.extractfile(f"{stem}-{VERSION}/LICENSE")
        assert member is not None and member.read().decode() == license_text


def test_models_and_meta_pin_their_siblings_to_the_same_version(dists: dict[str, tuple[Path, Path]]) -> None:
    assert _metadata(dists[MODELS][0]).get_all("Requires-Dist") == [f"torch-diode-lib=={VERSION}"]
    assert _metadata(dists["slim"][0]).get_all("Requires-Dist") == [f"torch-diode-lib=={VERSION}"]
    assert sorted(_metadata(dists[META][0]).get_all("Requires-Dist")) == [
        f"torch-diode-lib=={VERSION}",
        f"torch-diode-models=={VERSION}",
    ]


def test_lib_dependencies_extras_and_console_script(dists: dict[str, tuple[Path, Path]]) -> None:
    metadata = _metadata(dists[LIB][0])
    requires = metadata.get_all("Requires-Dist")
    names = {
        re.split(r"[\s;<>=!~\[]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requires if "extra ==" not in r
    }
    assert names == {"torch", "msgpack", "safetensors", "huggingface-hub", "packaging", "numpy"}
    assert "torch>=2.10" in requires
    assert "triton; (platform_system == 'Linux') and extra == 'test'" in requires
    assert set(metadata.get_all("Provides-Extra")) == {"plot", "progress", "test"}
    assert "matplotlib>=3.7; extra == 'plot'" in requires
    assert "tqdm>=4.60; extra == 'progress'" in requires
    # not torch_diode.cli:main: through _torch_diode_cli the command line skips the meta-wheel's plugin
    assert _entry_points(dists[LIB][0]) == {"console_scripts": {"diode": "_torch_diode_cli:main"}}


def test_entry_points_announce_models_and_the_autoregister_plugin(dists: dict[str, tuple[Path, Path]]) -> None:
    models_eps = _entry_points(dists[MODELS][0])
    assert list(models_eps) == ["torch_diode.models"]
    # torch_diode.registry's contract: the value names the package, with no ":attribute".
    assert models_eps["torch_diode.models"] == {"torch_diode_models": "torch_diode_models"}
    assert _entry_points(dists["slim"][0]) == models_eps
    assert _entry_points(dists[META][0]) == {
        "torch_diode.plugins": {"autoregister": "torch_diode_autoregister:register"}
    }


def test_lib_wheel_holds_the_torch_diode_package_and_no_weights(
    dists: dict[str, tuple[Path, Path]], sources: dict[str, set[str]]
) -> None:
    names = _wheel_names(dists[LIB][0])
    packages = {n.split("/")[0] for n in names if not n.startswith(f"torch_diode_lib-{VERSION}.dist-info/")}
    assert packages == {"torch_diode", "_torch_diode_cli"}
    assert "torch_diode/py.typed" in names
    assert not [n for n in names if n.endswith((".safetensors", ".pt", ".pth", ".bin", ".pkl"))]
    source = {n for n in sources[LIB] if not n.endswith(".safetensors")}
    assert source <= names, f"missing from the lib wheel: {sorted(source - names)}"


def test_models_wheel_carries_manifest_weights_and_code(
    dists: dict[str, tuple[Path, Path]], sources: dict[str, set[str]]
) -> None:
    full, slim = _wheel_names(dists[MODELS][0]), _wheel_names(dists["slim"][0])
    source = sources[MODELS]
    weights = {n for n in source if n.endswith(".safetensors")}
    assert "torch_diode_models/manifest.json" in source, "the models package must hold manifest.json (H7)"
    assert "torch_diode_models/py.typed" in source
    assert source <= full, f"missing from the models wheel: {sorted(source - full)}"
    assert source - weights <= slim, f"missing from the slim models wheel: {sorted(source - weights - slim)}"
    assert not [n for n in slim if n.endswith(".safetensors")], "the slim wheel must carry no weights"
    for wheel_names in (full, slim):
        assert {n.split("/")[0] for n in wheel_names} == {
            "torch_diode_models",
            f"torch_diode_models-{VERSION}.dist-info",
        }


def test_meta_wheel_holds_only_its_plugin(dists: dict[str, tuple[Path, Path]]) -> None:
    dist_info = f"torch_diode-{VERSION}.dist-info"
    assert _wheel_names(dists[META][0]) == {
        "torch_diode_autoregister/__init__.py",
        "torch_diode_autoregister/py.typed",
        f"{dist_info}/METADATA",
        f"{dist_info}/WHEEL",
        f"{dist_info}/entry_points.txt",
        f"{dist_info}/licenses/LICENSE",
        f"{dist_info}/RECORD",
    }


@pytest.mark.parametrize("name", [LIB, MODELS, META])
def test_sdists_can_rebuild_their_wheel(dists: dict[str, tuple[Path, Path]], name: str) -> None:
    # `python -m build` built each wheel from its sdist; this checks the sdist holds what that needs.
    _, sdist = dists[name]
    prefix = f"{name.replace('-', '_')}-{VERSION}/"
    with tarfile.open(sdist) as tf:
        members = {m.name.removeprefix(prefix) for m in tf.getmembers() if m.isfile()}
    assert {"PKG-INFO", "pyproject.toml", "README.md"} <= members
    if name != LIB:
        assert "hatch_build.py" in members, "the sdist needs hatch_build.py to know its version"
    assert not [m for m in members if m.endswith(".safetensors")] or name == MODELS
