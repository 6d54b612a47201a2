"""The trainer and the train/validate CLI, end to end on the committed synthetic slice.

tests/data/small_synthetic.msgpack holds real Inductor EXHAUSTIVE config lists with synthetic
(analytic roofline + noise) H100 times; tests/data/make_small_synthetic.py regenerates it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import torch_diode
from torch_diode.dataset import Dataset, merge_datasets, read_dataset, write_dataset
from torch_diode.evaluate import (
    StockPick,
    max_autotune_solution_from_dataset,
    problem_evals,
    write_max_autotune_solution,
)
from torch_diode.features import gpu_constants
from torch_diode.model import load_model, save_model
from torch_diode.train import TrainOptions, _sample_choices, _validate, dataset_hash, split_problems, train

DATA = Path(__file__).parent / "data" / "small_synthetic.msgpack"
# The CLI runs in a temp directory: make sure it imports this checkout even with a relative PYTHONPATH.
ENV = {"PYTHONPATH": os.pathsep.join([str(Path(torch_diode.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
# Small and single-threaded: on a busy 2-core machine one thread is ~10x faster for these batches.
FAST = dict(
    ensemble_size=2,
    batch_size=4,
    max_choices_per_problem=64,
    num_epochs=6,
    progress=False,
    num_threads=1,
    forest_trees=8,
)


@pytest.fixture(scope="module")
def ds():
    return read_dataset(DATA)


@pytest.fixture(scope="module")
def trained(ds):
    history: list[dict[str, float]] = []
    opts = TrainOptions(seed=7, patience=2, early_stopping=True, **FAST | {"num_epochs": 12})
    model, report = train(ds, opts, on_epoch=history.append)
    return model, report, history


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"model_type": "huge"}, "model_type"),
        ({"batch_size": 0}, "batch_size"),
        ({"val_fraction": 1.0}, "val_fraction"),
        ({"learning_rate": -1.0}, "learning_rate"),
        ({"device": "tpu"}, "device"),
        ({"hidden": 0}, "hidden"),
        ({"pairwise_weight": -1.0}, "pairwise_weight"),
        ({"pairwise_top": 0}, "pairwise_top"),
        ({"regression_expectile": 1.0}, "regression_expectile"),
        ({"regression_expectile": 0}, "regression_expectile"),
        ({"network_shortlist": -1}, "network_shortlist"),
        ({"screen_hidden": -1}, "screen_hidden"),
        ({"init_from": ""}, "init_from"),
        ({"init_forest": True}, "give init_from too"),
        ({"init_from": "m.safetensors", "init_forest": True, "forest_trees": 0}, "forest_trees >= 1"),
        ({"init_forest_from": ""}, "init_forest_from: must be"),
        ({"init_forest_from": "m.safetensors", "init_from": "m.safetensors", "init_forest": True}, "give one"),
        ({"init_forest_from": "m.safetensors", "forest_trees": 0}, "init_forest_from: needs forest_trees >= 1"),
    ],
    ids=lambda v: str(v) if isinstance(v, str) else next(iter(v)),
)
def test_options_are_validated(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        TrainOptions(**kwargs)


def test_cli_train_defaults_are_the_train_options_defaults() -> None:
    # `diode train` spells its defaults out (its --help prints them); they must stay TrainOptions'
    from torch_diode.cli import build_parser

    args = vars(build_parser().parse_args(["train", "--dataset", "d.msgpack", "--model", "m.safetensors"]))
    args["num_threads"] = args.pop("threads")
    compared = [f for f in dataclasses.fields(TrainOptions) if f.name in args]
    assert len(compared) >= 25  # all but the options the CLI does not expose
    assert {f.name: args[f.name] for f in compared} == {f.name: f.default for f in compared}


def test_split_is_by_problem_seeded_and_order_independent(ds) -> None:
    probs = ds.problems
    tr, va = split_problems(probs, 0.2, seed=3)
    assert set(tr).isdisjoint(va) and sorted(tr + va) == list(range(len(probs)))
    assert len(va) == round(0.2 * len(probs))
    _, va2 = split_problems(list(reversed(probs)), 0.2, seed=3)
    assert {probs[i] for i in va} == {list(reversed(probs))[i] for i in va2}
    assert split_problems(probs, 0.2, seed=4)[1] != va


def test_train_report_model_and_metadata(ds, trained) -> None:
    model, report, history = trained
    assert report.train_problems + report.val_problems == len(ds.problems) and report.val_problems >= 1
    assert report.train_rows + report.val_rows == sum(len(p.median_by_choice()) for p in ds.by_problem())
    assert 1 <= report.best_epoch <= report.epochs_run == len(history)
    o = report.held_out["overall"]
    assert {"regret@1", "regret@3", "regret@5", "regret@10", "recall@5", "kendall_tau"} <= set(o)
    assert 1.0 <= o["regret@1"]["geomean"] <= o["regret@1"]["max"]
    md = model.metadata
    assert md["held_out_metrics"] == report.held_out
    assert md["training_data_hash"] == dataset_hash(ds)
    assert md["training"]["val_problems"] == report.val_problems
    assert model.hardware == "NVIDIA-H100" and model.arch.members == 2


def test_early_stopping_restores_the_best_epoch(ds, trained) -> None:
    model, report, history = trained
    from torch_diode.train import _featurize_problems

    groups = ds.by_problem()
    _, va = split_problems([g.problem for g in groups], 0.1, 7)
    rows = _featurize_problems(ds, [groups[i] for i in va], ds.hardware)
    import torch

    x = torch.from_numpy((rows.x - model.normalization.x_mean) / model.normalization.x_std)
    got = _validate(model.net, x, rows, model.normalization)
    best = history[report.best_epoch - 1]
    assert best["score"] == min(h["score"] for h in history)
    for key in ("val_mse", "val_log_regret1", "val_log_regret5"):
        assert got[key] == pytest.approx(best[key], rel=1e-6, abs=1e-9)


def test_without_early_stopping_the_last_epoch_ships(ds) -> None:
    history: list[dict[str, float]] = []
    model, report = train(ds, TrainOptions(seed=7, patience=1, **FAST | {"num_epochs": 4}), on_epoch=history.append)
    assert report.epochs_run == report.best_epoch == 4 and not report.stopped_early  # patience 1 does not stop it
    assert len(history) == 4 and model.metadata["held_out_metrics"]  # the validation problems still measure


def test_val_fraction_zero_learns_from_every_problem(ds) -> None:
    """With no split every problem is trained on (the neighbour memory holds them all) and no
    held-out metrics are claimed; the model still ranks."""
    model, report = train(ds, TrainOptions(seed=7, val_fraction=0.0, **FAST | {"num_epochs": 3}))
    n = len(ds.measured_problems())
    assert (report.train_problems, report.val_problems, report.val_rows) == (n, 0, 0)
    assert report.held_out == {} and model.metadata["held_out_metrics"] == {}
    assert model.metadata["training"]["val_problems"] == 0 and model.memory.problems.shape[0] == n
    evals = problem_evals(model, ds)
    assert len(evals) == n and all(np.isfinite(e.predicted_log_us).all() for e in evals)


def test_same_seed_gives_the_same_model_bit_for_bit(ds, trained, tmp_path: Path) -> None:
    model, _, _ = trained
    again, _ = train(ds, TrainOptions(seed=7, patience=2, early_stopping=True, **FAST | {"num_epochs": 12}))
    assert again.model_hash == model.model_hash
    a = save_model(model, tmp_path / "a.safetensors").read_bytes()
    b = save_model(again, tmp_path / "b.safetensors").read_bytes()
    assert a == b
    other, _ = train(ds, TrainOptions(seed=8, **FAST | {"num_epochs": 2}))
    assert other.model_hash != model.model_hash


def test_screen_hidden_trains_the_one_member_network_of_that_width(ds, tmp_path: Path) -> None:
    """``screen_hidden`` adds the network ``ensemble_size=1, hidden=screen_hidden`` trains (same
    split, rows, normalisation and seed) as the model's screen; the ensemble is the one trained
    without it, bit for bit; the file keeps both, and the cascade scores with the screen."""
    import torch

    opts = TrainOptions(
        seed=7, hidden=16, network_shortlist=16, **FAST | {"num_epochs": 3, "ensemble_size": 3, "forest_trees": 0}
    )
    model, report = train(ds, dataclasses.replace(opts, screen_hidden=8))
    plain, _ = train(ds, opts)
    alone, _ = train(ds, dataclasses.replace(opts, hidden=8, ensemble_size=1))
    assert model.screen is not None and plain.screen is None and model.screen.arch.hidden == 8
    for got, want in ((model.net, plain.net), (model.screen, alone.net)):
        a, b = got.state_dict(), want.state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert len(report.screen_history) == 3 and model.metadata["training"]["screen"]["epochs_run"] == 3
    assert model.metadata["training"]["options"]["screen_hidden"] == 8
    loaded = load_model(save_model(model, tmp_path / "screen.safetensors"))
    assert loaded.screen is not None and loaded.screen.arch == model.screen.arch
    assert loaded.metadata["screen"] == {"architecture": model.screen.arch.to_dict()}
    assert "hidden=8" in repr(loaded)
    p = max(ds.by_problem(), key=lambda t: len(t.median_by_choice()))
    choices = [ds.choices[i] for i in p.median_by_choice()]
    assert len(choices) > model.scoring.network_shortlist  # the cascade runs
    got = loaded.predict(p.problem, choices)
    assert np.array_equal(got.log_time_us, model.predict(p.problem, choices).log_time_us)
    assert not np.array_equal(got.log_time_us, plain.predict(p.problem, choices).log_time_us)


def test_init_from_starts_from_the_files_networks_and_normalisation(ds, tmp_path: Path) -> None:
    """``init_from`` (fine-tuning) starts both networks from a model file's weights, with its
    normalisation, and records the file: with a learning rate too small to move them far, the
    trained networks are the file's but for a little training; a model of another GPU may be the start."""
    import torch

    opts = TrainOptions(seed=3, hidden=16, screen_hidden=8, **FAST | {"num_epochs": 2, "forest_trees": 0})
    src, _ = train(ds, opts)
    src.hardware, src.gpu = "NVIDIA-H200", gpu_constants("NVIDIA-H200")  # a start trained on another GPU's timings
    path = save_model(src, tmp_path / "src.safetensors")
    tuned, _ = train(ds, dataclasses.replace(opts, seed=4, init_from=str(path), learning_rate=1e-6))
    for got, want in ((tuned.net, src.net), (tuned.screen, src.screen)):
        a, b = got.state_dict(), want.state_dict()
        assert all(torch.allclose(a[k], b[k], rtol=0, atol=1e-3) for k in a)
        assert not all(torch.equal(a[k], b[k]) for k in a)  # trained, if only a little
    assert np.array_equal(tuned.normalization.x_mean, src.normalization.x_mean)
    assert np.array_equal(tuned.normalization.y_std, src.normalization.y_std)
    assert tuned.hardware == "NVIDIA-H100"
    rec = load_model(save_model(tuned, tmp_path / "tuned.safetensors")).metadata["training"]["init_from"]
    assert rec == {
        "file": str(path),
        "sha256": load_model(path).model_hash,
        "hardware": "NVIDIA-H200",
        "training_data_hash": dataset_hash(ds),
        "networks": ["ensemble", "screen"],
    }
    # a fresh start of the same seed is another model; a file without a screen starts only the ensemble
    fresh, _ = train(ds, dataclasses.replace(opts, seed=4, learning_rate=1e-6))
    assert not torch.allclose(fresh.net.w_in, src.net.w_in, rtol=0, atol=1e-1)
    bare = save_model(train(ds, dataclasses.replace(opts, screen_hidden=None))[0], tmp_path / "bare.safetensors")
    again, _ = train(ds, dataclasses.replace(opts, init_from=str(bare), learning_rate=1e-6))
    assert again.metadata["training"]["init_from"]["networks"] == ["ensemble"]
    assert torch.allclose(again.net.w_in, load_model(bare).net.w_in, rtol=0, atol=1e-3)


