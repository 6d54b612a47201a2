"""``diode demo``: what a torch-diode model does, in a few lines and a plot.

**Without a GPU** (and first, on one): each shipped model (:func:`shipped_models`), or one
``--model`` with its ``--dataset``, is evaluated on its GPU's held-out validation set,
``<data dir>/<hardware key>/val.msgpack``: the measured times of the exhaustive Triton space plus
ATen for problems the model never trained on. The metrics are :mod:`torch_diode.evaluate`'s
(README.md, Metrics): how close the model's top-1 and top-3 picks come to the exhaustive search's winner
(``regret@k``, geomean, and the share of problems within 2% of the winner), and how much
autotuning it saves: the choices Inductor still benchmarks with torch-diode's handler (its own
selection rule, :func:`torch_diode.inductor.choices.select`, with ``top_k_configs`` 1 and 3:
Triton configs plus ATen) against the size of the exhaustive space measured per problem, and how
fast the best of those choices is. Like the handler, the model ranks only the Triton configs the
handler would consider (``max_compile_cost``, from :mod:`torch_diode.config`), while regret is
measured against the winner of the whole measured space. When ``val-stock.msgpack`` (stock's
candidates of the same problems timed in a run of their own) or ``val-stock-picks.json`` (stock's
picks made in ``val.msgpack``'s own timings, which favours stock: :mod:`torch_diode.evaluate`)
sits beside the validation dataset (in ``<hardware key>/``, or in ``--dataset``'s folder), the
first of them in that order, the top-1 pick is also compared with stock max-autotune's
pick, and so is what a compile gets (stock's pick against the fastest of what the handler has
Inductor benchmark); a line says which file the picks came from and how they were made. One PNG
per model shows the regret distribution and the choices benchmarked per problem.

**On a GPU** it then compiles a small real module, a 2-layer MLP in bf16, cold (each compile in a
new process with new cache folders, after a warm-up compile there), once with stock max-autotune
and once with torch-diode's handler, and reports both compile times and step times
(:mod:`torch_diode.bench.measure`: CUDA events over CUDA-graph replays).

The lib never prints: :func:`run_demo` hands each line to a callback (the CLI prints them).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from torch_diode._text import NO_MATPLOTLIB, plural
from torch_diode.errors import DiodeError, MeasurementError, ModelNotFoundError

if TYPE_CHECKING:
    from torch_diode.bench.measure import Measurement
    from torch_diode.dataset import Dataset
    from torch_diode.evaluate import ProblemEval, StockPick
    from torch_diode.model import DiodeModel
    from torch_diode.records import Problem
    from torch_diode.weights import ModelEntry

log = logging.getLogger(__name__)

VAL_FILE = "val.msgpack"
#: Stock max-autotune's picks of the validation problems, first found wins: a dataset of stock's
#: candidates timed in a run of their own (``scripts/campaign.py run --split val-stock``), then a
#: solution file (``scripts/campaign.py stock``: picks made in the validation set's own timings).
STOCK_FILES: tuple[str, ...] = ("val-stock.msgpack", "val-stock-picks.json")
TOP_KS: tuple[int, ...] = (1, 3)
#: A pick "within 2%" of the exhaustive search's winner has regret <= this.
CLOSE = 1.02
#: The GPU part's module: a 2-layer MLP (tokens x hidden -> intermediate -> hidden), bf16.
MLP_TOKENS, MLP_HIDDEN, MLP_INTERMEDIATE = 512, 2048, 8192


def repo_data_dir() -> Path | None:
    """The repository's ``data/`` when this module runs from a source checkout (editable install or
    PYTHONPATH): ``packages/torch-diode-lib/src/torch_diode/demo.py`` -> ``<repo>/data``."""
    data = _checkout_data_candidate()
    return data if data is not None and data.is_dir() else None


def _checkout_data_candidate() -> Path | None:
    """``<repo>/data`` when this module's path is ``<repo>/packages/<dist>/src/torch_diode/demo.py``
    (a source checkout), whether or not it exists; None for an installed wheel."""
    here = Path(__file__).resolve()
    if len(here.parents) > 4 and here.parents[1].name == "src" and here.parents[3].name == "packages":
        return here.parents[4] / "data"
    return None


def cwd_data_dir() -> Path | None:
    """``./data`` of the current directory (absolute) when it holds the layout the demo reads: at
    least one ``<hardware key>/val.msgpack`` (a clone of the repository, with the packages
    installed from wheels)."""
    data = Path.cwd() / "data"
    return data if data.is_dir() and any(data.glob(f"*/{VAL_FILE}")) else None


def default_data_dir() -> Path | None:
    """The data directory without ``--data-dir``: the source checkout's ``data/``
    (:func:`repo_data_dir`), else ``./data`` when it holds ``<hardware key>/val.msgpack``
    (:func:`cwd_data_dir`); None when neither (:func:`_no_data_dir` says where it looked)."""
    return repo_data_dir() or cwd_data_dir()


def _no_data_dir() -> str:
    """Where :func:`default_data_dir` looked, for the message when it found nothing."""
    checkout = _checkout_data_candidate()
    looked = (
        f"the source checkout's {checkout} is not a directory"
        if checkout is not None
        else "torch_diode is installed, not run from a source checkout"
    )
    return f"no data directory found: {looked}, and {Path.cwd() / 'data'} holds no <hardware key>/{VAL_FILE}"


def shipped_models() -> list[ModelEntry]:
    """The models the registry lists (installed models packages, :mod:`torch_diode.registry`), plus
    those of ``torch_diode_models``'s manifest when that package is importable without being
    installed as a distribution (a source checkout on ``PYTHONPATH``). The package is located,
    never imported (importing it would register a model)."""
    from torch_diode import registry
    from torch_diode.weights import MANIFEST_FILENAME, read_manifest

    entries = {e.name: e for e in registry.list_available_models(refresh=True)}
    spec = importlib.util.find_spec("torch_diode_models")
    for directory in (spec.submodule_search_locations or []) if spec is not None else []:
        manifest = Path(directory) / MANIFEST_FILENAME
        if manifest.is_file():
            for entry in read_manifest(manifest, source=f"torch_diode_models ({manifest})"):
                entries.setdefault(entry.name, entry)
    return sorted(entries.values(), key=lambda e: e.name)


def _resolve_entry(entry: ModelEntry) -> Path:
    """A verified local file of a shipped model (the registry's resolution order, which may fetch
    a model that a slim wheel does not carry)."""
    from torch_diode import registry
    from torch_diode.weights import verify_file

    if entry.name in {e.name for e in registry.list_available_models()}:
        return registry.resolve(entry.name)
    path = entry.packaged_path
    if path is None or not path.is_file():
        raise ModelNotFoundError(f"model {entry.name}: its file {entry.file} is not in {entry.package_dir}")
    return verify_file(path, entry)


# -- the CPU part -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProblemDemo:
    """One validation problem: regret of the top-k picks and of what the handler keeps, per k."""

    problem: Problem
    measured: int  # choices measured (the exhaustive space plus ATen, failures left out)
    regret: Mapping[int, float]  # k -> fastest of the model's top k / the winner
    benchmarked: Mapping[int, int]  # k -> choices the handler keeps for Inductor to benchmark
    kept_regret: Mapping[int, float]  # k -> fastest of those / the winner
    stock_regret: float | None = None  # stock max-autotune's pick / the winner, when known


@dataclass(frozen=True)
class ModelDemo:
    """One model on its validation set (see the module docstring)."""

    name: str
    hardware: str
    dataset: Path
    records: int
    report: Mapping[str, Any]  # torch_diode.evaluate.evaluate_model's report
    problems: Sequence[ProblemDemo]
    plot: Path | None = None
    stock_file: Path | None = None  # where stock's picks came from, when a file

    def regret_geomean(self, k: int) -> float:
        return float(self.report["overall"][f"regret@{k}"]["geomean"])

    def regret_ci95(self, k: int) -> tuple[float, float]:
        """The geomean's 95% bootstrap interval over the problems (evaluate.geomean_ci95)."""
        lo, hi = self.report["overall"][f"regret@{k}"]["geomean_ci95"]
        return float(lo), float(hi)

    def within(self, k: int) -> int:
        """Problems whose top-k pick is within 2% of the exhaustive search's winner."""
        return sum(p.regret[k] <= CLOSE for p in self.problems)

    def median_benchmarked(self, k: int) -> float:
        return float(np.median([p.benchmarked[k] for p in self.problems]))

    def kept_regret_geomean(self, k: int) -> float:
        return float(np.exp(np.mean(np.log([p.kept_regret[k] for p in self.problems]))))

    def stock_geomeans(self) -> tuple[int, float, dict[int, float]] | None:
        """Over the problems with stock max-autotune's pick: their count, the geomean of stock's
        pick over the winner, and per k the geomean of the fastest of what the handler keeps over
        stock's pick (what a compile gets with torch-diode against what it gets stock)."""
        with_stock = [(p, p.stock_regret) for p in self.problems if p.stock_regret is not None]
        if not with_stock:
            return None
        stock_log = np.log([r for _, r in with_stock])
        kept = {
            k: float(np.exp(np.mean(np.log([p.kept_regret[k] for p, _ in with_stock]) - stock_log))) for k in TOP_KS
        }
        return len(with_stock), float(np.exp(np.mean(stock_log))), kept

    def median_measured(self) -> float:
        return float(np.median([p.measured for p in self.problems]))

    def problems_label(self, what: str = "problem") -> str:
        """ "N held-out problems", or, where the model's file lists shapes of these problems among
        its training shapes, "N problems (M of a shape the model was trained on: not held out)"."""
        n, trained = len(self.problems), (self.report.get("trained_shapes") or {}).get("problems", 0)
        if not trained:
            return plural(n, f"held-out {what}")
        return f"{plural(n, what)} ({trained:,} of a shape the model was trained on: not held out)"

    def lines(self) -> list[str]:
        from torch_diode.evaluate import stock_picked_here

        n = len(self.problems)
        lines = [
            f"{self.name} ({self.hardware}): {self.problems_label()}, {plural(self.records, 'timing')} ({self.dataset})"
        ]
        for k in TOP_KS:
            what = "top-1 pick" if k == 1 else f"top-{k} picks, the best of them"
            close = self.within(k)
            lo, hi = self.regret_ci95(k)
            lines.append(
                f"  {what}: {self.regret_geomean(k):.3f}x the exhaustive search's winner "
                f"(geomean; 95% interval {lo:.3f}-{hi:.3f}); "
                f"within 2% of it on {close:,}/{plural(n, 'problem')} ({close / n:.0%})"
            )
        space = self.median_measured()
        counts = [self.median_benchmarked(k) for k in TOP_KS]
        single = [sum(p.benchmarked[k] == 1 for p in self.problems) / n for k in TOP_KS]
        lines.append(
            "  autotuning: with torch-diode, Inductor is left "
            + " or ".join(f"{c:,.0f} (top-{k})" for k, c in zip(TOP_KS, counts))
            + f" choices per problem, ATen included, instead of the {space:,.0f} of the exhaustive space (medians): "
            + " / ".join(f"{space / c:,.0f}x" for c in counts)
            + " fewer, and benchmarks nothing (a single choice) on "
            + " / ".join(f"{x:.0%}" for x in single)
            + " of the problems; the fastest of them is "
            + " / ".join(f"{self.kept_regret_geomean(k):.3f}x" for k in TOP_KS)
            + " the winner (geomean)"
        )
        vs = self.report["overall"].get("vs_max_autotune", {})
        if vs.get("problems"):
            lines.append(
                f"  against stock max-autotune: the top-1 pick's kernel time is {vs['geomean']:.3f}x its pick's "
                f"(geomean over {plural(vs['problems'], 'problem')}), no slower on {vs['no_slower_share']:.0%} of them"
            )
            source = f"stock's picks ({self.stock_file.name})" if self.stock_file is not None else "stock's picks"
            if stock_picked_here(vs):
                how = (
                    "made in these timings, where the fastest of its candidates is low by selection (it favours stock)"
                )
            else:
                how = "made in a benchmark run of their own, scored in these timings"
            lines.append(f"  {source}: {how}")
        stock = self.stock_geomeans()
        if stock is not None:
            n_stock, stock_regret, kept = stock
            lines.append(
                f"  what a compile gets: stock max-autotune's pick is {stock_regret:.3f}x the winner; the fastest of "
                "what torch-diode has Inductor benchmark is "
                + " / ".join(f"{kept[k]:.3f}x" for k in TOP_KS)
                + f" stock's pick ({' / '.join(f'top-{k}' for k in TOP_KS)}; geomean over {plural(n_stock, 'problem')})"
            )
        if self.plot is not None:
            lines.append(f"  plot: {self.plot}")
        return lines


