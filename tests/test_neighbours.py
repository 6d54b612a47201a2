"""The neighbour memory: distances, the blend (hand-computed), model files with a memory, training."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from test_model import CHOICES, H100, PROBLEM, _rewrite, make_model

from torch_diode.dataset import read_dataset, write_dataset
from torch_diode.errors import ModelFormatError
from torch_diode.features import featurize_split, featurize_split_indexed, gpu_constants
from torch_diode.model import load_model, save_model
from torch_diode.neighbours import CAP, PROBLEM_COLUMNS, NeighbourMemory, NeighbourOptions, problem_row, signatures
from torch_diode.records import Choice, Problem
from torch_diode.train import TrainOptions, train, training_memory

GPU = gpu_constants(H100)
REAL = Path(__file__).resolve().parents[1] / "data" / "NVIDIA-H200" / "train.msgpack"
FAST = dict(
    ensemble_size=2,
    batch_size=4,
    max_choices_per_problem=64,
    num_epochs=4,
    progress=False,
    num_threads=1,
    forest_trees=8,
)


def _memory(problems: list[Problem], rel: list[dict[int, float]], **opts: float) -> NeighbourMemory:
    """A memory over ``CHOICES``: ``rel[p]`` maps a choice's index to its relative log time."""
    _, rest = featurize_split(PROBLEM, CHOICES, GPU)
    table = np.full((len(problems), len(CHOICES)), np.nan, np.float32)
    for p, r in enumerate(rel):
        for j, v in r.items():
            table[p, j] = v
    rows = np.array([problem_row(p) for p in problems], np.float32)
    return NeighbourMemory(rows, signatures(PROBLEM, rest), table, NeighbourOptions(**opts))


def test_distance_penalties_and_weights() -> None:
    base = Problem(op="mm", m=1024, n=1024, k=1024, dtype="float16")
    others = [
        base,
        Problem(op="mm", m=2048, n=1024, k=1024, dtype="float16"),  # log2 M one apart: d2 = 1
        Problem(op="mm", m=1024, n=1024, k=1024, dtype="bfloat16"),  # fp16 vs bf16: 1
        Problem(op="mm", m=1024, n=1024, k=1024, dtype="float32"),  # fp32 vs fp16: 4
        Problem(op="mm", m=1024, n=1024, k=1024, dtype="float16", stride_b=(1, 1024)),  # B column-major: 0.5
        Problem(op="addmm", m=1024, n=1024, k=1024, dtype="float16", stride_bias=(0, 1)),  # bias: 0.3
        Problem(op="bmm", m=1024, n=1024, k=1024, batch=4, dtype="float16"),  # batched 0.3 + log2 4 = 2 -> 4.3
        # A's rows 1,026 fp16 elements apart (2,052 bytes, not a multiple of 16): alignment 4
        Problem(op="mm", m=1024, n=1024, k=1024, dtype="float16", stride_a=(1026, 1)),
        # both operands' rows misaligned: 8
        Problem(op="mm", m=1024, n=1024, k=1024, dtype="float16", stride_a=(1026, 1), stride_b=(1028, 1)),
        # B's rows 1,032 elements apart (2,064 bytes = 129 x 16): aligned, 0
        Problem(op="mm", m=1024, n=1024, k=1024, dtype="float16", stride_b=(1032, 1)),
        # the output's rows 1,025 elements long (B column-major, its rows K long: aligned): 4
        Problem(op="mm", m=1024, n=1025, k=1024, dtype="float16", stride_b=(1, 1024)),
    ]
    mem = _memory(others, [{}] * len(others), k=len(others), bandwidth=2.0)
    nb, w = mem.neighbours(base)
    d2 = dict(zip(nb.tolist(), (-np.log(w) * 4.0).tolist()))
    want = [0, 1, 1, 4, 0.5, 0.3, 4.3, 4, 8, 0, 0.5 + math.log2(1025 / 1024) ** 2 + 4]
    np.testing.assert_allclose([d2[i] for i in range(len(others))], want, atol=1e-5)
    # the weight per misaligned operand is an option; 0 ignores alignment (as before session 37)
    for weight in (0.0, 1.5):
        nb, w = _memory(others, [{}] * len(others), k=len(others), bandwidth=2.0, alignment_weight=weight).neighbours(
            base
        )
        d2 = dict(zip(nb.tolist(), (-np.log(w) * 4.0).tolist()))
        np.testing.assert_allclose(
            [d2[i] for i in range(len(others))], [*want[:7], weight, 2 * weight, 0, want[10] - 4 + weight], atol=1e-5
        )
    # only the k nearest vote
    nb3, _ = _memory(others, [{}] * len(others), k=3).neighbours(base)
    assert sorted(nb3.tolist()) == [0, 5, 9]  # d2 0, 0.3, 0


