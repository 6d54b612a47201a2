"""The ranking forest: the booster on real timings, its gradients (hand-computed), the fast scorer,
the shortlist blend, options, training, and model files with a forest."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from test_model import CHOICES, PROBLEM, _rewrite, make_model

from torch_diode.dataset import read_dataset
from torch_diode.errors import ModelFormatError
from torch_diode.evaluate import regret_at_k
from torch_diode.features import FEATURE_SPEC, N_PROBLEM_FEATURES, featurize, featurize_split
from torch_diode.forest import ForestOptions, RankingForest, _Padded, boost, oblivious_scores
from torch_diode.model import load_model, save_model
from torch_diode.records import Problem
from torch_diode.train import TrainOptions, train

REAL = Path(__file__).resolve().parents[1] / "data" / "NVIDIA-H200" / "train.msgpack"
H200 = "NVIDIA-H200"
SMALL = ForestOptions(trees=12, depth=4, shortlist=8)


@pytest.fixture(scope="module")
def real():
    """60 training and 20 held-out problems of the committed H200 file: features, log times."""
    ds = read_dataset(REAL)
    groups = sorted(ds.by_problem(), key=lambda g: g.problem.key())[:80]

    def rows(part):
        out = []
        for g in part:
            med = g.median_by_choice()
            choices = [ds.choices[i] for i in med]
            out.append((g.problem, choices, featurize(g.problem, choices, H200), np.log(np.array(list(med.values())))))
        return out

    return rows(groups[0::4] + groups[1::4] + groups[2::4]), rows(groups[3::4])


def _stacked(rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows of ``rows``' problems one after another: features, log times and per-problem counts."""
    x = np.concatenate([r[2] for r in rows])
    y = np.concatenate([r[3] for r in rows])
    return x, y, np.array([len(r[3]) for r in rows])


def _fit(rows, options: ForestOptions, seed: int = 0) -> RankingForest:
    return RankingForest.fit(*_stacked(rows), options, seed)


def _geomean_regret(forest: RankingForest, rows, k: int) -> float:
    regrets = [regret_at_k(np.exp(y), -forest.score(x), (k,))[k] for _, _, x, y in rows]
    return float(np.exp(np.mean(np.log(regrets))))


def test_forest_learns_the_order_of_real_timings(real) -> None:
    train_rows, held_out = real
    forest = _fit(train_rows, ForestOptions(trees=40, depth=6))
    # A choice drawn at random is several times the best on these problems (the exhaustive space
    # holds many slow tiles); the forest's first pick on problems it has not seen is close to it.
    rnd = float(np.exp(np.mean([np.mean(y) - y.min() for _, _, _, y in held_out])))
    held1 = _geomean_regret(forest, held_out, 1)
    assert rnd > 1.8 and held1 < 1.35, (rnd, held1)
    assert _geomean_regret(forest, held_out, 5) < held1
    # boosting: more rounds rank the training problems' fast choices better
    early = _fit(train_rows, ForestOptions(trees=3, depth=6))
    assert _geomean_regret(forest, train_rows, 5) < _geomean_regret(early, train_rows, 5)


def test_fit_is_seeded_and_bit_for_bit_reproducible(real) -> None:
    rows = real[0][:20]
    a, b, c = _fit(rows, SMALL, seed=1), _fit(rows, SMALL, seed=1), _fit(rows, SMALL, seed=2)
    for name in ("features", "thresholds", "leaves"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.leaves, c.leaves)  # rows and columns are sampled from the seed


def test_boost_takes_extra_columns_and_fit_is_boost_on_the_schema(real) -> None:
    rows = real[0][:20]
    x, y, counts = _stacked(rows)
    forest = _fit(rows, SMALL, seed=3)
    tables = boost(x, y, counts, SMALL, 3)
    for name, table in zip(("features", "thresholds", "leaves"), tables):
        assert np.array_equal(getattr(forest, name), table)
    assert np.array_equal(oblivious_scores(x, *tables), forest.score(x))
    # a column beyond the schema that orders each problem's rows by their measured time: the
    # booster splits on it and ranks the problems better with it; fit refuses such rows
    rank = np.concatenate([np.argsort(np.argsort(r[3])) for r in rows]).astype(np.float32)[:, None]
    more = boost(np.hstack([x, rank]), y, counts, SMALL, 3)
    assert (more[0] == len(FEATURE_SPEC)).any()
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])

    def regret1(scores: np.ndarray) -> float:
        return float(
            np.mean([y[s + np.argmax(scores[s : s + n])] - y[s : s + n].min() for s, n in zip(starts, counts)])
        )

    assert regret1(oblivious_scores(np.hstack([x, rank]), *more)) < regret1(forest.score(x))
    with pytest.raises(ValueError, match="disagree"):
        RankingForest.fit(np.hstack([x, rank]), y, counts, SMALL, 3)


