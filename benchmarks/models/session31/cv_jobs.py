"""Session 31's parallel runner of ``scripts/cv_model.py``'s experiments: one job per process.

A job is one training run and its scoring: ``{"id", "hw", "part": "val"|"cv", "seed", "set":
{TrainOptions overrides}}`` plus ``"folds"``/``"fold"`` for a fold of grouped cross-validation
(the folds of ``cv_model.fold_of_problems``, drawn with the job's seed, or with ``"fold_seed"``
where given, so that models of several seeds can share one split: ``session36/seed_average.py``). ``val`` trains on every training problem (of the
plan's first 1,100 and the groups its ``"extras"`` names: ``job_data``) and ranks
``val.msgpack`` (stock picks from ``val-stock-picks.json``); a fold trains on the other folds and
ranks the fold's problems; both at the handler's ``max_compile_cost``, one torch thread per job.
Each job writes ``<id>.json`` (per problem: regret@1/3/5/10 over the best measured, what the
handler keeps at top-1/top-3, stock's pick, whether the top-1 pick is ATen) and, for ``val``,
``<id>.npz`` (every problem's measured times and predictions; with ``"npz": true`` in the job,
for a fold too, and the predictions' ensemble spread and each choice's ``CONFIG_FIELDS``, and
each ``"also"`` variant's predictions); with ``"save": true``, the trained model
too, as ``<id>.safetensors`` (``session35/variants.py`` re-scores saved models with scoring-time
changes); with ``"also": {NAME: {PART: {OPTION: VALUE}}}``, the same model is scored again with
each scoring-time change (``PART`` one of ``memory``, ``aten_head``, ``forest``; e.g. ``{"align0":
{"memory": {"alignment_weight": 0}}}``, session 37), per problem under ``"also"`` in ``<id>.json``.
Jobs run in a pool of
``--workers`` processes until ``--deadline`` seconds; finished jobs found in ``--done`` are
skipped, so a 10-minute GPU-machine command can resume a batch. ``summarize.py`` pools them.
The device tool brings back at most 8 files from ``$OUT``, each at most 16 MiB: there, pass
``--pack $OUT/r.tgz`` to write the out folder as gzipped tars of at most 15 MiB when the pool
stops (all jobs done or the deadline; ``r-0.tgz``, ``r-1.tgz``, ... when it takes several);
session 35 lost 12 of 20 result files by writing them loose, session 40 a 31 MB pack.

    python benchmarks/models/session31/cv_jobs.py benchmarks/models/session31/batch1.json \
        --out /tmp/r --workers 16 --deadline 530
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


#: A job's ``"extras"`` -> the plan groups (``CampaignPlan.group``) it trains on beside the first ones.
EXTRAS = {
    "drop": (),
    "train": ("one-misaligned",),
    "output": ("output-misaligned",),
    "all": ("one-misaligned", "output-misaligned"),
}

CONFIG_FIELDS = ("block_m", "block_n", "block_k", "num_warps", "num_stages", "group_m")


def choice_configs(choices):
    """``[C, len(CONFIG_FIELDS)]`` int32 of each choice's Triton config fields (-1: ATen, or unset)."""
    import numpy as np

    return np.array(
        [[-1 if getattr(c, f) is None else int(getattr(c, f)) for f in CONFIG_FIELDS] for c in choices],
        dtype=np.int32,
    ).reshape(len(choices), len(CONFIG_FIELDS))


def fold_seed_of(job):
    """The seed a cross-validation job's folds are drawn with: ``"fold_seed"``, else its seed."""
    return job.get("fold_seed", job["seed"])


