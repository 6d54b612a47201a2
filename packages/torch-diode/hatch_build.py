"""Metadata hook for the torch-diode meta-wheel (hatchling runs this file; it is not part of the wheel).

The version comes from the one place it is defined, torch-diode-lib's ``src/torch_diode/_version.py``
next to this package in the source tree, or from ``PKG-INFO`` when the wheel is built from this
package's sdist. torch-diode-lib and torch-diode-models are pinned to that same version.
"""

from __future__ import annotations

import re
from email.parser import Parser
from pathlib import Path
from typing import Any

from hatchling.metadata.plugin.interface import MetadataHookInterface

_LIB_VERSION_FILE = Path("..", "torch-diode-lib", "src", "torch_diode", "_version.py")
_VERSION_RE = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.MULTILINE)


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


class LockstepMetadataHook(MetadataHookInterface):
    """Sets the version and pins torch-diode-lib and torch-diode-models to it."""

    def update(self, metadata: dict[str, Any]) -> None:
        version = lockstep_version(self.root)
        metadata["version"] = version
        metadata["dependencies"] = [f"torch-diode-lib=={version}", f"torch-diode-models=={version}"]