def test_boost_from_a_base_margin_learns_corrections_to_it(real) -> None:
    x, y32, counts = _stacked(real[0][:20])
    y = y32.astype(np.float64)
    plain = boost(x, y, counts, SMALL, 3)
    # a zero margin is no margin, bit for bit
    for a, b in zip(plain, boost(x, y, counts, SMALL, 3, init=np.zeros(len(y)))):
        assert np.array_equal(a, b)
    # a margin that already orders every problem by its measured time, by a wide margin: the
    # pairs barely pull (only near-ties do), so the trees' leaves are far smaller than from zero
    sure = boost(x, y, counts, SMALL, 3, init=-y / 0.001)
    assert np.abs(sure[2]).max() < 0.1 * np.abs(plain[2]).max()
    # a margin in the reverse order: the trees learn to undo it (their leaves grow)
    wrong = boost(x, y, counts, SMALL, 3, init=y / 0.1)
    assert np.abs(wrong[2]).max() > np.abs(plain[2]).max()
    with pytest.raises(ValueError, match="init"):
        boost(x, y, counts, SMALL, 3, init=np.zeros(len(y) - 1))


def test_fit_from_a_start_forest_keeps_its_trees_and_boosts_corrections(real) -> None:
    """``fit(..., start=F)``: F's trees unchanged, then ``options.trees`` more boosted from F's
    scores of the rows (``boost``'s ``init``), ``trees`` the sum; the new trees rank the rows
    better than F alone; a start of another depth is refused."""
    train_rows = real[0]
    x, y, counts = _stacked(train_rows[:30])
    start = _fit(train_rows[30:], ForestOptions(trees=10, depth=4, shortlist=8), seed=5)  # other problems'
    grown = RankingForest.fit(x, y, counts, SMALL, 3, start=start)
    assert grown.options == ForestOptions(trees=22, depth=4, shortlist=8)
    for name in ("features", "thresholds", "leaves"):
        assert np.array_equal(getattr(grown, name)[:10], getattr(start, name))
    init = oblivious_scores(x, start.features, start.thresholds, start.leaves).astype(np.float64)
    for name, table in zip(("features", "thresholds", "leaves"), boost(x, y, counts, SMALL, 3, init=init)):
        assert np.array_equal(getattr(grown, name)[10:], table)
    rows = train_rows[:30]
    assert _geomean_regret(grown, rows, 1) < _geomean_regret(start, rows, 1)
    with pytest.raises(ValueError, match="start forest's trees are 4 deep, not 6"):
        RankingForest.fit(x, y, counts, ForestOptions(trees=2, depth=6), 3, start=start)


def test_lambdarank_gradients_of_two_tied_choices_are_hand_computed() -> None:
    # One problem: row 0 is the best (label 30), row 1 3.5% slower (label 28); both scored 0.
    # Pair (0, 1): |dNDCG| = (G0 - G1) * (1/log2(2) - 1/log2(3)) / (G0 + G1/log2(3)), rho = 1/2:
    # row 0's gradient is -delta/2, row 1's +delta/2, hessians delta/4 each.
    g0, g1 = 2.0**30 - 1, 2.0**28 - 1
    delta = (g0 - g1) * (1 - 1 / math.log2(3)) / (g0 + g1 / math.log2(3))
    grad, hess = _Padded(np.array([2])).lambdas(np.zeros(2), np.array([g0, g1]), top=30)
    np.testing.assert_allclose(grad, [-delta / 2, delta / 2], rtol=1e-6)
    np.testing.assert_allclose(hess, [delta / 4, delta / 4], rtol=1e-6)
    # Ordered right by a wide margin, the pair barely pulls; a padded second problem changes nothing.
    grad2, _ = _Padded(np.array([2, 1])).lambdas(np.array([20.0, 0.0, 5.0]), np.array([g0, g1, 1.0]), top=30)
    assert abs(grad2[0]) < 1e-8 * delta and grad2[2] == 0.0


