"""The Inductor collector on a CUDA GPU (skipped without one; run through scripts/run_gpu_tests.sh).

Every op (mm, addmm, bmm, baddbmm, and mm/addmm through F.linear), every dtype, transposed and
padded operands: the records must hold ATen plus Triton configs, for the very problem asked.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch_diode.collect import CollectOptions, collect  # noqa: E402
from torch_diode.collect.inductor import InductorCollector  # noqa: E402
from torch_diode.dataset import read_dataset  # noqa: E402
from torch_diode.records import Problem  # noqa: E402
from torch_diode.shapes.shapeset import strides_for  # noqa: E402

pytestmark = pytest.mark.gpu

# Keep compiles short: Triton and ATen only (no CUTLASS probing).
FAST = {"max_autotune_gemm_backends": "ATEN,TRITON"}


def problem(
    op: str, dtype: str, layout: str = "row/row", m: int = 256, n: int = 384, k: int = 512, batch: int = 4
) -> Problem:
    b = batch if op in ("bmm", "baddbmm") else 1
    sa, sb = strides_for(op, m, n, k, layout)
    return Problem(op=op, m=m, n=n, k=k, batch=b, dtype=dtype, stride_a=sa, stride_b=sb)


CASES = [problem(op, dt) for op in ("mm", "addmm", "bmm", "baddbmm") for dt in ("float16", "bfloat16", "float32")]
CASES += [
    problem("mm", "float16", "row/col"),
    problem("mm", "bfloat16", "col/row"),
    problem("bmm", "float16", "row/col"),
    problem("addmm", "float32", "col/col"),
    problem("mm", "bfloat16", m=1000, n=1500, k=300),  # not multiples of 16
    Problem(op="mm", m=256, n=384, k=512, dtype="float16", stride_a=(520, 1)),  # padded rows
]


@pytest.fixture(scope="module")
def collector():
    from torch_diode.hardware import detect

    key = detect().key or "custom-gpu"
    with InductorCollector(hardware=key, config_overrides=FAST) as c:
        yield c


def _check(records, failures, p):
    assert records, failures
    assert all(r.problem == p for r in records)  # Inductor saw exactly the requested problem
    templates = {r.choice.template for r in records}
    assert any(t.startswith("aten::") for t in templates), templates
    triton = [r for r in records if r.choice.is_triton]
    assert triton, templates
    assert all(r.choice.block_m and r.choice.num_warps for r in triton)
    assert all(r.time_us > 0 for r in records)
    assert not [f for f in failures if f.choice is None]


@pytest.mark.parametrize("p", CASES, ids=lambda p: p.key() + (" padded" if p.stride_a[-2:] == (520, 1) else ""))
def test_every_op_dtype_and_layout(collector, p):
    records, failures = collector.measure(p)
    _check(records, failures, p)


@pytest.mark.parametrize("op", ["mm", "addmm"])
def test_through_linear(op):
    from torch_diode.hardware import detect

    p = problem(op, "bfloat16", "row/col")  # F.linear(x, W): B = W.T is column-major
    with InductorCollector(hardware=detect().key or "custom-gpu", via_linear=True, config_overrides=FAST) as c:
        records, failures = c.measure(p)
    _check(records, failures, p)


def test_exhaustive_space_is_wider():
    from torch_diode.hardware import detect

    p = problem("mm", "float16")
    counts = {}
    for space in ("DEFAULT", "EXHAUSTIVE"):
        with InductorCollector(
            hardware=detect().key or "custom-gpu",
            search_space=space,
            config_overrides={**FAST, "test_configs.max_mm_configs": 60},
        ) as c:
            records, _ = c.measure(p)
        counts[space] = sum(r.choice.is_triton for r in records)
    assert counts["EXHAUSTIVE"] > counts["DEFAULT"], counts


def test_collect_cli_resumes(run_diode, tmp_path):
    out = tmp_path / "gpu.msgpack"
    args = [
        "collect",
        "--output",
        str(out),
        "-n",
        "2",
        "--seed",
        "0",
        "--log-normal",
        "--ops",
        "mm,bmm",
        "--dtypes",
        "bfloat16",
        "--no-progress",
    ]
    first = run_diode(*args, check=True)
    ds = read_dataset(out)
    assert len(ds.problems) >= 1 and len(ds) > 2, first.stdout
    assert ds.sources[0].gpu_name and ds.sources[0].triton_version
    again = run_diode(*args, check=True)
    assert "2 already done" in again.stdout or "already done" in again.stdout
    assert len(read_dataset(out)) == len(ds)


@pytest.mark.multi_gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_two_gpus_shard_and_merge(tmp_path):
    out = tmp_path / "two.msgpack"
    problems = [problem("mm", "float16", m=m) for m in (128, 256, 384, 512)]
    summary = collect(problems, CollectOptions(workers=2, progress=False), out)
    assert summary.problems_measured == 4
    assert set(read_dataset(out).problems) == set(problems)
    assert not any(s.exists() for s in summary.shards)


def test_another_gpus_key_is_refused(tmp_path, monkeypatch):
    """A dataset holds one GPU's timings: asking to record this GPU's as another known GPU's fails
    before anything is written (session 23's device calls came on the other GPU kind)."""
    from torch_diode.errors import CollectionError
    from torch_diode.hardware import detect

    monkeypatch.delenv("TORCH_DIODE_HARDWARE", raising=False)
    key = detect().key
    if key is None:
        pytest.skip("a GPU torch-diode has no hardware key for: any key is taken")
    other = "NVIDIA-A100" if key != "NVIDIA-A100" else "NVIDIA-H100"
    out = tmp_path / "other.msgpack"
    with pytest.raises(CollectionError, match=f"hardware key {key}"):
        collect([CASES[0]], CollectOptions(hardware=other, progress=False), out)
    assert not out.exists()
