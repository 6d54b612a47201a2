"""Session 54: the two-width cascade built into the model file and the trainer
(``TrainOptions.screen_hidden``, ``DiodeModel.screen``), trained natively and scored as session 53
scored its emulation (``session53/expectile.py cascade``).

    WORKERS=10 bash benchmarks/models/session54/gpu-jobs.sh tw     # device host: jobs-tw.json
    python benchmarks/models/session54/screen.py KEY OOS RESULTS [--seeds 0 1 2] [--variant tw]
    python benchmarks/models/session54/screen.py KEY OOS RESULTS --prefix s55 --variant d3 --label "..."   # session 55

The jobs are session 53's ``h64`` jobs (``session31/cv_jobs.py`` ``val`` jobs of the shipped
files' trainer, ``forest_trees`` 0) with ``ensemble_size`` 3 and ``screen_hidden`` 32: a 64-wide
ensemble of three members behind a 32-wide one-member screen, trained in one ``train`` call.
Session 53's emulation screened with the first member of a separately trained four-member
32-wide ensemble; here the screen is what ``ensemble_size=1, hidden=32`` trains (no bootstrap
weights), and the three wide members are trained as three (other draws than the first three of
four). Each model gets its seed's ranking forest and, on the H200, the shipped file's neighbour
memory (``session53/expectile.put_in``), and one line of the figures of ``expectile.py score``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks/models/session53"))
from expectile import TAG, scored  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("key", choices=sorted(TAG))
    ap.add_argument("oos", help="the OOS dataset, relative to the repository root")
    ap.add_argument("results", help="the folder of the jobs' saved models")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--variant", default="tw", help="the jobs' name ending")
    ap.add_argument("--prefix", default="s54", help="the jobs' name start (session 55's: s55)")
    ap.add_argument("--label", default="hidden 64 x 3, screen 32", help="the architecture, for the output lines")
    ap.add_argument(
        "--own-memory",
        action="store_true",
        help="H200: keep the job's own neighbour memory (every training file's) instead of the shipped file's",
    )
    a = ap.parse_args()
    from torch_diode.model import load_model

    def make(seed: int):
        return load_model(Path(a.results) / f"{a.prefix}-{TAG[a.key]}-val-s{seed}-{a.variant}.safetensors")

    for seed in a.seeds:
        label = f"{a.variant} ({a.label})" + (", own memory" if a.own_memory else "")
        scored(a, seed, [(label, make)], shipped_memory=not a.own_memory)


if __name__ == "__main__":
    main()
