"""torch-diode's Inductor integration: the choices handler, its installer, and the conversions
from Inductor objects to torch-diode records.

This is the only package of torch-diode that imports ``torch._inductor``, and importing it does
not: the names below load their modules on first use.

- :func:`install_diode_choices` / :func:`uninstall_diode_choices` / :func:`create_diode_choices`
  / :func:`stock_inductor` (``torch_diode.inductor.install``);
- :class:`DiodeInductorChoices` (``torch_diode.inductor.choices``);
- :func:`problem_from_kernel_inputs`, :func:`choice_from_ktc`, :func:`problem_from_input_nodes`
  (``torch_diode.inductor.convert``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_ATTRS = {
    "install_diode_choices": "install",
    "uninstall_diode_choices": "install",
    "create_diode_choices": "install",
    "installed_handler": "install",
    "stock_inductor": "install",
    "DiodeHandle": "install",
    "DiodeInductorChoices": "choices",
    "problem_from_kernel_inputs": "convert",
    "problem_from_input_nodes": "convert",
    "choice_from_ktc": "convert",
}

__all__ = [
    "DiodeHandle",
    "DiodeInductorChoices",
    "choice_from_ktc",
    "create_diode_choices",
    "install_diode_choices",
    "installed_handler",
    "problem_from_input_nodes",
    "problem_from_kernel_inputs",
    "stock_inductor",
    "uninstall_diode_choices",
]

if TYPE_CHECKING:
    from torch_diode.inductor.choices import DiodeInductorChoices
    from torch_diode.inductor.convert import choice_from_ktc, problem_from_input_nodes, problem_from_kernel_inputs
    from torch_diode.inductor.install import (
        DiodeHandle,
        create_diode_choices,
        install_diode_choices,
        installed_handler,
        stock_inductor,
        uninstall_diode_choices,
    )


def __getattr__(name: str) -> Any:
    module = _ATTRS.get(name)
    if module is None:
        raise AttributeError(f"module 'torch_diode.inductor' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"torch_diode.inductor.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_ATTRS])
