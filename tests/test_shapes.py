"""Shape sources: samplers, shape-set files, GEMM extraction from modules, the committed real-model set."""

from __future__ import annotations

import collections
import itertools
import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

from torch_diode.records import OPS, Problem
from torch_diode.shapes.sampling import (
    FITTED,
    PATIENCE,
    REAL_TAGS,
    SAMPLERS,
    SamplingError,
    fit_log_normal,
    sample_problems,
)
from torch_diode.shapes.shapeset import (
    LAYOUTS,
    ShapeEntry,
    ShapeSetError,
    load_shapeset,
    merge_entries,
    save_shapeset,
    split_of,
    strides_for,
)

REPO = Path(__file__).resolve().parents[1]
REAL = REPO / "data" / "shapesets" / "real_models.json"


# -- samplers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_sampler_is_seeded_and_distinct(sampler):
    a = sample_problems(200, seed=7, sampler=sampler)
    assert a == sample_problems(200, seed=7, sampler=sampler)
    assert a != sample_problems(200, seed=8, sampler=sampler)
    assert len(set(a)) == 200
    assert {p.op for p in a} == {"mm", "addmm", "bmm"}
    assert {p.dtype for p in a} == {"float16", "bfloat16", "float32"}
    assert {(p.layout_a, p.layout_b) for p in a} == {("row", "row"), ("row", "col")}
    assert all(max(p.m * p.k, p.k * p.n, p.m * p.n) * p.batch <= 2**28 for p in a)


def test_uniform_and_pow2_ranges():
    u = sample_problems(300, seed=0, sampler="uniform", ops=("mm",), min_dim=10, max_dim=100)
    assert all(10 <= d <= 100 for p in u for d in (p.m, p.n, p.k))
    p2 = sample_problems(100, seed=0, sampler="pow2", ops=("bmm",), min_dim=16, max_dim=1024)
    assert all(d in {16, 32, 64, 128, 256, 512, 1024} for p in p2 for d in (p.m, p.n, p.k))
    assert all(p.batch in {1, 2, 4, 8, 16, 32, 64} for p in p2)


def test_log_normal_follows_the_fit():
    ps = sample_problems(3000, seed=1, sampler="log-normal", ops=("mm",), max_operand_elements=2**40)
    x = np.log(np.array([[p.m, p.n, p.k] for p in ps], dtype=float))
    fit = FITTED["mm"]
    # Clipping at the fitted range and rounding shift the moments a little; the bulk must match.
    assert np.allclose(np.median(x, axis=0), fit.mean, atol=0.35)
    assert all(lo <= d <= hi for p in ps for d, lo, hi in zip((p.m, p.n, p.k), fit.lo, fit.hi))
    assert min(p.m for p in ps) == 1  # decode sizes occur
    bmm = sample_problems(500, seed=1, sampler="log-normal", ops=("bmm",))
    assert 1 <= min(p.batch for p in bmm) and max(p.batch for p in bmm) <= FITTED["bmm"].batch_hi


def test_sampler_excludes_and_validates():
    first = sample_problems(50, seed=3, sampler="pow2", ops=("mm",), min_dim=16, max_dim=64)
    rest = sample_problems(10, seed=3, sampler="pow2", ops=("mm",), min_dim=16, max_dim=64, exclude=first)
    assert not set(first) & set(rest)
    with pytest.raises(ValueError, match="ops"):
        sample_problems(1, seed=0, ops=("conv",))
    with pytest.raises(ValueError, match="layouts"):
        sample_problems(1, seed=0, layouts=("nt",))
    with pytest.raises(ValueError, match="the space holds only 1 distinct problem; lower n to at most 1"):
        sample_problems(
            10, seed=0, sampler="pow2", ops=("mm",), dtypes=("float16",), layouts=("row/row",), min_dim=16, max_dim=16
        )


SMALL = dict(sampler="pow2", ops=("mm",), dtypes=("float32",), layouts=("row/row",), min_dim=16, max_dim=64)  # 27


