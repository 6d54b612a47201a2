"""Every developer and CI task is a nox session; this file is the single entry point.

    pip install nox && nox -s tests      # the CPU test suite, as CI runs it (.ci/run)
    nox -s tests -- -k features          # arguments after -- go to pytest
    nox -R -s tests                      # reuse the session's venv: skips reinstalling torch
    nox                                  # the default sessions: lint, typecheck, tests
    nox -s lint typecheck                # ruff check + ruff format --check; mypy on the lib
    nox -s build package_smoke           # build the wheels into dist/, then install and check them
    nox -s demo                          # `diode demo`: the shipped models on held-out GPU timings

Torch is always installed first and explicitly as ``torch==2.13.0`` (``TORCH_DIODE_TORCH`` overrides
the requirement): on the CPU-only development and CI machines that takes a local CPU build, and a
package that only asks for ``torch>=2.10`` then never pulls a multi-GB CUDA build.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import nox

nox.needs_version = ">=2024.3.2"
nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = True

REPO = Path(__file__).resolve().parent
PACKAGES = REPO / "packages"
LIB, MODELS, META = (PACKAGES / name for name in ("torch-diode-lib", "torch-diode-models", "torch-diode"))
DIST = REPO / "dist"
SLIM_DIST = DIST / "slim"

TORCH = os.environ.get("TORCH_DIODE_TORCH", "torch==2.13.0")
# Tools the test suite needs besides the lib's `test` extra: tests/test_packaging.py builds wheels.
TEST_TOOLS = ("build", "hatchling>=1.26")
RUFF = "ruff==0.17.6"
MYPY = "mypy==2.4.1"


def _install_torch(session: nox.Session) -> None:
    """Install torch first and explicitly (see the module docstring), then say which build it is."""
    session.install(TORCH, "numpy")  # numpy with it: torch warns at import when it is missing
    session.run(
        "python",
        "-c",
        "import sys, torch; print(f'python {sys.version.split()[0]}, torch {torch.__version__}, "
        'CUDA build: {torch.version.cuda or "no"}\')',
    )


def _install(session: nox.Session, *extra: str) -> None:
    """Torch, then the three packages from the working tree (editable) with the test extra and ``extra``."""
    _install_torch(session)
    session.install("-e", f"{LIB}[test,plot,progress]", "-e", str(MODELS), "-e", str(META), *extra)


@nox.session
def tests(session: nox.Session) -> None:
    """Run the CPU test suite against the three packages installed from the working tree."""
    _install(session, *TEST_TOOLS)
    env = {"TORCHINDUCTOR_CACHE_DIR": os.path.join(session.create_tmp(), "inductor-cache")}
    session.run("python", "-m", "pytest", *session.posargs, env=env)


@nox.session
def demo(session: nox.Session) -> None:
    """Run `diode demo` from the working tree: each shipped model on its GPU's held-out validation data
    (data/<KEY>/val.msgpack) and, on a CUDA GPU, a real compile with and without torch-diode."""
    _install_torch(session)
    session.install("-e", f"{LIB}[plot]", "-e", str(MODELS))
    plots = os.path.join(session.create_tmp(), "demo-plots")
    # Arguments after -- go to `diode demo` and win over these (e.g. `nox -s demo -- --cpu-only`).
    session.run("diode", "demo", "--data-dir", str(REPO / "data"), "--plot-dir", plots, *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Check style with ruff (lint rules and formatting); fix with `ruff check --fix . && ruff format .`."""
    session.install(RUFF)
    failed = []
    for command in (["check"], ["format", "--check"]):  # run both, so one pass shows every problem
        try:
            session.run("ruff", *command, *(session.posargs or ["."]))
        except nox.command.CommandFailed:
            failed.append(f"ruff {' '.join(command)}")
    if failed:
        session.error(f"{' and '.join(failed)} failed (above); `ruff check --fix . && ruff format .` fixes most of it")


@nox.session
def typecheck(session: nox.Session) -> None:
    """Type-check the library with mypy (configuration in the root pyproject.toml)."""
    _install_torch(session)
    session.install(MYPY, "-e", str(LIB))
    session.run("mypy", *session.posargs)


@nox.session
def build(session: nox.Session) -> None:
    """Build the three wheels and sdists, and a slim models wheel, into dist/ and check their contents."""
    session.install("build", "twine")
    if DIST.exists():
        session.log(f"removing the previous build output in {DIST}")
        shutil.rmtree(DIST)
    for package in (LIB, MODELS, META):
        # sdist first, then the wheel built from that sdist (the way pip builds from PyPI).
        session.run("python", "-m", "build", "--outdir", str(DIST), str(package))
    session.run(
        "python", "-m", "build", "--wheel", "--outdir", str(SLIM_DIST), str(MODELS), env={"TORCH_DIODE_SLIM": "1"}
    )
    artifacts = sorted(str(p) for p in [*DIST.glob("*.whl"), *DIST.glob("*.tar.gz"), *SLIM_DIST.glob("*.whl")])
    session.run("twine", "check", "--strict", *artifacts)
    problems = _check_dists()
    for path in sorted(DIST.rglob("*.whl")) + sorted(DIST.glob("*.tar.gz")):
        session.log(f"{path.relative_to(REPO)}: {path.stat().st_size / 1e6:.3f} MB")
    if problems:
        session.error("the built distributions are wrong:\n  " + "\n  ".join(problems))


