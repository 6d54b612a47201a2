"""Model manifests and weight-file verification: what a models package promises about its files.

A models package (``torch-diode-models``, or a user's own models wheel) holds a ``manifest.json``
next to its ``.safetensors`` files. The manifest lists, for each model, everything needed to find
it, fetch it from the Hugging Face Hub when the wheel does not carry it, and check that the bytes
are the ones that were published::

    {
      "format": "torch-diode-models-manifest",
      "schema_version": 1,
      "models": [
        {
          "name": "NVIDIA-H100-matmul",            # "<hardware key>-<purpose>"
          "hardware": "NVIDIA-H100",               # torch_diode.hardware key
          "file": "NVIDIA-H100-matmul.safetensors",
          "size_bytes": 123456,
          "sha256": "<64 lowercase hex digits>",
          "metrics": {"overall.regret@1.geomean": 1.03, ...},   # held-out metrics, flattened; numbers only
          "hub_repo": "owner/name",                # or null: no Hub fallback for this model
          "hub_revision": "<40 hex digits>"        # a commit, never a branch or tag (pinned)
        }
      ]
    }

Every field is validated on reading; a bad manifest raises :class:`ManifestError` naming the file,
the model and the field. :func:`verify_file` is the one check every weights file passes before it
is used, wherever it came from (wheel, Hugging Face cache or a fresh download).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch_diode._text import plural
from torch_diode.errors import DiodeError

MANIFEST_FILENAME = "manifest.json"
MANIFEST_FORMAT = "torch-diode-models-manifest"
MANIFEST_SCHEMA_VERSION = 1

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_FIELDS = ("name", "hardware", "file", "size_bytes", "sha256", "metrics", "hub_repo", "hub_revision")
_REGENERATE = "regenerate it with `python scripts/update_models_manifest.py`"


def _fields(names: list[str], what: str) -> str:
    """``2 missing fields ['a', 'b']``, ``0 unknown fields``: a count of fields and their names."""
    return plural(len(names), f"{what} field") + (f" {names}" if names else "")


class ManifestError(DiodeError, ValueError):
    """A ``manifest.json`` is malformed; the message names the file, the model and the field."""


class ChecksumMismatchError(DiodeError):
    """A weights file's size or sha256 differs from its manifest entry; the file was not used."""

    def __init__(self, path: Path, model: str, *, what: str, expected: object, found: object, hint: str) -> None:
        self.path = path
        self.model = model
        self.expected = expected
        self.found = found
        super().__init__(
            f"{path}: {what} of model {model!r} is {found}, but its manifest says {expected}; the file was "
            f"refused and not used. {hint}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelEntry:
    """One model of a manifest (see the module docstring for the fields).

    ``package_dir`` is where the manifest was read from (the models package directory, where the
    wheel puts the weights), and ``source`` names the entry point or file that announced it; both
    are filled in by the reader and are not part of the manifest.
    """

    name: str
    hardware: str
    file: str
    size_bytes: int
    sha256: str
    metrics: Mapping[str, float] = field(default_factory=dict, compare=False)
    hub_repo: str | None = None
    hub_revision: str | None = None
    package_dir: Path | None = field(default=None, compare=False)
    source: str = field(default="", compare=False)

    @property
    def packaged_path(self) -> Path | None:
        """Where the models wheel puts this file (it may be absent in a slim wheel)."""
        return None if self.package_dir is None else self.package_dir / self.file

    @property
    def on_hub(self) -> bool:
        """Whether the manifest says where on the Hugging Face Hub the file can be fetched."""
        return self.hub_repo is not None and self.hub_revision is not None

    def to_dict(self) -> dict[str, Any]:
        """The manifest form of this entry (``package_dir`` and ``source`` left out)."""
        return {
            "name": self.name,
            "hardware": self.hardware,
            "file": self.file,
            "size_bytes": self.size_bytes,
            "sha256": self.sha256,
            "metrics": dict(sorted(self.metrics.items())),
            "hub_repo": self.hub_repo,
            "hub_revision": self.hub_revision,
        }

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, where: str = "manifest", package_dir: Path | None = None, source: str = ""
    ) -> ModelEntry:
        """Validate one manifest entry.

        Raises:
            ManifestError: a field is missing, unknown or has a bad value (named in the message).
        """
        if not isinstance(data, Mapping):
            raise ManifestError(f"{where}: a model entry must be a JSON object, got {type(data).__name__}")
        label = f"{where}: model {data.get('name')!r}"
        missing = [f for f in _FIELDS if f not in data]
        unknown = sorted(set(data) - set(_FIELDS))
        if missing or unknown:
            raise ManifestError(
                f"{label}: {_fields(missing, 'missing')}, {_fields(unknown, 'unknown')}; "
                f"an entry has exactly {', '.join(_FIELDS)}; {_REGENERATE}"
            )

        def text(key: str, pattern: re.Pattern[str], what: str) -> str:
            value = data[key]
            if not isinstance(value, str) or not pattern.match(value):
                raise ManifestError(f"{label}: field {key!r} = {value!r} is not {what}; {_REGENERATE}")
            return value

        name = text("name", _NAME_RE, "a model name (letters, digits, '.', '_', '-')")
        hardware = text("hardware", _NAME_RE, "a hardware key such as 'NVIDIA-H100'")
        if not name.startswith(hardware + "-"):
            raise ManifestError(
                f"{label}: a model name is '<hardware>-<purpose>', but it does not start with {hardware!r}-"
            )
        file = data["file"]
        if not isinstance(file, str) or Path(file).name != file or not file.endswith(".safetensors"):
            raise ManifestError(
                f"{label}: field 'file' = {file!r} must be a bare '*.safetensors' file name (no directory)"
            )
        size = data["size_bytes"]
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise ManifestError(f"{label}: field 'size_bytes' = {size!r} is not a positive integer")
        sha = text("sha256", _SHA256_RE, "64 lowercase hex digits")
        metrics = data["metrics"]
        if not isinstance(metrics, Mapping) or not all(
            isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for k, v in metrics.items()
        ):
            raise ManifestError(f"{label}: field 'metrics' = {metrics!r} must map metric names to finite numbers")
        repo, revision = data["hub_repo"], data["hub_revision"]
        if (repo is None) != (revision is None):
            raise ManifestError(
                f"{label}: 'hub_repo' and 'hub_revision' are both set or both null, got {repo!r}, {revision!r}"
            )
        if repo is not None:
            text("hub_repo", _REPO_RE, "a Hub repository id 'owner/name'")
            text("hub_revision", _COMMIT_RE, "a full 40-hex commit hash (pin a commit, not a branch or tag)")
        return cls(
            name=name,
            hardware=hardware,
            file=file,
            size_bytes=size,
            sha256=sha,
            metrics={str(k): float(v) for k, v in metrics.items()},
            hub_repo=repo,
            hub_revision=revision,
            package_dir=package_dir,
            source=source,
        )