def test_a_request_the_space_cannot_hold_fails_at_once():
    # Regression: asking for more problems than the space holds drew 100 * n times first (two
    # minutes for -n 100000), then said only "widen the ranges".
    start = time.perf_counter()
    with pytest.raises(SamplingError) as e:
        sample_problems(5000, seed=0, **SMALL)
    assert time.perf_counter() - start < 2
    assert str(e.value) == (
        "n 5000: the space holds only 27 distinct problems; lower n to at most 27, or widen the space "
        "(min_dim/max_dim, ops, dtypes, layouts)"
    )
    assert (e.value.space, e.value.excluded, e.value.problems) == (27, 0, [])
    every = sample_problems(27, seed=0, **SMALL)  # exactly what it holds: drawn
    assert len(set(every)) == 27
    with pytest.raises(SamplingError, match=r"holds only 27 distinct problems, 5 of them excluded .*at most 22"):
        sample_problems(23, seed=0, exclude=every[:5], **SMALL)
    assert len(sample_problems(22, seed=0, exclude=every[:5], **SMALL)) == 22
    # Uniform counts its space too (16..18: 3 sizes, so 27 again).
    with pytest.raises(SamplingError, match="holds only 27 distinct problems"):
        sample_problems(28, seed=0, **{**SMALL, "sampler": "uniform", "max_dim": 18})


def _brute_force_space(sampler, ops, dtypes, layouts, min_dim, max_dim, max_batch, cap):
    sizes = [v for v in range(min_dim, max_dim + 1) if sampler == "uniform" or v & (v - 1) == 0]
    batches = range(1, max_batch + 1) if sampler == "uniform" else [b for b in (1, 2, 4, 8, 16) if b <= max_batch]
    out = set()
    for op, dtype, layout, m, n, k in itertools.product(ops, dtypes, layouts, sizes, sizes, sizes):
        for b in batches if op in ("bmm", "baddbmm") else [1]:
            if max(m * k, k * n, m * n) * b <= cap:
                sa, sb = strides_for(op, m, n, k, layout)
                out.add(Problem(op=op, m=m, n=n, k=k, batch=b, dtype=dtype, stride_a=sa, stride_b=sb))
    return out


@pytest.mark.parametrize(
    "space",
    [
        dict(sampler="uniform", ops=("mm", "bmm"), dtypes=("float16",), layouts=LAYOUTS, min_dim=3, max_dim=9,
             max_batch=3, cap=40),
        dict(sampler="uniform", ops=("addmm", "baddbmm"), dtypes=("float16", "float32"), layouts=("row/col",),
             min_dim=5, max_dim=12, max_batch=4, cap=120),
        dict(sampler="pow2", ops=("bmm",), dtypes=("bfloat16",), layouts=("row/row", "col/col"), min_dim=2,
             max_dim=64, max_batch=8, cap=2**9),
    ],
)  # fmt: skip
def test_the_counted_space_is_exact(space):
    """The count that refuses a request is the number of distinct problems the draws can give, the
    operand cap (which keeps most of these ranges out) and the batches included."""
    *_, cap = space.values()
    kw = {k: v for k, v in space.items() if k != "cap"} | dict(max_operand_elements=cap)
    every = _brute_force_space(**space)
    assert 0 < len(every) < len(_brute_force_space(**{**space, "cap": 10**9}))  # the cap bites
    assert set(sample_problems(len(every), seed=1, **kw)) == every
    with pytest.raises(SamplingError) as e:
        sample_problems(len(every) + 1, seed=1, **kw)
    assert e.value.space == len(every) and e.value.problems == []
    assert f"the space holds only {len(every):,} distinct problems" in str(e.value)


@pytest.mark.parametrize("sampler", ["uniform", "pow2"])
def test_sizes_no_problem_fits_name_the_operand_cap(sampler):
    # Regression: with min_dim 20000 every operand is over the 2**28-element cap, and the message
    # said only "widen the ranges" (after 100 * n draws).
    with pytest.raises(SamplingError) as e:
        sample_problems(10, seed=0, sampler=sampler, min_dim=20000, max_dim=40000)
    msg = str(e.value)
    assert msg.startswith("no problem fits under max_operand_elements (2**28 elements per operand, batch included)")
    assert msg.endswith("lower min_dim to at most 16384") and "widen" not in msg
    # Sizes of which only the smallest fit: the draws never find them, and the message says why.
    with pytest.raises(SamplingError) as e:
        sample_problems(10, seed=0, sampler="uniform", min_dim=16384, max_dim=30000)
    assert e.value.over_cap_draws == e.value.tries == 1000
    assert "1,000 had an operand over max_operand_elements" in str(e.value)
    assert str(e.value).endswith("of the size ranges' problems 18 fit under it, 999,860,699,420,730 do not; lower "
                                 "min_dim/max_dim: every M, N and K up to 16384 fits (batch 1)")  # fmt: skip


