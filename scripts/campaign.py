#!/usr/bin/env python3
"""Data campaign for one GPU: plan the seeded problem lists, collect them in resumable chunks.

    # once, on any machine (writes data/<KEY>/plan.json; the same seed gives the same lists)
    python scripts/campaign.py plan --hardware NVIDIA-H100

    # on the GPU machine, as often as needed (each run resumes; stop it any time)
    python scripts/campaign.py run --hardware NVIDIA-H100 --split train --time-budget 480
    python scripts/campaign.py run --hardware NVIDIA-H100 --split val --time-budget 480
    python scripts/campaign.py run --hardware NVIDIA-H100 --split val-stock --time-budget 120

    # anywhere: what is collected so far, and the plan's problem distribution as a PNG
    python scripts/campaign.py status --hardware NVIDIA-H100
    python scripts/campaign.py plot --hardware NVIDIA-H100

    # anywhere with triton, once val.msgpack has problems: stock max-autotune's pick per validation problem
    # (Inductor's DEFAULT candidates looked up in the full-space timings) -> val-stock-picks.json;
    # picked in the timings they are scored in, these favour stock (the val-stock split does not)
    python scripts/campaign.py stock --hardware NVIDIA-H100

    # anywhere with the GPU machine's Triton: compile the next problems' kernels into a pack for a
    # chunk to carry (README, "Data campaign"); before a chunk, what each pack still holds for a GPU
    python scripts/campaign.py precompile --hardware NVIDIA-H100 --split train --fill --output P.tar.xz --cache-dir C
    python scripts/campaign.py packs --hardware NVIDIA-H200

Splits: ``train`` (ATen + a seeded sample of ``train_max_configs`` EXHAUSTIVE Triton configs per
problem, the sweep collector), ``repeat`` (every 20th collected training problem measured again,
same choices, into ``train-repeat.msgpack``: the repeatability check), ``val`` (ATen + the full EXHAUSTIVE space), ``val-stock`` (ATen +
Inductor's DEFAULT candidates of the validation problems, timed in a run of their own: the fastest
of these is stock max-autotune's pick made from its own benchmark, with the validation set's timer). ``--time-budget`` stops between problems once that
many seconds have passed (every finished problem is already flushed to disk), so one call fits a
10-minute GPU command; a problem still compiling (or timing) after ``--checkpoint`` seconds (60) has its timed
configs saved to ``<split>.msgpack.partial`` as it goes, so a problem longer than one command (a
full-space fp32 validation problem) is finished over several, never started over; a problem whose
saved parts hold kernels stopped by ``--compile-timeout``, or were timed by two or more runs (it
outlasted a resumed run), is resumed after every other problem (``--no-defer-stalled``: plan order).
The logic lives in ``torch_diode.collect``; this is a thin CLI.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import NoReturn

from torch_diode._text import NO_MATPLOTLIB, plural
from torch_diode.collect import CollectOptions
from torch_diode.collect.campaign import (
    PLAN_GROUPS,
    CampaignOptions,
    CampaignPlan,
    plan_campaign,
    problem_mix,
    unpack_chunk,
)
from torch_diode.dataset import read_dataset
from torch_diode.records import Problem

SPLITS = {
    "train": ("train.msgpack", "EXHAUSTIVE", "train"),
    "val": ("val.msgpack", "EXHAUSTIVE", "val"),
    "val-stock": ("val-stock.msgpack", "DEFAULT", "val"),
    "repeat": ("train-repeat.msgpack", "EXHAUSTIVE", "train"),
}
#: ``repeat`` re-measures every REPEAT_EVERY-th collected training problem (plan order), with the
#: training split's exact choices, in a later run: the data card's repeatability check.
REPEAT_EVERY = 20


def _dir(args: argparse.Namespace) -> Path:
    return Path(args.data_dir) / args.hardware


def _load_plan(args: argparse.Namespace) -> CampaignPlan:
    """data/<KEY>/plan.json; a missing or unreadable plan ends the command with one line (exit 2)."""
    path = _dir(args) / "plan.json"
    if not path.exists():
        data_dir = "" if args.data_dir == "data" else f" --data-dir {shlex.quote(args.data_dir)}"
        _fail(
            args,
            f"{path}: no plan for {args.hardware}; write it first: "
            f"python scripts/campaign.py{data_dir} plan --hardware {args.hardware}",
        )
    try:
        return CampaignPlan.load(path)
    except ValueError as e:  # not JSON, not a plan, another plan version
        _fail(args, str(e))


def _fail(args: argparse.Namespace, message: str) -> NoReturn:
    print(f"campaign.py {args.cmd}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _need_triton(args: argparse.Namespace) -> None:
    """End the command with one line (exit 2) when triton is not installed
    (:func:`torch_diode.inductor.compat.triton_missing`). Not for ``precompile``: it checks for
    itself, and names the GPU machine's version."""
    from torch_diode.inductor.compat import triton_missing

    missing = triton_missing()
    if missing is not None:
        _fail(args, missing)


