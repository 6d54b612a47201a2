"""``diode demo`` end to end: tiny real models trained on the committed GPU timings, evaluated on
held-out real timings, through the real CLI; shipped models discovered from a real installed
distribution (a dist-info directory with an entry point, as pip lays it out).

data/NVIDIA-H200/train.msgpack and val.msgpack are real H200 timings (the validation problems with
the full EXHAUSTIVE space plus ATen); data/NVIDIA-H100/shared-spec/val-stock.msgpack (collected before
the literal-kernel fix, kept as a real test fixture) is stock max-autotune's
DEFAULT-space candidates of real H100 validation problems. Training is a few epochs on one thread,
so the models are poor: the tests check structure and consistency, never quality.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from pathlib import Path

import pytest

import torch_diode
from torch_diode.config import config
from torch_diode.dataset import read_dataset, write_dataset
from torch_diode.demo import (
    STOCK_FILES,
    DemoOptions,
    best_measured_us,
    cwd_data_dir,
    default_data_dir,
    evaluate_for_demo,
    handler_keeps,
    repo_data_dir,
    run_demo,
    shipped_models,
)
from torch_diode.evaluate import evaluate_model, read_max_autotune_solution
from torch_diode.model import load_model, save_model
from torch_diode.train import TrainOptions, split_problems, train
from torch_diode.weights import entry_for_model_file, write_manifest

REPO = Path(__file__).resolve().parents[1]
H200_TRAIN = REPO / "data" / "NVIDIA-H200" / "train.msgpack"
H200_VAL = REPO / "data" / "NVIDIA-H200" / "val.msgpack"
H100_STOCK = REPO / "data" / "NVIDIA-H100" / "shared-spec" / "val-stock.msgpack"
SRC_DIRS = [REPO / "packages" / p / "src" for p in ("torch-diode-lib", "torch-diode-models", "torch-diode")]
# The CLI runs in a temp directory: make sure it imports this checkout even with a relative PYTHONPATH.
ENV = {"PYTHONPATH": os.pathsep.join([str(Path(torch_diode.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
FAST = dict(
    ensemble_size=2,
    batch_size=8,
    max_choices_per_problem=64,
    num_epochs=4,
    progress=False,
    num_threads=1,
    forest_trees=8,
)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: The demo's lines about stock max-autotune's picks.
STOCK_LINES = ("  against stock max-autotune:", "  stock's picks", "  what a compile gets:")


@pytest.fixture(scope="module")
def h200_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model trained on the real H200 training timings (never on the validation problems)."""
    model, _ = train(read_dataset(H200_TRAIN), TrainOptions(seed=0, **FAST))
    return save_model(model, tmp_path_factory.mktemp("h200") / "NVIDIA-H200-tiny.safetensors")


@pytest.fixture(scope="module")
def h200_val_small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first five H200 validation problems (for the tests that only need the demo to run)."""
    val = read_dataset(H200_VAL)
    keep = [t.problem for t in val.by_problem()[:5]]
    return write_dataset(val.select_problems(keep), tmp_path_factory.mktemp("h200-val") / "val.msgpack")


@pytest.fixture(scope="module")
def h100_setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny H100 model trained on half the real H100 problems, and a data directory whose
    ``NVIDIA-H100/val.msgpack`` is the other half and ``val-stock.msgpack`` the real stock file."""
    real = read_dataset(H100_STOCK)
    problems = [t.problem for t in real.by_problem()]
    tr, va = split_problems(problems, 0.5, seed=3)
    model, _ = train(real.select_problems([problems[i] for i in tr]), TrainOptions(seed=3, **FAST))
    root = tmp_path_factory.mktemp("h100")
    data = root / "data" / "NVIDIA-H100"
    data.mkdir(parents=True)
    write_dataset(real.select_problems([problems[i] for i in va]), data / "val.msgpack")
    shutil.copy(H100_STOCK, data / "val-stock.msgpack")
    return save_model(model, root / "NVIDIA-H100-tiny.safetensors"), root / "data"


def _one_line_error(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, proc.stdout, proc.stderr)
    return lines[0]