def test_init_forest_continues_the_files_forest(ds, tmp_path: Path) -> None:
    """``init_forest``: the new file's ranking forest is the start file's trees, unchanged, then
    ``forest_trees`` more boosted on this data (seeded: the same forest bit for bit again); the
    record counts the inherited trees. Without it the forest is the data's alone. Refused: a
    start file without a forest, or with trees of another depth (the message names the flag)."""
    opts = TrainOptions(seed=3, hidden=16, **FAST | {"num_epochs": 1, "forest_trees": 6, "forest_depth": 4})
    src, _ = train(ds, opts)
    path = save_model(src, tmp_path / "src.safetensors")
    tune = dataclasses.replace(opts, seed=4, init_from=str(path), learning_rate=1e-6, forest_trees=4)
    tuned, _ = train(ds, dataclasses.replace(tune, init_forest=True))
    f = load_model(save_model(tuned, tmp_path / "tuned.safetensors")).forest
    assert f.options.trees == 10 and f.options.depth == 4
    for name in ("features", "thresholds", "leaves"):
        assert np.array_equal(getattr(f, name)[:6], getattr(src.forest, name))
    assert np.abs(f.leaves[6:]).max() > 0
    again, _ = train(ds, dataclasses.replace(tune, init_forest=True))
    assert np.array_equal(again.forest.leaves, f.leaves) and np.array_equal(again.forest.thresholds, f.thresholds)
    rec = tuned.metadata["training"]["init_from"]
    assert rec["forest_trees"] == 6 and rec["networks"] == ["ensemble"]
    assert tuned.metadata["training"]["options"]["init_forest"] is True
    own, _ = train(ds, tune)  # init_from alone: the forest is the data's
    assert own.forest.options.trees == 4 and "forest_trees" not in own.metadata["training"]["init_from"]
    bare = save_model(train(ds, dataclasses.replace(opts, forest_trees=0))[0], tmp_path / "bare.safetensors")
    with pytest.raises(ValueError, match="has no ranking forest to start from; train without --init-forest"):
        train(ds, dataclasses.replace(tune, init_from=str(bare), init_forest=True))
    with pytest.raises(ValueError, match="forest trees are 4 deep, this training's 6: train with --forest-depth 4"):
        train(ds, dataclasses.replace(tune, init_forest=True, forest_depth=6))