def _wheel(directory: Path, dist_name: str) -> Path:
    wheels = sorted(directory.glob(f"{dist_name.replace('-', '_')}-*.whl"))
    if len(wheels) != 1:
        raise FileNotFoundError(
            f"expected one {dist_name} wheel in {directory}, found {len(wheels)}: run `nox -s build` first"
        )
    return wheels[0]


def _check_dists() -> list[str]:
    """What is wrong with the wheels in dist/ (an empty list when they are right)."""
    problems: list[str] = []
    version = None
    for dist_name, directory in (
        ("torch-diode-lib", DIST),
        ("torch-diode-models", DIST),
        ("torch-diode", DIST),
        ("torch-diode-models", SLIM_DIST),
    ):
        wheel = _wheel(directory, dist_name)
        with zipfile.ZipFile(wheel) as zf:
            names = set(zf.namelist())
            metadata = Parser().parsestr(zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode())
        version = version or metadata["Version"]
        label = str(wheel.relative_to(REPO))
        if metadata["Version"] != version:
            problems.append(f"{label}: version {metadata['Version']}, the others have {version}")
        packages = {n.split("/")[0] for n in names if ".dist-info/" not in n}
        weights = sorted(n for n in names if n.endswith(".safetensors"))
        if dist_name == "torch-diode-lib":
            if packages != {"torch_diode", "_torch_diode_cli"} or weights:
                problems.append(
                    f"{label}: must hold only torch_diode, _torch_diode_cli and no weights, holds {packages} {weights}"
                )
        elif dist_name == "torch-diode-models":
            source = MODELS / "src" / "torch_diode_models"
            expected = (
                []
                if directory == SLIM_DIST
                else sorted(f"torch_diode_models/{p.name}" for p in source.glob("*.safetensors"))
            )
            if packages != {"torch_diode_models"} or "torch_diode_models/manifest.json" not in names:
                problems.append(f"{label}: must hold torch_diode_models with manifest.json, holds {sorted(names)}")
            if weights != expected:
                problems.append(f"{label}: weights {weights}, expected {expected}")
        elif packages != {"torch_diode_autoregister"} or weights:
            problems.append(f"{label}: must hold only torch_diode_autoregister, holds {packages} {weights}")
    return problems


# Install combinations for package_smoke: name -> wheels (from dist/) installed into a fresh venv.
SMOKE_COMBINATIONS = {
    "lib-only": ("torch-diode-lib",),
    "lib+models": ("torch-diode-lib", "torch-diode-models"),
    "all-three": ("torch-diode-lib", "torch-diode-models", "torch-diode"),
    "lib+slim-models": ("torch-diode-lib", "slim:torch-diode-models"),
}


@nox.session
def package_smoke(session: nox.Session) -> None:
    """Install the built wheels (after `nox -s build`) into fresh venvs, one per install combination,
    and report what `import torch_diode` / `import torch_diode_models` do to Inductor on CPU."""
    wheels = {
        "torch-diode-lib": _wheel(DIST, "torch-diode-lib"),
        "torch-diode-models": _wheel(DIST, "torch-diode-models"),
        "torch-diode": _wheel(DIST, "torch-diode"),
        "slim:torch-diode-models": _wheel(SLIM_DIST, "torch-diode-models"),
    }
    # This session's venv holds torch and the lib's third-party dependencies (installed once, from the
    # lib wheel's own metadata); each combination's fresh venv sees them through a .pth file, so pip
    # resolves our wheels' dependencies against them without installing torch four times.
    _install_torch(session)
    with zipfile.ZipFile(wheels["torch-diode-lib"]) as zf:
        metadata = Parser().parsestr(zf.read(next(n for n in zf.namelist() if n.endswith("/METADATA"))).decode())
    session.install(*(r for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r))
    deps_site = session.run(
        "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", silent=True
    ).strip()
    root = Path(session.create_tmp()) / "smoke"
    shutil.rmtree(root, ignore_errors=True)
    reports = {}
    for name, wanted in SMOKE_COMBINATIONS.items():
        venv = root / name
        session.run(sys.executable, "-m", "venv", "--without-pip", str(venv), external=True)
        python = str(venv / "bin" / "python")
        site = session.run(
            python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", silent=True, external=True
        ).strip()
        Path(site, "_torch_diode_smoke_deps.pth").write_text(deps_site + "\n")
        # Our wheels come only from dist/ (--no-index): PyPI has unrelated torch-diode releases.
        session.run(
            "python", "-m", "pip", "--python", python, "install", "--no-index", "--quiet",
            *(str(wheels[w]) for w in wanted),
        )  # fmt: skip
        report_file = root / f"{name}.json"
        session.run(
            python,
            str(REPO / "scripts" / "smoke_check_install.py"),
            "--combination",
            name,
            "--json-out",
            str(report_file),
            external=True,
            env={
                "TORCH_DIODE_HARDWARE": "NVIDIA-H100",
                "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor-cache"),
                # No network: a model the wheel lacks comes from an (empty) private Hub cache or not at all.
                "HF_HUB_OFFLINE": "1",
                "HF_HOME": str(root / "hf-home"),
            },
        )
        reports[name] = json.loads(report_file.read_text())
    lines = []
    for name, report in reports.items():
        for step in report["steps"]:
            lines.append(
                f"  {name:16} import {step['import']:18} handler={step['handler']} "
                f"registration={step['registration']} +inductor_modules={step['inductor_modules_added']}"
            )
        lines.append(f"  {name:16} `diode hardware` lists models {report['command_line']['models']}")
    session.log("package_smoke summary (TORCH_DIODE_HARDWARE=NVIDIA-H100, CPU):\n" + "\n".join(lines))