def test_demo_with_model_and_dataset(run_diode, h200_model: Path, tmp_path: Path) -> None:
    r = run_diode(
        "demo",
        "--model",
        str(h200_model),
        "--dataset",
        str(H200_VAL),
        "--plot-dir",
        str(tmp_path / "plots"),
        "--cpu-only",
        env=ENV,
        check=True,
    )
    lines = r.stdout.strip().splitlines()
    val = read_dataset(H200_VAL)
    n = len(val.by_problem())
    assert lines[0] == f"NVIDIA-H200-tiny (NVIDIA-H200): {n} held-out problems, {len(val):,} timings ({H200_VAL})"
    # The printed regrets are evaluate.py's, for the same model and data.
    report, _ = evaluate_model(load_model(h200_model), val, max_compile_cost=config.options().max_compile_cost)
    for k, line in zip((1, 3), lines[1:3]):
        m = re.fullmatch(
            rf"  top-{k} pick[^:]*: (\d+\.\d{{3}})x the exhaustive search's winner "
            rf"\(geomean; 95% interval (\d+\.\d{{3}})-(\d+\.\d{{3}})\); "
            rf"within 2% of it on (\d+)/{n} problems \((\d+)%\)",
            line,
        )
        assert m, line
        assert m[1] == f"{report['overall'][f'regret@{k}']['geomean']:.3f}"
        lo, hi = report["overall"][f"regret@{k}"]["geomean_ci95"]
        assert (m[2], m[3]) == (f"{lo:.3f}", f"{hi:.3f}") and float(m[2]) <= float(m[1]) <= float(m[3])
        assert 0 <= int(m[4]) <= n
    m = re.fullmatch(
        r"  autotuning: with torch-diode, Inductor is left (\d+) \(top-1\) or (\d+) \(top-3\) choices per problem, "
        r"ATen included, instead of the ([\d,]+) of the exhaustive space \(medians\): ([\d,]+)x / ([\d,]+)x fewer, "
        r"and benchmarks nothing \(a single choice\) on (\d+)% / (\d+)% of the problems; "
        r"the fastest of them is (\d+\.\d+)x / (\d+\.\d+)x the winner \(geomean\)",
        lines[3],
    )
    assert m, lines[3]
    top1, top3, space = int(m[1]), int(m[2]), int(m[3].replace(",", ""))
    assert 1 <= top1 <= top3 < space
    # a larger top-k never leaves a single choice on more problems
    assert 0 <= int(m[7]) <= int(m[6]) <= 100
    # Benchmarking more choices never gives a slower best one; both are at least the winner.
    assert 1.0 <= float(m[9]) <= float(m[8])
    # data/NVIDIA-H200/val-stock.msgpack sits beside the dataset: stock's picks are compared too
    assert re.fullmatch(
        rf"  against stock max-autotune: .*\(geomean over {n} problems\), no slower on \d+% of them", lines[4]
    )
    assert (
        lines[5] == "  stock's picks (val-stock.msgpack): made in a benchmark run of their own, scored in these timings"
    )
    assert (
        lines[6].startswith("  what a compile gets: stock max-autotune's pick is ")
        and f"over {n} problems)" in lines[6]
    )
    assert lines[7] == f"  plot: {tmp_path / 'plots' / 'NVIDIA-H200-tiny.png'}"
    assert (tmp_path / "plots" / "NVIDIA-H200-tiny.png").read_bytes().startswith(PNG_MAGIC)
    assert len(lines) == 8


def test_demo_numbers_match_the_evaluation(h200_model: Path, h200_val_small: Path) -> None:
    model, val = load_model(h200_model), read_dataset(h200_val_small)
    demo = evaluate_for_demo(model, val, name="m", dataset_path=h200_val_small)
    _, evals = evaluate_model(model, val)  # every measured choice: the size of the exhaustive space
    assert len(demo.problems) == len(evals) == 5
    for p, e in zip(demo.problems, evals):
        assert p.problem == e.problem and p.measured == len(e.choices)
        assert 1 <= p.benchmarked[1] <= p.benchmarked[3] <= p.measured
        # ATen is kept unless the model is sure it loses; the handler keeps at most 2k Triton configs.
        assert p.benchmarked[3] - sum(c.is_aten for c in e.choices) <= 6
        assert 1.0 <= p.kept_regret[3] <= p.kept_regret[1]
    geo = math.exp(sum(math.log(p.regret[1]) for p in demo.problems) / len(demo.problems))
    assert demo.regret_geomean(1) == pytest.approx(geo)


