"""``diode train``, ``diode validate-model`` and ``diode validate-max-autotune``."""

from __future__ import annotations

import argparse
import logging
import math
import sys
from pathlib import Path
from typing import Any

from torch_diode.cli import UsageError, check_output

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    from torch_diode.ranking import CLIFF_GUARD, DIVERSITY

    t = subparsers.add_parser(
        "train",
        help="train a kernel-time model on one GPU's dataset",
        description="Train a kernel-time model on the timings of one GPU: an MLP ensemble predicting log "
        "kernel time per (problem, choice), ATen included, with a neighbour memory of the training problems, "
        "an ATen head and a ranking forest that re-ranks the networks' shortlist (each optional, below). "
        "Problems, never rows, are split into training and validation sets; with --early-stopping the best "
        "validation epoch is kept (off by default: the last epoch is kept). The same --seed gives the same model, bit for bit, on the same machine and "
        "thread count.",
    )
    _add_dataset_args(t)
    t.add_argument("--model", required=True, metavar="OUT", help="model file to write (.safetensors)")
    t.add_argument(
        "--held-out-dataset",
        nargs="+",
        metavar="F",
        help="a validation set of the same GPU with none of the training problems' shapes, in any layout (diode "
        "create-validation), "
        "measured with the finished model; its metrics become the model's held-out metrics (the manifest's). "
        "It plays no part in training or early stopping",
    )
    _add_compile_cost_arg(
        t, f"with --held-out-dataset: its metrics rank {_RANKED}. Without --held-out-dataset it has no effect"
    )
    t.add_argument("--model-type", choices=("base", "deep"), default="deep", help="architecture (default: deep)")
    t.add_argument("--hidden", type=int, help="hidden width (default: the model type's preset)")
    t.add_argument("--depth", type=int, help="hidden layers / residual blocks (default: the model type's preset)")
    t.add_argument("--ensemble-size", type=int, default=4, help="ensemble members (default: 4)")
    t.add_argument("--batch-size", type=int, default=64, help="problems per optimiser step (default: 64)")
    t.add_argument(
        "--max-choices-per-problem", type=int, default=256, help="choices sampled per problem and visit (default: 256)"
    )
    t.add_argument("--num-epochs", type=int, default=160, help="maximum epochs (default: 160)")
    t.add_argument("--learning-rate", type=float, default=1e-3, help="AdamW learning rate (default: 1e-3)")
    t.add_argument("--weight-decay", type=float, default=1e-5, help="AdamW weight decay (default: 1e-5)")
    t.add_argument(
        "--seed", type=_seed, default=0, help="seed of the split, initialisation and sampling, 0 to 2^63-1 (default: 0)"
    )
    t.add_argument(
        "--val-fraction",
        type=float,
        default=0.1,
        help="share of shapes held out, each with all its layouts (default: 0.1)",
    )
    t.add_argument("--patience", type=int, default=20, help="epochs without improvement before stopping (default: 20)")
    t.add_argument(
        "--ema-decay", type=float, default=0.98, help="per-step decay of the averaged weights that ship (default: 0.98)"
    )
    t.add_argument("--ranking-weight", type=float, default=0.0, help="weight of the listwise ranking loss (default: 0)")
    t.add_argument(
        "--pairwise-weight",
        type=float,
        default=3.0,
        help="weight of the top-weighted pairwise ranking loss (default: 3)",
    )
    t.add_argument(
        "--regression-expectile",
        type=float,
        default=0.5,
        help="expectile of the regression term: above 0.5, rows measured slower than predicted weigh more, "
        "so choices whose times scatter are placed later (default: 0.5, plain MSE)",
    )
    t.add_argument(
        "--aten-weight",
        type=float,
        default=3.0,
        help="weight of ATen rows (MSE) and of pairs with an ATen choice (pairwise) against Triton's (default: 3)",
    )
    t.add_argument(
        "--neighbours",
        type=int,
        default=8,
        help="nearest training problems whose measured order is blended into a prediction (the neighbour "
        "memory saved in the model file); 0: the network alone (default: 8)",
    )
    t.add_argument(
        "--neighbour-bandwidth",
        type=float,
        default=3.0,
        help="distance scale of a neighbour's weight exp(-d^2/bandwidth^2) (default: 3)",
    )
    t.add_argument(
        "--neighbour-prior",
        type=float,
        default=1.0,
        help="how many neighbour votes the network's own order counts for (default: 1)",
    )
    t.add_argument(
        "--neighbour-alignment",
        type=float,
        default=4.0,
        help="added to a neighbour's squared distance per operand whose rows are 16-byte aligned in one "
        "problem and not the other; 0: alignment ignored (default: 4)",
    )
    t.add_argument(
        "--aten-head-blend",
        type=float,
        default=0.75,
        help="weight of the ATen head (a problem-level model of ATen's time against the best Triton config's) "
        "in the call between the two; 0: no head (default: 0.75)",
    )
    t.add_argument(
        "--forest-trees",
        type=int,
        default=192,
        help="boosting rounds of the ranking forest (oblivious trees, LambdaRank) that re-ranks the network's "
        "shortlist; 0: no forest (default: 192)",
    )
    t.add_argument("--forest-depth", type=int, default=6, help="levels per forest tree (default: 6)")
    t.add_argument("--forest-learning-rate", type=float, default=0.22, help="forest shrinkage (default: 0.22)")
    t.add_argument(
        "--forest-blend",
        type=float,
        default=0.5,
        help="weight of the forest's order against the network's over the shortlist, 0..1 (default: 0.5)",
    )
    t.add_argument(
        "--forest-shortlist",
        type=int,
        default=512,
        help="how many of the network's best candidates the forest re-ranks (default: 512)",
    )
    t.add_argument(
        "--network-shortlist",
        type=int,
        default=128,
        help="past this many candidates of a problem, the first ensemble member scores them all and "
        "the others only its best this many (and ATen); 0: every member scores every candidate (default: 128)",
    )
    t.add_argument(
        "--screen-hidden",
        type=int,
        metavar="H",
        help="also train a one-member network of width H that scores every candidate in the --network-shortlist "
        "cascade instead of the first member, so that every member scores only its shortlist: a wider ensemble "
        "(--hidden) for little more scoring time (default: none; 0: none, and with --init-from M, leave M's "
        "screen out)",
    )
    t.add_argument(
        "--init-from",
        metavar="M",
        help="fine-tune: start from model M's networks and normalisation (a model file or a registered model's "
        "name, e.g. NVIDIA-H200-matmul) instead of a fresh initialisation "
        "(e.g. a shipped model of a similar GPU, trained further on this GPU's data; usually with a lower "
        "--learning-rate). M's network must be of this training's --model-type, --hidden, --depth and "
        "--ensemble-size, and its screen, if it has one, of --screen-hidden (0: train without it; the refusal names the "
        "flags M needs); the memory and ATen head are built from the data as "
        "always, and the ranking forest too unless --init-forest",
    )
    t.add_argument(
        "--init-forest",
        action="store_true",
        help="with --init-from M: start the ranking forest from M's as well: its trees kept, --forest-trees more "
        "boosted on this data from its scores (on an H100, from the H200 model: a 0.85-point faster top-1 pick, "
        "benchmarks/models/cv-session57.md)",
    )
    t.add_argument(
        "--init-forest-from",
        metavar="M",
        help="start the ranking forest from model M's (a model file or a registered model's name): its trees "
        "kept, --forest-trees more boosted on this data from its scores, whatever the networks start from (the "
        "shipped H200 model: networks from scratch, session 54's forest continued by 288 trees; "
        "benchmarks/models/cv-session60.md). Not with --init-forest",
    )
    t.add_argument(
        "--early-stopping",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="keep the best validation epoch and stop after --patience epochs without improvement; with "
        "--no-early-stopping, train --num-epochs and keep the last (the validation problems only measure)",
    )
    t.add_argument("--device", default="auto", help="auto (CUDA when available; the default), cpu or cuda[:N]")
    t.add_argument(
        "--threads",
        type=int,
        help="CPU threads for training (default: torch's default; pin it for bit-identical reruns)",
    )
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.add_argument("--report", metavar="JSON", help="also write the training report (history, held-out metrics)")
    t.set_defaults(func=_train, flags={a.dest: a.option_strings[0] for a in t._actions if a.option_strings})

    v = subparsers.add_parser(
        "validate-model",
        help="pointwise accuracy of a model on a dataset (MSE, RMSE, worst predictions)",
        description="Predict every measured (problem, choice) of a dataset that the choices handler would "
        "consider (--max-compile-cost) and print the MSE and RMSE of log time, exp(RMSE) as a multiplicative "
        "error, and the N worst predictions.",
    )
    v.add_argument("--model", required=True, help="model file (.safetensors) or a registered model's name")
    _add_dataset_args(v)
    v.add_argument("--top-n-worst", type=int, default=10, metavar="N", help="worst predictions to list (default: 10)")
    _add_exclude_trained_arg(v)
    v.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: the metrics, the hardware, model (sha256, architecture), dataset and "
        "trained_shapes keys of validate-max-autotune's report, and candidates (its max_compile_cost)",
    )
    _add_compile_cost_arg(
        v,
        "predict only the choices the choices handler considers with the same option: Triton configs over this "
        "compile cost are left out of the MSE, RMSE and worst predictions (default: the handler's, {default:g}). "
        "'none' predicts every measured choice",
    )
    v.set_defaults(func=_validate_model)

    a = subparsers.add_parser(
        "validate-max-autotune",
        help="ranking quality of a model: regret@k, recall@k, Kendall's tau, vs max-autotune and ATen",
        description="Rank every problem's measured choices with the model and report, per op and "
        "overall, regret@k (k = 1, 3, 5, 10: geomean, p95, max), recall@k, Kendall's tau, and the "
        "model's pick against stock max-autotune's pick and against ATen (definitions: the Metrics section of the torch-diode README).",
    )
    a.add_argument("--model", required=True, help="model file (.safetensors) or a registered model's name")
    _add_dataset_args(a)
    a.add_argument(
        "--max-autotune-solution",
        metavar="S",
        help="stock max-autotune's picks: a solution JSON (format torch-diode-max-autotune-solution) or "
        "a dataset collected by max-autotune (its fastest record per problem is the pick)",
    )
    _add_compile_cost_arg(a, f"consider {_RANKED}")
    a.add_argument(
        "--min-num-warps",
        type=_min_num_warps,
        default=None,
        metavar="W",
        help="consider only the choices the choices handler considers with its option min_num_warps=W: Triton "
        "configs of fewer warps are not ranked (default: all; 4 leaves out one- and two-warp configs); regret "
        "is still against the best of every measured choice, so this gives the option's cost",
    )
    a.add_argument(
        "--diversity",
        type=_penalty,
        default=DIVERSITY,
        metavar="D",
        help="the model's order, as the choices handler's option of that name: each place after the first "
        "goes to the lowest predicted log time plus D per better-placed config differing from it only in "
        f"num_stages (default {DIVERSITY:g}; 0: by prediction alone). regret@1 does not depend on it",
    )
    a.add_argument(
        "--cliff-guard",
        type=_penalty,
        default=CLIFF_GUARD,
        metavar="G",
        help="the model's order, as the choices handler's option of that name: a one-warp Triton config's "
        f"predicted log time counts G more when an operand's rows are not 16-byte aligned (default {CLIFF_GUARD:g}; "
        "0: off)",
    )
    _add_exclude_trained_arg(a)
    a.add_argument("--output", metavar="REPORT.json", help="write the JSON report, a .md table and a .png beside it")
    a.set_defaults(func=_validate_max_autotune)


