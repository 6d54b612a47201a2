"""Session 56: an H200 network scored on the H100's validation set as it is (no H100 training),
beside the H100's own network of the same seed and design (session 54's ``tw`` jobs, each with
the H100 seed's ranking forest, as ``session54/screen.py`` scores them).

    python benchmarks/models/session56/zeroshot.py RESULTS [--seeds 0]

RESULTS holds session 54's saved ``s54-h100-val-sS-tw`` and ``s54-h200-val-sS-tw`` models
(``session56/gpu-ft.sh`` retrains them bit for bit in its first phase). The H100 OOS figure
flatters the H200 network: it trained on 240 of those 243 shapes (with H200 timings).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks/models/session53"))
from expectile import scored  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    a = ap.parse_args()
    from torch_diode.model import load_model

    ns = argparse.Namespace(key="NVIDIA-H100", oos="data/NVIDIA-H100/train-active.msgpack")
    for seed in a.seeds:
        scored(
            ns,
            seed,
            [
                ("h100-own", lambda s: load_model(Path(a.results) / f"s54-h100-val-s{s}-tw.safetensors")),
                ("h200-as-is", lambda s: load_model(Path(a.results) / f"s54-h200-val-s{s}-tw.safetensors")),
            ],
        )


if __name__ == "__main__":
    main()
