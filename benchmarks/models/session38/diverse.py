"""Session 38: the model's order with a tile's ``num_stages`` variants spread out and one-warp
configs held back on misaligned operands (``torch_diode.ranking``), scored on trained models'
predictions:

    python benchmarks/models/session38/diverse.py DIR [DIR...] [--json OUT.json]

A DIR holds ``cv_jobs.py`` results: saved models (jobs with ``"save": true``: ``<id>.safetensors``
beside ``<id>.json``, ranked again here on the fold or validation set they were trained for) or
``<id>.npz`` files of jobs with ``"npz": true`` (every problem's measured and predicted times, the
spread and each choice's config fields, ``cv_jobs.CONFIG_FIELDS``). Each variant orders the same
predictions: ``plain`` (by prediction), ``stage-D`` (groups: the same config but for
``num_stages``, as ``ranking.stage_groups``; the product's order at diversity D) and ``tile-D``
(groups: the same BLOCK_M/N/K, warps and stages both free), without the cliff guard (the top-1
pick is the same in all of them); ``stage-0.2+guard-G`` adds the cliff guard at G
(``ranking.cliff_penalty``), the product's order at ``cliff_guard`` G. Figures per GPU, part and
seed (CV folds pooled): regret@1/3/5/10 (geomean), p95 regret@5 and ``k3``, the fastest of what
the handler keeps at ``top_k_configs`` 3 (``select`` in the variant's order) over the best
measured.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from torch_diode.config import config
from torch_diode.dataset import read_dataset
from torch_diode.evaluate import problem_evals
from torch_diode.features import operands_aligned16
from torch_diode.inductor.choices import select
from torch_diode.model import load_model
from torch_diode.ranking import model_order
from torch_diode.records import Problem

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "benchmarks" / "models" / "session31"))
from cv_jobs import CONFIG_FIELDS, choice_configs  # noqa: E402
from cv_model import DEFAULT_COST, fold_of_problems  # noqa: E402

KS = (1, 3, 5, 10)
STAGES = CONFIG_FIELDS.index("num_stages")
BY = {  # config columns a group shares (ATen rows: a group each)
    "stage": [i for i in range(len(CONFIG_FIELDS)) if i != STAGES],
    "tile": [CONFIG_FIELDS.index(f) for f in ("block_m", "block_n", "block_k")],
}
VARIANTS = (
    [("plain", None, 0.0, 0.0)]
    + [(f"{by}-{d:g}", by, d, 0.0) for by in BY for d in (0.05, 0.1, 0.2, 0.5)]
    + [(f"stage-0.2+guard-{g:g}", "stage", 0.2, g) for g in (0.1, 0.2, 0.5)]
)


def groups_of(configs, aten, cols):
    keys = {}
    return np.array(
        [keys.setdefault(("aten", i) if aten[i] else tuple(configs[i, cols]), len(keys)) for i in range(len(aten))]
    )


def one_warp_misaligned(problem, configs, aten):
    """``[C]`` which choices the cliff guard holds back (``ranking.cliff_penalty`` on config arrays:
    one-warp Triton configs, when an operand's rows are not 16-byte aligned)."""
    hit = (configs[:, CONFIG_FIELDS.index("num_warps")] == 1) & ~aten
    return hit & (not all(operands_aligned16(problem)))


def job_dataset(job, data):
    """The problems a ``cv_jobs.py`` job's model is scored on: the validation set, or its fold of
    the training set (``data`` caches the training sets by GPU)."""
    hw = job["hw"]
    if job["part"] == "val":
        return read_dataset(ROOT / "data" / hw / "val.msgpack")
    if hw not in data:
        data[hw] = read_dataset(ROOT / "data" / hw / "train.msgpack")
    return data[hw].select_problems(set(fold_of_problems(data[hw], job["folds"], job["seed"])[job["fold"]]))


def oracle_of(e):
    """The best measured time of a ``ProblemEval``'s whole space."""
    return float(e.measured_us.min()) if e.oracle_us is None else min(e.oracle_us, float(e.measured_us.min()))


def problems_of_model(path, job, data):
    """(problem, measured, predicted, std, oracle, aten, configs) per problem, as the saved model
    ranks them."""
    model = load_model(path)
    for e in problem_evals(model, job_dataset(job, data), max_compile_cost=DEFAULT_COST, diversity=0):
        oracle = oracle_of(e)
        std = np.asarray(model.predict(e.problem, e.choices).std, dtype=np.float64)
        aten = np.array([c.is_aten for c in e.choices])
        yield e.problem, e.measured_us, e.predicted_log_us, std, oracle, aten, choice_configs(e.choices)


def problems_of_npz(path, rows):
    z = np.load(path)
    for i in range(sum(k.startswith("m") for k in z.files)):
        yield (
            Problem.from_dict(json.loads(rows[i]["p"])),
            z[f"m{i}"].astype(np.float64),
            z[f"p{i}"].astype(np.float64),
            z[f"s{i}"].astype(np.float64),
            float(z[f"o{i}"][0]),
            z[f"a{i}"],
            z[f"c{i}"],
        )


def sources(dirs, data, npz_ready, from_npz, from_model):
    """(run, file stem, problems) of each ``cv_jobs.py`` result in ``dirs``: its npz file's problems
    (``from_npz(path, rows)``) where ``npz_ready(job)``, else its saved model's
    (``from_model(path, job, data)``); results with neither are skipped. ``run`` is
    ``<GPU>-<part>-s<seed>``."""
    for d in dirs:
        for path in sorted(Path(d).glob("*.json")):
            res = json.loads(path.read_text())
            job = res["job"]
            if path.with_suffix(".npz").exists() and npz_ready(job):
                problems = from_npz(path.with_suffix(".npz"), res["rows"])
            elif path.with_suffix(".safetensors").exists():
                problems = from_model(path.with_suffix(".safetensors"), job, data)
            else:
                continue
            yield f"{job['hw']}-{job['part']}-s{job['seed']}", path.stem, problems


def kept3(measured, log_t, std, aten, order, oracle):
    """The fastest of what ``select`` keeps at top-3 with the Triton candidates in ``order``."""
    t_idx, a_idx = np.flatnonzero(~aten), np.flatnonzero(aten)
    place = np.empty(len(order), dtype=np.intp)
    place[order] = np.arange(len(order))
    t_order = np.argsort(place[t_idx], kind="stable")  # the Triton candidates, in order
    opts = config.options(top_k_configs=3)
    sel = select(
        log_t[t_idx], std[t_idx], log_t[a_idx], std[a_idx], opts, keep_one_triton=len(a_idx) == 0, triton_order=t_order
    )
    kept = [int(t_idx[i]) for i in sel.triton] + [int(a_idx[i]) for i in sel.aten]
    return float(measured[kept].min()) / oracle


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = defaultdict(lambda: {k: [] for k in (*KS, "k3")})
    data = {}
    for run, stem, problems in sources(a.dirs, data, lambda job: job.get("npz"), problems_of_npz, problems_of_model):
        for problem, measured, pred, std, oracle, aten, configs in problems:
            groups = {by: groups_of(configs, aten, cols) for by, cols in BY.items()}
            one_warp = one_warp_misaligned(problem, configs, aten)
            for name, by, div, guard in VARIANTS:
                g = None if by is None else groups[by]
                order = model_order(pred, g, div, one_warp * guard if guard else None)
                best = np.minimum.accumulate(measured[order]) / oracle
                acc = rows[f"{run}|{name}"]
                for k in KS:
                    acc[k].append(float(best[min(k, len(best)) - 1]))
                acc["k3"].append(kept3(measured, pred, std, aten, order, oracle))
        print(f"scored {stem}", flush=True)
    table = {}
    for key, acc in sorted(rows.items()):
        t = {f"r{k}": float(np.exp(np.mean(np.log(acc[k])))) for k in KS}
        t.update(
            r5_p95=float(np.percentile(acc[5], 95)), k3=float(np.exp(np.mean(np.log(acc["k3"])))), problems=len(acc[1])
        )
        table[key] = t
    report(table)
    if a.json:
        Path(a.json).write_text(json.dumps(table, indent=1))


def report(table):
    """Each variant's change against ``plain`` (points of each figure, x100), per GPU and part:
    the mean over seeds and the range."""
    runs = defaultdict(dict)
    for key, t in table.items():
        run, name = key.split("|")
        runs[run][name] = t
    agg = defaultdict(list)
    for run, by_name in sorted(runs.items()):
        hw, part, _seed = run.rsplit("-", 2)
        for name, t in by_name.items():
            agg[(hw, part, name)].append({m: 100 * (t[m] - by_name["plain"][m]) for m in t if m != "problems"})
    for (hw, part, name), deltas in sorted(agg.items()):
        if name == "plain":
            continue
        cells = " ".join(
            f"{m} {np.mean([x[m] for x in deltas]):+.2f} [{min(x[m] for x in deltas):+.2f},{max(x[m] for x in deltas):+.2f}]"
            for m in ("r1", "r3", "r5", "r5_p95", "r10", "k3")
        )
        print(f"{hw} {part:3s} {name:9s} seeds={len(deltas)} {cells}")


if __name__ == "__main__":
    main()
