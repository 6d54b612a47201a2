"""The model registry: which models exist, where a model's weights come from, and which one is in use.

Resolution order. :func:`resolve` turns a model name or a path into a verified local file:

1. **An explicit path** (a ``Path``, or a string that names an existing file, contains a path
   separator or ends in ``.safetensors``): used as it is; it must exist.
2. **Installed models packages**, announced in the ``torch_diode.models`` entry-point group and
   discovered on first use (never at import). Each package directory holds a ``manifest.json``
   (:mod:`torch_diode.weights`); a listed file that the wheel carries is verified against the
   manifest's size and sha256 and used. Our own ``torch_diode_models`` is also found by its import
   name when it is on ``sys.path`` without being installed (a source checkout on ``PYTHONPATH``,
   which has no entry-point metadata).
3. **The Hugging Face cache**: a listed file the wheel does not carry (a slim wheel, a model added
   later) is looked up in the cache at the manifest's pinned revision, without network.
4. **A Hub download** at the pinned revision (:func:`torch_diode.hub.fetch_model_file`), verified,
   within a bounded time; skipped when ``HF_HUB_OFFLINE=1`` or ``local_files_only=True``.
5. **Nothing**: :func:`resolve` raises; :func:`autoregister` logs one line and leaves Inductor's
   stock autotuning in place.

The network is touched only in step 4, only while a model is being registered
(:func:`register_model`, :func:`autoregister`), never during a compile: the choices handler
receives a local file and loads and checks its weights when it is installed. ``import
torch_diode_models`` and the meta-wheel's plugin run :func:`autoregister` at import, so with a
models wheel that does not carry its weights (a slim wheel) the first import downloads them,
within ``TORCH_DIODE_HUB_TIMEOUT_S`` (20 s); the full wheel never touches the network.

Entry-point contract (how a models wheel, ours or a user's, plugs in). Declare, in the wheel's
``pyproject.toml``::

    [project.entry-points."torch_diode.models"]
    my_models = "my_models"          # the import name of a package, with no ":attribute"

and put ``manifest.json`` (``python scripts/update_models_manifest.py --package-dir ...`` writes
it) and the ``.safetensors`` files it lists into that package's directory. torch-diode locates the
directory with ``importlib.util.find_spec`` and reads the manifest; it never imports the package,
so a models package's own import-time behaviour (``import torch_diode_models`` registers a model)
never runs during discovery. If two packages list the same model name, the one whose entry-point
name sorts first wins and a warning names both.

Registration. :func:`register_model` installs torch-diode's Inductor choices handler
(:func:`torch_diode.inductor.install.install_diode_choices`) with a resolved model, replacing any
model registered before (and taking over an equal handler installed by hand, so that the next
registration replaces it too); :func:`unregister_model` removes it. :func:`autoregister` (run by
``import torch_diode_models`` and by the ``torch-diode`` meta-wheel's plugin) does this once per
process for the best model for the detected GPU, or for the model ``TORCH_DIODE_MODEL`` names,
so importing both, in either order, registers once.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from torch_diode._text import plural
from torch_diode.errors import DiodeError, HandlerNotInstalledError, HardwareError, ModelFormatError, ModelNotFoundError
from torch_diode.weights import MANIFEST_FILENAME, ManifestError, ModelEntry, read_manifest, verify_file

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "torch_diode.models"
#: The import name of the models package torch-diode ships; found on ``sys.path`` even without
#: its distribution's entry point (a source checkout on ``PYTHONPATH``).
OWN_MODELS_PACKAGE = "torch_diode_models"
#: Held-out metric used to pick among several models for one GPU (lower is better; the README's
#: regret@1 geomean). Models that do not record it rank after those that do, then by name.
RANKING_METRIC = "overall.regret@1.geomean"
_NONE_INSTALLED = (
    f"none (no installed package of the {ENTRY_POINT_GROUP!r} entry-point group lists a model, "
    f"and no {OWN_MODELS_PACKAGE} package is on sys.path)"
)


@dataclass(frozen=True)
class Registration:
    """The model torch-diode's choices handler is using: its name, file and hardware key, and the
    installer's handle (``handle.handler`` is the :class:`DiodeInductorChoices` instance)."""

    name: str
    path: Path
    hardware: str | None
    handle: Any = field(repr=False, compare=False)


