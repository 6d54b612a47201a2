"""Session 39: where the top-1 regret is, by operand alignment, and scoring-time rules on those
classes (``ranking``'s top-1 pick: the lowest prediction plus the cliff guard; the diversity
does not move it):

    python benchmarks/models/session39/misaligned.py DIR [DIR...]

DIRs hold ``cv_jobs.py`` results with ``"npz": true`` (session 38's seeds 6-9, CV folds and
validation). Per GPU and part, for each class of problem (``aligned``: both operands' rows
16-byte aligned, ``features.operands_aligned16``; ``A-mis``/``B-mis``: one of them not;
``both-mis``), the geomean over problems and seeds of the measured time over the best of:
``pick`` (the model's top-1), ``aten`` (ATen always), ``model_tri`` (the model's best Triton
config), ``best_tri`` (the best Triton config), ``call`` (the better of ATen and the model's best
Triton config: a perfect ATen-or-Triton call), and the shares of ATen picks and ATen wins. Then,
what the ATen-or-Triton call loses on the aligned problems, per dtype and op: the mean of
log(pick / call) in points (x100) and the shares of wrong ATen and wrong Triton calls. Then, per
run, the change of regret@1 (points, x100) with four scoring-time rules, each at a few
strengths: ``aten``: ATen's predicted log time on ``both-mis`` problems shifted by D (negative:
ATen favoured), ``aten_aligned`` the same on ``aligned`` problems; ``tile``: on
``A-mis``/``B-mis`` problems, each Triton config's prediction plus D * log2(its tile along the
misaligned operand's contiguous dimension / 16) (A column-major:
BLOCK_M, row-major: BLOCK_K; B row-major: BLOCK_N, column-major: BLOCK_K); ``spread``: on
``both-mis`` problems, each Triton config's prediction plus D times the ensemble's spread.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session38"))
from diverse import CONFIG_FIELDS, one_warp_misaligned, problems_of_npz

from torch_diode.features import operands_aligned16

RULES = {
    "aten": (-0.2, -0.1, -0.05, 0.05, 0.1, 0.2),
    "aten_aligned": (-0.1, -0.05, -0.02, 0.02, 0.05, 0.1),
    "tile": (0.02, 0.05, 0.1, 0.2),
    "spread": (0.25, 0.5, 1.0),
}


def alignment_class(problem) -> str:
    a_ok, b_ok = operands_aligned16(problem)
    return "aligned" if a_ok and b_ok else "A-mis" if b_ok else "B-mis" if a_ok else "both-mis"


def contiguous_tile(problem, cfg, aten) -> np.ndarray:
    """``[C]`` each Triton config's tile along the misaligned operand's contiguous dimension (16 for
    ATen) on a problem with exactly one misaligned operand."""
    a_ok, _ = operands_aligned16(problem)
    if not a_ok:
        col = CONFIG_FIELDS.index("block_m" if problem.stride_a[-1] != 1 else "block_k")
    else:
        col = CONFIG_FIELDS.index("block_k" if problem.stride_b[-1] != 1 else "block_n")
    return np.where(aten, 16, cfg[:, col]).astype(np.float64)


def ruled(q, cls, problem, spread, aten, cfg, rule, d):
    """The predictions ``q`` with one rule at strength ``d`` (module docstring)."""
    if (rule == "aten" and cls == "both-mis") or (rule == "aten_aligned" and cls == "aligned"):
        return q + d * aten
    if rule == "tile" and cls in ("A-mis", "B-mis"):
        return q + d * np.log2(np.maximum(contiguous_tile(problem, cfg, aten), 16) / 16)
    if rule == "spread" and cls == "both-mis":
        return q + d * spread * ~aten
    return q


def main() -> None:
    classes = defaultdict(lambda: defaultdict(list))  # (hw, part, class) -> stat -> values
    calls = defaultdict(lambda: defaultdict(list))  # (hw, part, dtype or op) -> the aligned call's losses
    shifted = defaultdict(lambda: defaultdict(list))  # (hw, part, seed) -> shift -> log regret
    for d in sys.argv[1:]:
        for js in sorted(Path(d).glob("*.json")):
            res = json.loads(js.read_text())
            job = res["job"]
            if not js.with_suffix(".npz").exists():
                continue
            for p, m, pred, spread, oracle, aten, cfg in problems_of_npz(js.with_suffix(".npz"), res["rows"]):
                q = pred + 0.2 * one_warp_misaligned(p, cfg, aten)
                cls = alignment_class(p)
                tri = np.flatnonzero(~aten)
                t_pick = tri[np.argmin(q[tri])]
                stats = classes[(job["hw"], job["part"], cls)]
                stats["pick"].append(np.log(m[np.argmin(q)] / oracle))
                stats["aten"].append(np.log(m[aten].min() / oracle))
                stats["model_tri"].append(np.log(m[t_pick] / oracle))
                stats["best_tri"].append(np.log(m[tri].min() / oracle))
                stats["call"].append(np.log(min(m[t_pick], m[aten].min()) / oracle))
                stats["aten_picked"].append(float(aten[np.argmin(q)]))
                stats["aten_wins"].append(float(m[aten].min() <= m[tri].min()))
                if cls == "aligned":
                    pick = int(np.argmin(q))
                    for key in (f"dtype {p.dtype}", f"op {p.op}"):
                        loss = calls[(job["hw"], job["part"], key)]
                        loss["loss"].append(100 * np.log(m[pick] / min(m[t_pick], m[aten].min())))
                        loss["wrong_aten"].append(float(aten[pick] and m[t_pick] < m[aten].min()))
                        loss["wrong_triton"].append(float(not aten[pick] and m[aten].min() < m[t_pick]))
                run = shifted[(job["hw"], job["part"], job["seed"])]
                run["base"].append(np.log(m[np.argmin(q)] / oracle))
                for rule, strengths in RULES.items():
                    for d in strengths:
                        qs = ruled(q, cls, p, spread, aten, cfg, rule, d)
                        run[(rule, d)].append(np.log(m[np.argmin(qs)] / oracle))
    for (hw, part, cls), stats in sorted(classes.items()):
        shown = " ".join(
            f"{k} {np.mean(v):.2f}" if k.startswith("aten_") else f"{k} {np.exp(np.mean(v)):.3f}"
            for k, v in stats.items()
        )
        print(f"{hw} {part:3s} {cls:8s} n={len(stats['pick']):5d} {shown}")
    for (hw, part, key), loss in sorted(calls.items()):
        shown = " ".join(f"{k} {np.mean(v):.2f}" for k, v in loss.items())
        print(f"{hw} {part:3s} aligned, {key:14s} n={len(loss['loss']):5d} {shown}")
    for hw, part in sorted({(h, p) for h, p, _ in shifted}):
        runs = sorted(k for k in shifted if k[:2] == (hw, part))
        for rule, strengths in RULES.items():
            for s in strengths:
                d = [100 * (np.exp(np.mean(shifted[r][(rule, s)])) - np.exp(np.mean(shifted[r]["base"]))) for r in runs]
                print(f"{hw} {part:3s} {rule:6s} {s:+.2f}: mean {np.mean(d):+.2f} [{' '.join(f'{x:+.2f}' for x in d)}]")


if __name__ == "__main__":
    main()