def job_data(job):
    """A job's datasets: (what it trains on, what it ranks, stock's picks or None).

    - ``val``: every training problem, ``val.msgpack`` and ``val-stock-picks.json``;
    - a fold: the other folds and the fold's problems;
    - ``"part": "group"`` with ``"group"`` (a ``CampaignPlan.group`` name, session 41): that
      group's collected problems, or with ``"folds"``/``"fold"`` one fold of them, and the rest
      of what the job trains on (a job whose extras leave the group out ranks it with a model
      that never saw any of it).

    The problems a plan was grown by are left out unless the job's ``"extras"`` names them
    (:data:`EXTRAS`: ``"train"`` the one-misaligned ones of session 40, ``"output"`` the
    output-misaligned ones of session 41, ``"all"`` both), so a job of an earlier session trains
    on what it did then (``session39/forest_refit.py`` relies on it). The extras are trained on in
    every fold and never ranked; the folds are drawn from the plan's first training problems
    either way, so they and what they rank are those of earlier sessions. A job's ``"add"`` (a
    list of dataset files, relative to the repository root; session 44) is trained on likewise:
    in ``val`` and in every fold, never ranked."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from cv_model import fold_of_problems

    from torch_diode.collect.campaign import CampaignPlan
    from torch_diode.dataset import read_dataset
    from torch_diode.evaluate import read_max_autotune_solution

    data = ROOT / "data" / job["hw"]
    ds = read_dataset(data / "train.msgpack")
    measured = ds.measured_problems()
    plan = CampaignPlan.load(data / "plan.json")
    base = measured & set(plan.group("first"))
    train = set(base)
    for group in EXTRAS[job.get("extras", "drop")]:
        train |= measured & set(plan.group(group))
    if job.get("add"):
        from torch_diode.dataset import merge_datasets

        ds = merge_datasets([ds, *(read_dataset(ROOT / f) for f in job["add"])])
        train |= ds.measured_problems() - measured
    if job["part"] == "val":
        stock = read_max_autotune_solution(data / "val-stock-picks.json")
        return ds.select_problems(train), read_dataset(data / "val.msgpack"), stock
    if job["part"] == "group":  # rank a plan group's collected problems (one fold of them, or all)
        held = measured & set(plan.group(job["group"]))
        if "fold" in job:
            held = set(fold_of_problems(ds.select_problems(held), job["folds"], fold_seed_of(job))[job["fold"]])
        return ds.select_problems(train - held), ds.select_problems(held), None
    held = set(fold_of_problems(ds.select_problems(base), job["folds"], fold_seed_of(job))[job["fold"]])
    return ds.select_problems(train - held), ds.select_problems(held), None


def train_options(job):
    """The job's ``TrainOptions``: one thread, no validation split, its ``"set"`` and seed."""
    from torch_diode.train import TrainOptions

    return TrainOptions(
        **{"num_threads": 1, "progress": False, "val_fraction": 0, **job.get("set", {}), "seed": job["seed"]}
    )


def result_row(model, e):
    """One ranked problem's figures: regret@1/3/5/10 over the best measured in the model's order,
    ``k1``/``k3`` (the fastest of what the handler keeps at top-1/top-3) and ``n1``/``n3`` (how
    many it keeps), stock's pick over the best, whether the top-1 pick is ATen."""
    import numpy as np

    from torch_diode.demo import best_measured_us, handler_keeps
    from torch_diode.evaluate import regret_at_k

    keeps = handler_keeps(model, e, (1, 3))
    best = best_measured_us(e)
    regret = regret_at_k(e.measured_us, e.predicted_log_us, (1, 3, 5, 10), oracle_us=e.oracle_us, order=e.ranked())
    aten = np.array([c.is_aten for c in e.choices])
    return {
        "p": json.dumps(e.problem.to_dict(), sort_keys=True),
        **{f"r{k}": regret[k] for k in (1, 3, 5, 10)},
        "k1": float(e.measured_us[keeps[1]].min() / best),
        "k3": float(e.measured_us[keeps[3]].min() / best),
        "n1": len(keeps[1]),
        "n3": len(keeps[3]),
        "stock": None if e.stock_us is None else float(e.stock_us / best),
        "aten_pick": bool(aten[e.ranked()[0]]),
    }