def _add_exclude_trained_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--exclude-trained",
        action="store_true",
        help="leave out the dataset's problems that have the shape (op, sizes, dtype; any layout) of a problem the "
        "model was trained on, as its file lists them (default: score them, with a warning: their figures are not "
        "held out)",
    )


def _seed(raw: str) -> int:
    try:
        v = int(raw)
    except ValueError:
        v = -1
    if not 0 <= v < 2**63:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to 2^63-1, got {raw!r}")
    return v


def _penalty(raw: str) -> float:
    from torch_diode.ranking import check_penalty

    try:
        return check_penalty(float(raw), "value")
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {raw!r}") from None


def _min_num_warps(raw: str) -> int | None:
    from torch_diode.ranking import check_min_num_warps

    try:
        return check_min_num_warps(int(raw))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {raw!r}") from None


#: What --max-compile-cost does where choices are ranked (``{default}``: the handler's default).
_RANKED = (
    "only the choices the choices handler considers with the same option: Triton configs over this compile "
    "cost are not ranked (default: the handler's, {default:g}); regret is still against the best of every measured "
    "choice. 'none' ranks every measured choice"
)


def _add_compile_cost_arg(p: argparse.ArgumentParser, text: str) -> None:
    """``--max-compile-cost``, with the help ``text`` saying what it does in this command (``{default:g}``:
    the choices handler's default)."""
    from torch_diode.config import DiodeOptions

    default = DiodeOptions().max_compile_cost
    p.add_argument(
        "--max-compile-cost",
        type=_optional_cost,
        default=default,
        metavar="C|none",
        help=text.format(default=default),
    )


