"""Session 50: where a file's top-1 loses to stock's pick on the validation set, and its choice
between ATen's addmm variants.

    python benchmarks/models/session50/call_diagnostics.py val MODEL KEY
    python benchmarks/models/session50/call_diagnostics.py oracle-head MODEL KEY
    python benchmarks/models/session50/call_diagnostics.py variants MODEL DATASET [DATASET ...]

``val``: on KEY's validation problems (as ``diode validate-max-autotune`` ranks them), the top-1
log ratio to stock's pick split into the ATen variant picked (against the fastest ATen variant),
wrong calls between ATen and the model's first Triton config, and what a perfect call would leave;
and the ATen head's gap (``aten_head.ratio``) and the network's (the file without head and
forest) against the measured ``log(best ATen / best Triton)``: correlation, mean absolute error,
and how often each one's sign, or the file's call, agrees with "ATen beats the model's first
Triton config".

``oracle-head``: the file's figures on the validation problems with its ATen head replaced by
one that returns each problem's measured ``log(best ATen / best Triton)`` (blend as in the file,
and 1), and with that and no ranking forest: how far a perfect head would move the call.

``variants``: on fp32 and on misaligned 16-bit addmm problems (where
``ranking.aten_variant_call_trusted`` is false), the mean log loss against the faster of
``aten::addmm`` and ``aten::bias_addmm`` of the model's pick between the two and of each fixed
choice.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks/models/session50"))
from retime import evals  # noqa: E402


def cmd_val(a: argparse.Namespace) -> None:
    from torch_diode.features import featurize_split_indexed
    from torch_diode.model import load_model

    model = load_model(a.model)
    ev, _ = evals(a.key, model)
    head, forest = model.aten_head, model.forest
    model.aten_head, model.forest = None, None  # the network (and memory) alone
    ev_net = {e.problem: e for e in evals(a.key, model)[0]}
    model.aten_head, model.forest = head, forest
    rows = []
    for e in ev:
        if e.stock_us is None:
            continue
        order = e.ranked()
        aten = np.array([c.is_aten for c in e.choices])
        first_triton = next(j for j in order if not aten[j])
        p = ev_net[e.problem].predicted_log_us
        x_shared, _, _ = featurize_split_indexed(e.problem, e.choices, model.gpu)
        rows.append(
            {
                "top": math.log(e.measured_us[order[0]] / e.stock_us),
                "top_aten": bool(aten[order[0]]),
                "aten": math.log(e.aten_us / e.stock_us),  # the fastest ATen variant
                "triton": math.log(e.measured_us[first_triton] / e.stock_us),
                "gap": math.log(e.aten_us / e.measured_us[~aten].min()),
                "net_gap": float(p[aten].min() - p[~aten].min()),
                "head_gap": float(model.aten_head.ratio(np.asarray(x_shared, dtype=np.float32)[None, :])[0]),
            }
        )
    n = len(rows)

    def pts(x) -> float:
        return 100 * float(np.sum(x)) / n

    variant = [r["top"] - r["aten"] for r in rows if r["top_aten"]]
    wrong_aten = [r["aten"] - r["triton"] for r in rows if r["top_aten"] and r["triton"] < r["aten"]]
    wrong_triton = [r["triton"] - r["aten"] for r in rows if not r["top_aten"] and r["aten"] < r["triton"]]
    print(f"{a.key}: {n} problems; top-1 / stock {pts([r['top'] for r in rows]):.2f} points, of which")
    print(f"  ATen variant (against the fastest ATen): {pts(variant):.2f}")
    print(f"  ATen picked, its first Triton config faster: {len(wrong_aten)} problems, {pts(wrong_aten):.2f}")
    print(f"  Triton picked, ATen faster: {len(wrong_triton)} problems, {pts(wrong_triton):.2f}")
    print(f"  a perfect ATen-or-first-Triton call: {pts([min(r['aten'], r['triton']) for r in rows]):.2f}")
    gap = np.array([r["gap"] for r in rows])
    beats = np.array([r["aten"] < r["triton"] for r in rows])
    for name in ("head_gap", "net_gap"):
        g = np.array([r[name] for r in rows])
        print(
            f"{name}: correlation with the measured gap {np.corrcoef(g, gap)[0, 1]:.3f}, MAE {np.abs(g - gap).mean():.3f}, "
            f"sign agrees with 'ATen beats the first Triton config' on {np.mean((g < 0) == beats):.3f}"
        )
    print(f"the file's call agrees on {np.mean(np.array([r['top_aten'] for r in rows]) == beats):.3f}")


class _OracleHead:
    """An ATen head whose ``ratio`` is the measured one of the problem with those feature columns."""

    def __init__(self, options, truth: dict[bytes, float]) -> None:
        self.options, self.truth = options, truth

    def ratio(self, x: np.ndarray) -> np.ndarray:
        return np.array([self.truth[np.asarray(r, dtype=np.float32).tobytes()] for r in x])

    def adjust(self, log_t: np.ndarray, aten: np.ndarray, x_problem: np.ndarray) -> np.ndarray:
        from torch_diode.aten_head import AtenHead

        return AtenHead.adjust(self, log_t, aten, x_problem)  # type: ignore[arg-type]


def cmd_oracle_head(a: argparse.Namespace) -> None:
    import dataclasses

    from torch_diode.features import featurize_split_indexed
    from torch_diode.model import load_model

    model = load_model(a.model)
    ev, _ = evals(a.key, model)
    truth = {}
    for e in ev:
        x_shared, _, _ = featurize_split_indexed(e.problem, e.choices, model.gpu)
        aten = np.array([c.is_aten for c in e.choices])
        truth[np.asarray(x_shared, dtype=np.float32).tobytes()] = math.log(
            e.measured_us[aten].min() / e.measured_us[~aten].min()
        )

    def top1(name: str) -> None:
        ev_, _ = evals(a.key, model)
        x = np.array([math.log(e.measured_us[e.ranked()[0]] / e.stock_us) for e in ev_ if e.stock_us is not None])
        print(f"{name}: top-1 / stock {math.exp(x.mean()):.4f}", flush=True)

    top1("as shipped")
    options = model.aten_head.options
    for blend in (options.blend, 1.0):
        model.aten_head = _OracleHead(dataclasses.replace(options, blend=blend), truth)
        top1(f"measured gap as the head's, blend {blend}")
    model.forest = None
    top1("measured gap as the head's, blend 1.0, no ranking forest")


def cmd_variants(a: argparse.Namespace) -> None:
    from torch_diode.dataset import read_dataset
    from torch_diode.model import load_model
    from torch_diode.ranking import aten_variant_call_trusted

    model = load_model(a.model)
    for path in a.datasets:
        ds = read_dataset(path)
        loss: dict[str, list[tuple[float, float, float]]] = {}
        for pt in ds.by_problem():
            p = pt.problem
            if p.op != "addmm" or aten_variant_call_trusted(p):
                continue
            med = {ds.choices[c].template: (ds.choices[c], t) for c, t in pt.median_by_choice().items()}
            if "aten::addmm" not in med or "aten::bias_addmm" not in med:
                continue
            (ca, ta), (cb, tb) = med["aten::addmm"], med["aten::bias_addmm"]
            pred = model.predict(p, [ca, cb]).log_time_us
            best = min(ta, tb)
            picked = ta if pred[0] <= pred[1] else tb
            kind = "fp32" if p.dtype == "float32" else "misaligned 16-bit"
            loss.setdefault(kind, []).append(tuple(math.log(t / best) for t in (picked, ta, tb)))
        for kind, v in sorted(loss.items()):
            m = np.mean(np.array(v), axis=0)
            print(
                f"{Path(path).name} {kind} addmm, {len(v)} problems: mean log loss, model's pick {m[0]:.4f}, "
                f"always aten::addmm {m[1]:.4f}, always aten::bias_addmm {m[2]:.4f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("val")
    v.add_argument("model")
    v.add_argument("key")
    v.set_defaults(fn=cmd_val)
    o = sub.add_parser("oracle-head")
    o.add_argument("model")
    o.add_argument("key")
    o.set_defaults(fn=cmd_oracle_head)
    w = sub.add_parser("variants")
    w.add_argument("model")
    w.add_argument("datasets", nargs="+")
    w.set_defaults(fn=cmd_variants)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
