"""Pool the per-job results of cv_jobs.py: one line (and one JSON entry) per run (tag, GPU, part, seed)."""

import collections
import glob
import json
import sys

import numpy as np


def gm(x):
    return float(np.exp(np.mean(np.log(x))))


def pooled(rows):
    """The figures of ``cv_jobs.py``'s per-problem rows, pooled (``session37/pool_also.py`` uses them too)."""
    r1 = [x["r1"] for x in rows]
    r5 = [x["r5"] for x in rows]
    st = [x["r1"] / x["stock"] for x in rows if x["stock"]]
    return {
        "problems": len(rows),
        "r1": gm(r1),
        "r1_p95": float(np.percentile(r1, 95)),
        "r5": gm(r5),
        "r5_p95": float(np.percentile(r5, 95)),
        "kept1": gm([x["k1"] for x in rows]),
        "kept3": gm([x["k3"] for x in rows]),
        "aten_picks": sum(x["aten_pick"] for x in rows),
        "vs_stock": gm(st) if st else None,
    }


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--json=")]
    out_json = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--json=")]
    res = collections.defaultdict(list)
    for d in args:
        for f in glob.glob(f"{d}/*.json"):
            r = json.load(open(f))
            j = r["job"]
            tag, hw, _, s = j["id"].split("-")
            key = f"{tag}-{hw}-cv{j['folds']}-{s}" if j["part"] == "cv" else j["id"]
            res[key].append(r)
    table = {}
    for key in sorted(res):
        rs = res[key]
        rows = [x for r in rs for x in r["rows"]]
        p = pooled(rows)
        h = {
            "problems": p["problems"],
            "folds_done": len(rs),
            "set": rs[0]["job"]["set"],
            **{k: v for k, v in p.items() if k != "problems"},
            "seconds_max": max(r["seconds"] for r in rs),
        }
        table[key] = h
        print(
            f"{key:24s} n={h['problems']:4d} parts={len(rs)} r1 {h['r1']:.4f} p95 {h['r1_p95']:.3f} r5 {h['r5']:.4f} p95r5 {h['r5_p95']:.3f} "
            f"k1 {h['kept1']:.4f} k3 {h['kept3']:.4f} aten {h['aten_picks']}"
            + (f" vs_stock {h['vs_stock']:.4f}" if h["vs_stock"] is not None else "")
            + f" t {h['seconds_max']:.0f}s"
        )
    if out_json:
        json.dump(table, open(out_json[0], "w"), indent=1)


if __name__ == "__main__":
    main()
