"""The one conversion path from Inductor objects (KernelInputs, KTCs, IR nodes) to our records.

The choices handler, the Inductor collector and the feedback saver all call these functions, so a
problem or a choice seen while compiling is byte-for-byte the record seen while collecting.
Must be called inside an Inductor graph context (``V.graph`` set), as Inductor's own hinted-size
helpers are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from torch_diode._text import plural
from torch_diode.records import BATCHED_OPS, BIAS_OPS, OPS, Choice, Problem, canonical_dtype

#: Inductor op names that are a GEMM of ours under another name. ``"mm-ah"`` is the second hook
#: call ``tuned_mm`` makes for AutoHeuristic's extra configs: the same mm problem.
OP_ALIASES: Mapping[str, str] = {"mm-ah": "mm"}

#: Keys of ``ktc.extra_kwargs`` / params that are plumbing or problem data, not a kernel config:
#: they never enter a ``Choice`` (``alpha``/``beta`` belong to the problem; the rest wire the
#: template to its inputs and epilogue).
PLUMBING_KWARGS: frozenset[str] = frozenset(
    {
        "alpha",
        "beta",
        "epilogue_fn",
        "epilogue_fn_hash",
        "prefix_args",
        "suffix_args",
        "workspace_arg",
        "layout",
        "input_nodes",
        "out_dtype",
    }
)


def canonical_op(op_name: str) -> str:
    """Map an Inductor op name to one of :data:`torch_diode.records.OPS`.

    Raises:
        ValueError: the op is not a GEMM torch-diode models (e.g. ``int_mm``, ``scaled_mm``,
            ``mm_plus_mm``, ``packed_linear``).
    """
    op = OP_ALIASES.get(op_name, op_name)
    if op not in OPS:
        raise ValueError(
            f"op {op_name!r} is not supported by torch-diode; supported: {', '.join(OPS)} "
            f"(and aliases {', '.join(sorted(OP_ALIASES))})"
        )
    return op


def _broadcast_stride(shape: Sequence[int], stride: Sequence[int], out_shape: Sequence[int]) -> tuple[int, ...]:
    """Stride of a tensor after broadcasting it to ``out_shape`` (0 for broadcast dimensions).

    Dimensions of size 1 in the output get stride 0 whatever the input had, so the un-expanded
    bias (2.12+ ATen call of ``tuned_addmm``) and the expanded one (Triton call) give one answer.
    """
    if len(shape) > len(out_shape):
        raise ValueError(f"bias of shape {tuple(shape)} does not broadcast to the output shape {tuple(out_shape)}")
    pad = len(out_shape) - len(shape)
    out: list[int] = []
    for i, size in enumerate(out_shape):
        j = i - pad
        if j < 0 or size == 1 or shape[j] == 1:
            out.append(0)
        elif shape[j] == size:
            out.append(int(stride[j]))
        else:
            raise ValueError(f"bias of shape {tuple(shape)} does not broadcast to the output shape {tuple(out_shape)}")
    return tuple(out)


def problem_from_kernel_inputs(kernel_inputs: Any, op_name: str) -> Problem:
    """The :class:`~torch_diode.records.Problem` of one GEMM lowering.

    Args:
        kernel_inputs: Inductor's ``MMKernelInputs`` as passed to the choices hook (``(mat1, mat2)``
            for mm/bmm, ``(bias, mat1, mat2)`` for addmm/baddbmm, expanded or not).
        op_name: Inductor's op name (``"mm"``, ``"addmm"``, ``"bmm"``, ``"baddbmm"``, ``"mm-ah"``).

    Returns:
        The problem with hinted M, N, K, batch, dtype, output dtype, operand strides and the bias
        stride after broadcasting to the output shape.

    Raises:
        ValueError: unsupported op, mixed operand dtypes, an unknown dtype or a degenerate shape.
    """
    op = canonical_op(op_name)
    shapes = kernel_inputs.shapes_hinted()
    strides = kernel_inputs.strides_hinted()
    i1 = getattr(kernel_inputs, "_mat1_idx", -2)
    i2 = getattr(kernel_inputs, "_mat2_idx", -1)
    m, n, k = (int(x) for x in kernel_inputs.mnk_hinted())
    shape_a, shape_b = shapes[i1], shapes[i2]
    batched = op in BATCHED_OPS
    ndim = 3 if batched else 2
    if len(shape_a) != ndim or len(shape_b) != ndim:
        raise ValueError(f"{op_name}: expected {ndim}-d operands, got shapes {tuple(shape_a)} and {tuple(shape_b)}")
    batch = int(shape_a[0]) if batched else 1
    dtypes = kernel_inputs.dtypes()
    dt_a, dt_b = dtypes[i1], dtypes[i2]
    if dt_a != dt_b:
        raise ValueError(f"{op_name}: operands have different dtypes ({dt_a} and {dt_b}); torch-diode models one dtype")
    stride_bias = None
    if op in BIAS_OPS:
        if kernel_inputs.count < 3:
            raise ValueError(
                f"{op_name}: expected (bias, mat1, mat2) inputs, got {plural(kernel_inputs.count, 'input')}"
            )
        out_shape = (*((batch,) if batched else ()), m, n)
        stride_bias = _broadcast_stride(shapes[0], strides[0], out_shape)
    return Problem(
        op=op,
        m=m,
        n=n,
        k=k,
        batch=batch,
        dtype=canonical_dtype(dt_a),
        out_dtype=canonical_dtype(kernel_inputs.out_dtype()),
        stride_a=tuple(int(s) for s in strides[i1]),
        stride_b=tuple(int(s) for s in strides[i2]),
        stride_bias=stride_bias,
    )


def problem_from_input_nodes(name: str, input_nodes: Sequence[Any], *, out_dtype: Any = None) -> Problem:
    """The problem of an autotuned GEMM as a feedback saver sees it.

    Args:
        name: the feedback saver's ``name`` (``"mm"``, ``"addmm"``, ``"bmm"``, ``"baddbmm"``).
        input_nodes: the saver's ``input_nodes`` (``(mat1, mat2)`` or ``(bias, mat1, mat2)``).
        out_dtype: the output dtype when it differs from the operands' (``bmm`` with
            ``out_dtype``); the saver does not pass it, so the default is the operands' dtype.

    Raises:
        ValueError: as :func:`problem_from_kernel_inputs`.
    """
    from torch._inductor.kernel_inputs import MMKernelInputs

    canonical_op(name)
    return problem_from_kernel_inputs(MMKernelInputs(list(input_nodes), out_dtype=out_dtype), name)


def choice_kwargs(ktc: Any) -> dict[str, Any]:
    """All scalar config kwargs of a KTC: its params plus the config-like ``extra_kwargs``.

    Nothing is added or forced: ``EVEN_K``, ``ALLOW_TF32`` and ``USE_FAST_ACCUM`` appear exactly
    as Inductor's heuristic produced them (or not at all).
    """
    out: dict[str, Any] = {}
    for source in (ktc.params.to_kwargs(), ktc.extra_kwargs or {}):
        for key, value in source.items():
            if key in PLUMBING_KWARGS:
                continue
            if value is None or isinstance(value, (bool, int, float, str)):
                out[key] = value
    return out


#: Choices by ``(template uid, params' kept items, extra_kwargs' kept items)`` (kept: what
#: :func:`choice_kwargs` keeps, so the key determines the Choice): building and validating a Choice
#: costs ~10-30 us, and the handler converts ~1,400 candidates per GEMM, most of them seen before
#: in the same process.
_CHOICE_CACHE: dict[tuple[Any, ...], Choice] = {}
_CHOICE_CACHE_SIZE = 1 << 16
_SCALAR_TYPES = (bool, int, float, str)


def _scalar_items(kwargs: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The ``(name, value)`` pairs of ``kwargs`` that :func:`choice_kwargs` keeps, in order."""
    out = []
    for item in kwargs.items():
        v = item[1]
        if item[0] not in PLUMBING_KWARGS and (v is None or isinstance(v, _SCALAR_TYPES)):
            out.append(item)
    return tuple(out)