def test_init_forest_from_continues_a_files_forest_whatever_the_networks_start_from(ds, tmp_path: Path) -> None:
    """``init_forest_from``: the forest continues the file's as ``init_forest`` does (the same rows,
    seed and start: the same forest bit for bit), while the networks train from a fresh start (as
    without it, bit for bit); the file is recorded. Refused as ``init_forest`` is, naming its flag."""
    import torch

    opts = TrainOptions(seed=3, hidden=16, **FAST | {"num_epochs": 1, "forest_trees": 6, "forest_depth": 4})
    src, _ = train(ds, opts)
    src.hardware, src.gpu = "NVIDIA-H200", gpu_constants("NVIDIA-H200")  # a forest of another GPU's timings may start
    path = save_model(src, tmp_path / "src.safetensors")
    tune = dataclasses.replace(opts, seed=4, init_from=str(path), learning_rate=1e-6, forest_trees=4)
    tuned, _ = train(ds, dataclasses.replace(tune, init_forest=True))
    plain = dataclasses.replace(tune, init_from=None)
    via, _ = train(ds, dataclasses.replace(plain, init_forest_from=str(path)))
    fresh, _ = train(ds, plain)
    for name in ("features", "thresholds", "leaves"):
        assert np.array_equal(getattr(via.forest, name), getattr(tuned.forest, name))
    assert via.forest.options.trees == 10 and fresh.forest.options.trees == 4
    a, b = via.net.state_dict(), fresh.net.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    training = load_model(save_model(via, tmp_path / "via.safetensors")).metadata["training"]
    assert "init_from" not in training and training["options"]["init_forest_from"] == str(path)
    assert training["init_forest_from"] == {
        "file": str(path),
        "sha256": load_model(path).model_hash,
        "hardware": "NVIDIA-H200",
        "training_data_hash": dataset_hash(ds),
        "trees": 6,
    }
    bare = save_model(train(ds, dataclasses.replace(opts, forest_trees=0))[0], tmp_path / "bare.safetensors")
    with pytest.raises(ValueError, match="has no ranking forest to start from; train without --init-forest-from"):
        train(ds, dataclasses.replace(plain, init_forest_from=str(bare)))
    with pytest.raises(ValueError, match="forest trees are 4 deep, this training's 6: train with --forest-depth 4"):
        train(ds, dataclasses.replace(plain, init_forest_from=str(path), forest_depth=6))


def test_init_from_takes_a_registered_models_name(ds) -> None:
    """A shipped model's name resolves to its verified file (the registry's ``resolve``): the
    H200 file, on this H100 slice, in the file's own architecture."""
    from torch_diode.registry import get_model_entry, resolve

    m = load_model(resolve("NVIDIA-H200-matmul"))  # its architecture, whatever the shipped file's is
    shipped = {"model_type": m.arch.model_type, "hidden": m.arch.hidden, "depth": m.arch.depth}
    shipped |= {"ensemble_size": m.arch.members, "screen_hidden": m.screen.arch.hidden if m.screen else None}
    opts = TrainOptions(seed=3, **FAST | shipped | {"num_epochs": 1, "forest_trees": 0})
    model, _ = train(ds, dataclasses.replace(opts, init_from="NVIDIA-H200-matmul", learning_rate=1e-6))
    rec = model.metadata["training"]["init_from"]
    entry = get_model_entry("NVIDIA-H200-matmul")
    assert rec["file"] == "NVIDIA-H200-matmul" and rec["sha256"] == entry.sha256
    assert rec["hardware"] == "NVIDIA-H200" and rec["networks"] == ["ensemble", *(["screen"] if m.screen else [])]
    assert model.hardware == "NVIDIA-H100"


def test_init_from_refuses_other_architectures_and_bad_files(ds, tmp_path: Path) -> None:
    from torch_diode.errors import ModelFormatError, ModelNotFoundError

    opts = TrainOptions(seed=3, hidden=16, screen_hidden=8, **FAST | {"num_epochs": 1, "forest_trees": 0})
    path = save_model(train(ds, opts)[0], tmp_path / "src.safetensors")
    # the advice names every architecture flag the file needs, its screen's included
    flags = "--model-type deep --hidden 16 --depth 2 --ensemble-size 2 --screen-hidden 8"
    with pytest.raises(ValueError, match=re.escape(f"with a screening network 8 wide; this training's a deep MLP of 2 members, width 32, depth 2: train with {flags} to start from it (or with --screen-hidden 0, without a screen)")):  # fmt: skip
        train(ds, dataclasses.replace(opts, hidden=32, init_from=str(path)))
    with pytest.raises(ValueError, match="--ensemble-size 2"):
        train(ds, dataclasses.replace(opts, ensemble_size=3, init_from=str(path)))
    with pytest.raises(
        ValueError, match=re.escape(f"screening network is 8 wide, this training's 4: train with {flags}")
    ):
        train(ds, dataclasses.replace(opts, screen_hidden=4, init_from=str(path)))
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        train(ds, dataclasses.replace(opts, init_from=str(tmp_path / "missing.safetensors")))
    with pytest.raises(ModelNotFoundError, match="NVIDIA-H200-matmul"):  # the message lists the available ones
        train(ds, dataclasses.replace(opts, init_from="NVIDIA-X999-matmul"))
    bad = tmp_path / "bad.safetensors"
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(ModelFormatError, match="corrupt"):
        train(ds, dataclasses.replace(opts, init_from=str(bad)))


