"""``diode data``: inspect, convert, merge and recover dataset files, and build lookup tables."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from torch_diode._text import plural
from torch_diode.cli import UsageError, check_format_agrees, check_output, same_file
from torch_diode.dataset import (
    FORMATS,
    Dataset,
    format_for_path,
    merge_datasets,
    output_lock,
    read_dataset,
    recover_dataset,
    write_dataset,
)
from torch_diode.errors import DatasetFormatError, SchemaVersionError, TruncatedFileError
from torch_diode.lut import KernelLUT, best_choices
from torch_diode.records import Problem


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "data",
        help="inspect, convert, merge and recover dataset files; build lookup tables",
        description="Work with torch-diode dataset files (.json or .msgpack).",
    )
    sub = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda args: _missing_subcommand(p))

    s = sub.add_parser(
        "stats",
        help="per hardware and op: problems, configs, records and each problem's fastest choice",
        description="Summarise dataset files: per hardware key and op, the number of problems with timings, "
        "configs (distinct choices), records, failures and problems with failures only (no timing), and each "
        "problem's fastest measured choice (median over repeats) with its time and speedup over ATen.",
    )
    s.add_argument("files", nargs="+", metavar="FILE", help="dataset files (.json or .msgpack)")
    s.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    s.add_argument("--recover", action="store_true", help="read the complete chunks of truncated files")
    s.set_defaults(func=_stats)

    c = sub.add_parser(
        "convert",
        help="convert a dataset between JSON and msgpack, or (de)compress a msgpack file",
        description="Convert a dataset file between JSON and msgpack (formats from the extensions). A msgpack "
        "OUT is written compressed (schema version 2, about 5x smaller) unless --no-compress; the records are the "
        "same either way.",
    )
    c.add_argument("input", metavar="IN")
    c.add_argument("output", metavar="OUT")
    c.add_argument("--format", choices=FORMATS, help="format of OUT (default: from its extension)")
    c.add_argument("--input-format", choices=FORMATS, help="format of IN (default: from its extension)")
    _add_no_compress(c)
    c.set_defaults(func=_convert)

    m = sub.add_parser(
        "merge",
        help="merge dataset files into one",
        description="Merge dataset files into OUT. A record found in several inputs is kept once; "
        "repeated measurements are kept. Files of different GPUs are refused unless --allow-mixed-hardware.",
    )
    m.add_argument("output", metavar="OUT")
    m.add_argument("inputs", nargs="+", metavar="IN")
    m.add_argument("--format", choices=FORMATS, help="format of OUT (default: from its extension)")
    m.add_argument("--allow-mixed-hardware", action="store_true", help="allow inputs of different hardware keys")
    _add_no_compress(m)
    m.set_defaults(func=_merge)

    lt = sub.add_parser(
        "lut",
        help="build a kernel lookup table (best measured choices per problem)",
        description="Build a kernel lookup table from dataset files of one GPU: for each problem, the "
        "top-k choices by median measured time.",
    )
    lt.add_argument("inputs", nargs="+", metavar="DATASET")
    lt.add_argument("--output", "-o", required=True, metavar="LUT.json", help="where to write the table (JSON)")
    lt.add_argument("--top-k", type=int, default=5, help="choices kept per problem (default: 5)")
    lt.set_defaults(func=_lut)

    r = sub.add_parser(
        "recover",
        help="keep the complete chunks of a truncated dataset file",
        description="Keep the complete chunks of a dataset file whose writer was interrupted. Without "
        "--output the file is cut back in place (a collector can then resume it).",
    )
    r.add_argument("file", metavar="FILE")
    r.add_argument("--output", "-o", metavar="OUT", help="write the complete part here instead of in place")
    r.add_argument("--format", choices=FORMATS, help="format of OUT (default: from its extension)")
    r.set_defaults(func=_recover)


def _missing_subcommand(p: argparse.ArgumentParser) -> int:
    p.print_help(sys.stderr)
    return 2


def _out(line: str = "") -> None:
    sys.stdout.write(line + "\n")


def _check_format(path: str, fmt: str | None = None, flag: str | None = None) -> None:
    """Refuse a path whose format its extension does not tell; ``flag`` is the option of this
    command that gives the format of ``path`` (None where there is none), named in the advice."""
    try:
        format_for_path(path, fmt)
    except DatasetFormatError:  # a directory: naming a format would not help
        raise
    except ValueError as e:
        raise UsageError(f"{e}, or pass {flag} json|msgpack" if flag else str(e)) from None


def _check_output(path: str, fmt: str | None, inputs: Sequence[str] = ()) -> None:
    """Refuse an output path we cannot write, or that is one of ``inputs``, before doing any work
    (every command with an output has --format for it)."""
    _check_format(path, fmt, "--format")
    check_format_agrees(path, fmt)
    check_output(None, path, inputs=inputs, make_parent=False)


def _check_inputs(paths: Sequence[str]) -> None:
    for p in paths:
        _check_format(p)


# -- stats -----------------------------------------------------------------------------------------


def _split_by_hardware(ds: Dataset) -> dict[str, Dataset]:
    """One dataset per hardware key (sources of one key kept together)."""
    out = {}
    for hw in ds.hardware_keys:
        src = np.array([s.hardware == hw for s in ds.sources], dtype=bool)
        mask = src[ds.source_idx] if len(ds) else np.zeros(0, dtype=bool)
        out[hw] = Dataset(
            sources=[s for s in ds.sources if s.hardware == hw],
            problems=ds.problems,
            choices=ds.choices,
            problem_idx=ds.problem_idx[mask],
            choice_idx=ds.choice_idx[mask],
            time_us=ds.time_us[mask],
            source_idx=np.zeros(int(mask.sum()), dtype=np.uint16),
            failures=[f for f in ds.failures if f.hardware == hw],
        )
    return out


def dataset_stats(ds: Dataset) -> dict[str, Any]:
    """Per hardware key and op: problem, config, record and failure counts, and each problem's
    fastest choice (median over repeats) with its time and speedup over the fastest ATen choice.

    ``problems`` counts the problems with timings; ``failed_problems`` those with failure records
    only (failed as a whole, or every choice failed), which ``problems`` leaves out.
    """
    out: dict[str, Any] = {}
    for hw, part in _split_by_hardware(ds).items():
        ops: dict[str, Any] = {}
        op_of = np.array([p.op for p in part.problems] or [""], dtype=object)
        rec_ops = op_of[part.problem_idx] if len(part) else np.zeros(0, dtype=object)
        for problem, ranked, aten in best_choices(part, top_k=1):
            choice, t = ranked[0]
            o = ops.setdefault(problem.op, _new_op_stats())
            o["problems"] += 1
            o["best"].append(
                {
                    "problem": problem.key(),
                    "choice": choice.key(),
                    "time_us": t,
                    "aten_time_us": aten,
                    "speedup_vs_aten": None if aten is None else aten / t,
                }
            )
        for op, o in ops.items():
            sel = rec_ops == op
            o["records"] = int(sel.sum())
            o["configs"] = len(np.unique(part.choice_idx[sel]))
        for f in part.failures:
            o = ops.setdefault(f.problem.op, _new_op_stats())
            o["failures"] += 1
        for problem in _failed_only(part):
            ops[problem.op]["failed_problems"] += 1
        out[hw] = dict(sorted(ops.items()))
    return out


def _new_op_stats() -> dict[str, Any]:
    return {"problems": 0, "configs": 0, "records": 0, "failures": 0, "failed_problems": 0, "best": []}


def _failed_only(ds: Dataset) -> set[Problem]:
    """The problems of ``ds`` with failure records and no timing record."""
    timed = {ds.problems[i] for i in np.unique(ds.problem_idx).tolist()}
    return {f.problem for f in ds.failures} - timed


def _stats(args: argparse.Namespace) -> int:
    _check_inputs(args.files)
    parts = [read_dataset(f, recover=args.recover) for f in args.files]
    for f, part in zip(args.files, parts, strict=True):
        if args.recover and not part.sources:  # nothing read: a file of its header alone, or cut in its first chunk
            try:
                read_dataset(f)
            except TruncatedFileError:  # as `diode data recover` says
                raise UsageError(
                    f"{f}: no record before the break is complete, so there is nothing to read, even with --recover"
                ) from None
    ds = parts[0] if len(parts) == 1 else merge_datasets(parts, allow_mixed_hardware=True)
    stats = dataset_stats(ds)
    if args.json:
        summary = {
            "files": list(args.files),
            "records": len(ds),
            "problems": len(np.unique(ds.problem_idx)),
            "failures": len(ds.failures),
            "failed_problems": len(_failed_only(ds)),
            "hardware": stats,
        }
        json.dump(summary, sys.stdout, indent=1)
        _out()
        return 0
    _out(
        f"{', '.join(args.files)}: {plural(len(ds), 'record')}, {plural(len(ds.failures), 'failure')}, "
        f"hardware {', '.join(ds.hardware_keys) or '-'}"
    )
    for hw, ops in stats.items():
        _out(f"{hw}:")
        for op, o in ops.items():
            _out(
                f"  {op}: {plural(o['problems'], 'problem')}, {plural(o['configs'], 'config')}, "
                f"{plural(o['records'], 'record')}, {plural(o['failures'], 'failure')}, "
                f"{plural(o['failed_problems'], 'problem')} with failures only"
            )
            width = max((len(b["problem"]) for b in o["best"]), default=0)
            for b in o["best"]:
                vs = "" if b["speedup_vs_aten"] is None else f"  {b['speedup_vs_aten']:.2f}x vs aten"
                _out(f"    {b['problem']:<{width}}  {b['time_us']:10.2f} us  {b['choice']}{vs}")
    return 0


# -- convert, merge, lut, recover ------------------------------------------------------------------


def _add_no_compress(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-compress",
        action="store_true",
        help="write a msgpack OUT uncompressed (schema version 1: readable by torch-diode versions that predate compression)",
    )


def _compress(args: argparse.Namespace) -> bool | None:
    """``write_dataset``'s ``compress``: False with --no-compress, else the format's default."""
    return False if args.no_compress else None


def _refuse_replacing(out: str | Path, what: str) -> None:
    """An existing file is never replaced by a dataset (convert, recover -o): it may be one."""
    if Path(out).exists():
        raise UsageError(
            f"{out}: exists, and {what} would replace it; it is left as is: write elsewhere or remove it first"
        )


def _convert(args: argparse.Namespace) -> int:
    _check_format(args.input, args.input_format, "--input-format")
    _check_output(args.output, args.format)
    if Path(args.input).resolve() == Path(args.output).resolve():
        raise UsageError(f"{args.output}: IN and OUT are the same file")
    _refuse_replacing(args.output, "converting")
    ds = read_dataset(args.input, format=args.input_format)
    out = write_dataset(ds, args.output, format=args.format, compress=_compress(args))
    _out(f"wrote {out} ({format_for_path(out, args.format)}, {plural(len(ds), 'record')}, {out.stat().st_size} bytes)")
    return 0


def _merge(args: argparse.Namespace) -> int:
    _check_inputs(args.inputs)
    _check_output(args.output, args.format)
    out = Path(args.output)
    if out.exists() and not any(same_file(out, f) for f in args.inputs):
        raise UsageError(
            f"{out}: exists and is not among the inputs, so merging would replace it; to merge into it, list it "
            "among the inputs too; else remove it first"
        )
    with output_lock(out):  # a collection into OUT (or its torchrun ranks) still running: refused
        parts = [read_dataset(f) for f in args.inputs]
        ds = merge_datasets(parts, allow_mixed_hardware=args.allow_mixed_hardware)
        out = write_dataset(ds, args.output, format=args.format, compress=_compress(args))
    total = sum(len(p) for p in parts)
    _out(
        f"wrote {out}: {plural(len(ds), 'record')} from {plural(len(parts), 'file')} "
        f"({plural(total - len(ds), 'duplicate')} dropped), {plural(len(ds.problems), 'problem')}, "
        f"hardware {', '.join(ds.hardware_keys)}"
    )
    return 0


def _lut(args: argparse.Namespace) -> int:
    if args.top_k < 1:
        raise UsageError(f"--top-k: must be at least 1, got {args.top_k}")
    _check_inputs(args.inputs)
    out = Path(args.output)
    if out.suffix.lower() != ".json":
        raise UsageError(f"{out}: a lookup table is JSON; name it .json")
    check_output(None, out, inputs=args.inputs, make_parent=False)
    if out.exists():  # a lookup table is rebuilt in place; anything else (a JSON dataset) is kept
        try:
            KernelLUT.load(out)
        except SchemaVersionError:
            pass  # a lookup table of another version: rebuilt, as its error advises
        except (ValueError, OSError):
            raise UsageError(
                f"{out}: exists and is not a lookup table (a dataset?); it is left as is: write elsewhere"
            ) from None
    parts = [read_dataset(f) for f in args.inputs]
    ds = parts[0] if len(parts) == 1 else merge_datasets(parts)
    lut = KernelLUT.from_dataset(ds, top_k=args.top_k)
    lut.save(out)
    _out(f"wrote {out}: {plural(len(lut), 'problem')}, top {plural(lut.top_k, 'choice')} each, hardware {lut.hardware}")
    return 0


def _recover(args: argparse.Namespace) -> int:
    _check_inputs([args.file])
    if args.output is not None:
        _check_output(args.output, args.format, inputs=[args.file])  # in place is without -o
        _refuse_replacing(args.output, "writing the recovered records")
    try:  # never an empty dataset, in place or in a new file
        res = recover_dataset(args.file, output=args.output, output_format=args.format, keep_nothing=False)
    except TruncatedFileError:
        raise UsageError(
            f"{args.file}: no record before the break is complete, so there is nothing to keep; "
            + ("nothing was written" if args.output is not None else "the file is left as is")
        ) from None
    n = len(res.dataset)
    if res.damaged:
        msg = (
            f"{args.file} (left as is): damaged at byte {res.kept_bytes}: kept the {plural(res.chunks, 'complete chunk')} "
            f"before it with {plural(n, 'record')}; what follows it ({plural(res.dropped_bytes, 'byte')}, possibly "
            "complete chunks) was "
            "not copied: keep the original"
        )
    elif res.dropped_bytes == 0:
        msg = f"{args.file}: complete ({plural(res.chunks, 'chunk')}, {plural(n, 'record')}); nothing to recover"
    else:
        where = args.file + " (cut back in place)" if args.output is None else args.file + " (left as is)"
        msg = (
            f"{where}: kept {plural(res.chunks, 'complete chunk')} with {plural(n, 'record')}, "
            f"dropped a partial tail of {plural(res.dropped_bytes, 'byte')}"
        )
    if args.output is not None:
        msg += f"; wrote {args.output}"
    _out(msg)
    return 0
