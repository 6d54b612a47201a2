"""Session 60, a diagnostic after rule 7 (no decision rests on it): the forest's shortlist against
its size, at about the same scoring cost.

    python benchmarks/models/session60/shortlist.py R7_DIR NET_FILE_S0 NET_FILE_S1

Each seed's ``fromN`` forest (N = 288, 384: ``forest_xfer.py fit from384``'s first 192 + N trees,
``R7_DIR/forest-NVIDIA-H200-fromN-sSEED.npz``) in session 59's ``both`` file of that seed,
re-ranking the network's best 384 or 512 candidates; ``call_study.val_figures`` on the H200's
validation set. Output: ``shortlist.txt``.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
for _d in ("session31", "session44", "session50", "session51", "session57"):
    sys.path.insert(0, str(ROOT / "benchmarks/models" / _d))
from call_study import val_figures  # noqa: E402
from forest_xfer import forest_of  # noqa: E402


def main() -> None:
    from torch_diode.model import load_model

    r7, nets = Path(sys.argv[1]), sys.argv[2:4]
    for seed, net in enumerate(nets):
        model = load_model(net)
        for n in (288, 384):
            for shortlist in (384, 512):
                options = dataclasses.replace(model.forest.options, shortlist=shortlist)
                model.forest = forest_of(r7 / f"forest-NVIDIA-H200-from{n}-s{seed}.npz", options)
                cost = (192 + n) * shortlist / 1000
                print(
                    f"seed {seed} from{n} ({192 + n} trees) shortlist {shortlist} cost {cost:.0f}k: "
                    f"{val_figures(model, 'NVIDIA-H200')}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
