"""Session 39: the ranking forest's LambdaRank gain shape, scored on saved models with the forest
fit again. The forest is fit on the training rows alone, not on the network's output, so a
saved model's network, memory and ATen head are kept and only its forest changes. Two steps, so
that the fits can run on a many-core machine without carrying the models there:

    # 1. fit: one job per (saved model's training run, variant); writes OUT/<model>--<variant>.npz
    python benchmarks/models/session39/forest_refit.py fit JOBS.json --out FORESTS [--workers N]
    # 2. score: each saved model with its own forest ("saved") and with each fitted one
    python benchmarks/models/session39/forest_refit.py score SAVED_DIR... --forests FORESTS --out RES
    python benchmarks/models/session39/forest_refit.py summary --out RES [--json OUT.json]
    # JOBS.json from saved models: every model x variant
    python benchmarks/models/session39/forest_refit.py jobs SAVED_DIR... --variants V... --out JOBS.json

A SAVED_DIR holds ``cv_jobs.py`` results of jobs with ``"save": true`` (``<id>.safetensors``
beside ``<id>.json``, whose ``"job"`` is the training run: GPU, part, seed, fold). ``VARIANTS``
are ``ForestOptions`` overrides of the run's own forest options; a fit uses the rows that run fit
its forest on (``train._split_rows`` of the same problems and options) and its seed + 2, as
``train`` does, so the variant ``refit`` (no override) gives the saved forest back bit for bit.
Scoring ranks the fold's problems (or ``val.msgpack``) in the product's order at the handler's
``max_compile_cost``: per problem ``cv_jobs.result_row`` (regret@1/3/5/10 over the best
measured, ``k3``, the fastest of what the handler keeps at top-3, and the rest). ``summary``
prints, per GPU and part, each variant's pooled geomeans and its paired change against
``saved`` per model (points, x100).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

# One thread per worker process, set before numpy loads its BLAS (session 39's first call, 64
# workers on a 64-core host each with numpy's default of a thread per core, finished no fit).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "benchmarks" / "models" / "session31"))

VARIANTS = {
    "saved": None,
    "refit": {},  # the saved options again: reproduces the file's forest (a check)
    "step015": {"step": 0.015},
    "step06": {"step": 0.06},
    "top10": {"top": 10},
}


def one_thread() -> None:
    """One torch thread per worker process (numpy's BLAS is pinned at the top of the module)."""
    import torch

    torch.set_num_threads(1)


def fit(job: dict, out: Path) -> tuple[str, float]:
    one_thread()
    from cv_jobs import job_data, train_options

    from torch_diode.forest import RankingForest
    from torch_diode.train import _split_rows

    t0 = time.time()
    spec = job["spec"]
    trained_on, _, _ = job_data(spec)
    opts = train_options(spec)
    rows = _split_rows(trained_on, trained_on.by_problem(), opts)[3]  # the training split's rows, as train's
    fopts = dataclasses.replace(opts.forest_options(), **VARIANTS[job["variant"]])
    forest = RankingForest.fit(rows.x, rows.y, rows.counts, fopts, spec["seed"] + 2)
    meta = json.dumps(forest.metadata())
    np.savez(out / f"{job['id']}.npz", meta=np.array(meta), **forest.to_tensors())
    return job["id"], time.time() - t0


def score(model_path: Path, forest_path: Path | None, out: Path) -> tuple[str, float]:
    one_thread()
    from cv_jobs import job_data, result_row
    from cv_model import DEFAULT_COST

    from torch_diode.evaluate import problem_evals
    from torch_diode.forest import RankingForest
    from torch_diode.model import load_model

    t0 = time.time()
    spec = json.loads(model_path.with_suffix(".json").read_text())["job"]
    model = load_model(model_path)
    variant = "saved"
    if forest_path is not None:
        variant = forest_path.stem.split("--")[1]
        with np.load(forest_path) as z:
            tensors = {k: z[k] for k in z.files if k != "meta"}
            meta = json.loads(str(z["meta"]))
        model.forest = RankingForest.from_tensors(tensors, meta)
    _, scored, stock = job_data(spec)
    rows = [result_row(model, e) for e in problem_evals(model, scored, stock=stock, max_compile_cost=DEFAULT_COST)]
    jid = f"{model_path.stem}--{variant}"
    res = {"model_id": model_path.stem, "variant": variant, "spec": spec, "seconds": time.time() - t0, "rows": rows}
    (out / f"{jid}.json").write_text(json.dumps(res))
    return jid, time.time() - t0


def worker(args):
    fn, *rest = args
    try:
        return fn(*rest)
    except Exception:  # reported by the pool's loop; the other jobs go on
        import traceback

        return str(rest[0]), "ERROR " + traceback.format_exc()


def pool_run(tasks: list, workers: int, deadline: float) -> None:
    from cv_jobs import run_pool

    print(f"{len(tasks)} jobs", flush=True)
    run_pool(worker, tasks, workers, deadline)


def gmean(v) -> float:
    return float(np.exp(np.mean(np.log(v))))


def summary(res_dir: Path, json_out: str | None = None) -> None:
    res = defaultdict(dict)  # (hw, part) -> {(model, variant): rows}
    table = []  # per model and variant: its geomeans
    for f in sorted(res_dir.glob("*.json")):
        r = json.loads(f.read_text())
        res[(r["spec"]["hw"], r["spec"]["part"])][(r["model_id"], r["variant"])] = r["rows"]
    for (hw, part), runs in sorted(res.items()):
        models = sorted({m for m, _ in runs})
        print(f"== {hw} {part} ({len(models)} models)")
        for v in [v for v in VARIANTS if any((m, v) in runs for m in models)]:
            line = []
            for key in ("r1", "r3", "r5", "k3"):
                paired = [m for m in models if (m, v) in runs and (m, "saved") in runs]
                d = [
                    100 * (gmean([x[key] for x in runs[(m, v)]]) - gmean([x[key] for x in runs[(m, "saved")]]))
                    for m in paired
                ]
                pooled = gmean([x[key] for m in paired for x in runs[(m, v)]])
                line.append(f"{key} {pooled:.4f} {np.mean(d):+.2f} [{' '.join(f'{x:+.2f}' for x in d)}]")
            print(f"  {v:8s} " + "  ".join(line))
        for (m, v), rows in sorted(runs.items()):
            keys = ("r1", "r3", "r5", "r10", "k3")
            table.append(
                {"hw": hw, "part": part, "model": m, "variant": v, **{k: gmean([x[k] for x in rows]) for k in keys}}
            )
    if json_out:
        Path(json_out).write_text(json.dumps(table, indent=0) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("jobs", "fit", "score", "summary"))
    ap.add_argument("inputs", nargs="*", help="jobs: saved dirs; fit: the jobs file; score: saved dirs; summary: -")
    ap.add_argument("--out", required=True)
    ap.add_argument("--forests", help="score: the fitted forests' folder")
    ap.add_argument("--variants", nargs="*", default=[v for v in VARIANTS if v != "saved"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--deadline", type=float, default=540)
    ap.add_argument("--json", help="summary: also write each model's and variant's geomeans here")
    a = ap.parse_args()
    out = Path(a.out)
    if a.mode == "summary":
        summary(out, a.json)
        return
    if a.mode == "jobs":
        specs = [
            json.loads(m.with_suffix(".json").read_text())["job"]
            for d in a.inputs
            for m in sorted(Path(d).glob("*.safetensors"))
        ]
        jobs = [{"id": f"{s['id']}--{v}", "spec": s, "variant": v} for v in a.variants for s in specs]
        out.write_text(json.dumps(jobs, indent=0) + "\n")
        print(f"{len(jobs)} jobs -> {out}")
        return
    out.mkdir(parents=True, exist_ok=True)
    if a.mode == "fit":
        jobs = [j for j in json.loads(Path(a.inputs[0]).read_text()) if not (out / f"{j['id']}.npz").exists()]
        jobs.sort(
            key=lambda j: (j["spec"]["part"] != "val", j["spec"]["id"])
        )  # long fits first, a model's variants together
        pool_run([(fit, j, out) for j in jobs], a.workers, a.deadline)
        return
    tasks = []
    for d in a.inputs:
        for m in sorted(Path(d).glob("*.safetensors")):
            forests = sorted(Path(a.forests).glob(f"{m.stem}--*.npz")) if a.forests else []
            for f in [None, *forests]:
                name = f"{m.stem}--{'saved' if f is None else f.stem.split('--')[1]}"
                if not (out / f"{name}.json").exists():
                    tasks.append((score, m, f, out))
    pool_run(tasks, a.workers, a.deadline)


if __name__ == "__main__":
    main()