def best_measured_us(e: ProblemEval) -> float:
    """The fastest measured time of the problem's whole space (``e.oracle_us`` when its candidates
    leave some configs out), against which a pick's regret is taken."""
    best = float(e.measured_us.min())
    return best if e.oracle_us is None else min(e.oracle_us, best)


def handler_keeps(model: DiodeModel, e: ProblemEval, ks: Sequence[int]) -> dict[int, list[int]]:
    """Indices into ``e.choices`` that torch-diode's handler keeps with ``top_k_configs=k``, per k in
    ``ks`` (its other options as configured: ``torch_diode.config``, ``TORCH_DIODE_*``); the model
    predicts once for all of them."""
    from torch_diode.config import config
    from torch_diode.inductor.choices import select
    from torch_diode.ranking import aten_variant_call_trusted, order_of

    pred = model.predict(e.problem, e.choices)
    log_t = np.asarray(pred.log_time_us, dtype=np.float64)
    std = np.asarray(pred.std, dtype=np.float64)
    aten = np.array([c.is_aten for c in e.choices], dtype=bool)
    t_idx, a_idx = np.flatnonzero(~aten), np.flatnonzero(aten)
    opts = config.options()
    triton = [e.choices[int(i)] for i in t_idx]
    order = order_of(e.problem, triton, log_t[t_idx], diversity=opts.diversity, cliff_guard=opts.cliff_guard)
    keeps: dict[int, list[int]] = {}
    for k in ks:
        sel = select(
            log_t[t_idx],
            std[t_idx],
            log_t[a_idx],
            std[a_idx],
            opts.replace(top_k_configs=k),
            keep_one_triton=len(a_idx) == 0,
            triton_order=order,
            drop_slower_aten=aten_variant_call_trusted(e.problem),
        )
        keeps[k] = [int(t_idx[i]) for i in sel.triton] + [int(a_idx[i]) for i in sel.aten]
    return keeps


