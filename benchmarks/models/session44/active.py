"""Session 44: measure the shipped model's own top candidates on new training problems.

    select KEY N OUT.json      (dev machine) N new problems from the shape set's unused `train`
                               split; per problem the model's first TOP Triton configs, Inductor's
                               DEFAULT candidates and RANDOM more (seeded) -> a choice-lists file
    run LISTS.json OUT.msgpack (GPU machine) measure them, ATen included (resumable; --budget)

The new problems never share a shape (op, sizes, batch, dtype) with the plan's training or
validation problems, nor, in any layout, with a problem of the datasets ``select --skip`` names
(session 49: `train-active2.msgpack`; before, ``--skip`` left out only the same problem).
"""

from __future__ import annotations

import argparse
import random
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SEED = 20261128


def campaign_cost() -> float | None:
    """The campaign's compile-cost cap for training problems (``CampaignOptions``)."""
    from torch_diode.collect.campaign import CampaignOptions

    return CampaignOptions().train_max_compile_cost


def new_problems(key: str, n: int, seed: int, skip_shapes: frozenset = frozenset()) -> list:
    """The first ``n`` problems of the pool in ``seed``'s order, one layout per shape, none of a
    shape (``Problem.shape``) of the plan's problems or of ``skip_shapes`` (left out after the
    shuffle, so the other problems keep their order)."""
    from torch_diode.collect.campaign import CampaignPlan
    from torch_diode.shapes.shapeset import load_shapeset

    plan = CampaignPlan.load(ROOT / "data" / key / "plan.json")
    ss = load_shapeset(ROOT / "data" / "shapesets" / "real_models.json")
    taken = {p.shape for p in plan.train + plan.val}
    drawn = ss.problems(split="train", ops=plan.options.ops, dtypes=plan.options.dtypes)
    pool = [p for p in dict.fromkeys(drawn) if p.shape not in taken]
    # one layout per shape, so N problems are N shapes
    seen: set = set()
    rng = random.Random(seed)
    rng.shuffle(pool)
    out = []
    for p in pool:
        if p.shape not in seen:
            seen.add(p.shape)
            if p.shape not in skip_shapes:
                out.append(p)
    return out[:n]


def candidates(problem, max_compile_cost: float | None) -> list:
    """ATen and the EXHAUSTIVE Triton configs under ``max_compile_cost``, in Inductor's order."""
    from torch_diode.collect.sweep import inductor_choices
    from torch_diode.records import compile_cost

    return [
        it.choice
        for it in inductor_choices(problem, "EXHAUSTIVE")
        if it.kind == "aten" or max_compile_cost is None or compile_cost(problem, it.choice) <= max_compile_cost
    ]


def model_order(model, problem, max_compile_cost: float | None) -> tuple[list, list, dict]:
    """:func:`candidates`: in Inductor's order, in the model's (ranked together, as the handler
    ranks: the model's Triton order depends on the set), and each one's predicted log time."""
    import numpy as np

    from torch_diode.ranking import order_of

    cands = candidates(problem, max_compile_cost)
    pred = model.predict(problem, cands).log_time_us.astype(np.float64)
    return cands, [cands[j] for j in order_of(problem, cands, pred)], dict(zip(cands, pred))


def model_vs_stock(ds, stock: dict, model, max_compile_cost: float | None):
    """Per problem of ``ds`` with a pick in ``stock`` (``stock_picks_from_full_space``): the problem,
    its measured median time by choice, the model's order (:func:`model_order`) and stock's time."""
    for pt in ds.by_problem():
        if pt.problem not in stock:
            continue
        med = {ds.choices[c]: t for c, t in pt.median_by_choice().items()}
        _, order, _ = model_order(model, pt.problem, max_compile_cost)
        yield pt.problem, med, order, stock[pt.problem].time_us


def config_list(
    problem,
    cands: list,
    order: list,
    top: int,
    rng: random.Random,
    *,
    more: int = 0,
    size: int = 0,
    default_first=False,
) -> list:
    """The Triton configs to measure for ``problem`` (``cands`` and ``order`` from
    :func:`model_order`): the model's first ``top`` and Inductor's DEFAULT candidates (those
    first with ``default_first``), then ``more`` random others, or as many as make ``size``."""
    from torch_diode.collect.sweep import inductor_choices

    tri = [c for c in cands if not c.is_aten]
    default = {it.choice for it in inductor_choices(problem, "DEFAULT") if it.kind == "triton"}
    first = [c for c in order if not c.is_aten][:top]
    dflt = [c for c in tri if c in default]
    picked = list(dict.fromkeys(dflt + first if default_first else first + dflt))
    taken = set(picked)
    rest = [c for c in tri if c not in taken]
    return picked + rng.sample(rest, min(max(more, size - len(picked), 0), len(rest)))


