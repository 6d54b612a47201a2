"""Session 49: a second round of session 44's active data on the H200, ranked by today's file.

    python benchmarks/models/session49/active2.py KEY N OUT.json.gz [--skip DATA ...]

N new problems from the real-model shape set's unused ``train`` split (session 44's pool, drawn in
this session's seeded order), none sharing a shape (op, sizes, batch, dtype; any layout) with the
plan's training or validation problems or with a problem of the ``--skip`` datasets (session 44's
``--skip`` left out only the same problem, so another layout of a collected shape could return);
per problem the shipped file's first 20 Triton configs ranked with ATen (as the handler ranks),
Inductor's DEFAULT candidates and 6 random others. The GPU run is session 44's
``active.py run LISTS OUT.msgpack --hardware KEY --budget S`` (resumable; ATen always measured).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks/models/session44"))
from active import campaign_cost, config_list, model_order, new_problems  # noqa: E402

SEED = 20261201


def main() -> int:
    from torch_diode.collect.campaign import _shape_key
    from torch_diode.collect.sweep import write_choice_lists
    from torch_diode.dataset import read_dataset
    from torch_diode.model import load_model

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("key")
    ap.add_argument("n", type=int)
    ap.add_argument("out")
    ap.add_argument("--skip", nargs="*", default=[], help="datasets whose shapes are left out (collected already)")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--random", type=int, default=6)
    ap.add_argument("--seed", type=int, default=SEED)
    a = ap.parse_args()
    model = load_model(ROOT / f"packages/torch-diode-models/src/torch_diode_models/{a.key}-matmul.safetensors")
    skip = {_shape_key(p) for f in a.skip for p in read_dataset(f).collected_problems()}
    pool = [p for p in new_problems(a.key, 10**9, a.seed) if _shape_key(p) not in skip]
    cost = campaign_cost()
    lists = {}
    t0 = time.perf_counter()
    for p in pool:
        if len(lists) == a.n:
            break
        cands, order, _ = model_order(model, p, cost)
        if all(c.is_aten for c in cands):
            continue
        lists[p] = config_list(p, cands, order, a.top, random.Random(f"{a.seed}|{p.key()}"), more=a.random)
        if len(lists) % 100 == 0:
            print(f"{len(lists)} problems, {time.perf_counter() - t0:.0f} s", flush=True)
    write_choice_lists(
        a.out, lists, f"session 49: {a.key} model's top {a.top} + DEFAULT + {a.random} random, seed {a.seed}"
    )
    sizes = sorted(len(v) for v in lists.values())
    print(
        f"{a.out}: {len(lists)} of {len(pool)} pool problems, {sum(sizes)} Triton configs (median {sizes[len(sizes) // 2]})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
