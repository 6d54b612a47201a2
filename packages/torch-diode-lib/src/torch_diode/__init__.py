"""torch-diode: learned kernel-config selection for torch.compile's GEMM autotuning.

Importing this package has no side effects on torch: it does not import ``torch._inductor``,
install a choices handler or change any config. The one exception is opt-in: when an
auto-registration plugin is installed (the ``torch-diode`` meta-wheel declares one in the
``torch_diode.plugins`` entry-point group), it runs once, here (not in the ``diode`` command line).
"""

from torch_diode._version import __version__
from torch_diode.errors import (
    CollectionError,
    DatasetFormatError,
    DiodeError,
    FileInUseError,
    HandlerNotInstalledError,
    HardwareError,
    MeasurementError,
    ModelFormatError,
    ModelNotFoundError,
    SchemaVersionError,
    Terminated,
    TruncatedFileError,
)
from torch_diode.records import Choice, FailureRecord, Problem, Provenance, TimingRecord

__all__ = [
    "Choice",
    "CollectionError",
    "DatasetFormatError",
    "DiodeError",
    "FailureRecord",
    "FileInUseError",
    "HandlerNotInstalledError",
    "HardwareError",
    "MeasurementError",
    "ModelFormatError",
    "ModelNotFoundError",
    "Problem",
    "Provenance",
    "SchemaVersionError",
    "Terminated",
    "TimingRecord",
    "TruncatedFileError",
    "__version__",
]


def plugin_autoload_disabled() -> bool:
    """Whether ``TORCH_DIODE_DISABLE_PLUGIN_AUTOLOAD`` is set (to anything but ``0``): the one switch
    that keeps both the ``torch_diode.plugins`` entry points and ``import torch_diode_models`` from
    registering a model."""
    import os

    return os.environ.get("TORCH_DIODE_DISABLE_PLUGIN_AUTOLOAD", "").strip() not in ("", "0")


def _entered_as_command_line() -> bool:
    """Whether this process is the ``diode`` command line, or a process it spawned (``collect
    --workers``' ranks): the console script imports ``_torch_diode_cli`` before ``torch_diode`` (and
    its spawned children run the script, so import it too); ``python -m torch_diode`` shows in
    ``sys.orig_argv`` (its package is imported before ``sys.argv`` names it), and its spawned
    children are given its ``sys.argv`` (``multiprocessing`` does not import a ``__main__.py`` there).
    May raise on an odd environment (a package imported from a zip has no directory to compare):
    :func:`_run_plugins` takes that as "not the command line"."""
    import os
    import sys

    if "_torch_diode_cli" in sys.modules:
        return True
    argv0 = (getattr(sys, "argv", None) or [""])[0]
    if os.path.basename(argv0) == "__main__.py" and os.path.isfile(argv0):
        here = os.path.dirname(os.path.abspath(__file__))
        if os.path.samefile(os.path.dirname(os.path.abspath(argv0)), here):
            return True  # this package's __main__.py: a child of `python -m torch_diode`
    argv = list(getattr(sys, "orig_argv", ()))[1:]
    while argv:  # the interpreter's own options, up to -m, -c or a script
        arg = argv.pop(0)
        if arg == "--check-hash-based-pycs":
            argv[:1] = []  # its value
        elif arg.startswith("--") and arg != "--":
            continue  # a long option without a value (--version, --help ... end the interpreter anyway)
        elif not arg.startswith("-") or arg in ("-", "--"):
            return False  # a script, stdin, or the end of the options
        else:  # one or more short options: -B, -Im, -Wignore, -OX dev ...
            for i, flag in enumerate(arg[1:], start=2):
                if flag in "cm":  # the rest of the option, or the next argument, is the code or module
                    value = arg[i:] or (argv[0] if argv else "")
                    return flag == "m" and value == "torch_diode"
                if flag in "WX":  # takes the rest of the option, or the next argument
                    if not arg[i:]:
                        argv[:1] = []
                    break
    return False


def _run_plugins() -> None:
    """Run each installed ``torch_diode.plugins`` entry point once (the torch-diode meta-wheel installs
    ``autoregister``). A failing plugin is logged, never raised: ``import torch_diode`` must not break.
    Set ``TORCH_DIODE_DISABLE_PLUGIN_AUTOLOAD=1`` to skip them (as pytest's PYTEST_DISABLE_PLUGIN_AUTOLOAD).
    The ``diode`` command line skips them (its commands install or take out handlers themselves).
    """
    from importlib.metadata import entry_points

    if plugin_autoload_disabled():
        return
    try:
        command_line = _entered_as_command_line()
    except Exception:  # never a reason for the import to fail (e.g. imported from a zip): not the command line
        command_line = False
    if command_line:  # `diode` / `python -m torch_diode`: no command needs a model registered
        return
    for entry_point in entry_points(group="torch_diode.plugins"):
        try:
            entry_point.load()()
        except Exception as e:  # the one catch-all boundary of the import: a plugin never breaks it
            import logging

            logging.getLogger("torch_diode").warning(
                "torch-diode plugin %r (%s) failed and was skipped: %s: %s "
                "(set TORCH_DIODE_DISABLE_PLUGIN_AUTOLOAD=1 to stop loading plugins)",
                entry_point.name,
                entry_point.value,
                type(e).__name__,
                e,
            )


_run_plugins()
