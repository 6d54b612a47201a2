"""Session 53: the network trained for an upper expectile of each choice's log time
(``TrainOptions.regression_expectile``) instead of its mean, against the same trainer at 0.5.

    bash benchmarks/models/session53/gpu-jobs.sh h200          # device: jobs-h200.json (seeds 0-2)
    WORKERS=15 bash benchmarks/models/session53/gpu-jobs.sh call2   # device: jobs-call2.json (H200 seeds 3-4, H100 0-2)
    bash benchmarks/models/session53/gpu-jobs.sh hidden        # device: jobs-hidden.json (H200 hidden 32/48/64, seeds 0-2)
    python benchmarks/models/session53/expectile.py score KEY OOS RESULTS [--seeds 0 1 2] [--variants t0.5 t0.65 t0.8]
    python benchmarks/models/session53/expectile.py cascade KEY OOS RESULTS [--seeds 0 1 2] [--screen h32 --wide h64]
    python benchmarks/models/session53/expectile.py timing KEY RESULTS [--seeds 0] [--rounds 5]

The jobs are ``session31/cv_jobs.py`` ``val`` jobs of the shipped files' trainer (H200: session
49's training files, H100: session 41's) with ``forest_trees`` 0 (the ranking forest is fit on
the training rows alone, so it does not depend on the network: each seed's is
``session51/forest_wave.py fit KEY SEED --variants base``, seed 0 the shipped one bit for bit)
and ``regression_expectile`` 0.5 (plain MSE, the shipped trainer), 0.65 or 0.8 (variants ``t0.5``,
``t0.65``, ``t0.8``), or with ``hidden`` 32 (the shipped width), 48 or 64 (``h32``, ``h48``,
``h64``: the network's capacity with twice session 31's training problems), saved. ``score``
puts each seed's forest into each saved model (and, on the H200, the shipped file's neighbour
memory, which session 49 built without ``train-active2.msgpack``), then prints validation top-1 /
stock, regret@1, regret@5 and its p95, the first Triton config's regret and the ATen top-1 picks
(``session52/margin_forest.py first_triton``), and top-1 / stock on OOS (``session51/call_study.py``).

Why: the validation top-1 gap to stock is carried by a few problems (``blunders.py gap``) where
the first pick is a config that falls off a cliff the features do not foretell, while near-tied
alternatives do not; a network that predicts an upper expectile places choices whose times
scatter around what their features say later.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
for _d in ("session31", "session44", "session50", "session51", "session52", "session53"):
    sys.path.insert(0, str(ROOT / "benchmarks/models" / _d))
from blunders import shipped  # noqa: E402
from call_study import oos_top1, val_figures  # noqa: E402
from forest_wave import forest_path  # noqa: E402
from margin_forest import first_triton  # noqa: E402
from retime import evals  # noqa: E402

TAG = {"NVIDIA-H200": "h200", "NVIDIA-H100": "h100"}


def job_model(a: argparse.Namespace, seed: int, variant: str):
    """The saved network of job ``s53-TAG-val-sSEED-VARIANT`` (in ``a.results``)."""
    from torch_diode.model import load_model

    return load_model(Path(a.results) / f"s53-{TAG[a.key]}-val-s{seed}-{variant}.safetensors")


@functools.cache
def seed_forest(key: str, seed: int):
    """Seed ``seed``'s ranking forest of KEY's training rows (``session51/forest_wave.py fit``)."""
    from torch_diode.forest import RankingForest

    z = np.load(forest_path(key, "base", seed))
    return RankingForest(z["features"], z["thresholds"], z["leaves"], shipped(key).forest.options)


def put_in(key: str, seed: int, model, shipped_memory: bool = True):
    """``model`` with seed ``seed``'s ranking forest and, on the H200, the shipped file's neighbour
    memory (session 49's, built without ``train-active2.msgpack``; the H100 jobs' own memory is the
    shipped file's configuration; ``shipped_memory`` False: the job's own memory stays)."""
    model.forest = seed_forest(key, seed)
    if key == "NVIDIA-H200" and shipped_memory:
        model.memory = shipped(key).memory
    return model


def scored(a: argparse.Namespace, seed: int, models, shipped_memory: bool = True) -> None:
    """Each of ``models`` (``(label, make)``: ``make(seed)`` gives a model) with :func:`put_in`'s
    forest and memory: its figures, one line each."""
    for label, make in models:
        model = put_in(a.key, seed, make(seed), shipped_memory)
        ev, _ = evals(a.key, model)
        print(
            f"{a.key} seed {seed} {label}: {val_figures(model, a.key, ev=ev)}; {first_triton(ev)}; {oos_top1(model, a.oos)}",
            flush=True,
        )


def cmd_score(a: argparse.Namespace) -> None:
    for seed in a.seeds:
        scored(a, seed, [(v, lambda seed, v=v: job_model(a, seed, v)) for v in a.variants])


def two_width(screen, wide, members: int | None = None):
    """``wide`` (a loaded model) scoring as a cascade whose screening member is ``screen``'s first
    (a narrower network of the same seed): ``screen``'s first member ranks every candidate, the
    ``wide`` ensemble's members all score its ``network_shortlist`` best (ATen always among them),
    and the rest keep the screening member's value shifted by the shortlist's mean difference, as
    ``DiodeModel._network`` does with its own first member; ``members``: only the wide ensemble's
    first that many score the shortlist. A study of the design (the scoring time of the current
    cascade with the wide network's quality), not a model file."""
    import types

    import torch

    from torch_diode.features import N_PROBLEM_FEATURES
    from torch_diode.model import Prediction

    s = N_PROBLEM_FEATURES
    screen_weights = screen.net.inference_weights(s, screen.normalization)[:1]
    wide_norm = wide.normalization

    def network(self, xs, x_rest, aten, weights):
        m = self.scoring.network_shortlist
        # ``xs`` comes standardised by the wide model's statistics: the screen's own instead
        raw = xs.numpy() / self._inv_std[:s] + wide_norm.x_mean[:s]
        xs_screen = torch.from_numpy(((raw - screen.normalization.x_mean[:s]) * screen._inv_std[:s]).astype(np.float32))
        first = screen.net.forward_shared(xs_screen, torch.from_numpy(x_rest), screen_weights).numpy()[0]
        n = len(x_rest)
        short = np.argpartition(np.where(aten, -np.inf, first), m - 1)[:m] if n > m else np.arange(n)
        top = self._summarise(self.net.forward_shared(xs, torch.from_numpy(x_rest[short]), weights[:members]).numpy())
        mean = first + np.mean(top.log_time_us - first[short])
        mean[short] = top.log_time_us
        std = np.full(n, np.mean(top.std), dtype=np.float32)
        std[short] = top.std
        return Prediction(mean.astype(np.float32), std)

    wide._network = types.MethodType(network, wide)
    return wide


def cmd_cascade(a: argparse.Namespace) -> None:
    for seed in a.seeds:
        scored(
            a,
            seed,
            [
                (
                    f"{a.screen} screening, {a.wide} shortlist" + (f" ({a.members} members)" if a.members else ""),
                    lambda seed: two_width(job_model(a, seed, a.screen), job_model(a, seed, a.wide), a.members),
                )
            ],
        )


def cmd_timing(a: argparse.Namespace) -> None:
    """Median wall time (ms) of ``predict`` on ``scripts/bench_scoring.py``'s 1,500 candidates, one
    thread, the same objects each call: seed ``a.seeds[0]``'s networks at 32 and 64 and the
    two-width emulation (with all four wide members and with three), each with :func:`put_in`'s
    forest and memory, interleaved round by round (a shared CPU changes speed over minutes)."""
    import statistics
    import time

    import torch

    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_scoring import exhaustive_choices

    from torch_diode.records import Problem

    torch.set_num_threads(1)
    seed = a.seeds[0]
    models = {
        a.screen: job_model(a, seed, a.screen),
        a.wide: job_model(a, seed, a.wide),
        "two widths": two_width(job_model(a, seed, a.screen), job_model(a, seed, a.wide)),
        "two widths, 3 wide members": two_width(job_model(a, seed, a.screen), job_model(a, seed, a.wide), 3),
    }
    for m in models.values():
        put_in(a.key, seed, m)
    problem = Problem(op="mm", m=1000, n=4096, k=4096, dtype="bfloat16")
    choices = exhaustive_choices(1500)
    for _ in range(a.rounds):
        line = []
        for name, m in models.items():
            for _ in range(20):
                m.predict(problem, choices)
            wall = []
            for _ in range(200):
                t = time.perf_counter()
                m.predict(problem, choices)
                wall.append(time.perf_counter() - t)
            line.append(f"{name} {statistics.median(wall) * 1e3:.3f} ms")
        print(f"{a.key} seed {seed}: " + ", ".join(line), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("score")
    s.add_argument("key", choices=sorted(TAG))
    s.add_argument("oos", help="the OOS dataset, relative to the repository root")
    s.add_argument("results", help="the folder of the jobs' saved models")
    s.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    s.add_argument("--variants", nargs="+", default=["t0.5", "t0.65", "t0.8"], help="the jobs' name endings")
    s.set_defaults(fn=cmd_score)
    c = sub.add_parser("cascade", help="the wide networks behind the narrow ones' first member (two_width)")
    c.add_argument("key", choices=sorted(TAG))
    c.add_argument("oos")
    c.add_argument("results")
    c.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    c.add_argument("--screen", default="h32")
    c.add_argument("--wide", default="h64")
    c.add_argument("--members", type=int, default=None, help="the wide ensemble's first N members only")
    c.set_defaults(fn=cmd_cascade)
    t = sub.add_parser("timing", help="predict's median time: the narrow, the wide and the two-width cascade")
    t.add_argument("key", choices=sorted(TAG))
    t.add_argument("results")
    t.add_argument("--seeds", nargs=1, type=int, default=[0])
    t.add_argument("--screen", default="h32")
    t.add_argument("--wide", default="h64")
    t.add_argument("--rounds", type=int, default=5)
    t.set_defaults(fn=cmd_timing)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
