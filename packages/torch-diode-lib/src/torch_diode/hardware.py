"""Hardware keys: which GPU this is, as one normalised name (``NVIDIA-H100``, ``AMD-MI300X`` ...).

``gpu_key`` is the single normaliser: it maps a device name (``torch.cuda.get_device_name()``)
through an explicit alias table, and checks the compute capability and SM count when given, so a
MIG slice or a renamed card never silently borrows another GPU's model. ``detect`` asks torch
about the current device; the environment variable ``TORCH_DIODE_HARDWARE`` overrides it:

* ``TORCH_DIODE_HARDWARE=NVIDIA-H100`` (any known key, case-insensitive): use that key without
  querying the GPU (tests, CPU-only machines, containers where the GPU cannot be queried);
* ``TORCH_DIODE_HARDWARE=custom:MY-GPU``: use ``MY-GPU`` as the key, for a GPU that is not in the
  table (your own collected data and models); letters, digits, ``.``, ``_`` and ``-`` only;
* ``TORCH_DIODE_HARDWARE=none``: behave as if there were no GPU (no model is registered).

Nothing here runs at import time: ``detect`` imports torch and queries (and so initialises) CUDA
only when called. ``HARDWARE_SPECS`` holds datasheet figures for the GPUs features need.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any

from torch_diode.errors import HardwareError

ENV_VAR = "TORCH_DIODE_HARDWARE"
CUSTOM_PREFIX = "custom:"
_CUSTOM_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class _KeyInfo:
    vendor: str
    compute_capability: tuple[int, int]
    sm_counts: frozenset[int]  # every SM/CU count a full (non-MIG) device of this key reports


# The keys we know, with what a device of that key reports to torch. SM counts cover every variant
# the alias table folds into the key (H100 SXM/NVL 132, PCIe 114; MI250X reports one GCD, 110 CUs).
# ROCm reports gfx942 as capability 9.4 and gfx90a as 9.0.
_KEYS: Mapping[str, _KeyInfo] = {
    "NVIDIA-H100": _KeyInfo("NVIDIA", (9, 0), frozenset({132, 114})),
    "NVIDIA-H200": _KeyInfo("NVIDIA", (9, 0), frozenset({132})),
    "NVIDIA-H20": _KeyInfo("NVIDIA", (9, 0), frozenset({78})),
    "NVIDIA-A100": _KeyInfo("NVIDIA", (8, 0), frozenset({108})),
    "NVIDIA-A10G": _KeyInfo("NVIDIA", (8, 6), frozenset({80})),
    "NVIDIA-L4": _KeyInfo("NVIDIA", (8, 9), frozenset({58})),
    "NVIDIA-L40S": _KeyInfo("NVIDIA", (8, 9), frozenset({142})),
    "NVIDIA-RTX-4090": _KeyInfo("NVIDIA", (8, 9), frozenset({128})),
    "NVIDIA-RTX-3090": _KeyInfo("NVIDIA", (8, 6), frozenset({82})),
    "NVIDIA-B200": _KeyInfo("NVIDIA", (10, 0), frozenset({148})),
    "NVIDIA-GB200": _KeyInfo("NVIDIA", (10, 0), frozenset({148, 152})),
    "AMD-MI300X": _KeyInfo("AMD", (9, 4), frozenset({304})),
    "AMD-MI325X": _KeyInfo("AMD", (9, 4), frozenset({304})),
    "AMD-MI250X": _KeyInfo("AMD", (9, 0), frozenset({110, 220})),
}

#: Every hardware key torch-diode knows, sorted.
KNOWN_KEYS: tuple[str, ...] = tuple(sorted(_KEYS))

# Explicit alias table: model name (after ``_model_name`` strips vendor, brand, memory size and
# form factor) -> key. Real device-name strings and what they reduce to:
#   "NVIDIA H100 80GB HBM3" -> "h100"      "NVIDIA H100 PCIe" -> "h100"    "NVIDIA H100 NVL" -> "h100 nvl"
#   "NVIDIA A100-SXM4-80GB" -> "a100"      "NVIDIA GeForce RTX 4090" -> "rtx 4090"
#   "AMD Instinct MI300X" -> "mi300x"      "AMD Instinct MI250X / MI250" -> "mi250x / mi250"
# Variants that are different chips ("RTX 4090 D", "RTX 3090 Ti", "GH200") are deliberately absent.
ALIASES: Mapping[str, str] = {
    "h100": "NVIDIA-H100",
    "h100 nvl": "NVIDIA-H100",
    "h100 sxm": "NVIDIA-H100",
    "h200": "NVIDIA-H200",
    "h200 nvl": "NVIDIA-H200",
    "h20": "NVIDIA-H20",
    "a100": "NVIDIA-A100",
    "a10g": "NVIDIA-A10G",
    "l4": "NVIDIA-L4",
    "l40s": "NVIDIA-L40S",
    "rtx 4090": "NVIDIA-RTX-4090",
    "rtx 3090": "NVIDIA-RTX-3090",
    "b200": "NVIDIA-B200",
    "gb200": "NVIDIA-GB200",
    "mi300x": "AMD-MI300X",
    "mi325x": "AMD-MI325X",
    "mi250x": "AMD-MI250X",
    "mi250x / mi250": "AMD-MI250X",
}

# Tokens that name the vendor, brand line, memory or form factor, never the chip.
_NOISE = re.compile(
    r"^(nvidia|geforce|tesla|amd|instinct|hbm\d?e?|sxm\d?|pcie|vf|\d+gb)$",
)


def _model_name(name: str) -> str:
    """Reduce a device name to its model: lower case, ``-``/``_`` as spaces, noise tokens dropped."""
    tokens = re.split(r"[\s\-_]+", name.strip().lower())
    return " ".join(t for t in tokens if t and not _NOISE.match(t))


@dataclass(frozen=True)
class HardwareInfo:
    """What ``detect`` found. ``key`` is None when no known GPU is usable; ``reason`` says why
    (or how the key was obtained)."""

    key: str | None
    name: str
    vendor: str | None
    compute_capability: tuple[int, int] | None
    sm_count: int | None
    memory_bytes: int | None
    reason: str
    arch: str = ""  # ROCm gcnArchName, e.g. "gfx942:sramecc+:xnack-"
    source: str = "detected"  # "detected", "env" or "none"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["compute_capability"] = list(self.compute_capability) if self.compute_capability else None
        return d


def resolve_gpu(
    name: str, *, compute_capability: tuple[int, int] | None = None, sm_count: int | None = None
) -> tuple[str | None, str]:
    """``(key, reason)`` for a device name; ``key`` is None when the name is unknown or the
    compute capability / SM count contradict it (``reason`` then says which)."""
    model = _model_name(name)
    if "mig" in model.split():
        return None, f"{name!r} is a MIG slice; timings of a full GPU do not apply to it"
    key = ALIASES.get(model)
    if key is None:
        return None, (
            f"unknown GPU {name!r} (model {model!r} is not in the alias table); known keys: "
            f"{', '.join(KNOWN_KEYS)}; set {ENV_VAR}=<key> or {ENV_VAR}={CUSTOM_PREFIX}<your-key>"
        )
    info = _KEYS[key]
    if compute_capability is not None and tuple(compute_capability) != info.compute_capability:
        cc = ".".join(map(str, compute_capability))
        want = ".".join(map(str, info.compute_capability))
        return None, f"{name!r} looks like {key} but reports compute capability {cc}, not {want}"
    if sm_count is not None and sm_count not in info.sm_counts:
        want_sm = "/".join(map(str, sorted(info.sm_counts)))
        return None, f"{name!r} looks like {key} but reports {sm_count} SMs, not {want_sm} (a partitioned GPU?)"
    return key, f"{name!r} is {key}"


def gpu_key(name: str, *, compute_capability: tuple[int, int] | None = None, sm_count: int | None = None) -> str | None:
    """The normalised key of a device name, e.g. ``"NVIDIA H100 80GB HBM3"`` -> ``"NVIDIA-H100"``.

    Args:
        name: the device name as ``torch.cuda.get_device_name()`` reports it.
        compute_capability: when given, must match the key's (else None).
        sm_count: when given, must be one the key's variants report (else None).

    Returns:
        The key, or None for an unknown or contradictory device (``resolve_gpu`` says why).
    """
    return resolve_gpu(name, compute_capability=compute_capability, sm_count=sm_count)[0]


def valid_key(key: object) -> bool:
    """Whether ``key`` is well formed for a hardware key (a known one, or a custom one without its
    ``custom:`` prefix): 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit."""
    return isinstance(key, str) and _CUSTOM_RE.fullmatch(key) is not None


def _from_env(value: str) -> HardwareInfo:
    value = value.strip()
    if value.lower() == "none":
        return HardwareInfo(None, "", None, None, None, None, f"{ENV_VAR}=none disables GPU detection", source="env")
    if value.lower().startswith(CUSTOM_PREFIX):
        custom = value[len(CUSTOM_PREFIX) :]
        if not _CUSTOM_RE.match(custom):
            raise HardwareError(
                f"{ENV_VAR}={value!r}: a custom key must be 1-64 letters, digits, '.', '_' or '-' "
                f"(starting with a letter or digit), e.g. {ENV_VAR}={CUSTOM_PREFIX}ACME-X1"
            )
        return HardwareInfo(custom, "", None, None, None, None, f"{ENV_VAR}={value} (custom key)", source="env")
    by_lower = {k.lower(): k for k in KNOWN_KEYS}
    key = by_lower.get(value.lower())
    if key is None:
        raise HardwareError(
            f"{ENV_VAR}={value!r} is not a known hardware key; known keys: {', '.join(KNOWN_KEYS)}; "
            f"use {ENV_VAR}={CUSTOM_PREFIX}<name> for your own GPU or {ENV_VAR}=none for no GPU"
        )
    return HardwareInfo(
        key, "", _KEYS[key].vendor, None, None, None, f"{ENV_VAR}={value} overrides detection", source="env"
    )


def _amd_fallback(arch: str, sm_count: int, memory_bytes: int) -> str | None:
    """Key of an AMD GPU whose name ROCm did not report, from its gfx arch, CU count and memory."""
    gfx = arch.split(":")[0]
    if gfx == "gfx942" and sm_count == 304:
        return "AMD-MI325X" if memory_bytes > 200 * 2**30 else "AMD-MI300X"
    if gfx == "gfx90a" and sm_count in (110, 220):
        return "AMD-MI250X"
    return None


def detect(device: int | None = None) -> HardwareInfo:
    """Identify the GPU torch sees (the current device unless ``device`` is given).

    ``TORCH_DIODE_HARDWARE`` overrides detection (see the module docstring). Without it this
    imports torch and initialises CUDA/ROCm, so call it when you need the answer, not at import.

    Raises:
        HardwareError: ``TORCH_DIODE_HARDWARE`` holds an unknown key or a malformed custom key.
    """
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return _from_env(env)
    import torch

    def none(reason: str) -> HardwareInfo:
        return HardwareInfo(None, "", None, None, None, None, reason, source="none")

    if torch.version.cuda is None and torch.version.hip is None:
        return none(
            f"torch {torch.__version__} is built without CUDA or ROCm support; set {ENV_VAR} to use a model anyway"
        )
    if not torch.cuda.is_available():
        return none(
            f"torch {torch.__version__} sees no GPU (torch.cuda.is_available() is False; check the driver and "
            f"CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES)"
        )
    try:
        index = torch.cuda.current_device() if device is None else device
        props = torch.cuda.get_device_properties(index)
    except RuntimeError as exc:  # CUDA cannot start: a busy exclusive-process GPU, a driver mismatch
        return none(
            f"torch sees a GPU but cannot use it ({(str(exc).strip().splitlines() or [type(exc).__name__])[0]}); check that no other process "
            "holds it (nvidia-smi: compute mode, processes) and the driver"
        )
    vendor = "AMD" if torch.version.hip else "NVIDIA"
    name = str(props.name)
    cc = (int(props.major), int(props.minor))
    sms = int(props.multi_processor_count)
    mem = int(props.total_memory)
    arch = str(getattr(props, "gcnArchName", "")) if vendor == "AMD" else ""
    key, reason = resolve_gpu(name, compute_capability=cc, sm_count=sms)
    if key is None and vendor == "AMD" and ALIASES.get(_model_name(name)) is None:
        fallback = _amd_fallback(arch, sms, mem)
        if fallback is not None:
            key, reason = (
                fallback,
                f"ROCm reports the name {name!r}; {arch} with {sms} CUs and {mem / 2**30:.0f} GiB is {fallback}",
            )
    return HardwareInfo(key, name, vendor, cc, sms, mem, f"device {index}: {reason}", arch=arch)


def current_key() -> str | None:
    """The hardware key of the current device (``detect().key``), honouring ``TORCH_DIODE_HARDWARE``."""
    return detect().key


# ---------------------------------------------------------------------------------------------
# Datasheet figures
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class HardwareSpec:
    """Datasheet figures of one key's reference variant (named in ``variant``).

    ``smem_per_sm_bytes`` is the most shared memory one block may use (the opt-in maximum, which
    is what bounds a Triton config's stages). ``peak_tflops`` maps ``float16``, ``bfloat16``,
    ``tf32`` and ``float32`` (and ``float8_e4m3fn``/``float8_e5m2`` where the GPU has fp8 tensor
    cores) to the dense (no sparsity) peak with fp32 accumulation; ``float32`` is the
    non-tensor-core FP32 rate (``tf32`` is what an fp32 matmul with ALLOW_TF32 uses).
    """

    key: str
    variant: str
    sm_count: int
    smem_per_sm_bytes: int
    l2_bytes: int
    mem_bandwidth_gbs: float
    memory_bytes: int
    regs_per_sm: int
    max_threads_per_sm: int
    peak_tflops: Mapping[str, float] = field(default_factory=dict)

    def peak_tflops_for(self, dtype: str, *, allow_tf32: bool = False) -> float:
        """Peak TFLOP/s of a matmul in ``dtype`` (a canonical dtype name)."""
        if dtype == "float32" and allow_tf32:
            return self.peak_tflops["tf32"]
        if dtype not in self.peak_tflops:
            raise KeyError(f"{self.key}: no peak TFLOP/s for dtype {dtype!r}; known: {', '.join(self.peak_tflops)}")
        return self.peak_tflops[dtype]


def _tflops(fp16: float, tf32: float, fp32: float, fp8: float | None = None) -> Mapping[str, float]:
    d = {"float16": fp16, "bfloat16": fp16, "tf32": tf32, "float32": fp32}
    if fp8 is not None:  # GPUs with fp8 tensor cores only
        d.update({"float8_e4m3fn": fp8, "float8_e5m2": fp8})
    return MappingProxyType(d)


_KB = 1024
_MB = 1024 * 1024
_GB = 10**9

# Sources: NVIDIA H100/H200/A100/L4/L40S/H20 datasheets and the CUDA programming guide's
# compute-capability table (shared memory per block, registers, threads per SM); AMD CDNA3 white
# paper for MI300X. Sparse figures are halved to dense.
HARDWARE_SPECS: Mapping[str, HardwareSpec] = MappingProxyType(
    {
        s.key: s
        for s in (
            HardwareSpec(
                key="NVIDIA-H100", variant="H100 SXM5 80GB", sm_count=132, smem_per_sm_bytes=227 * _KB,
                l2_bytes=50 * _MB, mem_bandwidth_gbs=3350.0, memory_bytes=80 * _GB, regs_per_sm=65536,
                max_threads_per_sm=2048, peak_tflops=_tflops(989.4, 494.7, 66.9, 1978.9),
            ),
            HardwareSpec(
                key="NVIDIA-H200", variant="H200 SXM 141GB", sm_count=132, smem_per_sm_bytes=227 * _KB,
                l2_bytes=50 * _MB, mem_bandwidth_gbs=4800.0, memory_bytes=141 * _GB, regs_per_sm=65536,
                max_threads_per_sm=2048, peak_tflops=_tflops(989.4, 494.7, 66.9, 1978.9),
            ),
            HardwareSpec(
                key="NVIDIA-H20", variant="H20 96GB", sm_count=78, smem_per_sm_bytes=227 * _KB,
                l2_bytes=60 * _MB, mem_bandwidth_gbs=4000.0, memory_bytes=96 * _GB, regs_per_sm=65536,
                max_threads_per_sm=2048, peak_tflops=_tflops(148.0, 74.0, 44.0, 296.0),
            ),
            HardwareSpec(
                key="NVIDIA-A100", variant="A100 SXM4 80GB", sm_count=108, smem_per_sm_bytes=163 * _KB,
                l2_bytes=40 * _MB, mem_bandwidth_gbs=2039.0, memory_bytes=80 * _GB, regs_per_sm=65536,
                max_threads_per_sm=2048, peak_tflops=_tflops(312.0, 156.0, 19.5),
            ),
            HardwareSpec(
                key="NVIDIA-L4", variant="L4 24GB", sm_count=58, smem_per_sm_bytes=99 * _KB,
                l2_bytes=48 * _MB, mem_bandwidth_gbs=300.0, memory_bytes=24 * _GB, regs_per_sm=65536,
                max_threads_per_sm=1536, peak_tflops=_tflops(121.0, 60.0, 30.3, 242.0),
            ),
            HardwareSpec(
                key="NVIDIA-L40S", variant="L40S 48GB", sm_count=142, smem_per_sm_bytes=99 * _KB,
                l2_bytes=96 * _MB, mem_bandwidth_gbs=864.0, memory_bytes=48 * _GB, regs_per_sm=65536,
                max_threads_per_sm=1536, peak_tflops=_tflops(362.1, 183.0, 91.6, 733.0),
            ),
            HardwareSpec(
                key="NVIDIA-RTX-4090", variant="GeForce RTX 4090 24GB", sm_count=128, smem_per_sm_bytes=99 * _KB,
                l2_bytes=72 * _MB, mem_bandwidth_gbs=1008.0, memory_bytes=24 * _GB, regs_per_sm=65536,
                max_threads_per_sm=1536, peak_tflops=_tflops(165.2, 82.6, 82.6, 330.3),
            ),
            HardwareSpec(
                key="AMD-MI300X", variant="Instinct MI300X 192GB", sm_count=304, smem_per_sm_bytes=64 * _KB,
                l2_bytes=32 * _MB, mem_bandwidth_gbs=5300.0, memory_bytes=192 * _GB, regs_per_sm=131072,
                max_threads_per_sm=2048, peak_tflops=_tflops(1307.4, 653.7, 163.4, 2614.9),
            ),
        )
    }
)  # fmt: skip


def spec_for(key: str) -> HardwareSpec:
    """The datasheet figures of a key.

    Raises:
        HardwareError: no figures are recorded for the key (the message lists those that are).
    """
    try:
        return HARDWARE_SPECS[key]
    except KeyError:
        raise HardwareError(
            f"no hardware spec for {key!r}; specs exist for {', '.join(sorted(HARDWARE_SPECS))}"
        ) from None
