"""Session 37: the neighbour memory's options (``k``, ``bandwidth``, ``prior_weight``) at scoring
time, on saved models (``cv_jobs.py`` jobs with ``"save": true``), with the ATen head at the
trainer's default blend 0.75 in every variant:

    python benchmarks/models/session37/memory_variants.py DIR [--json OUT.json] [--variants ...]

The memory's options were chosen in session 9 (``k`` 8, bandwidth 3, prior 1) on 365 training
problems and re-checked in session 11, before the ranking forest (session 22); the training sets
are three times that now. The memory acts only when a model scores (the network and the forest
are trained without it), so one saved model per fold serves every variant. Scoring and the
report are ``session35/variants.py``'s.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session35"))
import variants


def _with(**memory):
    def apply(m):
        variants._set(m.aten_head, blend=0.75)
        if memory:
            variants._set(m.memory, **memory)

    return apply


variants.VARIANTS.clear()
variants.VARIANTS.update(
    {
        "base": _with(),
        "k4": _with(k=4),
        "k16": _with(k=16),
        "k32": _with(k=32),
        "bw2": _with(bandwidth=2.0),
        "bw4.5": _with(bandwidth=4.5),
        "pw0.5": _with(prior_weight=0.5),
        "pw2": _with(prior_weight=2.0),
    }
)

if __name__ == "__main__":
    variants.main()
