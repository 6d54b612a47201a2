"""Session 38's lead: the ATen head's blend at 1.0 with a wider cliff guard, whose threshold is
chosen by cross-validation alone. The guard of ``torch_diode.ranking`` holds back one-warp configs
on misaligned operands; here a second trigger holds back too every Triton config whose scalar
loads per thread per stage on misaligned operands, ``(BLOCK_M*BLOCK_K*[A misaligned] +
BLOCK_N*BLOCK_K*[B misaligned]) / (32*num_warps)``, reach ``T``. Regret@1 in the model's order
(diversity 0.2, guard 0.2) of each variant, per GPU, part and seed:

    python benchmarks/models/session38/head_guard.py DIR [DIR...] [--json OUT.json]

A DIR holds saved models (``<id>.safetensors``: ranked again here with the ATen head's blend at
0.75 and 1.0) or ``cv_jobs.py`` npz files of jobs with ``"npz": true`` and an ``"also"`` variant
``head100`` (``{"aten_head": {"blend": 1.0}}``; ``batch-gpu67-head.json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from diverse import BY, DEFAULT_COST, choice_configs, groups_of, job_dataset, one_warp_misaligned, oracle_of, sources

from torch_diode.evaluate import problem_evals
from torch_diode.features import operands_aligned16
from torch_diode.model import load_model
from torch_diode.ranking import model_order
from torch_diode.records import Problem

THRESHOLDS = (None, 128, 160, 192, 256, 320)  # None: the one-warp trigger alone (the product)


def from_models(path, job, data):
    """(problem, measured, oracle, aten, configs, {blend: predictions}) per problem."""
    ds = job_dataset(job, data)
    preds = {}
    for blend in (0.75, 1.0):
        model = load_model(path)
        model.aten_head.options = dataclasses.replace(model.aten_head.options, blend=blend)
        preds[blend] = problem_evals(model, ds, max_compile_cost=DEFAULT_COST, diversity=0, cliff_guard=0)
    for e, e1 in zip(preds[0.75], preds[1.0]):
        oracle = oracle_of(e)
        aten = np.array([c.is_aten for c in e.choices])
        p = {0.75: e.predicted_log_us, 1.0: e1.predicted_log_us}
        yield e.problem, e.measured_us, oracle, aten, choice_configs(e.choices), p


def from_npz(path, rows):
    z = np.load(path)
    for i in range(sum(k.startswith("m") for k in z.files)):
        p = {0.75: z[f"p{i}"].astype(np.float64), 1.0: z[f"p{i}_head100"].astype(np.float64)}
        yield (Problem.from_dict(json.loads(rows[i]["p"])), z[f"m{i}"].astype(np.float64), float(z[f"o{i}"][0]),
               z[f"a{i}"], z[f"c{i}"], p)  # fmt: skip


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    acc = defaultdict(list)
    data = {}

    def npz_ready(job):
        return job.get("npz") and "head100" in job.get("also", {})

    for run, stem, problems in sources(a.dirs, data, npz_ready, from_npz, from_models):
        for problem, measured, oracle, aten, configs, preds in problems:
            a16, b16 = operands_aligned16(problem)
            c = configs.astype(np.float64)
            loads = (c[:, 0] * c[:, 2] * (not a16) + c[:, 1] * c[:, 2] * (not b16)) / (32 * np.maximum(c[:, 3], 1))
            one_warp = one_warp_misaligned(problem, configs, aten)
            groups = groups_of(configs, aten, BY["stage"])
            for blend, pred in preds.items():
                for t in THRESHOLDS:
                    bad = one_warp if t is None else one_warp | ((loads >= t) & ~aten)
                    pick = model_order(pred, groups, 0.2, 0.2 * bad)[0]
                    acc[f"{run}|head{blend:g}-{'w1' if t is None else f'w1+L{t}'}"].append(measured[pick] / oracle)
        print(f"scored {stem}", flush=True)
    table = {k: {"r1": float(np.exp(np.mean(np.log(v)))), "problems": len(v)} for k, v in sorted(acc.items())}
    runs = sorted({k.split("|")[0] for k in table})
    variants = sorted({k.split("|")[1] for k in table})
    base = "head0.75-w1"
    for v in variants:
        cells = " ".join(
            f"{r.split('-', 1)[1]}:{100 * (table[f'{r}|{v}']['r1'] - table[f'{r}|{base}']['r1']):+.2f}" for r in runs
        )
        print(f"{v:16s} {cells}")
    if a.json:
        Path(a.json).write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