def cmd_plan(args: argparse.Namespace) -> int:
    opts = CampaignOptions(
        seed=args.seed,
        train_one_misaligned=args.train_one_misaligned,
        train_output_misaligned=args.train_output_misaligned,
    )
    plan = plan_campaign(opts, args.shapeset)
    path = _dir(args) / "plan.json"
    if path.exists() and not args.replace:
        _refuse_another_plan(args, path, plan)
    path = plan.save(path)
    print(f"{path}: {len(plan.train)} training and {len(plan.val)} validation problems")
    for split in ("train", "val"):
        print(split, json.dumps(plan.mix(split)))
    return 0


#: The plan settings that ``campaign.py plan`` takes from its command line, with their flags.
_PLAN_FLAGS = {
    "seed": "--seed",
    "train_one_misaligned": "--train-one-misaligned",
    "train_output_misaligned": "--train-output-misaligned",
    "shapeset": "--shapeset",
}


def _refuse_another_plan(args: argparse.Namespace, path: Path, plan: CampaignPlan) -> None:
    """Writing a plan over one with other lists would leave the files collected for the old one
    out of step with it (the committed plans were grown with options the defaults do not have):
    refused unless it is the same plan, or ``--replace`` says so."""
    try:
        old = CampaignPlan.load(path)
    except ValueError as e:
        _fail(args, f"{path} exists and cannot be read ({e}); add --replace to write a new plan over it")
    if old.to_dict() == plan.to_dict():
        return
    was_set = {**old.options.__dict__, "shapeset": old.shapeset}
    now_set = {**plan.options.__dict__, "shapeset": plan.shapeset}
    differ = [k for k in was_set if was_set[k] != now_set[k]]
    was = ", ".join(f"{k}={was_set[k]!r}" for k in differ) or "other lists"
    again = " ".join(f"{_PLAN_FLAGS[k]} {was_set[k]}" for k in differ if k in _PLAN_FLAGS)
    how = f"rerun with its options ({again}) to write it again" if again else "its options cannot be given here"
    _fail(
        args,
        f"{path} exists with other lists ({was}): the files collected for it would no longer match; {how}, "
        "or add --replace to replace it",
    )


def _split_problems(args: argparse.Namespace, plan: CampaignPlan) -> list | None:
    """The split's problems in the order a run takes them (None: nothing to repeat yet)."""
    which = SPLITS[args.split][2]
    problems = plan.train if which == "train" else plan.val
    only = getattr(args, "only", None)
    if only is not None:
        if which != "train":
            print(
                f"--only {only}: the groups are the training split's; leave it out for --split {args.split}",
                file=sys.stderr,
            )
            return None
        problems = plan.group(only)
    max_gflop = getattr(args, "max_gflop", None)
    if max_gflop is not None:
        problems = [p for p in problems if p.flops <= max_gflop * 1e9]
    if args.split == "repeat":
        train_file = _dir(args) / SPLITS["train"][0]
        if not train_file.exists():
            print(f"{train_file}: no training problems collected yet; nothing to repeat", file=sys.stderr)
            return None
        done = read_dataset(train_file, recover=True).measured_problems()
        problems = [p for p in problems if p in done][::REPEAT_EVERY]
    if getattr(args, "reuse_window", 1) > 1:
        # Within each window of consecutive plan problems, problems that share compiled kernels
        # come one after another (their kernels are still in the cache of this machine's lease);
        # windows keep the plan's order, so a campaign stopped early still holds a broad mix.
        from torch_diode.collect.sweep import order_for_reuse

        w = args.reuse_window
        problems = [q for i in range(0, len(problems), w) for q in order_for_reuse(problems[i : i + w])]
    return problems