@dataclass
class _Catalog:
    models: dict[str, ModelEntry]
    skipped: list[str]  # "<entry point>: <reason>", for error messages


_lock = threading.RLock()
_catalog: _Catalog | None = None
_registration: Registration | None = None
_autoregistered = False
_warned_skips: set[str] = set()


# ---------------------------------------------------------------------------------------------
# Discovery
# ---------------------------------------------------------------------------------------------


def _package_manifest(module: str) -> tuple[Path | None, str]:
    """The ``manifest.json`` of the package ``module`` (located without importing it), or None and
    why not."""
    try:
        # find_spec of a top-level name locates the package without executing it; for a dotted
        # name Python imports the parents (the contract asks for a top-level package).
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    if spec is None:
        return None, f"package {module!r} is not importable"
    locations = list(spec.submodule_search_locations or [])
    if not locations:
        return None, f"{module!r} is a module, not a package"
    manifest = next((Path(d) / MANIFEST_FILENAME for d in locations if (Path(d) / MANIFEST_FILENAME).is_file()), None)
    if manifest is None:
        return None, f"no {MANIFEST_FILENAME} in {', '.join(locations)}"
    return manifest, ""


def _scan() -> _Catalog:
    models: dict[str, ModelEntry] = {}
    skipped: list[str] = []
    sources: list[tuple[str, str, str, bool]] = []  # (label, entry-point name, package, announced)
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
        label = f"entry point {ep.name} = {ep.value!r}"
        if ep.attr:
            skipped.append(f"{label}: the value must be a package name without ':{ep.attr}'")
            continue
        sources.append((label, ep.name, ep.module, True))
    if all(module != OWN_MODELS_PACKAGE for _, _, module, _ in sources):
        # Not installed, perhaps on sys.path all the same (a source checkout): used if found,
        # never reported as skipped when absent (a lib-only install has none).
        sources.append((f"package {OWN_MODELS_PACKAGE} on sys.path", OWN_MODELS_PACKAGE, OWN_MODELS_PACKAGE, False))
    for label, name, module, announced in sources:
        manifest, reason = _package_manifest(module)
        if manifest is None:
            if announced:
                skipped.append(f"{label}: {reason}")
            continue
        try:
            entries = read_manifest(manifest, source=f"{name} ({manifest})")
        except ManifestError as exc:
            skipped.append(f"{label}: {exc}")
            continue
        for entry in entries:
            first = models.setdefault(entry.name, entry)
            if first is not entry and first.package_dir != entry.package_dir:
                logger.warning(
                    "model %s is listed twice; using the one from %s, ignoring %s",
                    entry.name,
                    first.source,
                    entry.source,
                )
    for line in skipped:
        if line not in _warned_skips:  # once per process: an unknown name rescans
            _warned_skips.add(line)
            logger.warning("torch-diode skipped a models package: %s", line)
    return _Catalog(models, skipped)


def _none_available(catalog: _Catalog) -> str:
    """What to say where no model is listed: skipped packages are named, not denied."""
    if catalog.skipped:
        return "none (" + "; ".join(f"skipped {s}" for s in catalog.skipped) + ")"
    return _NONE_INSTALLED


def _get_catalog(refresh: bool = False) -> _Catalog:
    global _catalog
    with _lock:
        if _catalog is None or refresh:
            _catalog = _scan()
        return _catalog


def list_available_models(*, refresh: bool = False) -> list[ModelEntry]:
    """Every model the installed models packages list, sorted by name (whether their weights are in
    the wheel or on the Hub). ``refresh=True`` rescans the entry points (after a ``pip install``)."""
    return sorted(_get_catalog(refresh).models.values(), key=lambda e: e.name)


def get_model_entry(name: str) -> ModelEntry:
    """The manifest entry of a model name.

    Raises:
        ModelNotFoundError: no installed models package lists ``name``; the message lists the
            available names (and any package that was skipped, with the reason).
    """
    catalog = _get_catalog()
    entry = catalog.models.get(name)
    if entry is None:
        catalog = _get_catalog(refresh=True)  # something may have been pip-installed since the first scan
        entry = catalog.models.get(name)
    if entry is None:
        available = ", ".join(sorted(catalog.models)) or _none_available(catalog)
        skipped = "".join(f"; skipped {s}" for s in catalog.skipped) if catalog.models else ""
        raise ModelNotFoundError(
            f"unknown model {name!r}{_did_you_mean(name, catalog.models)}; available models: {available}{skipped}. "
            "Pass a registered name or the path of a .safetensors model file"
        )
    return entry


