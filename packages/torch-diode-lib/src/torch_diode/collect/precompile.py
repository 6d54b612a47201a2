"""Compile a GPU's sweep kernels on another machine (no GPU needed), for its Triton cache.

The sweep collector is bound by compiling: every timed config is its own literal-size kernel,
and a one-GPU machine's 15 compile processes spend most of a training chunk compiling while the
GPU waits. Triton's on-disk cache is keyed by what decides the binary (Triton's own files, the
kernel source and its specialisation, the target, the options, ``ptxas``), so a cache entry made
anywhere with the same Triton, for the same target and options, is a cache hit on the GPU
machine: its compile processes find the kernel and the chunk only loads and times it.

Three steps, each checked:

1. :func:`capture_target` (on the GPU machine, seconds): what this machine's Triton puts into a
   cache key (Triton's own key, the target, compile options, the cache-invalidating environment,
   the shared-memory limit of the sweep's guard) and, for a few reference kernels, the cache key
   and the cubin's sha256 it gets. Saved as ``data/<KEY>/triton-target.json``.
2. :func:`precompile` (anywhere with the same Triton version): compiles the sweep's kernels of
   the given problems for that target, after reproducing every reference kernel's cache key and
   cubin exactly (:class:`TargetMismatch` otherwise: nothing is written), and packs the cache
   entries (cubin, its debuggers' copy of the PTX zeroed, and metadata) with a manifest into a
   ``.tar.xz``.
3. :func:`install` (on the GPU machine, before a chunk): checks the pack was made for this
   Triton (a pack for another is skipped with a warning: the chunk then compiles as usual) and
   extracts it into the Triton cache; returns the problems it covers, which the chunk measures
   first.

Emulating the target in a compile process (:func:`emulate`) sets Triton's active driver to one
that reports the captured GPU target and replaces ``triton_key()`` (a hash of Triton's files,
which differs between Python builds of the same Triton release) by the captured one. The
reference kernels check that this reproduces the GPU machine's compiles bit for bit.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import io
import json
import logging
import lzma
import multiprocessing
import os
import struct
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from torch_diode._text import plural
from torch_diode.records import Choice, Problem

log = logging.getLogger(__name__)

TARGET_FORMAT = "torch-diode-triton-target"
PACK_FORMAT = "torch-diode-precompiled-kernels"
VERSION = 1
MANIFEST = "manifest.json"
#: A cache entry's files a chunk needs to load a kernel (Triton's ``store_binary_only`` set).
_KEEP_SUFFIXES = (".cubin", ".json")
#: Cubin sections a pack carries zeroed: ``ptxas -lineinfo`` (Triton's default) embeds the whole
#: PTX text for debuggers, over half of a sweep cubin; nothing loads it to run the kernel. Zeroed in
#: place (same size, offsets and headers; the code sections byte for byte the same), a pack
#: compresses to about two thirds.
ZEROED_SECTIONS = (".nv_debug_ptx_txt",)

#: Reference kernels whose cache keys and cubins a target must reproduce: a small fp16 mm, an fp32
#: batched FMA tile, a bf16 addmm with a bias and K not a multiple of its BLOCK_K.
REFERENCES: tuple[tuple[Problem, Choice], ...] = (
    (
        Problem(op="mm", m=512, n=384, k=1000, dtype="float16"),
        Choice(template="triton::mm", block_m=64, block_n=64, block_k=32, group_m=8, num_stages=3, num_warps=4,
               even_k=False, allow_tf32=False, use_fast_accum=False, acc_type="tl.float32"),
    ),
    (
        Problem(op="bmm", m=100, n=60, k=70, batch=3, dtype="float32"),
        Choice(template="triton::bmm", block_m=32, block_n=32, block_k=16, group_m=8, num_stages=2, num_warps=4,
               even_k=False, allow_tf32=False, use_fast_accum=False, acc_type="tl.float32"),
    ),
    (
        Problem(op="addmm", m=300, n=200, k=100, dtype="bfloat16", stride_bias=(0, 1)),
        Choice(template="triton::mm", block_m=128, block_n=64, block_k=64, group_m=8, num_stages=4, num_warps=8,
               even_k=False, allow_tf32=False, use_fast_accum=False, acc_type="tl.float32"),
    ),
)  # fmt: skip


class TargetMismatch(RuntimeError):
    """This machine's Triton does not reproduce the captured target's compiles."""


@dataclass(frozen=True)
class Target:
    """What a GPU machine's Triton puts into its kernels' cache keys (see :func:`capture_target`)."""

    hardware: str
    gpu_name: str
    triton_version: str
    triton_key: str
    backend: str
    arch: int
    warp_size: int
    revision: int
    compile_options: dict[str, Any]
    shared_memory_limit: int | None
    env_vars: dict[str, str]
    torch_version: str
    references: list[dict[str, Any]] = field(default_factory=list)
    # The directory the GPU machine compiled the sweep kernels from: their line tables (ptxas
    # -lineinfo) hold it, so a checkout at another path compiles other cubin bytes under the same
    # cache keys. Empty in targets captured before it was recorded.
    kernel_source_dir: str = ""

    def key_id(self) -> str:
        """A short id of the Triton build and target a pack is made for."""
        return _target_id(self.triton_key, self.backend, self.arch, self.warp_size)

    def to_dict(self) -> dict[str, Any]:
        return {"format": TARGET_FORMAT, "version": VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Target:
        if d.get("format") != TARGET_FORMAT:
            raise ValueError(f"not a Triton target file (format {d.get('format')!r}, expected {TARGET_FORMAT!r})")
        if d.get("version") != VERSION:
            raise ValueError(f"Triton target file version {d.get('version')!r}; this torch-diode reads {VERSION}")
        names = set(cls.__dataclass_fields__)
        missing = names - set(d) - {"kernel_source_dir"}
        if missing:
            raise ValueError(f"Triton target file lacks {sorted(missing)}")
        return cls(**{k: d[k] for k in names if k in d})

    def save(self, path: str | os.PathLike[str]) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        os.replace(tmp, p)
        return p

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Target:
        try:
            d = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: cannot read a Triton target file: {e}") from e
        try:
            return cls.from_dict(d)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path}: {e}") from e


# ------------------------------------------------------------------------------------------------
# Emulating a target in this process
# ------------------------------------------------------------------------------------------------
class _TargetDriver:
    """A Triton driver that only reports a GPU target: enough to compile (never to launch)."""

    def __init__(self, backend: str, arch: int, warp_size: int) -> None:
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget(backend, arch, warp_size)

    def is_active(self) -> bool:
        return True

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> Any:
        return self.target


def emulate(target: Target) -> None:
    """Make this process's Triton compile as ``target``'s machine does: its GPU target, its
    ``triton_key()`` and its cache-invalidating environment. For compile processes only."""
    try:
        import triton
    except ImportError:
        raise TargetMismatch(
            f"Triton is not installed here; {target.gpu_name} compiles with triton {target.triton_version}: install "
            f"triton=={target.triton_version} (a virtual environment of its own) to compile for that machine"
        ) from None
    import triton.runtime.cache as triton_cache
    from triton.runtime import driver

    if triton.__version__ != target.triton_version:
        raise TargetMismatch(
            f"Triton {triton.__version__} here, {target.triton_version} on {target.gpu_name}: install "
            f"triton=={target.triton_version} (a virtual environment of its own) to compile for that machine"
        )
    for name in _local_invalidating_env():  # as set on that machine, no more
        os.environ.pop(name, None)
    os.environ.update(target.env_vars)
    key = target.triton_key
    triton_cache.triton_key = lambda: key  # looked up by name in get_cache_key()
    driver.set_active(_TargetDriver(target.backend, target.arch, target.warp_size))


def _local_invalidating_env() -> dict[str, str]:
    from triton._C.libtriton import get_cache_invalidating_env_vars

    return dict(get_cache_invalidating_env_vars())


# ------------------------------------------------------------------------------------------------
# Compiling one kernel (in a compile process) and what the cache holds of it
# ------------------------------------------------------------------------------------------------
def _compile_into(
    cache_dir: str, problem: Problem, choice: Choice, target: Target, timeout_s: float | None
) -> tuple[str, str, list[str]]:
    """Compile (problem, choice) into ``cache_dir`` as the sweep's compile processes do; returns
    (status, message, the cache entries the compile wrote or found: Triton's compilation listener
    names them, a cache hit included)."""
    from triton import knobs

    from torch_diode.collect.sweep import _compile_task

    knobs.cache.dir = cache_dir
    seen: list[str] = []

    def listener(*, metadata_group: dict[str, str], **_: Any) -> None:
        seen.extend(sorted({Path(v).parent.name for v in metadata_group.values()}))

    previous = knobs.compilation.listener
    knobs.compilation.listener = listener
    try:
        status, msg = _compile_task(
            problem.to_dict(),
            choice.to_dict(),
            target.revision,
            dict(target.compile_options),
            True,
            timeout_s,
            target.shared_memory_limit,
        )
    finally:
        knobs.compilation.listener = previous
    return status, msg, seen if status == "ok" else []


def _reference(problem: Problem, choice: Choice, target: Target) -> dict[str, Any]:
    """The cache key (Triton's entry name) and cubin sha256 of (problem, choice) for ``target``,
    compiled where nothing is cached."""
    with tempfile.TemporaryDirectory(prefix="diode-ref-") as tmp:
        status, msg, entries = _compile_into(tmp, problem, choice, target, None)
        if status != "ok":
            raise TargetMismatch(f"reference kernel {problem.key()}: {status}: {msg}")
        if len(entries) != 1:
            raise TargetMismatch(f"reference kernel {problem.key()}: {len(entries)} cache entries, expected 1")
        cubins = list((Path(tmp) / entries[0]).glob("*.cubin"))
        if len(cubins) != 1:
            raise TargetMismatch(f"reference kernel {problem.key()}: {len(cubins)} cubins in one cache entry")
        cubin = cubins[0].read_bytes()
        return {
            "problem": problem.to_dict(),
            "choice": choice.to_dict(),
            "cache_key": entries[0],
            "cubin_sha256": hashlib.sha256(cubin).hexdigest(),
            "cubin_code_sha256": code_sha256(cubin),
        }


def _group_of(entry: Path) -> tuple[Path, dict[str, str]] | None:
    """A cache entry's group file (Triton's ``__grp__*.json``) and the files it lists; None when
    the entry has no single readable one."""
    groups = list(entry.glob("__grp__*.json"))
    if len(groups) != 1:
        return None
    try:
        d = json.loads(groups[0].read_text())
    except (OSError, json.JSONDecodeError):
        return None
    paths = d.get("child_paths") if isinstance(d, dict) else None
    return (groups[0], paths) if isinstance(paths, dict) else None


# ------------------------------------------------------------------------------------------------
# 1. Capture (on the GPU machine)
# ------------------------------------------------------------------------------------------------
def capture_target(hardware: str, *, device: str = "cuda") -> Target:
    """What this GPU machine's Triton puts into the sweep kernels' cache keys, with the reference
    kernels compiled here (a temporary cache). Needs the GPU (its target and shared memory)."""
    import torch
    import triton
    import triton.runtime.cache as triton_cache
    from triton.runtime import driver

    from torch_diode.collect.sweep import SweepCollector, SweepOptions, compile_options, template_revision

    t = driver.active.get_current_target()
    limit = SweepCollector(hardware, SweepOptions(), device=device).shared_memory_limit()
    target = Target(
        hardware=hardware,
        gpu_name=torch.cuda.get_device_name(),
        triton_version=triton.__version__,
        triton_key=triton_cache.triton_key(),
        backend=str(t.backend),
        arch=int(t.arch),
        warp_size=int(t.warp_size),
        revision=template_revision(),
        compile_options=compile_options(),
        shared_memory_limit=limit,
        env_vars=_local_invalidating_env(),
        torch_version=torch.__version__,
        kernel_source_dir=kernel_source_dir(),
    )
    refs = _run_in_process(_references_task, target.to_dict(), emulated=False)
    return replace(target, references=refs)


def kernel_source_dir() -> str:
    """The directory this process compiles the sweep kernels from (``sweep_kernels.py``'s)."""
    import importlib.util

    spec = importlib.util.find_spec("torch_diode.collect.sweep_kernels")
    if spec is None or spec.origin is None:
        raise TargetMismatch("torch_diode.collect.sweep_kernels cannot be found")
    return str(Path(spec.origin).parent)


def _references_task(target_dict: dict[str, Any], emulated: bool) -> list[dict[str, Any]]:
    target = Target.from_dict(target_dict)
    if emulated:
        emulate(target)
    return [_reference(problem, choice, target) for problem, choice in REFERENCES]


def _run_in_process(fn: Callable[..., Any], *args: Any, emulated: bool) -> Any:
    """Run ``fn`` in a fresh process (spawned: Triton's driver and caches are per process)."""
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        return pool.submit(fn, *args, emulated).result()


# ------------------------------------------------------------------------------------------------
# 2. Precompile (anywhere with the same Triton)
# ------------------------------------------------------------------------------------------------
def verify_target(target: Target) -> None:
    """Compile the reference kernels here as ``target`` and compare cache keys and cubins with the
    captured ones; raises :class:`TargetMismatch` saying which differs."""
    if not target.references:
        raise TargetMismatch("the target file holds no reference kernels: capture it again on the GPU machine")
    got = _run_in_process(_references_task, target.to_dict(), emulated=True)
    for want, have in zip(target.references, got):
        name = Problem.from_dict(want["problem"]).key()
        if want["cache_key"] != have["cache_key"]:
            raise TargetMismatch(
                f"reference kernel {name}: cache key {have['cache_key'][:12]} here, {want['cache_key'][:12]} on "
                f"{target.gpu_name}: this Triton does not compile what that machine's does (its files, ptxas or "
                "environment differ), so its cache would not be hit there"
            )
        if "cubin_code_sha256" in want:  # captured since session 23: the code, debug sections aside
            if want["cubin_code_sha256"] != have["cubin_code_sha256"]:
                raise TargetMismatch(
                    f"reference kernel {name}: same cache key but different code (cubin sha256 without its "
                    f"debug sections {have['cubin_code_sha256'][:12]} here, {want['cubin_code_sha256'][:12]} there): "
                    "the kernels would not be the ones that machine compiles"
                )
        elif want["cubin_sha256"] != have["cubin_sha256"]:
            raise TargetMismatch(
                f"reference kernel {name}: same cache key but a different cubin (sha256 {have['cubin_sha256'][:12]} "
                f"here, {want['cubin_sha256'][:12]} there): the kernels would not be the ones that machine compiles, "
                "or only their line tables differ (they hold the path of the checkout the kernels were compiled "
                f"from, here {kernel_source_dir()}); this target predates code hashes: capture it again on "
                "that machine (campaign.py target) to compare the code alone"
            )


@dataclass
class PrecompileSummary:
    problems: list[Problem] = field(default_factory=list)
    kernels: int = 0
    failed: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    pack_bytes: int = 0
    left_out: list[Problem] = field(default_factory=list)


_WORKER_TARGET: Target | None = None  # a precompile process's target, set once by _worker_init


def _worker_init(target_dict: dict[str, Any], parent: int | None = None) -> None:
    import signal

    from triton import knobs

    from torch_diode.collect.runner import exit_with_parent

    global _WORKER_TARGET
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the pool
    if parent is not None:
        # A parent killed outright (SIGKILL, or SIGTERM's default) cannot stop the pool: without
        # this the process compiled what was queued and then waited for work forever. The
        # parent's pid as the parent sent it: it may have died while this process started.
        exit_with_parent(parent)
    _WORKER_TARGET = Target.from_dict(target_dict)
    emulate(_WORKER_TARGET)
    # The staging cache keeps what a pack takes (not part of the cache key): ~1/10 of the disk.
    knobs.compilation.store_binary_only = True


def _precompile_task(cache_dir: str, problem_dict: dict[str, Any], choice_dict: dict[str, Any],
                     timeout_s: float | None) -> tuple[str, str, list[str]]:  # fmt: skip
    assert _WORKER_TARGET is not None, "a precompile process starts with _worker_init"
    return _compile_into(
        cache_dir, Problem.from_dict(problem_dict), Choice.from_dict(choice_dict), _WORKER_TARGET, timeout_s
    )


def precompile(
    problems: Sequence[Problem],
    choices_of: Callable[[Problem], Iterable[Choice]],
    target: Target,
    out: str | os.PathLike[str],
    *,
    cache_dir: str | os.PathLike[str],
    workers: int | None = None,
    max_bytes: int = 30 * 2**20,
    timeout_s: float | None = 300.0,
    progress: Callable[[str], None] | None = None,
    stop_when_full: bool = False,
) -> PrecompileSummary:
    """Compile the Triton kernels ``choices_of(problem)`` of ``problems`` (in order) for
    ``target`` into ``cache_dir`` (kept: a rerun finds what an interrupted one compiled) and pack
    the whole problems whose entries fit ``max_bytes`` (xz-compressed) into ``out``, a
    ``.tar.xz`` with a manifest. The target's reference kernels are verified first.

    ``stop_when_full``: the first problem that does not fit ends the compiling (it is in
    ``left_out``, its kernels in ``cache_dir`` for the next pack; the problems after it are not
    compiled), so that ``problems`` can be a whole queue and the pack is filled from its head."""
    t_start = time.perf_counter()
    cache = Path(cache_dir)
    verify_target(target)
    say = progress or (lambda s: log.info("%s", s))
    summary = PrecompileSummary()
    n = max(1, (os.cpu_count() or 2) if workers is None else workers)
    ctx = multiprocessing.get_context("spawn")
    packed: list[tuple[Problem, list[str], bytes]] = []
    size = 0
    init_args = (target.to_dict(), os.getpid())
    with cf.ProcessPoolExecutor(n, mp_context=ctx, initializer=_worker_init, initargs=init_args) as pool:
        for problem in problems:
            todo = [c for c in choices_of(problem) if c.is_triton]
            t0 = time.perf_counter()
            futs = [pool.submit(_precompile_task, str(cache), problem.to_dict(), c.to_dict(), timeout_s) for c in todo]
            entries: set[str] = set()
            failed = 0
            cpu = 0.0
            for f in futs:
                status, msg, new = f.result()
                if status == "ok":
                    cpu += float(msg)
                    entries.update(new)
                else:
                    failed += 1
            blob = lzma.compress(_tar_members(cache, sorted(entries)), preset=6)
            if size + len(blob) > max_bytes and packed:
                summary.left_out.append(problem)
                say(f"{problem.key()}: left out, the pack would pass {max_bytes / 2**20:.0f} MiB")
                if stop_when_full:
                    break
                continue
            size += len(blob)
            packed.append((problem, sorted(entries), blob))
            summary.kernels += len(entries)
            summary.failed += failed
            summary.cpu_s += cpu
            say(
                f"{problem.key()}: {plural(len(entries), 'kernel')}, {failed} failed, {cpu:.0f} CPU-s of compiling in "
                f"{time.perf_counter() - t0:.0f} s; pack ~{size / 2**20:.1f} MiB"
            )
    summary.problems = [p for p, _, _ in packed]
    summary.pack_bytes = _write_pack(out, packed, target)
    summary.wall_s = time.perf_counter() - t_start
    return summary


def _tar_members(cache: Path, entries: Sequence[str]) -> bytes:
    """The tar members (headers and data, no end-of-archive blocks) of ``entries``' loading files."""
    buf = io.BytesIO()
    tar = tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT)
    for e in entries:
        _add_entry(tar, cache / e, e)
    return buf.getvalue()  # before close(), which would end the archive


