"""Sanity checks on the committed GPU datasets (data/<hardware key>/), whatever has been collected.

Each campaign file must: read cleanly (no truncation), hold one hardware key (its directory's),
have no duplicate records and no non-positive times, measure only problems of its split of the
plan, and (validation) share no shape with training. The full-space and repeat-agreement checks
run on the files they apply to once those exist (see scripts/campaign.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from torch_diode.collect.campaign import CampaignPlan
from torch_diode.dataset import read_dataset

DATA = Path(__file__).resolve().parents[1] / "data"
SPLIT_OF_FILE = {
    "train.msgpack": "train",
    "val.msgpack": "val",
    "val-stock.msgpack": "val",
    "train-repeat.msgpack": "train",
}
FILES = sorted(p for p in DATA.glob("*/*.msgpack") if p.name in SPLIT_OF_FILE)


def test_there_is_collected_data() -> None:
    assert FILES, "no campaign file under data/<KEY>/"


def test_checkpointed_parts_are_settled() -> None:
    """A committed ``<split>.msgpack.partial`` (the timed part of a problem a chunk could not
    finish) holds only problems its split's file does not, of the plan's split, with valid times."""
    for side in sorted(DATA.glob("*/*.msgpack.partial")):
        main = side.with_name(side.name.removesuffix(".partial"))
        assert main.name in SPLIT_OF_FILE, f"{side}: a sidecar of no campaign file"
        parts = read_dataset(side)  # strict
        assert parts.hardware == side.parent.name
        assert (parts.time_us > 0).all() and np.isfinite(parts.time_us).all()
        done = read_dataset(main).collected_problems() if main.exists() else set()
        assert not set(parts.problems) & done, f"{side}: unsettled parts (run settle_partials on {main})"
        plan = CampaignPlan.load(side.parent / "plan.json")
        allowed = set(plan.train if SPLIT_OF_FILE[main.name] == "train" else plan.val)
        assert set(parts.problems) <= allowed


def _shape(p):
    return (p.op, p.m, p.n, p.k, p.batch, p.dtype)


def _read_checked(path: Path):
    """The file read strictly (a truncated file fails here), with what every collected file
    must hold: its directory's GPU, positive finite times, sources with versions and (sweep)
    Inductor's literal-size kernels, and ATen plus at least one Triton config per problem."""
    ds = read_dataset(path)
    assert ds.hardware == path.parent.name
    assert len(ds) > 0
    assert (ds.time_us > 0).all() and np.isfinite(ds.time_us).all()
    for s in ds.sources:
        assert s.torch_version and s.triton_version and s.gpu_name and s.command, s
        # the sweep's kernels must be Inductor's (literal sizes; benchmarks/fidelity/NVIDIA-H100/README.md)
        if s.collector == "sweep":
            assert dict(s.extra).get("sweep_kernels") == "literal", (
                f"{path}: a source without literal-size kernels: {s}"
            )
    for t in ds.by_problem():
        chosen = [ds.choices[i] for i in set(t.choice_idx.tolist())]
        assert any(c.is_aten for c in chosen) and any(c.is_triton for c in chosen), t.problem.key()
    return ds


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_campaign_file(path: Path) -> None:
    ds = _read_checked(path)
    # No duplicate records: a Triton config is timed once per problem (top-ups and checkpointed
    # parts time only what is missing), so a record written twice shows up here. ATen is timed
    # again beside every part and top-up by design, and its event-timer times (float32 ms) can
    # coincide exactly, so its repeats are not duplicates.
    triton = ~np.array([c.is_aten for c in ds.choices], dtype=bool)[ds.choice_idx]
    keys = np.stack([ds.problem_idx[triton], ds.choice_idx[triton]], axis=1)
    assert len(np.unique(keys, axis=0)) == int(triton.sum()), "a Triton config recorded twice for one problem"
    plan = CampaignPlan.load(path.parent / "plan.json")
    split = SPLIT_OF_FILE[path.name]
    allowed = set(plan.train if split == "train" else plan.val)
    measured = ds.measured_problems()
    assert measured <= allowed, f"{len(measured - allowed)} problem(s) not in the plan's {split} split"
    if split == "val":
        assert not {_shape(p) for p in measured} & {_shape(p) for p in plan.train}
    # repeated measurements of one (problem, choice) agree within 5% (median relative spread)
    spreads = []
    for t in ds.by_problem():
        for cid in np.unique(t.choice_idx):
            times = t.time_us[t.choice_idx == cid]
            if len(times) > 1:
                spreads.append((times.max() - times.min()) / np.median(times))
    if spreads:
        assert float(np.median(spreads)) <= 0.05


VAL_FILES = [p for p in FILES if p.name == "val.msgpack"]