def test_draws_of_a_space_not_counted_stop_after_a_run_without_a_new_problem_only_when_partial():
    # Aligned sizes of 16..16 are all one problem; the alignment classes are not counted, so with
    # partial the draws give up after PATIENCE in a row (before: after 100 * n), and take what they
    # found; without it they go on to 100 * n, as before.
    one = dict(sampler="uniform", ops=("mm",), dtypes=("float32",), layouts=("row/row",), min_dim=16, max_dim=16)
    with pytest.raises(SamplingError) as e:
        sample_problems(1000, seed=0, aligned_fraction=1.0, partial=True, **one)
    assert e.value.patience_ran_out and e.value.tries == PATIENCE + 1 and len(e.value.problems) == 1
    assert e.value.space is None and e.value.repeats == PATIENCE
    assert "drew only 1 distinct problem in 10,001 draws, the last 10,000 all without a new one" in str(e.value)
    with pytest.raises(SamplingError) as e:
        sample_problems(1000, seed=0, aligned_fraction=1.0, **one)
    assert not e.value.patience_ran_out and e.value.tries == 100_000


def test_a_request_that_needs_a_long_run_of_repeats_still_succeeds():
    # Regression (review): near the end of a space that is not counted (the alignment classes),
    # a seed found its last problems after more than PATIENCE repeats in a row, within 100 * n
    # draws; stopping at PATIENCE made those requests fail where they had succeeded.
    space = dict(sampler="uniform", ops=("mm",), dtypes=("float16",), layouts=("row/row",), min_dim=1, max_dim=24)
    got = sample_problems(2198, seed=2, aligned_fraction=5e-5, **space)
    assert len(set(got)) == 2198


def test_a_size_of_one_is_not_counted_two_layouts_give_one_problem():
    # Regression (review): with M, N and K of 1 every layout gives the same strides, so the space
    # of 4 layouts holds 1 problem, not the 4 the count said ("lower -n to at most 4").
    one = dict(sampler="uniform", ops=("mm",), dtypes=("float32",), layouts=LAYOUTS, min_dim=1, max_dim=1)
    assert len(sample_problems(1, seed=0, **one)) == 1
    with pytest.raises(SamplingError) as e:
        sample_problems(4, seed=0, **one)
    assert e.value.space is None and len(e.value.problems) == 1 and "at most 4" not in str(e.value)


def test_log_normal_draws_over_the_cap_get_advice_that_can_help():
    import pickle

    # Regression: when most log-normal draws were over the cap the message said "the space looks
    # exhausted: lower n, or widen the space (ops, dtypes, layouts)": more dtypes or layouts give as
    # many draws over it (the sizes come from the fit), and "lower n" named no n that works.
    kw = dict(seed=0, sampler="log-normal", ops=("bmm",), max_operand_elements=2**16)
    with pytest.raises(SamplingError) as e:
        sample_problems(10, **kw)
    msg = str(e.value)
    assert msg.startswith("n 10: drew only 9 distinct problems in 1,000 draws (991 had an operand over ")
    assert msg.endswith(
        "; the log-normal sampler draws its sizes from its fit to real model GEMMs, whatever the dtypes and "
        "layouts: lower n to at most 7 (the same draws give that many), or pass params with smaller sizes (e.g. "
        "fit_log_normal of smaller shapes), or sample with sampler uniform or pow2, whose sizes min_dim/max_dim "
        "set (every M, N and K up to 256 fits, batch 1)"
    )
    assert "widen" not in msg and "exhausted" not in msg
    # The advice holds: 7 are the first 7 of the same draws, 8 are not found in 800 draws ...
    assert sample_problems(7, **kw) == e.value.problems[:7]
    with pytest.raises(SamplingError) as e8:
        sample_problems(8, **kw)
    assert e8.value.largest_ok == 7
    again = pickle.loads(pickle.dumps(e8.value))  # a worker's error crosses processes
    assert again.largest_ok == 7 and str(again) == str(e8.value)
    # ... and the sizes the other samplers are told to draw fit.
    small = dict(kw, sampler="uniform", min_dim=16, max_dim=256)
    assert len(sample_problems(10, **small)) == len(sample_problems(10, **dict(small, sampler="pow2"))) == 10
    # mm's fit never goes below N 256, K 320 (81,920 elements): no smaller n can help, and the
    # command line (no option for the fit's parameters) is told neither.
    with pytest.raises(SamplingError) as e:
        sample_problems(10, **dict(kw, ops=("mm",)))
    assert e.value.largest_ok == 0 and e.value.over_cap_draws == 1000
    cli = e.value.message({"n": "--num-shapes/-n", "sampler": "--sampler", "min_dim": "--min-dim",
                           "max_dim": "--max-dim", "dtypes": "--dtypes", "layouts": "--layouts", "params": ""})  # fmt: skip
    assert cli.endswith(
        "whatever the --dtypes and --layouts: sample with --sampler uniform or pow2, whose sizes "
        "--min-dim/--max-dim set (every M, N and K up to 256 fits, batch 1)"
    )


