"""Session 58: new H200 training problems of the kinds the training set lacks and the top-1 gap
sits on: one side of the output at most 16 (N, or M with A column-major).

    python benchmarks/models/session58/skinny.py select NVIDIA-H200 200 OUT.json.gz     (dev machine)
    python benchmarks/models/session58/skinny.py select ... --other 16384-65536          (session 59: the other side drawn too)
    python benchmarks/models/session58/skinny.py count FILE...                          (dev machine)
    python benchmarks/models/session58/skinny.py split DATA PREFIX [--lists L]          (dev machine)
    python benchmarks/models/session58/skinny.py rest DATA OUT --lists L                (session 61: the lists' problems DATA lacks)
    python3 benchmarks/models/session44/active.py run OUT.json.gz OUT.msgpack --hardware NVIDIA-H200 --budget S   (GPU)

Why (``cv-session58.md``): of the H100's 1,184 training problems, 13 have N <= 16 and 52 have M
<= 16 with a column-major A (of 322 with one side at most 16), against 6 and 6 of its 178
validation problems (the H200's plan is the same; its shipped file's four training files hold 53
and 79: ``count.txt``). Five of the H100 file's ten worst top-1 picks
against stock max-autotune's pick are such problems (``mm float16 8x16384x256`` A column-major
1.60x, ``mm bfloat16 65536x8x1024`` 1.25x, ``bmm bfloat16 907x3x63x363`` A column-major 1.24x,
``mm float32 65536x8x64`` 1.15x, ``mm float32 16384x8x64`` 1.09x; ``session53/blunders.py gap``).

The draws (seeded): the plan's log-normal sampler (``torch_diode.shapes.sampling.sample_problems``,
the fitted parameters, the plan's ops, dtypes and layouts, 70% of sizes rounded to multiples of 128
as the plan's), then the skinny side replaced: with probability 0.6 N (any layout), else M with A
column-major (``col/row``), drawn from 2-16 (8 and 16 most often, as in real models: 8 experts
of a router, a decode batch of 16). The other output side must be at least 64. No problem shares
a shape (op, M, N, K, batch, dtype) with a problem of the plan (training or validation) or of the
files given to ``--skip``, in any layout. Each problem's list is its whole EXHAUSTIVE Triton space
under the campaign's compile-cost cap (skinny problems have 26-260 configs, Inductor clamping the
block sizes), sampled down to ``--max-configs`` where larger with Inductor's DEFAULT candidates
kept; ATen is always measured by the collector.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks/models/session44"))
from active import campaign_cost, candidates  # noqa: E402

SEED = 20261203
SMALL = [8] * 3 + [16] * 3 + [2, 4, 12, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15]
LAYOUTS = ("row/row", "row/col", "col/row")  # the plan's
# session 59's real models' sizes in 16,384-65,536: vocabularies (Llama 2 32000, Mistral 32768, GPT-2
# 50257) and hidden and MLP widths of large models (16384-57344), and 65536
REAL_SIDES = [16384, 18432, 20480, 24576, 28672, 32000, 32768, 49152, 50257, 53248, 57344, 65536]


def kind(p) -> str | None:
    """``"N<=16"``, ``"M<=16,A col"`` (M <= 16 and A column-major, N > 16), or None."""
    if p.n <= 16:
        return "N<=16"
    if p.m <= 16 and p.stride_a[-2] == 1 and p.stride_a[-1] != 1:
        return "M<=16,A col"
    return None


def long_side(p) -> int:
    """The other output side of a skinny problem (:func:`kind`): the longer of M and N."""
    return max(p.m, p.n)


def skinny_problems(key: str, n: int, seed: int, skip: list[str], other: tuple[int, int] | None = None) -> list:
    """``n`` new problems (module docstring), in draw order. With ``other`` (session 59), the other
    output side is drawn too (:func:`other_side`) and no operand may exceed 2**28 elements."""
    from torch_diode.collect.campaign import CampaignPlan
    from torch_diode.dataset import read_dataset
    from torch_diode.records import Problem
    from torch_diode.shapes.sampling import sample_problems
    from torch_diode.shapes.shapeset import strides_for

    plan = CampaignPlan.load(ROOT / "data" / key / "plan.json")
    taken = {p.shape for p in plan.train + plan.val}
    taken |= {p.shape for f in skip for p in read_dataset(f).collected_problems()}
    rng = random.Random(seed)
    base = sample_problems(
        40 * n,
        seed=seed,
        ops=plan.options.ops,
        dtypes=plan.options.dtypes,
        layouts=LAYOUTS,
        aligned_fraction=0.7,
    )
    out: dict = {}
    for p in base:
        small = rng.choice(SMALL)
        n_small = rng.random() < 0.6
        if n_small:
            layout = rng.choice(LAYOUTS)
            m, nn = p.m, small
        else:
            layout = "col/row"
            m, nn = small, p.n
        if other is not None:
            big = other_side(rng, *other)
            m, nn = (big, small) if n_small else (small, big)
            if p.batch * big * max(p.k, small) > 2**28:
                continue
        if max(m, nn) < 64:
            continue
        sa, sb = strides_for(p.op, m, nn, p.k, layout)
        q = Problem(op=p.op, m=m, n=nn, k=p.k, batch=p.batch, dtype=p.dtype, stride_a=sa, stride_b=sb)
        if q.shape in taken:  # the chosen ones' shapes too
            continue
        taken.add(q.shape)
        out[q] = None
        if len(out) == n:
            break
    return list(out)


def other_side(rng: random.Random, lo: int, hi: int) -> int:
    """Session 59's other output side in ``[lo, hi]``: half the time a size of real models' vocabularies,
    hidden and MLP widths (``REAL_SIDES``) in range, else log-uniform, 70% of those rounded to 128."""
    real = [s for s in REAL_SIDES if lo <= s <= hi]
    if real and rng.random() < 0.5:
        return rng.choice(real)
    v = round(math.exp(rng.uniform(math.log(lo), math.log(hi))))
    return min(hi, max(lo, round(v / 128) * 128)) if rng.random() < 0.7 else v


def cmd_select(a: argparse.Namespace) -> int:
    from torch_diode.collect.sweep import inductor_choices, write_choice_lists

    cost = campaign_cost()
    lists = {}
    other = tuple(int(v) for v in a.other.split("-")) if a.other else None
    for p in skinny_problems(a.key, a.n, a.seed, a.skip, other):
        tri = [c for c in candidates(p, cost) if not c.is_aten]
        if not tri:
            continue
        if len(tri) > a.max_configs:
            default = {it.choice for it in inductor_choices(p, "DEFAULT") if it.kind == "triton"}
            keep = [c for c in tri if c in default]
            rest = [c for c in tri if c not in default]
            rng = random.Random(f"{a.seed}|{p.key()}")
            tri = keep + rng.sample(rest, a.max_configs - len(keep))
        lists[p] = tri
    note = f"session 58: skinny {a.key} problems, seed {a.seed}, whole space <= {a.max_configs}"
    if other:
        note = (
            f"session 59: skinny {a.key} problems, other side {a.other}, seed {a.seed}, whole space <= {a.max_configs}"
        )
    write_choice_lists(a.out, lists, note)
    items = list(lists.items())
    for i in range(a.parts if a.parts > 1 else 0):  # one list per GPU: every parts-th problem
        write_choice_lists(a.out.replace(".json", f"-{i}.json"), dict(items[i :: a.parts]), f"{note}, part {i}")
    sizes = sorted(len(v) for v in lists.values())
    kinds = Counter(f"{kind(p)} {p.op} {p.dtype}" for p in lists)
    print(f"{a.out}: {len(lists)} problems, {sum(sizes)} Triton configs (median {sizes[len(sizes) // 2]})")
    for k, v in sorted(kinds.items()):
        print(f"  {k}: {v}")
    return 0


def cmd_count(a: argparse.Namespace) -> int:
    """How many problems of each file have N <= 16, or M <= 16 with A column-major."""
    from torch_diode.dataset import read_dataset

    for f in a.files:
        problems = read_dataset(f).measured_problems()
        kinds = Counter(kind(p) for p in problems)
        big = sorted(long_side(p) for p in problems if kind(p))
        print(
            f"{f}: {kinds.total()} problems, N <= 16: {kinds['N<=16']}, "
            f"M <= 16 with A column-major: {kinds['M<=16,A col']}"
            + (
                f"; their other side: median {big[len(big) // 2]}, >= 16384 on {sum(b >= 16384 for b in big)}"
                if big
                else ""
            )
        )
    return 0


def cmd_split(a: argparse.Namespace) -> int:
    """PREFIX-i.msgpack: DATA's problems of part i's list (``select --parts 2``, ``--lists``), i = 0, 1."""
    from torch_diode.collect.sweep import read_choice_lists
    from torch_diode.dataset import read_dataset, write_dataset

    ds = read_dataset(a.data)
    for i in (0, 1):
        keep = set(read_choice_lists(ROOT / f"{a.lists}-{i}.json.gz"))
        keep &= ds.collected_problems()
        write_dataset(ds.select_problems(keep), f"{a.prefix}-{i}.msgpack")
        print(f"{a.prefix}-{i}.msgpack: {len(keep)} problems")
    return 0


def cmd_rest(a: argparse.Namespace) -> int:
    """OUT-i.json.gz: part i's list (``--lists``, i = 0, 1) less the problems DATA has collected, so
    that a later collection into a new file measures only the rest (session 61)."""
    from torch_diode.collect.sweep import read_choice_lists, write_choice_lists
    from torch_diode.dataset import read_dataset

    have = read_dataset(a.data).collected_problems()
    for i in (0, 1):
        lists = read_choice_lists(ROOT / f"{a.lists}-{i}.json.gz")
        rest = {p: cs for p, cs in lists.items() if p not in have}
        write_choice_lists(f"{a.out}-{i}.json.gz", rest, f"{a.lists}-{i} less the problems of {a.data}")
        print(
            f"{a.out}-{i}.json.gz: {len(rest)} of {len(lists)} problems, {sum(map(len, rest.values()))} Triton configs"
        )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("select")
    s.add_argument("key")
    s.add_argument("n", type=int)
    s.add_argument("out")
    s.add_argument("--seed", type=int, default=SEED)
    s.add_argument("--max-configs", type=int, default=360)
    s.add_argument("--skip", nargs="*", default=[])
    s.add_argument("--parts", type=int, default=1, help="also write OUT-i.json.gz, every parts-th problem")
    s.add_argument("--other", help="LO-HI: draw the other output side from this range (session 59)")
    c = sub.add_parser("count")
    c.add_argument("files", nargs="+")
    sp = sub.add_parser("split")
    sp.add_argument("data")
    sp.add_argument("prefix")
    sp.add_argument("--lists", default="benchmarks/models/session58/lists-NVIDIA-H200", help="the lists' prefix")
    r = sub.add_parser("rest")
    r.add_argument("data")
    r.add_argument("out", help="the new lists' prefix")
    r.add_argument("--lists", required=True, help="the lists' prefix")
    a = ap.parse_args()
    return {"select": cmd_select, "count": cmd_count, "split": cmd_split, "rest": cmd_rest}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
