"""The ``diode`` console script's entry point: the command line, without the auto-registration plugins.

``import torch_diode`` runs the ``torch_diode.plugins`` entry points (the ``torch-diode`` meta-wheel's
registers the best model for the GPU, importing Inductor: about 2 s). No ``diode`` command compiles
a model of the user's, and the ones that compile install or take out handlers themselves (the
collectors and the benchmarks' stock modes measure stock Inductor; their torch-diode modes install
the model they are given), so the command line skips the plugins: ``torch_diode`` does when this
module was imported before it. ``python -m torch_diode`` is the same command line, but there the
package, and so its plugins, are imported first.
"""

from __future__ import annotations


def main() -> int:
    from torch_diode.cli import main as cli_main

    return cli_main()