@pytest.mark.parametrize(
    ("n", "kw"),
    [
        (10, dict(sampler="log-normal", ops=("bmm",), max_operand_elements=2**16)),
        (200, dict(sampler="uniform", ops=("mm",), dtypes=("float32",), layouts=("row/row",), min_dim=1, max_dim=8,
                   aligned_fraction=0.01, align_to=4, partial=True)),
    ],
)  # fmt: skip
def test_largest_ok_is_the_largest_n_the_same_draws_give(n, kw):
    # A smaller n makes the same draws and stops after 100 * n: largest_ok succeeds, one more fails.
    got = []
    for seed in range(3):
        with pytest.raises(SamplingError) as e:
            sample_problems(n, seed=seed, **kw)
        ok = e.value.largest_ok
        got.append((ok, len(e.value.problems)))
        if ok:
            assert sample_problems(ok, seed=seed, **kw) == e.value.problems[:ok]
        with pytest.raises(SamplingError):
            sample_problems(ok + 1, seed=seed, **kw)
    # the seeds give none, fewer than were found, and all that were found
    assert got in ([(7, 9), (0, 6), (5, 8)], [(144, 145), (144, 145), (145, 145)])


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_an_unused_max_batch_is_checked_like_an_unused_size_range(sampler):
    # max_batch is the uniform/pow2 batch range of bmm/baddbmm; like min_dim/max_dim (unused by
    # log-normal) and align_to (unused without an alignment class) it is checked whether or not it
    # is used, so a bad value is never accepted for one sampler and refused for another.
    for ops in (("mm",), ("bmm",)):
        with pytest.raises(ValueError, match=r"^max_batch: must be a positive integer, got 0$"):
            sample_problems(1, seed=0, sampler=sampler, ops=ops, max_batch=0)
        with pytest.raises(ValueError, match=r"^min_dim/max_dim: need 1 <= min_dim <= max_dim, got 0, 8192$"):
            sample_problems(1, seed=0, sampler=sampler, ops=ops, min_dim=0)


def test_sampling_errors_pickle_and_bad_caps_are_refused():
    import pickle

    with pytest.raises(SamplingError) as e:
        sample_problems(100, seed=0, sampler="pow2", ops=["mm"], dtypes=["float32"], layouts=["row/row"], max_dim=64)
    again = pickle.loads(pickle.dumps(e.value))  # a worker's error crosses processes
    assert str(again) == str(e.value) and again.space == e.value.space == 27
    assert len(sample_problems(5, seed=0, sampler="pow2", max_operand_elements=1e8)) == 5  # a float cap, as before
    with pytest.raises(ValueError, match=r"^max_operand_elements: must be a number >= 1, got 0$"):
        sample_problems(2, seed=0, sampler="pow2", max_operand_elements=0)


