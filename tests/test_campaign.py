"""The data-campaign planner: seeded, reproducible, and training/validation never share a shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from torch_diode.collect.campaign import CampaignOptions, CampaignPlan, plan_campaign, size_bucket
from torch_diode.records import Problem

REPO = Path(__file__).resolve().parents[1]
SHAPESET = REPO / "data" / "shapesets" / "real_models.json"
SMALL = CampaignOptions(train_lognormal=60, train_shapeset=40, val_lognormal=10, val_shapeset=15, seed=7)


def _shape(p: Problem) -> tuple:
    return (p.op, p.m, p.n, p.k, p.batch, p.dtype)


def test_plan_is_reproducible_and_disjoint(tmp_path: Path) -> None:
    a = plan_campaign(SMALL, SHAPESET)
    b = plan_campaign(SMALL, SHAPESET)
    assert a.train == b.train and a.val == b.val
    assert len(a.train) == 100 and len(a.val) == 25
    assert not {_shape(p) for p in a.train} & {_shape(p) for p in a.val}
    other = plan_campaign(CampaignOptions(**{**SMALL.__dict__, "seed": 8}), SHAPESET)
    assert other.train != a.train
    path = a.save(tmp_path / "plan.json")
    back = CampaignPlan.load(path)
    assert back.train == a.train and back.val == a.val and back.options == a.options


def test_committed_plans_match_the_planner() -> None:
    """data/<KEY>/plan.json is what `scripts/campaign.py plan` writes with the default options."""
    plan = plan_campaign(CampaignOptions(), SHAPESET)
    for key in ("NVIDIA-H100", "NVIDIA-H200"):
        committed = CampaignPlan.load(REPO / "data" / key / "plan.json")
        assert committed.train == plan.train and committed.val == plan.val


def test_plan_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="train_lognormal"):
        CampaignOptions(train_lognormal=-1)
    with pytest.raises(ValueError, match="no such file"):
        CampaignPlan.load(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="not a campaign plan"):
        CampaignPlan.load(tmp_path / "x.json")


def test_size_buckets() -> None:
    assert size_bucket(Problem(op="mm", m=16, n=4096, k=4096)) == "decode (M<=64)"
    assert size_bucket(Problem(op="mm", m=8192, n=256, k=512)) == "tall-skinny"
    assert size_bucket(Problem(op="mm", m=1024, n=1024, k=16384)) == "large-K"
    assert size_bucket(Problem(op="mm", m=1000, n=1024, k=1024)) == "odd (not multiple of 16)"
    assert size_bucket(Problem(op="mm", m=8192, n=8192, k=8192)) == "large"


def test_stock_picks_from_the_full_space(fake_cuda) -> None:
    """Stock max-autotune's pick of a validation problem is the fastest of Inductor's DEFAULT
    candidates in the full-space timings; a problem missing a DEFAULT candidate gets no pick."""
    import numpy as np

    from torch_diode.collect.campaign import stock_picks_from_full_space
    from torch_diode.collect.sweep import inductor_choices
    from torch_diode.dataset import read_dataset

    path = REPO / "data" / "NVIDIA-H200" / "val.msgpack"
    ds = read_dataset(path).select_problems(read_dataset(path).problems[:4])
    picks, notes = stock_picks_from_full_space(ds)
    assert not notes and set(picks) == set(ds.problems)
    for pt in ds.by_problem():
        med = {ds.choices[c]: t for c, t in pt.median_by_choice().items()}
        default = {it.choice for it in inductor_choices(pt.problem, "DEFAULT")}
        pick = picks[pt.problem]
        assert pick.choice in default and pick.time_us == med[pick.choice]
        assert pick.time_us == min(t for c, t in med.items() if c in default)
        assert pick.time_us >= min(med.values())
    # drop the stock winner's records of the first problem: the space is no longer full there
    first = ds.by_problem()[0].problem
    gone = ds.choices.index(picks[first].choice)
    keep = ~((ds.problem_idx == ds.problems.index(first)) & (ds.choice_idx == gone))
    cut = type(ds)(
        sources=ds.sources,
        problems=ds.problems,
        choices=ds.choices,
        problem_idx=ds.problem_idx[keep],
        choice_idx=ds.choice_idx[keep],
        time_us=ds.time_us[keep],
        source_idx=ds.source_idx[keep],
        failures=ds.failures,
    )
    picks2, notes2 = stock_picks_from_full_space(cut)
    assert first not in picks2 and len(picks2) == len(picks) - 1
    assert len(notes2) == 1 and first.key() in notes2[0] and "not measured" in notes2[0]
    assert np.isfinite([p.time_us for p in picks2.values()]).all()