def test_blend_by_hand() -> None:
    # Two training problems: the query itself (d = 0, w = 1) and one 1 apart in log2 M
    # (d2 = 1, w = exp(-1/4) with bandwidth 2). Choice 0 measured by both, 1 by the first only,
    # 2 by the second only with a vote above the cap; the rest by none.
    far = Problem(op="mm", m=2000, n=2048, k=512, dtype="bfloat16")
    mem = _memory([PROBLEM, far], [{0: 0.5, 1: 0.0}, {0: 0.2, 2: 7.0}], k=2, bandwidth=2.0, prior_weight=0.5)
    _, rest = featurize_split(PROBLEM, CHOICES, GPU)
    log_t = np.linspace(2.0, 3.0, len(CHOICES)).astype(np.float32)  # the network's: min 2.0
    out = mem.blend(PROBLEM, rest, log_t)
    w2 = math.exp(-(math.log2(2000 / 1000) ** 2) / 4.0)
    mlp = log_t - 2.0
    want = mlp.astype(np.float64).copy()  # no votes: the network's relative time
    want[0] = (1.0 * 0.5 + w2 * 0.2 + 0.5 * mlp[0]) / (1.0 + w2 + 0.5)
    want[1] = (1.0 * 0.0 + 0.5 * mlp[1]) / (1.0 + 0.5)
    want[2] = (w2 * CAP + 0.5 * mlp[2]) / (w2 + 0.5)  # 7.0 is capped
    np.testing.assert_allclose(out, want + 2.0, rtol=1e-6, atol=1e-6)
    # looked up through the choice table (once per choice, then cached): the same columns and blend
    _, rest_i, index = featurize_split_indexed(PROBLEM, CHOICES, GPU)
    for _ in range(2):
        assert mem.columns_indexed(PROBLEM, rest_i, index).tolist() == mem.columns(PROBLEM, rest).tolist()
        np.testing.assert_array_equal(mem.blend(PROBLEM, rest_i, log_t, index), out)
    # a configuration no training problem measured maps to no column; k = 0 or no rows: unchanged
    odd = Choice(template="triton::mm", block_m=16, block_n=16, block_k=16, group_m=8, num_stages=1, num_warps=1)
    _, rest_odd = featurize_split(PROBLEM, [odd], GPU)
    assert mem.columns(PROBLEM, rest_odd).tolist() == [-1]
    assert mem.columns(PROBLEM, rest).tolist()[:3] == [0, 1, 2]
    # ATen is matched by op: a bmm problem's aten::bmm gets no vote from mm problems' aten::mm,
    # while the same Triton tile (a bmm template) does
    bmm = Problem(op="bmm", m=1000, n=2048, k=512, batch=2, dtype="bfloat16")
    bmm_choices = [Choice.aten("bmm"), dataclasses.replace(CHOICES[0], template="triton::bmm")]
    _, rest_bmm = featurize_split(bmm, bmm_choices, GPU)
    assert mem.columns(bmm, rest_bmm).tolist() == [-1, 0]
    _, rest_bmm, index_bmm = featurize_split_indexed(bmm, bmm_choices, GPU)
    assert mem.columns_indexed(bmm, rest_bmm, index_bmm).tolist() == [-1, 0]
    assert mem.columns(PROBLEM, featurize_split(PROBLEM, [Choice.aten("mm")], GPU)[1]).tolist() == [len(CHOICES) - 1]
    off = NeighbourMemory(mem.problems, mem.configs, mem.rel, NeighbourOptions(k=0))
    assert off.blend(PROBLEM, rest, log_t) is log_t


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"k": -1}, "neighbours"),
        ({"bandwidth": 0.0}, "bandwidth"),
        ({"prior_weight": float("nan")}, "prior_weight"),
        ({"alignment_weight": -1.0}, "alignment_weight"),
    ],
)
def test_options_are_validated(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        NeighbourOptions(**kwargs)
    with pytest.raises(ValueError, match=match):
        TrainOptions(
            **{
                {
                    "k": "neighbours",
                    "bandwidth": "neighbour_bandwidth",
                    "prior_weight": "neighbour_prior",
                    "alignment_weight": "neighbour_alignment",
                }[k]: v
                for k, v in kwargs.items()
            }
        )


def test_memory_of_real_timings_recovers_their_order() -> None:
    # A memory built from real H200 problems, queried with one of them and a near-zero prior
    # weight: the blended order of that problem's measured choices is the measured order (the
    # signature maps every real choice, ATen included, to its own column).
    real = read_dataset(REAL)
    groups = real.by_problem()[:5]
    sub = real.select_problems(g.problem for g in groups)
    per_problem = []  # its measured choices' features and log median times, as the trainer gives them
    for pt in sub.by_problem():
        med = pt.median_by_choice()
        _, rest = featurize_split(pt.problem, [sub.choices[i] for i in med], gpu_constants("NVIDIA-H200"))
        per_problem.append((pt.problem, rest, np.log(np.array(list(med.values()), dtype=np.float64))))
    mem = NeighbourMemory.from_measurements(per_problem, NeighbourOptions(k=1, prior_weight=1e-6))
    assert mem.rel.shape[0] == 5 and (np.nanmin(mem.rel, axis=1) == 0).all()
    g = groups[3]
    med = g.median_by_choice()
    choices = [real.choices[i] for i in med]
    assert any(c.is_aten for c in choices)
    _, rest = featurize_split(g.problem, choices, gpu_constants("NVIDIA-H200"))
    assert (mem.columns(g.problem, rest) >= 0).all()
    flat = np.zeros(len(choices), np.float32)
    out = mem.blend(g.problem, rest, flat)
    measured = np.log(np.array(list(med.values())))
    np.testing.assert_allclose(out, np.minimum(measured - measured.min(), CAP), atol=1e-4)


def _with_memory():
    m = make_model()
    m.memory = _memory([PROBLEM], [{0: 0.0, 3: 0.4, len(CHOICES) - 1: 0.1}], k=4)
    return m


def test_model_file_round_trip_with_memory(tmp_path: Path) -> None:
    m = _with_memory()
    before = m.predict(PROBLEM, CHOICES)
    path = save_model(m, tmp_path / "m.safetensors")
    loaded = load_model(path)
    assert loaded.memory is not None and loaded.metadata["neighbour_memory"]["problems"] == 1
    np.testing.assert_array_equal(loaded.memory.rel, m.memory.rel)
    after = loaded.predict(PROBLEM, CHOICES)
    assert np.array_equal(before.log_time_us, after.log_time_us) and np.array_equal(before.std, after.std)
    assert save_model(loaded, tmp_path / "again.safetensors").read_bytes() == path.read_bytes()
    # the memory changed the network's prediction
    loaded.memory = None
    assert not np.array_equal(loaded.predict(PROBLEM, CHOICES).log_time_us, before.log_time_us)


def test_version_1_files_without_memory_still_load(tmp_path: Path) -> None:
    src = save_model(make_model(), tmp_path / "m.safetensors")
    v1 = _rewrite(src, tmp_path / "v1.safetensors", meta={"format_version": "1"})
    assert load_model(v1).memory is None


def _without_alignment(src: Path, dst: Path) -> tuple[Path, dict]:
    """``src`` rewritten as a file of before session 37: its memory's problem table without the
    alignment columns and its metadata without ``alignment_weight``; the file and that metadata."""
    loaded = load_model(src)
    meta = dict(loaded.metadata["neighbour_memory"])
    meta.pop("alignment_weight")
    meta["problem_columns"] = meta["problem_columns"][:9]
    table = torch.from_numpy(loaded.memory.problems[:, :9].copy())
    return _rewrite(src, dst, meta={"neighbour_memory": meta}, tensors={"memory.problems": table}), meta


def test_memories_without_alignment_columns_still_load(tmp_path: Path) -> None:
    # Files written before session 37 keep a 9-column problem table and no alignment_weight: they
    # load with the alignment term off, rank as such a memory always did, and save to the same bytes.
    aligned = Problem(op="mm", m=1024, n=1024, k=1024, dtype="float16")
    misaligned = Problem(op="mm", m=1024, n=1024, k=1024, dtype="float16", stride_a=(1026, 1))
    m = make_model()
    m.memory = _memory([aligned, misaligned], [{0: 0.0, 1: 2.0}, {0: 2.0, 1: 0.0}], k=2)
    src = save_model(m, tmp_path / "src.safetensors")
    old, meta = _without_alignment(src, tmp_path / "old.safetensors")
    loaded = load_model(old)
    assert not loaded.memory.aligned and loaded.memory.options.alignment_weight == 0.0
    assert loaded.memory.problems.shape == (2, 9)
    loaded.memory = loaded.memory  # forget the file's bytes: serialise the loaded memory again
    assert save_model(loaded, tmp_path / "again.safetensors").read_bytes() == old.read_bytes()
    # it ranks as the same memory with alignment ignored, and the alignment term changes the ranking
    off = NeighbourMemory(m.memory.problems, m.memory.configs, m.memory.rel, NeighbourOptions(k=2, alignment_weight=0))
    _, rest = featurize_split(misaligned, CHOICES, GPU)
    log_t = np.zeros(len(CHOICES), np.float32)
    np.testing.assert_array_equal(loaded.memory.blend(misaligned, rest, log_t), off.blend(misaligned, rest, log_t))
    assert not np.array_equal(m.memory.blend(misaligned, rest, log_t), off.blend(misaligned, rest, log_t))
    # an alignment_weight without the columns, or the columns without one: refused
    for name, change in (
        ("weight-no-columns", {"neighbour_memory": {**meta, "alignment_weight": 4.0}}),
        ("columns-no-weight", {"neighbour_memory": {**meta, "problem_columns": list(PROBLEM_COLUMNS)}}),
    ):
        tensors = None if name == "weight-no-columns" else {"memory.problems": torch.from_numpy(m.memory.problems)}
        bad = _rewrite(src if tensors else old, tmp_path / f"{name}.safetensors", meta=change, tensors=tensors)
        with pytest.raises(ModelFormatError, match="alignment_weight"):
            load_model(bad)


def _memory_file(tmp_path: Path, name: str, *, meta: dict | None = None, tensors: dict | None = None) -> Path:
    src = save_model(_with_memory(), tmp_path / "src.safetensors")
    return _rewrite(src, tmp_path / name, meta=meta, tensors=tensors)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"tensors": {"memory.rel_flat": torch.tensor([0, 3, 10_000], dtype=torch.int32)}}, "out of range"),
        ({"tensors": {"memory.rel_flat": torch.tensor([0, 3, 3], dtype=torch.int32)}}, "an index twice"),
        ({"tensors": {"memory.rel_value": torch.tensor([0.0, -0.4, 0.1])}}, "negative"),
        ({"tensors": {"memory.rel_flat": torch.tensor([0.0, 3.0, 16.0])}}, "not int32"),
        ({"tensors": {"memory.configs": None}}, "malformed"),
        ({"tensors": {"memory.extra": torch.zeros(2)}}, r"\['memory.extra'\] missing or unexpected"),
        ({"meta": {"neighbour_memory": None}}, "malformed"),
        (
            {
                "meta": {
                    "neighbour_memory": {
                        "k": 8,
                        "bandwidth": 3.0,
                        "prior_weight": 1.0,
                        "cap": 3.0,
                        "problems": 1,
                        "configs": 33,
                        "signature": ["x"],
                        "problem_columns": [],
                    }
                }
            },
            "signature",
        ),
    ],
    ids=[
        "index-out-of-range",
        "index-twice",
        "negative-rel",
        "float-index",
        "missing-tensor",
        "extra-tensor",
        "missing-metadata",
        "other-signature",
    ],
)
def test_a_corrupt_memory_is_refused(tmp_path: Path, change: dict, match: str) -> None:
    bad = _memory_file(tmp_path, "bad.safetensors", **change)
    with pytest.raises(ModelFormatError, match=match):
        load_model(bad)