def _optional_cost(raw: str) -> float | None:
    if raw.strip().lower() in ("none", "off"):
        return None
    try:
        v = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number or 'none', got {raw!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number or 'none', got {raw!r}")
    return v


def _add_dataset_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--dataset", nargs="+", metavar="F", help="dataset file(s) (.msgpack or .json)")
    g.add_argument("--data-dir", metavar="D", help="read every dataset file below this directory")
    p.add_argument(
        "--file-extensions", default="msgpack,json", help="with --data-dir: extensions to read (default: msgpack,json)"
    )


def _dataset_files(args: argparse.Namespace) -> list[Path]:
    """The files ``--dataset`` names, or those ``--data-dir`` holds."""
    from torch_diode.dataset import find_dataset_files

    if args.dataset:
        for f in args.dataset:
            if Path(f).is_dir():
                raise UsageError(
                    f"--dataset {f}: is a directory, not a dataset file; pass --data-dir {f} to read every dataset "
                    "file below it, or name the files"
                )
        return [Path(f) for f in args.dataset]
    d = Path(args.data_dir)
    if not d.is_dir():
        raise UsageError(f"--data-dir {d}: not a directory")
    files = find_dataset_files(d, _extensions(args))
    if not files:
        raise UsageError(f"--data-dir {d}: no files with extension(s) {', '.join(_extensions(args))}")
    return files


def _extensions(args: argparse.Namespace) -> list[str]:
    return [e.strip() for e in args.file_extensions.split(",") if e.strip()]


def _load_dataset(args: argparse.Namespace, files: list[Path] | None = None) -> Any:
    from torch_diode.dataset import DatasetFormatError, TruncatedFileError
    from torch_diode.errors import DamagedFileError

    files = _dataset_files(args) if files is None else files
    try:
        return _read_files(files)
    except (TruncatedFileError, DamagedFileError):  # a dataset cut short or damaged: its message says what to do
        raise
    except DatasetFormatError as e:
        if args.dataset:
            raise
        exts = "/".join(_extensions(args))
        raise UsageError(
            f"{e}; --data-dir reads every {exts} file below {args.data_dir}: move the files that are not "
            "datasets out of it, narrow --file-extensions, or name the datasets with --dataset"
        ) from None


def _read_files(files: list[Any], *, what: str = "the dataset") -> Any:
    """One GPU's timing records from ``files``; empty or mixed-GPU data is a usage error."""
    from torch_diode.dataset import read_datasets

    ds = read_datasets([Path(f) for f in files], allow_mixed_hardware=True)  # refused just below, in CLI terms
    if len(ds) == 0:
        raise UsageError(f"{', '.join(map(str, files))}: no timing records")
    if len(ds.hardware_keys) != 1:
        raise UsageError(
            f"{what} mixes the timings of several GPUs {ds.hardware_keys}; a model is trained and validated for "
            "one GPU: give only that GPU's files (`diode data stats` shows each file's hardware)"
        )
    return ds


def _train(args: argparse.Namespace) -> int:
    from torch_diode._text import plural
    from torch_diode.model import save_model
    from torch_diode.train import TrainOptions, train

    files = _dataset_files(args)
    inputs = [*files, *map(Path, args.held_out_dataset or ())]
    # the model training starts from too, a registered name's file included: replacing it would lose it
    inputs += _start_files(args.init_from, args.init_forest_from)
    _check_not_installed(args.model)
    check_output("--model", args.model, inputs=inputs, suffixes=(".safetensors",))
    if args.report:
        check_output("--report", args.report, inputs=[*inputs, Path(args.model)], suffixes=(".json",))
    try:
        opts = TrainOptions(
            model_type=args.model_type,
            hidden=args.hidden,
            depth=args.depth,
            ensemble_size=args.ensemble_size,
            batch_size=args.batch_size,
            max_choices_per_problem=args.max_choices_per_problem,
            num_epochs=args.num_epochs,
            learning_rate=args.learning_rate,
            weight_decay=args.weight_decay,
            seed=args.seed,
            val_fraction=args.val_fraction,
            patience=args.patience,
            ranking_weight=args.ranking_weight,
            pairwise_weight=args.pairwise_weight,
            regression_expectile=args.regression_expectile,
            aten_weight=args.aten_weight,
            neighbours=args.neighbours,
            neighbour_bandwidth=args.neighbour_bandwidth,
            neighbour_prior=args.neighbour_prior,
            neighbour_alignment=args.neighbour_alignment,
            aten_head_blend=args.aten_head_blend,
            forest_trees=args.forest_trees,
            forest_depth=args.forest_depth,
            forest_learning_rate=args.forest_learning_rate,
            forest_blend=args.forest_blend,
            forest_shortlist=args.forest_shortlist,
            network_shortlist=args.network_shortlist,
            screen_hidden=args.screen_hidden,
            init_from=args.init_from,
            init_forest=args.init_forest,
            init_forest_from=args.init_forest_from,
            early_stopping=args.early_stopping,
            ema_decay=args.ema_decay,
            device=args.device,
            num_threads=args.threads,
            progress=not args.no_progress and sys.stderr.isatty(),
        )
    except (TypeError, ValueError) as e:
        raise UsageError(_in_flags(str(e), args.flags)) from None
    ds = _load_dataset(args, files)
    held_out = None
    if args.held_out_dataset:
        from torch_diode.train import check_held_out

        held_out = _read_files(args.held_out_dataset, what="--held-out-dataset")
        try:
            check_held_out(ds, held_out)
        except ValueError as e:
            raise UsageError(str(e)) from None
    log.info("training on %s", ds)
    model, report = train(
        ds,
        opts,
        on_epoch=None if opts.progress else _log_epoch,
        held_out=held_out,
        held_out_max_compile_cost=args.max_compile_cost,
    )
    path = save_model(model, args.model)
    o = report.held_out.get("overall", {})
    lines = [
        f"wrote {path} ({model.arch.model_type}, {plural(model.arch.members, 'member')} of width {model.arch.hidden}"
        + (f", a screening network of width {model.screen.arch.hidden}" if model.screen is not None else "")
        + (f", a ranking forest of {plural(model.forest.options.trees, 'tree')}" if model.forest is not None else "")
        + f", sha256 {model.model_hash[:16]})",
        f"  {report.train_problems:,} training / {plural(report.val_problems, 'validation problem')}, "
        f"{plural(report.train_rows, 'row')}; {plural(report.epochs_run, 'epoch')} (best {report.best_epoch}) "
        f"in {report.seconds:.1f} s on {report.device}",
    ]
    if o:
        src = (
            f" ({plural(o['problems'], 'problem')} of --held-out-dataset)"
            if held_out is not None
            else " (the finished model)"
        )
        lines.append(
            f"  held out{src}: regret@1 geomean {o['regret@1']['geomean']:.4f} p95 {o['regret@1']['p95']:.4f}, "
            f"regret@5 geomean {o['regret@5']['geomean']:.4f} p95 {o['regret@5']['p95']:.4f}, recall@5 {o['recall@5']:.3f}"
        )
    print("\n".join(lines))
    if args.report:
        from torch_diode.evaluate import report_json

        Path(args.report).write_text(report_json(report.to_dict()))
    return 0


def _start_files(*refs: str | None) -> list[Path]:
    """The files of the models a training starts from (``--init-from``, ``--init-forest-from``):
    a file as given, a registered name's installed or cached file (the registry's resolution, no
    download). A reference that resolves to no file adds nothing: the training says why it cannot
    start from it."""
    from torch_diode.errors import DiodeError
    from torch_diode.registry import resolve

    out = []
    for ref in (r for r in refs if r is not None):
        try:
            out.append(resolve(ref, local_files_only=True))
        except (DiodeError, ValueError, TypeError, OSError):  # missing, unknown, not downloaded: train() says so
            pass
    return out


def _check_not_installed(model: str) -> None:
    """Refuse a ``diode train --model`` that is the installed file of a registered model (a models
    package's weights, ``torch_diode_models``' among them): the new model would replace it for every
    user of that name, and its manifest's checksum would then refuse it."""
    from torch_diode.cli import same_file
    from torch_diode.registry import list_available_models

    for entry in list_available_models():
        installed = entry.packaged_path
        if installed is not None and installed.is_file() and same_file(model, installed):
            raise UsageError(
                f"--model {model} is the installed file of the registered model {entry.name}, listed by "
                f"{entry.source}: writing it would replace that model for everyone who uses it, and its manifest's "
                "sha256 would then refuse the file; write the new model elsewhere (e.g. --model "
                f"{entry.name}-tuned.safetensors)"
            )


def _in_flags(message: str, flags: dict[str, str]) -> str:
    """A ``TrainOptions`` message (``batch_size: must be ...``) in the command line's terms
    (``--batch-size: must be ...``)."""
    field, sep, rest = message.partition(": ")
    dest = {"num_threads": "threads"}.get(field, field.replace(" ", "_"))  # "forest shortlist": forest_shortlist
    return f"{flags[dest]}: {rest}" if sep and dest in flags else message


def _log_epoch(e: dict[str, float]) -> None:
    msg = f"epoch {int(e['epoch'])}: loss {e['loss']:.4f}"
    if "val_log_regret1" in e:
        msg += (
            f", the networks alone on the validation problems: regret@1 {math.exp(e['val_log_regret1']):.4f}, "
            f"regret@5 {math.exp(e['val_log_regret5']):.4f}, "
            f"recall@1 {e['val_recall1']:.3f}, rmse {math.sqrt(e['val_mse']):.4f}"
        )
    log.info(msg)


def _load_model(ref: str) -> Any:
    """A model file, or the file of a registered model's name (as ``--init-from`` and the handler take)."""
    from torch_diode.model import load_model
    from torch_diode.registry import resolve

    return load_model(resolve(ref, local_files_only=True))


def _check_hardware(model: Any, ds: Any) -> None:
    if ds.hardware != model.hardware:
        raise UsageError(
            f"the model is for {model.hardware} but the dataset holds {ds.hardware} timings; use a model of that GPU"
        )


def _held_out(model: Any, ds: Any, exclude: bool) -> tuple[Any, int]:
    """The dataset to score and how many problems ``--exclude-trained`` left out of it; warns on
    stderr about problems of a training problem's shape that are scored."""
    from torch_diode._text import plural
    from torch_diode.evaluate import trained_shapes_in

    trained, block = trained_shapes_in(model, ds)
    if exclude and not block["listed"]:
        raise UsageError(
            "--exclude-trained: the model file does not list the shapes it was trained on (files written before "
            "session 83 do not, the shipped models' among them); score it on a validation set made apart from its "
            "training data (diode create-validation --train ...), or retrain it"
        )
    if not trained:
        return ds, 0
    if exclude:
        rest = sorted(ds.measured_problems() - set(trained), key=str)
        if not rest:
            every = (
                "the dataset's only problem has"
                if len(trained) == 1
                else f"each of the dataset's {len(trained):,} problems has"
            )
            raise UsageError(
                f"--exclude-trained: {every} the shape of a problem the model was trained on; nothing is left to score"
            )
        return ds.select_problems(rest), len(trained)
    has, it = ("has", "it") if len(trained) == 1 else ("have", "them")
    print(
        f"warning: {plural(len(trained), 'problem')} of the dataset (e.g. {trained[0].key()}) {has} the shape of a "
        f"problem the model was trained on: figures over {it} are not held out; --exclude-trained leaves {it} out",
        file=sys.stderr,
    )
    return ds, 0


def _validate_model(args: argparse.Namespace) -> int:
    from torch_diode._text import plural
    from torch_diode.evaluate import regression_report, report_json, trained_shapes_note

    if args.top_n_worst < 0:
        raise UsageError(f"--top-n-worst: must be >= 0, got {args.top_n_worst}")
    model = _load_model(args.model)
    ds = _load_dataset(args)
    _check_hardware(model, ds)
    ds, excluded = _held_out(model, ds, args.exclude_trained)
    report = regression_report(model, ds, max_compile_cost=args.max_compile_cost, top_n_worst=args.top_n_worst)
    if args.exclude_trained:
        report["trained_shapes"]["excluded"] = excluded
    if args.json:
        print(report_json(report), end="")
        return 0
    print(f"{plural(report['rows'], 'prediction')} of {model.hardware} model {model.model_hash[:16]}")
    print(f"MSE (log time):  {report['mse']:.5f}")
    print(f"RMSE (log time): {report['rmse']:.5f}")
    print(f"RMSE(exp):       {report['rmse_exp']:.4f}  (typical multiplicative error of a predicted time)")
    print(trained_shapes_note(report["trained_shapes"]), end="")
    worst = report["worst"]
    if worst:
        print(f"{plural(len(worst), 'worst prediction')}:")
        for w in worst:
            off = w["ratio"]  # predicted / measured
            how = f"{off:,.2f}x too high" if off >= 1 else f"{1 / off:,.2f}x too low"
            print(
                f"  {w['problem']} | {w['choice']} | predicted {w['predicted_us']:.2f} us, "
                f"measured {w['measured_us']:.2f} us ({how})"
            )
    return 0


def _validate_max_autotune(args: argparse.Namespace) -> int:
    from torch_diode._text import plural
    from torch_diode.evaluate import (
        evaluate_model,
        markdown_table,
        picks_of_other_problems,
        read_max_autotune_solution,
        write_report,
    )

    files = _dataset_files(args)
    if args.output:
        inputs = [*files, args.model, *([args.max_autotune_solution] if args.max_autotune_solution else [])]
        out = check_output("--output", args.output, inputs=inputs, suffixes=(".json",))
        for beside in (".md", ".png"):  # written next to it
            check_output("--output", out.with_suffix(beside), inputs=inputs)
    model = _load_model(args.model)
    ds = _load_dataset(args, files)
    _check_hardware(model, ds)
    whole = ds
    ds, excluded = _held_out(model, ds, args.exclude_trained)
    stock = None
    if args.max_autotune_solution:
        try:
            stock = read_max_autotune_solution(args.max_autotune_solution, hardware=ds.hardware)
        except ValueError as e:
            raise UsageError(str(e)) from None
        if excluded and picks_of_other_problems(ds, stock) and not picks_of_other_problems(whole, stock):
            raise UsageError(
                f"--max-autotune-solution {args.max_autotune_solution}: it has no pick for any of the "
                f"{plural(len(ds.measured_problems()), 'problem')} that --exclude-trained leaves (its picks are of "
                "problems of the model's training shapes); pass stock's picks of the others, or leave out "
                "--exclude-trained"
            )
    report, evals = evaluate_model(
        model,
        ds,
        stock=stock,
        max_compile_cost=args.max_compile_cost,
        min_num_warps=args.min_num_warps,
        diversity=args.diversity,
        cliff_guard=args.cliff_guard,
    )
    if args.max_autotune_solution:
        report["max_autotune_solution"] = str(args.max_autotune_solution)
    if args.exclude_trained:
        report["trained_shapes"]["excluded"] = excluded
    print(markdown_table(report), end="")
    if args.output:
        for p in write_report(report, evals, args.output):
            print(f"wrote {p}")
    return 0
