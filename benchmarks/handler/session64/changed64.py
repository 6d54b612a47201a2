"""Session 63's ``changed.py`` (time / report) with session 64's variant ``one20`` (the handler's
defaults with ``one_below_us=20``) and ``default`` with it off, as the defaults were when PLAN rule
3 (b) ran:

    python benchmarks/handler/session64/changed64.py time LIST.json MODEL OUT.json --order default,one20,default,one20 [--shard I/2] [--budget S]
    python benchmarks/handler/session64/changed64.py report OUT.json [OUT2.json ...]

LIST.json: ``single_sim.py ... --below 20 --list LIST.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session63"))
import changed

changed.VARIANTS["one20"] = {"one_below_us": 20.0}
# rule 3 (b)'s "default" was the defaults before one_below_us became 20 (its JSON records {})
changed.VARIANTS["default"] = {"one_below_us": 0.0}

if __name__ == "__main__":
    changed.main()
