"""Precompiling the sweep's kernels without a GPU (torch_diode.collect.precompile), on CPU.

The GPU machine's side (capturing its target, loading installed kernels) needs a GPU; here a
target is described for sm_90 with this machine's own Triton, the reference kernels compiled for
it, and the pack's kernels shown to be cache hits after installing: what the GPU machine's compile
processes will find. Real Triton compiles (ptxas included) in spawned processes, no mocks.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")

from torch_diode.collect import precompile as pc  # noqa: E402
from torch_diode.collect.sweep import (  # noqa: E402
    SweepCollector,
    SweepOptions,
    compile_options,
    stages_hook_supported,
    template_revision,
)
from torch_diode.records import Problem  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = [
    Problem(op="mm", m=512, n=384, k=1000, dtype="float16"),
    Problem(op="baddbmm", m=64, n=48, k=200, batch=4, dtype="bfloat16", stride_bias=(0, 0, 1)),
]


def _choices(problem: Problem) -> list:
    sc = SweepCollector("NVIDIA-H100", SweepOptions(search_space="EXHAUSTIVE", max_configs=3, seed=1))
    return [it.choice for it in sc.choices(problem) if it.kind == "triton"]


@pytest.fixture(scope="module")
def target() -> pc.Target:
    """An sm_90 target of this machine's Triton, its reference kernels compiled for it here."""
    import triton.runtime.cache as triton_cache

    t = pc.Target(
        hardware="NVIDIA-H100",
        gpu_name="NVIDIA H100 80GB HBM3 (described)",
        triton_version=triton.__version__,
        triton_key=triton_cache.triton_key(),
        backend="cuda",
        arch=90,
        warp_size=32,
        revision=template_revision(),
        compile_options=compile_options(),
        shared_memory_limit=232448 if stages_hook_supported() else None,
        env_vars=pc._local_invalidating_env(),
        torch_version="described",
    )
    refs = pc._run_in_process(pc._references_task, t.to_dict(), emulated=True)
    return replace(t, references=refs)


@pytest.fixture(scope="module")
def pack(target, tmp_path_factory) -> tuple[Path, pc.PrecompileSummary]:
    d = tmp_path_factory.mktemp("pack")
    s = pc.precompile(PROBLEMS, _choices, target, d / "p.tar.xz", cache_dir=d / "stage", workers=2)
    return d / "p.tar.xz", s


def _files(cache: Path) -> dict[str, int]:
    return {str(f.relative_to(cache)): f.stat().st_size for f in sorted(cache.rglob("*")) if f.is_file()}


def test_target_file_round_trip_and_refusals(target, tmp_path):
    path = target.save(tmp_path / "triton-target.json")
    assert pc.Target.load(path) == target
    assert len(target.references) == len(pc.REFERENCES)
    assert all(len(r["cache_key"]) > 20 and len(r["cubin_sha256"]) == 64 for r in target.references)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**target.to_dict(), "format": "something-else"}))
    with pytest.raises(ValueError, match="not a Triton target file"):
        pc.Target.load(bad)
    d = target.to_dict()
    del d["triton_key"]
    bad.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=r"lacks .*triton_key"):
        pc.Target.load(bad)


def test_the_reference_kernels_reproduce_and_a_different_build_is_refused(target):
    pc.verify_target(target)  # the same Triton, the same target: the same keys and cubins
    other = replace(target, triton_key=target.triton_key + "-another-build")
    with pytest.raises(pc.TargetMismatch, match=r"cache key .* would not be hit"):
        pc.verify_target(other)
    assert all(len(r["cubin_code_sha256"]) == 64 for r in target.references)
    # Only the code is compared (the full cubin holds the checkout's path in its line tables) ...
    pc.verify_target(replace(target, references=[dict(r, cubin_sha256="0" * 64) for r in target.references]))
    forged = [dict(r, cubin_code_sha256="0" * 64) for r in target.references]
    with pytest.raises(pc.TargetMismatch, match="different code"):
        pc.verify_target(replace(target, references=forged))
    # ... except in targets captured before code hashes, which must match byte for byte.
    old = [{k: v for k, v in r.items() if k != "cubin_code_sha256"} for r in target.references]
    pc.verify_target(replace(target, references=old))
    with pytest.raises(pc.TargetMismatch, match=r"different cubin.*capture it again"):
        pc.verify_target(replace(target, references=[dict(r, cubin_sha256="0" * 64) for r in old]))
    with pytest.raises(pc.TargetMismatch, match=re.escape("install triton==0.0.1")):
        pc.emulate(replace(target, triton_version="0.0.1"))


