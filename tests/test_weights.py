"""torch_diode.weights (manifests, verification) and scripts/update_models_manifest.py on real model files."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from test_hub import tiny_model_bytes

from torch_diode.errors import ModelFormatError
from torch_diode.weights import (
    MANIFEST_FORMAT,
    ChecksumMismatchError,
    ManifestError,
    ModelEntry,
    entry_for_model_file,
    read_manifest,
    verify_file,
    write_manifest,
)

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "packages" / "torch-diode-models" / "src" / "torch_diode_models"
COMMIT = "a" * 40


def good_entry(**change: Any) -> dict[str, Any]:
    entry = {
        "name": "NVIDIA-H100-matmul",
        "hardware": "NVIDIA-H100",
        "file": "NVIDIA-H100-matmul.safetensors",
        "size_bytes": 10,
        "sha256": "0" * 64,
        "metrics": {"overall.regret@1.geomean": 1.02},
        "hub_repo": "torch-diode/models",
        "hub_revision": COMMIT,
    }
    entry.update(change)
    return entry


def write_raw(path: Path, models: list[Any], **top: Any) -> Path:
    path.write_text(json.dumps({"format": MANIFEST_FORMAT, "schema_version": 1, "models": models, **top}))
    return path


def test_manifest_round_trip(tmp_path: Path) -> None:
    entries = [
        ModelEntry.from_dict(good_entry()),
        ModelEntry.from_dict(
            good_entry(
                name="AMD-MI300X-matmul",
                hardware="AMD-MI300X",
                file="AMD-MI300X-matmul.safetensors",
                hub_repo=None,
                hub_revision=None,
            )
        ),
    ]
    write_manifest(tmp_path / "manifest.json", entries)
    back = read_manifest(tmp_path / "manifest.json", source="t")
    assert [e.name for e in back] == ["AMD-MI300X-matmul", "NVIDIA-H100-matmul"]  # sorted by name
    assert back[1] == entries[0] and back[1].metrics == entries[0].metrics
    assert back[0].package_dir == tmp_path and not back[0].on_hub and back[1].on_hub
    assert not list(tmp_path.glob(".*tmp")), "the temp file is moved into place"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sha256": "ABC"}, "'sha256' = 'ABC' is not 64 lowercase hex digits"),
        ({"hub_revision": "main"}, "pin a commit, not a branch or tag"),
        ({"hub_repo": None}, "both set or both null"),
        ({"hub_repo": "no-slash"}, "is not a Hub repository id"),
        ({"name": "NVIDIA-H200-matmul"}, "does not start with 'NVIDIA-H100'-"),
        ({"file": "../x.safetensors"}, "bare '\\*.safetensors' file name"),
        ({"file": "model.pt"}, "bare '\\*.safetensors' file name"),
        ({"size_bytes": 0}, "not a positive integer"),
        ({"size_bytes": True}, "not a positive integer"),
        ({"metrics": {"regret": "good"}}, "must map metric names to finite numbers"),
        ({"metrics": {"regret": float("nan")}}, "must map metric names to finite numbers"),
        ({"extra": 1}, r"0 missing fields, 1 unknown field \['extra'\]"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 20 else None,
)
def test_bad_entries_are_named(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    path = write_raw(tmp_path / "manifest.json", [good_entry(**change)])
    with pytest.raises(ManifestError, match=message) as info:
        read_manifest(path)
    assert str(path) in str(info.value)


def test_bad_manifests(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    entry = {k: v for k, v in good_entry().items() if k != "metrics"}
    with pytest.raises(ManifestError, match=r"1 missing field \['metrics'\], 0 unknown fields;"):
        read_manifest(write_raw(path, [entry]))
    with pytest.raises(ManifestError, match="1 model name listed twice: NVIDIA-H100-matmul"):
        read_manifest(write_raw(path, [good_entry(), good_entry()]))
    with pytest.raises(ManifestError, match="schema version 2 is not supported"):
        read_manifest(write_raw(path, [], schema_version=2))
    path.write_text("{not json")
    with pytest.raises(ManifestError, match="cannot read the models manifest"):
        read_manifest(path)
    path.write_text('{"models": []}')
    with pytest.raises(ManifestError, match="not a torch-diode models manifest"):
        read_manifest(path)


def test_verify_file(tmp_path: Path) -> None:
    data = b"0123456789"
    path = tmp_path / "NVIDIA-H100-matmul.safetensors"
    path.write_bytes(data)
    entry = ModelEntry.from_dict(good_entry(sha256=hashlib.sha256(data).hexdigest()))
    assert verify_file(path, entry) == path
    path.write_bytes(b"0123456788")
    with pytest.raises(ChecksumMismatchError, match=r"the sha256 .* refused and not used"):
        verify_file(path, entry)
    path.write_bytes(b"012345678")
    with pytest.raises(
        ChecksumMismatchError, match="the size of model 'NVIDIA-H100-matmul' is 9, but its manifest says 10"
    ):
        verify_file(path, entry)


def test_shipped_manifest_is_valid() -> None:
    """The manifest in the models package reads, and lists only files that match it (or none);
    every entry records the metric the registry ranks a GPU's models by."""
    from torch_diode.registry import RANKING_METRIC

    entries = read_manifest(SHIPPED / "manifest.json")
    assert entries and all(RANKING_METRIC in e.metrics for e in entries)
    for entry in entries:
        if entry.packaged_path is not None and entry.packaged_path.is_file():
            verify_file(entry.packaged_path, entry)
        else:
            assert entry.on_hub, f"{entry.name}: neither shipped nor on the Hub"


