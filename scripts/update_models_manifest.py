"""Rewrite a models package's manifest.json from the .safetensors model files in its directory.

For each ``*.safetensors`` file the entry's size and sha256 come from the bytes, and the hardware
key and held-out metrics from the model's own metadata (the file is loaded with
``torch_diode.model.load_model``, so a file that is not a valid torch-diode model is refused).
The Hub repository and pinned commit are the ones the files are (or will be) published at; an
existing entry keeps its Hub fields unless new ones are given. With no model files the manifest
lists no models.

    python scripts/update_models_manifest.py \\
        --hub-repo torch-diode/torch-diode-models --hub-revision <40-hex commit>
    python scripts/update_models_manifest.py --package-dir path/to/my_models --no-hub
    python scripts/update_models_manifest.py --check     # exit 1 if manifest.json is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from torch_diode.errors import DiodeError
from torch_diode.weights import (
    MANIFEST_FILENAME,
    ModelEntry,
    entry_for_model_file,
    read_manifest,
    write_manifest,
)

DEFAULT_PACKAGE_DIR = Path(__file__).resolve().parents[1] / "packages/torch-diode-models/src/torch_diode_models"


def build_entries(
    package_dir: Path, *, hub_repo: str | None, hub_revision: str | None, no_hub: bool
) -> list[ModelEntry]:
    """The manifest entries for the model files in ``package_dir``."""
    manifest = package_dir / MANIFEST_FILENAME
    previous = {e.name: e for e in read_manifest(manifest)} if manifest.is_file() else {}
    entries = []
    for path in sorted(package_dir.glob("*.safetensors")):
        old = previous.get(path.name.removesuffix(".safetensors"))
        repo, revision = (None, None) if no_hub else (hub_repo, hub_revision)
        if not no_hub and repo is None and old is not None:
            repo, revision = old.hub_repo, old.hub_revision
        entries.append(entry_for_model_file(path, hub_repo=repo, hub_revision=revision))
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package-dir", type=Path, default=DEFAULT_PACKAGE_DIR, help="models package directory")
    parser.add_argument("--hub-repo", help="Hugging Face Hub repository id the files are published in (owner/name)")
    parser.add_argument("--hub-revision", help="the full 40-hex commit of that repository holding these files")
    parser.add_argument("--no-hub", action="store_true", help="no Hub fallback for these models")
    parser.add_argument("--check", action="store_true", help="only check that manifest.json is up to date")
    args = parser.parse_args(argv)
    if (args.hub_repo is None) != (args.hub_revision is None):
        parser.error("--hub-repo and --hub-revision go together")
    if args.no_hub and args.hub_repo:
        parser.error("--no-hub contradicts --hub-repo")
    package_dir: Path = args.package_dir
    if not package_dir.is_dir():
        parser.error(f"--package-dir {package_dir} is not a directory")
    try:
        entries = build_entries(package_dir, hub_repo=args.hub_repo, hub_revision=args.hub_revision, no_hub=args.no_hub)
        manifest = package_dir / MANIFEST_FILENAME
        if args.check:
            current = read_manifest(manifest) if manifest.is_file() else []
            if [e.to_dict() for e in current] != [e.to_dict() for e in sorted(entries, key=lambda e: e.name)]:
                print(f"{manifest} is out of date: run {Path(__file__).name} again", file=sys.stderr)
                return 1
            print(f"{manifest} is up to date ({len(entries)} model(s))")
            return 0
        write_manifest(manifest, entries)
    except DiodeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for e in entries:
        hub = f"{e.hub_repo}@{e.hub_revision[:12]}" if e.hub_repo and e.hub_revision else "no Hub fallback"
        print(f"{e.name}: {e.size_bytes} bytes, sha256 {e.sha256[:12]}, {len(e.metrics)} metric(s), {hub}")
    print(f"wrote {manifest} ({len(entries)} model(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