def test_demo_compares_with_stock_max_autotune(h100_setup: tuple[Path, Path], tmp_path: Path) -> None:
    model_path, data_dir = h100_setup
    lines: list[str] = []
    shown = run_demo(
        DemoOptions(model=str(model_path), data_dir=data_dir, plot_dir=tmp_path, gpu=False), emit=lines.append
    )
    assert len(shown) == 1 and lines[0].startswith("NVIDIA-H100-tiny (NVIDIA-H100): ")
    n = len(read_dataset(data_dir / "NVIDIA-H100" / "val.msgpack").by_problem())
    stock = [ln for ln in lines if ln.startswith("  against stock max-autotune:")]
    assert len(stock) == 1, lines
    assert re.search(rf"\(geomean over {n} problems\), no slower on \d+% of them$", stock[0]), stock[0]
    # val.msgpack here is half of the stock file itself: the picks carry its own times
    source = lines[lines.index(stock[0]) + 1]
    assert source.startswith("  stock's picks (val-stock.msgpack): made in these timings"), source
    assert (tmp_path / "NVIDIA-H100-tiny.png").is_file()
    # What a compile gets: stock's pick against the winner, and the fastest of what the handler
    # keeps against stock's pick, recomputed here from the evaluation and the handler's rule.
    got = [ln for ln in lines if ln.startswith("  what a compile gets:")]
    assert len(got) == 1, lines
    m = re.fullmatch(
        r"  what a compile gets: stock max-autotune's pick is (\d\.\d{3})x the winner; the fastest of what "
        rf"torch-diode has Inductor benchmark is (\d\.\d{{3}})x / (\d\.\d{{3}})x stock's pick \(top-1 / top-3; "
        rf"geomean over {n} problems\)",
        got[0],
    )
    assert m, got[0]
    model = load_model(model_path)
    val = read_dataset(data_dir / "NVIDIA-H100" / "val.msgpack")
    stock_picks = read_max_autotune_solution(data_dir / "NVIDIA-H100" / "val-stock.msgpack")
    _, evals = evaluate_model(model, val, stock=stock_picks, max_compile_cost=config.options().max_compile_cost)
    stock_log = [math.log(e.stock_us / best_measured_us(e)) for e in evals]
    assert len(stock_log) == n and all(x >= 0 for x in stock_log)
    assert m[1] == f"{math.exp(sum(stock_log) / n):.3f}"
    for k, figure in zip((1, 3), (m[2], m[3])):
        kept = [min(e.measured_us[i] for i in handler_keeps(model, e, (k,))[k]) / e.stock_us for e in evals]
        assert figure == f"{math.exp(sum(math.log(r) for r in kept) / n):.3f}"


def test_demo_reads_stock_picks_from_a_solution_file(h200_model: Path, h200_val_small: Path, tmp_path: Path) -> None:
    # val-stock-picks.json: stock max-autotune's (DEFAULT-space) picks of the H200 validation
    # problems, looked up in their full-space timings (scripts/campaign.py stock).
    data = tmp_path / "data" / "NVIDIA-H200"
    data.mkdir(parents=True)
    shutil.copy(h200_val_small, data / "val.msgpack")
    shutil.copy(H200_VAL.with_name("val-stock-picks.json"), data / "val-stock-picks.json")
    lines: list[str] = []
    run_demo(DemoOptions(model=str(h200_model), data_dir=tmp_path / "data", plot_dir=tmp_path, gpu=False), lines.append)
    stock = [ln for ln in lines if ln.startswith("  against stock max-autotune:")]
    assert len(stock) == 1 and "(geomean over 5 problems)" in stock[0], lines
    assert lines[lines.index(stock[0]) + 1].startswith("  stock's picks (val-stock-picks.json): made in these timings")


def test_demo_prefers_stock_picks_made_in_a_run_of_their_own(
    h200_model: Path, h200_val_small: Path, tmp_path: Path
) -> None:
    # val-stock.msgpack: the H200's DEFAULT candidates timed in a run of their own (session 62);
    # beside val-stock-picks.json, the demo takes it and says how its picks were made.
    data = tmp_path / "data" / "NVIDIA-H200"
    data.mkdir(parents=True)
    shutil.copy(h200_val_small, data / "val.msgpack")
    for f in ("val-stock.msgpack", "val-stock-picks.json"):
        shutil.copy(H200_VAL.with_name(f), data / f)
    lines: list[str] = []
    run_demo(DemoOptions(model=str(h200_model), data_dir=tmp_path / "data", plot_dir=tmp_path, gpu=False), lines.append)
    stock = [ln for ln in lines if ln.startswith("  against stock max-autotune:")]
    assert len(stock) == 1 and "(geomean over 5 problems)" in stock[0], lines
    source = lines[lines.index(stock[0]) + 1]
    assert (
        source == "  stock's picks (val-stock.msgpack): made in a benchmark run of their own, scored in these timings"
    )


