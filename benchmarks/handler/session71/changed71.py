"""Session 63's ``changed.py`` (time / report) with session 71's variant ``warps4`` (the handler's
defaults with ``min_num_warps=4``) beside ``default`` (the handler's defaults):

    python benchmarks/handler/session71/changed71.py time LIST.json MODEL OUT.json --order default,warps4,default,warps4 [--budget S]
    python benchmarks/handler/session71/changed71.py report OUT.json

LIST.json: ``warps.py list KEY MODEL 4 LIST.json`` (the validation problems whose kept set changes).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session63"))
import changed

changed.VARIANTS["warps4"] = {"min_num_warps": 4}

if __name__ == "__main__":
    changed.main()
