"""The torch-diode meta-wheel's plugin: makes ``import torch_diode`` register the best model for the
detected GPU, through the same code as ``import torch_diode_models``.

``torch_diode/__init__.py`` calls :func:`register` through the ``torch_diode.plugins`` entry point;
this package holds nothing else.
"""

from __future__ import annotations


def register() -> None:
    """Register the best installed model for the detected GPU (a no-op when there is none)."""
    # Imported here, not at module level: torch_diode is still initialising when it calls us.
    from torch_diode.registry import autoregister

    autoregister()