def test_demo_with_a_dataset_reads_stock_picks_beside_it(
    h200_model: Path, h200_val_small: Path, tmp_path: Path
) -> None:
    # --dataset F: stock's picks are looked for beside F under the data directory's names, in its order.
    here = tmp_path / "elsewhere"
    here.mkdir()
    dataset = shutil.copy(h200_val_small, here / "val.msgpack")
    for f in STOCK_FILES:
        shutil.copy(H200_VAL.with_name(f), here / f)
    options = DemoOptions(model=str(h200_model), dataset=dataset, plot_dir=tmp_path, gpu=False)
    lines: list[str] = []
    run_demo(options, lines.append)
    stock = [ln for ln in lines if ln.startswith("  against stock max-autotune:")]
    assert len(stock) == 1 and "(geomean over 5 problems)" in stock[0], lines
    source = lines[lines.index(stock[0]) + 1]
    assert (
        source == "  stock's picks (val-stock.msgpack): made in a benchmark run of their own, scored in these timings"
    )
    assert sum(ln.startswith("  what a compile gets:") for ln in lines) == 1, lines
    # Found by name, not asked for: picks of none of the dataset's problems are noted and not compared.
    real = read_dataset(H200_VAL.with_name("val-stock.msgpack"))
    shown = set(read_dataset(dataset).problems)
    write_dataset(real.select_problems([p for p in real.problems if p not in shown]), here / "val-stock.msgpack")
    lines = []
    run_demo(options, lines.append)
    assert (
        f"note: {here / 'val-stock.msgpack'} holds stock's picks of none of {dataset}'s problems (another "
        "collection's?); not compared"
    ) in lines
    assert not any(ln.startswith(STOCK_LINES) for ln in lines), lines
    # A damaged one is noted and left out too (the demo is not stopped by a file it was not asked to read).
    (here / "val-stock.msgpack").unlink()
    (here / "val-stock-picks.json").write_text("{bad")
    lines = []
    run_demo(options, lines.append)
    assert any(ln.startswith(f"note: {here / 'val-stock-picks.json'} is unreadable (") for ln in lines), lines
    assert not any(ln.startswith(STOCK_LINES) for ln in lines), lines
    # A dataset named like a stock file is not its own stock.
    alone = tmp_path / "alone"
    alone.mkdir()
    lines = []
    run_demo(
        DemoOptions(model=str(h200_model), dataset=shutil.copy(h200_val_small, alone / "val-stock.msgpack"),
                    plot_dir=tmp_path, gpu=False),
        lines.append,
    )  # fmt: skip
    assert lines[0].startswith("NVIDIA-H200-tiny (NVIDIA-H200): 5 held-out problems"), lines
    assert not any(ln.startswith(STOCK_LINES) for ln in lines), lines


def test_demo_of_installed_packages_reads_data_in_the_current_directory(
    run_diode, h200_model: Path, h200_val_small: Path, tmp_path: Path
) -> None:
    """In a clone of the repository with the packages installed from wheels (torch_diode, copied as a
    wheel lays it out, outside any source checkout), the demo reads ./data."""
    site = tmp_path / "site"
    shutil.copytree(
        Path(torch_diode.__file__).parent, site / "torch_diode", ignore=shutil.ignore_patterns("__pycache__")
    )
    env = {"PYTHONPATH": str(site)}
    args = ("demo", "--model", str(h200_model), "--plot-dir", "plots", "--cpu-only")
    data = tmp_path.resolve() / "data"  # the CLI runs in tmp_path
    (data / "NVIDIA-H200").mkdir(parents=True)  # without <KEY>/val.msgpack, ./data is not a data directory
    err = _one_line_error(run_diode(*args, env=env))
    assert err == (
        "diode demo: error: no validation data for any model: NVIDIA-H200-tiny: no data directory found: "
        f"torch_diode is installed, not run from a source checkout, and {data} holds no <hardware key>/val.msgpack "
        "(pass --data-dir DIR holding NVIDIA-H200/val.msgpack). Pass --data-dir DIR or --dataset FILE"
    )
    shutil.copy(h200_val_small, data / "NVIDIA-H200" / "val.msgpack")
    out = run_diode(*args, env=env, check=True).stdout.splitlines()
    n = len(read_dataset(h200_val_small))
    assert (
        out[0]
        == f"NVIDIA-H200-tiny (NVIDIA-H200): 5 held-out problems, {n:,} timings ({data / 'NVIDIA-H200' / 'val.msgpack'})"
    )
    assert (tmp_path / "plots" / "NVIDIA-H200-tiny.png").is_file()