def _measured(out: Path) -> set:
    """The problems a split's file holds (none before its first chunk)."""
    return read_dataset(out, recover=True).measured_problems() if out.exists() else set()


def _collect_options(args: argparse.Namespace, plan: CampaignPlan) -> CollectOptions:
    _, space, _ = SPLITS[args.split]
    sweep: dict = {"seed": plan.options.seed}
    if args.split in ("train", "repeat"):
        if plan.options.train_max_configs:
            sweep["max_configs"] = plan.options.train_max_configs
        sweep["sample"] = plan.options.train_sample
        if plan.options.train_max_compile_cost:
            sweep["max_compile_cost"] = plan.options.train_max_compile_cost
    if getattr(args, "compile_workers", None) is not None:
        sweep["workers"] = args.compile_workers
    if getattr(args, "compile_timeout", None):
        sweep["compile_timeout_s"] = args.compile_timeout
    return CollectOptions(
        collector="sweep",
        search_space=space,
        hardware=args.hardware,
        seed=plan.options.seed,
        command=shlex.join(["python", *sys.argv]),
        progress=not getattr(args, "no_progress", True),
        sweep_options=tuple(sweep.items()),
        time_budget_s=getattr(args, "time_budget", 0) or None,
        workers=getattr(args, "workers", None),
        top_up=getattr(args, "top_up", False),
        checkpoint_s=getattr(args, "checkpoint", 0) or None,
        defer_stalled=not getattr(args, "no_defer_stalled", False),
    )


def _start(args: argparse.Namespace) -> tuple[CampaignPlan, list | None]:
    """Log lines with times; the plan and the split's problems in run order (as _split_problems)."""
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    plan = _load_plan(args)
    return plan, _split_problems(args, plan)


def cmd_run(args: argparse.Namespace) -> int:
    from torch_diode.collect import collect, partial_path
    from torch_diode.errors import Terminated

    _need_triton(args)
    plan, problems = _start(args)
    if problems is None:
        return 2
    if args.compile_workers is not None and args.compile_workers < 1:
        print(f"--compile-workers: must be at least 1, got {args.compile_workers}", file=sys.stderr)
        return 2
    out = _dir(args) / SPLITS[args.split][0]
    options = _collect_options(args, plan)
    if args.precompiled:
        from torch_diode.collect.precompile import cache_dir, install

        first: list = []
        for pack in args.precompiled:
            try:
                first += install(pack, cache_dir())
            except ValueError as e:
                print(f"--precompiled: {e}; its problems compile here as usual", file=sys.stderr)
        in_split = set(problems)
        ahead = [p for p in first if p in in_split]
        measured = _measured(out)
        left = sum(p not in measured for p in ahead)
        print(
            f"precompiled kernels installed for {plural(len(ahead), 'problem')} of this split, {left:,} of them not in "
            f"{out.name} yet: measured first",
            flush=True,
        )
        if ahead and not left:
            print(
                f"--precompiled: {out} holds every problem of the packs already, so none of their kernels is "
                f"used here (`campaign.py packs --hardware {args.hardware}` tells before a chunk)",
                file=sys.stderr,
            )
        taken = set(ahead)
        problems = ahead + [p for p in problems if p not in taken]
    # collect() resumes: its writer skips (and logs) the problems already in the file.
    try:
        s = collect(problems, options, out)
    except KeyboardInterrupt as e:  # Ctrl-C, campaign_gpu.sh's deadline (`timeout --signal=INT`), or SIGTERM
        partial = partial_path(out)
        kept = f", the timed parts of unfinished ones in {partial.name}" if partial.exists() else ""
        how = "terminated (SIGTERM)" if isinstance(e, Terminated) else "interrupted"
        print(f"{args.split}: {how}; every finished problem is in {out}{kept}: rerun to resume", file=sys.stderr)
        return 143 if isinstance(e, Terminated) else 130
    print(
        f"{args.split}: {s.problems_skipped} of {s.problems_total} problems were already collected; "
        f"+{s.problems_measured} problems, +{s.records} records in {s.elapsed_s:.1f} s "
        f"({s.records / max(s.elapsed_s, 1e-9):.1f} configs/s, compile time included)",
        flush=True,
    )
    return 0


