"""The data-campaign planner: seeded, reproducible, and training/validation never share a shape."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from torch_diode.collect.campaign import CampaignOptions, CampaignPlan, plan_campaign, size_bucket
from torch_diode.features import operands_aligned16, output_aligned16
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
    """data/<KEY>/plan.json is what `scripts/campaign.py plan --train-one-misaligned 200
    --train-output-misaligned 150` writes, and its first lists are the default options' plan, and
    the one-misaligned ones session 40's plan (200), unchanged."""
    default = plan_campaign(CampaignOptions(), SHAPESET)
    s40 = plan_campaign(CampaignOptions(train_one_misaligned=200), SHAPESET)
    plan = plan_campaign(CampaignOptions(train_one_misaligned=200, train_output_misaligned=150), SHAPESET)
    assert plan.train[: len(default.train)] == default.train and plan.val == default.val
    assert plan.train[: len(s40.train)] == s40.train and plan.one_misaligned == s40.one_misaligned
    assert len(plan.train) == len(default.train) + 350
    assert plan.group("first") == default.train
    for key in ("NVIDIA-H100", "NVIDIA-H200"):
        committed = CampaignPlan.load(REPO / "data" / key / "plan.json")
        assert committed.options == plan.options
        assert committed.train == plan.train and committed.val == plan.val


def test_plan_grown_by_one_misaligned_problems() -> None:
    """``train_one_misaligned`` appends problems with exactly one misaligned operand, new shapes
    of the plan's layouts that allow it, and leaves the rest of the plan as it was."""
    base = plan_campaign(SMALL, SHAPESET)
    grown = plan_campaign(CampaignOptions(**{**SMALL.__dict__, "train_one_misaligned": 30}), SHAPESET)
    assert grown.train[: len(base.train)] == base.train and grown.val == base.val
    extra = grown.train[len(base.train) :]
    assert len(extra) == 30
    assert grown.one_misaligned == extra and base.one_misaligned == []
    assert all(sum(operands_aligned16(p)) == 1 for p in extra)
    assert {f"{p.layout_a}/{p.layout_b}" for p in extra} <= {"row/row", "col/row"}
    shapes = [_shape(p) for p in base.train + base.val + extra]
    assert len(set(shapes)) == len(shapes)
    with pytest.raises(ValueError, match="train_one_misaligned: none of the plan's layouts"):
        plan_campaign(CampaignOptions(**{**SMALL.__dict__, "layouts": ("row/col",), "train_one_misaligned": 1}))


def test_plan_grown_by_output_misaligned_problems() -> None:
    """``train_output_misaligned`` appends, after the one-misaligned problems, problems whose
    operands' rows are aligned and whose output's are not, in ``row/col``; the groups split the
    training list in three."""
    one = plan_campaign(CampaignOptions(**{**SMALL.__dict__, "train_one_misaligned": 10}), SHAPESET)
    grown = plan_campaign(
        CampaignOptions(**{**SMALL.__dict__, "train_one_misaligned": 10, "train_output_misaligned": 20}), SHAPESET
    )
    assert grown.train[: len(one.train)] == one.train and grown.val == one.val
    extra = grown.train[len(one.train) :]
    assert len(extra) == 20 and grown.output_misaligned == extra == grown.group("output-misaligned")
    assert grown.one_misaligned == one.one_misaligned == grown.group("one-misaligned")
    assert grown.group("first") + grown.one_misaligned + extra == grown.train
    assert all(operands_aligned16(p) == (True, True) and not output_aligned16(p) for p in extra)
    assert {f"{p.layout_a}/{p.layout_b}" for p in extra} == {"row/col"}
    shapes = [_shape(p) for p in grown.train + grown.val]
    assert len(set(shapes)) == len(shapes)
    with pytest.raises(ValueError, match="plan group 'other'"):
        grown.group("other")
    with pytest.raises(ValueError, match="train_output_misaligned: none of the plan's layouts"):
        plan_campaign(CampaignOptions(**{**SMALL.__dict__, "layouts": ("row/row",), "train_output_misaligned": 1}))


