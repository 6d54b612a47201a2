"""The ``diode`` command line. Each subcommand family lives in its own module of this package and
exposes ``register(subparsers)``; ``main`` wires them together.

Exit status: 0 on success, 1 when the work itself failed (for example a collection that measured
nothing), 2 on bad arguments or unreadable input, always with one clear line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch_diode._version import __version__
from torch_diode.errors import CollectionError, DiodeError, Terminated

# Subcommand modules, in the order their commands appear in --help.
_MODULES: tuple[str, ...] = (
    "torch_diode.cli.data",
    "torch_diode.cli.hardware",
    "torch_diode.cli.collect",
    "torch_diode.cli.train",
    "torch_diode.cli.demo",
    "torch_diode.cli.bench",
)


class UsageError(Exception):
    """Bad arguments or unreadable input: exit status 2."""


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths name one file (resolved alike, or the same existing file by another name)."""
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    return pa.resolve() == pb.resolve() or (pa.exists() and pb.exists() and os.path.samefile(pa, pb))


def check_format_agrees(path: str | os.PathLike[str], fmt: str | None, flag: str = "--format") -> None:
    """Refuse a ``--format`` that contradicts the file's dataset extension: the file would be read
    back (by every command that takes the format from the extension) as the other format."""
    from torch_diode.dataset import format_for_path

    try:
        named = format_for_path(path)  # the format the extension names, as every reader takes it
    except ValueError:
        return  # no dataset extension: --format alone says it
    if fmt is not None and named != fmt:
        raise UsageError(
            f"{flag} {fmt} contradicts the name {str(path)!r} ({named}), which every command would read back as "
            f"{named}: name the file .{'json' if fmt == 'json' else 'msgpack'}, or drop {flag}"
        )


def check_output(
    flag: str | None,
    path: str | os.PathLike[str],
    *,
    inputs: Sequence[str | os.PathLike[str]] = (),
    suffixes: Sequence[str] = (),
    make_parent: bool = True,
) -> Path:
    """Refuse, before any work, an output path that would be lost or would destroy an input.

    ``path`` must not be one of ``inputs`` (the same file, by any name), must end in one of
    ``suffixes`` (when given), must not be a directory, and its directory must accept a new file
    (created first when ``make_parent``; probed with a temporary file, which is removed), so that a
    long training or collection never ends in an error about where to put its result.
    """
    out = Path(path).expanduser()
    what = f"{flag} {out}" if flag else str(out)
    if suffixes and out.suffix.lower() not in suffixes:
        raise UsageError(f"{what}: expected a {' or '.join(suffixes)} file name")
    if out.is_dir():
        raise UsageError(f"{what}: is a directory; give a file name")
    for src in inputs:
        if same_file(out, src):
            raise UsageError(f"{what} is also an input ({src}): writing it would destroy that input; write elsewhere")
    parent = out.parent
    if not make_parent and not parent.is_dir():
        raise UsageError(f"{what}: directory {str(parent)!r} does not exist")
    missing = [d for d in (parent, *parent.parents) if not d.exists()]
    try:
        parent.mkdir(parents=True, exist_ok=True)
        _made_dirs.extend(missing)  # deepest first: removed again, if still empty, when the command fails
        with tempfile.NamedTemporaryFile(dir=parent, prefix=f".{out.name}.", suffix=".probe"):
            pass
    except OSError as e:
        raise UsageError(f"{what}: cannot write in {str(parent)!r} ({e.strerror or e})") from None
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="diode",
        description="torch-diode: collect GEMM timings, train kernel-time models, and check them against max-autotune.",
    )
    parser.add_argument("--version", action="version", version=f"diode (torch-diode) {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _MODULES:
        if importlib.util.find_spec(name) is None:  # a module still being written: skip it
            continue
        importlib.import_module(name).register(sub)
    return parser


#: Directories :func:`check_output` created for this command's outputs (deepest first).
_made_dirs: list[Path] = []


def _remove_made_dirs() -> None:
    """Remove the output directories this command created, where they are still empty (a command
    refused after its output checks leaves no empty folder behind)."""
    for d in _made_dirs:
        with contextlib.suppress(OSError):  # not empty (something was written), or gone
            d.rmdir()
    _made_dirs.clear()


def main(argv: Sequence[str] | None = None) -> int:
    _made_dirs.clear()
    rc = 2
    try:
        rc = _main(argv)
    finally:
        if rc != 0:
            _remove_made_dirs()
    return rc


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2) if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s" if args.verbose else "%(message)s",
    )
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    name = " ".join(str(v) for v in (args.command, getattr(args, "data_command", None)) if v)
    try:
        return int(func(args) or 0)
    except BrokenPipeError:
        # `diode data stats ... | head`: the reader left; that is not an error.
        sys.stderr.close()
        return 0
    except CollectionError as e:  # the work itself failed (e.g. nothing was measured)
        print(f"diode {name}: error: {e}", file=sys.stderr)
        return 1
    except (UsageError, DiodeError, ValueError, OSError) as e:
        print(f"diode {name}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        terminated = isinstance(e, Terminated)
        print(f"diode {name}: {'terminated (SIGTERM)' if terminated else 'interrupted'}", file=sys.stderr)
        if argv is None and not args.verbose:  # the process's own command line: it ends now
            sys.unraisablehook = _silent_after_interrupt
        return 143 if terminated else 130


def _silent_after_interrupt(unraisable: Any) -> None:
    """``sys.unraisablehook`` for the rest of a process whose command was interrupted: the work it
    stopped can leave finalizers that fail as the interpreter exits, after the interrupt's line
    (CI, session 77: a SIGTERM during an Inductor compile, then "Exception ignored in: <generator
    object Virtualized._set_handler...>", an AttributeError of torch's). Not printed; ``-v`` keeps
    Python's report."""
    del unraisable  # dropped on purpose: the command has ended and said so