def cmd_target(args: argparse.Namespace) -> int:
    """On the GPU machine: what its Triton puts into the sweep kernels' cache keys -> triton-target.json."""
    from torch_diode.collect.precompile import capture_target

    _need_triton(args)
    t = capture_target(args.hardware)
    path = t.save(args.output or _dir(args) / "triton-target.json")
    print(
        f"{path}: {t.gpu_name}, triton {t.triton_version} (target {t.key_id()}), sm_{t.arch}, torch {t.torch_version}, "
        f"template revision {t.revision}, {len(t.references)} reference kernels"
    )
    return 0


def cmd_precompile(args: argparse.Namespace) -> int:
    """Anywhere with the GPU machine's Triton version: compile the next problems' kernels for it."""
    from torch_diode.collect.precompile import Target, TargetMismatch, precompile, read_manifest
    from torch_diode.collect.runner import partial_choices
    from torch_diode.collect.sweep import SweepCollector

    if args.problems is None and not args.fill:
        print("precompile: give --problems N, --fill (until the pack is full), or both", file=sys.stderr)
        return 2
    if args.problems is not None and args.problems < 1:
        print(f"precompile: --problems must be at least 1, got {args.problems}", file=sys.stderr)
        return 2
    plan, problems = _start(args)
    if problems is None:
        return 2
    try:
        target = Target.load(args.target or _dir(args) / "triton-target.json")
    except ValueError as e:
        print(f"precompile: {e} (capture it on the GPU machine: campaign.py target)", file=sys.stderr)
        return 2
    if target.hardware != args.hardware:
        print(f"precompile: the target file is {target.hardware}'s, not {args.hardware}'s", file=sys.stderr)
        return 2
    out = _dir(args) / SPLITS[args.split][0]
    done = _measured(out) | set(partial_choices(out))
    pack = Path(args.output)
    packed: set = set()
    for other in sorted(pack.parent.glob("*.tar.xz")):  # the packs made before: their problems are taken
        if other != pack:
            try:
                packed |= {Problem.from_dict(d["problem"]) for d in read_manifest(other)["problems"]}
            except ValueError as e:
                print(f"precompile: ignoring {e}", file=sys.stderr)
    todo = [p for p in problems if p not in done and p not in packed]
    # From the end of the split's order: chunks compile from its start, so no problem is compiled twice.
    todo = todo[::-1][: args.problems]  # None with --fill alone: the whole queue, until the pack is full
    options = _collect_options(args, plan)
    collector = SweepCollector.from_options(options, hardware=args.hardware, **dict(options.sweep_options))
    try:
        s = precompile(
            todo,
            lambda p: [it.choice for it in collector.choices(p) if it.kind == "triton"],
            target,
            pack,
            cache_dir=args.cache_dir,
            workers=args.workers,
            max_bytes=int(args.max_mb * 2**20),
            progress=print,
            stop_when_full=args.fill,
        )
    except TargetMismatch as e:
        print(f"precompile: {e}", file=sys.stderr)
        return 2
    print(
        f"{pack}: {plural(len(s.problems), 'problem')}, {plural(s.kernels, 'kernel')} ({s.failed:,} failed to compile), "
        f"{s.pack_bytes / 2**20:.1f} MiB, {s.cpu_s:.0f} CPU-s of compiling in {s.wall_s:.0f} s; "
        f"{len(s.left_out)} left out by --max-mb"
    )
    return 0