def evaluate_for_demo(
    model: DiodeModel,
    dataset: Dataset,
    *,
    name: str,
    dataset_path: Path,
    stock: Mapping[Problem, StockPick] | None = None,
    stock_file: Path | None = None,
) -> ModelDemo:
    """Evaluate ``model`` on ``dataset`` for the demo (no plot; see :func:`plot_demo`);
    ``stock_file``: the file ``stock`` was read from, named in the demo's lines.

    Raises:
        ValueError: the dataset holds no problem, or timings of another GPU than the model's.
    """
    from torch_diode.config import config
    from torch_diode.evaluate import evaluate_model, regret_at_k

    if dataset.hardware != model.hardware:
        raise ValueError(
            f"{dataset_path}: holds {dataset.hardware} timings but model {name} is for {model.hardware}; "
            "pass a dataset of the model's GPU"
        )
    opts = config.options()
    report, evals = evaluate_model(
        model,
        dataset,
        stock=stock,
        max_compile_cost=opts.max_compile_cost,
        diversity=opts.diversity,
        cliff_guard=opts.cliff_guard,
    )
    if not evals:
        raise ValueError(f"{dataset_path}: no problem with a timing to evaluate {name} on")
    space = {pt.problem: len(np.unique(pt.choice_idx)) for pt in dataset.by_problem()}
    problems = []
    for e in evals:
        oracle = best_measured_us(e)
        keeps = handler_keeps(model, e, TOP_KS)
        problems.append(
            ProblemDemo(
                problem=e.problem,
                measured=space[e.problem],
                regret=regret_at_k(e.measured_us, e.predicted_log_us, TOP_KS, oracle_us=e.oracle_us, order=e.ranked()),
                benchmarked={k: len(v) for k, v in keeps.items()},
                kept_regret={k: float(e.measured_us[v].min()) / oracle for k, v in keeps.items()},
                stock_regret=None if e.stock_us is None else e.stock_us / oracle,
            )
        )
    return ModelDemo(
        name=name,
        hardware=model.hardware,
        dataset=dataset_path,
        records=len(dataset),
        report=report,
        problems=problems,
        stock_file=stock_file if stock is not None else None,
    )


