"""What session 43's analyses of held-out problems share: the evaluations of saved CV fold
models on their folds' problems, the (ATen, Triton) pair the model's call is between, and the
probe's kernel files."""

import gzip
import json
import sys
from pathlib import Path

import numpy as np
from cublas_kernels import parse

from torch_diode.config import config
from torch_diode.evaluate import ProblemEval, problem_evals
from torch_diode.model import load_model

HERE = Path(__file__).resolve().parent
ROOT_DATA = HERE.parents[2] / "data"
sys.path.insert(0, str(HERE.parent / "session31"))
from cv_jobs import job_data  # noqa: E402


def fold_evals(jobs_path: str, models_dir: str, key: str) -> list[ProblemEval]:
    """Every saved fold model of ``key`` in ``jobs_path`` (``<models_dir>/<id>.safetensors``) on
    its fold's held-out problems, at the handler's ``max_compile_cost``."""
    out: list[ProblemEval] = []
    for j in json.load(open(jobs_path)):
        if j["hw"] == key:
            _, held, _ = job_data(j)
            model = load_model(f"{models_dir}/{j['id']}.safetensors")
            out += problem_evals(model, held, max_compile_cost=config.options().max_compile_cost)
    return out


def aten_and_triton(e: ProblemEval) -> tuple[int, int] | None:
    """(the ATen choice the model predicts fastest, its first Triton config in the model's
    order), or None where the problem has no ATen choice or no Triton config."""
    aten = np.array([c.is_aten for c in e.choices])
    if not aten.any() or aten.all():
        return None
    ai = np.flatnonzero(aten)
    return int(ai[np.argmin(e.predicted_log_us[ai])]), next(int(i) for i in e.ranked() if not aten[i])


def kernel_families(key: str) -> dict[tuple[str, str], str]:
    """{(problem as sorted JSON, ATen template): cuBLAS kernel family} from the probe's file."""
    out = {}
    for line in gzip.open(HERE / f"cublas-kernels-{key}.jsonl.gz", "rt"):
        r = json.loads(line)
        out[(json.dumps(r["problem"], sort_keys=True), r["aten"])] = parse(r["kernels"])[0]
    return out