def cmd_packs(args: argparse.Namespace) -> int:
    """Before a chunk: what each pack holds for this GPU (its plan's splits, what is still to
    measure, whether the pack's target is this GPU's), so a chunk does not carry a spent pack."""
    from torch_diode.collect.precompile import Target, read_manifest

    plan = _load_plan(args)
    splits = {"train": set(plan.train), "val": set(plan.val)}
    measured = {s: _measured(_dir(args) / SPLITS[s][0]) for s in splits}
    try:
        here = Target.load(_dir(args) / "triton-target.json").key_id()
    except ValueError:
        here = None
    packs = [Path(p) for p in args.packs] or sorted(Path(args.pack_dir).glob("*.tar.xz"))
    if not packs:
        print(f"packs: no pack given and none in {args.pack_dir}", file=sys.stderr)
        return 2
    rc = 0
    for pack in packs:
        try:
            m = read_manifest(pack)
        except ValueError as e:
            print(f"packs: {e}", file=sys.stderr)
            rc = 2
            continue
        probs = [Problem.from_dict(d["problem"]) for d in m["problems"]]
        parts = []
        for split, members in splits.items():
            inside = [p for p in probs if p in members]
            if inside:
                todo = sum(p not in measured[split] for p in inside)
                parts.append(f"{plural(len(inside), f'{split} problem')}, {todo:,} not in {SPLITS[split][0]} yet")
        other = sum(not any(p in members for members in splits.values()) for p in probs)
        if other:
            parts.append(f"{other} not in the plan")
        if here is None:
            fit = "target unknown here: no triton-target.json"
        elif m["target"] == here:
            fit = "installs here"
        else:
            fit = f"another target ({m['target']}, here {here}): compiles here"
        print(f"{pack}: {m['hardware']}'s pack, {fit}; " + "; ".join(parts))
    return rc