def cmd_select(a: argparse.Namespace) -> int:
    from torch_diode.collect.sweep import write_choice_lists
    from torch_diode.dataset import read_dataset
    from torch_diode.model import load_model

    model = load_model(
        a.model or ROOT / f"packages/torch-diode-models/src/torch_diode_models/{a.key}-matmul.safetensors"
    )
    skip = frozenset(p.shape for f in a.skip for p in read_dataset(f).collected_problems())
    cost = campaign_cost()
    lists = {}
    t0 = time.perf_counter()
    todo = new_problems(a.key, a.n, a.seed, skip)
    for i, p in enumerate(todo):
        # Session 44's committed lists ranked the Triton configs without ATen among the
        # candidates (7c6072d's select); this ranks them as the handler does.
        cands, order, _ = model_order(model, p, cost)
        if all(c.is_aten for c in cands):
            continue
        rng = random.Random(f"{a.seed}|{p.key()}")
        lists[p] = config_list(p, cands, order, a.top, rng, more=a.random)
        if (i + 1) % 50 == 0:
            print(f"{i + 1} problems, {time.perf_counter() - t0:.0f} s", flush=True)
    note = f"session 44: {a.key} model's top {a.top} + DEFAULT + {a.random} random, seed {a.seed}"
    write_choice_lists(a.out, lists, note)
    sizes = sorted(len(v) for v in lists.values())
    print(f"{a.out}: {len(lists)} problems, {sum(sizes)} Triton configs (median {sizes[len(sizes) // 2]})")
    return 0


def cmd_score(a: argparse.Namespace) -> int:
    """The model's top-1 pick (its order over ATen and the whole EXHAUSTIVE space at the handler's
    compile cost) against stock max-autotune's pick (the fastest of Inductor's DEFAULT candidates
    and ATen), on problems whose DEFAULT candidates and the model's first configs are measured."""
    import math

    import numpy as np

    from torch_diode.collect.campaign import stock_picks_from_full_space
    from torch_diode.config import config
    from torch_diode.dataset import read_dataset
    from torch_diode.model import load_model

    ds = read_dataset(a.data)
    model = load_model(a.model)
    cost = config.options().max_compile_cost
    stock, notes = stock_picks_from_full_space(ds)
    logs, perfect, unmeasured, aten_picks, better = [], [], 0, 0, 0
    for _, med, order, stock_us in model_vs_stock(ds, stock, model, cost):
        top = order[0]
        first_triton = next(c for c in order if not c.is_aten)
        if top not in med or first_triton not in med:
            unmeasured += 1
            continue
        r = math.log(med[top] / stock_us)
        logs.append(r)
        aten_best = min((t for c, t in med.items() if c.is_aten), default=math.inf)
        perfect.append(math.log(min(med[first_triton], aten_best) / stock_us))
        aten_picks += top.is_aten
        better += r <= 0
    x = np.array(logs)
    print(
        f"{a.data}: {len(x)} problems ({unmeasured} top-1 picks not measured, {len(notes)} without stock's pick): "
        f"top-1 / stock geomean {math.exp(x.mean()):.4f} (p95 {math.exp(np.quantile(x, 0.95)):.3f}), "
        f"no slower on {better}, ATen picks {aten_picks}; with a perfect call between its first Triton config "
        f"and ATen {math.exp(np.mean(perfect)):.4f}"
    )
    return 0


def cmd_run(a: argparse.Namespace) -> int:
    import logging

    from torch_diode.collect import CollectOptions, collect
    from torch_diode.collect.sweep import read_choice_lists

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    problems = list(read_choice_lists(a.lists))
    opts = CollectOptions(
        collector="sweep",
        search_space="EXHAUSTIVE",
        hardware=a.hardware,
        seed=SEED,
        command=shlex.join(["python", *sys.argv]),
        progress=False,
        sweep_options=(
            ("choice_lists", str(a.lists)),
            ("max_compile_cost", campaign_cost()),
            ("compile_timeout_s", 120.0),
            *((("workers", a.workers),) if a.workers else ()),
        ),
        time_budget_s=a.budget,
        checkpoint_s=60.0,
    )
    try:
        s = collect(problems, opts, a.out)
    except KeyboardInterrupt:
        print("interrupted; finished problems are in the output", file=sys.stderr)
        return 130
    print(
        f"+{s.problems_measured} problems ({s.problems_skipped} already there), +{s.records} records in {s.elapsed_s:.1f} s"
    )
    return 0


def select_parser(sub, top: int, seed: int) -> argparse.ArgumentParser:
    """A ``select`` subcommand's common arguments: KEY N OUT, ``--model`` (default: the shipped
    file of KEY), ``--top`` (the model's first Triton configs per problem), ``--seed``."""
    s = sub.add_parser("select")
    s.add_argument("key")
    s.add_argument("n", type=int)
    s.add_argument("out")
    s.add_argument("--model")
    s.add_argument("--top", type=int, default=top)
    s.add_argument("--seed", type=int, default=seed)
    return s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = select_parser(sub, top=20, seed=SEED)
    s.add_argument("--random", type=int, default=6)
    s.add_argument(
        "--skip", nargs="*", default=[], help="datasets whose shapes (any layout) are left out (collected already)"
    )
    s.set_defaults(fn=cmd_select)
    c = sub.add_parser("score")
    c.add_argument("data")
    c.add_argument("model")
    c.set_defaults(fn=cmd_score)
    r = sub.add_parser("run")
    r.add_argument("lists")
    r.add_argument("out")
    r.add_argument("--hardware", required=True)
    r.add_argument("--budget", type=float, default=None, help="start no new problem after this many seconds")
    r.add_argument("--workers", type=int, default=None, help="compile processes (default: CPU count - 1)")
    r.set_defaults(fn=cmd_run)
    a = ap.parse_args()
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