def run_job(job, outdir):
    os.environ["OMP_NUM_THREADS"] = "1"
    import numpy as np
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT / "scripts"))
    from cv_model import DEFAULT_COST

    from torch_diode.demo import best_measured_us
    from torch_diode.evaluate import problem_evals
    from torch_diode.train import train

    t0 = time.time()
    trained_on, scored, stock = job_data(job)
    model, _ = train(trained_on, train_options(job))
    ttrain = time.time() - t0
    cost = DEFAULT_COST
    evals = problem_evals(model, scored, stock=stock, max_compile_cost=cost)

    rows = []
    arrays = {}
    for i, e in enumerate(evals):
        rows.append(result_row(model, e))
        arrays[f"m{i}"] = e.measured_us.astype(np.float32)
        arrays[f"p{i}"] = e.predicted_log_us.astype(np.float32)
        arrays[f"a{i}"] = np.array([c.is_aten for c in e.choices])
        arrays[f"o{i}"] = np.array([best_measured_us(e)], dtype=np.float64)
        if job.get("npz"):  # the network's spread too, for selection rules (session 32)
            arrays[f"s{i}"] = model.predict(e.problem, e.choices).std.astype(np.float32)
            arrays[f"c{i}"] = choice_configs(e.choices)  # for orders by tile (session 38)
    if job.get("save"):
        from torch_diode.model import save_model

        save_model(model, outdir / f"{job['id']}.safetensors")
    also = {}
    for name, change in job.get("also", {}).items():
        before = {part: getattr(model, part).options for part in change}
        for part, kw in change.items():
            getattr(model, part).options = dataclasses.replace(before[part], **kw)
        also_evals = problem_evals(model, scored, stock=stock, max_compile_cost=cost)
        also[name] = [result_row(model, e) for e in also_evals]
        if job.get("npz"):  # the variant's predictions too, as p<i>_<name> (session 38)
            for i, e in enumerate(also_evals):
                arrays[f"p{i}_{name}"] = e.predicted_log_us.astype(np.float32)
        for part, opts in before.items():
            getattr(model, part).options = opts
    out = {"job": job, "seconds": time.time() - t0, "train_seconds": ttrain, "rows": rows}
    if also:
        out["also"] = also
    (outdir / f"{job['id']}.json").write_text(json.dumps(out))
    if job["part"] == "val" or job.get("npz"):
        np.savez_compressed(outdir / f"{job['id']}.npz", **arrays)
    return job["id"], time.time() - t0


def worker(args):
    job, outdir = args
    try:
        return run_job(job, Path(outdir))
    except Exception as exc:  # noqa
        import traceback

        return job["id"], "ERROR " + traceback.format_exc()


def run_pool(fn, tasks, workers, deadline):
    """``fn(task)`` for every task in a pool of ``workers`` processes (one task each) until all are
    done or ``deadline`` seconds have passed; prints each result (``(id, seconds or "ERROR ...")``)."""
    t0 = time.time()
    with mp.get_context("fork").Pool(workers, maxtasksperchild=1) as pool:
        it = pool.imap_unordered(fn, tasks)
        while True:
            left = deadline - (time.time() - t0)
            if left <= 0:
                print("deadline: stopping", flush=True)
                break
            try:
                jid, res = it.next(timeout=left)
            except StopIteration:
                break
            except mp.TimeoutError:
                print("deadline: stopping", flush=True)
                break
            print(f"{time.time() - t0:6.0f}s {jid}: {res if isinstance(res, str) else f'{res:.0f} s'}", flush=True)
        pool.terminate()
    print(f"total {time.time() - t0:.0f} s", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jobs")
    ap.add_argument("--out", required=True)
    ap.add_argument("--done", default=None, help="folder of finished results to skip")
    ap.add_argument("--workers", type=int, default=15)
    ap.add_argument("--deadline", type=float, default=540)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--pack", default=None, help="write the out folder to this .tgz when the pool stops")
    a = ap.parse_args()
    jobs = json.loads(Path(a.jobs).read_text())
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    done = set()
    if a.done and Path(a.done).exists():
        done = {p.stem for p in Path(a.done).glob("*.json")}
    todo = [j for j in jobs if j["id"] not in done and (not a.only or any(j["id"].startswith(o) for o in a.only))]
    print(f"{len(todo)} jobs to run, {len(done)} done", flush=True)
    run_pool(worker, [(j, str(out)) for j in todo], a.workers, a.deadline)
    if a.pack:
        pack(out, Path(a.pack))


def pack(out, path, part_bytes=15 * 2**20):
    """The files of ``out`` in gzipped tars of at most about ``part_bytes`` each (the device tool
    brings back no file over 16 MiB: session 40 lost a 31 MB pack): ``path`` while they fit in
    one, else ``<stem>-0.tgz``, ``<stem>-1.tgz``, ..."""
    import tarfile

    files = sorted(out.iterdir(), key=lambda f: f.stat().st_size)
    parts, size = [[]], 0
    for f in files:
        if parts[-1] and size + f.stat().st_size > part_bytes:
            parts.append([])
            size = 0
        parts[-1].append(f)
        size += f.stat().st_size
    stem = path.name.removesuffix(".tgz")
    for i, part in enumerate(parts):
        dest = path if len(parts) == 1 else path.with_name(f"{stem}-{i}.tgz")
        with tarfile.open(dest, "w:gz") as tar:
            for f in part:
                tar.add(f, arcname=f"{out.name}/{f.name}")
        print(f"packed {len(part)} file(s) of {out} into {dest}", flush=True)


if __name__ == "__main__":
    main()
