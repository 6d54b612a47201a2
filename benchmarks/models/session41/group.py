"""Session 41: the output-misaligned training problems ranked by models that never saw them.

    python benchmarks/models/session41/group.py DIR [--json OUT.json]

``jobs-group-v3.json`` (features version 3, trained on the 1,100; run from a checkout of before
version 4) ranks every collected problem of the plan group ``output-misaligned``;
``jobs-group-v4.json`` (version 4, trained on the 1,100 and two thirds of the group) ranks the
other third, per fold. Per GPU, on the same problems: regret@1, regret@5, what the handler keeps
at top-3 (``k3``) and the share of ATen picks, with the problems where the two differ most.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--json")
    a = ap.parse_args()
    runs: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    for path in sorted(Path(a.dir).glob("s41-*-grp*.json")):
        res = json.loads(path.read_text())
        variant = "v3" if res["job"].get("extras", "drop") == "drop" else "v4"
        for r in res["rows"]:
            runs[(res["job"]["hw"], variant)][r["p"]] = r
    table = []
    for hw in sorted({k[0] for k in runs}):
        v3, v4 = runs[(hw, "v3")], runs[(hw, "v4")]
        common = sorted(set(v3) & set(v4))
        out = {"hw": hw, "problems": len(common)}
        for name, rows in (("v3", v3), ("v4", v4)):
            sel = [rows[p] for p in common]
            out[name] = {k: math.exp(sum(math.log(r[k]) for r in sel) / len(sel)) for k in ("r1", "r5", "k3")} | {
                "aten_picks": sum(bool(r["aten_pick"]) for r in sel)
            }
        table.append(out)
        f3, f4 = out["v3"], out["v4"]
        print(
            f"{hw}: {len(common)} problems; regret@1 {f3['r1']:.4f} -> {f4['r1']:.4f} "
            f"({100 * math.log(f4['r1'] / f3['r1']):+.2f} pts), regret@5 {f3['r5']:.4f} -> {f4['r5']:.4f}, "
            f"k3 {f3['k3']:.4f} -> {f4['k3']:.4f}, ATen picked {f3['aten_picks']} -> {f4['aten_picks']}"
        )
        moved = sorted(common, key=lambda p: -abs(math.log(v4[p]["r1"] / v3[p]["r1"])))[:6]
        for p in moved:
            d = json.loads(p)
            print(
                f"   {d['op']} {d['dtype']} {d['batch']}x{d['m']}x{d['n']}x{d['k']}: {v3[p]['r1']:.3f} "
                f"({'ATen' if v3[p]['aten_pick'] else 'Triton'}) -> {v4[p]['r1']:.3f} ({'ATen' if v4[p]['aten_pick'] else 'Triton'})"
            )
    if a.json:
        Path(a.json).write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main()
