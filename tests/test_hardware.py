"""Hardware keys: the alias table on real device names, checks, env override, no-GPU reason, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from torch_diode.errors import HardwareError
from torch_diode.hardware import (
    ALIASES,
    ENV_VAR,
    HARDWARE_SPECS,
    KNOWN_KEYS,
    current_key,
    detect,
    gpu_key,
    resolve_gpu,
    spec_for,
)
from torch_diode.inductor.ptxas import torch_bundled_ptxas

# Device names as torch.cuda.get_device_name() / rocm-smi report them on real machines.
REAL_NAMES = [
    ("NVIDIA H100 80GB HBM3", "NVIDIA-H100"),
    ("NVIDIA H100 PCIe", "NVIDIA-H100"),
    ("NVIDIA H100 NVL", "NVIDIA-H100"),
    ("NVIDIA H100", "NVIDIA-H100"),
    ("H100 PCIe", "NVIDIA-H100"),
    ("NVIDIA H100 SXM5 80GB", "NVIDIA-H100"),
    ("NVIDIA H200", "NVIDIA-H200"),
    ("NVIDIA H200 NVL", "NVIDIA-H200"),
    ("H200 NVL", "NVIDIA-H200"),
    ("NVIDIA H20", "NVIDIA-H20"),
    ("NVIDIA A100-SXM4-40GB", "NVIDIA-A100"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA-A100"),
    ("NVIDIA A100-PCIE-40GB", "NVIDIA-A100"),
    ("NVIDIA A100 80GB PCIe", "NVIDIA-A100"),
    ("A100-SXM-80GB", "NVIDIA-A100"),
    ("NVIDIA A10G", "NVIDIA-A10G"),
    ("NVIDIA L4", "NVIDIA-L4"),
    ("NVIDIA L40S", "NVIDIA-L40S"),
    ("NVIDIA GeForce RTX 4090", "NVIDIA-RTX-4090"),
    ("NVIDIA GeForce RTX 3090", "NVIDIA-RTX-3090"),
    ("NVIDIA B200", "NVIDIA-B200"),
    ("NVIDIA GB200", "NVIDIA-GB200"),
    ("AMD Instinct MI300X", "AMD-MI300X"),
    ("AMD Instinct MI300X VF", "AMD-MI300X"),
    ("AMD Instinct MI325X", "AMD-MI325X"),
    ("AMD Instinct MI250X", "AMD-MI250X"),
    ("AMD Instinct MI250X / MI250", "AMD-MI250X"),
    ("  nvidia   h100  80gb  hbm3 ", "NVIDIA-H100"),
    # Different chips that merely share a prefix: never folded into a known key.
    ("NVIDIA GeForce RTX 4090 D", None),
    ("NVIDIA GeForce RTX 3090 Ti", None),
    ("NVIDIA GH200 480GB", None),
    ("NVIDIA A10", None),
    ("NVIDIA L40", None),
    ("NVIDIA A800-SXM4-80GB", None),
    ("AMD Instinct MI210", None),
    ("AMD Radeon RX 7900 XTX", None),
    ("Tesla V100-SXM2-16GB", None),
    ("", None),
]


@pytest.mark.parametrize(("name", "key"), REAL_NAMES, ids=[repr(n) for n, _ in REAL_NAMES])
def test_alias_table_on_real_names(name: str, key: str | None) -> None:
    assert gpu_key(name) == key


def test_alias_targets_are_known_keys() -> None:
    assert set(ALIASES.values()) == set(KNOWN_KEYS)
    for key in KNOWN_KEYS:
        assert key.startswith(("NVIDIA-", "AMD-")) and key == key.strip() and " " not in key


@pytest.mark.parametrize(
    ("name", "cc", "sms", "key", "why"),
    [
        ("NVIDIA H100 80GB HBM3", (9, 0), 132, "NVIDIA-H100", "is NVIDIA-H100"),
        ("NVIDIA H100 PCIe", (9, 0), 114, "NVIDIA-H100", "is NVIDIA-H100"),
        ("NVIDIA H100 NVL", (9, 0), 132, "NVIDIA-H100", "is NVIDIA-H100"),
        ("NVIDIA H200", (9, 0), 132, "NVIDIA-H200", "is NVIDIA-H200"),
        ("NVIDIA A100-SXM4-80GB", (8, 0), 108, "NVIDIA-A100", "is NVIDIA-A100"),
        ("NVIDIA GeForce RTX 4090", (8, 9), 128, "NVIDIA-RTX-4090", "is NVIDIA-RTX-4090"),
        ("AMD Instinct MI300X", (9, 4), 304, "AMD-MI300X", "is AMD-MI300X"),
        ("NVIDIA H100 80GB HBM3", (8, 0), 132, None, "compute capability 8.0, not 9.0"),
        ("NVIDIA A100-SXM4-80GB", (8, 0), 98, None, "reports 98 SMs, not 108"),
        ("NVIDIA H100 80GB HBM3", None, 16, None, "reports 16 SMs"),
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", (9, 0), 16, None, "is a MIG slice"),
        ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", None, None, None, "is a MIG slice"),
        ("Mystery GPU 9000", (9, 0), 132, None, "unknown GPU 'Mystery GPU 9000'"),
    ],
)
def test_checks_against_capability_and_sm_count(
    name: str, cc: tuple[int, int] | None, sms: int | None, key: str | None, why: str
) -> None:
    k, reason = resolve_gpu(name, compute_capability=cc, sm_count=sms)
    assert k == key and why in reason, reason
    assert gpu_key(name, compute_capability=cc, sm_count=sms) == key


def test_unknown_name_reason_lists_keys_and_escape() -> None:
    _, reason = resolve_gpu("NVIDIA GH200 480GB")
    assert "NVIDIA-H100" in reason and "AMD-MI300X" in reason and f"{ENV_VAR}=custom:" in reason


# -- detection and the environment override ------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("NVIDIA-H100", "NVIDIA-H100"),
        ("nvidia-h200", "NVIDIA-H200"),
        (" AMD-MI300X ", "AMD-MI300X"),
        ("custom:ACME-X1", "ACME-X1"),
        ("CUSTOM:my_gpu.v2", "my_gpu.v2"),
    ],
)
def test_env_override(monkeypatch: pytest.MonkeyPatch, value: str, key: str) -> None:
    monkeypatch.setenv(ENV_VAR, value)
    info = detect()
    assert info.key == key and info.source == "env" and ENV_VAR in info.reason
    assert current_key() == key


def test_env_none_and_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "none")
    info = detect()
    assert info.key is None and "disables" in info.reason
    monkeypatch.setenv(ENV_VAR, "")  # empty: as if unset
    assert detect().source != "env"


@pytest.mark.parametrize(
    "value", ["H100", "NVIDIA H100 80GB HBM3", "NVIDIA-H300", "custom:", "custom:has space", "custom:-x", "custom:a/b"]
)
def test_env_override_invalid(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(ENV_VAR, value)
    with pytest.raises(HardwareError) as e:
        detect()
    assert str(e.value).startswith(f"{ENV_VAR}={value!r}")
    if not value.lower().startswith("custom:"):
        assert "NVIDIA-H100" in str(e.value) and "custom:" in str(e.value)  # names the known keys and the escape


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_no_gpu_gives_none_with_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    info = detect()
    assert info.key is None and info.source == "none" and info.name == ""
    if torch.version.cuda is None and torch.version.hip is None:
        assert "built without CUDA or ROCm" in info.reason
    else:
        assert "sees no GPU" in info.reason
    assert ENV_VAR in info.reason or "CUDA_VISIBLE_DEVICES" in info.reason
    assert current_key() is None


def test_a_gpu_cuda_cannot_start_on_is_no_usable_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU that CUDA reports but cannot start on (an exclusive-process GPU another process holds,
    a driver mismatch): no key, with the reason, not CUDA's RuntimeError, which before session 78
    escaped detect() and failed `import torch_diode_models`. The GPU is the stand-in here."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    def busy() -> int:
        raise RuntimeError("CUDA error: CUDA-capable device(s) is/are busy or unavailable\nCUDA kernel errors ...")

    monkeypatch.setattr(torch.cuda, "current_device", busy)
    info = detect()
    assert info.key is None and info.source == "none"
    assert "cannot use it (CUDA error: CUDA-capable device(s) is/are busy or unavailable)" in info.reason
    assert "nvidia-smi" in info.reason


@pytest.mark.gpu
def test_detect_on_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    info = detect()
    assert info.name == torch.cuda.get_device_name() and info.sm_count and info.memory_bytes
    assert info.key == gpu_key(info.name, compute_capability=info.compute_capability, sm_count=info.sm_count)


def test_import_has_no_side_effects() -> None:
    code = (
        "import sys, torch_diode.hardware, torch_diode.lut, torch_diode.cli.hardware, torch_diode.cli.data\n"
        "print('torch' in sys.modules)\n"
    )
    # The lib alone: with the torch-diode meta-wheel installed its plugin would import torch on purpose.
    env = {**os.environ, "TORCH_DIODE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.strip() == "False"  # torch is not even imported, so CUDA cannot be initialised


# -- datasheet specs -------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(HARDWARE_SPECS))
def test_specs_are_consistent(key: str) -> None:
    from torch_diode.hardware import _KEYS

    s = spec_for(key)
    assert s.key == key and key in KNOWN_KEYS
    assert s.sm_count in _KEYS[key].sm_counts
    assert s.smem_per_sm_bytes >= 64 * 1024 and s.l2_bytes >= 4 * 2**20
    assert s.mem_bandwidth_gbs > 100 and s.memory_bytes >= 16 * 10**9
    assert s.regs_per_sm >= 65536 and s.max_threads_per_sm in (1536, 2048)
    assert set(s.peak_tflops) - {"float8_e4m3fn", "float8_e5m2"} == {"float16", "bfloat16", "tf32", "float32"}
    if "float8_e4m3fn" in s.peak_tflops:
        assert s.peak_tflops["float8_e4m3fn"] == s.peak_tflops["float8_e5m2"] > s.peak_tflops["float16"]
    assert s.peak_tflops["bfloat16"] == s.peak_tflops["float16"] > s.peak_tflops["tf32"] >= s.peak_tflops["float32"] > 0
    assert s.peak_tflops_for("float32", allow_tf32=True) == s.peak_tflops["tf32"]


def test_required_specs_present() -> None:
    for key in ("NVIDIA-H100", "NVIDIA-H200", "NVIDIA-A100"):
        assert key in HARDWARE_SPECS
    assert (
        HARDWARE_SPECS["NVIDIA-H100"].sm_count == 132 and HARDWARE_SPECS["NVIDIA-A100"].smem_per_sm_bytes == 163 * 1024
    )
    with pytest.raises(HardwareError, match="no hardware spec for 'NVIDIA-B200'; specs exist for"):
        spec_for("NVIDIA-B200")
    assert "float8_e4m3fn" in HARDWARE_SPECS["NVIDIA-H100"].peak_tflops
    assert "float8_e4m3fn" not in HARDWARE_SPECS["NVIDIA-A100"].peak_tflops  # no fp8 tensor cores
    with pytest.raises(KeyError, match="float64"):
        HARDWARE_SPECS["NVIDIA-H100"].peak_tflops_for("float64")


# -- diode hardware ---------------------------------------------------------------------------------


def test_cli_hardware_env(run_diode) -> None:
    proc = run_diode("hardware", "--json", env={ENV_VAR: "NVIDIA-H100"}, check=True)
    d = json.loads(proc.stdout)
    assert d["key"] == "NVIDIA-H100" and d["source"] == "env" and d["has_spec"] is True
    assert d["models"] == ["NVIDIA-H100-matmul"]  # torch-diode-models' (installed in the tests session)
    proc = run_diode("hardware", env={ENV_VAR: "NVIDIA-H200"}, check=True)
    assert "models:             NVIDIA-H200-matmul (weights on disk) (best first" in proc.stdout
    proc = run_diode("hardware", env={ENV_VAR: "custom:ACME-X1"}, check=True)
    assert "ACME-X1" in proc.stdout and "custom key" in proc.stdout
    assert "models:             none installed for ACME-X1" in proc.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_cli_hardware_no_gpu(run_diode, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_PTXAS_PATH", raising=False)  # the command's environment is a copy of this one
    proc = run_diode("hardware", env={ENV_VAR: ""}, check=True)
    assert "key:                none" in proc.stdout and "reason:" in proc.stdout
    if torch_bundled_ptxas() is None:  # the CPU wheel
        assert "ptxas:              torch has no bin/ptxas" in proc.stdout
    d = json.loads(
        run_diode("hardware", "--json", env={ENV_VAR: "", "TRITON_PTXAS_PATH": "/x/ptxas"}, check=True).stdout
    )
    assert d["ptxas"]["mismatch"] is False and d["ptxas"]["reason"].startswith("TRITON_PTXAS_PATH is set ('/x/ptxas')")


def test_cli_hardware_errors(run_diode) -> None:
    # One line: the command line does not run the meta-wheel's plugin (installed in the tests session),
    # which logged an error of its own about the same variable before the command's.
    proc = run_diode("hardware", env={ENV_VAR: "NVIDIA-H300"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("diode hardware: error: TORCH_DIODE_HARDWARE='NVIDIA-H300'")
    proc = run_diode("hardware", "--help", check=True)
    assert ENV_VAR in proc.stdout and "--json" in proc.stdout
