"""The ATen head: a problem-level model of how ATen's time compares with the best Triton config's.

The network ranks ATen and every Triton config on one scale, one row per choice, and the top-1
pick is ATen whenever its predicted time is the lowest. That call, ATen or Triton, is where most
of the top-1 regret is (``benchmarks/models/cv-session11.md``). It depends on the problem only, so
it can be learnt from one row per training problem at a cost that does not grow with the number
of candidates: the head is a small ensemble of MLPs on the problem's feature columns that predicts
``log(best ATen time / best Triton time)`` as measured. At prediction time the model's ATen
choices are shifted by one constant so that the gap between its best ATen and its best Triton
prediction becomes a blend of the network's gap and the head's (``blend``: the head's weight);
the order within the Triton configs, and within the ATen variants, is unchanged.

On by default since session 13 (``TrainOptions.aten_head_blend`` 0.5, 0.75 since session 35; ``diode train
--aten-head-blend 0`` leaves it out). Paired runs of ``scripts/cv_model.py`` (two seeds per GPU,
``benchmarks/models/cv-session13.md``): validation regret@1 better on all four, cross-validation
regret@1 better on two, equal on one, 0.5 points worse on one, and the fastest of what the choices
handler keeps better on seven of eight (it keeps ~6-8% more choices).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from torch_diode.model import Architecture, EnsembleMLP, torch_threads


@dataclass(frozen=True, kw_only=True)
class AtenHeadOptions:
    """Options of the ATen head (defaults: those of session 13's cross-validation).

    Attributes:
        members: ensemble members (the mean of their predictions is used).
        hidden: width of its two hidden layers.
        epochs: full-batch AdamW steps.
        learning_rate, weight_decay: AdamW's.
        huber_delta: the Huber loss's threshold, in natural-log units.
        blend: weight of the head's gap against the network's (0: the network alone, 1: the head).
    """

    members: int = 4
    hidden: int = 64
    epochs: int = 400
    learning_rate: float = 3e-3
    weight_decay: float = 1e-3
    huber_delta: float = 0.3
    blend: float = 0.75

    def __post_init__(self) -> None:
        for name in ("members", "hidden", "epochs"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"ATen head {name} must be a positive integer, got {getattr(self, name)!r}")
        for name in ("learning_rate", "huber_delta"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ATen head {name} must be positive, got {getattr(self, name)!r}")
        if not self.weight_decay >= 0:
            raise ValueError(f"ATen head weight_decay must be >= 0, got {self.weight_decay!r}")
        if not 0.0 <= self.blend <= 1.0:
            raise ValueError(f"ATen head blend must be in [0, 1], got {self.blend!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AtenHeadOptions:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})


class AtenHead:
    """``log(best ATen / best Triton)`` of a problem from its feature columns (see the module doc).

    ``net`` is an :class:`~torch_diode.model.EnsembleMLP` of the ``base`` type (two hidden layers of
    ``options.hidden``, ``options.members`` members); inputs are standardised with the training
    problems' ``x_mean`` / ``x_std``.
    """

    def __init__(self, options: AtenHeadOptions, x_mean: np.ndarray, x_std: np.ndarray, net: EnsembleMLP) -> None:
        s = x_mean.shape[0]
        if x_mean.shape != (s,) or x_std.shape != (s,) or not (np.isfinite(x_std).all() and (x_std > 0).all()):
            raise ValueError("input statistics must be finite, positive standard deviations of one size")
        if net.arch != _architecture(options, s):
            raise ValueError(f"network {net.arch} does not fit the options' {_architecture(options, s)}")
        self.options = options
        self.x_mean = x_mean.astype(np.float32)
        self.x_std = x_std.astype(np.float32)
        self.inv_std = (1.0 / self.x_std).astype(np.float32)
        self.net = net.eval()
        # The same network as numpy arrays for :meth:`ratio`: on the compile path the head sees one
        # row per GEMM, where each torch call's overhead (~10 us) would cost more than the arithmetic.
        with torch.no_grad():
            self._w = tuple(
                t.detach().numpy().copy()
                for t in (net.w_in, net.b_in, net.w_hidden[0], net.b_hidden[0], net.w_out, net.b_out)
            )

    @property
    def inputs(self) -> int:
        return int(self.x_mean.shape[0])

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, options: AtenHeadOptions, seed: int) -> AtenHead:
        """Fit on ``x [P, S]`` (the training problems' feature columns) and ``y [P]`` (their measured
        log ratio of best ATen to best Triton time); deterministic for a seed."""
        if x.ndim != 2 or y.shape != (x.shape[0],) or x.shape[0] < 2:
            raise ValueError(f"the ATen head needs at least 2 problems, got x {x.shape} and y {y.shape}")
        x_mean = x.mean(axis=0)
        x_std = x.std(axis=0) + 1e-6
        xt = torch.from_numpy(((x - x_mean) / x_std).astype(np.float32))
        yt = torch.from_numpy(y.astype(np.float32))
        net = EnsembleMLP(_architecture(options, x.shape[1]))
        k, h, s = options.members, options.hidden, x.shape[1]
        gen = torch.Generator().manual_seed(seed)
        layers = ((net.w_in, net.b_in), (net.w_hidden[0], net.b_hidden[0]), (net.w_out, net.b_out))
        with torch.no_grad():
            for (w, b), fan_in, fan_out in zip(layers, (s, h, h), (h, h, 1)):
                bound = 1.0 / fan_in**0.5  # nn.Linear's default initialisation
                w.copy_((torch.rand(k, fan_in, fan_out, generator=gen) * 2 - 1) * bound)
                b.copy_(((torch.rand(k, fan_out, generator=gen) * 2 - 1) * bound).unsqueeze(1))
        opt = torch.optim.AdamW(net.parameters(), lr=options.learning_rate, weight_decay=options.weight_decay)
        target = yt.expand(k, -1)
        with torch_threads(1):  # a few hundred rows: more threads only add overhead (10x on a busy CPU)
            for _ in range(options.epochs):
                opt.zero_grad()
                F.huber_loss(net(xt), target, delta=options.huber_delta).backward()
                opt.step()
        return cls(options, x_mean, x_std, net)

    def ratio(self, x: np.ndarray) -> np.ndarray:
        """Predicted log ratio (best ATen over best Triton) of each row of ``x [P, S]``: the
        members' mean of ``net`` (two ReLU layers), computed with numpy."""
        w_in, b_in, w_h, b_h, w_out, b_out = self._w  # [K, S, H], [K, 1, H], [K, H, H], [K, 1, H], [K, H, 1], [K, 1, 1]
        xn = ((x - self.x_mean) * self.inv_std).astype(np.float32)  # [P, S]
        h = np.maximum(np.matmul(xn, w_in) + b_in, 0.0)  # [K, P, H]
        h = np.maximum(np.matmul(h, w_h) + b_h, 0.0)
        return (np.matmul(h, w_out) + b_out)[..., 0].mean(axis=0)  # [P]

    def adjust(self, log_t: np.ndarray, aten: np.ndarray, x_problem: np.ndarray) -> np.ndarray:
        """``log_t`` (one problem's predicted log times) with its ATen entries (``aten``, a mask)
        shifted so that best ATen minus best Triton is ``blend`` of the head's gap and the rest
        the network's. Unchanged without both an ATen and a Triton choice."""
        if not aten.any() or aten.all() or self.options.blend == 0.0:
            return log_t
        net_gap = float(log_t[aten].min() - log_t[~aten].min())
        head_gap = float(self.ratio(x_problem[None, :])[0])
        out = log_t.copy()
        out[aten] += np.float32(self.options.blend * (head_gap - net_gap))
        return out

    # -- serialisation ----------------------------------------------------------------------------
    def to_tensors(self) -> dict[str, np.ndarray]:
        out = {f"{_PREFIX}x_mean": self.x_mean, f"{_PREFIX}x_std": self.x_std}
        out.update({_PREFIX + k: v.detach().numpy() for k, v in self.net.state_dict().items()})
        return out

    def metadata(self) -> dict[str, Any]:
        return {"options": self.options.to_dict(), "inputs": self.inputs}

    @classmethod
    def from_tensors(cls, tensors: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> AtenHead:
        """Raises KeyError, TypeError or ValueError on missing or malformed parts."""
        options = AtenHeadOptions.from_dict(meta["options"])
        net = EnsembleMLP(_architecture(options, int(meta["inputs"])))
        expected = {f"{_PREFIX}x_mean", f"{_PREFIX}x_std"} | {_PREFIX + k for k in net.state_dict()}
        if set(tensors) != expected:
            raise ValueError(f"tensors {sorted(set(tensors) ^ expected)} missing or unexpected")
        try:
            net.load_state_dict(
                {k: torch.from_numpy(np.asarray(tensors[_PREFIX + k])) for k in net.state_dict()}, strict=True
            )
        except RuntimeError as e:
            raise ValueError(f"weights do not fit {net.arch}: {e}") from None
        return cls(options, np.asarray(tensors[f"{_PREFIX}x_mean"]), np.asarray(tensors[f"{_PREFIX}x_std"]), net)


_PREFIX = "aten_head."


def _architecture(options: AtenHeadOptions, inputs: int) -> Architecture:
    """Two hidden ReLU layers of ``options.hidden``: the ``base`` network with ``depth`` 1."""
    return Architecture(model_type="base", input_dim=inputs, hidden=options.hidden, depth=1, members=options.members)