def test_installed_kernels_are_cache_hits(target, pack, tmp_path):
    path, summary = pack
    assert summary.problems == PROBLEMS and summary.kernels == sum(len(_choices(p)) for p in PROBLEMS)
    assert summary.failed == 0 and summary.pack_bytes == path.stat().st_size
    cache = tmp_path / "triton-cache"
    assert pc.install(path, cache, target_id=target.key_id()) == PROBLEMS
    installed = _files(cache)
    # only what loading needs: the cubin, its metadata and the group listing them
    assert installed and all(n.endswith((".cubin", ".json")) for n in installed)
    assert sum(n.endswith(".cubin") for n in installed) == summary.kernels
    # The sweep's own compile path, as the GPU machine's compile processes run it, finds every kernel:
    # nothing is compiled (a miss would write the entry's IR files beside the cubin).
    for problem in PROBLEMS:
        for choice in _choices(problem):
            status, _, entries = pc._run_in_process(
                _compile_task_emulated, str(cache), problem.to_dict(), choice.to_dict(), target.to_dict(), emulated=True
            )
            assert status == "ok" and len(entries) == 1 and entries[0] in {n.split("/")[0] for n in installed}
    assert _files(cache) == installed
    # installing again is harmless
    assert pc.install(path, cache, target_id=target.key_id()) == PROBLEMS and _files(cache) == installed


def test_a_packed_cubin_is_its_compile_with_the_ptx_copy_zeroed(pack, tmp_path):
    """ptxas -lineinfo embeds the kernel's PTX text in the cubin (for debuggers): a pack carries it
    zeroed, every other byte (the code, the ELF headers, the sizes) as compiled."""
    path, summary = pack
    cache = tmp_path / "c"
    manifest = pc.read_manifest(path)
    assert manifest["zeroed_sections"] == [".nv_debug_ptx_txt"]
    pc.install(path, cache, target_id=manifest["target"])
    stage = path.parent / "stage"
    cubins = sorted(cache.rglob("*.cubin"))
    assert len(cubins) == summary.kernels
    for cubin in cubins:
        packed = cubin.read_bytes()
        compiled = (stage / cubin.relative_to(cache)).read_bytes()
        assert len(packed) == len(compiled)
        diff = [i for i, (a, b) in enumerate(zip(packed, compiled)) if a != b]
        assert diff, "the PTX copy was not zeroed"
        lo, hi = diff[0], diff[-1] + 1
        text = compiled[lo:hi]
        assert b".target sm_90" in text and b".entry sweep_" in text  # that range is the PTX text
        assert packed[lo:hi].count(0) == hi - lo  # zeroed, and nothing outside it changed
        assert packed[:lo] == compiled[:lo] and packed[hi:] == compiled[hi:]


def test_zero_sections_leaves_what_is_no_elf_file_alone():
    assert pc.zero_sections(b"not an ELF file at all" * 4, [".nv_debug_ptx_txt"]) == b"not an ELF file at all" * 4
    truncated = b"\x7fELF\x02\x01" + bytes(58) + b"more"
    assert pc.zero_sections(truncated, [".nv_debug_ptx_txt"]) == truncated


def _compile_task_emulated(cache_dir, problem_dict, choice_dict, target_dict, emulated):
    target = pc.Target.from_dict(target_dict)
    if emulated:
        pc.emulate(target)
    return pc._compile_into(cache_dir, Problem.from_dict(problem_dict), pc.Choice.from_dict(choice_dict), target, None)


def test_install_skips_another_targets_pack_and_refuses_a_damaged_one(target, pack, tmp_path, caplog):
    path, _ = pack
    cache = tmp_path / "cache"
    assert pc.install(path, cache, target_id="0123456789abcdef") == []
    assert "made for another Triton build or GPU" in caplog.text and not _files(cache)
    cut = tmp_path / "cut.tar.xz"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ValueError, match=re.escape("cut.tar.xz")):
        pc.install(cut, cache, target_id=target.key_id())
    assert not _files(cache)
    # a member outside the manifest's cache entries (a path escaping the cache, say) is refused
    evil = tmp_path / "evil.tar.xz"
    manifest = pc.read_manifest(path)
    with tarfile.open(evil, "w:xz") as tar:
        data = json.dumps(manifest).encode()
        info = tarfile.TarInfo(pc.MANIFEST)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("../outside.json")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
    with pytest.raises(ValueError, match="unexpected member"):
        pc.install(evil, cache, target_id=target.key_id())
    assert not _files(cache) and not (tmp_path / "outside.json").exists()
    with pytest.raises(ValueError, match="not a readable precompiled-kernels pack"):
        pc.read_manifest(tmp_path / "missing.tar.xz")