def _did_you_mean(name: str, names: Mapping[str, Any]) -> str:
    """`` (did you mean 'X'?)`` for the closest registered name (the same but for case, or a close
    spelling), else nothing. Names are matched exactly: this only helps to find the right one."""
    import difflib

    same = [n for n in names if n.lower() == name.lower()]
    close = same or difflib.get_close_matches(name, list(names), n=1, cutoff=0.9)
    return f" (did you mean {close[0]!r}?)" if close else ""


def models_for_hardware(key: str) -> list[ModelEntry]:
    """The models for a hardware key, best first (lowest held-out ``RANKING_METRIC``, then by name)."""

    def rank(entry: ModelEntry) -> tuple[float, str]:
        return (entry.metrics.get(RANKING_METRIC, math.inf), entry.name)

    return sorted((e for e in _get_catalog().models.values() if e.hardware == key), key=rank)


def local_weights(entry: ModelEntry) -> tuple[Path | None, str]:
    """Where ``entry``'s weights are on this machine, without touching the network or reading them:
    ``(path, "package")`` (the models wheel carries them), ``(path, "cache")`` (the Hugging Face
    cache holds them at the manifest's pinned revision), or ``(None, "hub")`` (not on disk: the
    first registration fetches them) or ``(None, "missing")`` (not on disk, and the manifest names
    no Hub repository). A file found is checked against the manifest when it is used, not here."""
    packaged = entry.packaged_path
    if packaged is not None and packaged.is_file():
        return packaged, "package"
    if not entry.on_hub:
        return None, "missing"
    from torch_diode.hub import cached_model_file

    cached = cached_model_file(entry)
    return (cached, "cache") if cached is not None else (None, "hub")


# ---------------------------------------------------------------------------------------------
# Resolution
# ---------------------------------------------------------------------------------------------


def looks_like_path(value: str | os.PathLike[str]) -> bool:
    """Whether a model reference is a file path (else a registered model's name)."""
    if isinstance(value, os.PathLike):
        return True
    return os.sep in value or "/" in value or value.endswith(".safetensors") or os.path.isfile(value)


def _check_name_or_path(value: object) -> None:
    if isinstance(value, os.PathLike):
        return
    if not isinstance(value, str) or not value.strip():
        raise TypeError(
            f"expected a registered model name (e.g. 'NVIDIA-H100-matmul') or the path of a .safetensors model "
            f"file, got {value!r}"
        )


def resolve(
    name_or_path: str | os.PathLike[str], *, local_files_only: bool | None = None, timeout_s: float | None = None
) -> Path:
    """A verified local weights file for a model name or path (see the module docstring for the order).

    Args:
        name_or_path: a model name (``"NVIDIA-H100-matmul"``) or the path of a model file.
        local_files_only: forbid the Hub download (None: only when ``HF_HUB_OFFLINE`` is set).
        timeout_s: the most seconds a Hub download may take (default ``TORCH_DIODE_HUB_TIMEOUT_S``/20).

    Raises:
        ModelNotFoundError: a path that does not exist, an unknown name (the message lists the
            available ones), or a listed model whose file is neither packaged nor on the Hub.
        ChecksumMismatchError: the file's size or sha256 differs from its manifest entry.
        torch_diode.hub.HubError: the Hub fetch failed (offline, not found, unreachable, timeout).
    """
    _check_name_or_path(name_or_path)
    if looks_like_path(name_or_path):
        path = Path(name_or_path).expanduser()
        try:
            is_dir, is_file = path.is_dir(), path.is_file()
        except OSError as exc:  # a name too long, a path through a file: no such model file
            raise ModelNotFoundError(f"model file {str(path)!r} cannot be looked up: {exc.strerror or exc}") from None
        if is_dir:
            raise ModelNotFoundError(f"{str(path)!r} is a directory; pass a .safetensors model file or a model name")
        if not is_file:
            hint = "pass a registered model name or a file path"
            stem = path.name.removesuffix(".safetensors")
            if path.name != stem and str(name_or_path) == path.name and stem in _get_catalog().models:
                hint = f"to use the registered model of that name, pass {stem!r} (no .safetensors)"
            raise ModelNotFoundError(f"model file {str(path)!r} does not exist ({hint})")
        # Absolute: a later chdir must not lose it (the handler keeps the path; a compile subprocess loads it).
        return path.absolute()
    entry = get_model_entry(str(name_or_path))
    packaged = entry.packaged_path
    if packaged is not None and packaged.is_file():
        return verify_file(packaged, entry)
    if not entry.on_hub:
        raise ModelNotFoundError(
            f"model {entry.name!r} is listed by {entry.source} but its file {entry.file} is not installed and the "
            "manifest names no Hub repository to fetch it from; reinstall that package with its weights"
        )
    from torch_diode.hub import fetch_model_file

    return fetch_model_file(entry, local_files_only=local_files_only, timeout_s=timeout_s)