def test_exclude_shapes_skips_every_layout_and_tops_up():
    space = dict(sampler="pow2", ops=("bmm",), dtypes=("float32",), layouts=("row/row", "row/col"))
    space |= dict(min_dim=16, max_dim=32)  # 8 sizes x 7 batches x 2 layouts = 112 problems
    drawn = sample_problems(20, seed=4, **space)

    def flipped(p: Problem) -> Problem:
        layout = "row/col" if p.layout_b == "row" else "row/row"
        sa, sb = strides_for(p.op, p.m, p.n, p.k, layout)
        return Problem(op=p.op, m=p.m, n=p.n, k=p.k, batch=p.batch, dtype=p.dtype, stride_a=sa, stride_b=sb)

    train = [flipped(p) for p in drawn[:6]]  # six of the first draws, in the other layout
    taken = {(p.op, p.m, p.n, p.k, p.batch, p.dtype) for p in train}
    got = sample_problems(20, seed=4, exclude_shapes=train, **space)
    assert len(set(got)) == 20 and not taken & {(p.op, p.m, p.n, p.k, p.batch, p.dtype) for p in got}
    assert got == sample_problems(20, seed=4, exclude_shapes=train, **space)  # seeded
    # The same problems as the draws with the training problems excluded, those shapes dropped: more.
    filtered = [p for p in sample_problems(20, seed=4, exclude=train, **space) if p not in set(drawn[:6])]
    assert len(filtered) == 14 and got[:14] == filtered
    # Fewer left than asked: refused at once, or (partial) every one there is drawn first.
    with pytest.raises(SamplingError, match=r"holds only 112 distinct problems, 12 of them excluded .*at most 100"):
        sample_problems(101, seed=4, exclude_shapes=train, **space)
    with pytest.raises(SamplingError) as e:
        sample_problems(101, seed=4, exclude_shapes=train, partial=True, **space)
    assert len(set(e.value.problems)) == 100 and (e.value.space, e.value.excluded) == (112, 12)
    assert e.value.problems[:20] == got
    with pytest.raises(SamplingError) as e:  # more than the space holds at all: refused at once all the same
        sample_problems(113, seed=4, exclude_shapes=train, partial=True, **space)
    assert e.value.problems == []


def test_fitted_parameters_are_what_the_committed_set_gives():
    # FITTED is pasted from `diode shapes --fit data/shapesets/real_models.json`; refit must agree.
    fit = fit_log_normal(load_shapeset(REAL).select(tags=REAL_TAGS))
    assert fit == FITTED


# -- shape sets ----------------------------------------------------------------------------------


ENTRIES = [
    ShapeEntry(
        op="mm",
        m=128,
        n=4096,
        k=4096,
        dtypes=("bfloat16", "float16"),
        layout="row/col",
        source="x q_proj",
        models=("x",),
        tags=("llm",),
        count=2,
    ),
    ShapeEntry(op="addmm", m=7, n=13, k=17, dtypes=("float32",), tags=("awkward", "prime")),
    ShapeEntry(
        op="bmm", m=64, n=64, k=40, batch=16, dtypes=("float16",), stride_a=(40, 640, 1), stride_b=(2560, 1, 64)
    ),
    ShapeEntry(op="baddbmm", m=8, n=8, k=8, batch=2, dtypes=("float32",), layout="col/row"),
]


def test_shapeset_round_trip(tmp_path):
    path = save_shapeset(ENTRIES, tmp_path / "s.json", description="test")
    loaded = load_shapeset(path)
    assert loaded.entries == ENTRIES and loaded.description == "test"
    probs = loaded.problems()
    assert len(probs) == 5
    assert probs[0] == Problem(op="mm", m=128, n=4096, k=4096, dtype="bfloat16", stride_b=(1, 4096))
    assert probs[3].stride_a == (40, 640, 1)
    assert probs[4].stride_a == (64, 1, 8) and probs[4].layout_a == "col"
    assert loaded.problems(dtypes=["float16"]) == [probs[1], probs[3]]
    assert [e.op for e in loaded.select(tags=["prime"])] == ["addmm"]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("not json", "not valid JSON"),
        ('{"format": "other"}', "not a shape set"),
        ('{"format": "torch-diode-shapeset", "version": 9, "entries": []}', "version 9"),
        (
            '{"format": "torch-diode-shapeset", "version": 1, "entries": [{"op": "mm", "m": 1, "n": 2}]}',
            r"entry 0: 1 missing field \['k'\]",
        ),
        (
            '{"format": "torch-diode-shapeset", "version": 1, "entries": [{"op": "conv", "m": 1, "n": 2, "k": 3}]}',
            "entry 0: op: unknown op",
        ),
        (
            '{"format": "torch-diode-shapeset", "version": 1, "entries": [{"op": "mm", "m": 0, "n": 2, "k": 3}]}',
            "entry 0: m: must be a positive",
        ),
        (
            '{"format": "torch-diode-shapeset", "version": 1, "entries": [{"op": "mm", "m": 1, "n": 2, "k": 3, "batch": 4}]}',
            "batch: must be 1",
        ),
        (
            '{"format": "torch-diode-shapeset", "version": 1, "entries": [{"op": "mm", "m": 1, "n": 2, "k": 3, "dtype": "int4"}]}',
            "unknown dtype",
        ),
        (
            '{"format": "torch-diode-shapeset", "version": 1, "entries": [{"op": "mm", "m": 1, "n": 2, "k": 3, "layout": "nt"}]}',
            "layout: must be one of",
        ),
        (
            '{"format": "torch-diode-shapeset", "version": 1, "entries": [{"op": "mm", "m": 1, "n": 2, "k": 3, "spilt": "val"}]}',
            r"1 unknown field \['spilt'\]",
        ),
        (
            '{"format": "torch-diode-shapeset", "version": 1, "entries": [{"op": "mm", "m": 1, "n": 2, "k": 3, "split": "test"}]}',
            "split: must be one of",
        ),
        (
            '{"format": "torch-diode-shapeset", "version": 1, "entries": [{"op": "mm", "m": 1, "n": 2, "k": 3, "stride_a": [1]}]}',
            "stride_a",
        ),
        ('{"format": "torch-diode-shapeset", "version": 1, "entries": {}}', '"entries" must be a list'),
    ],
    ids=[
        "json",
        "format",
        "version",
        "missing",
        "op",
        "size",
        "batch",
        "dtype",
        "layout",
        "typo",
        "split",
        "stride",
        "entries",
    ],
)
def test_shapeset_errors_name_the_problem(tmp_path, text, match):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ShapeSetError, match=match) as info:
        load_shapeset(path)
    assert str(path) in str(info.value)