def test_init_from_never_drops_the_files_screen_unasked(ds, tmp_path: Path, caplog) -> None:
    """A file with a screening network, started from without ``screen_hidden`` (no --screen-hidden,
    as the old advice said), was trained into a model without a screen, silently. It is refused,
    naming every flag the file needs; ``screen_hidden=0`` (--screen-hidden 0) drops the screen on
    purpose, which is logged and recorded. A screen of another depth than the ensemble's (no
    training makes one) cannot be continued: only 0 is offered."""
    import logging

    import torch

    from torch_diode.model import init_network

    opts = TrainOptions(seed=3, hidden=16, screen_hidden=8, **FAST | {"num_epochs": 1, "forest_trees": 0})
    src, _ = train(ds, opts)
    path = save_model(src, tmp_path / "src.safetensors")
    no_screen = dataclasses.replace(opts, screen_hidden=None, init_from=str(path), learning_rate=1e-6)
    flags = "--model-type deep --hidden 16 --depth 2 --ensemble-size 2 --screen-hidden 8"
    with pytest.raises(ValueError, match=re.escape(f"has a screening network 8 wide, which this training (no --screen-hidden) would drop: train with {flags} to start from it (or with --screen-hidden 0, without a screen)")):  # fmt: skip
        train(ds, no_screen)
    with caplog.at_level(logging.INFO, logger="torch_diode"):
        dropped, _ = train(ds, dataclasses.replace(no_screen, screen_hidden=0))
    assert dropped.screen is None and dropped.metadata["training"]["init_from"]["networks"] == ["ensemble"]
    assert dropped.metadata["training"]["options"]["screen_hidden"] == 0
    assert "not starting from" in caplog.text and "screening network (--screen-hidden 0)" in caplog.text
    assert torch.allclose(dropped.net.w_in, src.net.w_in, rtol=0, atol=1e-3)
    odd = load_model(path)
    odd.screen = init_network(dataclasses.replace(odd.arch, hidden=8, depth=1, members=1), seed=1)
    odd_path = save_model(odd, tmp_path / "odd.safetensors")
    with pytest.raises(ValueError, match=re.escape("screening network is a deep MLP of depth 1, not of its ensemble's type and depth") + ".*--screen-hidden 0 to start from the ensemble alone"):  # fmt: skip
        train(ds, dataclasses.replace(opts, init_from=str(odd_path)))
    assert train(ds, dataclasses.replace(opts, screen_hidden=0, init_from=str(odd_path)))[0].screen is None
    # Another architecture too: the advice is one step, with the screen left out on purpose.
    with pytest.raises(ValueError, match=r"--ensemble-size \d+ --screen-hidden 0 to start from it$"):
        train(ds, dataclasses.replace(opts, hidden=odd.arch.hidden + 8, init_from=str(odd_path)))


def test_trained_model_ranks_better_than_chance(ds, trained) -> None:
    model, _, _ = trained
    p = ds.by_problem()[0]
    med = p.median_by_choice()
    choices = [ds.choices[i] for i in med]
    pred = model.predict(p.problem, choices)
    measured = np.log(np.array(list(med.values())))
    assert np.corrcoef(pred.log_time_us, measured)[0, 1] > 0.3


def test_cli_train_validate_and_compare_with_max_autotune(ds, run_diode, tmp_path: Path) -> None:
    model = tmp_path / "m.safetensors"
    r = run_diode(
        "train", "--dataset", str(DATA), "--model", str(model), "--model-type", "base", "--batch-size", "4",
        "--num-epochs", "3", "--learning-rate", "1e-3", "--seed", "1", "--ensemble-size", "2", "--threads", "1",
        "--screen-hidden", "8", "--report", str(tmp_path / "train.json"), check=True, env=ENV,
    )  # fmt: skip
    assert "wrote" in r.stdout and "held out (the finished model): regret@1" in r.stdout
    assert load_model(model).arch.model_type == "base" and load_model(model).memory is not None
    assert load_model(model).screen.arch.hidden == 8 and load_model(model).screen.arch.model_type == "base"
    assert json.loads((tmp_path / "train.json").read_text())["epochs_run"] == 3
    plain = tmp_path / "plain.safetensors"
    run_diode(
        "train", "--dataset", str(DATA), "--model", str(plain), "--num-epochs", "1", "--ensemble-size", "1",
        "--threads", "1", "--neighbours", "0", "--network-shortlist", "0", check=True, env=ENV,
    )  # fmt: skip
    assert load_model(plain).memory is None
    assert load_model(plain).scoring.network_shortlist == 0 and load_model(model).scoring.network_shortlist == 128
    tuned = tmp_path / "tuned.safetensors"
    base_args = ("--dataset", str(DATA), "--num-epochs", "1", "--threads", "1", "--model-type", "base")
    run_diode(
        "train", *base_args, "--model", str(tuned), "--ensemble-size", "2", "--screen-hidden", "8",
        "--init-from", str(model), "--learning-rate", "1e-4", check=True, env=ENV,
    )  # fmt: skip
    rec = load_model(tuned).metadata["training"]["init_from"]
    assert rec["sha256"] == load_model(model).model_hash and rec["networks"] == ["ensemble", "screen"]
    grown = tmp_path / "grown.safetensors"
    run_diode(
        "train", *base_args, "--model", str(grown), "--ensemble-size", "2", "--screen-hidden", "8",
        "--init-from", str(model), "--init-forest", "--forest-trees", "3", check=True, env=ENV,
    )  # fmt: skip
    assert load_model(grown).forest.options.trees == load_model(model).forest.options.trees + 3
    r = run_diode("train", *base_args, "--model", str(tmp_path / "nf.safetensors"), "--init-forest", env=ENV)
    assert r.returncode != 0 and "give init_from too" in r.stderr
    regrown = tmp_path / "regrown.safetensors"
    run_diode(
        "train", *base_args, "--model", str(regrown), "--ensemble-size", "2", "--screen-hidden", "8",
        "--init-forest-from", str(model), "--forest-trees", "3", check=True, env=ENV,
    )  # fmt: skip
    assert load_model(regrown).forest.options.trees == load_model(model).forest.options.trees + 3
    assert load_model(regrown).metadata["training"]["init_forest_from"]["sha256"] == load_model(model).model_hash
    r = run_diode(
        "train", *base_args, "--model", str(tmp_path / "nf2.safetensors"), "--init-from", str(model),
        "--init-forest", "--init-forest-from", str(model), env=ENV,
    )  # fmt: skip
    assert r.returncode != 0 and "give one" in r.stderr
    r = run_diode("train", *base_args, "--model", str(tmp_path / "no.safetensors"), "--init-from", str(model), env=ENV)
    assert r.returncode != 0 and "--ensemble-size 2 --screen-hidden 8 to start from it" in r.stderr
    assert not (tmp_path / "no.safetensors").exists()

    r = run_diode(
        "validate-model", "--model", str(model), "--dataset", str(DATA), "--top-n-worst", "3", check=True, env=ENV
    )
    assert "RMSE(exp)" in r.stdout and r.stdout.count(" measured ") == 3
    worst = [line for line in r.stdout.splitlines() if " measured " in line]
    assert all(re.search(r"\(\d[\d,]*\.\d\dx too (high|low)\)$", line) for line in worst), worst

    # stock max-autotune's pick: here the fastest ATen-or-first-Triton choice per problem
    picks = {
        prob: StockPick(sp.choice, sp.time_us)
        for prob, sp in max_autotune_solution_from_dataset(ds.select_problems(ds.problems[:5])).items()
    }
    sol = write_max_autotune_solution(picks, tmp_path / "stock.json", hardware="NVIDIA-H100")
    out = tmp_path / "rep" / "report.json"
    r = run_diode(
        "validate-max-autotune", "--model", str(model), "--data-dir", str(DATA.parent), "--file-extensions", "msgpack",
        "--max-autotune-solution", str(sol), "--output", str(out), check=True, env=ENV,
    )  # fmt: skip
    rep = json.loads(out.read_text())
    assert rep["overall"]["vs_max_autotune"]["problems"] == 5
    r1 = rep["overall"]["regret@1"]
    assert set(r1) == {"geomean", "geomean_ci95", "p95", "max"}
    assert r1["geomean_ci95"][0] <= r1["geomean"] <= r1["geomean_ci95"][1]
    assert "95% bootstrap intervals of the overall geomeans" in out.with_suffix(".md").read_text()
    assert "recall@5" in rep["overall"] and set(rep["per_op"]) == {p.op for p in ds.problems}
    assert out.with_suffix(".md").read_text().startswith("Model vs measured")
    assert math.isfinite(rep["overall"]["kendall_tau"]["mean"])
    # the model's order: the handler's defaults, or --diversity and --cliff-guard
    assert rep["order"] == {"diversity": 0.2, "cliff_guard": 0.2}
    plain = tmp_path / "rep" / "plain.json"
    run_diode(
        "validate-max-autotune", "--model", str(model), "--dataset", str(DATA), "--diversity", "0",
        "--cliff-guard", "0", "--output", str(plain), check=True, env=ENV,
    )  # fmt: skip
    rep0 = json.loads(plain.read_text())
    assert rep0["order"] == {"diversity": 0.0, "cliff_guard": 0.0}
    for flag in ("--diversity", "--cliff-guard"):
        r = run_diode("validate-max-autotune", "--model", str(model), "--dataset", str(DATA), flag, "-1", env=ENV)
        assert r.returncode == 2 and flag in r.stderr and "expected a number >= 0" in r.stderr
    # --min-num-warps: the handler's option of that name, recorded and said in the table
    warps = tmp_path / "rep" / "warps.json"
    run_diode(
        "validate-max-autotune", "--model", str(model), "--dataset", str(DATA), "--min-num-warps", "4",
        "--output", str(warps), check=True, env=ENV,
    )  # fmt: skip
    rep4 = json.loads(warps.read_text())
    assert rep4["candidates"]["min_num_warps"] == 4 and rep0["candidates"]["min_num_warps"] is None
    assert (
        "min_num_warps=4: Triton configs of fewer than 4 warps were not ranked" in warps.with_suffix(".md").read_text()
    )
    assert "min_num_warps" not in plain.with_suffix(".md").read_text()
    # on this slice the fastest config has one or two warps somewhere, so leaving them out costs
    assert rep4["overall"]["regret@10"]["geomean"] > rep0["overall"]["regret@10"]["geomean"]
    for bad in ("0", "two"):
        r = run_diode(
            "validate-max-autotune", "--model", str(model), "--dataset", str(DATA), "--min-num-warps", bad, env=ENV
        )
        assert r.returncode == 2 and "--min-num-warps" in r.stderr and "expected an integer >= 1" in r.stderr