@pytest.mark.parametrize("path", VAL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_validation_problems_have_the_full_exhaustive_space(path: Path, fake_cuda) -> None:
    """Every validation problem has ATen and every Triton config of Inductor's EXHAUSTIVE space,
    each timed or recorded as a failure (configs that do not fit the GPU), none left out: the true
    best choice is known. The space is enumerated here by Inductor itself (fake CUDA device)."""
    from torch_diode.collect.sweep import inductor_choices

    ds = read_dataset(path)
    measured = ds.measured_choices()  # timed or failed, per problem
    for t in ds.by_problem():
        seen = measured[t.problem]
        space = {it.choice for it in inductor_choices(t.problem, "EXHAUSTIVE")}
        assert not space - seen, f"{t.problem.key()}: {len(space - seen)} of {len(space)} choices not measured"
        timed_triton = [ds.choices[i] for i in set(t.choice_idx.tolist()) if ds.choices[i].is_triton]
        assert len(timed_triton) >= 0.5 * len(space), t.problem.key()


REPEATS = [p for p in FILES if p.name == "train-repeat.msgpack"]


@pytest.mark.parametrize("path", REPEATS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_repeated_measurements_agree(path: Path) -> None:
    """A later run's measurements of the same (problem, choice) agree with the training file's
    within 5% (median relative difference), and it measured the same choices."""
    first = read_dataset(path.with_name("train.msgpack"))
    again = read_dataset(path)

    def medians(ds):  # (problem, choice) -> median time
        return {(t.problem, ds.choices[c]): v for t in ds.by_problem() for c, v in t.median_by_choice().items()}

    a, b = medians(first), medians(again)
    common = set(a) & set(b)
    assert common and len(common) >= 0.9 * len(b), "the repeat measured other choices than the training run"
    rel = np.array([abs(b[k] - a[k]) / a[k] for k in common])
    assert float(np.median(rel)) <= 0.05, f"median relative difference {np.median(rel):.3f} over {len(rel)} pairs"


TRAIN_FILES = [p for p in FILES if p.name == "train.msgpack"]


@pytest.mark.parametrize("path", TRAIN_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_training_problems_have_300_configs_or_their_whole_space(path: Path, fake_cuda) -> None:
    """Every training problem has >= 300 timed Triton configs, or its whole EXHAUSTIVE space (less
    the plan's compile-cost cap) is smaller than that and every config of it was measured (timed
    or recorded as a failure): a small problem's space is small (Inductor clamps block sizes)."""
    from torch_diode.collect.sweep import compile_cost, inductor_choices

    plan = CampaignPlan.load(path.parent / "plan.json")
    cap = plan.options.train_max_compile_cost
    ds = read_dataset(path)
    measured = ds.measured_choices()  # timed or failed, per problem
    short = []
    for t in ds.by_problem():
        timed = {ds.choices[i] for i in set(t.choice_idx.tolist()) if ds.choices[i].is_triton}
        if len(timed) >= 300:
            continue
        space = {
            it.choice
            for it in inductor_choices(t.problem, "EXHAUSTIVE")
            if it.kind == "triton" and (cap is None or compile_cost(t.problem, it.choice) <= cap)
        }
        if len(space) >= 300 or space - measured[t.problem]:
            short.append(f"{t.problem.key()}: {len(timed)} timed of a space of {len(space)}")
    assert not short, f"{len(short)} training problem(s) short of configs (run the campaign with --top-up): {short[:5]}"


#: the extra training files in the order they were collected: each shares no shape with those before it
EXTRA_ORDER = (
    "train-active.msgpack",
    "train-cover.msgpack",
    "train-cover2.msgpack",
    "train-active2.msgpack",
    "train-active3.msgpack",
    "train-skinny.msgpack",
    "train-large.msgpack",
    "train-large2.msgpack",
)
ACTIVE_FILES = sorted(f for f in DATA.glob("*/train-*.msgpack") if f.name in EXTRA_ORDER)


@pytest.mark.parametrize("path", ACTIVE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_active_training_file(path: Path) -> None:
    """``train-active.msgpack`` (session 44: the model's own top configs, Inductor's DEFAULT
    candidates and a few random ones, measured on problems outside the plan) and
    ``train-cover.msgpack`` and ``train-cover2.msgpack`` (sessions 45 and 46: the same kind of
    lists on problems where the training set is thin), ``train-active2.msgpack`` (session 49:
    session 44's lists again, ranked by the session-46 H200 file) and ``train-active3.msgpack``
    (session 50: the same, ranked by the session-49 file), ``train-skinny.msgpack`` (session 58:
    problems with one output side at most 16, each with its whole EXHAUSTIVE space) and
    ``train-large.msgpack`` (session 59: the same with the other output side 16,384-65,536) and
    ``train-large2.msgpack`` (session 61: the rest of session 59's list) read cleanly, hold their
    directory's GPU with literal-size kernels, ATen and Triton for every problem, and share no
    shape with the plan's training or validation problems (no validation shape leaks into
    training), nor with a file collected before them (``EXTRA_ORDER``: each is a new set of
    problems)."""
    ds = _read_checked(path)
    assert {s.collector for s in ds.sources} == {"sweep"}
    plan = CampaignPlan.load(path.parent / "plan.json")
    shapes = {_shape(p) for p in ds.measured_problems()}
    assert not shapes & {_shape(p) for p in plan.train + plan.val}
    for name in EXTRA_ORDER[: EXTRA_ORDER.index(path.name)]:
        f = path.parent / name
        if f.exists():
            assert not shapes & {_shape(p) for p in _read_checked(f).measured_problems()}, f.name
