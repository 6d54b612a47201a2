"""The ATen head: what it learns, what it changes in a prediction, and its part of the model file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from test_model import CHOICES, PROBLEM, _rewrite, make_model

from torch_diode.aten_head import AtenHead, AtenHeadOptions
from torch_diode.dataset import read_dataset
from torch_diode.errors import ModelFormatError
from torch_diode.features import N_PROBLEM_FEATURES, featurize
from torch_diode.model import FORMAT_VERSION, load_model, save_model
from torch_diode.train import TrainOptions, train

REAL = Path(__file__).resolve().parents[1] / "data" / "NVIDIA-H100" / "train.msgpack"
# No ranking forest: its blend over the shortlist would mix the head's ATen shift into Triton's entries.
FAST = dict(ensemble_size=2, batch_size=4, max_choices_per_problem=64, num_epochs=3, progress=False, num_threads=1,
            forest_trees=0)  # fmt: skip
ATEN = np.array([c.is_aten for c in CHOICES])


def _head(blend: float = 0.5, seed: int = 0) -> AtenHead:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(64, N_PROBLEM_FEATURES))
    return AtenHead.fit(x, 0.5 * x[:, 0] - 0.2, AtenHeadOptions(members=2, hidden=16, epochs=300, blend=blend), seed)


def test_fit_learns_a_simple_gap_and_is_deterministic() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, N_PROBLEM_FEATURES))
    y = 0.5 * x[:, 0] - 0.2 * x[:, 3]
    opts = AtenHeadOptions(members=2, hidden=32, epochs=300)
    head = AtenHead.fit(x, y, opts, seed=0)
    test = rng.normal(size=(100, N_PROBLEM_FEATURES))
    want = 0.5 * test[:, 0] - 0.2 * test[:, 3]
    assert np.sqrt(np.mean((head.ratio(test) - want) ** 2)) < 0.5 * want.std()  # held-out problems
    again = AtenHead.fit(x, y, opts, seed=0)
    assert all(torch.equal(a, b) for a, b in zip(head.net.parameters(), again.net.parameters()))
    other = AtenHead.fit(x, y, opts, seed=1)
    assert not torch.equal(head.net.w_in, other.net.w_in)


def test_adjust_moves_only_aten_to_the_blended_gap() -> None:
    head = _head(blend=0.25)
    log_t = np.linspace(1.0, 2.0, len(CHOICES)).astype(np.float32)
    x = featurize(PROBLEM, CHOICES[:1], "NVIDIA-H100")[0, :N_PROBLEM_FEATURES]
    out = head.adjust(log_t, ATEN, x)
    np.testing.assert_array_equal(out[~ATEN], log_t[~ATEN])  # Triton's order and values untouched
    net_gap = log_t[ATEN].min() - log_t[~ATEN].min()
    want = 0.25 * head.ratio(x[None])[0] + 0.75 * net_gap
    assert out[ATEN].min() - out[~ATEN].min() == pytest.approx(want, abs=1e-5)
    np.testing.assert_array_equal(head.adjust(log_t[~ATEN], ATEN[~ATEN], x), log_t[~ATEN])  # no ATen
    np.testing.assert_array_equal(_head(blend=0.0).adjust(log_t, ATEN, x), log_t)


def test_options_are_checked() -> None:
    for bad in ({"blend": 1.5}, {"members": 0}, {"learning_rate": 0.0}, {"weight_decay": -1.0}):
        with pytest.raises(ValueError, match="ATen head"):
            AtenHeadOptions(**bad)
    with pytest.raises(ValueError, match="aten_head_blend"):
        TrainOptions(aten_head_blend="half")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 2 problems"):
        AtenHead.fit(np.zeros((1, N_PROBLEM_FEATURES)), np.zeros(1), AtenHeadOptions(), seed=0)


def _with_head(tmp_path: Path) -> Path:
    m = make_model()
    m.aten_head = _head()
    return save_model(m, tmp_path / "h.safetensors")


def test_model_file_round_trip_with_a_head(tmp_path: Path) -> None:
    path = _with_head(tmp_path)
    loaded = load_model(path)
    assert loaded.aten_head is not None and loaded.metadata["format_version"] == str(FORMAT_VERSION)
    m = make_model()
    m.aten_head = _head()
    before = m.predict(PROBLEM, CHOICES)
    after = loaded.predict(PROBLEM, CHOICES)
    assert np.array_equal(before.log_time_us, after.log_time_us) and np.array_equal(before.std, after.std)
    assert save_model(loaded, tmp_path / "again.safetensors").read_bytes() == path.read_bytes()
    # the head moved ATen against the network alone, and nothing else
    plain = make_model().predict(PROBLEM, CHOICES)
    np.testing.assert_array_equal(plain.log_time_us[~ATEN], after.log_time_us[~ATEN])
    assert not np.array_equal(plain.log_time_us[ATEN], after.log_time_us[ATEN])


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"tensors": {"aten_head.w_hidden": torch.zeros(1, 2, 16, 15)}}, "do not fit"),
        ({"tensors": {"aten_head.x_std": torch.zeros(N_PROBLEM_FEATURES)}}, "positive"),
        ({"tensors": {"aten_head.b_out": None}}, "missing or unexpected"),
        ({"meta": {"aten_head": None}}, "malformed"),
        ({"meta": {"aten_head": {"options": {"blend": 0.5}, "inputs": N_PROBLEM_FEATURES}}}, "malformed"),
    ],
    ids=["wrong-shape", "zero-std", "missing-tensor", "missing-metadata", "incomplete-options"],
)
def test_a_corrupt_head_is_refused(tmp_path: Path, change: dict, match: str) -> None:
    bad = _rewrite(_with_head(tmp_path), tmp_path / "bad.safetensors", **change)
    with pytest.raises(ModelFormatError, match=match):
        load_model(bad)


def test_version_2_files_without_a_head_still_load(tmp_path: Path) -> None:
    src = save_model(make_model(), tmp_path / "m.safetensors")
    v2 = _rewrite(src, tmp_path / "v2.safetensors", meta={"format_version": "2"})
    assert load_model(v2).aten_head is None


def test_training_fits_a_head_on_real_problems_unless_told_not_to(tmp_path: Path) -> None:
    real = read_dataset(REAL)
    sub = real.select_problems(g.problem for g in real.by_problem()[:16])
    model, _ = train(sub, TrainOptions(seed=2, **FAST))  # the default: a head of weight 0.75
    assert model.aten_head is not None and model.metadata["training"]["options"]["aten_head_blend"] == 0.75
    plain, _ = train(sub, TrainOptions(seed=2, aten_head_blend=0.0, **FAST))
    assert plain.aten_head is None
    # the same network and memory either way: the head only moves ATen's predictions
    g = sub.by_problem()[0]
    choices = [sub.choices[i] for i in g.median_by_choice()]
    aten = np.array([c.is_aten for c in choices])
    with_head, without = model.predict(g.problem, choices), plain.predict(g.problem, choices)
    np.testing.assert_array_equal(with_head.log_time_us[~aten], without.log_time_us[~aten])
    assert not np.array_equal(with_head.log_time_us[aten], without.log_time_us[aten])
    # fit on the measured gaps: on its own training problems it beats a constant guess
    x, y = [], []
    for pt in sub.by_problem():
        med = pt.median_by_choice()
        is_aten = np.array([sub.choices[i].is_aten for i in med])
        t = np.log(np.array(list(med.values())))
        x.append(featurize(pt.problem, [sub.choices[next(iter(med))]], "NVIDIA-H100")[0, :N_PROBLEM_FEATURES])
        y.append(t[is_aten].min() - t[~is_aten].min())
    err = model.aten_head.ratio(np.array(x)) - np.array(y)
    assert np.mean(err**2) < np.var(y)
    loaded = load_model(save_model(model, tmp_path / "m.safetensors"))
    assert loaded.aten_head is not None
    np.testing.assert_array_equal(loaded.predict(g.problem, choices).log_time_us, with_head.log_time_us)
