"""Collect GEMM timings on a GPU: the Inductor collector, the sweep collector and the runner.

``collect(problems, options, output_path)`` is the verb; ``CollectOptions`` says how. Importing
this package does not import ``torch._inductor`` (the collectors import it when they start).
"""

from torch_diode.collect.runner import (
    COLLECTORS,
    CollectOptions,
    Collector,
    CollectSummary,
    collect,
    defer_stalled,
    merge_shards,
    partial_choices,
    partial_path,
    resumed_problems,
    settle_partials,
    shard,
    shard_path,
    stalled_problems,
)

__all__ = [
    "COLLECTORS",
    "CollectOptions",
    "CollectSummary",
    "Collector",
    "collect",
    "defer_stalled",
    "merge_shards",
    "partial_choices",
    "partial_path",
    "resumed_problems",
    "settle_partials",
    "shard",
    "shard_path",
    "stalled_problems",
]
