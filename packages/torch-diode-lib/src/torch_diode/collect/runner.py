"""``collect()``: run a collector over problems into a dataset file: resumable, sharded, with progress.

* **Resumable and interrupt-safe.** Records go through :class:`~torch_diode.dataset.DatasetWriter`,
  flushed (appended and fsynced) after every problem. Rerunning with the same output skips the
  problems already in it (measured, or failed as a whole); an interrupted write is cut off.
* **Sharded.** Problems are de-duplicated, then rank ``r`` of ``w`` takes ``problems[r::w]``.
  ``workers=N`` starts one process per GPU (``cuda:0`` ... ``cuda:N-1``), each writing
  ``OUT.rank{r}.<ext>``, and merges the shards into ``OUT`` at the end. Under ``torchrun``
  (``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` set, ``WORLD_SIZE > 1``) each process is one rank on
  ``cuda:LOCAL_RANK`` and writes its shard only: ranks may be on different hosts, so join the
  shards with ``diode data merge`` (or :func:`merge_shards`) where they meet.
* **Stopped cleanly.** SIGTERM (``kill``, ``timeout``) stops a run as Ctrl-C does
  (:class:`~torch_diode.errors.Terminated`): the workers stop, the shards are merged. Workers
  end with their parent if it is killed outright, and a rerun first merges the shards such a
  kill left.
* **Progress.** A tqdm bar (when tqdm is installed and ``progress`` is on) shows problems done,
  configs (records) per second and the ETA.
* **Never silent.** A run that measured problems but produced no record raises
  :class:`~torch_diode.errors.CollectionError` naming the failure reasons.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import glob
import logging
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from torch_diode._text import plural
from torch_diode.dataset import (
    RUN_SETTINGS,
    Dataset,
    DatasetWriter,
    check_run_settings,
    file_in_use,
    format_for_path,
    merge_datasets,
    output_lock,
    read_dataset,
    write_dataset,
)
from torch_diode.errors import CollectionError, FileInUseError, Terminated
from torch_diode.records import Choice, FailureRecord, Problem, Provenance, TimingRecord, unique

log = logging.getLogger(__name__)

COLLECTORS: tuple[str, ...] = ("inductor", "sweep")
#: Problems ahead of the current one whose kernels a collector with ``prefetch`` compiles meanwhile.
PREFETCH_PROBLEMS = 8
DEVICES: tuple[str, ...] = ("cuda", "cpu")


class Collector(Protocol):
    """What ``collect`` drives: the Inductor collector and the sweep collector both fit."""

    def measure(self, problem: Problem) -> tuple[list[TimingRecord], list[FailureRecord]]: ...


@dataclass(frozen=True, kw_only=True)
class CollectOptions:
    """How to collect. A bad option raises ``ValueError`` naming the field and, in parentheses, the
    ``diode`` flag that sets it (``top_up (--top-up): ...``).

    Attributes:
        collector: ``"inductor"`` (max-autotune's own timings through its feedback saver) or
            ``"sweep"`` (``torch_diode.collect.sweep.SweepCollector``, much faster).
        device: ``"cuda"`` or ``"cpu"`` (CPU collects only bmm; meant for tests).
        search_space: Inductor's ``max_autotune_gemm_search_space``: ``"DEFAULT"`` or ``"EXHAUSTIVE"``.
        search_mode: ``"max-autotune"`` or ``"max-autotune-no-cudagraphs"``.
        via_linear: compile mm/addmm problems through ``F.linear`` (as ``nn.Linear`` lowers).
        hardware: the hardware key to record; by default detected (``torch_diode.hardware``),
            ``cpu-<machine>`` on CPU. On a GPU torch-diode knows, another known GPU's key is
            refused (a dataset holds one GPU's timings), unless ``TORCH_DIODE_HARDWARE`` sets it.
        workers: local processes, one per GPU; None = every visible GPU (1 on CPU).
        rank, world_size: this process's shard; None = from ``RANK``/``WORLD_SIZE`` (torchrun) or 0/1.
        format: ``"msgpack"`` or ``"json"``; None = from the output's extension.
        progress: show a progress bar (needs tqdm; silently plain logging without it).
        seed, command: provenance only (the sampler's seed, the command line).
        sweep_options: keyword options passed to the sweep collector's ``from_options``.
        time_budget_s: start no new problem after this many seconds (every finished problem is
            already on disk; rerun to resume). None = no limit. Lets a run fit a time-limited job.
        top_up: sweep only. A problem already in the output is measured again for the sampled
            Triton configs it lacks (after ``max_configs`` was raised, say), with ATen timed again
            beside them; a problem that lacks none is skipped as usual.
        checkpoint_s: sweep only. A problem whose kernels are still compiling (or, once
            compiled, being timed) after this many seconds has what is timed so far saved (again
            every ``checkpoint_s``) to the sidecar ``OUT.partial`` (:func:`partial_path`), so an
            interrupted long problem (a full EXHAUSTIVE space of fp32 compiles for minutes, or
            1,240 large kernels to time) keeps its timed configs; a rerun times
            only the rest and the problem enters ``OUT`` once it is complete (:func:`settle_partials`).
            None: a problem is saved whole or not at all.
        defer_stalled: a problem whose saved parts (``OUT.partial``) include kernels stopped by
            the sweep's compile time limit, or come from two or more runs (it was resumed and is
            still unfinished: it needs more than a run), is measured after all the others
            (:func:`defer_stalled`): such a problem can hold a GPU for that limit per wave of
            compiles, or for several chunks, and a resumed run should not spend its time on it
            before the rest.
    """

    collector: str = "inductor"
    device: str = "cuda"
    search_space: str = "DEFAULT"
    search_mode: str = "max-autotune"
    via_linear: bool = False
    hardware: str | None = None
    workers: int | None = None
    rank: int | None = None
    world_size: int | None = None
    format: str | None = None
    progress: bool = True
    seed: int | None = None
    command: str = ""
    sweep_options: tuple[tuple[str, Any], ...] = ()
    time_budget_s: float | None = None
    top_up: bool = False
    checkpoint_s: float | None = None
    defer_stalled: bool = True

    def __post_init__(self) -> None:
        from torch_diode.collect.inductor import SEARCH_MODES, SEARCH_SPACES

        if self.collector not in COLLECTORS:
            raise ValueError(f"collector: must be one of {', '.join(COLLECTORS)}, got {self.collector!r}")
        if self.device not in DEVICES:
            raise ValueError(f"device: must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.search_space not in SEARCH_SPACES:
            raise ValueError(f"search_space: must be one of {', '.join(SEARCH_SPACES)}, got {self.search_space!r}")
        if self.search_mode not in SEARCH_MODES:
            raise ValueError(f"search_mode: must be one of {', '.join(SEARCH_MODES)}, got {self.search_mode!r}")
        if self.workers is not None and (
            isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1
        ):
            raise ValueError(f"workers (--workers): must be a positive integer or None, got {self.workers!r}")
        if (self.rank is None) != (self.world_size is None):
            raise ValueError(
                f"rank and world_size: give both or neither, got rank={self.rank!r}, world_size={self.world_size!r}"
            )
        if self.world_size is not None and (self.world_size < 1 or not 0 <= (self.rank or 0) < self.world_size):
            raise ValueError(
                f"rank: must be in [0, world_size), got rank={self.rank!r}, world_size={self.world_size!r}"
            )
        if self.format is not None:
            format_for_path("x", self.format)
        if self.top_up and self.collector != "sweep":
            raise ValueError(
                "top_up (--top-up): only the sweep collector (--collector sweep) can add configs to problems "
                "already measured"
            )
        if self.checkpoint_s is not None:
            if self.collector != "sweep":
                raise ValueError(
                    "checkpoint_s (--checkpoint): only the sweep collector (--collector sweep) saves a problem in parts"
                )
            if isinstance(self.checkpoint_s, bool) or not self.checkpoint_s > 0:
                raise ValueError(
                    f"checkpoint_s (--checkpoint): must be a positive number of seconds or None, got {self.checkpoint_s!r}"
                )
        object.__setattr__(self, "sweep_options", tuple(sorted(dict(self.sweep_options).items())))


@dataclass
class CollectSummary:
    """What a ``collect`` call did. Times in seconds."""

    output: Path
    problems_total: int = 0
    problems_skipped: int = 0  # already in the output (resume)
    problems_measured: int = 0
    problems_failed: int = 0  # measured, but no record (a FailureRecord says why)
    records: int = 0
    choice_failures: int = 0
    skipped_choices: dict[str, int] = field(default_factory=dict)  # choices without a config, per backend
    failure_reasons: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    shards: list[Path] = field(default_factory=list)

    @property
    def configs_per_s(self) -> float:
        return self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def add(self, other: CollectSummary) -> None:
        for name in (
            "problems_total",
            "problems_skipped",
            "problems_measured",
            "problems_failed",
            "records",
            "choice_failures",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for mine, theirs in (
            (self.skipped_choices, other.skipped_choices),
            (self.failure_reasons, other.failure_reasons),
        ):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v

    def line(self) -> str:
        s = (
            f"{plural(self.problems_measured, 'problem')} measured ({self.problems_failed:,} failed), "
            f"{self.problems_skipped:,} already done, {plural(self.records, 'record')} in {self.elapsed_s:.1f} s "
            f"({self.configs_per_s:.2f} configs/s)"
        )
        if self.skipped_choices:
            s += "; skipped choices without a config: " + ", ".join(
                f"{k} {v}" for k, v in sorted(self.skipped_choices.items())
            )
        return s


def shard(problems: Sequence[Problem], rank: int, world_size: int) -> list[Problem]:
    """Rank ``rank``'s share of the de-duplicated problems: every ``world_size``-th, from ``rank``."""
    return unique(problems)[rank::world_size]


def shard_path(output: str | os.PathLike[str], rank: int) -> Path:
    """``OUT.rank{r}.<ext>`` next to ``OUT`` (the extension kept, so the format is unchanged)."""
    p = Path(output)
    return p.with_name(f"{p.stem}.rank{rank}{p.suffix}")


def shard_files(output: str | os.PathLike[str], suffix: str = "") -> list[Path]:
    """The shard files ``OUT.rank{r}.<ext>`` (with ``suffix``: ``OUT.rank{r}.<ext><suffix>``) that
    exist beside ``output``, by rank: what a multi-worker run writes, or left when it was killed,
    and what torchrun's ranks write."""
    out = Path(output)
    pattern = re.compile(re.escape(out.stem) + r"\.rank(\d+)" + re.escape(out.suffix + suffix))
    found = []
    for f in out.parent.glob(f"{glob.escape(out.stem)}.rank*{glob.escape(out.suffix + suffix)}"):
        m = pattern.fullmatch(f.name)
        if m and f.is_file():
            found.append((int(m.group(1)), f))
    return [f for _, f in sorted(found)]


def merge_shards(
    output: str | os.PathLike[str],
    shards: Sequence[str | os.PathLike[str]],
    *,
    format: str | None = None,
    remove: bool = True,
    settings: Mapping[str, str] | None = None,
) -> Path:
    """Merge shard files (and ``output`` itself, when it exists) into ``output`` atomically, then
    settle the checkpointed parts beside it (:func:`settle_partials`).

    Truncated shards (an interrupted rank) keep their complete chunks. With ``remove`` the shards
    are deleted once the merged file is written. With ``settings`` (a run's settings, as its
    sources record them: :data:`~torch_diode.dataset.RUN_SETTINGS`), each file is checked as it is
    read, the shards first, then the checkpointed parts, then ``output``, and one collected with
    other settings (or a damaged one) is refused before anything is written; without, the parts are
    read after the merge (a damaged one raises with the shards merged).

    Raises:
        FileInUseError: a writer (a rank still running) is appending to one of the shards.
        ValueError: with ``settings``, a file was collected with other ones
            (:func:`~torch_diode.dataset.check_run_settings`).
    """
    out = Path(output)
    busy = [Path(s).name for s in shards if file_in_use(s)]
    if busy:  # merged, then removed: a writer still appending to one would write into nothing
        raise FileInUseError(
            f"{out}: its {plural(len(busy), 'shard file')} {', '.join(busy)} {'is' if len(busy) == 1 else 'are'} being written by another process (a collection "
            "into the same output still running?); wait for it to end, or write to another output"
        )
    here = out.exists() and out.stat().st_size > 0
    found = [Path(s) for s in shards if Path(s).exists() and Path(s).stat().st_size > 0]
    if not here and not found:
        raise CollectionError(f"{out}: no shard files to merge ({', '.join(map(str, shards))} do not exist)")
    fmt = format_for_path(out, format)
    # Every file read once. With settings, all of them before anything is written (a file of other
    # settings refused first); without, the checkpointed parts after the merge, so that a damaged
    # one does not keep the shards' finished problems out of OUT.
    ranks = [_read_checked(s, fmt, settings) for s in found]
    partials = _read_partials(out, fmt, settings) if settings is not None else None
    main = [_read_checked(out, fmt, settings)] if here else []
    merged = merge_datasets([*main, *ranks])
    del main, ranks  # the merge holds what is kept
    write_dataset(merged, out, format=format)
    if remove:
        for s in shards:
            if Path(s).exists() and Path(s) != out:
                Path(s).unlink()
    if settings is None:
        partials = _read_partials(out, fmt, None)
    if partials is not None:
        _settle(out, fmt, merged, *partials)
    return out


def _read_checked(path: Path, format: str | None, settings: Mapping[str, str] | None) -> Dataset:
    """``path`` read (the tail of an interrupted write cut off) and, with ``settings``, refused
    when it was collected with other ones (:func:`~torch_diode.dataset.check_run_settings`)."""
    ds = read_dataset(path, format=format, recover=True)
    if settings is not None:
        check_run_settings(path, ds.sources, settings)
    return ds


def partial_path(output: str | os.PathLike[str]) -> Path:
    """The sidecar ``OUT.partial`` (same format as ``OUT``) holding the timed parts of problems not
    finished yet (:attr:`CollectOptions.checkpoint_s`). Its name has no dataset extension, so
    directory scans (``--data-dir``) never take it for a dataset."""
    p = Path(output)
    return p.with_name(p.name + ".partial")


def _partial_files(output: Path) -> list[Path]:
    """``OUT.partial`` and the shards' ``OUT.rank{r}.<ext>.partial`` that exist and are not empty."""
    files = [partial_path(output), *shard_files(output, ".partial")]
    return [f for f in files if f.is_file() and f.stat().st_size > 0]


def settle_partials(
    output: str | os.PathLike[str], *, format: str | None = None, settings: Mapping[str, str] | None = None
) -> int:
    """Move the checkpointed parts of every problem that ``output`` now holds complete into it,
    and gather the parts of unfinished problems into ``OUT.partial`` (the shards' sidecars are
    folded into it and removed). Safe to repeat: a record already in ``output`` is not added
    twice. Returns how many problems were completed from their parts.

    With ``settings`` (as :func:`merge_shards` takes them), each file is checked as it is read, the
    parts first, then ``output``, and one collected with other settings is refused before anything
    is written.

    Raises:
        ValueError: with ``settings``, a file was collected with other ones.
    """
    out = Path(output)
    fmt = format_for_path(out, format)
    partials = _read_partials(out, fmt, settings)
    if partials is None:
        return 0
    main = _read_checked(out, fmt, settings) if out.exists() and out.stat().st_size > 0 else None
    return _settle(out, fmt, main, *partials)


def _read_partials(output: Path, format: str, settings: Mapping[str, str] | None) -> tuple[list[Path], Dataset] | None:
    """The checkpointed parts beside ``output`` (:func:`_partial_files`), each read once and
    checked against ``settings`` (:func:`_read_checked`): the files and their merged contents, or
    None when there are none."""
    files = _partial_files(output)
    if not files:
        return None
    return files, merge_datasets(_read_checked(f, format, settings) for f in files)


def _settle(out: Path, fmt: str, main: Dataset | None, files: Sequence[Path], parts: Dataset) -> int:
    """:func:`settle_partials` of what is read already: ``main`` (``out``'s contents, None when it
    is empty or missing) and ``parts`` (those of the partial ``files``)."""
    done = main.collected_problems() if main is not None else set()
    part_problems = set(parts.problems)
    finished = part_problems & done
    if finished and main is not None:
        write_dataset(merge_datasets([main, parts.select_problems(finished)]), out, format=fmt)
    rest = parts.select_problems(part_problems - finished)
    side = partial_path(out)
    if len(rest) or rest.failures:
        write_dataset(rest, side, format=fmt)
    elif side.exists():
        side.unlink()
    for f in files:
        if f != side and f.exists():
            f.unlink()
    if finished:
        log.info("%s: %s completed from checkpointed parts", out, plural(len(finished), "problem"))
    return len(finished)


def _read_partial(output: str | os.PathLike[str], format: str | None) -> Dataset | None:
    side = partial_path(output)
    if not side.is_file() or side.stat().st_size == 0:
        return None
    return read_dataset(side, format=format_for_path(output, format), recover=True)


def partial_choices(output: str | os.PathLike[str], format: str | None = None) -> dict[Problem, set[Choice]]:
    """The choices (timed or failed) that ``OUT.partial`` holds per unfinished problem."""
    parts = _read_partial(output, format)
    return {} if parts is None else parts.measured_choices()


def _timeouts(parts: Dataset | None) -> dict[Problem, int]:
    if parts is None:
        return {}
    return dict(collections.Counter(f.problem for f in parts.failures if f.reason == "timeout" and f.choice))


def stalled_problems(output: str | os.PathLike[str], format: str | None = None) -> dict[Problem, int]:
    """The unfinished problems whose parts in ``OUT.partial`` include kernels stopped by the
    compile time limit (reason ``timeout``), with how many such kernels each."""
    return _timeouts(_read_partial(output, format))


def _runs(parts: Dataset | None) -> dict[Problem, int]:
    """The unfinished problems whose timed parts come from two or more runs (sources), with how many."""
    if parts is None:
        return {}
    runs: dict[int, set[int]] = {}
    for p, src in zip(parts.problem_idx.tolist(), parts.source_idx.tolist(), strict=True):
        runs.setdefault(p, set()).add(src)
    return {parts.problems[p]: len(s) for p, s in runs.items() if len(s) >= 2}


def resumed_problems(output: str | os.PathLike[str], format: str | None = None) -> dict[Problem, int]:
    """The unfinished problems whose parts in ``OUT.partial`` were timed by two or more runs: a
    run resumed them and still did not finish them; with how many runs each."""
    return _runs(_read_partial(output, format))


def _late(parts: Dataset | None) -> dict[Problem, str]:
    late = {p: f"{n} runs, unfinished" for p, n in _runs(parts).items()}
    late.update({p: f"{n} stopped by the compile time limit" for p, n in _timeouts(parts).items()})
    return late


def defer_stalled(problems: list[Problem], output: str | os.PathLike[str], format: str | None = None) -> list[Problem]:
    """``problems`` with the stalled ones (:func:`stalled_problems`) and those resumed and still
    unfinished (:func:`resumed_problems`) moved to the end, each group in its given order: a
    problem whose kernels take longer than the compile limit to compile costs that limit per wave
    of compiles, and one that outlasts a run (a full-space fp32 validation problem of 1,400
    kernels can take several), so a resumed run measures the rest first."""
    return _deferred(problems, _late(_read_partial(output, format)), output)


def _resume_partial(
    problems: list[Problem], parts: Dataset | None, output: Path, options: CollectOptions
) -> tuple[list[Problem], dict[Problem, set[Choice]]]:
    """What a run takes from ``OUT.partial`` (its contents ``parts``, read once): ``problems`` (the
    stalled ones last when ``options.defer_stalled``) and the choices already saved per unfinished
    problem."""
    if parts is None:
        return problems, {}
    if options.defer_stalled:
        problems = _deferred(problems, _late(parts), output)
    return problems, parts.measured_choices()


def _deferred(problems: list[Problem], late: Mapping[Problem, str], output: str | os.PathLike[str]) -> list[Problem]:
    """``problems`` with those in ``late`` (problem -> why) moved to the end, each group in order."""
    later = [p for p in problems if p in late]
    if not later:
        return problems
    log.info(
        "%s: to measure last, %s stalled by the compile time limit or unfinished after a resumed run: %s",
        output,
        plural(len(later), "problem"),
        "; ".join(f"{p.key()} ({late[p]})" for p in later),
    )
    return [p for p in problems if p not in late] + later


def _env_int(name: str) -> int | None:
    v = os.environ.get(name)
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"environment variable {name}={v!r} is not an integer") from None


def _hardware_key(options: CollectOptions) -> str:
    if options.hardware:
        if options.device == "cuda":
            _check_hardware_is_this_gpu(options.hardware)
        return options.hardware
    if options.device == "cpu":
        return f"cpu-{platform.machine() or 'unknown'}"
    from torch_diode.hardware import detect

    info = detect()
    if info.key is None:
        raise CollectionError(
            f"cannot name the GPU for the records: {info.reason}; pass --hardware KEY (CollectOptions.hardware)"
        )
    return info.key


def _check_hardware_is_this_gpu(key: str) -> None:
    """Refuse to label this GPU's timings with another known GPU's key: a dataset holds one GPU's
    timings. A GPU torch-diode does not know (no key detected), a failed detection, or a key set in
    ``TORCH_DIODE_HARDWARE`` (the user's own statement) is taken at its word."""
    from torch_diode.hardware import HardwareError, detect

    try:
        info = detect()
    except HardwareError:
        return
    if info.source == "env" or info.key is None or info.key == key:
        return
    raise CollectionError(
        f"this GPU is {info.name or 'a GPU'} (hardware key {info.key}), but its timings were to be recorded as "
        f"{key}: one dataset holds one GPU's timings. Pass --hardware {info.key} (CollectOptions.hardware), run on "
        f"a {key} GPU, or set TORCH_DIODE_HARDWARE={key} if this GPU really is to be counted as one"
    )


def driver_version() -> str:
    """The GPU driver version from nvidia-smi (empty when it cannot be read)."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return ""
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else ""


def _sweep_kernels(options: CollectOptions) -> str:
    """Which kernels a sweep times: Inductor's own (literal sizes) or ones shared across problems;
    none for the Inductor collector."""
    if options.collector != "sweep":
        return ""
    return "literal" if dict(options.sweep_options).get("literal_sizes", True) else "shared-spec"


#: How a run's options give each of :data:`~torch_diode.dataset.RUN_SETTINGS` ("": the run has
#: no such setting, and records none). :func:`_settings_of` looks each of those names up here.
_SETTING_OF: dict[str, Callable[[CollectOptions], str]] = {
    "collector": lambda o: o.collector,
    "search_space": lambda o: o.search_space,
    "search_mode": lambda o: o.search_mode,
    "via_linear": lambda o: str(o.via_linear),
    "sweep_kernels": _sweep_kernels,
}


def _settings_of(options: CollectOptions) -> dict[str, str]:
    """What a run's sources record of the settings that decide what its timings measure
    (:data:`~torch_diode.dataset.RUN_SETTINGS`, in that order; a file of other settings is not
    resumed: ``torch_diode.dataset.check_run_settings``)."""
    values = {name: _SETTING_OF[name](options) for name in RUN_SETTINGS}
    return {name: value for name, value in values.items() if value != ""}


def _provenance(options: CollectOptions, hardware: str) -> Provenance:
    import torch

    try:
        import triton

        triton_version = str(triton.__version__)
    except ImportError:
        triton_version = ""
    gpu_name = driver = ""
    if options.device == "cuda" and torch.cuda.is_available():
        gpu_name = torch.cuda.get_device_name()
        driver = driver_version()
    extra = {
        **{k: v for k, v in _settings_of(options).items() if k != "collector"},
        "device": options.device,
        "python": platform.python_version(),
        "cuda": str(torch.version.cuda or ""),
        "hip": str(torch.version.hip or ""),
    }
    if options.collector == "sweep":
        extra["sweep_options"] = ",".join(f"{k}={v}" for k, v in sorted(dict(options.sweep_options).items()))
    return Provenance(
        hardware=hardware,
        gpu_name=gpu_name,
        driver=driver,
        torch_version=str(torch.__version__),
        triton_version=triton_version,
        collector=options.collector,
        command=options.command or " ".join(sys.argv),
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        seed=options.seed,
        extra=tuple(extra.items()),
    )


def _make_collector(options: CollectOptions, hardware: str, device: str) -> Any:
    if options.collector == "sweep":
        from torch_diode.collect.sweep import SweepCollector

        return SweepCollector.from_options(options, hardware=hardware, device=device, **dict(options.sweep_options))
    from torch_diode.collect.inductor import InductorCollector

    return InductorCollector(
        hardware=hardware,
        device=device,
        search_space=options.search_space,
        mode=options.search_mode,
        via_linear=options.via_linear,
    )


class _Progress:
    """A tqdm bar when available, else nothing (the summary line is logged either way)."""

    def __init__(self, total: int, enabled: bool, position: int, desc: str) -> None:
        self.bar: Any = None
        self.start = time.monotonic()
        if enabled and total:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                log.info("install tqdm for a progress bar")
            else:
                self.bar = tqdm(total=total, unit="problem", position=position, desc=desc, dynamic_ncols=True)

    def update(self, records: int) -> None:
        if self.bar is not None:
            rate = records / max(time.monotonic() - self.start, 1e-9)
            self.bar.set_postfix_str(f"{records} configs, {rate:.1f} configs/s", refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _run_rank(
    problems: Sequence[Problem],
    options: CollectOptions,
    path: Path,
    *,
    device: str,
    done: frozenset[Problem] = frozenset(),
    measured: Mapping[Problem, Collection[Choice]] | None = None,
    partial: Mapping[Problem, Collection[Choice]] | None = None,
    position: int = 0,
) -> CollectSummary:
    """Collect ``problems`` into ``path`` (one process, one device), resuming what is there.

    ``done``: problems another file (the merged output of sharded runs) already holds;
    ``measured``: with ``options.top_up``, the choices that file holds per problem;
    ``partial``: the choices the output's ``OUT.partial`` holds per unfinished problem (timed
    again only where missing)."""
    start = time.monotonic()
    hardware = _hardware_key(options)
    summary = CollectSummary(output=path, problems_total=len(problems))
    with DatasetWriter(path, _provenance(options, hardware), format=options.format) as writer:
        if writer.recovered_bytes:
            log.warning(
                "%s: cut off %s of an interrupted write; resuming", path, plural(writer.recovered_bytes, "byte")
            )
        skip = writer.problems_done | done
        writer.flush()  # write this run's provenance even if it is interrupted before a record
        collector = _make_collector(options, hardware, device)
        # Choices not to time again: an unfinished problem's parts, and with top_up what is collected.
        have: dict[Problem, set[Choice]] = {}
        for src in (partial or {}, *((measured or {}, writer.choices_done) if options.top_up else ())):
            for p, c in src.items():
                have.setdefault(p, set()).update(c)
        if have and hasattr(collector, "skip_measured"):
            collector.skip_measured(have)
        if options.top_up:
            again = {p for p in problems if p in skip and p in have and collector.needs_top_up(p)}
            if again:
                log.info(
                    "%s: %s already collected, short of sampled configs: topping up",
                    path,
                    plural(len(again), "problem"),
                )
            skip = skip - again
        todo = [p for p in problems if p not in skip]
        summary.problems_skipped = len(problems) - len(todo)
        if summary.problems_skipped:
            log.info(
                "%s: %s of %s already collected; %s to go",
                path,
                f"{summary.problems_skipped:,}",
                plural(len(problems), "problem"),
                f"{len(todo):,}",
            )
        progress = _Progress(
            len(todo), options.progress, position, desc=f"collect[{position}]" if position else "collect"
        )
        reasons: collections.Counter[str] = collections.Counter()
        part_writer: DatasetWriter | None = None

        def save_part(records: list[TimingRecord], failures: list[FailureRecord]) -> None:
            nonlocal part_writer
            if part_writer is None:
                part_writer = DatasetWriter(partial_path(path), writer.provenance, format=writer.format)
            for r in records:
                part_writer.add(r)
            for f in failures:
                part_writer.add_failure(f)
            part_writer.flush()

        measure_kw: dict[str, Any] = {}
        if options.checkpoint_s is not None:
            measure_kw = {"on_part": save_part, "part_s": options.checkpoint_s}
        try:
            with collector if hasattr(collector, "__enter__") else contextlib.nullcontext():
                # The sweep compiles kernels in the background: keep a few problems ahead queued.
                prefetch = getattr(collector, "prefetch", None)
                for i, problem in enumerate(todo):
                    if options.time_budget_s is not None and time.monotonic() - start > options.time_budget_s:
                        log.info(
                            "%s: time budget of %.0f s spent after %s; rerun to resume",
                            path,
                            options.time_budget_s,
                            plural(i, "problem"),
                        )
                        break
                    if prefetch is not None:
                        prefetch(todo[i : i + 1 + PREFETCH_PROBLEMS])
                    t_problem = time.monotonic()
                    records, failures = collector.measure(problem, **measure_kw)
                    log.info(
                        "%s: %d records, %d failures in %.1f s",
                        problem.key(),
                        len(records),
                        len(failures),
                        time.monotonic() - t_problem,
                    )
                    for r in records:
                        writer.add(r)
                    for f in failures:
                        writer.add_failure(f)
                        if f.choice is None:
                            reasons[f.reason] += 1
                    writer.flush()  # one chunk per problem: an interrupt loses at most the current one
                    summary.problems_measured += 1
                    summary.records += len(records)
                    summary.choice_failures += sum(f.choice is not None for f in failures)
                    if not records:
                        summary.problems_failed += 1
                    progress.update(summary.records)
        finally:
            if part_writer is not None:
                part_writer.close()
            progress.close()
            summary.elapsed_s = time.monotonic() - start
            summary.failure_reasons = dict(reasons)
            summary.skipped_choices = dict(getattr(collector, "skipped", {}) or {})
    return summary


def _check_result(summary: CollectSummary) -> None:
    if summary.problems_measured and not summary.records:
        reasons = ", ".join(f"{k} x{v}" for k, v in sorted(summary.failure_reasons.items())) or "no failure recorded"
        raise CollectionError(
            f"collected nothing: {plural(summary.problems_measured, 'problem')} measured, 0 records ({reasons}); the "
            f"failures are in {summary.output} and logged above"
        )


def _worker_main(
    rank: int,
    world: int,
    problems: list[Problem],
    options: CollectOptions,
    path: str,
    done: frozenset[Problem],
    measured: Mapping[Problem, Collection[Choice]] | None = None,
    partial: Mapping[Problem, Collection[Choice]] | None = None,
    parent: int | None = None,
) -> CollectSummary:
    """Entry point of a local worker process (``multiprocessing`` spawn). It ends with its
    ``parent`` (the collecting process, by its pid as the parent sent it: it may have died while
    this process started), and stops on SIGTERM as on Ctrl-C, its shard closed."""
    logging.basicConfig(level=logging.INFO, format=f"[rank {rank}] %(message)s")
    if parent is not None:
        exit_with_parent(parent)
    device = "cpu" if options.device == "cpu" else f"cuda:{rank}"
    options = _share_compile_cpus(options, world)
    if device.startswith("cuda"):
        import torch

        torch.cuda.set_device(rank)
    with sigterm_interrupts():
        return _run_rank(
            shard(problems, rank, world),
            options,
            Path(path),
            device=device,
            done=done,
            measured=measured,
            partial=partial,
            position=rank,
        )


def _share_compile_cpus(options: CollectOptions, local_processes: int) -> CollectOptions:
    """Give each of ``local_processes`` sweep collectors on this host its share of the CPUs for
    compiling (unless the caller chose ``workers``), instead of every one starting a pool as large
    as the machine."""
    sweep = dict(options.sweep_options)
    if options.collector != "sweep" or local_processes <= 1 or "workers" in sweep:
        return options
    sweep["workers"] = max(1, (os.cpu_count() or 2) // local_processes - 1)
    return replace(options, sweep_options=tuple(sweep.items()))


def _read_all_checked(
    files: Iterable[Path], format: str | None, settings: Mapping[str, str]
) -> Iterator[tuple[Path, Dataset]]:
    """Those of ``files`` that exist and are not empty, read one at a time in that order, each
    refused when collected with other ``settings`` (:func:`_read_checked`)."""
    for f in files:
        if f.is_file() and f.stat().st_size > 0:
            yield f, _read_checked(f, format, settings)


def _add_done(ds: Dataset, done: set[Problem], measured: dict[Problem, set[Choice]] | None) -> None:
    """Add to ``done`` the problems ``ds`` holds (measured, or failed as a whole: a resumed run
    skips them) and, unless ``measured`` is None, to it the choices measured (or failed) per problem."""
    done |= ds.collected_problems()
    if measured is not None:
        for problem, choices in ds.measured_choices().items():
            measured.setdefault(problem, set()).update(choices)


def _problems_done(
    output: Path, options: CollectOptions
) -> tuple[frozenset[Problem], dict[Problem, set[Choice]] | None]:
    """The problems already in ``output`` and, with ``options.top_up``, the choices it holds per
    problem (:func:`_add_done`), for workers that read it without a writer of their own. A file
    collected with other settings (:func:`_settings_of`) is refused: the workers' shards would be
    merged into it."""
    done: set[Problem] = set()
    measured: dict[Problem, set[Choice]] | None = {} if options.top_up else None
    for _, ds in _read_all_checked([output], options.format, _settings_of(options)):
        _add_done(ds, done, measured)
    return frozenset(done), measured


def _resume_rank(
    output: Path, own: Path, options: CollectOptions
) -> tuple[frozenset[Problem], dict[Problem, set[Choice]] | None, Dataset | None]:
    """What a torchrun rank resumes from, each file read once and, before anything is measured or
    skipped, refused when collected with other settings (:func:`_settings_of`), in this order: the
    shards beside ``output`` (this rank's own shard ``own`` too, to be checked in its turn, though
    its writer reads it again to resume it), the checkpointed parts, then ``output``. Returns the problems
    done in ``output`` and the other shards (after a run of another WORLD_SIZE, a problem in a shard
    of another rank number is not measured again), with ``options.top_up`` their choices per
    problem too, and the contents of ``OUT.partial``."""
    shards = shard_files(output)
    side = partial_path(output)
    done: set[Problem] = set()
    measured: dict[Problem, set[Choice]] | None = {} if options.top_up else None
    parts = None
    files = [*shards, *_partial_files(output), output]
    for f, ds in _read_all_checked(files, options.format, _settings_of(options)):
        if f == side:
            parts = ds
        elif f == output or (f in shards and f != own):
            _add_done(ds, done, measured)
    return frozenset(done), measured, parts


def _merge_leftover_shards(output: Path, format: str | None, settings: Mapping[str, str]) -> bool:
    """Merge into ``output`` the shards that a multi-worker run killed before its merge (SIGKILL,
    a lost machine) left beside it, before anything is measured: otherwise a rerun with one
    worker measured their problems again, and one with another number of workers merged them in
    as duplicates of its own measurements. Files of other ``settings`` are refused first
    (:func:`merge_shards`). Returns whether there were any (their merge settles the checkpointed
    parts too)."""
    leftovers = shard_files(output)
    if not any(f.stat().st_size > 0 for f in leftovers):
        return False
    merge_shards(output, leftovers, format=format, settings=settings)
    log.warning(
        "%s: merged %s that an interrupted run left (%s) into it before resuming",
        output,
        plural(len(leftovers), "shard file"),
        ", ".join(f.name for f in leftovers),
    )
    return True


def _spawn_workers(
    problems: list[Problem],
    options: CollectOptions,
    output: Path,
    workers: int,
    partial: Mapping[Problem, Collection[Choice]],
) -> CollectSummary:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    done, measured = _problems_done(output, options)
    shards = [shard_path(output, r) for r in range(workers)]
    total = CollectSummary(output=output, problems_total=0, shards=shards)
    start = time.monotonic()
    ctx = mp.get_context("spawn")  # CUDA cannot be re-initialised in a forked child
    errors = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = [
            pool.submit(
                _worker_main, r, workers, problems, options, str(shards[r]), done, measured, partial, os.getpid()
            )
            for r in range(workers)
        ]
        try:
            for r, fut in enumerate(futures):
                try:
                    total.add(fut.result())
                except Exception as e:  # one rank failing must not hide the others' results
                    errors.append(f"rank {r}: {type(e).__name__}: {e}")
        except KeyboardInterrupt:
            # Ctrl-C, `timeout` or `kill` (SIGTERM: sigterm_interrupts): stop the workers, then merge
            # what they flushed (every finished problem) so the output holds it even if the run is
            # never resumed. A second signal (`timeout` signals the process and then its group;
            # session 8's x4 chunk) must not cut this short: it left the shards unmerged and the
            # ranks to be SIGKILLed.
            with interrupts_ignored():
                _stop_workers(pool, futures)
                merge_shards(output, shards, format=options.format)
            log.warning("%s: interrupted; the finished problems of every rank are merged into it", output)
            raise
    total.elapsed_s = time.monotonic() - start
    merge_shards(output, shards, format=options.format)
    if errors:
        raise CollectionError(
            "; ".join(errors) + f" (the other ranks' records were merged into {output}; rerun to resume)"
        )
    return total


@contextlib.contextmanager
def _signal_handlers(handlers: Mapping[int, Any]) -> Iterator[None]:
    """``handlers`` (signal -> handler) set for the block in the main thread (signal handlers can
    only be set there; elsewhere the block runs unchanged), then the previous ones put back."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def interrupts_ignored() -> contextlib.AbstractContextManager[None]:
    """Ignore SIGINT (Ctrl-C, ``timeout --signal=INT``) and SIGTERM (``timeout``'s default,
    ``kill``) for the block, in the main thread. For clean-up that a second signal must not cut
    short: ``timeout`` signals the process and then its whole group."""
    import signal

    return _signal_handlers({signal.SIGINT: signal.SIG_IGN, signal.SIGTERM: signal.SIG_IGN})


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated(f"signal {signum}")