def cmd_status(args: argparse.Namespace) -> int:
    from torch_diode.collect import partial_choices, resumed_problems, stalled_problems

    plan = _load_plan(args)
    report: dict = {"hardware": args.hardware, "plan": {"train": len(plan.train), "val": len(plan.val)}}
    for split, (fname, _, _) in SPLITS.items():
        path = _dir(args) / fname
        if not path.exists():
            report[split] = None
            continue
        ds = read_dataset(path, recover=True)
        probs = ds.measured_problems()
        per = [len(t.median_by_choice()) for t in ds.by_problem()]
        report[split] = {
            "file": str(path),
            "size_mb": round(path.stat().st_size / 1e6, 2),
            "problems": len(probs),
            "records": len(ds),
            "configs_per_problem_min": min(per) if per else 0,
            "configs_per_problem_median": sorted(per)[len(per) // 2] if per else 0,
            "failures": len(ds.failures),
            "mix": problem_mix(probs),
        }
        parts = partial_choices(path)  # checkpointed parts of unfinished problems
        if parts:
            report[split]["in_progress"] = {p.key(): len(c) for p, c in parts.items()}
        stalled = stalled_problems(path)  # resumed after every other problem
        if stalled:
            report[split]["compile_timeouts"] = {p.key(): n for p, n in stalled.items()}
        resumed = resumed_problems(path)  # also resumed after every other problem
        if resumed:
            report[split]["unfinished_after_runs"] = {p.key(): n for p, n in resumed.items()}
    print(json.dumps(report, indent=1))
    return 0


def cmd_stock(args: argparse.Namespace) -> int:
    """Stock max-autotune's picks of the validation problems, from the full-space validation set."""
    import torch

    from torch_diode.collect.campaign import stock_picks_from_full_space
    from torch_diode.evaluate import write_max_autotune_solution

    _need_triton(args)
    ds = read_dataset(_dir(args) / "val.msgpack")
    picks, notes = stock_picks_from_full_space(ds)
    for line in notes:
        print(f"left out: {line}")
    out = _dir(args) / "val-stock-picks.json"
    write_max_autotune_solution(picks, out, hardware=args.hardware)
    print(
        f"{out}: stock max-autotune's (DEFAULT) pick for {len(picks)} of {len(ds.problems)} validation problems, "
        f"candidates enumerated by torch {torch.__version__}, times from {ds.sources[0].gpu_name if ds.sources else '?'}"
    )
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    """The plan's problem distribution (and what is collected so far) as a PNG, for the data card."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _fail(args, NO_MATPLOTLIB)

    from torch_diode.collect.campaign import size_bucket

    plan = _load_plan(args)
    done: dict[str, set] = {}
    for split, (fname, _, which) in SPLITS.items():
        path = _dir(args) / fname
        if path.exists() and split in ("train", "val"):
            done[which] = read_dataset(path, recover=True).measured_problems()
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.2))
    colors = {"mm": "tab:blue", "addmm": "tab:orange", "bmm": "tab:green", "baddbmm": "tab:red"}
    for ax, (split, probs) in zip(axes[:2], (("train", plan.train), ("val", plan.val))):
        got = done.get(split, set())
        for op, color in colors.items():
            sel = [p for p in probs if p.op == op]
            ax.scatter([p.m for p in sel], [p.n * p.k for p in sel], s=10, color=color, alpha=0.35, label=op)
            ax.scatter(
                [p.m for p in sel if p in got],
                [p.n * p.k for p in sel if p in got],
                s=22,
                facecolors="none",
                edgecolors="black",
                linewidths=0.6,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("M")
        ax.set_ylabel("N x K")
        ax.set_title(f"{split}: {len(probs)} problems planned, {len(got)} collected (circled)")
        ax.legend(loc="lower right", fontsize=8)
    buckets = sorted({size_bucket(p) for p in plan.train + plan.val})
    x = range(len(buckets))
    for off, (split, probs) in zip((-0.2, 0.2), (("train", plan.train), ("val", plan.val))):
        counts = [sum(size_bucket(p) == b for p in probs) for b in buckets]
        axes[2].bar([i + off for i in x], counts, width=0.4, label=split)
    axes[2].set_xticks(list(x), buckets, rotation=30, ha="right", fontsize=8)
    axes[2].set_title("problems per size bucket")
    axes[2].legend()
    fig.suptitle(f"{args.hardware} campaign plan (seed {plan.options.seed})")
    fig.tight_layout()
    out = Path(args.output) if args.output else _dir(args) / "problem_mix.png"
    fig.savefig(out, dpi=90)
    print(out)
    return 0


def cmd_unpack(args: argparse.Namespace) -> int:
    try:
        written, removed = unpack_chunk(args.pack, args.data_dir, args.hardware)
    except ValueError as e:
        _fail(args, str(e))
    for f in removed:
        print(f"removed {f} (settled by the chunk)")
    print(f"{args.pack}: {plural(len(written), 'file')} written under {_dir(args)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="data")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan", help="write data/<KEY>/plan.json")
    p.add_argument("--hardware", required=True)
    p.add_argument("--seed", type=int, default=CampaignOptions().seed)
    p.add_argument("--shapeset", default="data/shapesets/real_models.json")
    p.add_argument(
        "--train-one-misaligned",
        type=int,
        default=0,
        metavar="N",
        help="N more training problems with exactly one operand whose rows are not 16-byte aligned, after the "
        "others (the same seed keeps the other lists as they are)",
    )
    p.add_argument(
        "--train-output-misaligned",
        type=int,
        default=0,
        metavar="N",
        help="N more training problems whose operands' rows are 16-byte aligned and whose output's are not, after "
        "those of --train-one-misaligned",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="write over an existing plan.json with other lists (refused otherwise: the files collected for it "
        "would no longer match it)",
    )
    p.set_defaults(func=cmd_plan)
    r = sub.add_parser("run", help="collect (resumes)")
    r.add_argument("--hardware", required=True)
    r.add_argument("--split", choices=sorted(SPLITS), required=True)
    r.add_argument("--time-budget", type=float, default=0, help="stop between problems after this many seconds")
    r.add_argument(
        "--reuse-window",
        type=int,
        default=1,
        help="regroup each N consecutive plan problems so those sharing compiled kernels run together",
    )
    r.add_argument("--workers", type=int, default=None, help="local processes, one per GPU (default: every GPU)")
    r.add_argument(
        "--compile-workers",
        type=int,
        default=None,
        help="compile processes per GPU process (default: this machine's cores shared among the GPU processes); "
        "set it when several campaign runs share one machine",
    )
    r.add_argument(
        "--top-up",
        action="store_true",
        help="also measure the sampled configs that problems already in the file lack (after the plan's "
        "train_max_configs was raised); ATen is timed again beside them",
    )
    r.add_argument(
        "--checkpoint",
        type=float,
        default=60,
        help="save what a problem has timed so far after this many seconds of waiting for its compiles "
        "or of timing its kernels, and again every as many (data/KEY/<split>.msgpack.partial; a rerun completes the problem); 0: off",
    )
    r.add_argument(
        "--compile-timeout",
        type=float,
        default=300,
        help="record a kernel still compiling after this many seconds as a failure (reason timeout) instead of "
        "letting it hold its problem beyond a chunk: the compiles in flight at a chunk's end start again in the "
        "next (default 300; 0: no limit)",
    )
    r.add_argument(
        "--no-defer-stalled",
        action="store_true",
        help="keep the plan's order for problems whose saved parts hold kernels stopped by --compile-timeout "
        "or were timed by two or more runs (by default they go after every other problem, so one "
        "pathological compile or a problem longer than a chunk does not hold up the rest)",
    )
    r.add_argument(
        "--precompiled",
        nargs="+",
        default=[],
        help="packs of `campaign.py precompile`: install their kernels into Triton's cache (when made for this "
        "machine's Triton) and measure their problems first",
    )
    r.add_argument(
        "--only",
        choices=PLAN_GROUPS,
        default=None,
        help="collect one group of the training plan: first (the plan's first lists), one-misaligned or "
        "output-misaligned (the problems it was grown by)",
    )
    r.add_argument(
        "--max-gflop",
        type=float,
        default=None,
        metavar="G",
        help="leave out problems of more than G GFLOP (2*batch*M*N*K) for a later chunk: a large fp32 one can "
        "take a whole chunk",
    )
    r.add_argument("--no-progress", action="store_true")
    r.set_defaults(func=cmd_run)
    t = sub.add_parser("target", help="on the GPU machine: write data/<KEY>/triton-target.json for precompile")
    t.add_argument("--hardware", required=True)
    t.add_argument("--output", default=None)
    t.set_defaults(func=cmd_target)
    c = sub.add_parser(
        "precompile",
        help="compile the split's next problems' kernels for the GPU machine's Triton (no GPU needed) into a pack "
        "that `run --precompiled` installs",
    )
    c.add_argument("--hardware", required=True)
    c.add_argument("--split", choices=("train", "val"), required=True)
    c.add_argument("--problems", type=int, default=None, help="at most this many problems")
    c.add_argument("--fill", action="store_true",
                   help="compile problems until one would pass --max-mb, then stop (it goes into the next pack)")  # fmt: skip
    c.add_argument("--output", required=True, help="the pack to write (.tar.xz); other packs beside it are skipped")
    c.add_argument("--target", default=None, help="default: data/<KEY>/triton-target.json")
    c.add_argument("--cache-dir", required=True, help="a Triton cache for these compiles (kept: reruns reuse it)")
    c.add_argument("--workers", type=int, default=None, help="compile processes (default: every CPU)")
    c.add_argument("--max-mb", type=float, default=30, help="stop adding problems before the pack passes this")
    c.set_defaults(func=cmd_precompile)
    pk = sub.add_parser(
        "packs", help="what each precompiled pack holds for this GPU: problems still to measure, target"
    )
    pk.add_argument("--hardware", required=True)
    pk.add_argument("packs", nargs="*", help="packs (default: every .tar.xz in --pack-dir)")
    pk.add_argument("--pack-dir", default=".precompiled")
    pk.set_defaults(func=cmd_packs)
    s = sub.add_parser("status", help="what is collected so far")
    s.add_argument("--hardware", required=True)
    s.set_defaults(func=cmd_status)
    k = sub.add_parser(
        "stock",
        help="stock max-autotune's picks of the validation problems, from val.msgpack (no GPU needed; triton is)",
    )
    k.add_argument("--hardware", required=True)
    k.set_defaults(func=cmd_stock)
    u = sub.add_parser(
        "unpack",
        help="copy a chunk's pack ($OUT/KEY-data.tgz of scripts/campaign_gpu.sh) into data/KEY/, all or nothing, "
        "removing the sidecars the chunk settled",
    )
    u.add_argument("--hardware", required=True)
    u.add_argument("pack")
    u.set_defaults(func=cmd_unpack)
    g = sub.add_parser("plot", help="plot the plan's problem distribution and what is collected (needs matplotlib)")
    g.add_argument("--hardware", required=True)
    g.add_argument("--output", default=None, help="PNG to write (default: data/<KEY>/problem_mix.png)")
    g.set_defaults(func=cmd_plot)
    args = ap.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
