#!/usr/bin/env python
"""Session 70: give the two shipped model files the ``metadata_sha256`` that files written since
session 65 carry, changing nothing else.

Their weights and every other metadata entry stay byte for byte: the file is written again by
``torch_diode.model``'s own writer (``_encode_safetensors``), from its tensors and its metadata
parsed back, which adds ``metadata_sha256`` (the script asserts that the data section is the
same). Before a file is replaced the script checks that the new bytes load and predict
exactly what the old bytes predict on every problem of the GPU's validation set.

    python benchmarks/models/session70/seal.py            # both files, in place
    python scripts/update_models_manifest.py --no-hub     # then the manifest's sizes and sha256
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np

from torch_diode.dataset import read_dataset
from torch_diode.model import _PLAIN_META, _encode_safetensors, _read_header, load_model_bytes

ROOT = Path(__file__).resolve().parents[3]
MODELS = ROOT / "packages/torch-diode-models/src/torch_diode_models"


def sealed(data: bytes) -> bytes:
    """The model file ``data`` written again by the library's own writer, which adds the checksums."""
    from safetensors.torch import load

    meta = _read_header("seal", data)["__metadata__"]
    if "metadata_sha256" in meta:
        raise SystemExit("already sealed")
    values = {k: v if k in _PLAIN_META else json.loads(v) for k, v in meta.items()}
    return _encode_safetensors(load(data), values)


def main() -> int:
    for key in ("NVIDIA-H100", "NVIDIA-H200"):
        path = MODELS / f"{key}-matmul.safetensors"
        old = path.read_bytes()
        new = sealed(old)
        (n_old,) = struct.unpack("<Q", old[:8])
        (n_new,) = struct.unpack("<Q", new[:8])
        assert old[8 + n_old :] == new[8 + n_new :], "the data section changed"
        a, b = load_model_bytes(old, "old"), load_model_bytes(new, "new")
        val = read_dataset(ROOT / f"data/{key}/val.msgpack")
        for i, p in enumerate(val.problems):
            choices = [val.choices[j] for j in np.unique(val.choice_idx[val.problem_idx == i])]
            pa, pb = a.predict(p, choices), b.predict(p, choices)
            assert np.array_equal(pa.log_time_us, pb.log_time_us) and np.array_equal(pa.std, pb.std), p.key()
        path.write_bytes(new)
        print(f"{path.name}: {len(old)} -> {len(new)} bytes; {len(val.problems)} validation problems predict the same")
    return 0


if __name__ == "__main__":
    sys.exit(main())