def test_training_saves_a_memory_of_every_problem(tmp_path: Path) -> None:
    real = read_dataset(REAL)
    sub = real.select_problems(g.problem for g in real.by_problem()[:12])
    model, report = train(sub, TrainOptions(seed=3, **FAST))
    assert report.val_problems >= 1 and model.memory is not None
    assert model.memory.rel.shape[0] == 12  # the shipped memory adds the held-out split's problems
    assert model.metadata["training"]["options"]["neighbours"] == 8
    plain, _ = train(sub, TrainOptions(seed=3, neighbours=0, **FAST))
    assert plain.memory is None
    # the same network either way: the memory only blends the predictions
    g = real.by_problem()[0]
    choices = [real.choices[i] for i in g.median_by_choice()]
    plain.memory = model.memory
    np.testing.assert_array_equal(
        plain.predict(g.problem, choices).log_time_us, model.predict(g.problem, choices).log_time_us
    )
    loaded = load_model(save_model(model, tmp_path / "m.safetensors"))
    assert loaded.memory is not None and loaded.memory.rel.shape == model.memory.rel.shape
    # training_memory builds the same memory without training (scripts/rebuild_memory.py uses it)
    again = training_memory(sub, TrainOptions(seed=3, **FAST))
    assert again is not None and again.aligned and again.options == model.memory.options
    for name in ("problems", "configs", "rel"):
        np.testing.assert_array_equal(getattr(again, name), getattr(model.memory, name))
    assert training_memory(sub, TrainOptions(seed=3, neighbours=0, **FAST)) is None