# ---------------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------------


def register_model(
    name_or_path: str | os.PathLike[str], *, timeout_s: float | None = None, **options: Any
) -> Registration:
    """Resolve a model and install torch-diode's Inductor choices handler with it (process-wide).

    Replaces the model registered before, if any. The model file is loaded and checked here (a
    corrupt or foreign file raises :class:`~torch_diode.errors.ModelFormatError` and installs
    nothing; a registered name's file is verified against its manifest first), not at the first
    GEMM, where a bad file could only make that compile fall back to stock autotuning.

    Where the current install is one that ``install_diode_choices`` made by hand of the same model
    with the same options, that install is used and taken over: the registration owns it too, so that a later
    ``register_model`` or :func:`unregister_model` removes it (one torch-diode handler, the
    registered one, is installed). Until then the hand install's handle still removes it (the
    registration goes with it: :func:`current_registration` is None); after that, its
    ``uninstall()`` (or ``with`` exit) removes nothing and warns (``RuntimeWarning``). A hand
    install of another model is not taken over: it stays beneath the registration, until its own
    handle or :func:`unregister_model` (which removes every torch-diode install) removes it; so
    does an equal one that is not the current install (another installed after it).

    Args:
        name_or_path: a registered model name or the path of a model file.
        timeout_s: the most seconds a Hub download may take.
        **options: handler parameters passed to ``install_diode_choices`` (``top_k_configs``,
            ``performance_threshold``, ``enable_fallback``, ...).

    Raises:
        Everything :func:`resolve` raises; nothing is installed then.
        ModelFormatError: a file given by path is not a model this torch-diode can use.
        TypeError: ``name_or_path`` is neither a string nor a path.
        HandlerNotInstalledError: the installer declined (torch < 2.10, ``TORCH_DIODE_DISABLE=1``).
    """
    return _register(name_or_path, timeout_s=timeout_s, options=options, why="")


def _register(
    name_or_path: str | os.PathLike[str], *, timeout_s: float | None, options: dict[str, Any], why: str
) -> Registration:
    global _registration
    from torch_diode.config import config as diode_config
    from torch_diode.inductor import compat
    from torch_diode.inductor.install import install_diode_choices, take_over

    # What the installer would decline, before any download (a slim wheel's first registration fetches)
    declined = compat.unsupported_reason() or ("TORCH_DIODE_DISABLE is set" if diode_config.disable else None)
    if declined is not None:
        raise HandlerNotInstalledError(f"torch-diode's choices handler was not installed: {declined}")
    path = resolve(name_or_path, timeout_s=timeout_s)

    with _lock:
        # The installer loads and checks the file (ModelFormatError: nothing installed), ~25 ms.
        handle = install_diode_choices(model=str(path), **options)
        if not handle.installed:
            raise HandlerNotInstalledError(f"torch-diode's choices handler was not installed: {handle.reason}")
        file_hardware = handle.handler._get_model().hardware
        if looks_like_path(name_or_path):  # a file no manifest vouches for: its own metadata names the GPU
            name, hardware = path.name.removesuffix(".safetensors"), file_hardware
        else:
            name = str(name_or_path)
            entry = get_model_entry(name)
            hardware = entry.hardware
            if file_hardware != hardware:
                handle.uninstall()
                raise ModelFormatError(
                    f"model {name!r}: {entry.source} lists it for {hardware}, but its file {path} is a model for "
                    f"{file_hardware} (its metadata); nothing was registered. Reinstall that package, or regenerate "
                    "its manifest (scripts/update_models_manifest.py)"
                )
        previous = _live(_registration)
        if previous is not None and previous.handle.handler is handle.handler:
            handle = previous.handle  # the same handler again: the registration keeps the install it owns
        else:
            # An equal handler installed by hand (install_diode_choices) is taken over: the registry
            # must be able to remove it, else the next registration stacked over it.
            handle = take_over(handle, by=f"register_model({str(name_or_path)!r})")
            if previous is not None:
                previous.handle.uninstall()  # replaced, not stacked: its handler (and model) can be freed
        _registration = Registration(name=name, path=path, hardware=hardware, handle=handle)
    logger.info("torch-diode registered model %s%s: %s", name, why, path)
    return _registration