# ---------------------------------------------------------------------------------------------
# scripts/update_models_manifest.py
# ---------------------------------------------------------------------------------------------


def load_script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "update_models_manifest", REPO / "scripts" / "update_models_manifest.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_entry_for_model_file_reads_the_model(tmp_path: Path) -> None:
    path = tmp_path / "NVIDIA-H100-matmul.safetensors"
    path.write_bytes(tiny_model_bytes("NVIDIA-H100", regret=1.07))
    entry = entry_for_model_file(path, hub_repo="torch-diode/models", hub_revision=COMMIT)
    assert entry.hardware == "NVIDIA-H100" and entry.size_bytes == path.stat().st_size
    assert entry.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert entry.metrics["overall.regret@1.geomean"] == pytest.approx(1.07)
    wrong = tmp_path / "NVIDIA-H200-matmul.safetensors"
    wrong.write_bytes(path.read_bytes())
    with pytest.raises(ManifestError, match="does not start with 'NVIDIA-H100'-"):
        entry_for_model_file(wrong)
    junk = tmp_path / "NVIDIA-H100-junk.safetensors"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(ModelFormatError):
        entry_for_model_file(junk)


def test_update_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = load_script()
    pkg = tmp_path / "my_models"
    pkg.mkdir()
    assert script.main(["--package-dir", str(pkg), "--no-hub"]) == 0
    assert read_manifest(pkg / "manifest.json") == []  # no weights: no models, no fake entries

    (pkg / "NVIDIA-H100-matmul.safetensors").write_bytes(tiny_model_bytes("NVIDIA-H100", seed=1))
    (pkg / "NVIDIA-H200-matmul.safetensors").write_bytes(tiny_model_bytes("NVIDIA-H200", seed=2))
    assert script.main(["--package-dir", str(pkg), "--check"]) == 1
    assert script.main(["--package-dir", str(pkg), "--hub-repo", "torch-diode/models", "--hub-revision", COMMIT]) == 0
    entries = read_manifest(pkg / "manifest.json")
    assert [(e.name, e.hardware, e.hub_revision) for e in entries] == [
        ("NVIDIA-H100-matmul", "NVIDIA-H100", COMMIT),
        ("NVIDIA-H200-matmul", "NVIDIA-H200", COMMIT),
    ]
    for entry in entries:
        verify_file(entry.packaged_path, entry)
    assert script.main(["--package-dir", str(pkg), "--check"]) == 0
    assert script.main(["--package-dir", str(pkg)]) == 0  # Hub fields are kept when not given again
    assert read_manifest(pkg / "manifest.json")[0].hub_repo == "torch-diode/models"

    (pkg / "NVIDIA-H100-matmul.safetensors").write_bytes(tiny_model_bytes("NVIDIA-H100", seed=3))
    assert script.main(["--package-dir", str(pkg), "--check"]) == 1
    (pkg / "NVIDIA-H100-matmul.safetensors").write_bytes(b"not a model")
    capsys.readouterr()
    assert script.main(["--package-dir", str(pkg)]) == 1
    assert "error:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        script.main(["--package-dir", str(pkg), "--hub-repo", "x/y"])
