"""OOF: error of ATen's predicted log time vs of the model's top Triton pick, on the CV folds.

python benchmarks/models/session43/aterr.py JOBS.json MODELS_DIR KEY
"""

import math
import sys

import numpy as np
from _heldout import aten_and_triton, fold_evals

from torch_diode.ranking import aten_variant_call_trusted

jobs, d, hw = sys.argv[1:4]
R = []
RT = []
RB = []
for e in fold_evals(jobs, d, hw):
    pair = aten_and_triton(e)
    if pair is None:
        continue
    a, t = pair
    aten = np.array([c.is_aten for c in e.choices])
    tri = [i for i in e.ranked() if not aten[i]]
    t2 = tri[1] if len(tri) > 1 else t
    tb = np.flatnonzero(~aten)[np.argmin(e.measured_us[~aten])]
    RT.append(
        (e.predicted_log_us[t] - math.log(e.measured_us[t])) - (e.predicted_log_us[t2] - math.log(e.measured_us[t2]))
    )
    RB.append(
        (e.predicted_log_us[t] - math.log(e.measured_us[t])) - (e.predicted_log_us[tb] - math.log(e.measured_us[tb]))
    )
    R.append(
        (
            aten_variant_call_trusted(e.problem),
            e.predicted_log_us[a] - math.log(e.measured_us[a]),
            e.predicted_log_us[t] - math.log(e.measured_us[t]),
            e.predicted_log_us[a] - e.predicted_log_us[t],
            math.log(e.measured_us[a] / e.measured_us[t]),
        )
    )
R = np.array(R, dtype=float)
RT = np.array(RT)
RB = np.array(RB)
for nm, m in (("all", np.ones(len(R), bool)), ("trusted", R[:, 0] == 1), ("other", R[:, 0] == 0)):
    X = R[m]
    eA, eT = X[:, 1], X[:, 2]
    wrong = np.sign(X[:, 3]) != np.sign(X[:, 4])
    cost = np.abs(X[:, 4]) * wrong
    print(f"   sd(eT1-eT2) {RT[m].std():.3f} sd(eT-eTbest) {RB[m].std():.3f}")
    print(
        f"{hw} {nm:8s} n {m.sum():4d} sd(eA) {eA.std():.3f} sd(eT) {eT.std():.3f} corr {np.corrcoef(eA, eT)[0, 1]:.2f} sd(eA-eT) {(eA - eT).std():.3f} wrong calls {wrong.mean():.2f} cost pts/problem {100 * cost.mean():.2f}"
    )
