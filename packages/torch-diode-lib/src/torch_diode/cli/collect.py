"""``diode collect``, ``diode collect-shapeset``, ``diode collect-problems``, ``diode create-validation``
and ``diode shapes``.

Examples::

    diode collect --output h100.msgpack --num-shapes 200 --seed 0 --log-normal \\
        --ops mm,addmm,bmm --dtypes float16,bfloat16,float32 --search-space EXHAUSTIVE
    diode collect-shapeset --shapeset data/shapesets/real_models.json --split train --output real.msgpack
    diode create-validation --train h100.msgpack --output h100-val.msgpack --num-shapes 150 --seed 1
    diode collect-problems --from h100-val.msgpack --output h100-val-stock.msgpack   # stock's own picks
    diode shapes --model Llama-3.1-8B --batch 1 --tokens 2048 --output llama8b.json
    diode shapes --real-models --output data/shapesets/real_models.json
    diode shapes --fit data/shapesets/real_models.json

Collection resumes: rerun the same command and the problems already in ``--output`` are skipped.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from torch_diode._text import plural
from torch_diode.cli import UsageError, check_format_agrees, check_output
from torch_diode.errors import DatasetFormatError
from torch_diode.records import OPS, Problem

log = logging.getLogger(__name__)

_DTYPES = "float16,bfloat16,float32"


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _add_collect_args(p: argparse.ArgumentParser, *, default_space: str = "DEFAULT") -> None:
    from torch_diode.collect.inductor import SEARCH_MODES, SEARCH_SPACES
    from torch_diode.collect.runner import COLLECTORS, DEVICES

    p.add_argument("--output", "-o", required=True, help="dataset file to write or resume (.msgpack or .json)")
    p.add_argument("--format", choices=("msgpack", "json"), help="file format (default: from the extension)")
    p.add_argument(
        "--collector",
        choices=COLLECTORS,
        default="inductor",
        help="inductor (max-autotune's own timings; the default) or sweep (fast)",
    )
    p.add_argument(
        "--search-space",
        choices=SEARCH_SPACES,
        default=default_space,
        help=f"Inductor GEMM search space (default {default_space})",
    )
    p.add_argument(
        "--search-mode", choices=SEARCH_MODES, default="max-autotune", help="torch.compile mode (default max-autotune)"
    )
    p.add_argument("--device", choices=DEVICES, default="cuda", help="cuda (default) or cpu (bmm only; for testing)")
    p.add_argument("--hardware", help="hardware key to record (default: detected from the GPU)")
    p.add_argument("--workers", type=int, help="local processes, one per GPU (default: all visible GPUs)")
    p.add_argument(
        "--via-linear", action="store_true", help="compile mm/addmm problems through F.linear (nn.Linear's lowering)"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--max-configs", type=int, help="sweep only: at most this many Triton configs per problem (a seeded sample)"
    )
    p.add_argument(
        "--top-up",
        action="store_true",
        help="sweep only: problems already in --output get the sampled configs they lack (after raising "
        "--max-configs), with ATen timed again beside them",
    )
    p.add_argument(
        "--compile-timeout",
        type=float,
        metavar="SECONDS",
        help="sweep only: a kernel still compiling after SECONDS is stopped and recorded as a failure (reason "
        "timeout) instead of holding its problem up",
    )
    p.add_argument(
        "--checkpoint",
        type=float,
        metavar="SECONDS",
        help="sweep only: a problem still compiling after SECONDS has what it timed so far saved to OUTPUT.partial, "
        "and again every SECONDS; a rerun times only what it lacks and moves it into --output once complete",
    )


# Defaults of the options that only apply when problems are sampled. Their argparse defaults are
# None, so that create-validation can tell which ones were given with --shapeset (where they would
# be ignored); _sampler_defaults fills these in before sampling.
_SAMPLER_DEFAULTS: dict[str, Any] = {"seed": 0, "layouts": "row/row,row/col", "min_dim": 16, "max_dim": 8192}


def _sampler_args(p: argparse.ArgumentParser) -> None:
    from torch_diode.shapes.sampling import SAMPLERS

    p.add_argument("--num-shapes", "-n", type=int, required=True, help="number of distinct problems to sample")
    p.add_argument("--seed", type=int, help="sampler seed (default 0)")
    p.add_argument(
        "--log-normal",
        action="store_true",
        help="sample with the log-normal fitted to real model GEMMs (= --sampler log-normal)",
    )
    p.add_argument(
        "--sampler",
        choices=SAMPLERS,
        help="log-normal, uniform or pow2 (default uniform, or log-normal with --log-normal)",
    )
    p.add_argument("--ops", default="mm,addmm,bmm", help="comma-separated ops (default mm,addmm,bmm)")
    p.add_argument("--dtypes", default=_DTYPES, help=f"comma-separated dtypes (default {_DTYPES})")
    p.add_argument(
        "--layouts",
        help="comma-separated A/B layouts: row/row,row/col,col/row,col/col (default row/row,row/col)",
    )
    p.add_argument("--min-dim", type=int, help="smallest M, N, K for uniform/pow2 (default 16)")
    p.add_argument("--max-dim", type=int, help="largest M, N, K for uniform/pow2 (default 8192)")


def _sampler_given(args: argparse.Namespace) -> list[str]:
    """The sampling-only options given on the command line (before ``_sampler_defaults``)."""
    values = {n: getattr(args, n) for n in ("seed", "log_normal", "sampler", "layouts", "min_dim", "max_dim")}
    return ["--" + n.replace("_", "-") for n, v in values.items() if v is not None and v is not False]  # 0 counts


def _sampler_defaults(args: argparse.Namespace) -> None:
    """Give the sampling options that were not given their defaults (refusing the size range with
    the log-normal sampler, which would ignore it)."""
    sizes = [f for f, v in (("--min-dim", args.min_dim), ("--max-dim", args.max_dim)) if v is not None]
    if sizes and (args.log_normal or args.sampler == "log-normal"):
        raise UsageError(
            f"{'/'.join(sizes)} {'apply' if len(sizes) > 1 else 'applies'} to --sampler uniform and pow2; the log-normal sampler draws its sizes from "
            "its fit to real model GEMMs (clipped to the range that fit saw), so they would be ignored: drop "
            f"{'them' if len(sizes) > 1 else 'it'}, or sample with --sampler uniform or pow2"
        )
    for name, value in _SAMPLER_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "collect",
        help="sample GEMM problems and collect their timings on this GPU",
        description="Sample --num-shapes GEMM problems (as --sampler, --ops, --dtypes and --layouts say, seeded by "
        "--seed) and collect their timings on this GPU into --output: with --collector inductor, the timings "
        "max-autotune takes of every choice of the --search-space; with --collector sweep, a faster sweep of the "
        "Triton configs. Collection resumes: rerun the same command and the problems already in --output are "
        "skipped.",
    )
    _add_collect_args(p)
    _sampler_args(p)
    p.set_defaults(func=_cmd_collect)

    p = subparsers.add_parser(
        "collect-shapeset",
        help="collect the timings of a shape set's problems",
        description="Collect the timings of the problems of a shape set (a JSON file of GEMM shapes, such as "
        "data/shapesets/real_models.json or one `diode shapes` writes) on this GPU into --output; --split, --ops, "
        "--dtypes, --tags and --limit choose which. Collection resumes: rerun the same command and the problems "
        "already in --output are skipped.",
    )
    _add_collect_args(p)
    p.add_argument("--shapeset", required=True, help="shape-set JSON file")
    p.add_argument("--split", choices=("train", "val", "all"), default="all", help="which entries (default all)")
    p.add_argument("--ops", help="only these ops (comma-separated)")
    p.add_argument("--dtypes", help="only these dtypes (comma-separated; default: each entry's)")
    p.add_argument("--tags", help="only entries with any of these tags (comma-separated)")
    p.add_argument("--limit", type=int, help="at most this many problems (in file order)")
    p.set_defaults(func=_cmd_collect_shapeset)

    p = subparsers.add_parser(
        "collect-problems",
        help="collect the timings of the problems a dataset file holds (stock's picks of a validation set)",
        description="Collect, in a run of its own, the problems a dataset file holds (every problem, in its "
        "order). In the DEFAULT search space (the default) this measures what stock max-autotune benchmarks: "
        "with --collector inductor its fastest record per problem is the choice stock max-autotune picks with "
        "its own timer, with --collector sweep the same candidates under the sweep's timer. Passed to "
        "`diode validate-max-autotune --max-autotune-solution`, those picks are scored in the validation "
        "set's timings without the bias of picks made in them.",
    )
    _add_collect_args(p)
    p.add_argument(
        "--from", dest="source", required=True, metavar="DATASET", help="dataset file whose problems to collect"
    )
    p.set_defaults(func=_cmd_collect_problems)

    p = subparsers.add_parser(
        "create-validation",
        help="collect a validation set disjoint from a training file",
        description="Collect a held-out validation set: problems sampled as `diode collect` does (or a shape set's "
        "'val' entries with --shapeset), none of them, in any layout, a problem of the --train file(s), with a seed "
        "they were not sampled with. Models are measured on such a set (`diode validate-max-autotune`, "
        "`diode train --held-out-dataset`).",
    )
    _add_collect_args(p, default_space="EXHAUSTIVE")
    p.add_argument("--train", required=True, nargs="+", help="training dataset file(s) whose problems to avoid")
    p.add_argument("--shapeset", help="take the 'val' entries of this shape set instead of sampling")
    _sampler_args(p)
    p.set_defaults(func=_cmd_create_validation)

    p = subparsers.add_parser(
        "shapes",
        help="extract GEMM shapes of a model, build the real-model shape set, or fit the sampler",
        description="Write the GEMM shapes of a model (--model, at --batch, --tokens and --past; --list names the "
        "models) or of the committed real-model shape set (--real-models) as a shape set to --output (or print "
        "them), or fit the log-normal sampler to a shape set's real-model entries and print it (--fit).",
    )
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--model", help="a model name (see --list)")
    mode.add_argument("--list", action="store_true", help="list the model names")
    mode.add_argument("--real-models", action="store_true", help="build the committed real-model shape set")
    mode.add_argument(
        "--fit", metavar="SHAPESET", help="fit the log-normal sampler to a shape set's real-model entries and print it"
    )
    p.add_argument("--batch", type=int, default=1, help="sequences/images per forward (default 1)")
    p.add_argument(
        "--tokens",
        type=int,
        default=128,
        help="tokens per sequence (1 = decode; 0 = the model's own for ViT; default 128)",
    )
    p.add_argument("--past", type=int, default=0, help="decoders: KV-cache length for decode")
    p.add_argument("--dtypes", default="bfloat16", help="dtypes the entries list (default bfloat16)")
    p.add_argument("--output", "-o", help="shape-set JSON to write (default: print to stdout)")
    p.set_defaults(func=_cmd_shapes)


# ---------------------------------------------------------------------------------------------


def _options(args: argparse.Namespace, *, seed: int | None = None) -> Any:
    from torch_diode.collect import CollectOptions

    try:
        return CollectOptions(
            collector=args.collector,
            device=args.device,
            search_space=args.search_space,
            search_mode=args.search_mode,
            via_linear=args.via_linear,
            hardware=args.hardware,
            workers=args.workers,
            format=args.format,
            progress=not args.no_progress,
            seed=seed,
            command="diode " + " ".join(sys.argv[1:]),
            sweep_options=tuple(
                (k, v)
                for k, v in (("max_configs", args.max_configs), ("compile_timeout_s", args.compile_timeout))
                if v is not None
            ),
            top_up=args.top_up,
            checkpoint_s=args.checkpoint,
        )
    except ValueError as e:
        raise UsageError(str(e)) from None


def _check_device(args: argparse.Namespace, problems: list[Problem]) -> None:
    """Fail fast (before importing Inductor) when this machine cannot collect the problems."""
    from torch_diode.collect.inductor import CPU_OPS

    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError(
                f"no CUDA GPU visible (torch {torch.__version__}, torch.cuda.is_available() is False); collect on a GPU "
                f"machine, or pass --device cpu{_ops_hint(args)} to test the pipeline on CPU"
            )
        return
    if args.collector != "inductor":
        raise UsageError(f"--collector {args.collector} needs a CUDA GPU; on CPU only --collector inductor works")
    from torch_diode.hardware import KNOWN_KEYS

    if args.hardware and args.hardware.lower() in {k.lower() for k in KNOWN_KEYS}:
        raise UsageError(
            f"--device cpu times the CPU: --hardware {args.hardware} would file those timings as that GPU's; "
            "give a key of your own (e.g. --hardware cpu-test)"
        )
    bad = sorted({p.op for p in problems} - CPU_OPS)
    if bad:
        raise UsageError(
            f"on CPU Inductor benchmarks a single choice for {', '.join(bad)} (nothing to record); "
            f"only {', '.join(sorted(CPU_OPS))} can be collected with --device cpu"
            + (f" (pass{_ops_hint(args)})" if hasattr(args, "ops") else " (give a --from file of those problems only)")
        )


def _ops_hint(args: argparse.Namespace) -> str:
    """`` --ops bmm`` where the command has --ops (collect-problems takes its problems from a file)."""
    from torch_diode.collect.inductor import CPU_OPS

    return f" --ops {','.join(sorted(CPU_OPS))}" if hasattr(args, "ops") else ""


def _check_collect_flags(args: argparse.Namespace) -> None:
    """Refuse the collect options that are wrong on any machine, in the flags' own terms, before
    any other work (``CollectOptions`` and the sweep name their fields, for API callers)."""
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers: must be at least 1 (local processes, one per GPU), got {args.workers}")
    sweep_only = (
        ("--max-configs", args.max_configs is not None, "Inductor's space is set by --search-space"),
        ("--compile-timeout", args.compile_timeout is not None, "Inductor compiles its own choices"),
        ("--top-up", args.top_up, "the Inductor collector measures a problem's choices all at once"),
        ("--checkpoint", args.checkpoint is not None, "the Inductor collector saves a problem whole"),
    )
    for flag, given, why in sweep_only:
        if given and args.collector != "sweep":
            raise UsageError(f"{flag} applies to --collector sweep ({why})")
    if args.max_configs is not None and args.max_configs < 1:
        raise UsageError(f"--max-configs: must be a positive integer, got {args.max_configs}")
    for flag, seconds in (("--compile-timeout", args.compile_timeout), ("--checkpoint", args.checkpoint)):
        if seconds is not None and not seconds > 0:
            raise UsageError(f"{flag}: must be a positive number of seconds, got {seconds:g}")


def _run(args: argparse.Namespace, problems: list[Problem], *, seed: int | None) -> int:
    from torch_diode.collect import collect
    from torch_diode.dataset import format_for_path

    try:
        format_for_path(args.output, args.format)
    except DatasetFormatError as e:  # a directory: naming a format would not help
        raise UsageError(f"--output {e}") from None
    except ValueError as e:  # the lib's message names no flag: these commands have --format
        raise UsageError(f"--output {e}, or pass --format json|msgpack") from None
    check_format_agrees(args.output, args.format)
    if not problems:
        flags = [
            f
            for f in ("--num-shapes", "--split", "--ops", "--dtypes", "--tags", "--limit")
            if hasattr(args, f[2:].replace("-", "_"))
        ]
        raise UsageError(f"no problems selected: check {'/'.join(flags)}")
    from torch_diode.hardware import valid_key

    if args.hardware is not None and not valid_key(args.hardware):
        raise UsageError(
            f"--hardware {args.hardware!r}: a hardware key is 1-64 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit (e.g. NVIDIA-H100, or cpu-test)"
        )
    _check_device(args, problems)
    options = _options(args, seed=seed)
    check_output("--output", args.output)  # before compiling anything: a directory, or nowhere to write
    summary = collect(problems, options, args.output)  # a CollectionError exits 1 through cli.main
    print(f"{summary.output}: {summary.line()}")
    return 0


def _sample(
    args: argparse.Namespace, *, exclude_shapes: Any = (), excluded_are: str = "excluded", short_ok: bool = False
) -> tuple[list[Problem], str]:
    """The sampled problems of the command line (``sample_problems``, its errors in the command
    line's terms), and why they are fewer than --num-shapes ('' when they are not).

    ``exclude_shapes``: problems whose shapes (in any layout) to leave out; ``excluded_are`` says
    what they are. ``short_ok``: where those leave fewer than --num-shapes, take the ones there are
    (a request the space cannot hold even without them is refused all the same).
    """
    from torch_diode.shapes.sampling import MAX_OPERAND_ELEMENTS, SamplingError, cap_text, sample_problems

    sampler = args.sampler or ("log-normal" if args.log_normal else "uniform")
    if args.log_normal and args.sampler not in (None, "log-normal"):
        raise UsageError(f"--log-normal contradicts --sampler {args.sampler}")
    try:
        problems = sample_problems(
            args.num_shapes,
            seed=args.seed,
            sampler=sampler,
            ops=_csv(args.ops),
            dtypes=_csv(args.dtypes),
            layouts=_csv(args.layouts),
            min_dim=args.min_dim,
            max_dim=args.max_dim,
            max_operand_elements=MAX_OPERAND_ELEMENTS,
            exclude_shapes=exclude_shapes,
            partial=short_ok,
        )
    except SamplingError as e:
        why = e.message(
            {
                **_SAMPLER_FLAGS,
                "cap": f"the operand size cap ({cap_text(e.max_operand_elements, value=True)} elements, batch "
                "included; not an option)",
                "params": "",  # the log-normal sampler's fit: not an option either
                "excluded": excluded_are,
            }
        )
        if short_ok and e.problems and (e.space is None or e.space >= e.asked):
            return e.problems, why
        raise UsageError(why) from None
    except ValueError as e:  # the sampler's argument names, in the command line's terms
        field, sep, rest = str(e).partition(": ")
        flag = _SAMPLER_FLAGS.get(field) if sep else None
        raise UsageError(f"{flag}: {rest}" if flag else str(e)) from None
    return problems, ""


#: The sampler's argument names (in its errors) -> the command line's flags.
_SAMPLER_FLAGS = {
    "n": "--num-shapes/-n",
    "min_dim": "--min-dim",
    "max_dim": "--max-dim",
    "ops": "--ops",
    "dtypes": "--dtypes",
    "layouts": "--layouts",
    "sampler": "--sampler",
    "min_dim/max_dim": "--min-dim/--max-dim",
    "pow2": "--min-dim/--max-dim",  # no power of two between them
}


def _cmd_collect(args: argparse.Namespace) -> int:
    _check_collect_flags(args)
    _sampler_defaults(args)
    return _run(args, _sample(args)[0], seed=args.seed)


def _load_shapeset(path: str) -> Any:
    from torch_diode.shapes.shapeset import ShapeSetError, load_shapeset

    try:
        return load_shapeset(path)
    except ShapeSetError as e:
        raise UsageError(str(e)) from None


def _cmd_collect_shapeset(args: argparse.Namespace) -> int:
    _check_collect_flags(args)
    shapeset = _load_shapeset(args.shapeset)
    ops = _csv(args.ops) if args.ops else list(OPS)
    unknown = set(ops) - set(OPS)
    if unknown:
        raise UsageError(f"--ops: unknown {sorted(unknown)}; known: {', '.join(OPS)}")
    problems = shapeset.problems(
        split=args.split,
        ops=ops,
        tags=_csv(args.tags) if args.tags else None,
        dtypes=_csv(args.dtypes) if args.dtypes else None,
    )
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit: must be at least 1, got {args.limit}")
    return _run(args, problems[: args.limit] if args.limit is not None else problems, seed=None)


def _cmd_collect_problems(args: argparse.Namespace) -> int:
    from pathlib import Path

    from torch_diode.dataset import read_dataset

    _check_collect_flags(args)
    if Path(args.source).resolve() == Path(args.output).resolve():
        raise UsageError(
            f"--from and --output are the same file ({args.source}): its problems are all there already, so "
            "nothing would be measured; write the new run to another file"
        )
    try:
        ds = read_dataset(args.source)
    except DatasetFormatError as e:
        raise UsageError(f"--from: {e}") from None
    if not ds.problems:
        raise UsageError(f"--from {args.source}: the dataset holds no problem to collect")
    return _run(args, list(ds.problems), seed=None)


def _cmd_create_validation(args: argparse.Namespace) -> int:
    from torch_diode.dataset import read_dataset

    _check_collect_flags(args)
    given = _sampler_given(args) if args.shapeset else []
    if given:  # they would be ignored: the shape set's entries are taken as they are
        raise UsageError(
            f"--shapeset takes the shape set's 'val' entries, so {', '.join(given)} (sampling only) would be "
            f"ignored; drop {'them' if len(given) > 1 else 'it'}, or drop --shapeset to sample"
        )
    _sampler_defaults(args)
    if args.num_shapes < 0:  # a shape set's entries are sliced with it: -1 would take all but the last
        raise UsageError(f"--num-shapes/-n: must be a non-negative integer, got {args.num_shapes}")
    out = check_output("--output", args.output, inputs=args.train)  # it is appended to: a training file would grow
    train_problems: set[Problem] = set()
    train_seeds: set[int] = set()
    for path in args.train:
        try:
            ds = read_dataset(path, recover=True)
        except DatasetFormatError as e:
            raise UsageError(str(e)) from None
        train_problems |= set(ds.problems)
        train_seeds |= {s.seed for s in ds.sources if s.seed is not None}
    if args.seed in train_seeds and not args.shapeset:
        raise UsageError(
            f"--seed {args.seed} is a seed the training file(s) were sampled with ({sorted(train_seeds)}); "
            f"use another seed for validation"
        )
    taken = {p.shape for p in train_problems}
    if out.exists() and out.stat().st_size > 0:  # a resumed run: what it holds must be disjoint too
        try:
            held = read_dataset(out, format=args.format, recover=True).problems
        except DatasetFormatError as e:
            raise UsageError(f"--output: {e}") from None
        overlap = sorted((p for p in held if p.shape in taken), key=str)
        if overlap:
            raise UsageError(
                f"--output {out} already holds {plural(len(overlap), 'problem')} whose shapes the training file(s) hold "
                f"too (e.g. {overlap[0]}): it is not a validation set for them; write the validation set to a new "
                "file"
            )
    if args.shapeset:
        candidates = _load_shapeset(args.shapeset).problems(split="val", ops=_csv(args.ops), dtypes=_csv(args.dtypes))
        problems = [p for p in candidates if p.shape not in taken][: args.num_shapes]
        short = "the shape set's other 'val' entries are training shapes (or filtered out)"
    else:
        # The draws skip every shape training has, in any layout, and go on until -n are found: the
        # same seed gives the same problems, and those of a smaller -n first.
        problems, short = _sample(
            args,
            exclude_shapes=train_problems,
            excluded_are="training shapes (of --train, in any layout)",
            short_ok=True,
        )
    log.info(
        "validation: %s, disjoint from %s",
        plural(len(problems), "problem"),
        plural(len(train_problems), "training problem"),
    )
    if len(problems) < args.num_shapes:
        log.warning(
            "validation: %s, not the %d asked for: %s", plural(len(problems), "problem"), args.num_shapes, short
        )
    return _run(args, problems, seed=None if args.shapeset else args.seed)  # a shape set's entries: not sampled


def _check_shapeset_output(path: str) -> None:
    """A shape set is JSON; an existing file is replaced only when it is a shape set itself."""
    from torch_diode.shapes.shapeset import ShapeSetError, load_shapeset

    out = check_output("--output", path, suffixes=(".json",))
    if out.exists():
        try:
            load_shapeset(out)
        except ShapeSetError:
            raise UsageError(
                f"--output {out}: exists and is not a shape set (a dataset?); it is left as is: write elsewhere"
            ) from None


def _cmd_shapes(args: argparse.Namespace) -> int:
    from torch_diode.shapes.models import MODEL_NAMES, model_entries
    from torch_diode.shapes.shapeset import save_shapeset

    if args.list:
        print("\n".join(MODEL_NAMES))
        return 0
    if args.fit:
        from torch_diode.shapes.sampling import REAL_TAGS, fit_log_normal

        entries = _load_shapeset(args.fit).select(tags=REAL_TAGS)
        try:
            fitted = fit_log_normal(entries)
        except ValueError as e:
            raise UsageError(str(e)) from None
        print(json.dumps({k: v.__dict__ for k, v in fitted.items()}, indent=2))
        return 0
    if args.real_models:
        from torch_diode.shapes.catalog import DESCRIPTION, build_real_models

        entries = build_real_models()
        description = DESCRIPTION
    else:
        for flag, value, least in (("--batch", args.batch, 1), ("--tokens", args.tokens, 0), ("--past", args.past, 0)):
            if value < least:
                raise UsageError(f"{flag}: must be at least {least}, got {value}")
        if not _csv(args.dtypes):  # an empty list would mean each model's own default, silently
            raise UsageError(f"--dtypes {args.dtypes!r}: give at least one dtype (e.g. bfloat16)")
        try:
            entries = model_entries(
                args.model, batch=args.batch, tokens=args.tokens, past_len=args.past, dtypes=_csv(args.dtypes)
            )
        except ValueError as e:
            raise UsageError(str(e)) from None
        description = (
            f"GEMMs of {args.model} (batch {args.batch}, tokens {args.tokens}, past {args.past}) from `diode shapes`"
        )
    if args.output:
        _check_shapeset_output(args.output)
        save_shapeset(entries, args.output, description=description)
        print(f"{args.output}: {plural(len(entries), 'shape')}")
    else:
        print(json.dumps([e.to_dict() for e in entries], indent=1))
    return 0
