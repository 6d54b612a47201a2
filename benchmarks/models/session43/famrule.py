"""The ATen-or-Triton call by cuBLAS kernel family, on held-out problems: per family, how often
the model picks ATen, how often that pick is slower than its best Triton config, and what a rule
"never ATen" or "always ATen" for the family would change (summed points of regret@1).

    python benchmarks/models/session43/famrule.py JOBS.json MODELS_DIR KEY      # CV fold models
    python benchmarks/models/session43/famrule.py val MODEL KEY                  # a validation set
"""

import dataclasses
import gzip
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from cublas_kernels import parse

from torch_diode.config import config
from torch_diode.dataset import read_dataset
from torch_diode.evaluate import problem_evals
from torch_diode.model import load_model

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "benchmarks/models/session31"))
from cv_jobs import job_data  # noqa: E402

src, arg, key = sys.argv[1:4]
fam = {}
for line in gzip.open(HERE / f"cublas-kernels-{key}.jsonl.gz", "rt"):
    r = json.loads(line)
    fam[(json.dumps(r["problem"], sort_keys=True), r["aten"])] = parse(r["kernels"])[0]
cost = config.options().max_compile_cost
evals = []
if src == "val":
    evals = problem_evals(load_model(arg), read_dataset(ROOT / "data" / key / "val.msgpack"), max_compile_cost=cost)
else:
    for j in json.load(open(src)):
        if j["hw"] == key:
            _, held, _ = job_data(j)
            evals += problem_evals(load_model(f"{arg}/{j['id']}.safetensors"), held, max_compile_cost=cost)
agg = defaultdict(lambda: np.zeros(5))
for e in evals:
    aten = np.array([c.is_aten for c in e.choices])
    if not aten.any() or aten.all():
        continue
    o = e.ranked()
    ai = np.flatnonzero(aten)
    a = ai[np.argmin(e.predicted_log_us[ai])]  # the ATen variant the model would pick
    t = next(i for i in o if not aten[i])
    best = min(e.measured_us.min(), e.oracle_us or math.inf)
    pd = json.loads(json.dumps(dataclasses.asdict(e.problem)))
    f = fam.get((json.dumps(pd, sort_keys=True), e.choices[a].template), "?")
    picked_aten = bool(aten[o[0]])
    la, lt, lp = (math.log(e.measured_us[i] / best) for i in (a, t, o[0]))
    agg[f] += [1, picked_aten, picked_aten and la > lt, 100 * (lt - lp), 100 * (la - lp)]
print(
    f"{src if src == 'val' else 'CV'} {key}: family, problems, ATen picked, of which slower than the best Triton, points if never ATen, if always ATen"
)
for f, (n, pa, wrong, never, always) in sorted(agg.items(), key=lambda kv: -kv[1][0]):
    print(f"  {f:10s} {int(n):5d} {int(pa):5d} {int(wrong):5d} {never:+8.1f} {always:+8.1f}")