def test_plan_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="train_lognormal"):
        CampaignOptions(train_lognormal=-1)
    with pytest.raises(ValueError, match="train_one_misaligned"):
        CampaignOptions(train_one_misaligned=-2)
    with pytest.raises(ValueError, match="train_output_misaligned"):
        CampaignOptions(train_output_misaligned=True)
    with pytest.raises(ValueError, match="no such file"):
        CampaignPlan.load(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="not a campaign plan"):
        CampaignPlan.load(tmp_path / "x.json")


def test_script_without_a_plan_says_how_to_write_it(tmp_path: Path) -> None:
    # Regression: `scripts/campaign.py status` (run, packs, plot) with no plan.json was a traceback.
    script = [sys.executable, str(REPO / "scripts" / "campaign.py"), "--data-dir", str(tmp_path)]
    (tmp_path / "NVIDIA-H200").mkdir()
    (tmp_path / "NVIDIA-H200" / "plan.json").write_text("{}\n")
    for args, expect in (
        (["status", "--hardware", "NVIDIA-H100"], f"--data-dir {tmp_path} plan --hardware NVIDIA-H100"),
        (["run", "--split", "train", "--hardware", "NVIDIA-H100"], "no plan for NVIDIA-H100; write it first"),
        (["status", "--hardware", "NVIDIA-H200"], "not a campaign plan"),
    ):
        proc = subprocess.run([*script, *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"campaign.py {args[0]}: error: ") and expect in lines[0], lines


def test_plan_is_not_replaced_by_other_lists(tmp_path: Path) -> None:
    """`campaign.py plan` with the defaults wrote a smaller plan over the committed one (1,450
    training problems down to 1,100) without a word; now it refuses, naming the options that make
    the existing plan, and writes it again only with them (or with --replace)."""
    script = [sys.executable, str(REPO / "scripts" / "campaign.py"), "--data-dir", str(tmp_path)]
    (tmp_path / "NVIDIA-H100").mkdir()
    plan = tmp_path / "NVIDIA-H100" / "plan.json"
    committed = (REPO / "data" / "NVIDIA-H100" / "plan.json").read_bytes()
    plan.write_bytes(committed)
    run = lambda *extra: subprocess.run(  # noqa: E731
        [*script, "plan", "--hardware", "NVIDIA-H100", *extra], capture_output=True, text=True, timeout=300
    )
    proc = run()
    assert proc.returncode == 2 and plan.read_bytes() == committed, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "--train-one-misaligned 200 --train-output-misaligned 150" in line and "--replace" in line
    proc = run("--train-one-misaligned", "200", "--train-output-misaligned", "150")
    assert proc.returncode == 0 and plan.read_bytes() == committed, proc.stderr
    assert run("--replace").returncode == 0 and plan.read_bytes() != committed


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


def _dataset_file(path: Path, times: list[float]) -> Path:
    from torch_diode.dataset import Dataset, write_dataset
    from torch_diode.records import Choice, Provenance, TimingRecord

    p = Problem(op="mm", m=64, n=64, k=64)
    recs = [TimingRecord(problem=p, choice=Choice.aten("mm"), time_us=t, hardware="NVIDIA-H200") for t in times]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_dataset(Dataset.from_records(recs, Provenance(hardware="NVIDIA-H200")), path)
    return path


def _pack(src: Path, out: Path, arcroot: str = "data") -> Path:
    import tarfile

    with tarfile.open(out, "w:gz") as tar:
        tar.add(src, arcname=f"{arcroot}/{src.name}")
    return out


def test_unpack_chunk_writes_the_pack_and_removes_settled_sidecars(tmp_path: Path) -> None:
    """What `campaign.py unpack` does with a chunk's $OUT/KEY-data.tgz: `tar x` would leave the
    sidecar the chunk settled and removed; unpacking removes it and keeps the others."""
    from torch_diode.collect.campaign import unpack_chunk
    from torch_diode.dataset import read_dataset

    data = tmp_path / "data"
    _dataset_file(data / "NVIDIA-H200" / "train.msgpack", [1.0])
    stale = _dataset_file(data / "NVIDIA-H200" / "val.msgpack.partial", [2.0])
    chunk = tmp_path / "chunk" / "NVIDIA-H200"
    _dataset_file(chunk / "train.msgpack", [1.0, 3.0])
    _dataset_file(chunk / "train.msgpack.partial", [4.0])
    (chunk / "logs").mkdir()
    (chunk / "logs" / "train-literal-s1.log").write_text("log\n")
    written, removed = unpack_chunk(_pack(chunk, tmp_path / "NVIDIA-H200-data.tgz"), data, "NVIDIA-H200")
    assert removed == [stale] and not stale.exists()
    assert sorted(p.relative_to(data).as_posix() for p in written) == [
        "NVIDIA-H200/logs/train-literal-s1.log",
        "NVIDIA-H200/train.msgpack",
        "NVIDIA-H200/train.msgpack.partial",
    ]
    assert sorted(read_dataset(data / "NVIDIA-H200" / "train.msgpack").time_us.tolist()) == [1.0, 3.0]
    assert (data / "NVIDIA-H200" / "train.msgpack.partial").is_file()
    assert not list(data.glob(".unpack-*")), "the staging directory is removed"


def test_unpack_chunk_refuses_a_bad_pack_and_writes_nothing(tmp_path: Path) -> None:
    from torch_diode.collect.campaign import unpack_chunk

    data = tmp_path / "data"
    train = _dataset_file(data / "NVIDIA-H200" / "train.msgpack", [1.0])
    stale = _dataset_file(data / "NVIDIA-H200" / "val.msgpack.partial", [2.0])
    before = train.read_bytes()
    # a truncated dataset in the pack
    chunk = tmp_path / "chunk" / "NVIDIA-H200"
    cut = _dataset_file(chunk / "train.msgpack", [1.0, 3.0, 5.0])
    cut.write_bytes(cut.read_bytes()[:-7])
    with pytest.raises(ValueError, match=r"train.msgpack is not a complete dataset .*nothing was copied"):
        unpack_chunk(_pack(chunk, tmp_path / "a.tgz"), data, "NVIDIA-H200")
    # another GPU's pack
    other = tmp_path / "other" / "NVIDIA-H100"
    _dataset_file(other / "train.msgpack", [1.0])
    with pytest.raises(
        ValueError, match=r"member 'data/NVIDIA-H100' is not a file or directory under data/NVIDIA-H200/"
    ):
        unpack_chunk(_pack(other, tmp_path / "b.tgz"), data, "NVIDIA-H200")
    # another GPU's timings under this GPU's directory
    from torch_diode.dataset import Dataset, write_dataset
    from torch_diode.records import Choice, Provenance, TimingRecord

    foreign = tmp_path / "foreign" / "NVIDIA-H200"
    foreign.mkdir(parents=True)
    rec = TimingRecord(
        problem=Problem(op="mm", m=8, n=8, k=8), choice=Choice.aten("mm"), time_us=1.0, hardware="NVIDIA-H100"
    )
    write_dataset(Dataset.from_records([rec], Provenance(hardware="NVIDIA-H100")), foreign / "val.msgpack")
    with pytest.raises(ValueError, match=r"val.msgpack holds timings of NVIDIA-H100, not only NVIDIA-H200's"):
        unpack_chunk(_pack(foreign, tmp_path / "d.tgz"), data, "NVIDIA-H200")
    # not a tar archive
    (tmp_path / "c.tgz").write_bytes(b"not a tar")
    with pytest.raises(
        ValueError,
        match=r"c.tgz: not a campaign pack: not a tar archive \(plain, gzip, bzip2 or xz\); pass the chunk's pack",
    ):
        unpack_chunk(tmp_path / "c.tgz", data, "NVIDIA-H200")
    assert train.read_bytes() == before and stale.exists()
    assert not list(data.glob(".unpack-*"))
