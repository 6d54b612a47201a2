"""Session 45: new training problems where the training set is thin (coverage-driven selection).

    select KEY N OUT.json.gz  (dev machine) N new problems, each with Inductor's DEFAULT
                              candidates, the shipped model's first TOP Triton configs and random
                              more up to SIZE -> a choice-lists file for session 44's
                              ``active.py run`` (GPU machine; ATen is always measured)
    pair DATA M1 [M2 ...]     (dev machine) the models' top-1 picks against stock's on the
                              problems of DATA where every model's pick was measured

Why: the shipped files' top-1 gap to stock max-autotune's pick sits on the problems whose nearest
training problems are far (the neighbour memory's summed weight ``wsum``, the same distance the
model uses): on the validation sets the lowest half by ``wsum`` carries 304 of 341 points (H100)
and 288 of 341 (H200) of it (``cv-session45.md``). Session 44 added problems drawn at random from
the shape set; this draws where the coverage is low.

The pool: the real-model shape set's unused ``train`` split (as session 44's ``active.py``) and
new draws of the plan's log-normal sampler (another seed), never a shape of the plan's training
or validation problems or of the files named by ``--skip`` (training) and ``--exclude`` (kept
as test sets: their problems do not count as covered). Selection, seeded: repeatedly a random
pool problem whose ``wsum`` against the training problems (the training file's, ``--skip``'s and
those chosen so far) is below ``--below``; so the new problems follow the pool's distribution
inside the thin region, not its most extreme corners alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks/models/session44"))
from active import campaign_cost, config_list, model_order, new_problems, select_parser  # noqa: E402

SEED = 20261129


class Coverage:
    """Summed weight of each pool problem's ``k`` nearest training problems (the neighbour
    memory's distance and kernel), updated as problems join the training set."""

    def __init__(self, pool: list, options) -> None:
        from torch_diode.neighbours import SIGNATURE, NeighbourMemory, problem_row

        rows = np.array([problem_row(p) for p in pool], dtype=np.float32)
        # The pool as a memory whose every row is a neighbour: a query's weights to all of it.
        self._mem = NeighbourMemory(
            rows,
            np.zeros((1, len(SIGNATURE)), np.float32),
            np.full((len(pool), 1), np.nan, np.float32),
            dataclasses.replace(options, k=len(pool)),
        )
        self.k = options.k
        self.top = np.zeros((len(pool), self.k), np.float32)  # ascending per row

    def add(self, problem) -> None:
        idx, w = self._mem.neighbours(problem)
        full = np.zeros(len(self.top), np.float32)
        full[idx] = w
        self.top = np.sort(np.hstack([self.top, full[:, None]]), axis=1)[:, 1:]

    @property
    def wsum(self) -> np.ndarray:
        return self.top.sum(axis=1)


def pool_problems(key: str, seed: int, n_lognormal: int, skip: set) -> list:
    from torch_diode.collect.campaign import CampaignPlan
    from torch_diode.shapes.sampling import sample_problems

    plan = CampaignPlan.load(ROOT / "data" / key / "plan.json")
    o = plan.options
    taken = {p.shape for p in plan.train + plan.val} | {p.shape for p in skip}
    drawn = new_problems(key, 10**6, seed) + sample_problems(
        n_lognormal,
        seed=seed,
        sampler="log-normal",
        ops=o.ops,
        dtypes=o.dtypes,
        layouts=o.layouts,
        aligned_fraction=o.lognormal_aligned_fraction,
    )
    out, seen = [], set()
    for p in drawn:
        if p.shape not in taken and p.shape not in seen:
            seen.add(p.shape)
            out.append(p)
    return out