def _random_forest(rng: np.random.Generator, options: ForestOptions) -> RankingForest:
    """Splits on problem and per-choice columns alike, thresholds drawn from real feature values."""
    x = featurize(PROBLEM, CHOICES, "NVIDIA-H100")
    t, d = options.trees, options.depth
    feats = rng.integers(0, len(FEATURE_SPEC), size=(t, d)).astype(np.int32)
    feats[:, 0] = rng.integers(0, N_PROBLEM_FEATURES, size=t)  # every tree tests the problem once
    thr = x[rng.integers(0, len(x), size=(t, d)), feats] - 0.5 * rng.random((t, d)).astype(np.float32)
    return RankingForest(feats, thr.astype(np.float32), rng.standard_normal((t, 2**d)).astype(np.float32), options)


@pytest.mark.parametrize(("trees", "depth"), [(9, 1), (9, 5), (9, 8), (100, 6)])
def test_fast_scorer_equals_the_plain_one(trees: int, depth: int) -> None:
    # 100 trees of depth 6: 600 splits, compared in blocks (forest._SPLIT_BLOCK) with a partial last
    # one; the last 40 trees repeat the splits of the first 40 with other leaves (trees share splits)
    forest = _random_forest(np.random.default_rng(depth), ForestOptions(trees=trees, depth=depth))
    if trees > 80:
        feats, thr = forest.features.copy(), forest.thresholds.copy()
        feats[-40:], thr[-40:] = feats[:40], thr[:40]
        forest = RankingForest(feats, thr, forest.leaves, forest.options)
    for problem in (PROBLEM, Problem(op="bmm", m=77, n=1021, k=64, batch=12, dtype="float32")):
        xs, xr = featurize_split(problem, CHOICES, "NVIDIA-H100")
        fast = forest.score_split(xs, xr)
        np.testing.assert_allclose(fast, forest.score(featurize(problem, CHOICES, "NVIDIA-H100")), atol=1e-5)
        assert (fast.std() > 0) == (depth > 1)  # depth 1 tests only the problem: one score for all