def test_cli_errors_are_one_line(run_diode, tmp_path: Path) -> None:
    r = run_diode("validate-model", "--model", str(tmp_path / "nope.safetensors"), "--dataset", str(DATA), env=ENV)
    assert (
        r.returncode == 2 and "nope.safetensors' does not exist" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    )
    r = run_diode("train", "--data-dir", str(tmp_path), "--model", str(tmp_path / "m.safetensors"), env=ENV)
    assert r.returncode == 2 and "no files with extension" in r.stderr
    # a JSON file below --data-dir that is no dataset (a plan, a solution): named, with what to do
    (tmp_path / "d" / "logs").mkdir(parents=True)
    shutil.copy(DATA, tmp_path / "d" / "train.msgpack")
    plan = tmp_path / "d" / "logs" / "plan.json"
    plan.write_text(json.dumps({"problems": [1, 2]}, indent=2))
    r = run_diode("train", "--data-dir", str(tmp_path / "d"), "--model", str(tmp_path / "m.safetensors"), env=ENV)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"{plan}: not a torch-diode dataset (a JSON document over several lines" in r.stderr
    assert "narrow --file-extensions" in r.stderr and not (tmp_path / "m.safetensors").exists()
    r = run_diode(
        "train", "--dataset", str(DATA), "--model", str(tmp_path / "m.safetensors"), "--neighbours", "-1", env=ENV
    )
    assert r.returncode == 2 and "neighbours" in r.stderr and len(r.stderr.strip().splitlines()) == 1


# -- real GPU data ---------------------------------------------------------------------------------
# data/NVIDIA-H200/train.msgpack and val.msgpack: real H200 timings (torch 2.11, triton 3.6; sweep
# collector): ATen + 330 sampled EXHAUSTIVE Triton configs per training problem, ATen + the full
# EXHAUSTIVE space per validation problem (the campaign's first slices, data/README.md).
REAL = Path(__file__).resolve().parents[1] / "data" / "NVIDIA-H200" / "train.msgpack"
REAL_VAL = REAL.with_name("val.msgpack")


def test_train_and_validate_end_to_end_on_real_h200_timings(tmp_path: Path) -> None:
    from torch_diode.evaluate import evaluate_model

    real = read_dataset(REAL)
    assert real.hardware == "NVIDIA-H200" and len(real.by_problem()) >= 70
    probs = [t.problem for t in real.by_problem()]
    tr, va = split_problems(probs, 0.25, seed=5)
    train_probs, val_probs = [probs[i] for i in tr], [probs[i] for i in va]
    assert not set(train_probs) & set(val_probs)  # by problem, never by row
    model, report = train(real.select_problems(train_probs), TrainOptions(seed=5, **FAST | {"num_epochs": 10}))
    assert report.hardware == "NVIDIA-H200" and report.train_problems + report.val_problems == len(train_probs)
    path = save_model(model, tmp_path / "h200.safetensors")
    again = load_model(path)
    held_out = read_dataset(REAL_VAL)  # the campaign's validation problems: never seen in training
    assert not {t.problem for t in held_out.by_problem()} & set(probs)
    rep, evals = evaluate_model(again, held_out)
    assert rep["overall"]["problems"] == len(held_out.by_problem()) == len(evals)
    # regret is a ratio to the measured best: >= 1, finite, and top-10 is never worse than top-1
    r1, r10 = rep["overall"]["regret@1"], rep["overall"]["regret@10"]
    assert 1.0 <= r10["geomean"] <= r1["geomean"] < 100 and math.isfinite(r1["max"])


