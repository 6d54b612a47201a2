"""Pretrained torch-diode models, and the user-facing model API.

``import torch_diode_models`` registers the best model for the detected GPU
(:func:`torch_diode.registry.autoregister`: once per process, whichever of ``torch_diode`` and
``torch_diode_models`` is imported first; the weights are loaded and checked then, about 25 ms).
With no GPU, or a GPU no model was trained for, nothing is registered and one log line
says why. ``TORCH_DIODE_HARDWARE=NVIDIA-H100`` (any key, or ``none``) overrides detection;
``TORCH_DIODE_DISABLE_PLUGIN_AUTOLOAD=1`` turns the automatic registration off (here and in the
``torch-diode`` meta-wheel's plugin), leaving :func:`register_model` to you.

API::

    import torch_diode_models as tdm
    tdm.get_detected_hardware()            # HardwareInfo(key='NVIDIA-H100', name=..., reason=...)
    tdm.list_available_models()            # [ModelEntry(name='NVIDIA-H100-matmul', ...), ...]
    tdm.register_model("NVIDIA-H100-matmul")    # or a path to your own .safetensors model
    tdm.unregister_model()                 # stock Inductor autotuning again
    tdm.set_log_level("DEBUG")
    with tdm.profile_predictions() as prof:
        compiled(x)
    print(prof.stats)                      # what happened inside the block
    tdm.get_prediction_stats()             # since registration: predictions, confidence, ...

This package's directory holds ``manifest.json`` and the ``*.safetensors`` weights it lists (a
slim wheel holds only the manifest; the weights then come from the Hugging Face Hub at the
manifest's pinned revision, see :mod:`torch_diode.registry`).

Your own models wheel plugs in the same way: a package holding ``manifest.json`` (written by
``python scripts/update_models_manifest.py --package-dir src/my_models --hub-repo ...``) and the
weights, announced by an entry point in the ``torch_diode.models`` group whose value is the
package's import name (no ``:attribute``)::

    [project.entry-points."torch_diode.models"]
    my_models = "my_models"

torch-diode reads the manifest without importing your package. Its models then appear in
:func:`list_available_models`, and :func:`register_model` accepts their names.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from torch_diode import plugin_autoload_disabled
from torch_diode.errors import HandlerNotInstalledError, HardwareError
from torch_diode.hardware import HardwareInfo, detect
from torch_diode.registry import (
    PredictionStats,
    Registration,
    autoregister,
    list_available_models,
    prediction_stats,
    register_model,
    unregister_model,
)

__all__ = [
    "HandlerNotInstalledError",
    "PredictionProfile",
    "PredictionStats",
    "Registration",
    "get_detected_hardware",
    "get_prediction_stats",
    "list_available_models",
    "profile_predictions",
    "register_model",
    "set_log_level",
    "unregister_model",
]

#: This package's directory: ``manifest.json`` and the weights live here.
PACKAGE_DIR = Path(__file__).resolve().parent
_LOGGERS = ("torch_diode", "torch_diode_models")


def get_detected_hardware() -> HardwareInfo:
    """The GPU torch-diode sees (``key`` is None when there is no usable known GPU, or when
    ``TORCH_DIODE_HARDWARE`` is not a valid override; ``reason`` says why)."""
    try:
        return detect()
    except HardwareError as exc:
        return HardwareInfo(None, "", None, None, None, None, str(exc), source="env")


def set_log_level(level: int | str) -> None:
    """Set the log level of torch-diode's loggers (``"DEBUG"``, ``"INFO"``, ``logging.WARNING``, ...).

    When no logging is configured at all, a stderr handler is added so the messages are seen.
    """
    if isinstance(level, str):
        resolved = logging.getLevelName(level.upper())
        if not isinstance(resolved, int):
            raise ValueError(f"unknown log level {level!r}; use DEBUG, INFO, WARNING, ERROR or CRITICAL")
        level = resolved
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(level)
        if not logger.hasHandlers():
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
            logger.addHandler(handler)


def get_prediction_stats() -> PredictionStats:
    """Statistics of the registered model's choices handler since it was installed (all zero when
    no model is registered): predictions made, their average confidence, fallbacks to Inductor's
    own autotuning, and time spent predicting."""
    return prediction_stats()


@dataclass
class PredictionProfile:
    """What :func:`profile_predictions` measured; ``stats`` is filled when the block exits."""

    stats: PredictionStats | None = None


@contextmanager
def profile_predictions(*, log: bool = True) -> Iterator[PredictionProfile]:
    """Measure the predictions made inside a ``with`` block (the difference of two snapshots).

    Args:
        log: log the summary (INFO, logger ``torch_diode_models``) when the block exits.
    """
    profile = PredictionProfile()
    before = prediction_stats()
    try:
        yield profile
    finally:
        profile.stats = prediction_stats() - before
        if log:
            logging.getLogger(__name__).info("torch-diode predictions: %s", profile.stats.summary())


# TORCH_DIODE_DISABLE_PLUGIN_AUTOLOAD also turns this off, so that one switch keeps both the
# meta-wheel's plugin and this import inert.
if not plugin_autoload_disabled():
    autoregister()
