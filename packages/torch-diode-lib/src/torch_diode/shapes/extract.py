"""Extract the GEMMs of an ``nn.Module`` by running it under a ``TorchDispatchMode``.

Every ``aten.mm``, ``aten.addmm``, ``aten.bmm`` and ``aten.baddbmm`` the forward dispatches is
recorded with its operand shapes, strides and dtype, after PyTorch's own decompositions
(``F.linear`` becomes ``addmm``/``mm`` on a transposed weight, ``torch.matmul`` of 4-d tensors
becomes ``bmm``), i.e. as Inductor's lowerings see them. Run it on the ``meta`` device to trace a
70B model without allocating a byte::

    with torch.device("meta"):
        model = MyModel(config)
    gemms = extract_gemms(model, torch.empty(1, 128, 4096, device="meta"))
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from torch_diode.records import BATCHED_OPS, BIAS_OPS, Problem, canonical_dtype, layout_of
from torch_diode.shapes.shapeset import ShapeEntry, merge_entries


@dataclass(frozen=True)
class GemmCall:
    """One GEMM seen while tracing: its problem and the module path that issued it."""

    problem: Problem
    module: str


def _bias_stride(bias: Any, out_shape: Sequence[int]) -> tuple[int, ...]:
    shape, stride = list(bias.shape), list(bias.stride())
    pad = len(out_shape) - len(shape)
    out = []
    for i, size in enumerate(out_shape):
        j = i - pad
        out.append(0 if j < 0 or size == 1 or shape[j] == 1 else int(stride[j]))
    return tuple(out)


def _problem_of(op: str, args: Sequence[Any]) -> Problem:
    if op in BIAS_OPS:
        bias, a, b = args[0], args[1], args[2]
    else:
        bias, a, b = None, args[0], args[1]
    batched = op in BATCHED_OPS
    m, k = int(a.shape[-2]), int(a.shape[-1])
    n = int(b.shape[-1])
    batch = int(a.shape[0]) if batched else 1
    out_shape = ((batch,) if batched else ()) + (m, n)
    return Problem(
        op=op,
        m=m,
        n=n,
        k=k,
        batch=batch,
        dtype=canonical_dtype(a.dtype),
        stride_a=tuple(int(s) for s in a.stride()),
        stride_b=tuple(int(s) for s in b.stride()),
        stride_bias=_bias_stride(bias, out_shape) if bias is not None else None,
    )


def _make_mode() -> Any:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    targets = {
        torch.ops.aten.mm.default: "mm",
        torch.ops.aten.addmm.default: "addmm",
        torch.ops.aten.bmm.default: "bmm",
        torch.ops.aten.baddbmm.default: "baddbmm",
    }

    class GemmRecorder(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[tuple[str, Problem]] = []
            self.module = ""

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            op = targets.get(func)
            if op is not None:
                self.calls.append((self.module, _problem_of(op, args)))
            return func(*args, **(kwargs or {}))

    return GemmRecorder()


def extract_gemms(module: Any, *args: Any, **kwargs: Any) -> list[GemmCall]:
    """Run ``module(*args, **kwargs)`` without autograd and return every GEMM it dispatched, in order.

    Each call is tagged with the qualified name of the innermost submodule running it (e.g.
    ``layers.0.mlp.down_proj``), through forward pre-hooks removed again afterwards.
    """
    import torch

    mode = _make_mode()
    handles = []
    stack: list[str] = []

    def pre(name: str) -> Callable[..., None]:
        def hook(_mod: Any, _inp: Any) -> None:
            stack.append(name)
            mode.module = name

        return hook

    def post(_mod: Any, _inp: Any, _out: Any) -> None:
        stack.pop()
        mode.module = stack[-1] if stack else ""

    for name, sub in module.named_modules():
        handles.append(sub.register_forward_pre_hook(pre(name)))
        handles.append(sub.register_forward_hook(post))
    try:
        with torch.no_grad(), mode:
            module(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return [GemmCall(p, m) for m, p in mode.calls]


def _layer_kind(module: str, op: str) -> str:
    """``layers.3.self_attn.q_proj`` -> ``self_attn.q_proj`` (the layer index dropped). A bmm issued
    by a module's own forward (not a Linear) is attention's score or value product."""
    parts = module.split(".")
    while parts and (parts[0].isdigit() or parts[0] in ("layers", "layer", "blocks", "model", "encoder", "h")):
        parts = parts[1:]
    name = ".".join(p for p in parts if not p.isdigit())
    if op in BATCHED_OPS:
        return f"{name + ' ' if name else ''}attention bmm"
    return name or module or "<root>"


def calls_to_entries(
    calls: Sequence[GemmCall],
    *,
    model: str,
    tags: Sequence[str] = (),
    dtypes: Sequence[str] | None = None,
    note: str = "",
) -> list[ShapeEntry]:
    """Shape-set entries of traced calls: one per distinct problem, ``count`` = calls per forward.

    Layouts are classified from the strides (``row``/``col``); strides that are neither (padded or
    batch-strided views) are kept exactly in ``stride_a``/``stride_b``.
    """
    counts: collections.Counter[Problem] = collections.Counter(c.problem for c in calls)
    first: dict[Problem, str] = {}
    for c in calls:
        first.setdefault(c.problem, c.module)
    entries = []
    for p, n in counts.items():
        la, lb = layout_of(p.stride_a), layout_of(p.stride_b)
        layout = f"{'row' if la == 'row' else 'col'}/{'row' if lb == 'row' else 'col'}"
        canon = ShapeEntry(op=p.op, m=p.m, n=p.n, k=p.k, batch=p.batch, dtypes=(p.dtype,), layout=layout).problems()[0]
        exact = la != "strided" and lb != "strided" and canon.stride_a == p.stride_a and canon.stride_b == p.stride_b
        bias_default = canon.stride_bias == p.stride_bias
        entries.append(
            ShapeEntry(
                op=p.op,
                m=p.m,
                n=p.n,
                k=p.k,
                batch=p.batch,
                dtypes=tuple(dtypes) if dtypes else (p.dtype,),
                layout=layout,
                stride_a=None if exact else p.stride_a,
                stride_b=None if exact else p.stride_b,
                stride_bias=None if bias_default else p.stride_bias,
                source=f"{model} {_layer_kind(first[p], p.op)}{(' ' + note) if note else ''}",
                models=(model,),
                tags=tuple(tags),
                count=n,
            )
        )
    return merge_entries(entries)