# -- the loss terms ---------------------------------------------------------------------------------


def _loss_inputs():
    import torch

    y = torch.tensor([[0.0, 0.5, 1.0, 2.0], [1.0, 0.0, 3.0, 0.0]])  # [B=2, C=4]; problem 2 has 3 rows
    mask = torch.tensor([[True, True, True, True], [True, True, True, False]])
    w = torch.ones(1, 2)  # [K=1, B]
    return y, mask, w


def test_pairwise_term_rewards_the_measured_order_at_the_top() -> None:
    import torch

    from torch_diode.train import _pairwise

    y, mask, w = _loss_inputs()
    right = _pairwise(y.unsqueeze(0), y, mask, w, scale=5.0, top=2)
    wrong = _pairwise(-y.unsqueeze(0), y, mask, w, scale=5.0, top=2)
    assert 0 <= right < wrong
    # swapping the two slowest choices of problem 1 costs less than swapping its two fastest
    slow_swap = y.clone()
    slow_swap[0, 2], slow_swap[0, 3] = y[0, 3], y[0, 2]
    fast_swap = y.clone()
    fast_swap[0, 0], fast_swap[0, 1] = y[0, 1], y[0, 0]
    assert _pairwise(slow_swap.unsqueeze(0), y, mask, w, 5.0, 2) < _pairwise(fast_swap.unsqueeze(0), y, mask, w, 5.0, 2)
    # the padded row of problem 2 never counts
    padded = y.clone()
    padded[1, 3] = -100.0
    assert torch.equal(_pairwise(padded.unsqueeze(0), y, mask, w, 5.0, 2), right)


def test_aten_weight_scales_the_aten_rows_and_pairs() -> None:
    """``aten_weight`` w: an ATen row counts w times in the MSE mean, and a pair with an ATen
    choice w times in the pairwise mean; 1 is the unweighted loss, bit for bit."""
    import torch

    from torch_diode.train import TrainOptions, _loss, _pairwise

    y, mask, w = _loss_inputs()
    pred = torch.tensor([[[0.3, 0.1, 1.5, 1.0], [0.2, 0.4, 2.0, 9.0]]])  # [K=1, B, C]
    aten = torch.tensor([[False, True, False, False], [False, False, False, False]])  # problem 1, row 1
    one = TrainOptions(pairwise_weight=0.0, aten_weight=1.0)
    plain = _loss(pred, y, mask, w, 1.0, one)
    assert all(torch.equal(a, b) for a, b in zip(plain, _loss(pred, y, mask, w, 1.0, one, aten)))
    _, mse, _ = _loss(pred, y, mask, w, 1.0, TrainOptions(pairwise_weight=0.0, aten_weight=4.0), aten)
    sq = (pred[0] - y) ** 2
    rw = torch.tensor([[1.0, 4.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0]])  # masked row: 0
    assert torch.allclose(mse, (sq * rw).sum() / rw.sum())

    # pairwise, by hand for problem 1 alone (top 2: rows 0 and 1; row 1 is ATen)
    scale = 5.0
    y1, p1, m1, a1 = y[:1], pred[:, :1], mask[:1], aten[:1]
    row_w = 1 + 3.0 * a1.float()
    got = _pairwise(p1, y1, m1, w[:, :1], scale, 2, row_w)
    num = den = 0.0
    for i in (0, 1):
        gain = math.exp(-(float(y1[0, i]) - float(y1[0, 0])) * scale)
        for j in range(4):
            if y1[0, j] > y1[0, i]:
                pw = gain * (4.0 if 1 in (i, j) else 1.0)
                num += pw * math.log1p(math.exp(-(float(p1[0, 0, j]) - float(p1[0, 0, i])) * scale))
                den += pw
    assert math.isclose(float(got), num / den, rel_tol=1e-5)
    assert not math.isclose(float(got), float(_pairwise(p1, y1, m1, w[:, :1], scale, 2)), rel_tol=1e-3)
    with pytest.raises(ValueError, match="aten_weight"):
        TrainOptions(aten_weight=0)


def test_regression_expectile_weighs_rows_by_the_sign_of_their_error() -> None:
    """``regression_expectile`` tau: a row measured slower than predicted weighs 2 tau in the
    regression mean, one measured faster 2 (1 - tau), on top of ``aten_weight``; 0.5 is the plain
    MSE, bit for bit."""
    import torch

    from torch_diode.train import TrainOptions, _loss

    y, mask, w = _loss_inputs()
    pred = torch.tensor([[[0.3, 0.1, 1.5, 1.0], [0.2, 0.4, 2.0, 9.0]]])  # [K=1, B, C]
    aten = torch.tensor([[False, True, False, False], [False, False, False, False]])
    plain = TrainOptions(pairwise_weight=0.0)
    half = TrainOptions(pairwise_weight=0.0, regression_expectile=0.5)
    assert all(
        torch.equal(a, b)
        for a, b in zip(_loss(pred, y, mask, w, 1.0, plain, aten), _loss(pred, y, mask, w, 1.0, half, aten))
    )
    _, mse, _ = _loss(pred, y, mask, w, 1.0, TrainOptions(pairwise_weight=0.0, regression_expectile=0.8), aten)
    sq = (pred[0] - y) ** 2
    under = pred[0] < y  # measured slower than predicted: 1.6; the others 0.4
    rw = torch.where(under, 1.6, 0.4) * torch.tensor([[1.0, 3.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0]])  # ATen x3, masked 0
    assert torch.allclose(mse, (sq * rw).sum() / rw.sum())
    assert not torch.allclose(mse, _loss(pred, y, mask, w, 1.0, plain, aten)[1])


def test_an_upper_expectile_predicts_slower_times(ds) -> None:
    """Trained for the 0.8 expectile (the regression term alone), the network's predictions sit
    above more of the measured times than the same training's at 0.5."""
    opts = dict(FAST, forest_trees=0, neighbours=0, aten_head_blend=0.0, pairwise_weight=0.0)
    above = {}
    for tau in (0.5, 0.8):
        model, _ = train(ds, TrainOptions(seed=7, val_fraction=0.0, regression_expectile=tau, **opts))
        over = []
        for t in ds.by_problem():
            med = t.median_by_choice()
            pred = model.predict(t.problem, [ds.choices[i] for i in med]).log_time_us
            over.append(pred > np.log(np.array(list(med.values()))))
        above[tau] = float(np.concatenate(over).mean())
    assert above[0.8] > above[0.5] + 0.05, above