def _live(registration: Registration | None) -> Registration | None:
    """``registration`` while its handler is installed; None once it was uninstalled by other means
    (``uninstall_diode_choices()``, its handle's ``uninstall()``) or taken out for a stock measurement."""
    if registration is None:
        return None
    from torch_diode.inductor.install import is_installed

    return registration if is_installed(registration.handle.handler) else None


def unregister_model() -> bool:
    """Remove torch-diode's choices handler (stock Inductor autotuning again).

    Returns:
        True when a model was registered through this registry.
    """
    global _registration
    with _lock:
        if _live(_registration) is None:
            _registration = None  # nothing registered, or uninstalled since by other means
            return False
        assert _registration is not None
        from torch_diode.inductor.install import uninstall_diode_choices

        uninstall_diode_choices()
        logger.info("torch-diode unregistered model %s", _registration.name)
        _registration = None
        return True


def current_registration() -> Registration | None:
    """The model registered now, or None (also when its handler was uninstalled since by other
    means, ``uninstall_diode_choices()`` for one, or is out while stock Inductor is measured).
    Reads without the registry's lock (a registration may be downloading meanwhile)."""
    return _live(_registration)


def autoregister(*, timeout_s: float | None = None) -> Registration | None:
    """Register the best model for the detected GPU, once per process; later calls return the result.

    Hardware comes from :func:`torch_diode.hardware.detect` (``TORCH_DIODE_HARDWARE`` overrides it).
    Where ``TORCH_DIODE_MODEL`` (``torch_diode.config.model``) names a model (a path or a registered
    name), that model is registered instead, whatever the GPU.
    Nothing is registered, with one log line saying why, when ``TORCH_DIODE_DISABLE`` is set (INFO),
    when there is no GPU (INFO), when no installed models package lists a model for the GPU
    (WARNING, naming the GPU and the keys that have models), or when the model's weights cannot be
    obtained in time or ``TORCH_DIODE_MODEL``'s model cannot be used (WARNING; stock Inductor
    autotuning stays). A model registered before with :func:`register_model` is left in place.
    Never raises (an import runs it): anything unforeseen is that WARNING too.
    """
    global _autoregistered
    with _lock:
        if _autoregistered or _live(_registration) is not None:
            _autoregistered = True
            return _live(_registration)
        _autoregistered = True
        try:
            return _autoregister(timeout_s)
        except Exception as exc:  # an import must not fail: an OSError of a path, a RuntimeError of CUDA
            logger.warning(
                "torch-diode registered no model (stock Inductor autotuning is used): %s: %s", type(exc).__name__, exc
            )
            return None


def _autoregister(timeout_s: float | None) -> Registration | None:
    """:func:`autoregister`'s work, under its lock, once."""
    from torch_diode.config import config as diode_config

    try:
        disabled, chosen = diode_config.disable, diode_config.model
    except (ValueError, TypeError) as exc:  # a malformed TORCH_DIODE_* variable
        logger.warning("torch-diode registered no model (stock Inductor autotuning is used): %s", exc)
        return None
    if disabled:
        logger.info("torch-diode registered no model: TORCH_DIODE_DISABLE is set")
        return None
    if chosen is not None:
        try:
            return _register(chosen, timeout_s=timeout_s, options={}, why=" (TORCH_DIODE_MODEL)")
        except (DiodeError, ValueError, TypeError) as exc:
            logger.warning(
                "torch-diode registered no model (stock Inductor autotuning is used): TORCH_DIODE_MODEL=%r "
                "cannot be used: %s",
                chosen,
                exc,
            )
            return None
    from torch_diode.hardware import detect

    try:
        info = detect()
    except HardwareError as exc:
        logger.warning("torch-diode registered no model: %s", exc)
        return None
    if info.key is None:
        logger.info("torch-diode registered no model: %s", info.reason)
        return None
    candidates = models_for_hardware(info.key)
    if not candidates:
        catalog = _get_catalog()
        keys = sorted({e.hardware for e in catalog.models.values()})
        logger.warning(
            "torch-diode registered no model: no installed model for %s (%s); models exist for: %s. Train one "
            "with `diode train` and register it with torch_diode_models.register_model(path)",
            info.key,
            info.reason,
            ", ".join(keys) or _none_available(catalog),
        )
        return None
    best = candidates[0]
    try:
        return _register(best.name, timeout_s=timeout_s, options={}, why=f" for {info.key} ({info.reason})")
    except (DiodeError, ValueError, TypeError) as exc:  # ValueError: e.g. a malformed TORCH_DIODE_* variable
        logger.warning("torch-diode registered no model (stock Inductor autotuning is used): %s", exc)
        return None