def test_max_bytes_keeps_whole_problems(target, tmp_path):
    """A pack holds whole problems: the one that would pass ``max_bytes`` is left out (the first
    is always packed)."""
    s = pc.precompile(PROBLEMS, _choices, target, tmp_path / "small.tar.xz", cache_dir=tmp_path / "st",
                      workers=2, max_bytes=1)  # fmt: skip
    assert s.problems == PROBLEMS[:1] and s.left_out == PROBLEMS[1:]
    assert pc.read_manifest(tmp_path / "small.tar.xz")["problems"][0]["problem"] == PROBLEMS[0].to_dict()


def test_stop_when_full_ends_at_the_first_problem_left_out(target, tmp_path):
    """With ``stop_when_full`` the problems are a queue: the first that does not fit ends the run
    (compiled, for the next pack); those after it are not compiled at all."""
    third = Problem(op="mm", m=256, n=128, k=64, dtype="float16")
    stage = tmp_path / "st"
    s = pc.precompile([*PROBLEMS, third], _choices, target, tmp_path / "full.tar.xz", cache_dir=stage,
                      workers=2, max_bytes=1, stop_when_full=True)  # fmt: skip
    assert s.problems == PROBLEMS[:1] and s.left_out == PROBLEMS[1:2]
    # The next pack, starting at the problem left out, finds its kernels compiled already.
    before = {f for f in stage.rglob("*.cubin")}
    s2 = pc.precompile(PROBLEMS[1:2], _choices, target, tmp_path / "next.tar.xz", cache_dir=stage, workers=2)
    assert s2.problems == PROBLEMS[1:2] and {f for f in stage.rglob("*.cubin")} == before
    # The problem after it was never compiled: packing it now compiles new kernels.
    s3 = pc.precompile([third], _choices, target, tmp_path / "third.tar.xz", cache_dir=stage, workers=2)
    assert s3.problems == [third] and {f for f in stage.rglob("*.cubin")} > before


def test_campaign_precompile_needs_a_target_file(tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(ROOT / "packages" / p / "src") for p in ("torch-diode-lib",)),
    }
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "campaign.py"), "precompile", "--hardware", "NVIDIA-H100",
         "--split", "train", "--problems", "2", "--output", str(tmp_path / "a.tar.xz"),
         "--target", str(tmp_path / "none.json"), "--cache-dir", str(tmp_path / "c")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "cannot read a Triton target file" in r.stderr and "campaign.py target" in r.stderr
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "campaign.py"), "precompile", "--hardware", "NVIDIA-H100",
         "--split", "train", "--output", str(tmp_path / "a.tar.xz"), "--cache-dir", str(tmp_path / "c")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 2 and "give --problems N, --fill" in r.stderr, r.stderr