def test_a_problems_aten_rows_are_always_in_its_sample() -> None:
    """A problem with more choices than ``max_choices_per_problem`` is subsampled per visit, but
    its ATen rows (1-2 of ~300) are always kept: they decide ATen against Triton."""
    rng = np.random.default_rng(0)
    aten = np.zeros(300, dtype=bool)
    aten[[5, 211]] = True
    seen = set()
    for _ in range(50):
        sel = _sample_choices(rng, aten, 16)
        assert len(sel) == 16 and len(set(sel.tolist())) == 16 and sel.max() < 300
        assert {5, 211} <= set(sel.tolist())
        seen.update(sel.tolist())
    assert len(seen) > 200  # the rest is sampled, not fixed
    np.testing.assert_array_equal(_sample_choices(rng, aten[:10], 16), np.arange(10))  # few: all
    assert _sample_choices(rng, aten, 1).tolist() == [5]  # a cap below the ATen rows: the first ones


def test_a_separate_held_out_set_measures_the_finished_model(tmp_path: Path, run_diode) -> None:
    """``held_out=`` (``diode train --held-out-dataset``): its metrics, on the model in the file,
    become the model's ``held_out_metrics`` (what the models manifest publishes); the split's go to
    ``training.split_metrics``; a set sharing shapes (in any layout) with training, or of another GPU, is refused."""
    from torch_diode.evaluate import summarize
    from torch_diode.train import check_held_out

    real, val = read_dataset(REAL), read_dataset(REAL_VAL)
    train_probs = [t.problem for t in real.by_problem()][:40]
    val_probs = [t.problem for t in val.by_problem()][:8]
    tr, held = real.select_problems(train_probs), val.select_problems(val_probs)
    opts = TrainOptions(seed=3, val_fraction=0.2, **FAST | {"num_epochs": 3, "forest_trees": 4})
    model, report = train(tr, opts, held_out=held, held_out_max_compile_cost=131072.0)
    again = load_model(save_model(model, tmp_path / "m.safetensors"))
    meta = again.metadata
    want = summarize(problem_evals(again, held, max_compile_cost=131072.0), with_tau=True)
    for key in ("regret@1", "regret@5", "recall@5", "kendall_tau"):
        assert want["overall"][key] == meta["held_out_metrics"]["overall"][key] == report.held_out["overall"][key]
    assert set(meta["held_out_metrics"]["per_op"]) == set(want["per_op"])
    assert meta["held_out_metrics"]["overall"]["problems"] == 8
    assert "separate held-out dataset of 8 problems" in meta["training"]["held_out_metrics_are_from"]
    assert meta["training"]["split_metrics"]["overall"]["problems"] == report.val_problems == 8  # 20% of 40
    # refused: problems shared with the training data, another GPU, no records
    with pytest.raises(ValueError, match=r"held-out dataset: 1 problem has the shape of a training problem .*e\.g\. "):
        check_held_out(tr, real.select_problems(train_probs[:1]))
    # the same shape in another layout is not held out either
    p = train_probs[0]
    flipped = _other_layout(p)
    recs = [dataclasses.replace(r, problem=flipped) for r in real.select_problems([p]).records()]
    with pytest.raises(ValueError, match=rf"1 problem has the shape .*e\.g\. {re.escape(flipped.key())}\)"):
        check_held_out(tr, Dataset.from_records(recs, real.sources))
    other = read_dataset(DATA)  # synthetic H100 timings
    with pytest.raises(ValueError, match="same GPU"):
        check_held_out(tr, other)
    with pytest.raises(ValueError, match="no timing records"):
        check_held_out(tr, val.select_problems([]))
    r = run_diode(
        "train",
        "--dataset",
        str(REAL),
        "--held-out-dataset",
        str(REAL),
        "--model",
        str(tmp_path / "x.safetensors"),
        env=ENV,
    )
    assert (
        r.returncode == 2 and "the shape of a training problem" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    )


def _other_layout(p):
    """``p`` with B column-major instead of row-major (the same shape, another layout)."""
    assert p.stride_b[-1] == 1
    flipped = dataclasses.replace(p, stride_b=(*p.stride_b[:-2], 1, p.k))
    assert flipped != p and flipped.shape == p.shape
    return flipped