def _run_rebuild(*args: str) -> subprocess.CompletedProcess:
    script = Path(__file__).resolve().parents[1] / "scripts" / "rebuild_memory.py"
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=600)


def test_rebuild_memory_gives_an_old_file_the_alignment_columns(tmp_path: Path) -> None:
    # A file whose memory has no alignment columns (as written before session 37), trained on a
    # real slice: the script rebuilds its memory from that slice, keeps every other tensor, and
    # measures the held-out metrics again; wrong data or an in-place output is refused.
    real = read_dataset(REAL)
    groups = real.by_problem()
    sub = real.select_problems(g.problem for g in groups[:12])
    held = real.select_problems(g.problem for g in groups[12:15])
    write_dataset(sub, tmp_path / "train.msgpack")
    write_dataset(held, tmp_path / "val.msgpack")
    write_dataset(real.select_problems(g.problem for g in groups[:11]), tmp_path / "other.msgpack")
    model, _ = train(sub, TrainOptions(seed=3, **FAST))
    src = save_model(model, tmp_path / "new.safetensors")
    old, _ = _without_alignment(src, tmp_path / "old.safetensors")
    assert not load_model(old).memory.aligned
    out = tmp_path / "rebuilt.safetensors"
    common = ["--held-out", str(tmp_path / "val.msgpack"), "--output", str(out)]
    bad = _run_rebuild("--model", str(old), "--dataset", str(tmp_path / "other.msgpack"), *common)
    assert bad.returncode == 2 and "not the data" in bad.stderr and not out.exists()
    same = _run_rebuild(
        "--model",
        str(old),
        "--dataset",
        str(tmp_path / "train.msgpack"),
        "--held-out",
        str(tmp_path / "val.msgpack"),
        "--output",
        str(old),
    )
    assert same.returncode == 2 and "--output must be a new file" in same.stderr
    done = _run_rebuild("--model", str(old), "--dataset", str(tmp_path / "train.msgpack"), *common)
    assert done.returncode == 0, done.stderr
    rebuilt = load_model(out)
    assert rebuilt.memory.aligned and rebuilt.memory.options.alignment_weight == 4.0
    for name in ("problems", "configs", "rel"):  # what training writes today
        np.testing.assert_array_equal(getattr(rebuilt.memory, name), getattr(model.memory, name))
    oldm = load_model(old)
    for a, b in zip(oldm.net.state_dict().values(), rebuilt.net.state_dict().values()):
        assert torch.equal(a, b)
    for part in ("aten_head", "forest"):
        for k, v in getattr(oldm, part).to_tensors().items():
            np.testing.assert_array_equal(v, getattr(rebuilt, part).to_tensors()[k])
    info = rebuilt.metadata["training"]["memory_rebuilt"]
    assert info["from_model_sha256"] == oldm.model_hash and info["alignment_weight"] == 4.0
    assert rebuilt.metadata["held_out_metrics"]["overall"]["problems"] == 3
    assert "rebuilt" in rebuilt.metadata["training"]["held_out_metrics_are_from"]
    # the rebuilt file ranks as the trained one (the same network, head, forest and memory)
    g = groups[13]
    choices = [real.choices[i] for i in g.median_by_choice()]
    np.testing.assert_array_equal(
        rebuilt.predict(g.problem, choices).log_time_us, model.predict(g.problem, choices).log_time_us
    )
