"""What the session-42 scripts share: one problem scored once (measured times, predictions, the
model's Triton order), and the handler's keep under given options, as ``select`` computes it."""

import math

import numpy as np

from torch_diode.inductor.choices import select
from torch_diode.ranking import aten_variant_call_trusted, order_of


class Scored:
    def __init__(self, model, ds, pt, opts):
        med = pt.median_by_choice()
        ids = list(med)
        self.problem = pt.problem
        self.choices = [ds.choices[c] for c in ids]
        self.measured = np.array([med[c] for c in ids])
        pred = model.predict(pt.problem, self.choices)
        self.log = np.asarray(pred.log_time_us, dtype=np.float64)
        self.std = np.asarray(pred.std, dtype=np.float64)
        aten = np.array([c.is_aten for c in self.choices])
        self.t, self.a = np.flatnonzero(~aten), np.flatnonzero(aten)
        tri = [self.choices[i] for i in self.t]
        self.order = order_of(pt.problem, tri, self.log[self.t], diversity=opts.diversity, cliff_guard=opts.cliff_guard)

    def keep(self, opts, drop_slower_aten=None):
        """(selection, kept indices, log of the fastest kept over the best measured)."""
        t, a = self.t, self.a
        drop = aten_variant_call_trusted(self.problem) if drop_slower_aten is None else drop_slower_aten
        sel = select(
            self.log[t],
            self.std[t],
            self.log[a],
            self.std[a],
            opts,
            keep_one_triton=len(a) == 0,
            triton_order=self.order,
            drop_slower_aten=drop,
        )
        kept = [t[i] for i in sel.triton] + [a[i] for i in sel.aten]
        return sel, kept, math.log(self.measured[kept].min() / self.measured.min())
