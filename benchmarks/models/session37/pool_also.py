"""Session 37: pool ``cv_jobs.py`` results that carry scoring-time variants (``"also"``) and compare
each variant with the model as trained, problem by problem:

    python benchmarks/models/session37/pool_also.py DIR [DIR ...] [--json OUT.json]

Per GPU, part (``cv``: the folds pooled; ``val``) and seed, and over the seeds pooled: geomean
regret@1 and regret@5 (p95), what the handler keeps at top-3 (``k3``), the top-1 pick over stock's
(validation), and the variant's mean change of log regret@1 over the same problems with a 95%
bootstrap interval (2,000 resamples, seed 0) and how many problems it makes better or worse.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session31"))
from summarize import pooled


def figures(rows):
    """``summarize.pooled``'s figures this report prints (``k3``: its ``kept3``)."""
    p = pooled(rows)
    out = {k: p[k] for k in ("problems", "r1", "r5", "r5_p95")}
    out.update(k3=p["kept3"], aten_picks=p["aten_picks"])
    if p["vs_stock"] is not None:
        out["vs_stock"] = p["vs_stock"]
    return out


def paired(base, var, rng):
    d = np.log([r["r1"] for r in var]) - np.log([r["r1"] for r in base])
    boot = [d[rng.integers(0, len(d), len(d))].mean() for _ in range(2000)]
    return {
        "dlog_r1_pts": float(d.mean() * 100),
        "ci95_pts": [float(np.percentile(boot, 2.5) * 100), float(np.percentile(boot, 97.5) * 100)],
        "better": int((d < -1e-12).sum()),
        "worse": int((d > 1e-12).sum()),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    groups: dict = defaultdict(lambda: defaultdict(list))  # (hw, part, seed) -> variant -> rows
    for d in a.dirs:
        for path in sorted(Path(d).glob("*.json")):
            res = json.loads(path.read_text())
            if "also" not in res:
                continue
            job = res["job"]
            key = (job["hw"], job["part"], str(job["seed"]))
            groups[key]["trained"] += res["rows"]
            for name, rows in res["also"].items():
                assert [r["p"] for r in rows] == [r["p"] for r in res["rows"]], path
                groups[key][name] += rows
    for hw, part in sorted({(k[0], k[1]) for k in groups}):  # the seeds pooled
        merged = defaultdict(list)
        for k, v in groups.items():
            if k[:2] == (hw, part):
                for name, rows in v.items():
                    merged[name] += rows
        groups[(hw, part, "all")] = merged
    rng = np.random.default_rng(0)
    table = {}
    for key in sorted(groups):
        v = groups[key]
        for name in sorted(v):
            f = figures(v[name])
            if name != "trained":
                f.update(paired(v["trained"], v[name], rng))
            table["-".join((*key, name))] = f
            vs = f" vs_stock {f['vs_stock']:.4f}" if "vs_stock" in f else ""
            dl = (
                f"  d {f['dlog_r1_pts']:+.3f} [{f['ci95_pts'][0]:+.3f}, {f['ci95_pts'][1]:+.3f}] +{f['better']}/-{f['worse']}"
                if "dlog_r1_pts" in f
                else ""
            )
            print(
                f"{'-'.join(key):24s} {name:10s} n={f['problems']:5d} r1 {f['r1']:.4f} r5 {f['r5']:.4f} "
                f"p95r5 {f['r5_p95']:.3f} k3 {f['k3']:.4f} aten {f['aten_picks']}{vs}{dl}"
            )
    if a.json:
        Path(a.json).write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