def plot_demo(demo: ModelDemo, path: str | os.PathLike[str]) -> Path | None:
    """Regret distribution (top-1, top-3, what the handler keeps) and the choices benchmarked per
    problem against the exhaustive space. Needs matplotlib (the ``plot`` extra); returns None and
    logs how to install it when it is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        log.warning(NO_MATPLOTLIB)
        return None
    from torch_diode.evaluate import ratio_axis

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.6))
    n = len(demo.problems)
    share = np.arange(1, n + 1) / n
    for label, values in (
        ("top-1 pick", [p.regret[1] for p in demo.problems]),
        ("best of top-3", [p.regret[3] for p in demo.problems]),
        ("what Inductor gets (top-3 + ATen benchmarked)", [p.kept_regret[3] for p in demo.problems]),
    ):
        ax1.step(np.sort(values), share, where="post", label=label)
    ax1.axvline(CLOSE, color="grey", ls="--", lw=1, label="within 2%")
    ax1.set_xscale("log")
    ratio_axis(ax1.xaxis)
    ax1.set_xlabel("kernel time / exhaustive search's winner")
    ax1.set_ylabel("share of problems")
    ax1.set_title("how close the picks come to the winner")
    ax1.legend(fontsize=8, loc="lower right")
    order = sorted(range(n), key=lambda i: demo.problems[i].measured)
    x = np.arange(n)
    ax2.bar(x, [demo.problems[i].measured for i in order], color="lightgrey", label="exhaustive space (measured)")
    for k, color in zip(TOP_KS, ("tab:blue", "tab:orange")):
        ax2.scatter(
            x,
            [demo.problems[i].benchmarked[k] for i in order],
            s=14,
            color=color,
            label=f"torch-diode top-{k} (ATen included)",
        )
    ax2.set_yscale("log")
    ax2.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax2.set_xlabel("validation problem (by size of the exhaustive space)")
    ax2.set_ylabel("choices benchmarked")
    ax2.set_title("autotuning work per problem")
    ax2.legend(fontsize=8)
    fig.suptitle(f"{demo.name} on {demo.problems_label(f'{demo.hardware} problem')}")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


# -- the GPU part -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuDemo:
    """A real module compiled cold with stock max-autotune and with torch-diode."""

    gpu: str
    hardware: str
    model: str
    stock: Measurement
    diode: Measurement
    #: ``check_ptxas().mismatch`` on this install: stock's compile may include kernels compiled twice
    ptxas_mismatch: bool = False

    def lines(self) -> list[str]:
        s, d = self.stock, self.diode
        lines = [
            f"GPU {self.gpu} ({self.hardware}), model {self.model}: a 2-layer MLP (bf16, {MLP_TOKENS} tokens, "
            f'{MLP_HIDDEN} -> {MLP_INTERMEDIATE} -> {MLP_HIDDEN}), torch.compile(mode="max-autotune-no-cudagraphs"), '
            "each compiled cold in a new process",
            f"  cold compile: stock {s.compile_s:.2f} s, torch-diode {d.compile_s:.2f} s "
            f"({s.compile_s / d.compile_s:.1f}x faster)",
            f"  step time (median over CUDA-graph replays): stock {s.kernel_us:.1f} us, torch-diode "
            f"{d.kernel_us:.1f} us ({d.kernel_us / s.kernel_us:.3f}x stock's)",
        ]
        st = d.diode or {}
        if st.get("gemm_calls"):
            lines.append(
                f"  torch-diode kept {st['candidates_kept']:,} of {plural(st['candidates_seen'], 'candidate choice')} "
                f"over {plural(st['gemm_calls'], 'GEMM')} for Inductor to benchmark "
                f"({plural(st['fallbacks_total'], 'fallback')})"
            )
        if self.ptxas_mismatch:
            from torch_diode.inductor.ptxas import NOTE

            lines.append(f"  note: {NOTE}")
        return lines


#: Seconds each of the GPU part's compiles may take, its process's start-up and warm-up included
#: (about 20 s stock, 2 s with torch-diode, plus about 25 s of start-up, on an H200).
GPU_DEMO_TIMEOUT_S = 600.0


def gpu_demo(model_path: str | Path, *, model_name: str, graph_iters: int = 20, reps: int = 20) -> GpuDemo:
    """Compile the MLP cold twice, each in a new process (stock max-autotune, then torch-diode
    top-3: the handler's default) and time both (see :mod:`torch_diode.bench.measure`).

    Raises:
        MeasurementError: a measurement failed or ran past ``GPU_DEMO_TIMEOUT_S`` (its cause).
    """
    import torch

    from torch_diode.bench.isolate import run_in_new_process
    from torch_diode.bench.measure import Measurement
    from torch_diode.hardware import detect
    from torch_diode.inductor.ptxas import check_ptxas

    got = {}
    for mode, what in (("max-autotune", "stock max-autotune"), ("diode-top3", "torch-diode")):
        log.info("compiling the MLP with %s (cold, in a new process)...", what)
        kwargs = {"mode": mode, "model_path": str(model_path), "graph_iters": graph_iters, "reps": reps}
        entry = run_in_new_process("torch_diode.demo:measure_mlp", kwargs, timeout_s=GPU_DEMO_TIMEOUT_S)
        if "error" in entry:
            raise MeasurementError(
                f"the GPU part's {what} compile failed: {entry['error']} (the rest of the demo is above; "
                "--cpu-only leaves the GPU part out)"
            )
        got[mode] = Measurement.from_dict(entry)
    info = detect()
    return GpuDemo(
        torch.cuda.get_device_name(),
        info.key or "unknown",
        model_name,
        got["max-autotune"],
        got["diode-top3"],
        ptxas_mismatch=check_ptxas().mismatch,
    )


def measure_mlp(*, mode: str, model_path: str, graph_iters: int, reps: int) -> dict[str, Any]:
    """In a new process: the demo's MLP compiled cold in ``mode`` and timed (a bench results entry)."""
    from torch_diode.bench import measure

    def build() -> tuple[Any, tuple[Any, ...]]:
        import torch
        from torch import nn

        mlp = nn.Sequential(nn.Linear(MLP_HIDDEN, MLP_INTERMEDIATE), nn.GELU(), nn.Linear(MLP_INTERMEDIATE, MLP_HIDDEN))
        mlp = mlp.to("cuda", torch.bfloat16).eval()
        return mlp, (torch.randn(MLP_TOKENS, MLP_HIDDEN, device="cuda", dtype=torch.bfloat16),)

    return measure.measure_here(build, mode, model_path=model_path, graph_iters=graph_iters, reps=reps)


# -- the command --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class DemoOptions:
    """Options of :func:`run_demo`.

    Attributes:
        model: a model file or registered name; None: every shipped model.
        dataset: the validation dataset of ``model`` (default: ``<data_dir>/<its key>/val.msgpack``).
        data_dir: holds ``<hardware key>/val.msgpack`` (default: :func:`default_data_dir`).
        plot_dir: where the PNGs go (created when missing).
        gpu: also run the GPU part when a CUDA GPU is present.
        train_previews: train a preview per GPU of ``data_dir`` (:func:`train_previews`) and show it
            instead of the shipped models (without shipped models the demo does so by itself).
    """

    model: str | None = None
    dataset: Path | None = None
    data_dir: Path | None = None
    plot_dir: Path = field(default_factory=lambda: Path("diode-demo"))
    gpu: bool = True
    train_previews: bool = False

    def __post_init__(self) -> None:
        if self.dataset is not None and self.model is None:
            raise ValueError("--dataset needs --model: which model should be evaluated on it?")
        if self.train_previews and (self.model is not None or self.dataset is not None):
            raise ValueError("--train-previews trains its own models: give it no --model or --dataset")
        for name in ("dataset", "data_dir", "plot_dir"):
            v = getattr(self, name)
            if v is not None:
                object.__setattr__(self, name, Path(v))


#: Training file of a campaign directory (``data/<hardware key>/``), for :func:`train_previews`.
TRAIN_FILE = "train.msgpack"


def train_previews(
    data_dir: Path, out_dir: Path, emit: Callable[[str], None], *, shipped: bool = False
) -> list[tuple[str, Path]]:
    """Train a preview model per hardware key of ``data_dir`` that has both a training and a
    validation file (two to three minutes each on a 2-core CPU; the same trainer and options as
    ``diode train --seed 0 --val-fraction 0``): when no model is shipped, so the demo still shows
    the whole toolchain, or on request (``shipped``: models ship, the line says it was asked for)."""
    import time

    from torch_diode.dataset import read_dataset
    from torch_diode.model import save_model
    from torch_diode.train import TrainOptions, train

    out: list[tuple[str, Path]] = []
    keys = sorted(d for d in data_dir.iterdir() if (d / TRAIN_FILE).is_file() and (d / VAL_FILE).is_file())
    for d in keys:
        t0 = time.perf_counter()
        ds = read_dataset(d / TRAIN_FILE)
        # The trainer's defaults but no split (`diode train --seed 0 --val-fraction 0`,
        # benchmarks/models/<KEY>-preview/README.md): the GPU's validation file is the held-out set
        # here, and without early stopping the split's problems would only be reported on, not
        # learnt from (benchmarks/models/curve-session16.md).
        opts = TrainOptions(seed=0, val_fraction=0.0, progress=False)
        model, report = train(ds, opts)
        path = save_model(model, out_dir / f"{d.name}-matmul-preview.safetensors")
        emit(
            ("--train-previews: " if shipped else "no shipped model yet: ")
            + f"trained a preview {d.name} model on {d / TRAIN_FILE} "
            f"({plural(report.train_problems + report.val_problems, 'problem')}, {plural(len(ds), 'timing')}) in "
            f"{time.perf_counter() - t0:.0f} s on {report.device}"
        )
        out.append((f"{d.name}-matmul-preview", path))
    return out


def _targets(
    options: DemoOptions, data_dir: Path | None = None, emit: Callable[[str], None] | None = None
) -> list[tuple[str, Path]]:
    """(name, local model file) of every model to show: the given one, every shipped one, or, with
    none shipped, a preview trained now from ``data_dir`` (:func:`train_previews`).

    Raises:
        ModelNotFoundError: no model was given, none is shipped and none can be trained, or the
            given one does not exist.
    """
    from torch_diode import registry

    if options.model is not None:
        return [(Path(options.model).name.removesuffix(".safetensors"), registry.resolve(options.model))]
    entries = shipped_models()
    if (options.train_previews or not entries) and data_dir is not None and options.dataset is None:
        options.plot_dir.mkdir(parents=True, exist_ok=True)
        previews = train_previews(data_dir, options.plot_dir, emit or (lambda line: None), shipped=bool(entries))
        if previews:
            return previews
    if options.train_previews:
        raise ModelNotFoundError(
            f"--train-previews: no <hardware key>/{TRAIN_FILE} with a {VAL_FILE} beside it in "
            + (str(data_dir) if data_dir is not None else f"the data directory ({_no_data_dir()}; pass --data-dir DIR)")
        )
    if not entries:
        raise ModelNotFoundError(
            "no shipped model found: no installed models package lists one (`pip install torch-diode-models` "
            "brings the H100 and H200 models) and no training data to train a preview from; pass "
            "--model FILE --dataset FILE to show your own"
        )
    out = []
    for entry in entries:
        try:
            out.append((entry.name, _resolve_entry(entry)))
        except (DiodeError, OSError) as e:  # one unobtainable model (offline, corrupt) is reported, the others shown
            log.warning("model %s is skipped: it cannot be obtained (%s: %s)", entry.name, type(e).__name__, e)
    if not out:
        raise ModelNotFoundError(f"none of the shipped models ({', '.join(e.name for e in entries)}) can be obtained")
    return out


def run_demo(options: DemoOptions, emit: Callable[[str], None]) -> list[ModelDemo | GpuDemo]:
    """Run the demo, handing each output line to ``emit``; returns what was shown.

    Raises:
        ModelNotFoundError: no model to show (see :func:`_targets`).
        ValueError: no validation data for any model (and no GPU part to run instead), a dataset of
            another GPU than its model's, or no data directory to look in.
        MeasurementError: the GPU part's compile failed (:func:`gpu_demo`).
    """
    import torch

    from torch_diode.dataset import read_dataset
    from torch_diode.evaluate import picks_of_other_problems, read_max_autotune_solution
    from torch_diode.hardware import detect
    from torch_diode.model import load_model

    data_dir = options.data_dir or default_data_dir()
    targets = _targets(options, data_dir, emit)
    models = {name: load_model(path) for name, path in targets}
    gpu_key = detect().key if options.gpu and torch.cuda.is_available() else None
    gpu_model = next((n for n, m in models.items() if gpu_key is not None and m.hardware == gpu_key), None)
    shown: list[ModelDemo | GpuDemo] = []
    missing: list[str] = []
    for name, model in models.items():
        if options.dataset is not None:
            path = options.dataset
        elif data_dir is None:
            missing.append(f"{name}: {_no_data_dir()} (pass --data-dir DIR holding {model.hardware}/{VAL_FILE})")
            continue
        else:
            path = data_dir / model.hardware / VAL_FILE
        # stock's picks beside the dataset, by name (never the dataset itself: a --dataset val-stock.msgpack)
        stock_path = next(
            (p for f in STOCK_FILES if (p := path.parent / f).is_file() and p.resolve() != path.resolve()), None
        )
        if not path.is_file():
            missing.append(f"{name}: no validation data at {path}")
            continue
        stock = None
        if stock_path is not None:
            try:
                stock = read_max_autotune_solution(stock_path)
            except (DiodeError, ValueError, OSError) as e:  # found by name, not asked for: noted, left out
                emit(f"note: {stock_path} is unreadable ({e}); not compared")
                stock_path = None
        dataset = read_dataset(path)
        if stock is not None and picks_of_other_problems(dataset, stock):
            # found beside the data by name, not asked for: a stale file leaves its comparison out
            emit(
                f"note: {stock_path} holds stock's picks of none of {path}'s problems (another collection's?); not compared"
            )
            stock, stock_path = None, None
        demo = evaluate_for_demo(model, dataset, name=name, dataset_path=path, stock=stock, stock_file=stock_path)
        demo = dataclasses.replace(demo, plot=plot_demo(demo, options.plot_dir.resolve() / f"{name}.png"))
        shown.append(demo)
        for line in demo.lines():
            emit(line)
    for line in missing:
        emit(f"skipped {line}")
    if not shown and gpu_model is None:
        raise ValueError(
            "no validation data for any model: " + "; ".join(missing) + ". Pass --data-dir DIR or --dataset FILE"
        )
    if gpu_model is not None:
        gpu = gpu_demo(dict(targets)[gpu_model], model_name=gpu_model)
        shown.append(gpu)
        for line in gpu.lines():
            emit(line)
    elif options.gpu and torch.cuda.is_available():
        emit(
            f"GPU part skipped: no model for this GPU ({gpu_key or 'unknown hardware key'}); models are for "
            + ", ".join(sorted({m.hardware for m in models.values()}))
        )
    return shown
