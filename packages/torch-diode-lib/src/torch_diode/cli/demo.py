"""``diode demo``: each shipped model on its GPU's held-out validation data, and on a GPU a real
compile with and without torch-diode (:mod:`torch_diode.demo`).

Examples::

    diode demo                                   # every shipped model, data from the checkout's data/ or ./data
    diode demo --data-dir data --plot-dir out/   # explicit data and plot directories
    diode demo --model h200.safetensors --dataset data/NVIDIA-H200/val.msgpack
"""

from __future__ import annotations

import argparse
from pathlib import Path

from torch_diode.cli import UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo",
        help="show what torch-diode's models do: their picks against the exhaustive search, and a real compile",
        description="Evaluate each shipped model (or --model) on its GPU's held-out validation data "
        "(<data-dir>/<hardware key>/val.msgpack): how close its top-1 and top-3 picks come to the exhaustive "
        "search's winner, and how many choices Inductor still benchmarks with torch-diode instead of the "
        "exhaustive space; a PNG per model. On a CUDA GPU it also compiles a 2-layer MLP cold with stock "
        "max-autotune and with torch-diode, and prints both compile and step times.",
    )
    p.add_argument("--model", metavar="FILE", help="a model file or registered name (default: every shipped model)")
    p.add_argument(
        "--dataset",
        metavar="FILE",
        help="validation dataset of --model (default: <data-dir>/<its key>/val.msgpack); stock max-autotune's picks "
        "are read from val-stock.msgpack, else val-stock-picks.json, beside it when there",
    )
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        help="directory holding <hardware key>/val.msgpack (default: the repository's data/ when torch_diode runs "
        "from a source checkout, else ./data when it holds <hardware key>/val.msgpack)",
    )
    p.add_argument("--plot-dir", metavar="DIR", default="diode-demo", help="where the PNGs go (default: diode-demo/)")
    p.add_argument("--cpu-only", action="store_true", help="skip the GPU compile even when a GPU is present")
    p.add_argument(
        "--train-previews",
        action="store_true",
        help="train a preview model per GPU from <data-dir>/<hardware key>/train.msgpack (the trainer's defaults, "
        "seed 0; minutes on a CPU) and show it instead of the shipped models: how a model trained on that data "
        "does (without shipped models the demo does this by itself)",
    )
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    from torch_diode.demo import DemoOptions, run_demo

    if args.data_dir is not None and not Path(args.data_dir).is_dir():
        raise UsageError(f"--data-dir {args.data_dir}: not a directory")
    if args.dataset is not None and not Path(args.dataset).is_file():
        raise UsageError(f"--dataset {args.dataset}: no such file")
    if args.plot_dir is not None and Path(args.plot_dir).exists() and not Path(args.plot_dir).is_dir():
        raise UsageError(f"--plot-dir {args.plot_dir}: exists and is not a directory; give a folder for the plots")
    try:
        options = DemoOptions(
            model=args.model,
            dataset=args.dataset,
            data_dir=args.data_dir,
            plot_dir=Path(args.plot_dir),
            gpu=not args.cpu_only,
            train_previews=args.train_previews,
        )
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from None
    run_demo(options, emit=lambda line: print(line, flush=True))
    return 0