def test_model_files_list_their_training_shapes_and_validation_checks_them(ds, run_diode, tmp_path: Path) -> None:
    """A model file lists the shape of every problem it was trained on; ``validate-model`` and
    ``validate-max-autotune`` warn about the dataset's problems of those shapes, say so in their
    reports, and leave them out with ``--exclude-trained``."""
    probs = sorted(ds.measured_problems(), key=str)
    seen, unseen = probs[:20], probs[20:]
    model, _ = train(ds.select_problems(seen), TrainOptions(seed=2, **FAST | {"num_epochs": 1}))
    path = save_model(model, tmp_path / "m.safetensors")
    shapes = load_model(path).trained_shapes
    assert shapes.complete and shapes.digests == {p.shape_digest() for p in seen} and len(shapes) == 20
    assert not any(p in shapes for p in unseen)

    r = run_diode("validate-model", "--model", str(path), "--dataset", str(DATA), "--json", check=True, env=ENV)
    assert r.stderr.startswith("warning: 20 problems of the dataset (e.g. ") and "not held out" in r.stderr
    rep = json.loads(r.stdout)
    assert rep["trained_shapes"] == {"listed": True, "complete": True, "problems": 20}
    assert rep["dataset"]["problems"] == 26
    r = run_diode("validate-model", "--model", str(path), "--dataset", str(DATA), "--exclude-trained", "--json", check=True, env=ENV)  # fmt: skip
    rep = json.loads(r.stdout)
    assert "warning" not in r.stderr and rep["dataset"]["problems"] == 6
    assert rep["trained_shapes"] == {"listed": True, "complete": True, "problems": 0, "excluded": 20}

    out = tmp_path / "report.json"
    r = run_diode("validate-max-autotune", "--model", str(path), "--dataset", str(DATA), "--output", str(out), check=True, env=ENV)  # fmt: skip
    assert "20 problems of the dataset have the shape of a problem the model was trained on" in r.stdout
    assert "20 problems of the dataset have the shape" in out.with_suffix(".md").read_text()
    assert json.loads(out.read_text())["trained_shapes"]["problems"] == 20
    r = run_diode("validate-max-autotune", "--model", str(path), "--dataset", str(DATA), "--exclude-trained", "--output", str(tmp_path / "ex.json"), check=True, env=ENV)  # fmt: skip
    rep = json.loads((tmp_path / "ex.json").read_text())
    assert rep["overall"]["problems"] == 6 and rep["trained_shapes"]["excluded"] == 20
    assert "20 problems of the dataset with the shape of a problem the model was trained on were left out" in r.stdout

    # by shape: a trained shape in another layout counts (one problem: singular wording)
    flipped = _other_layout(seen[0])
    recs = [dataclasses.replace(r, problem=flipped) for r in ds.select_problems([seen[0]]).records()]
    mixed = write_dataset(
        merge_datasets([Dataset.from_records(recs, ds.sources), ds.select_problems(unseen)]), tmp_path / "x.msgpack"
    )
    r = run_diode("validate-model", "--model", str(path), "--dataset", str(mixed), "--json", check=True, env=ENV)
    assert r.stderr.startswith(f"warning: 1 problem of the dataset (e.g. {flipped.key()}) has the shape of a problem")
    assert "figures over it are not held out; --exclude-trained leaves it out" in r.stderr
    r = run_diode("validate-model", "--model", str(path), "--dataset", str(mixed), "--exclude-trained", "--json", check=True, env=ENV)  # fmt: skip
    assert json.loads(r.stdout)["dataset"]["problems"] == len(unseen)

    # the demo names them too, rather than calling them held out
    from torch_diode.demo import evaluate_for_demo

    demo = evaluate_for_demo(load_model(path), ds, name="m", dataset_path=DATA)
    assert "26 problems (20 of a shape the model was trained on: not held out)" in demo.lines()[0]
    demo = evaluate_for_demo(load_model(path), ds.select_problems(unseen), name="m", dataset_path=DATA)
    assert "6 held-out problems" in demo.lines()[0]

    # nothing left to score, and a file that lists no shapes: refused, saying why
    only_seen = tmp_path / "seen.msgpack"
    write_dataset(ds.select_problems(seen), only_seen)
    r = run_diode("validate-model", "--model", str(path), "--dataset", str(only_seen), "--exclude-trained", env=ENV)
    assert r.returncode == 2 and "each of the dataset's 20 problems has the shape of a problem" in r.stderr
    write_dataset(ds.select_problems(seen[:1]), tmp_path / "one.msgpack")
    r = run_diode("validate-model", "--model", str(path), "--dataset", str(tmp_path / "one.msgpack"), "--exclude-trained", env=ENV)  # fmt: skip
    assert r.returncode == 2 and "the dataset's only problem has the shape" in r.stderr
    model.metadata.pop("training_shapes")
    model.update_metadata({})
    unlisted = save_model(model, tmp_path / "unlisted.safetensors")
    r = run_diode("validate-model", "--model", str(unlisted), "--dataset", str(DATA), "--json", check=True, env=ENV)
    assert json.loads(r.stdout)["trained_shapes"] == {"listed": False} and r.stderr == ""
    r = run_diode("validate-max-autotune", "--model", str(unlisted), "--dataset", str(DATA), "--exclude-trained", env=ENV)  # fmt: skip
    assert r.returncode == 2 and "does not list the shapes it was trained on" in r.stderr


def test_a_model_started_from_another_lists_that_ones_shapes_too(ds, tmp_path: Path) -> None:
    """``init_from`` / ``init_forest_from``: the new file lists the start file's training shapes
    with its own, and marks the list incomplete when the start file lists none."""
    probs = sorted(ds.measured_problems(), key=str)
    first, _ = train(ds.select_problems(probs[:10]), TrainOptions(seed=2, **FAST | {"num_epochs": 1}))
    a = save_model(first, tmp_path / "a.safetensors")
    opts = TrainOptions(seed=2, init_from=str(a), **FAST | {"num_epochs": 1})
    second, _ = train(ds.select_problems(probs[10:15]), opts)
    assert second.trained_shapes.complete
    assert second.trained_shapes.digests == {p.shape_digest() for p in probs[:15]}
    third, _ = train(ds.select_problems(probs[15:]), dataclasses.replace(opts, init_from=None, init_forest_from=str(a)))
    assert third.trained_shapes.complete
    assert third.trained_shapes.digests == {p.shape_digest() for p in probs[:10] + probs[15:]}

    # a held-out set of the start file's shapes is refused; the split's metrics leave them out
    with pytest.raises(ValueError, match=rf"3 problems have the shape of a problem {re.escape(str(a))}, which this"):
        train(ds.select_problems(probs[10:15]), opts, held_out=ds.select_problems(probs[:3]))
    overlap, _ = train(ds.select_problems(probs[:20]), dataclasses.replace(opts, val_fraction=0.5))
    _, va = split_problems(probs[:20], 0.5, 2)  # the split train() draws (order-independent)
    left_out = sum(i < 10 for i in va)  # validation problems of a's shapes
    meta = overlap.metadata
    assert meta["training"]["val_problems"] == 10 and 0 < left_out < 10
    assert meta["held_out_metrics"]["overall"]["problems"] == 10 - left_out
    assert f"{left_out} validation problem" in meta["training"]["held_out_metrics_are_from"]

    first.metadata.pop("training_shapes")
    first.update_metadata({})
    b = save_model(first, tmp_path / "b.safetensors")
    fourth, _ = train(ds.select_problems(probs[10:15]), dataclasses.replace(opts, init_from=str(b)))
    assert not fourth.trained_shapes.complete
    assert fourth.trained_shapes.digests == {p.shape_digest() for p in probs[10:15]}
    assert "lists no training shapes" in fourth.metadata["training"]["held_out_metrics_are_from"]
    # both starts, one listing none: the other's shapes, and incomplete
    both, _ = train(ds.select_problems(probs[10:15]), dataclasses.replace(opts, init_from=str(b), init_forest_from=str(a)))  # fmt: skip
    assert not both.trained_shapes.complete
    assert both.trained_shapes.digests == {p.shape_digest() for p in probs[:15]}


def test_split_keeps_each_shape_on_one_side() -> None:
    """The layouts of one shape fall on one side of the split (a validation problem of a training
    problem's shape is not held out), and the fraction counts shapes."""
    from torch_diode.records import Problem

    probs = []
    for i in range(20):
        m, n, k = 64 + i, 128, 256
        probs.append(Problem(op="mm", m=m, n=n, k=k, dtype="float16", stride_a=(k, 1), stride_b=(n, 1)))
        if i % 2:
            probs.append(Problem(op="mm", m=m, n=n, k=k, dtype="float16", stride_a=(k, 1), stride_b=(1, k)))
    for seed in range(5):
        tr, va = split_problems(probs, 0.25, seed)
        assert sorted(tr + va) == list(range(len(probs)))
        assert {probs[i].shape for i in tr}.isdisjoint({probs[i].shape for i in va})
        assert len({probs[i].shape for i in va}) == 5  # a quarter of the 20 shapes