def test_a_source_checkout_reads_its_own_data_first(h200_val_small: Path, tmp_path: Path, monkeypatch) -> None:
    if repo_data_dir() is None:
        pytest.skip("torch_diode is not imported from a source checkout here")
    (tmp_path / "data" / "NVIDIA-H200").mkdir(parents=True)
    shutil.copy(h200_val_small, tmp_path / "data" / "NVIDIA-H200" / "val.msgpack")
    monkeypatch.chdir(tmp_path)
    assert cwd_data_dir() == Path.cwd() / "data"
    assert default_data_dir() == REPO / "data"


def _install_models_package(site: Path, models: list[Path]) -> None:
    """Lay out an installed models distribution (entry point + manifest + weights) in ``site``."""
    info = site / "demo_models-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-models\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[torch_diode.models]\ndemo_models = demo_models\n")
    pkg = site / "demo_models"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('the demo must not import a models package')\n")
    entries = []
    for path in models:
        shutil.copy(path, pkg / path.name)
        entries.append(entry_for_model_file(pkg / path.name))
    write_manifest(pkg / "manifest.json", entries)


def test_demo_shows_every_shipped_model(
    run_diode, h200_model: Path, h200_val_small: Path, h100_setup: tuple[Path, Path], tmp_path: Path
) -> None:
    site = tmp_path / "site"
    h200 = tmp_path / "NVIDIA-H200-matmul.safetensors"
    h100 = tmp_path / "NVIDIA-H100-matmul.safetensors"
    shutil.copy(h200_model, h200)
    shutil.copy(h100_setup[0], h100)
    _install_models_package(site, [h200, h100])
    data = tmp_path / "data" / "NVIDIA-H200"  # validation data for the H200 model only
    data.mkdir(parents=True)
    shutil.copy(h200_val_small, data / "val.msgpack")
    env = {"PYTHONPATH": os.pathsep.join([str(site), *map(str, SRC_DIRS)])}
    r = run_diode(
        "demo", "--data-dir", str(tmp_path / "data"), "--plot-dir", "plots", "--cpu-only", env=env, check=True
    )
    out = r.stdout.splitlines()
    assert any(ln.startswith("NVIDIA-H200-matmul (NVIDIA-H200): 5 held-out problems") for ln in out), r.stdout
    assert (
        f"skipped NVIDIA-H100-matmul: no validation data at {tmp_path / 'data' / 'NVIDIA-H100' / 'val.msgpack'}" in out
    )
    assert (tmp_path / "plots" / "NVIDIA-H200-matmul.png").is_file()  # the CLI runs in tmp_path


def test_demo_without_matplotlib_says_so_and_skips_the_plot(
    run_diode, h200_model: Path, h200_val_small: Path, tmp_path: Path
) -> None:
    # The outside world only: a stand-in matplotlib that cannot be imported, first on the path.
    shim = tmp_path / "no-matplotlib" / "matplotlib"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('matplotlib is hidden for this test')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(shim.parent), ENV["PYTHONPATH"]])}
    r = run_diode(
        "demo", "--model", str(h200_model), "--dataset", str(h200_val_small), "--cpu-only", env=env, check=True
    )
    assert "matplotlib is not installed, so no plot was written; pip install 'torch-diode-lib[plot]'" in r.stderr
    assert "plot:" not in r.stdout and "autotuning:" in r.stdout
    assert not (tmp_path / "diode-demo").exists()


