"""Report what importing the installed torch-diode wheels does to Inductor (``nox -s package_smoke``
runs this inside a fresh venv per install combination).

In order, it imports torch, then ``torch_diode``, then (when installed) ``torch_diode_models``, and
after each import records: the ``torch._inductor`` modules it added, the choices handler set on this
thread, Inductor's default choices factory, the Inductor config keys that differ from a fresh
interpreter's, the model torch-diode registered, and the log lines it wrote. It prints one line per
import, then the whole report as one JSON line (or writes it to ``--json-out``). Run it on CPU with ``TORCH_DIODE_HARDWARE`` set to a GPU
key to see what a machine with that GPU would register.

Then it runs the installed ``diode`` console script twice: ``diode hardware --json`` (the models
it lists for ``TORCH_DIODE_HARDWARE``) and ``diode hardware`` with an unknown key, which must fail
with exactly one line on stderr in every combination (the command line runs no plugin: the
meta-wheel's would log an error of its own first).

Asserted (exit 1 on a violation): with only torch-diode-lib installed, ``import torch_diode`` must
change nothing in torch; in every combination, that one line.

    python scripts/smoke_check_install.py --combination lib-only [--json-out report.json]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import subprocess
import sys
from typing import Any

_CONFIG_PROBE = (
    "import json, torch._inductor.config as c; print(json.dumps({k: repr(v) for k, v in c.get_config_copy().items()}))"
)


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")


def _installed() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for dist in ("torch", "torch-diode-lib", "torch-diode-models", "torch-diode"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    return versions


def _inductor_modules() -> set[str]:
    return {m for m in sys.modules if m == "torch._inductor" or m.startswith("torch._inductor.")}


def _inductor_state(reference_config: dict[str, str]) -> dict[str, Any]:
    """Handler, default factory, changed config keys and registration, as they are now."""
    import torch._inductor.config as config
    import torch._inductor.virtualized as virtualized

    handler = getattr(virtualized.threadlocal, virtualized._choices._key, None)
    default = virtualized._choices._default
    current = {k: repr(v) for k, v in config.get_config_copy().items()}
    changed = sorted(k for k in current.keys() | reference_config.keys() if current.get(k) != reference_config.get(k))
    state: dict[str, Any] = {
        "handler": None if handler is None else f"{type(handler).__module__}.{type(handler).__qualname__}",
        "handler_repr": None if handler is None else repr(handler)[:300],
        "default_factory": f"{getattr(default, '__module__', '?')}.{getattr(default, '__qualname__', repr(default))}",
        "inductor_choices_class": repr(config.inductor_choices_class),
        "changed_config": {k: current.get(k) for k in changed},
        "registration": None,
    }
    registry = sys.modules.get("torch_diode.registry")
    current_registration = getattr(registry, "current_registration", None)
    if callable(current_registration):
        registration = current_registration()
        if registration is not None:
            state["registration"] = {
                "name": getattr(registration, "name", None),
                "hardware": getattr(registration, "hardware", None),
                "path": str(getattr(registration, "path", None)),
            }
    return state


def _import_step(module: str, capture: _Capture, reference_config: dict[str, str]) -> dict[str, Any]:
    before, logged = _inductor_modules(), len(capture.lines)
    importlib.import_module(module)
    added = sorted(_inductor_modules() - before)
    step = {"import": module, "inductor_modules_added": len(added), "first_added": added[:5]}
    step.update(_inductor_state(reference_config))
    step["log"] = capture.lines[logged:]
    return step


def _command_line() -> dict[str, Any]:
    """The installed ``diode`` script: the models it lists for TORCH_DIODE_HARDWARE, and its stderr
    for an unknown key."""
    script = os.path.join(os.path.dirname(sys.executable), "diode")
    listed = subprocess.run([script, "hardware", "--json"], capture_output=True, text=True, timeout=300)
    bad_key = subprocess.run(
        [script, "hardware"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TORCH_DIODE_HARDWARE": "NVIDIA-H300"},
    )
    return {
        "models": json.loads(listed.stdout)["models"] if listed.returncode == 0 else f"failed: {listed.stderr}",
        "bad_key_returncode": bad_key.returncode,
        "bad_key_stderr": bad_key.stderr.strip().splitlines(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--combination", required=True, help="the install combination's name, e.g. lib-only")
    parser.add_argument("--json-out", help="also write the report to this file")
    args = parser.parse_args(argv)

    # Inductor config of a fresh interpreter (same environment), to tell what an import changed.
    probe = subprocess.run([sys.executable, "-c", _CONFIG_PROBE], capture_output=True, text=True, check=True)
    reference_config = json.loads(probe.stdout.strip().splitlines()[-1])

    capture = _Capture()
    logging.getLogger().addHandler(capture)
    logging.getLogger().setLevel(logging.INFO)
    import torch  # noqa: F401  # first: only what torch_diode adds on top of it counts

    report: dict[str, Any] = {
        "combination": args.combination,
        "installed": _installed(),
        "TORCH_DIODE_HARDWARE": os.environ.get("TORCH_DIODE_HARDWARE"),
        "steps": [_import_step("torch_diode", capture, reference_config)],
    }
    if importlib.util.find_spec("torch_diode_models") is not None:
        report["steps"].append(_import_step("torch_diode_models", capture, reference_config))

    print(f"== {args.combination}: installed {report['installed']}")
    for step in report["steps"]:
        print(
            f"  import {step['import']}: +{step['inductor_modules_added']} torch._inductor modules; "
            f"handler {step['handler']}; default factory {step['default_factory']}; "
            f"config changed {sorted(step['changed_config'])}; registration {step['registration']}"
        )
        for line in step["log"]:
            print(f"    log: {line}")

    cli = report["command_line"] = _command_line()
    print(f"  diode hardware --json: models {cli['models']}; with an unknown key: exit {cli['bad_key_returncode']}")
    for line in cli["bad_key_stderr"]:
        print(f"    stderr: {line}")

    violations: list[str] = []
    if cli["bad_key_returncode"] != 2 or len(cli["bad_key_stderr"]) != 1:
        violations.append(
            f"`diode hardware` with an unknown key: exit {cli['bad_key_returncode']}, stderr {cli['bad_key_stderr']}"
        )
    if args.combination == "lib-only":
        first = report["steps"][0]
        if first["inductor_modules_added"]:
            violations.append(f"import torch_diode imported {first['first_added']} ...")
        if first["handler"] is not None:
            violations.append(f"import torch_diode installed the choices handler {first['handler']}")
        if first["default_factory"] != "torch._inductor.virtualized._choices_default":
            violations.append(
                f"import torch_diode replaced Inductor's default choices factory: {first['default_factory']}"
            )
        if first["changed_config"]:
            violations.append(f"import torch_diode changed Inductor config: {sorted(first['changed_config'])}")
        if first["registration"] is not None:
            violations.append(f"import torch_diode registered a model: {first['registration']}")
    report["violations"] = violations
    for line in violations:
        print(f"  VIOLATION: {line}")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    else:
        print(json.dumps(report))
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