def sigterm_interrupts() -> contextlib.AbstractContextManager[None]:
    """Make SIGTERM stop the block as Ctrl-C does (:class:`~torch_diode.errors.Terminated`, a
    ``KeyboardInterrupt``), in the main thread, so that ``kill`` or ``timeout`` runs the same
    clean-up: the writers closed, the workers stopped, the shards merged. Python's default for
    SIGTERM ends the process at once, which left a run's workers orphaned and its shards
    unmerged. Only Python's default is replaced: a SIGTERM that is ignored stays ignored, and a
    program's own handler stays its own. The default is put back after the block."""
    import signal

    default = signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    return _signal_handlers({signal.SIGTERM: _raise_terminated} if default else {})


def exit_with_parent(parent: int, every_s: float = 0.5) -> None:
    """End this process (a worker) as soon as ``parent`` is gone (killed with SIGKILL, say): a
    worker left behind would run on, or wait forever for work no one will send. Everything it
    finished is on disk already: the collectors flush after every problem."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, name="diode-parent-watch", daemon=True).start()


def _stop_workers(pool: Any, futures: Sequence[Any], grace_s: float = 10.0) -> None:
    """Interrupt ``pool``'s worker processes and wait for them, for a bounded time. A terminal's
    Ctrl-C (or ``timeout``) reaches the whole process group, so the workers usually stop by
    themselves; those still running after ``grace_s`` get SIGINT (one signal each: a second one
    could cut a flush), after 3 x ``grace_s`` more SIGTERM (which they take as an interrupt too),
    and after ``grace_s`` more SIGKILL: a worker stuck in a device call must not hold the run (and
    its signals are ignored during this clean-up). Every finished problem is on disk already."""
    import concurrent.futures
    import signal

    procs = list((getattr(pool, "_processes", None) or {}).values())
    for sig, wait_s in ((None, grace_s), (signal.SIGINT, 3 * grace_s), (signal.SIGTERM, grace_s)):
        if sig is not None:
            for proc in procs:
                if proc.is_alive():
                    with contextlib.suppress(OSError):
                        os.kill(proc.pid, sig)
        _, running = concurrent.futures.wait(futures, timeout=wait_s)
        if not running:
            break
    else:
        for proc in procs:
            if proc.is_alive():
                log.warning("rank process %d did not stop: killed (its finished problems are kept)", proc.pid)
                with contextlib.suppress(OSError):
                    proc.kill()
    pool.shutdown(wait=True, cancel_futures=True)


def collect(
    problems: Iterable[Problem], options: CollectOptions, output_path: str | os.PathLike[str]
) -> CollectSummary:
    """Measure every problem with the chosen collector and append the records to ``output_path``.

    Args:
        problems: the GEMM problems (duplicates are collected once).
        options: how (see :class:`CollectOptions`).
        output_path: the dataset file (``.msgpack`` or ``.json``); created, or resumed when it exists.

    Returns:
        A :class:`CollectSummary` (its ``output`` is the file written: ``output_path``, or this
        rank's shard under torchrun).

    Raises:
        CollectionError: problems were measured but nothing was recorded, a rank failed, or the
            GPU cannot be identified.
        ValueError: no problems, or a bad option.
    """
    with sigterm_interrupts():
        return _collect(problems, options, output_path)


def _collect(
    problems: Iterable[Problem], options: CollectOptions, output_path: str | os.PathLike[str]
) -> CollectSummary:
    plist = unique(problems)
    if not plist:
        raise ValueError("problems: nothing to collect (the problem list is empty)")
    output = Path(output_path)
    format_for_path(output, options.format)
    output.parent.mkdir(parents=True, exist_ok=True)
    rank, world = options.rank, options.world_size
    if rank is None:
        env_world = _env_int("WORLD_SIZE")
        if env_world is not None and env_world > 1:
            rank, world = _env_int("RANK") or 0, env_world
            if not 0 <= rank < world:  # a shard nobody merges (rank5 of 2, rank-1)
                raise ValueError(
                    f"environment variables RANK={rank} and WORLD_SIZE={world}: RANK must be in [0, WORLD_SIZE) "
                    "(torchrun sets both; unset them to collect in one process)"
                )
    if world is not None and world > 1:
        # One rank of a torchrun (or hand-sharded) job: this process's shard only.
        local = _env_int("LOCAL_RANK")
        device = options.device
        if device == "cuda":
            import torch

            local = (rank or 0) % max(torch.cuda.device_count(), 1) if local is None else local
            torch.cuda.set_device(local)
            device = f"cuda:{local}"
        path = shard_path(output, rank or 0)
        done, measured, parts = _resume_rank(output, path, options)
        plist, partial = _resume_partial(plist, parts, output, options)  # before sharding: every rank reads the same
        options = _share_compile_cpus(options, _env_int("LOCAL_WORLD_SIZE") or 1)
        with output_lock(output, shared=True):  # the ranks together; no merge of OUT meanwhile
            summary = _run_rank(
                shard(plist, rank or 0, world),
                options,
                path,
                device=device,
                done=done,
                measured=measured,
                partial=partial,
                position=0,
            )
        summary.shards = [path]
        log.info("rank %d/%d: %s; join the shards with `diode data merge`", rank, world, summary.line())
        _check_result(summary)
        return summary
    # One run at a time writes, merges or replaces OUT and its sidecars: a second one (or a
    # `diode data merge` into OUT) is refused while this one holds OUT.lock.
    with output_lock(output):
        summary = _collect_here(plist, options, output)
    log.debug("%s: %s", output, summary.line())
    _check_result(summary)
    return summary


def _collect_here(plist: list[Problem], options: CollectOptions, output: Path) -> CollectSummary:
    """The local run of ``collect()``: one process, or one worker per GPU and their shards merged."""
    # What a killed run left: its shards merged, its checkpointed parts (its shards' too) settled;
    # each file read once, and refused before anything is merged when of other settings.
    settings = _settings_of(options)
    if not _merge_leftover_shards(output, options.format, settings):
        settle_partials(output, format=options.format, settings=settings)
    plist, partial = _resume_partial(plist, _read_partial(output, options.format), output, options)
    workers = options.workers
    if workers is None:
        if options.device == "cuda":
            import torch

            workers = max(torch.cuda.device_count(), 1)
        else:
            workers = 1
    workers = min(workers, len(plist))
    if workers > 1:
        summary = _spawn_workers(plist, options, output, workers, partial)
    else:
        try:
            summary = _run_rank(
                plist,
                replace(options, workers=1),
                output,
                device=options.device,
                partial=partial,
            )
        finally:
            settle_partials(output, format=options.format)  # interrupted too: the parts stay in OUT.partial
    return summary
