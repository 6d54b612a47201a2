"""Where the time of ``DiodeModel.predict`` goes (session 47, diagnostics).

For 1,500 candidates of one problem (``scripts/bench_scoring.py``'s), on one torch thread: the
median of ``predict``, then of each step alone (features, network, the members' summary,
neighbour memory, ATen head, forest), then of ``predict`` itself with its parts timed in place
(the network: the rest of each call). A diagnostic, not a product path: it reads the model's
private parts.

Usage: python benchmarks/handler/session47/parts.py MODEL.safetensors
"""

from __future__ import annotations

import collections
import contextlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from bench_scoring import exhaustive_choices

import torch_diode.model as model_module
from torch_diode.features import N_PROBLEM_FEATURES, featurize_split_indexed
from torch_diode.model import PREDICT_THREADS_WAIT_S, load_model, torch_threads
from torch_diode.records import Problem


def median_ms(f: Callable[[], object], n: int = 300) -> float:
    ts = []
    for _ in range(n):
        a = time.perf_counter()
        f()
        ts.append(time.perf_counter() - a)
    return statistics.median(ts) * 1e3


def main() -> None:
    torch.set_num_threads(1)
    m = load_model(sys.argv[1])
    p = Problem(op="mm", m=1000, n=4096, k=4096, dtype="bfloat16")
    ch = exhaustive_choices(1500)
    for _ in range(20):
        m.predict(p, ch)
    print("predict", median_ms(lambda: m.predict(p, ch)))
    x_shared, x_rest, index = featurize_split_indexed(p, ch, m.gpu)
    print("featurize", median_ms(lambda: featurize_split_indexed(p, ch, m.gpu)))
    s, norm = N_PROBLEM_FEATURES, m.normalization
    xs = (x_shared - norm.x_mean[:s]) * m._inv_std[:s]
    weights = m._inference_weights

    def net(threads: bool = True):
        ctx = torch_threads(1, wait_s=PREDICT_THREADS_WAIT_S) if threads else contextlib.nullcontext()
        with ctx, torch.inference_mode():
            return m.net.forward_shared(torch.from_numpy(xs), torch.from_numpy(x_rest), weights).numpy()

    print("net", median_ms(net), "net-nothreadctx", median_ms(lambda: net(False)))
    log_t = net()
    pred = m._summarise(log_t)
    print("summ", median_ms(lambda: m._summarise(log_t)))
    aten = x_rest[:, model_module._KIND_ATEN] > 0.5
    if m.memory is not None:
        print("memory", median_ms(lambda: m.memory.blend(p, x_rest, pred.log_time_us, index)))
    if m.aten_head is not None:
        print("head", median_ms(lambda: m.aten_head.adjust(pred.log_time_us, aten, x_shared)))
    if m.forest is not None:
        print("forest", median_ms(lambda: m.forest.rerank(pred.log_time_us, x_shared, x_rest)))

    # predict itself, its parts timed in place: featurize (the name model.py calls) and the
    # memory's, head's and forest's methods wrapped on this model; the network (standardisation,
    # forward, the members' summary) is the rest of each call
    acc: dict[str, list[float]] = collections.defaultdict(list)
    call: dict[str, float] = {}

    def timed(fn: Callable, key: str) -> Callable:
        def wrapper(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                call[key] = time.perf_counter() - t

        return wrapper

    parts = {"mem": (m.memory, "blend"), "head": (m.aten_head, "adjust"), "forest": (m.forest, "rerank")}
    model_module.featurize_split_indexed = timed(featurize_split_indexed, "feat")
    for key, (part, method) in parts.items():
        if part is not None:
            setattr(part, method, timed(getattr(part, method), key))
    try:
        for _ in range(300):
            call.clear()
            t = time.perf_counter()
            m.predict(p, ch)
            call["all"] = time.perf_counter() - t
            call["net"] = call["all"] - sum(v for k, v in call.items() if k != "all")
            for k in ("feat", "net", "mem", "head", "forest", "all"):
                acc[k].append(call.get(k, 0.0))
    finally:
        model_module.featurize_split_indexed = featurize_split_indexed
        for part, method in parts.values():
            if part is not None:
                delattr(part, method)
    print({k: round(statistics.median(v) * 1e3, 3) for k, v in acc.items()})
    print("predict", median_ms(lambda: m.predict(p, ch)))


if __name__ == "__main__":
    main()
