"""Build hooks for torch-diode-models (hatchling runs this file; it is not part of the wheel).

* Metadata: the version comes from the one place it is defined, torch-diode-lib's
  ``src/torch_diode/_version.py`` next to this package in the source tree, or from ``PKG-INFO``
  when the wheel is built from this package's sdist. The dependency on torch-diode-lib is pinned
  to that same version (the three wheels move in lockstep).
* Wheel: the ``*.safetensors`` weights in ``src/torch_diode_models/`` are added to the wheel
  unless ``TORCH_DIODE_SLIM=1`` is set, which builds a slim wheel that carries only the manifest
  (the models are then fetched from the Hugging Face Hub at the manifest's pinned revision).
"""

from __future__ import annotations

import os
import re
from email.parser import Parser
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.metadata.plugin.interface import MetadataHookInterface

_LIB_VERSION_FILE = Path("..", "torch-diode-lib", "src", "torch_diode", "_version.py")
_VERSION_RE = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.MULTILINE)
_PACKAGE = "torch_diode_models"


def lockstep_version(root: str) -> str:
    """The torch-diode version, read from the lib's ``_version.py`` or from this sdist's ``PKG-INFO``."""
    pkg_info = Path(root, "PKG-INFO")
    if pkg_info.is_file():
        version = Parser().parsestr(pkg_info.read_text(encoding="utf-8")).get("Version")
        if not version:
            raise RuntimeError(f"{pkg_info} has no Version field: rebuild the sdist from the source tree")
        return version
    version_file = Path(root, _LIB_VERSION_FILE).resolve()
    if not version_file.is_file():
        raise RuntimeError(
            f"cannot find the torch-diode version: {version_file} does not exist and {pkg_info} is "
            "missing; build from the repository checkout (packages/ side by side) or from this package's sdist"
        )
    match = _VERSION_RE.search(version_file.read_text(encoding="utf-8"))
    if match is None:
        raise RuntimeError(f'{version_file} does not define __version__ = "X.Y.Z"')
    return match.group(1)


def slim_build() -> bool:
    """True when ``TORCH_DIODE_SLIM`` asks for a wheel without weights."""
    return os.environ.get("TORCH_DIODE_SLIM", "").strip().lower() not in ("", "0", "false", "no")


class LockstepMetadataHook(MetadataHookInterface):
    """Sets the version and pins torch-diode-lib to it."""

    def update(self, metadata: dict[str, Any]) -> None:
        version = lockstep_version(self.root)
        metadata["version"] = version
        metadata["dependencies"] = [f"torch-diode-lib=={version}"]


class WeightsBuildHook(BuildHookInterface):
    """Adds the ``*.safetensors`` weights to the wheel, unless this is a slim build."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return  # an editable install reads the weights from the source tree
        package_dir = Path(self.root, "src", _PACKAGE)
        weights = sorted(package_dir.glob("*.safetensors"))
        if slim_build():
            self.app.display_info(f"TORCH_DIODE_SLIM is set: leaving out {len(weights)} weight file(s)")
            return
        for path in weights:
            build_data["force_include"][str(path)] = f"{_PACKAGE}/{path.name}"
        self.app.display_info(f"adding {len(weights)} weight file(s): {', '.join(p.name for p in weights) or 'none'}")