def test_demo_errors_are_one_line(run_diode, h200_model: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    # No validation data for the model.
    err = _one_line_error(
        run_diode("demo", "--model", str(h200_model), "--data-dir", str(empty), "--cpu-only", env=ENV)
    )
    assert err == (
        f"diode demo: error: no validation data for any model: NVIDIA-H200-tiny: no validation data at "
        f"{empty / 'NVIDIA-H200' / 'val.msgpack'}. Pass --data-dir DIR or --dataset FILE"
    )
    # No such model.
    err = _one_line_error(run_diode("demo", "--model", str(tmp_path / "nope.safetensors"), "--cpu-only", env=ENV))
    assert "nope.safetensors" in err and "does not exist" in err
    # A dataset of another GPU than the model's.
    err = _one_line_error(
        run_diode("demo", "--model", str(h200_model), "--dataset", str(H100_STOCK), "--cpu-only", env=ENV)
    )
    assert "holds NVIDIA-H100 timings but model NVIDIA-H200-tiny is for NVIDIA-H200" in err
    # A dataset without a model, and a data directory that is not one.
    err = _one_line_error(run_diode("demo", "--dataset", str(H200_VAL), env=ENV))
    assert err == "diode demo: error: --dataset needs --model: which model should be evaluated on it?"
    err = _one_line_error(run_diode("demo", "--data-dir", str(tmp_path / "missing"), env=ENV))
    assert err == f"diode demo: error: --data-dir {tmp_path / 'missing'}: not a directory"


def test_demo_without_training_data_to_train_previews_says_so(run_diode, tmp_path: Path) -> None:
    empty = tmp_path / "data"
    (empty / "NVIDIA-H200").mkdir(parents=True)
    shutil.copy(H200_VAL, empty / "NVIDIA-H200" / "val.msgpack")  # validation data, but nothing to train on
    err = _one_line_error(run_diode("demo", "--cpu-only", "--train-previews", "--data-dir", str(empty), env=ENV))
    assert err == (
        f"diode demo: error: --train-previews: no <hardware key>/train.msgpack with a val.msgpack beside it in {empty}"
    )
    err = _one_line_error(run_diode("demo", "--train-previews", "--model", "m.safetensors", env=ENV))
    assert err == "diode demo: error: --train-previews trains its own models: give it no --model or --dataset"
    if not shipped_models():  # a checkout whose models package lists none (or a lib-only install)
        err = _one_line_error(run_diode("demo", "--cpu-only", "--data-dir", str(empty), env=ENV))
        assert err.startswith("diode demo: error: no shipped model found: ")
        assert "no training data" in err and "pass --model FILE --dataset FILE" in err


def test_demo_trains_a_preview_from_the_data(run_diode, tmp_path: Path) -> None:
    """``--train-previews`` (and, from a checkout whose models package lists none, the demo by
    itself) trains a preview from data/<KEY>/train.msgpack (here a 24-problem slice of the real H200
    training set) and shows it on the validation set."""
    data = tmp_path / "data" / "NVIDIA-H200"
    data.mkdir(parents=True)
    train_ds = read_dataset(H200_TRAIN)
    train_ds = train_ds.select_problems(train_ds.problems[:24])
    write_dataset(train_ds, data / "train.msgpack")
    val_ds = read_dataset(H200_VAL)
    write_dataset(val_ds.select_problems(val_ds.problems[:5]), data / "val.msgpack")
    out = tmp_path / "plots"
    r = run_diode("demo", "--cpu-only", "--train-previews", "--data-dir", str(tmp_path / "data"), "--plot-dir",
                  str(out), env=ENV, check=True, timeout=600)  # fmt: skip
    lines = r.stdout.splitlines()
    prefix = "--train-previews: " if shipped_models() else "no shipped model yet: "
    assert re.match(
        re.escape(prefix)
        + rf"trained a preview NVIDIA-H200 model on .*train\.msgpack \(24 problems, {len(train_ds):,} timings\)",
        lines[0],
    ), r.stdout
    assert any(line.startswith("NVIDIA-H200-matmul-preview (NVIDIA-H200): 5 held-out problems") for line in lines)
    assert any(line.startswith("  top-1 pick: ") for line in lines), r.stdout
    assert (out / "NVIDIA-H200-matmul-preview.safetensors").is_file()
    load_model(out / "NVIDIA-H200-matmul-preview.safetensors")  # a valid model file


def test_the_gpu_part_notes_a_ptxas_mismatch() -> None:
    """The GPU part's lines say when stock's compile may include kernels compiled twice."""
    from torch_diode.bench.measure import Measurement
    from torch_diode.demo import GpuDemo

    stock, diode = Measurement(17.0, 62.0, [62.0], 40.0), Measurement(1.6, 63.0, [63.0], 25.0)
    plain = GpuDemo("NVIDIA H200", "NVIDIA-H200", "m", stock, diode).lines()
    noted = GpuDemo("NVIDIA H200", "NVIDIA-H200", "m", stock, diode, ptxas_mismatch=True).lines()
    assert noted[: len(plain)] == plain and not any("ptxas" in line for line in plain)
    assert noted[-1].startswith("  note: on this install Inductor's compile workers and the main process key")
    assert plain[1] == "  cold compile: stock 17.00 s, torch-diode 1.60 s (10.6x faster)"


def test_the_gpu_part_counts_in_words() -> None:
    # Regression: "kept 3 of 1,234 candidate choices over 1 GEMM(s) ... (1 fallback(s))".
    from torch_diode.bench.measure import Measurement
    from torch_diode.demo import GpuDemo

    stock = Measurement(17.0, 62.0, [62.0], 40.0)
    for stats, line in (
        (dict(gemm_calls=1, candidates_kept=3, candidates_seen=1234, fallbacks_total=1),
         "  torch-diode kept 3 of 1,234 candidate choices over 1 GEMM for Inductor to benchmark (1 fallback)"),
        (dict(gemm_calls=2, candidates_kept=1, candidates_seen=1, fallbacks_total=0),
         "  torch-diode kept 1 of 1 candidate choice over 2 GEMMs for Inductor to benchmark (0 fallbacks)"),
    ):  # fmt: skip
        diode = Measurement(1.6, 63.0, [63.0], 25.0, diode=stats)
        assert GpuDemo("NVIDIA H200", "NVIDIA-H200", "m", stock, diode).lines()[3] == line


def test_the_demo_lines_count_in_words(h200_model: Path, tmp_path: Path) -> None:
    # Regression: one problem was "1 held-out problems", "on 1/1 problems", "geomean over 1 problems".
    val = read_dataset(H200_VAL)
    picks = read_max_autotune_solution(H200_VAL.with_name("val-stock-picks.json"))
    first = next(t.problem for t in val.by_problem() if t.problem in picks and len(t.time_us) >= 1000)
    one = val.select_problems([first])
    path = write_dataset(one, tmp_path / "val.msgpack")
    demo = evaluate_for_demo(load_model(h200_model), one, name="m", dataset_path=path, stock=picks)
    lines = demo.lines()
    assert lines[0] == f"m (NVIDIA-H200): 1 held-out problem, {len(one):,} timings ({path})"
    assert all(re.search(r"within 2% of it on [01]/1 problem \((0|100)%\)$", line) for line in lines[1:3]), lines
    stock = [line for line in lines if "geomean over" in line]
    assert len(stock) == 2 and all("geomean over 1 problem)" in line for line in stock), lines


@pytest.mark.gpu
def test_demo_compiles_a_real_module_on_the_gpu(run_diode, tmp_path: Path) -> None:
    from torch_diode.hardware import detect

    key = detect().key
    data = {"NVIDIA-H200": H200_TRAIN, "NVIDIA-H100": H100_STOCK}.get(key or "")
    if data is None:
        pytest.skip(f"no committed timings to train a model for {key}")
    model, _ = train(read_dataset(data), TrainOptions(seed=0, **FAST))
    path = save_model(model, tmp_path / f"{key}-tiny.safetensors")
    r = run_diode("demo", "--model", str(path), "--dataset", str(data), env=ENV, check=True, timeout=600)
    out = r.stdout
    assert re.search(r"^  cold compile: stock \d+\.\d\d s, torch-diode \d+\.\d\d s \(\d+\.\dx faster\)$", out, re.M), (
        out
    )
    assert re.search(
        r"^  step time \(median over CUDA-graph replays\): stock [\d.]+ us, torch-diode [\d.]+ us", out, re.M
    )
    assert re.search(r"^  torch-diode kept [\d,]+ of [\d,]+ candidate choices? over \d+ GEMMs? ", out, re.M), out