def cmd_select(a: argparse.Namespace) -> int:
    from torch_diode.collect.sweep import write_choice_lists
    from torch_diode.dataset import read_dataset
    from torch_diode.model import load_model

    t0 = time.perf_counter()
    model = load_model(
        a.model or ROOT / f"packages/torch-diode-models/src/torch_diode_models/{a.key}-matmul.safetensors"
    )
    trained: set = set()
    for f in [ROOT / "data" / a.key / "train.msgpack", *a.skip]:
        trained |= read_dataset(f).collected_problems()
    excluded: set = set()
    for f in a.exclude:
        excluded |= read_dataset(f).collected_problems()
    pool = pool_problems(a.key, a.seed, a.lognormal, trained | excluded)
    cov = Coverage(pool, model.memory.options)
    for p in trained:
        cov.add(p)
    print(f"pool {len(pool)}, {len(trained)} training problems, {time.perf_counter() - t0:.0f} s", flush=True)
    draw = random.Random(a.seed)
    chosen: list[int] = []
    free = np.ones(len(pool), bool)
    while len(chosen) < a.n:
        thin = np.flatnonzero(free & (cov.wsum < a.below))
        if len(thin) == 0:
            break
        i = int(thin[draw.randrange(len(thin))])
        chosen.append(i)
        free[i] = False
        cov.add(pool[i])
    cost = campaign_cost()
    lists = {}
    for i in chosen:
        p = pool[i]
        cands, order, _ = model_order(model, p, cost)
        if all(c.is_aten for c in cands):
            continue
        rng = random.Random(f"{a.seed}|{p.key()}")
        lists[p] = config_list(p, cands, order, a.top, rng, size=a.size, default_first=True)
    note = (
        f"session 45: {a.key} coverage-driven (wsum < {a.below}), DEFAULT + model's top {a.top} + random "
        f"up to {a.size}, seed {a.seed}"
    )
    write_choice_lists(a.out, lists, note)
    sizes = sorted(len(v) for v in lists.values())
    print(
        f"{a.out}: {len(lists)} problems (wsum below {a.below} left: {int((free & (cov.wsum < a.below)).sum())}), "
        f"{sum(sizes)} Triton configs (median {sizes[len(sizes) // 2]}), {time.perf_counter() - t0:.0f} s"
    )
    return 0


def cmd_pair(a: argparse.Namespace) -> int:
    """Two models' top-1 picks against stock max-autotune's pick (the fastest of Inductor's
    DEFAULT candidates and ATen) on a dataset that measured neither model's whole space (session
    44's active file: the shipped model's first configs): only the problems where both picks were
    measured count, so the comparison is paired."""
    import math

    from torch_diode.collect.campaign import stock_picks_from_full_space
    from torch_diode.config import config
    from torch_diode.dataset import read_dataset
    from torch_diode.model import load_model

    ds = read_dataset(a.data)
    models = [load_model(m) for m in a.models]
    cost = config.options().max_compile_cost
    stock, _ = stock_picks_from_full_space(ds)
    logs: list[list[float]] = []
    missing = 0
    for pt in ds.by_problem():
        if pt.problem not in stock:
            continue
        med = {ds.choices[c]: t for c, t in pt.median_by_choice().items()}
        tops = [model_order(m, pt.problem, cost)[1][0] for m in models]
        if any(t not in med for t in tops):
            missing += 1
            continue
        logs.append([math.log(med[t] / stock[pt.problem].time_us) for t in tops])
    x = np.array(logs)
    print(f"{a.data}: {len(x)} problems with every top-1 pick measured ({missing} without)")
    for m, col in zip(a.models, x.T):
        print(f"  {m}: top-1 / stock geomean {math.exp(col.mean()):.4f}, no slower on {(col <= 0).sum()}")
    if x.shape[1] == 2:
        d = x[:, 1] - x[:, 0]
        print(
            f"  second - first: {100 * d.sum():+.1f} points summed, better on {(d < 0).sum()}, worse on {(d > 0).sum()}"
        )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = select_parser(sub, top=10, seed=SEED)
    s.add_argument("--below", type=float, default=3.4, help="select pool problems whose wsum is below this")
    s.add_argument("--size", type=int, default=56, help="Triton configs per problem")
    s.add_argument("--lognormal", type=int, default=3000, help="log-normal draws in the pool")
    s.add_argument("--skip", nargs="*", default=[], help="training datasets besides train.msgpack")
    s.add_argument(
        "--exclude", nargs="*", default=[], help="datasets whose shapes are left out of the pool (test sets)"
    )
    s.set_defaults(fn=cmd_select)
    c = sub.add_parser("pair")
    c.add_argument("data")
    c.add_argument("models", nargs="+")
    c.set_defaults(fn=cmd_pair)
    a = ap.parse_args()
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
