"""Session 62 (rule 12): stock max-autotune's own picks of a validation set's problems.

    python benchmarks/models/session62/inductor_stock.py KEY OUT.msgpack [--budget S] [--workers N]

Compiles every problem of ``data/KEY/val.msgpack`` once with ``torch.compile(mode="max-autotune")``
in Inductor's DEFAULT search space and records what Inductor's own autotuning measured
(``torch_diode.collect`` with the ``inductor`` collector: its feedback saver, fresh caches per
compile, one process per GPU). The output's fastest record per problem is the choice stock
max-autotune picked (``evaluate.max_autotune_solution_from_dataset``), so
``diode validate-max-autotune --max-autotune-solution OUT.msgpack`` scores that pick in the
validation set's timings. Resumable: a rerun skips the problems ``OUT`` holds. ``--device cpu``
(bmm problems only) and ``--limit`` are for a smoke test without a GPU.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from torch_diode.collect.runner import CollectOptions, collect
from torch_diode.dataset import read_dataset


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("key")
    ap.add_argument("output")
    ap.add_argument("--budget", type=float, default=None, help="start no problem after this many seconds")
    ap.add_argument("--workers", type=int, default=None, help="processes, one per GPU (default: every GPU)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--limit", type=int, default=None, help="the first N problems only")
    a = ap.parse_args()
    problems = [pt.problem for pt in read_dataset(f"data/{a.key}/val.msgpack").by_problem()]
    if a.device == "cpu":
        problems = [p for p in problems if p.op == "bmm"]
    problems = problems[: a.limit]
    options = CollectOptions(
        collector="inductor",
        device=a.device,
        search_space="DEFAULT",
        search_mode="max-autotune",
        hardware=a.key,
        workers=a.workers,
        progress=False,
        time_budget_s=a.budget,
        command=shlex.join([sys.executable, *sys.argv]),
    )
    summary = collect(problems, options, a.output)
    print(summary)


if __name__ == "__main__":
    main()