def test_missing_shapeset_file(tmp_path):
    with pytest.raises(ShapeSetError, match="no such file"):
        load_shapeset(tmp_path / "nope.json")


def test_split_rule_is_a_shape_hash():
    assert (
        split_of("mm", 128, 4096, 4096, 1, "row/col")
        == ShapeEntry(op="mm", m=128, n=4096, k=4096, layout="row/col").split
    )
    # The dtype and the source never change the split, so no shape is in both.
    a = ShapeEntry(op="mm", m=100, n=200, k=300, dtypes=("float16",), source="a")
    b = ShapeEntry(op="mm", m=100, n=200, k=300, dtypes=("float32",), source="b")
    assert a.split == b.split
    share = sum(split_of("mm", m, 64, 64) == "val" for m in range(1, 2001)) / 2000
    assert 0.17 < share < 0.23


def test_merge_entries_unites():
    a = ShapeEntry(op="mm", m=1, n=2, k=3, dtypes=("float16",), models=("a",), tags=("x",))
    b = ShapeEntry(op="mm", m=1, n=2, k=3, dtypes=("bfloat16",), models=("b",), tags=("y",), count=2)
    (m,) = merge_entries([a, b])
    assert m.dtypes == ("float16", "bfloat16") and m.models == ("a", "b") and m.tags == ("x", "y") and m.count == 3


# -- extraction ----------------------------------------------------------------------------------


def test_extract_gemms_of_a_module():
    torch = pytest.importorskip("torch")
    from torch_diode.shapes.extract import calls_to_entries, extract_gemms

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(32, 48)
            self.head = torch.nn.Linear(48, 16, bias=False)

        def forward(self, x):
            h = self.proj(x)  # [B*T, 32] @ W.T -> addmm
            s = h.view(2, 5, 48) @ h.view(2, 5, 48).transpose(1, 2)  # bmm
            return self.head(h), s

    with torch.device("meta"):
        mod = Tiny()
    calls = extract_gemms(mod, torch.empty(10, 32, device="meta"))
    got = [(c.module, c.problem.op, c.problem.m, c.problem.n, c.problem.k, c.problem.batch) for c in calls]
    assert got == [("proj", "addmm", 10, 48, 32, 1), ("", "bmm", 5, 5, 48, 2), ("head", "mm", 10, 16, 48, 1)]
    assert calls[0].problem.stride_b == (1, 32) and calls[0].problem.stride_bias == (0, 1)
    entries = calls_to_entries(calls, model="tiny", tags=["t"], dtypes=["float16"])
    assert [e.layout for e in entries] == ["row/col", "row/col", "row/col"]
    assert entries[0].source == "tiny proj" and entries[1].source == "tiny attention bmm"
    assert all(e.dtypes == ("float16",) for e in entries)