def _add_entry(tar: tarfile.TarFile, entry: Path, name: str) -> None:
    found = _group_of(entry)
    if found is None:
        raise ValueError(f"{entry}: not a complete Triton cache entry")
    group, child_paths = found
    kept = sorted(k for k in child_paths if k.endswith(_KEEP_SUFFIXES))
    for fname in kept:
        if fname.endswith(".cubin"):
            _add_bytes(tar, f"{name}/{fname}", zero_sections((entry / fname).read_bytes(), ZEROED_SECTIONS))
        else:
            tar.add(entry / fname, arcname=f"{name}/{fname}", recursive=False)
    _add_bytes(tar, f"{name}/{group.name}", json.dumps({"child_paths": {k: f"{name}/{k}" for k in kept}}).encode())


_SHT_NOBITS = 8  # an ELF section type with no bytes in the file

#: Sections that only describe a kernel for debuggers: line tables (which hold the path of the file
#: the kernel was compiled from, so a checkout at another path gives other bytes) and the embedded
#: PTX text. The code and everything loading it reads lie elsewhere.
_DEBUG_PREFIXES = (b".debug", b".rela.debug", b".rel.debug", b".nv_debug")


def _elf_sections(elf: bytes) -> list[tuple[bytes, int, int, int]] | None:
    """(name, type, offset, size) of each section of ``elf`` (a 64-bit little-endian ELF file, as
    cubins are), in header order; None when it is no such file or a header points outside it."""
    if len(elf) < 64 or elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        return None
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    if shentsize < 64 or shstrndx >= shnum or shoff + shnum * shentsize > len(elf):
        return None
    # Elf64_Shdr: name, type, flags, addr, offset, size, ...
    headers = [struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    strtab_off, strtab_size = headers[shstrndx][4], headers[shstrndx][5]
    if strtab_off + strtab_size > len(elf):
        return None
    out = []
    for name_off, sh_type, _, _, off, size in headers:
        end = elf.find(b"\0", strtab_off + name_off, strtab_off + strtab_size)
        if end < 0 or (sh_type != _SHT_NOBITS and off + size > len(elf)):
            return None
        out.append((elf[strtab_off + name_off : end], sh_type, off, size))
    return out


def zero_sections(elf: bytes, names: Sequence[str]) -> bytes:
    """``elf`` (a 64-bit little-endian ELF file, as cubins are) with the contents of its sections
    named ``names`` overwritten with zeros, everything else unchanged; ``elf`` itself if it is no
    such file or a section header points outside it."""
    sections = _elf_sections(elf)
    if sections is None:
        return elf
    out = bytearray(elf)
    wanted = {n.encode() for n in names}
    for name, sh_type, off, size in sections:
        if name in wanted and sh_type != _SHT_NOBITS:
            out[off : off + size] = bytes(size)
    return bytes(out)


def code_sha256(elf: bytes) -> str:
    """A sha256 of a cubin without its debug sections (:data:`_DEBUG_PREFIXES`): every other
    section's name, type, size and bytes, in order. Two compiles of one kernel from checkouts at
    different paths differ only in their line tables, so they share it; any change to the code,
    its registers, shared memory or launch metadata changes it. Raises ValueError on a file that
    is no 64-bit ELF."""
    sections = _elf_sections(elf)
    if sections is None:
        raise ValueError("not a 64-bit little-endian ELF file (a cubin)")
    h = hashlib.sha256()
    for name, sh_type, off, size in sections:
        if name.startswith(_DEBUG_PREFIXES):
            continue
        h.update(struct.pack("<IIQ", len(name), sh_type, size) + name)
        if sh_type != _SHT_NOBITS:
            h.update(elf[off : off + size])
    return h.hexdigest()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _write_pack(out: str | os.PathLike[str], packed: list[tuple[Problem, list[str], bytes]], target: Target) -> int:
    """One tar (the manifest first) as concatenated xz streams: the problems' streams are the
    ones whose sizes were checked, not compressed again."""
    p = Path(out)
    p.parent.mkdir(parents=True, exist_ok=True)
    manifest = {
        "format": PACK_FORMAT,
        "version": VERSION,
        "hardware": target.hardware,
        "target": target.key_id(),
        "triton_version": target.triton_version,
        "zeroed_sections": list(ZEROED_SECTIONS),
        "problems": [{"problem": pr.to_dict(), "entries": es} for pr, es, _ in packed],
    }
    head = io.BytesIO()
    _add_bytes(tarfile.open(fileobj=head, mode="w", format=tarfile.PAX_FORMAT), MANIFEST, json.dumps(manifest).encode())
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(lzma.compress(head.getvalue(), preset=6))
        for _, _, blob in packed:
            f.write(blob)
        f.write(lzma.compress(bytes(2 * tarfile.BLOCKSIZE)))  # the end-of-archive blocks
    os.replace(tmp, p)
    return p.stat().st_size


# ------------------------------------------------------------------------------------------------
# 3. Install (on the GPU machine)
# ------------------------------------------------------------------------------------------------
def read_manifest(pack: str | os.PathLike[str]) -> dict[str, Any]:
    """A pack's manifest, its first member: read without decompressing the kernels behind it."""
    try:
        with tarfile.open(pack, mode="r|xz") as tar:
            first = tar.next()
            f = tar.extractfile(first) if first is not None and first.name == MANIFEST else None
            if f is None:
                raise ValueError("no manifest first")
            d = json.loads(f.read())
    except (OSError, EOFError, tarfile.TarError, lzma.LZMAError, KeyError, ValueError, json.JSONDecodeError) as e:
        raise ValueError(f"{pack}: not a readable precompiled-kernels pack ({type(e).__name__}: {e})") from e
    if d.get("format") != PACK_FORMAT or d.get("version") != VERSION:
        raise ValueError(
            f"{pack}: format {d.get('format')!r} version {d.get('version')!r}, expected {PACK_FORMAT!r} {VERSION}"
        )
    return d


def local_target_id() -> str:
    """:meth:`Target.key_id` of this machine's Triton and GPU (needs the GPU)."""
    import triton.runtime.cache as triton_cache
    from triton.runtime import driver

    t = driver.active.get_current_target()
    return _target_id(triton_cache.triton_key(), str(t.backend), int(t.arch), int(t.warp_size))


def _target_id(triton_key: str, backend: str, arch: int, warp_size: int) -> str:
    return hashlib.sha256(f"{triton_key}|{backend}|{arch}|{warp_size}".encode()).hexdigest()[:16]


def install(
    pack: str | os.PathLike[str], cache_dir: str | os.PathLike[str], *, target_id: str | None = None
) -> list[Problem]:
    """Extract ``pack`` into the Triton cache ``cache_dir`` when it was made for this machine
    (``target_id``, default :func:`local_target_id`); returns the problems it covers, or [] (with
    a warning) for a pack made for another Triton or GPU. A damaged pack raises ValueError and
    writes nothing."""
    manifest = read_manifest(pack)
    want = manifest["target"]
    have = local_target_id() if target_id is None else target_id
    if want != have:
        log.warning(
            "%s: made for another Triton build or GPU (target %s, this machine %s): not used, kernels compile here",
            pack, want, have,
        )  # fmt: skip
        return []
    names = {e for item in manifest["problems"] for e in item["entries"]}
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".diode-install-") as tmp:
        try:
            with tarfile.open(pack, mode="r:xz") as tar:
                members = [m for m in tar.getmembers() if m.name != MANIFEST]
                for m in members:
                    parts = Path(m.name).parts
                    if not m.isfile() or len(parts) != 2 or parts[0] not in names or parts[1].startswith((".", "/")):
                        raise ValueError(f"unexpected member {m.name!r}")
                tar.extractall(tmp, members=members, filter="data")
        except (OSError, EOFError, tarfile.TarError, lzma.LZMAError) as e:
            raise ValueError(f"{pack}: damaged ({type(e).__name__}: {e}); nothing installed") from e
        root = Path(os.path.abspath(cache))
        for name in sorted(names):
            entry = Path(tmp) / name
            found = _group_of(entry)
            files = sorted(found[1]) if found is not None else []
            if found is None or not files or not all((entry / f).is_file() for f in files):
                raise ValueError(f"{pack}: cache entry {name} is incomplete; nothing installed")
            # Triton's groups list their files by absolute path: where they will be in this cache
            found[0].write_text(json.dumps({"child_paths": {f: str(root / name / f) for f in files}}))
        for name in sorted(names):
            dst = cache / name
            if not dst.exists():
                try:
                    os.replace(Path(tmp) / name, dst)
                except OSError:
                    if not dst.exists():  # not another process installing the same entry
                        raise
    return [Problem.from_dict(item["problem"]) for item in manifest["problems"]]


def cache_dir() -> str:
    """The Triton cache directory of this process (``TRITON_CACHE_DIR`` or Triton's default)."""
    from triton import knobs

    return str(knobs.cache.dir)