def test_rerank_blends_the_shortlist_only() -> None:
    opts = ForestOptions(trees=9, depth=4, shortlist=10, blend=0.5)
    forest = _random_forest(np.random.default_rng(0), opts)
    xs, xr = featurize_split(PROBLEM, CHOICES, "NVIDIA-H100")
    log_t = np.linspace(2.0, 5.0, len(CHOICES)).astype(np.float32)[::-1].copy()  # the last choice predicted best
    out = forest.rerank(log_t, xs, xr)
    short = np.argsort(log_t)[:10]
    rest = np.setdiff1d(np.arange(len(log_t)), short)
    assert np.array_equal(out[rest], log_t[rest])
    # the shortlist keeps the network's values, reordered (the handler reads their spacing)
    assert np.array_equal(np.sort(out[short]), np.sort(log_t[short]))
    assert not np.array_equal(out[short], log_t[short])
    # blend 1: the shortlist in the forest's order; blend 0: the network's prediction unchanged
    full = RankingForest(
        forest.features, forest.thresholds, forest.leaves, ForestOptions(**{**opts.to_dict(), "blend": 1.0})
    )
    scores = forest.score_split(xs, xr[short])
    along = scores[np.argsort(full.rerank(log_t, xs, xr)[short])]  # the forest's scores, best predicted first
    assert (np.diff(along) <= 0).all() and along[0] > along[-1]
    none = RankingForest(
        forest.features, forest.thresholds, forest.leaves, ForestOptions(**{**opts.to_dict(), "blend": 0.0})
    )
    assert np.array_equal(none.rerank(log_t, xs, xr), log_t)
    assert np.array_equal(forest.rerank(log_t[:1], xs, xr[:1]), log_t[:1])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"depth": 9}, "depth"),
        ({"trees": 0}, "trees"),
        ({"blend": 1.5}, "blend"),
        ({"max_bins": 300}, "max_bins"),
        ({"row_fraction": 0.0}, "row_fraction"),
        ({"learning_rate": float("nan")}, "learning_rate"),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else v,
)
def test_options_are_validated(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ForestOptions(**kwargs)
    with pytest.raises(ValueError, match="unknown forest options"):
        ForestOptions.from_dict({"trees": 3, "leaves": 8})


def _with_forest():
    m = make_model()
    m.forest = _random_forest(np.random.default_rng(5), ForestOptions(trees=7, depth=3, shortlist=12))
    return m


def test_model_file_round_trip_with_forest(tmp_path: Path) -> None:
    m = _with_forest()
    before = m.predict(PROBLEM, CHOICES)
    path = save_model(m, tmp_path / "m.safetensors")
    loaded = load_model(path)
    assert loaded.forest is not None and loaded.metadata["forest"]["options"]["trees"] == 7
    assert loaded.metadata["format_version"] == "6"
    after = loaded.predict(PROBLEM, CHOICES)
    assert np.array_equal(before.log_time_us, after.log_time_us) and np.array_equal(before.std, after.std)
    assert save_model(loaded, tmp_path / "again.safetensors").read_bytes() == path.read_bytes()
    loaded.forest = None  # the forest changed the prediction; the uncertainty is the network's
    plain = loaded.predict(PROBLEM, CHOICES)
    assert not np.array_equal(plain.log_time_us, before.log_time_us) and np.array_equal(plain.std, before.std)
    # replacing a part of a loaded model changes what is saved (the file's bytes were cached at load)
    assert loaded.model_hash != m.model_hash
    assert load_model(save_model(loaded, tmp_path / "plain.safetensors")).forest is None


def test_version_3_files_without_forest_still_load(tmp_path: Path) -> None:
    src = save_model(make_model(), tmp_path / "m.safetensors")
    v3 = _rewrite(src, tmp_path / "v3.safetensors", meta={"format_version": "3"})
    assert load_model(v3).forest is None


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"tensors": {"forest.features": torch.full((7, 3), len(FEATURE_SPEC), dtype=torch.int32)}}, "feature columns"),
        ({"tensors": {"forest.features": torch.zeros(7, 3)}}, "not int32"),
        ({"tensors": {"forest.thresholds": torch.full((7, 3), float("nan"))}}, "not finite"),
        ({"tensors": {"forest.leaves": torch.zeros(7, 4)}}, "do not fit"),
        ({"tensors": {"forest.leaves": None}}, "missing"),
        ({"meta": {"forest": {"options": {"trees": 7, "depth": 3, "shape": "round"}}}}, "unknown forest options"),
        ({"meta": {"forest": None}}, "malformed"),
    ],
    ids=[
        "feature-out-of-range",
        "float-features",
        "nan-threshold",
        "leaf-shape",
        "missing-tensor",
        "bad-options",
        "missing-metadata",
    ],
)
def test_a_corrupt_forest_is_refused(tmp_path: Path, change: dict, match: str) -> None:
    src = save_model(_with_forest(), tmp_path / "src.safetensors")
    with pytest.raises(ModelFormatError, match=match):
        load_model(_rewrite(src, tmp_path / "bad.safetensors", **change))


def test_training_fits_a_forest_on_the_training_split(tmp_path: Path) -> None:
    ds = read_dataset(REAL)
    sub = ds.select_problems(g.problem for g in ds.by_problem()[:16])
    fast = dict(ensemble_size=2, batch_size=4, max_choices_per_problem=64, num_epochs=2, progress=False, num_threads=1)
    model, report = train(sub, TrainOptions(seed=3, forest_trees=6, forest_depth=3, **fast))
    assert model.forest is not None and model.forest.options.trees == 6 and report.val_problems >= 1
    assert model.metadata["training"]["options"]["forest_trees"] == 6
    plain, _ = train(sub, TrainOptions(seed=3, forest_trees=0, **fast))
    assert plain.forest is None
    # the same network either way: the forest only re-ranks its shortlist
    g = ds.by_problem()[0]
    choices = [ds.choices[i] for i in g.median_by_choice()]
    np.testing.assert_array_equal(model.predict(g.problem, choices).std, plain.predict(g.problem, choices).std)
    with pytest.raises(ValueError, match="forest_trees"):
        TrainOptions(forest_trees=-1)
    with pytest.raises(ValueError, match="depth"):
        TrainOptions(forest_depth=12)
