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