def test_model_entries_of_a_real_config():
    pytest.importorskip("torch")
    from torch_diode.shapes.models import model_entries

    decode = model_entries("Llama-3.1-8B", batch=8, tokens=1, past_len=2047)
    shapes = {(e.op, e.m, e.n, e.k, e.batch) for e in decode}
    assert ("mm", 8, 4096, 4096, 1) in shapes  # q_proj / o_proj
    assert ("mm", 8, 1024, 4096, 1) in shapes  # k_proj / v_proj (8 KV heads x 128)
    assert ("mm", 8, 14336, 4096, 1) in shapes and ("mm", 8, 4096, 14336, 1) in shapes
    assert ("mm", 8, 128256, 4096, 1) in shapes  # lm_head
    assert ("bmm", 1, 2048, 128, 256) in shapes  # scores over the 2048-token cache, 8 x 32 heads
    with pytest.raises(ValueError, match="known: Llama"):
        model_entries("GPT-5")


# -- the committed shape set ---------------------------------------------------------------------


def test_committed_real_models_set():
    s = load_shapeset(REAL)
    assert 300 <= len(s.entries) <= 2000
    ops = collections.Counter(e.op for e in s.entries)
    assert set(ops) == set(OPS)
    models = {m for e in s.entries for m in e.models}
    for name in (
        "Llama-3.2-1B",
        "Llama-3.1-8B",
        "Llama-3.1-70B",
        "Mistral-7B-v0.1",
        "Qwen2.5-7B",
        "BERT-base",
        "BERT-large",
        "ViT-B/16",
        "ViT-L/14",
        "ResNet-50",
        "SD-1.5-UNet",
    ):
        assert name in models, name
    tags = collections.Counter(t for e in s.entries for t in e.tags)
    for tag in ("decode", "prefill", "prime", "unaligned", "tall-skinny", "large-k"):
        assert tags[tag] > 0, tag
    decode_m = {e.m for e in s.entries if "decode" in e.tags and e.op == "mm"}
    assert {1, 2, 4, 8, 16, 32, 64} <= decode_m
    assert any(e.k >= 65536 for e in s.entries) and any(e.m % 16 for e in s.entries)
    # Splits follow the hash rule, both are populated, and no shape is in both.
    assert all(e.split == split_of(e.op, e.m, e.n, e.k, e.batch, e.layout) for e in s.entries)
    train = {e.shape_key for e in s.select(split="train")}
    val = {e.shape_key for e in s.select(split="val")}
    assert train and val and not train & val
    assert 0.1 < len(val) / len(s.entries) < 0.3
    json.loads(REAL.read_text())  # plain JSON


@pytest.mark.slow
def test_committed_set_is_reproducible():
    pytest.importorskip("torch")
    from torch_diode.shapes.catalog import build_real_models

    assert build_real_models() == load_shapeset(REAL).entries