@dataclass(frozen=True, kw_only=True)
class PredictionStats:
    """What the registered model's choices handler did (from its ``get_stats()``).

    Attributes:
        total_predictions: GEMM lowerings whose candidates the model ranked.
        average_confidence: mean confidence (``exp(-std)`` of the best-ranked choice, in (0, 1]);
            None when nothing was predicted or the handler reports no ``confidence_sum``.
        fallbacks_to_autotune: lowerings handed back to Inductor's stock autotuning after a failure.
        time_spent_us: time spent in torch-diode's hook (features, prediction, selection), µs.
    """

    total_predictions: int = 0
    fallbacks_to_autotune: int = 0
    time_spent_us: float = 0.0
    confidence_sum: float | None = field(default=0.0, repr=False)

    @property
    def average_confidence(self) -> float | None:
        if not self.total_predictions or self.confidence_sum is None:
            return None
        return self.confidence_sum / self.total_predictions

    def __sub__(self, other: PredictionStats) -> PredictionStats:
        conf = (
            None
            if self.confidence_sum is None or other.confidence_sum is None
            else self.confidence_sum - other.confidence_sum
        )
        return PredictionStats(
            total_predictions=self.total_predictions - other.total_predictions,
            fallbacks_to_autotune=self.fallbacks_to_autotune - other.fallbacks_to_autotune,
            time_spent_us=self.time_spent_us - other.time_spent_us,
            confidence_sum=conf,
        )

    def summary(self) -> str:
        """One line, e.g. ``12 predictions, average confidence 0.91, 1 fallback to autotune, 35.2 ms``."""
        conf = "n/a" if self.average_confidence is None else f"{self.average_confidence:.2f}"
        return (
            f"{plural(self.total_predictions, 'prediction')}, average confidence {conf}, "
            f"{plural(self.fallbacks_to_autotune, 'fallback')} to autotune, {self.time_spent_us / 1000:.1f} ms in torch-diode"
        )

    def __repr__(self) -> str:
        return (
            f"PredictionStats(total_predictions={self.total_predictions}, average_confidence="
            f"{self.average_confidence!r}, fallbacks_to_autotune={self.fallbacks_to_autotune}, "
            f"time_spent_us={self.time_spent_us:.1f})"
        )


def prediction_stats() -> PredictionStats:
    """The registered handler's statistics (all zero when no model is registered)."""
    registration = current_registration()
    if registration is None:
        return PredictionStats()
    return _stats_from_handler(registration.handle.get_stats())


def _stats_from_handler(raw: Mapping[str, Any]) -> PredictionStats:
    """Map ``DiodeInductorChoices.get_stats()`` to the user-facing figures: predictions are the
    model's selections, fallbacks are failures handed back to stock autotuning (not the calls the
    handler deliberately passes through), time is the whole hook (features, prediction, selection)."""
    return PredictionStats(
        total_predictions=int(raw.get("model_selections", 0)),
        fallbacks_to_autotune=int(raw.get("fallbacks_total", 0)),
        time_spent_us=float(raw.get("hook_time_s", 0.0)) * 1e6,
        confidence_sum=None if raw.get("confidence_sum") is None else float(raw["confidence_sum"]),
    )


def _reset_for_tests() -> None:
    """Forget the discovered catalogue and the registration state (tests only; does not uninstall)."""
    global _catalog, _registration, _autoregistered
    with _lock:
        _catalog, _registration, _autoregistered = None, None, False
        _warned_skips.clear()
