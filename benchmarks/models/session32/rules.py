"""Session 32: selection rules over saved predictions (``cv_jobs.py`` jobs with ``"npz": true``).

For each run (a GPU, a seed; the three folds of a cross-validation pooled, or the validation
set), geomean regret@1 and regret@5 (and p95 of regret@1) when choices are ordered by

* the model's prediction (as shipped),
* prediction + lambda * the network's ensemble spread (lambda > 0: risk-averse),
* prediction + M on ATen choices (M > 0: ATen only when predicted faster by more than M),

and two bounds of the top-1 ATen-or-Triton call: the regret@1 of always taking the model's best
ATen choice, of always taking its best Triton config, and of the better of the two per problem
(what a perfect ATen-or-Triton decision would give with today's rankings).

    python benchmarks/models/session32/rules.py .devout/s32/b2
"""

from __future__ import annotations

import glob
import sys

import numpy as np

from torch_diode.evaluate import model_order, regret_at_k


def load(path):
    z = np.load(path)
    n = sum(1 for k in z.keys() if k.startswith("m"))
    return [
        (z[f"m{i}"].astype(np.float64), z[f"p{i}"].astype(np.float64), z[f"a{i}"], float(z[f"o{i}"][0]), z[f"s{i}"])
        for i in range(n)
    ]


def gm(x):
    return float(np.exp(np.mean(np.log(x))))


def regrets(problems, lam=0.0, margin=0.0):
    r1, r5 = [], []
    for m, p, a, o, s in problems:
        r = regret_at_k(m, p + lam * s + margin * a, (1, 5), oracle_us=o)
        r1.append(r[1])
        r5.append(r[5])
    return gm(r1), float(np.percentile(r1, 95)), gm(r5)


def decision_bounds(problems):
    ra, rt = [], []
    for m, p, a, o, _ in problems:
        if a.any() and (~a).any():
            ia, it = np.flatnonzero(a), np.flatnonzero(~a)
            ra.append(m[ia[model_order(p[ia])[0]]] / o)
            rt.append(m[it[model_order(p[it])[0]]] / o)
    return gm(ra), gm(rt), gm(np.minimum(ra, rt))


def main():
    root = sys.argv[1]
    runs = {}
    for f in sorted(glob.glob(f"{root}/*-val-s*.npz")):
        tag, hw, _, seed = f.rsplit("/", 1)[1][: -len(".npz")].split("-")
        runs[f"{hw} val {seed}"] = load(f)
        folds = sorted(glob.glob(f"{root}/{tag}-{hw}-cv3f*-{seed}.npz"))
        if folds:
            runs[f"{hw} cv {seed}"] = [x for g in folds for x in load(g)]
    print("rule".ljust(20) + "".join(k.rjust(31) for k in runs))
    rules = [("as shipped", {})]
    rules += [(f"lambda {v:+g}", {"lam": v}) for v in (-0.25, -0.1, 0.25, 0.5, 1.0)]
    rules += [(f"ATen margin {v:+g}", {"margin": v}) for v in (-0.03, -0.015, 0.015, 0.03)]
    for name, kw in rules:
        cells = ["r1 {:.4f} p95 {:.3f} r5 {:.4f}".format(*regrets(ps, **kw)) for ps in runs.values()]
        print(name.ljust(20) + "".join(c.rjust(31) for c in cells))
    cells = ["{:.3f} / {:.3f} / {:.4f}".format(*decision_bounds(ps)) for ps in runs.values()]
    print("ATen/Triton/best".ljust(20) + "".join(c.rjust(31) for c in cells))


if __name__ == "__main__":
    main()