def _choice(uid: str, params: Mapping[str, Any], extra_items: tuple[tuple[str, Any], ...]) -> Choice:
    """The Choice of a template uid, its params' kwargs and its extra_kwargs' scalar items.

    Keys hold only the kept (scalar) items, so the cache never keeps plumbing objects alive. When
    every param is kept, as for Inductor's Triton configs, the raw items are that key: one lookup.
    """
    try:
        hit = _CHOICE_CACHE.get((uid, tuple(params.items()), extra_items))
    except TypeError:  # an unhashable value (plumbing): look up the kept items below
        hit = None
    if hit is not None:
        return hit
    kept = _scalar_items(params)
    key: tuple[Any, ...] | None = (uid, kept, extra_items)
    try:
        hit = _CHOICE_CACHE.get(key)  # type: ignore[arg-type]
    except TypeError:  # an unhashable scalar cannot be cached (Choice.from_kwargs will say what is wrong)
        key, hit = None, None
    if hit is not None:
        return hit
    kwargs = dict(kept)
    kwargs.update(extra_items)  # as choice_kwargs: extra_kwargs win, the params' order is kept
    choice = Choice.from_kwargs(uid, kwargs, strict=False)
    if key is not None:
        if len(_CHOICE_CACHE) >= _CHOICE_CACHE_SIZE:
            _CHOICE_CACHE.clear()
        _CHOICE_CACHE[key] = choice
    return choice


def choice_from_ktc(ktc: Any) -> Choice:
    """The :class:`~torch_diode.records.Choice` of a ``KernelTemplateChoice``.

    The template uid (``"triton::mm"``, ``"aten::addmm"``, ``"decompose_k"`` ...) plus every
    scalar kwarg of ``ktc.params.to_kwargs()`` and the config-like scalar ``ktc.extra_kwargs``
    (``ALLOW_TF32``); plumbing (:data:`PLUMBING_KWARGS`) and non-scalar values are skipped.
    Equal to ``Choice.from_kwargs(ktc.template.uid, choice_kwargs(ktc), strict=False)``.

    Raises:
        ValueError: the kwargs do not make a valid choice (e.g. a Triton config without BLOCK_K).
    """
    return _choice(ktc.template.uid, ktc.params.to_kwargs(), _scalar_items(ktc.extra_kwargs or {}))


def choices_from_ktcs(ktcs: Iterable[Any]) -> list[Choice]:
    """``[choice_from_ktc(ktc) for ktc in ktcs]``, faster for the KTCs of one ``get_ktc`` call,
    which share their ``extra_kwargs`` dict: it is read once per dict, not once per KTC.

    Raises:
        ValueError: as :func:`choice_from_ktc`.
    """
    ktcs = list(ktcs)  # keeps every extra_kwargs dict alive, so their ids below stay unique
    extras: dict[int, tuple[tuple[str, Any], ...]] = {}
    out: list[Choice] = []
    for ktc in ktcs:
        extra = ktc.extra_kwargs
        extra_items = extras.get(id(extra))
        if extra_items is None:
            extra_items = extras[id(extra)] = _scalar_items(extra or {})
        out.append(_choice(ktc.template.uid, ktc.params.to_kwargs(), extra_items))
    return out
