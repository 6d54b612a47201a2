"""``diode hardware``: which GPU torch-diode detects, its hardware key, and why."""

from __future__ import annotations

import argparse
import json
import sys

from torch_diode.cli import UsageError
from torch_diode.hardware import ENV_VAR, HARDWARE_SPECS, KNOWN_KEYS, detect
from torch_diode.inductor.ptxas import check_ptxas, triton_arch
from torch_diode.registry import local_weights, models_for_hardware

#: What ``diode hardware`` says of a model's weights, by :func:`local_weights`' answer.
_WHERE = {
    "package": "weights on disk",
    "cache": "weights on disk, in the Hugging Face cache",
    "hub": "weights not on disk: fetched from the Hugging Face Hub on first use",
    "missing": "weights not on disk, and its manifest names nowhere to fetch them",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "hardware",
        help="show the detected GPU, its hardware key and why",
        description=f"Show the GPU torch sees, the hardware key torch-diode gives it and why. "
        f"{ENV_VAR} overrides detection (a known key, custom:<name>, or none). Known keys: {', '.join(KNOWN_KEYS)}. "
        "Lists the installed models for the key, whether their weights are on disk or would be fetched from "
        "the Hugging Face Hub, the one auto-registration would take first, and "
        "whether Inductor's compile workers and this process key Triton's cache with different ptxas "
        "versions (then stock max-autotune compiles kernels twice; the line says what to set).",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--device", type=int, default=None, help="CUDA device index (default: the current device)")
    p.set_defaults(func=_hardware)


def _hardware(args: argparse.Namespace) -> int:
    if args.device is not None and args.device < 0:
        raise UsageError(f"--device: must be a non-negative device index, got {args.device}")
    info = detect(args.device)
    spec = HARDWARE_SPECS.get(info.key) if info.key else None
    entries = models_for_hardware(info.key) if info.key else []
    models = [entry.name for entry in entries]
    weights = {entry.name: local_weights(entry)[1] for entry in entries}  # package, cache, hub or missing
    cc = info.compute_capability
    ptxas = check_ptxas(arch=triton_arch(cc))
    if args.json:
        d = info.to_dict()
        d["has_spec"] = spec is not None
        d["models"] = models
        d["model_weights"] = weights
        d["ptxas"] = ptxas.to_dict()
        json.dump(d, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    cc_text = ".".join(map(str, cc)) if cc else "-"
    mem = f"{info.memory_bytes / 2**30:.1f} GiB" if info.memory_bytes else "-"
    lines = [
        f"key:                {info.key or 'none'}",
        f"name:               {info.name or '-'}",
        f"vendor:             {info.vendor or '-'}",
        f"compute capability: {cc_text}" + (f" ({info.arch})" if info.arch else ""),
        f"SMs:                {info.sm_count if info.sm_count is not None else '-'}",
        f"memory:             {mem}",
        f"source:             {info.source}",
        f"reason:             {info.reason}",
        f"datasheet spec:     {'yes' if spec else 'no'}",
    ]
    if info.key:
        lines.append(
            f"models:             {', '.join(f'{m} ({_WHERE[weights[m]]})' for m in models)} "
            "(best first; auto-registration takes the first)"
            if models
            else f"models:             none installed for {info.key}"
        )
    from torch_diode.hub import offline_mode

    if any(weights[m] == "hub" for m in models) and offline_mode():
        lines.append(
            "                    HF_HUB_OFFLINE is set: a model whose weights are not on disk cannot be fetched, so "
            "registering it fails; fetch it once online, or install the models wheel that carries the weights"
        )
    lines.append(f"ptxas:              {'MISMATCH: ' if ptxas.mismatch else ''}{ptxas.reason}")
    if ptxas.advice:
        lines.append(f"                    {ptxas.advice}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
