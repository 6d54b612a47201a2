"""``import torch_diode`` with only the lib active changes nothing in torch (torchao's lean-import test),
and the ``torch_diode.plugins`` entry points it runs are run once, isolated from failures, and can be
switched off.

Every check runs in a fresh interpreter, because the test process itself has imported Inductor.
The lib-only checks set ``TORCH_DIODE_DISABLE_PLUGIN_AUTOLOAD=1`` so that they hold whatever else
is installed (the tests session installs all three wheels); ``nox -s package_smoke`` checks the
same in a virtual environment that really has only torch-diode-lib.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIB_SRC = REPO / "packages" / "torch-diode-lib" / "src"


def _run(
    code: str, *, extra_path: tuple[Path, ...] = (), env: dict[str, str] | None = None, argv: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -c code`` (or ``python *argv`` when given) in a fresh interpreter."""
    full_env = dict(os.environ)
    full_env.pop("TORCH_DIODE_DISABLE_PLUGIN_AUTOLOAD", None)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = os.pathsep.join(
        [*(str(p) for p in extra_path), str(LIB_SRC), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    proc = subprocess.run(
        [sys.executable, *(argv if argv is not None else ["-c", textwrap.dedent(code)])],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
    )
    assert proc.returncode == 0, f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def _last_json(proc: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(proc.stdout.strip().splitlines()[-1])


LIB_ONLY = {"TORCH_DIODE_DISABLE_PLUGIN_AUTOLOAD": "1"}


def test_import_adds_no_inductor_modules() -> None:
    proc = _run(
        """
        import json, sys
        import torch
        before = {m for m in sys.modules if m.startswith("torch._inductor")}
        import torch_diode
        after = {m for m in sys.modules if m.startswith("torch._inductor")}
        print(json.dumps({"added": sorted(after - before), "file": torch_diode.__file__}))
        """,
        env=LIB_ONLY,
    )
    result = _last_json(proc)
    assert Path(result["file"]).is_relative_to(LIB_SRC)
    assert result["added"] == [], f"import torch_diode imported Inductor modules: {result['added']}"


def test_import_changes_no_inductor_config_or_handler() -> None:
    # Inductor is loaded first here, so a lib that changed its config or handler at import would show.
    proc = _run(
        """
        import json
        import torch
        import torch._inductor.config as config
        import torch._inductor.virtualized as virtualized

        def state():
            handler = getattr(virtualized.threadlocal, virtualized._choices._key, None)
            return (
                {k: repr(v) for k, v in config.get_config_copy().items()},
                None if handler is None else type(handler).__qualname__,
                virtualized._choices._default.__qualname__,
            )

        cfg0, handler0, default0 = state()
        import torch_diode
        cfg1, handler1, default1 = state()
        changed = sorted(k for k in cfg0.keys() | cfg1.keys() if cfg0.get(k) != cfg1.get(k))
        print(json.dumps({"changed": changed, "handler": [handler0, handler1], "default": [default0, default1]}))
        """,
        env=LIB_ONLY,
    )
    result = _last_json(proc)
    assert result["changed"] == [], f"import torch_diode changed Inductor config: {result['changed']}"
    assert result["handler"] == [None, None]
    assert result["default"][0] == result["default"][1] == "_choices_default"


def test_import_installs_no_log_handler_and_prints_nothing() -> None:
    proc = _run(
        """
        import logging, json
        import torch
        root0, lib0 = list(logging.getLogger().handlers), list(logging.getLogger("torch_diode").handlers)
        import torch_diode
        root1, lib1 = list(logging.getLogger().handlers), list(logging.getLogger("torch_diode").handlers)
        print(json.dumps({"root": root0 == root1, "lib": lib0 == lib1}))
        """,
        env=LIB_ONLY,
    )
    assert _last_json(proc) == {"root": True, "lib": True}
    assert proc.stdout.strip().count("\n") == 0 and proc.stderr == ""


def _fake_plugin_dist(root: Path, module: str, body: str) -> Path:
    """A real installed distribution (a ``.dist-info`` on sys.path) declaring one ``torch_diode.plugins`` entry point."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(textwrap.dedent(body))
    dist_info = root / f"{module}-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text(f"[torch_diode.plugins]\n{module} = {module}:register\n")
    return root


def _recording_plugin(tmp_path: Path, module: str, line: str) -> tuple[Path, Path]:
    """A plugin distribution whose ``register()`` appends the Python expression ``line`` (evaluated
    in the plugin, with ``sys`` imported) to a marker file; returns (site, marker)."""
    marker = tmp_path / "calls.txt"
    site = _fake_plugin_dist(
        tmp_path / "site",
        module,
        f"""
        import sys
        def register():
            with open({str(marker)!r}, "a") as f:
                f.write(str({line}) + "\\n")
        """,
    )
    return site, marker


def test_plugin_runs_once_per_process(tmp_path: Path) -> None:
    site, marker = _recording_plugin(tmp_path, "diode_test_counting_plugin", "'called'")
    _run(
        "import importlib, torch_diode; import torch_diode; importlib.import_module('torch_diode')", extra_path=(site,)
    )
    assert marker.read_text().splitlines() == ["called"]


def test_failing_plugin_is_logged_not_raised(tmp_path: Path) -> None:
    site = _fake_plugin_dist(
        tmp_path / "site",
        "diode_test_broken_plugin",
        """
        def register():
            raise RuntimeError("no model for this GPU, on purpose")
        """,
    )
    proc = _run("import torch_diode; print('imported', torch_diode.__version__)", extra_path=(site,))
    assert "imported" in proc.stdout
    assert "diode_test_broken_plugin" in proc.stderr
    assert "RuntimeError: no model for this GPU, on purpose" in proc.stderr
    assert "TORCH_DIODE_DISABLE_PLUGIN_AUTOLOAD=1" in proc.stderr


def test_plugin_autoload_can_be_disabled(tmp_path: Path) -> None:
    marker = tmp_path / "calls.txt"
    site = _fake_plugin_dist(
        tmp_path / "site",
        "diode_test_disabled_plugin",
        f"""
        def register():
            open({str(marker)!r}, "a").close()
        """,
    )
    _run("import torch_diode", extra_path=(site,), env=LIB_ONLY)
    assert not marker.exists()


def test_the_command_line_runs_no_plugin(tmp_path: Path) -> None:
    """``diode ...`` and ``python -m torch_diode ...`` skip the plugins: no command needs a model
    registered, and the meta-wheel's would import Inductor (about 2 s a command) and log its own
    error beside the command's for a bad ``TORCH_DIODE_HARDWARE``."""
    site, marker = _recording_plugin(tmp_path, "diode_test_cli_plugin", "repr(sys.orig_argv[1:3])")
    # What pip writes for the console script `diode = _torch_diode_cli:main` (test_packaging checks that entry).
    script = tmp_path / "diode"
    script.write_text("import sys\nfrom _torch_diode_cli import main\nsys.exit(main())\n")
    for argv in (
        [str(script), "--version"],
        ["-m", "torch_diode", "--version"],
        ["-X", "utf8", "-Bm", "torch_diode", "--version"],  # not -I: it would hide PYTHONPATH's plugin
    ):
        proc = _run("", argv=argv, extra_path=(site,))
        assert proc.stdout.startswith("diode ") and proc.stderr == ""
    assert not marker.exists()
    # Anything else still runs them: options before -c, a script that takes -m torch_diode as arguments.
    other = tmp_path / "other.py"
    other.write_text("import torch_diode\n")
    _run("", argv=["-W", "ignore", "-c", "import torch_diode"], extra_path=(site,))
    _run("", argv=[str(other), "-m", "torch_diode"], extra_path=(site,))
    assert marker.read_text().splitlines() == ["['-W', 'ignore']", f"[{str(other)!r}, '-m']"]


def test_processes_the_command_line_spawns_run_no_plugin(tmp_path: Path) -> None:
    """``python -m torch_diode collect --workers N``'s ranks are ``multiprocessing`` spawn children:
    their command line is ``python -c 'from multiprocessing.spawn import ...'`` and they are given the
    parent's ``sys.argv`` (this package's ``__main__.py`` first) before they import ``torch_diode``.
    They skip the plugins as the parent does; a spawned child of any other program still runs them."""
    site, marker = _recording_plugin(tmp_path, "diode_test_spawn_plugin", "sys.argv[1]")
    spawn = """
        import importlib, multiprocessing as mp, sys
        sys.argv = [{argv0!r}, {label!r}]  # what the parent's sys.argv is
        child = mp.get_context("spawn").Process(target=importlib.import_module, args=("torch_diode",))
        child.start()
        child.join()
        assert child.exitcode == 0, child.exitcode
        """
    main = str(LIB_SRC / "torch_diode" / "__main__.py")
    _run(spawn.format(argv0=main, label="collect"), extra_path=(site,))
    assert not marker.exists()
    other = tmp_path / "__main__.py"  # another program's __main__.py
    other.write_text("")
    _run(spawn.format(argv0=str(tmp_path / "train.py"), label="a script's child"), extra_path=(site,))
    _run(spawn.format(argv0=str(other), label="another package's child"), extra_path=(site,))
    assert marker.read_text().splitlines() == ["a script's child", "another package's child"]


def test_import_from_a_zip_under_another_packages_main(tmp_path: Path) -> None:
    """``python -m otherpkg`` (``sys.argv[0]`` an existing ``__main__.py``) importing torch_diode
    from a zip: the command-line check cannot stat the package's directory there, and the import
    must not fail for it (it raised ``NotADirectoryError``)."""
    import zipfile

    site, marker = _recording_plugin(tmp_path, "diode_test_zip_plugin", "'called'")
    archive = tmp_path / "lib.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in sorted((LIB_SRC / "torch_diode").rglob("*.py")):
            zf.write(f, f.relative_to(LIB_SRC).as_posix())
    other = tmp_path / "other" / "otherpkg"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    (other / "__main__.py").write_text("import torch_diode\nprint('imported', torch_diode.__file__)\n")
    proc = _run("", argv=["-m", "otherpkg"], extra_path=(archive, tmp_path / "other", site))  # the zip first
    assert f"imported {archive}" in proc.stdout
    assert marker.read_text().splitlines() == ["called"]


def test_the_command_lines_python_options_are_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python [options] -m torch_diode`` in every form CPython accepts, and nothing else."""
    import torch_diode

    monkeypatch.delitem(sys.modules, "_torch_diode_cli", raising=False)
    cases = {
        ("-m", "torch_diode"): True,
        ("-mtorch_diode",): True,
        ("-Im", "torch_diode"): True,  # clustered flags: -I then -m
        ("-OW", "ignore", "-m", "torch_diode"): True,
        ("-Wignore", "-Bmtorch_diode"): True,
        ("-X", "dev", "-m", "torch_diode"): True,
        ("--check-hash-based-pycs", "always", "-m", "torch_diode"): True,
        ("-Wm", "-m", "torch_diode"): True,  # -W's value is "m"
        ("-m", "torch_diode.cli"): False,
        ("-c", "import torch_diode", "-m", "torch_diode"): False,
        ("-Ic", "import torch_diode"): False,
        ("script.py", "-m", "torch_diode"): False,
        ("-", "-m", "torch_diode"): False,
        ("-X", "-m", "torch_diode"): False,  # -X's value is "-m": torch_diode is a script
    }
    for argv, want in cases.items():
        monkeypatch.setattr(sys, "orig_argv", ["python", *argv])
        assert torch_diode._entered_as_command_line() is want, argv