def read_manifest(path: str | os.PathLike[str], *, source: str = "") -> list[ModelEntry]:
    """Read and validate a ``manifest.json``; entries get ``package_dir`` = the manifest's directory.

    Raises:
        ManifestError: unreadable JSON, wrong format or schema version, a bad entry, or two entries
            with the same name.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read the models manifest ({exc}); reinstall the models package") from exc
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise ManifestError(f'{path}: not a torch-diode models manifest (expected "format": "{MANIFEST_FORMAT}")')
    version = data.get("schema_version")
    if version != MANIFEST_SCHEMA_VERSION:
        raise ManifestError(
            f"{path}: manifest schema version {version!r} is not supported (this torch-diode-lib reads version "
            f"{MANIFEST_SCHEMA_VERSION}); install matching versions of torch-diode-lib and the models package"
        )
    models = data.get("models")
    if not isinstance(models, list):
        raise ManifestError(f'{path}: "models" must be a list')
    entries = [ModelEntry.from_dict(m, where=str(path), package_dir=path.parent, source=source) for m in models]
    names = [e.name for e in entries]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ManifestError(f"{path}: {plural(len(duplicates), 'model name')} listed twice: {', '.join(duplicates)}")
    return entries


def write_manifest(path: str | os.PathLike[str], entries: Sequence[ModelEntry]) -> None:
    """Write a manifest atomically (a per-process temp file, then ``os.replace``), sorted by name."""
    path = Path(path)
    data = {
        "format": MANIFEST_FORMAT,
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "models": [e.to_dict() for e in sorted(entries, key=lambda e: e.name)],
    }
    from torch_diode._files import atomic_write

    atomic_write(path, json.dumps(data, indent=2) + "\n")


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_file(path: Path, entry: ModelEntry, *, hint: str = "") -> Path:
    """Check a weights file against its manifest entry (size first, then sha256).

    Returns:
        ``path``, so that callers can write ``return verify_file(p, entry)``.

    Raises:
        ChecksumMismatchError: the size or the sha256 differs; the message gives both values and
            ``hint`` (how to get a good copy).
    """
    hint = hint or "Reinstall the models package (pip install --force-reinstall) to get an intact copy."
    size = path.stat().st_size
    if size != entry.size_bytes:
        raise ChecksumMismatchError(path, entry.name, what="the size", expected=entry.size_bytes, found=size, hint=hint)
    digest = file_sha256(path)
    if digest != entry.sha256:
        raise ChecksumMismatchError(path, entry.name, what="the sha256", expected=entry.sha256, found=digest, hint=hint)
    return path


def entry_for_model_file(
    path: str | os.PathLike[str], *, hub_repo: str | None = None, hub_revision: str | None = None
) -> ModelEntry:
    """Build the manifest entry of a model file: size and sha256 from the bytes, hardware key and
    held-out metrics from the model's own metadata (read with :func:`torch_diode.model.load_model`,
    so a file that is not a loadable torch-diode model is refused here, before it is published).

    The model name is the file name without ``.safetensors`` and must be ``<hardware>-<purpose>``.

    Raises:
        ManifestError: the name does not match the model's hardware key, or the metadata holds no
            usable metrics.
        torch_diode.errors.ModelFormatError: the file is not a torch-diode model.
    """
    from torch_diode.model import load_model  # torch is imported only when a manifest is built

    path = Path(path)
    model = load_model(path)
    metrics = _held_out_metrics(model.metadata, path)
    data = {
        "name": path.name.removesuffix(".safetensors"),
        "hardware": model.hardware,
        "file": path.name,
        "size_bytes": path.stat().st_size,
        "sha256": file_sha256(path),
        "metrics": metrics,
        "hub_repo": hub_repo,
        "hub_revision": hub_revision,
    }
    return ModelEntry.from_dict(data, where=str(path), package_dir=path.parent)


def _held_out_metrics(metadata: Mapping[str, Any], path: Path) -> dict[str, float]:
    """The numeric held-out metrics a model file records (``held_out_metrics``: a mapping, or its
    JSON text), flattened to ``{"a.b": number}``; non-numeric values are left out."""
    raw = metadata.get("held_out_metrics")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ManifestError(f"{path}: the model's 'held_out_metrics' metadata is not JSON ({exc})") from exc
    if not isinstance(raw, Mapping):
        raise ManifestError(
            f"{path}: the model records no held-out metrics (metadata key 'held_out_metrics'); train it with "
            "`diode train`, which evaluates on the held-out split and stores them"
        )
    metrics: dict[str, float] = {}

    def flatten(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                flatten(f"{prefix}.{k}" if prefix else str(k), v)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            metrics[prefix] = float(value)

    flatten("", raw)
    if not metrics:
        raise ManifestError(f"{path}: the model's 'held_out_metrics' metadata holds no finite numbers: {raw!r}")
    return metrics