def test_shapes_cli(tmp_path, capsys):
    pytest.importorskip("torch")
    from torch_diode.cli import main

    out = tmp_path / "bert.json"
    assert (
        main(
            [
                "shapes",
                "--model",
                "BERT-base",
                "--batch",
                "2",
                "--tokens",
                "64",
                "--dtypes",
                "float16,float32",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    s = load_shapeset(out)
    assert {(e.op, e.m, e.n, e.k) for e in s.entries} >= {
        ("addmm", 128, 768, 768),
        ("addmm", 128, 3072, 768),
        ("bmm", 64, 64, 64),
    }
    assert all(e.dtypes == ("float16", "float32") for e in s.entries)
    assert main(["shapes", "--model", "nope"]) == 2
    assert "unknown model" in capsys.readouterr().err
    assert main(["shapes", "--fit", str(REAL)]) == 0
    fitted = json.loads(capsys.readouterr().out)
    assert math.isclose(fitted["mm"]["mean"][0], FITTED["mm"].mean[0])


def test_aligned_fraction_gives_two_divisibility_classes():
    """With ``aligned_fraction`` every sampled problem is either aligned (N, K and M > 128 multiples
    of 128) or odd (N, K and M > 1 odd), in about the asked proportion, and seeded."""
    from torch_diode.shapes.sampling import sample_problems

    kw = dict(seed=3, sampler="log-normal", ops=("mm", "bmm"), aligned_fraction=0.7)
    probs = sample_problems(400, **kw)
    assert probs == sample_problems(400, **kw)
    aligned = [p for p in probs if p.n % 128 == 0 and p.k % 128 == 0]
    odd = [p for p in probs if p.n % 2 == 1 and p.k % 2 == 1]
    assert len(aligned) + len(odd) == len(probs)
    assert 0.6 < len(aligned) / len(probs) < 0.8
    assert all(p.m <= 128 or p.m % 128 == 0 for p in aligned)
    assert all(p.m == 1 or p.m % 2 == 1 for p in odd)
    assert any(p.m < 128 for p in aligned)  # decode sizes stay
    with pytest.raises(ValueError, match="aligned_fraction"):
        sample_problems(1, seed=0, aligned_fraction=1.5)
    with pytest.raises(ValueError, match="align_to"):
        sample_problems(1, seed=0, aligned_fraction=0.5, align_to=1)


def test_one_misaligned_problems():
    """With ``one_misaligned`` exactly one operand's rows are not 16-byte aligned, in every dtype:
    that operand's contiguous size is odd, the other's a multiple of 128 (16 when small); A and B
    about equally often; row/col, whose operands' rows are both K long, is refused."""
    from torch_diode.features import operands_aligned16
    from torch_diode.shapes.sampling import sample_problems

    kw = dict(seed=5, sampler="log-normal", ops=("mm", "addmm", "bmm", "baddbmm"), layouts=("row/row", "col/row"))
    probs = sample_problems(300, one_misaligned=True, **kw)
    assert probs == sample_problems(300, one_misaligned=True, **kw)
    assert {p.dtype for p in probs} == {"float16", "bfloat16", "float32"}
    a_bad = [p for p in probs if operands_aligned16(p) == (False, True)]
    b_bad = [p for p in probs if operands_aligned16(p) == (True, False)]
    assert len(a_bad) + len(b_bad) == len(probs)
    assert 0.35 < len(a_bad) / len(probs) < 0.65
    for p in probs:  # the rows' lengths, as operands_aligned16 reads them (M = 1: A is both)
        a_ld, b_ld = (s[-2] if s[-1] == 1 else s[-1] for s in (p.stride_a, p.stride_b))
        bad, good = (a_ld, b_ld) if p in a_bad else (b_ld, a_ld)
        assert bad % 2 == 1
        assert good % 128 == 0 or (good <= 128 and good % 16 == 0)
    with pytest.raises(ValueError, match="row/col"):
        sample_problems(1, seed=0, layouts=("row/row", "row/col"), one_misaligned=True)
    with pytest.raises(ValueError, match="aligned_fraction"):
        sample_problems(1, seed=0, layouts=("row/row",), aligned_fraction=0.5, one_misaligned=True)


def test_output_misaligned_problems():
    """With ``output_misaligned`` both operands' rows are 16-byte aligned and the output's are not,
    in every dtype: N odd or 2 mod 4 (each about half the time), the operands' contiguous sizes
    multiples of 128 (16 when small); layouts with an operand whose rows are N long are refused."""
    from torch_diode.features import operands_aligned16, output_aligned16
    from torch_diode.shapes.sampling import sample_problems

    kw = dict(seed=7, sampler="log-normal", ops=("mm", "addmm", "bmm", "baddbmm"), layouts=("row/col",))
    probs = sample_problems(300, output_misaligned=True, **kw)
    assert probs == sample_problems(300, output_misaligned=True, **kw)
    assert {p.dtype for p in probs} == {"float16", "bfloat16", "float32"}
    assert {p.op for p in probs} == {"mm", "addmm", "bmm", "baddbmm"}
    for p in probs:
        assert operands_aligned16(p) == (True, True) and not output_aligned16(p)
        assert p.k % 128 == 0 or (p.k <= 128 and p.k % 16 == 0)
        assert p.n % 2 == 1 or p.n % 4 == 2
    odd = sum(p.n % 2 for p in probs)
    assert 0.35 < odd / len(probs) < 0.65
    col = sample_problems(50, output_misaligned=True, **{**kw, "layouts": ("col/col",)})
    assert all(operands_aligned16(p) == (True, True) and not output_aligned16(p) for p in col)
    for layouts in (("row/row",), ("col/row", "row/col")):
        with pytest.raises(ValueError, match="N long"):
            sample_problems(1, seed=0, layouts=layouts, output_misaligned=True)
    with pytest.raises(ValueError, match="one_misaligned off"):
        sample_problems(1, seed=0, layouts=("row/col",), one_misaligned=True, output_misaligned=True)