def test_campaign_packs_tells_what_a_pack_holds_for_a_gpu(target, pack, tmp_path):
    """`campaign.py packs`: per pack, its problems per split of the GPU's plan, how many that GPU's
    files do not hold yet, and whether the pack installs there; a spent pack reads as such (session
    21 carried one to the H200 and compiled its chunk's problems there)."""
    from torch_diode.collect.campaign import CampaignOptions, CampaignPlan
    from torch_diode.dataset import Dataset, write_dataset
    from torch_diode.records import Choice, Provenance, TimingRecord

    key = "NVIDIA-H200"
    d = tmp_path / "data" / key
    d.mkdir(parents=True)
    CampaignPlan(CampaignOptions(), "test", train=[PROBLEMS[0]], val=[PROBLEMS[1]]).save(d / "plan.json")
    rec = TimingRecord(problem=PROBLEMS[0], choice=Choice.aten("mm"), time_us=5.0, hardware=key)
    write_dataset(Dataset.from_records([rec], Provenance(hardware=key)), d / "train.msgpack")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "packages" / "torch-diode-lib" / "src")}
    cmd = [sys.executable, str(ROOT / "scripts" / "campaign.py"), "--data-dir", str(tmp_path / "data"), "packs",
           "--hardware", key, str(pack[0])]  # fmt: skip
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "target unknown here" in r.stdout
    assert "1 train problem, 0 not in train.msgpack yet; 1 val problem, 1 not in val.msgpack yet" in r.stdout
    target.save(d / "triton-target.json")
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and f"{pack[0]}: NVIDIA-H100's pack, installs here;" in r.stdout, r.stdout + r.stderr
    replace(target, arch=80).save(d / "triton-target.json")
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "another target" in r.stdout and "compiles here" in r.stdout, r.stdout
    bad = tmp_path / "bad.tar.xz"
    bad.write_bytes(b"no xz stream")  # (a truncated pack still lists its manifest, which comes first)
    r = subprocess.run([*cmd, str(bad)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "not a readable precompiled-kernels pack" in r.stderr, r.stderr
    assert str(bad) not in r.stdout and f"{pack[0]}: NVIDIA-H100's pack" in r.stdout  # the others still listed


def test_bench_compile_compiles_for_an_emulated_target(target, tmp_path):
    """scripts/bench_compile.py (the campaign's compile rate per process count and environment):
    real compiles for the emulated target, one row per setting, every kernel accounted for."""
    target.save(tmp_path / "target.json")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "packages" / "torch-diode-lib" / "src")}
    cmd = [sys.executable, str(ROOT / "scripts" / "bench_compile.py"), "--emulate", str(tmp_path / "target.json"),
           "--problem", json.dumps(PROBLEMS[0].to_dict())]  # fmt: skip
    args = ["--workers", "1", "--kernels", "2", "--env", "MLIR_DISABLE_MULTITHREADING=1", "--output", str(tmp_path / "b.json")]  # fmt: skip
    r = subprocess.run([*cmd, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads((tmp_path / "b.json").read_text())
    assert [row["env"] for row in out["rows"]] == [{}, {"MLIR_DISABLE_MULTITHREADING": "1"}]
    for row in out["rows"]:
        assert row["workers"] == row["processes_warmed"] == 1 and row["kernels"] == row["ok"] == 2
        assert row["statuses"] == {"ok": 2} and row["kernels_per_s"] > 0 and row["mean_kernel_s"] > 0
    assert out["machine"]["triton"] == triton.__version__
    bad = subprocess.run([*cmd, "--workers", "0"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "--workers: give positive process counts" in bad.stderr


_COMPILE_REFERENCE = """
import json, sys
from torch_diode.collect import precompile as pc
ref = pc._references_task(json.loads(sys.argv[1]), True)[0]
print(json.dumps([pc.kernel_source_dir(), ref["cache_key"], ref["cubin_sha256"], ref["cubin_code_sha256"]]))
"""


def test_a_checkout_at_another_path_compiles_the_same_code(target, tmp_path):
    """The kernels' line tables hold the directory they were compiled from: a copy of the package
    elsewhere compiles another cubin under the same cache key, with the same code hash."""
    import shutil

    src = Path(pc.__file__).resolve().parents[2]  # .../src holding torch_diode
    copy = tmp_path / "elsewhere" / "src"
    shutil.copytree(src / "torch_diode", copy / "torch_diode")
    env = {**os.environ, "PYTHONPATH": str(copy)}
    out = subprocess.run(
        [sys.executable, "-c", _COMPILE_REFERENCE, json.dumps(target.to_dict())],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    source_dir, key, full, code = json.loads(out.stdout.strip().splitlines()[-1])
    ref = target.references[0]
    assert source_dir.startswith(str(copy)) and source_dir != pc.kernel_source_dir()
    assert key == ref["cache_key"] and full != ref["cubin_sha256"] and code == ref["cubin_code_sha256"]


def test_code_hash_reads_only_elf_and_sees_code_changes(pack, tmp_path):
    path, _ = pack
    with tarfile.open(path) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(".cubin"))
        cubin = tar.extractfile(member).read()
    sections = {name.decode(): (off, size) for name, _, off, size in pc._elf_sections(cubin)}
    text = next(n for n in sections if n.startswith(".text."))
    off, size = sections[text]
    changed = bytearray(cubin)
    changed[off + size // 2] ^= 0xFF
    assert pc.code_sha256(bytes(changed)) != pc.code_sha256(cubin)
    off, size = sections[".debug_line"]
    debug_only = bytearray(cubin)
    debug_only[off : off + size] = bytes(size)
    assert pc.code_sha256(bytes(debug_only)) == pc.code_sha256(cubin)
    with pytest.raises(ValueError, match="not a 64-bit"):
        pc.code_sha256(b"not an ELF file")
    with pytest.raises(ValueError, match="not a 64-bit"):
        pc.code_sha256(cubin[: len(cubin) // 2])  # section headers cut off


def test_a_precompile_process_ends_with_its_parent(target):
    """A precompile process whose parent is gone (killed outright; here a pid that is not its
    parent, as when the parent died while it started) ends at once: before session 66 it compiled
    what was queued and then waited for work forever."""
    import time

    code = (
        "import json, sys, time\nfrom torch_diode.collect import precompile as pc\n"
        "pc._worker_init(json.loads(sys.argv[1]), parent=os.getppid() + 10**7)\n"
        "time.sleep(600); sys.exit(0)\n"
    )
    code = "import os\n" + code
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(target.to_dict())], env=env, timeout=120, capture_output=True, text=True
    )
    assert "Traceback" not in out.stderr, out.stderr
    # ended by the watch, not after its sleep (the bound leaves room for importing torch when loaded)
    assert out.returncode == 1 and time.monotonic() - t0 < 100
