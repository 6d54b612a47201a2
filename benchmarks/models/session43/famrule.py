"""The ATen-or-Triton call by cuBLAS kernel family, on held-out problems: per family, how often
the model picks ATen, how often that pick is slower than its best Triton config, and what a rule
"never ATen" or "always ATen" for the family would change (summed points of regret@1).

    python benchmarks/models/session43/famrule.py JOBS.json MODELS_DIR KEY      # CV fold models
    python benchmarks/models/session43/famrule.py val MODEL KEY                  # a validation set
"""

import dataclasses
import json
import math
import sys
from collections import defaultdict

import numpy as np
from _heldout import ROOT_DATA, aten_and_triton, fold_evals, kernel_families

from torch_diode.config import config
from torch_diode.dataset import read_dataset
from torch_diode.evaluate import problem_evals
from torch_diode.model import load_model

src, arg, key = sys.argv[1:4]
fam = kernel_families(key)
if src == "val":
    evals = problem_evals(
        load_model(arg),
        read_dataset(ROOT_DATA / key / "val.msgpack"),
        max_compile_cost=config.options().max_compile_cost,
    )
else:
    evals = fold_evals(src, arg, key)
agg = defaultdict(lambda: np.zeros(5))
for e in evals:
    pair = aten_and_triton(e)
    if pair is None:
        continue
    a, t = pair
    o = e.ranked()
    best = min(e.measured_us.min(), e.oracle_us or math.inf)
    f = fam.get((json.dumps(dataclasses.asdict(e.problem), sort_keys=True), e.choices[a].template), "?")
    picked_aten = e.choices[o[0]].is_aten
    la, lt, lp = (math.log(e.measured_us[i] / best) for i in (a, t, o[0]))
    agg[f] += [1, picked_aten, picked_aten and la > lt, 100 * (lt - lp), 100 * (la - lp)]
print(
    f"{src if src == 'val' else 'CV'} {key}: family, problems, ATen picked, of which slower than the best Triton, points if never ATen, if always ATen"
)
for f, (n, pa, wrong, never, always) in sorted(agg.items(), key=lambda kv: -kv[1][0]):
    print(f"  {f:10s} {int(n):5d} {int(pa):5d} {int(wrong):5d} {never:+8.1f} {always:+8.1f}")
