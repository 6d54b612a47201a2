"""Shared pytest fixtures. Area-specific fixtures live in the test files that use them."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run scripts/run_gpu_tests.sh on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def run_diode(tmp_path: Path):
    """Run the real ``diode`` CLI in a subprocess (``python -m torch_diode``)."""

    def run(*args: str, check: bool | None = None, env: dict[str, str] | None = None, timeout: float = 300):
        full_env = dict(os.environ)
        # The subprocess runs in tmp_path: make a relative PYTHONPATH absolute first.
        if full_env.get("PYTHONPATH"):
            full_env["PYTHONPATH"] = os.pathsep.join(
                str(Path(p).resolve()) for p in full_env["PYTHONPATH"].split(os.pathsep) if p
            )
        full_env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor-cache"))
        if env:
            full_env.update(env)
        proc = subprocess.run(
            [sys.executable, "-m", "torch_diode", *args],
            capture_output=True,
            text=True,
            env=full_env,
            timeout=timeout,
            cwd=tmp_path,
        )
        if check is True and proc.returncode != 0:
            raise AssertionError(f"diode {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run


class _TritonConfig:
    """Stand-in for triton.Config, which torch binds to ``object`` when triton is absent
    (reference 7.1). Only the attributes Inductor's heuristic reads."""

    def __init__(self, kwargs, num_stages=None, num_warps=None, **extra):
        self.kwargs = kwargs
        self.num_stages = num_stages
        self.num_warps = num_warps
        for k, v in extra.items():
            setattr(self, k, v)


@pytest.fixture
def fake_cuda(monkeypatch):
    """Enumerate on a fake ``cuda`` device: Inductor only reads the device type."""
    if importlib.util.find_spec("triton") is None:
        import torch._inductor.template_heuristics.triton as th

        monkeypatch.setattr(th, "TritonConfig", _TritonConfig)
    yield
