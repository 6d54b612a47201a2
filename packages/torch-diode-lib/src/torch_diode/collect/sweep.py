"""The sweep collector: ATen plus every Triton config of Inductor's search space, measured fast.

Inductor's EXHAUSTIVE autotuning benchmarks about 2.7 configs per second because it renders,
compiles and benchmarks every config for every problem from scratch. The sweep measures the same
(problem, config) pairs much faster:

1. **The configs are Inductor's own.** For each problem it builds real ``ir.InputBuffer`` nodes
   under a ``GraphLowering``, wraps them in ``MMKernelInputs`` and asks
   ``InductorChoices().get_ktc(...)`` for the ATen and Triton templates that the lowering
   (``tuned_mm``/``tuned_addmm``/``tuned_bmm``/``tuned_baddbmm``) uses, under
   ``config.patch(max_autotune=True, max_autotune_gemm_search_space=...)``. Each KTC becomes a
   :class:`~torch_diode.records.Choice` through ``torch_diode.inductor.convert.choice_from_ktc``,
   the same conversion the Inductor collector uses, so the two join exactly on (problem, choice).
   Nothing is forced: ``EVEN_K``, ``ALLOW_TF32`` and ``USE_FAST_ACCUM`` are the heuristic's.
2. **Each config is compiled once and reused across problems.** The kernels in
   :mod:`torch_diode.collect.sweep_kernels` are Inductor's mm/bmm templates with the sizes as
   run-time arguments and every fact that changes the generated code as a ``tl.constexpr``
   (:class:`KernelSpec`): the template revision of the installed torch (checked by hash,
   :func:`template_revision`), the template's compile-time branches, the divisibility of N, K
   (with masks) and the strides up to 16 bytes, literal 0/1 strides, K itself for loops of at most
   :data:`LITERAL_K_TILES` iterations, the bias epilogue. ``scripts/sweep_ptx_compare.py`` checks
   the result against the kernels Inductor generates, instruction by instruction. Compilation
   runs in a pool of processes that fill Triton's on-disk cache ahead of the measurement
   (``prefetch``), so compiling overlaps timing.
3. **Timing follows Inductor's benchmarker** (``InductorBenchmarker.benchmark_gpu``): before each
   timed run the L2 cache is flushed by zeroing an L2-sized buffer, each run is timed with its own
   pair of CUDA events, and the result is the minimum. The runs are captured in CUDA graphs and
   replayed, so no launch overhead enters; a first pass estimates each kernel's time and a second
   pass repeats each kernel as often as a per-config time budget allows. (Inductor 2.11 times a
   Python launch, so kernels shorter than one launch read as the launch time there;
   ``timing="inductor"`` reproduces that method with Inductor's own benchmarker.)

Failures of single configs (Triton's ``OutOfResources``, compile errors, wrong results) become
:class:`~torch_diode.records.FailureRecord` s with the choice set; the sweep goes on.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import contextlib
import hashlib
import logging
import math
import multiprocessing
import os
import random
import re
import signal
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from torch_diode._text import plural
from torch_diode.collect.inductor import SEARCH_SPACES
from torch_diode.collect.runner import exit_with_parent, interrupts_ignored
from torch_diode.records import (
    BATCHED_OPS,
    BIAS_OPS,
    Choice,
    FailureRecord,
    Problem,
    TimingRecord,
    compile_cost,
)

log = logging.getLogger(__name__)

#: Largest divisibility (in elements) asserted for a run-time size or stride. Loads and stores are
#: at most 16 bytes wide, so a larger power of two cannot change the generated code.
DIV_CAP = 16
#: K loops of at most this many iterations are compiled with K as a literal, as Inductor's are:
#: a constant short trip count changes the pipelined loop (see ``scripts/sweep_ptx_compare.py``).
LITERAL_K_TILES = 4
LIT_ZERO = 0  # int_spec code: the literal 0
LIT_ONE = -1  # int_spec code: the literal 1


def int_spec(value: int, cap: int = DIV_CAP) -> int:
    """The constexpr code of a size or stride: ``LIT_ZERO``/``LIT_ONE`` for the literals 0 and 1
    (which Inductor's constants fold away), else the largest power of two (<= ``cap``) dividing
    it, which is what a literal tells Triton's alignment analysis."""
    if value < 0:
        raise ValueError(f"sizes and strides must be non-negative, got {value}")
    if value == 0:
        return LIT_ZERO
    if value == 1:
        return LIT_ONE
    d = 1
    while d < cap and value % (2 * d) == 0:
        d *= 2
    return d


def _cap(dtype: str) -> int:
    """Divisibility (elements) beyond which nothing changes: 16 bytes, the widest access."""
    from torch_diode.records import DTYPE_ITEMSIZE

    return max(1, min(DIV_CAP, 16 // DTYPE_ITEMSIZE[dtype]))


# ------------------------------------------------------------------------------------------------
# Problem geometry
# ------------------------------------------------------------------------------------------------
def _shapes(problem: Problem) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Shapes of A, B and the output (and of the broadcast bias, which is the output's)."""
    p = problem
    if p.op in BATCHED_OPS:
        return (p.batch, p.m, p.k), (p.batch, p.k, p.n), (p.batch, p.m, p.n)
    return (p.m, p.k), (p.k, p.n), (p.m, p.n)


def _out_stride(problem: Problem) -> tuple[int, ...]:
    """Inductor's output layout for these ops: contiguous."""
    p = problem
    return (p.m * p.n, p.n, 1) if p.op in BATCHED_OPS else (p.n, 1)


def _storage_numel(shape: Sequence[int], stride: Sequence[int]) -> int:
    return 1 + sum((s - 1) * st for s, st in zip(shape, stride))


def _index_dtype(problem: Problem) -> str:
    """``tl.int32`` unless some buffer needs 64-bit offsets (Inductor's ``can_use_32bit_indexing``)."""
    sa, sb, so = _shapes(problem)
    sizes = [
        _storage_numel(sa, problem.stride_a),
        _storage_numel(sb, problem.stride_b),
        _storage_numel(so, _out_stride(problem)),
    ]
    if problem.stride_bias is not None:
        sizes.append(_storage_numel(so, problem.stride_bias))
    return "tl.int32" if max(sizes) <= 2**31 - 1 else "tl.int64"


@dataclass(frozen=True)
class KernelSpec:
    """Everything about a problem that changes a sweep kernel's generated code, except the config.

    Problems with equal specs run the very same compiled kernel for a config.
    """

    kernel: str  # "mm" (mm/addmm template) or "bmm" (bmm/baddbmm template)
    dtype: str
    out_dtype: str
    has_bias: bool
    index_dtype: str
    specs: tuple[tuple[str, int], ...]  # constexpr name -> int_spec code

    def key(self) -> str:
        s = ",".join(f"{k}={v}" for k, v in self.specs)
        return f"{self.kernel}/{self.dtype}->{self.out_dtype}/bias={int(self.has_bias)}/{self.index_dtype}/{s}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["specs"] = [list(x) for x in self.specs]
        return d


def kernel_spec(problem: Problem) -> KernelSpec:
    """The :class:`KernelSpec` of a problem."""
    p = problem
    bias = p.stride_bias if p.op in BIAS_OPS else None
    cap = _cap(p.dtype)
    # M's divisibility changes only scalar index arithmetic (never a load, store or MMA), so it is
    # not specialised on; M == 1 stays a literal (rows fold to one). See scripts/sweep_ptx_compare.py.
    specs = [
        (name, (LIT_ONE if p.m == 1 else 1) if name == "M_SPEC" else int_spec(value, cap))
        for name, value in literal_values(p).items()
    ]
    return KernelSpec(
        kernel="bmm" if p.op in BATCHED_OPS else "mm",
        dtype=p.dtype,
        out_dtype=p.out_dtype,
        has_bias=bias is not None,
        index_dtype=_index_dtype(p),
        specs=tuple(specs),
    )


def literal_values(problem: Problem) -> dict[str, int]:
    """Every size and stride constexpr of the sweep kernel (the names of :class:`KernelSpec`'s
    ``specs``) with the problem's actual value: what Inductor's rendered template has as literals.
    Passed as ``-value`` codes they make the sweep kernel specialise on the values themselves."""
    p = problem
    batched = p.op in BATCHED_OPS
    out = _out_stride(p)
    bias = p.stride_bias if p.op in BIAS_OPS else None
    vals: dict[str, int] = {"M_SPEC": p.m, "N_SPEC": p.n, "K_SPEC": p.k}
    names: list[tuple[str, ...]]
    if batched:
        vals["BATCH_SPEC"] = p.batch
        names = [("SAQ", "SAM", "SAK"), ("SBQ", "SBK", "SBN"), ("SCQ", "SCM", "SCN"), ("SIQ", "SIM", "SIN")]
    else:
        names = [("SAM", "SAK"), ("SBK", "SBN"), ("SCM", "SCN"), ("SIM", "SIN")]
    strides = [p.stride_a, p.stride_b, out, bias if bias is not None else (0,) * len(out)]
    for nm, st in zip(names, strides):
        vals.update(zip(nm, (int(x) for x in st)))
    return vals


#: sha256 of Inductor's template sources that the sweep kernels reproduce, per revision.
TEMPLATE_HASHES: dict[int, dict[str, str]] = {
    211: {  # torch 2.11
        "triton_mm": "d4b90a54b960e7b3fb3abb24be0d43fc9b3c4d64c53ecd44187508e096498238",
        "triton_bmm": "1635ad519a2790c283e0cd308d03f44e1673a8289810f371093fbdcba6ec4f6a",
    },
    213: {  # torch 2.13
        "triton_mm": "d99842e466803e2d1dcd19b8faa992acd26dc9cb671b8eba7468c187f3b9007f",
        "triton_bmm": "4acd70184f4e6d7dd871c00a5b945a6a4d3acd641ad6f7f1a3eb6902ab4cf85c",
    },
}


def template_revision() -> int:
    """Which revision of Inductor's mm/bmm templates the installed torch ships (211, 213).

    Raises:
        RuntimeError: the installed templates match no revision the sweep kernels reproduce; the
            sweep would time other kernels than Inductor, so it refuses to run.
    """
    import torch._inductor.kernel as kernel_pkg

    base = os.path.join(os.path.dirname(kernel_pkg.__file__), "templates")
    found: dict[str, str] = {}
    for name in ("triton_mm", "triton_bmm"):
        path = os.path.join(base, f"{name}.py.jinja")
        try:
            with open(path, "rb") as f:
                found[name] = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            found[name] = "missing"
    for rev, hashes in TEMPLATE_HASHES.items():
        if hashes == found:
            return rev
    import torch

    raise RuntimeError(
        f"the sweep kernels reproduce Inductor's mm/bmm templates of torch 2.11 and 2.13, but torch "
        f"{torch.__version__} ships other sources ({found}); port the template changes to "
        f"torch_diode/collect/sweep_kernels.py and add their hashes to TEMPLATE_HASHES, or use the inductor collector"
    )


def _contiguity_hints(problem: Problem, block_m: int, block_n: int, revision: int) -> tuple[bool, bool]:
    """The template's compile-time ``offs_a_m``/``offs_b_n`` branch (triton_mm/bmm.py.jinja).

    The mm template (2.11 and 2.13) and the 2.13 bmm template also require ``M >= BLOCK_M`` /
    ``N >= BLOCK_N`` and ``K > 1``; the 2.11 bmm template tests the strides alone."""
    p = problem
    sam, sak = p.stride_a[-2], p.stride_a[-1]
    sbk, sbn = p.stride_b[-2], p.stride_b[-1]
    m, n, k = p.m, p.n, p.k
    a = (sam == 1 and sak == m) or (sam == k and sak == 1)
    b = (sbk == 1 and sbn == k) or (sbk == n and sbn == 1)
    if p.op not in BATCHED_OPS or revision >= 213:
        a = a and m >= block_m and k > 1
        b = b and n >= block_n and k > 1
    return bool(a), bool(b)


# Template kwargs that become constexprs of the sweep kernels; anything else Inductor adds to a
# triton::mm / triton::bmm config (e.g. Blackwell's WARP_SPECIALIZE) is not supported here.
_TEMPLATE_KWARGS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "EVEN_K", "ALLOW_TF32", "ACC_TYPE", "USE_FAST_ACCUM")
_IGNORED_KWARGS = frozenset({"num_stages", "num_warps", "hint_override"})
_SUPPORTED_TRITON = frozenset({"triton::mm", "triton::bmm"})


def launch_constexprs(problem: Problem, choice: Choice, revision: int, *, literal: bool = False) -> dict[str, Any]:
    """All constexpr arguments of the sweep kernel for (problem, choice), as plain values
    (``ACC_TYPE``/``INDEX_DTYPE`` as their ``tl.*`` names).

    ``literal``: every size and stride is a literal of its value, as in the template Inductor
    renders for the problem (:func:`literal_values`): the compiled kernel is Inductor's, register
    allocation included, but it serves that problem only. Otherwise sizes are run-time values with
    the constexpr facts of :func:`kernel_spec`, shared by every problem of the spec; literal sizes
    change register allocation (and spilling) for some configs, so those kernels can time
    differently from Inductor's (``benchmarks/fidelity/NVIDIA-H100/README.md``).

    Raises:
        ValueError: the choice carries a kwarg the sweep kernels do not implement.
    """
    kw = choice.to_kwargs()
    unknown = sorted(
        k for k, v in kw.items() if k not in _TEMPLATE_KWARGS and k not in _IGNORED_KWARGS and v is not None
    )
    if unknown:
        raise ValueError(
            f"{choice.template}: the sweep kernels do not implement {plural(len(unknown), 'kwarg')} {unknown} of {choice.key()}"
        )
    spec = kernel_spec(problem)
    if revision not in TEMPLATE_HASHES:
        raise ValueError(f"revision: unknown template revision {revision!r}; known: {sorted(TEMPLATE_HASHES)}")
    a_hint, b_hint = _contiguity_hints(problem, int(kw["BLOCK_M"]), int(kw["BLOCK_N"]), revision)  # type: ignore[arg-type]
    out: dict[str, Any] = dict(spec.specs)
    out.update(
        A_HINT=a_hint,
        B_HINT=b_hint,
        HAS_BIAS=spec.has_bias,
        BLOCK_M=int(kw["BLOCK_M"]),  # type: ignore[arg-type]
        BLOCK_N=int(kw["BLOCK_N"]),  # type: ignore[arg-type]
        BLOCK_K=int(kw["BLOCK_K"]),  # type: ignore[arg-type]
        GROUP_M=int(kw.get("GROUP_M") or 8),  # type: ignore[arg-type]
        EVEN_K=bool(kw.get("EVEN_K", False)),
        ALLOW_TF32=bool(kw.get("ALLOW_TF32", False)),
        ACC_TYPE=str(kw.get("ACC_TYPE") or "tl.float32"),
        USE_FAST_ACCUM=bool(kw.get("USE_FAST_ACCUM", False)),
        INDEX_DTYPE=spec.index_dtype,
        TEMPLATE=revision,
        K_LIT=0,
    )
    if literal:
        out.update({name: -value for name, value in literal_values(problem).items()})
        out["K_LIT"] = problem.k
    elif math.ceil(problem.k / out["BLOCK_K"]) <= LITERAL_K_TILES:
        out["K_LIT"] = problem.k
        out["K_SPEC"] = 1  # unused: one key per literal K
    elif out["EVEN_K"]:
        out["K_SPEC"] = 1  # K only bounds the loop: no masks, so its divisibility changes nothing
    return out


def compile_key(problem: Problem, choice: Choice, revision: int, *, literal: bool = False) -> tuple[Any, ...]:
    """Problems and choices with equal keys share one compiled kernel."""
    spec = kernel_spec(problem)
    cx = launch_constexprs(problem, choice, revision, literal=literal)
    return (
        spec.kernel,
        spec.dtype,
        spec.out_dtype,
        _int_width(problem),
        tuple(sorted(cx.items())),
        choice.num_warps,
        choice.num_stages,
    )


def _int_width(problem: Problem) -> str:
    """Triton types a run-time int argument i32 or i64 by its value; the signature must match."""
    sa, sb, so = _shapes(problem)
    vals = [*sa, *sb, *so, *problem.stride_a, *problem.stride_b, *_out_stride(problem)]
    if problem.stride_bias is not None:
        vals.extend(problem.stride_bias)
    return "i32" if max(vals) <= 2**31 - 1 else "i64"


# ------------------------------------------------------------------------------------------------
# Enumerating Inductor's configs for a problem
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepItem:
    """One choice to measure on a problem."""

    choice: Choice
    kind: str  # "aten" or "triton"


def _device() -> Any:
    import torch

    return torch.device("cuda")


def inductor_choices(problem: Problem, search_space: str = "EXHAUSTIVE") -> list[SweepItem]:
    """ATen and Triton choices Inductor's heuristic gives for ``problem`` under max-autotune.

    Builds real ``ir.InputBuffer`` nodes on a ``cuda`` device (a fake one works without a GPU; see
    ``tests/test_sweep.py`` and ``compat.gpu_warp_without_a_gpu``), asks
    ``InductorChoices().get_ktc`` for the templates of the op's lowering and converts every KTC
    with ``torch_diode.inductor.convert.choice_from_ktc``. TMA, Blackwell and subgraph
    (decompose_k, contiguous_mm) templates are not swept.
    """
    if search_space not in SEARCH_SPACES:
        raise ValueError(f"search_space: must be one of {', '.join(SEARCH_SPACES)}, got {search_space!r}")
    from torch_diode.inductor import compat

    missing = compat.triton_missing()
    if missing is not None:
        raise ModuleNotFoundError(f"inductor_choices {missing}", name="triton")
    import torch
    from torch._inductor import config as inductor_config
    from torch._inductor import ir
    from torch._inductor.choices import InductorChoices
    from torch._inductor.graph import GraphLowering
    from torch._inductor.kernel.bmm import aten_baddbmm, aten_bmm, bmm_template
    from torch._inductor.kernel.mm import aten_addmm, aten_bias_addmm, aten_mm, mm_template
    from torch._inductor.kernel_inputs import MMKernelInputs
    from torch._inductor.virtualized import V

    from torch_diode.inductor.convert import choice_from_ktc, problem_from_kernel_inputs

    p = problem
    dev = _device()
    dtype = getattr(torch, p.dtype)
    sa, sb, so = _shapes(p)
    gm = torch.fx.symbolic_trace(lambda x: x)
    graph = GraphLowering(gm)
    items: list[SweepItem] = []
    with (
        V.set_graph_handler(graph),
        inductor_config.patch(
            max_autotune=True, max_autotune_gemm_search_space=search_space, force_disable_caches=True
        ),
        compat.gpu_warp_without_a_gpu(),  # without a GPU, torch 2.14 would skip a prune the GPU makes
    ):
        a = ir.InputBuffer(name="sweep_a", layout=ir.FixedLayout(dev, dtype, list(sa), list(p.stride_a)))
        b = ir.InputBuffer(name="sweep_b", layout=ir.FixedLayout(dev, dtype, list(sb), list(p.stride_b)))
        nodes: list[Any] = [a, b]
        scalars: dict[str, Any] | None = None
        if p.op in BIAS_OPS:
            assert p.stride_bias is not None
            bias = ir.InputBuffer(name="sweep_bias", layout=ir.FixedLayout(dev, dtype, list(so), list(p.stride_bias)))
            nodes = [bias, a, b]
            scalars = {"alpha": 1, "beta": 1}
        ki = MMKernelInputs(nodes, scalars=scalars) if scalars else MMKernelInputs(nodes)
        seen = problem_from_kernel_inputs(ki, p.op)
        if seen != p:
            raise ValueError(f"internal: Inductor sees {seen.key()} for {p.key()} ({seen} != {p})")
        if p.op == "mm":
            aten, tmpl = [aten_mm], mm_template
        elif p.op == "addmm":
            aten = [aten_addmm]
            if p.stride_bias is not None and p.stride_bias[0] == 0 and inductor_config.triton.autotune_cublasLt:
                aten.append(aten_bias_addmm)
            tmpl = mm_template
        elif p.op == "bmm":
            aten, tmpl = [aten_bmm], bmm_template
        else:
            aten, tmpl = [aten_baddbmm], bmm_template
        choices = InductorChoices()
        for t in aten:
            for ktc in choices.get_ktc(ki, t, p.op):
                items.append(SweepItem(choice_from_ktc(ktc), "aten"))
        for ktc in choices.get_ktc(ki, tmpl, p.op):
            items.append(SweepItem(choice_from_ktc(ktc), "triton"))
    # Inductor's heuristic dedups its configs; keep the first of any duplicate choice all the same.
    out: dict[Choice, SweepItem] = {}
    for it in items:
        out.setdefault(it.choice, it)
    return list(out.values())


def sample_choices(items: Sequence[SweepItem], problem: Problem, max_configs: int | None, seed: int) -> list[SweepItem]:
    """ATen plus at most ``max_configs`` Triton configs, a seeded sample that depends only on
    (seed, problem, the config list), never on the process or the order problems come in."""
    aten = [it for it in items if it.kind == "aten"]
    triton = sorted((it for it in items if it.kind == "triton"), key=lambda it: it.choice.key())
    if max_configs is None or len(triton) <= max_configs:
        return aten + triton
    digest = hashlib.sha256(f"{seed}|{problem.key()}|{sorted(problem.to_dict().items())}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "little"))
    picked = sorted(rng.sample(range(len(triton)), max_configs))
    return aten + [triton[i] for i in picked]


def sample_shared(items: Sequence[SweepItem], max_configs: int | None, seed: int) -> list[SweepItem]:
    """ATen plus the ``max_configs`` Triton configs of lowest seeded hash of the config alone:
    problems whose config lists overlap get the same configs (and share compiled kernels)."""
    aten = [it for it in items if it.kind == "aten"]
    triton = [it for it in items if it.kind == "triton"]
    if max_configs is None or len(triton) <= max_configs:
        return aten + sorted(triton, key=lambda it: it.choice.key())

    def rank(it: SweepItem) -> bytes:
        return hashlib.sha256(f"{seed}|{sorted(it.choice.to_dict().items())}".encode()).digest()

    picked = sorted(triton, key=rank)[:max_configs]
    return aten + sorted(picked, key=lambda it: it.choice.key())


CHOICE_LISTS_FORMAT = "torch-diode-choice-lists/1"


def write_choice_lists(path: str | os.PathLike[str], lists: Mapping[Problem, Sequence[Choice]], note: str = "") -> None:
    """Write the per-problem Triton configs for ``SweepOptions.choice_lists`` (JSON, atomically;
    gzipped where ``path`` ends in ``.gz``)."""
    import gzip
    import json

    from torch_diode._files import atomic_write

    obj = {
        "format": CHOICE_LISTS_FORMAT,
        "note": note,
        "problems": [{"problem": p.to_dict(), "choices": [c.to_dict() for c in cs]} for p, cs in lists.items()],
    }
    text = json.dumps(obj, indent=None) + "\n"
    atomic_write(path, gzip.compress(text.encode(), mtime=0) if str(path).endswith(".gz") else text)


def read_choice_lists(path: str | os.PathLike[str]) -> dict[Problem, list[Choice]]:
    """Read a file of :func:`write_choice_lists`; a file of another format, or a problem or choice
    that does not parse, is refused with a ``ValueError`` that names the file."""
    import gzip
    import json

    try:
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            obj = json.load(f)
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a readable choice-lists file ({type(e).__name__}: {e})") from e
    if not isinstance(obj, dict) or obj.get("format") != CHOICE_LISTS_FORMAT:
        got = obj.get("format") if isinstance(obj, dict) else type(obj).__name__
        raise ValueError(f"{path}: format {got!r}, expected {CHOICE_LISTS_FORMAT!r} (write it with write_choice_lists)")
    out: dict[Problem, list[Choice]] = {}
    for i, entry in enumerate(obj.get("problems") or []):
        try:
            p = Problem.from_dict(entry["problem"])
            out[p] = [Choice.from_dict(c) for c in entry["choices"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path}: entry {i} does not parse ({type(e).__name__}: {e})") from e
    return out


# ------------------------------------------------------------------------------------------------
# Planning compiles: problem order (the cost estimate, compile_cost, lives in torch_diode.records)
# ------------------------------------------------------------------------------------------------
def order_for_reuse(problems: Iterable[Problem]) -> list[Problem]:
    """The problems regrouped so that problems sharing a :class:`KernelSpec` (and hence, for the
    configs they have in common, compiled kernels) come one after another.

    Useful when Triton's cache does not outlive a slice of the run (e.g. one job on a fresh GPU
    machine): consecutive problems then reuse each other's kernels while they are warm. Groups
    keep the order of their first problem, problems within a group their relative order, so the
    result depends only on the input."""
    groups: dict[str, list[Problem]] = {}
    for p in problems:
        groups.setdefault(kernel_spec(p).key(), []).append(p)
    return [p for g in groups.values() for p in g]


# ------------------------------------------------------------------------------------------------
# Compilation in worker processes
# ------------------------------------------------------------------------------------------------
_TL_NAMES = ("float16", "bfloat16", "float32", "int32", "int64")


def _tl(name: str) -> Any:
    import triton.language as tl

    short = name[3:] if name.startswith("tl.") else name
    if short not in _TL_NAMES:
        raise ValueError(f"unknown triton dtype {name!r}")
    return getattr(tl, short)


def _kernel_args(problem: Problem, tensors: dict[str, Any] | None) -> list[Any]:
    """Positional run-time arguments of the sweep kernel (tensors or, in workers, their dtypes)."""
    import torch

    p = problem
    dt = getattr(torch, p.dtype)
    odt = getattr(torch, p.out_dtype)
    if tensors is None:
        ptrs = [dt, dt, odt, dt]
    else:
        ptrs = [tensors["a"], tensors["b"], tensors["c"], tensors.get("bias", tensors["c"])]
    out = _out_stride(p)
    bias = p.stride_bias if p.stride_bias is not None else (0,) * len(out)
    if p.op in BATCHED_OPS:
        ints = [p.m, p.n, p.k, p.batch, *p.stride_a, *p.stride_b, *out, *bias]
    else:
        ints = [p.m, p.n, p.k, *p.stride_a, *p.stride_b, *out, *bias]
    return ptrs + ints


def _constexprs_for_triton(cx: dict[str, Any]) -> dict[str, Any]:
    d = dict(cx)
    d["ACC_TYPE"] = _tl(d["ACC_TYPE"])
    d["INDEX_DTYPE"] = _tl(d["INDEX_DTYPE"])
    return d


def compile_options() -> dict[str, Any]:
    """The Triton compile options Inductor uses for template kernels
    (``CachingAutotuner._create_compile_options``): ``debug`` follows
    ``config.assert_indirect_indexing`` and overflow sanitizing is off."""
    from torch._inductor import config as inductor_config

    return {"debug": bool(inductor_config.assert_indirect_indexing), "sanitize_overflow": False}


def _worker_init(cache_dir: str | None, parent: int | None = None, ptxas: dict[str, str | None] | None = None) -> None:
    # Ctrl-C, or `timeout --signal=INT` (which signals the whole process group), is the parent's
    # to handle: it stops the compile processes itself (close()). A worker interrupted on its own
    # would break the pool and leave the parent waiting on it at exit.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Its own process group, so that a signal to the parent's group does not reach the `ptxas`
    # this process runs either: session 10's chunk s10f had seven `ptxas` killed by the deadline's
    # SIGINT (each printed its whole PTX into the log, and a killed `ptxas` is no compile error of
    # the config). The parent stops the workers itself; if it dies first (SIGKILL), they follow.
    if hasattr(os, "setpgrp"):
        os.setpgrp()
        # The parent's pid as the parent sent it: it may have died while this process started.
        exit_with_parent(os.getppid() if parent is None else parent)
    if cache_dir:
        os.environ["TRITON_CACHE_DIR"] = cache_dir
    if ptxas is not None:
        # The ptxas variables as they were when the parent aligned its Triton with them (the pool
        # starts a process per submit, each with the environment of that moment, which a
        # torch.compile in the parent may have changed since): the same cache keys as the parent's.
        from torch_diode.inductor.ptxas import set_ptxas_variables

        set_ptxas_variables(ptxas)


def _killed_by_signal(message: str) -> bool:
    """Whether a compile error is Triton's report of ``ptxas`` ended by a signal (a negative exit
    status: "`ptxas` failed with error code -2"): an interrupted compile, not the config's error."""
    return "PTXASError" in message and re.search(r"failed with error code -\d+", message) is not None


#: Configs in the first graphs of a timing pass whose kernel times are not known yet.
FIRST_GRAPH_CONFIGS = 8
#: Warm-up calls (one per config, each with its result check) queued on the GPU at most.
WARMUP_QUEUE = 4
#: Compiled configs loaded, checked and timed together once a checkpointed problem's compiles are
#: done, so that a problem of large kernels is checkpointed while it is being timed too.
TIMING_SLICE = 128


def graph_part(cost_us: Sequence[float] | None, pos: int, target_us: float, most: int) -> int:
    """How many configs from ``pos`` on go into the next graph of a timing pass: as many as keep
    its GPU time (``cost_us``: each config's runs, in µs) within ``target_us``, at least one and
    at most ``most``; :data:`FIRST_GRAPH_CONFIGS` while the costs are unknown (None)."""
    if cost_us is None:
        return min(most, FIRST_GRAPH_CONFIGS)
    n, total = 0, 0.0
    while pos + n < len(cost_us) and n < most:
        c = max(0.0, float(cost_us[pos + n]))
        if n and total + c > target_us:
            break
        total, n = total + c, n + 1
    return max(n, 1) if pos < len(cost_us) else 0


def _record_event() -> Any:
    import torch

    ev = torch.cuda.Event()
    ev.record()
    return ev


def wait_for_gpu(event: Any, poll_s: float = 0.002) -> None:
    """Wait until the GPU has passed ``event`` (a CUDA event: ``query()``), sleeping in Python
    between queries (from 50 µs, doubling up to ``poll_s``), so that a signal's handler runs at
    once: Ctrl-C, or the campaign's deadline SIGINT. ``torch.cuda.synchronize()`` keeps the main
    thread in C until the GPU is idle, and a handler waits for it (session 10's chunk s10f: a
    large fp32 problem's queued kernels kept the runner from its deadline's SIGINT for 30 s,
    then it was killed and lost the problem in hand)."""
    delay = 5e-5
    while not event.query():
        time.sleep(delay)
        delay = min(2 * delay, poll_s)


class CompileTimeout(Exception):
    """Raised inside :func:`time_limit`'s block when its time is up."""


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`CompileTimeout` in this (main) thread once ``seconds`` have passed (None: no
    limit), via ``SIGALRM``. The exception is raised when the interpreter next runs: at once
    while it waits on a child process (``subprocess.run``, as Triton runs ``ptxas``, then kills the
    child), only after it returns from a long call into C++. Compile workers only: it takes over
    ``SIGALRM`` and the real-time interval timer for the block."""
    if seconds is None:
        yield
        return

    def _alarm(signum: int, frame: Any) -> None:
        raise CompileTimeout(f"not compiled within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _SharedMemoryGuard:
    """A Triton ``add_stages_inspection_hook`` that ends a compile after Triton's LLVM-IR stage when
    the kernel needs more shared memory than ``limit`` bytes, with the ``OutOfResources`` that
    loading the kernel would raise (the same numbers: Triton's ``metadata["shared"]``, set by its
    allocation pass in that stage, against the device's ``max_shared_mem``), instead of running
    ``llc`` and ``ptxas`` first: most of the compile of a large fp32 FMA tile, which such tiles
    often are (measured on sm_90 with triton 3.9: 86% of 126 s for 128x128x256 s4 w4). A kernel
    that fits compiles exactly as without it. Its cache-key part is a constant, so the collector
    installs it around its own loads as well as in the compile processes: a kernel the workers
    cache is found under the same key (the limit is left out of the key: only kernels that fail,
    and are never cached, depend on it)."""

    KEY = "torch_diode.collect.sweep: OutOfResources (shared memory) before llc and ptxas, v1"

    def __init__(self, limit: int) -> None:
        self.limit = int(limit)
        self._error = _out_of_resources_type()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not args and not kwargs:  # triton >= 3.5 asks for the hook's cache-key part first
            return self.KEY, hashlib.sha256(self.KEY.encode()).hexdigest()
        stages = kwargs["stages"] if "stages" in kwargs else args[1]  # (backend, stages, options, ...)
        make_llir = stages.get("llir")
        if make_llir is None:
            return None
        limit, error = self.limit, self._error

        def llir(*args: Any, **kwargs: Any) -> Any:  # (src, metadata) in triton 3.x; passed on as given
            out = make_llir(*args, **kwargs)
            metadata = kwargs.get("metadata", args[1] if len(args) > 1 else None)
            shared = metadata.get("shared") if isinstance(metadata, dict) else None
            if isinstance(shared, int) and shared > limit:
                raise error(shared, limit, "shared memory")
            return out

        stages["llir"] = llir
        return None


def _out_of_resources_type() -> Any:
    """Triton's ``OutOfResources`` exception class (None where this Triton has none)."""
    try:
        from triton.runtime.errors import OutOfResources
    except ImportError:
        try:
            from triton.runtime.autotuner import OutOfResources  # type: ignore[no-redef]
        except ImportError:
            return None
    return OutOfResources


def stages_hook_supported() -> bool:
    """Whether the installed Triton has ``knobs.runtime.add_stages_inspection_hook`` (and its
    ``OutOfResources``), which :func:`shared_memory_guard` needs."""
    try:
        from triton import knobs
    except ImportError:
        return False
    return hasattr(getattr(knobs, "runtime", None), "add_stages_inspection_hook") and (
        _out_of_resources_type() is not None
    )


@contextlib.contextmanager
def shared_memory_guard(limit: int | None) -> Iterator[None]:
    """Install :class:`_SharedMemoryGuard` for ``limit`` bytes while the block runs (nothing when
    ``limit`` is None); the previous hook is put back after it."""
    if limit is None:
        yield
        return
    from triton import knobs

    previous = knobs.runtime.add_stages_inspection_hook
    knobs.runtime.add_stages_inspection_hook = _SharedMemoryGuard(limit)
    try:
        yield
    finally:
        knobs.runtime.add_stages_inspection_hook = previous


class _NoGuard(Exception):
    """Why :func:`shared_memory_guard` is not used for a run (``level``: how loudly to say so)."""

    def __init__(self, why: str, level: int = logging.INFO) -> None:
        super().__init__(why)
        self.level = level


#: A kernel that compiles and fits any GPU's shared memory: the guard's self-check.
_GUARD_CHECK = (
    Problem(op="mm", m=64, n=64, k=64, dtype="float16"),
    Choice(template="triton::mm", block_m=32, block_n=32, block_k=32, group_m=8, num_stages=2, num_warps=4,
           even_k=True, allow_tf32=False, use_fast_accum=False, acc_type="tl.float32"),
)  # fmt: skip


def _compile_task(
    problem_dict: dict[str, Any],
    choice_dict: dict[str, Any],
    revision: int,
    options: dict[str, Any],
    literal: bool = False,
    timeout_s: float | None = None,
    shared_memory_limit: int | None = None,
) -> tuple[str, str]:
    """Fill Triton's on-disk cache with the kernel of (problem spec, choice). Runs in a worker.
    Returns ``("ok", seconds)``, ``("timeout", message)``, ``("error", message)``,
    ``("out_of_resources", message)`` (more shared memory than ``shared_memory_limit``, found
    before ``ptxas`` by :func:`shared_memory_guard`) or, when ``ptxas`` was ended by a signal,
    ``("killed", message)`` (the collector compiles it again)."""
    try:
        from torch_diode.collect.sweep_kernels import KERNELS

        p = Problem.from_dict(problem_dict)
        c = Choice.from_dict(choice_dict)
        cx = _constexprs_for_triton(launch_constexprs(p, c, revision, literal=literal))
        kernel = KERNELS[kernel_spec(p).kernel]
        t0 = time.perf_counter()
        with time_limit(timeout_s), shared_memory_guard(shared_memory_limit):
            kernel.warmup(
                *_kernel_args(p, None), grid=(1,), num_warps=c.num_warps, num_stages=c.num_stages, **options, **cx
            )
        return "ok", f"{time.perf_counter() - t0:.3f}"
    except CompileTimeout as e:
        return "timeout", f"compile timeout: {e} (stopped after {time.perf_counter() - t0:.0f} s)"
    except Exception as e:
        message = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:500]
        if shared_memory_limit is not None and type(e).__name__ == "OutOfResources" and "shared memory" in message:
            return "out_of_resources", message  # the guard's: Triton raises it when loading, not compiling
        return ("killed" if _killed_by_signal(message) else "error"), message


# ------------------------------------------------------------------------------------------------
# The collector
# ------------------------------------------------------------------------------------------------
TIMING_MODES: tuple[str, ...] = ("graph", "inductor")
SAMPLE_MODES: tuple[str, ...] = ("problem", "shared")


@dataclass(frozen=True)
class SweepOptions:
    """How the sweep measures.

    ``search_space``: Inductor's ``max_autotune_gemm_search_space`` whose configs are swept.
    ``max_configs``/``seed``/``sample``: at most that many Triton configs per problem, a seeded
    sample; ``sample="problem"`` draws independently per problem, ``"shared"`` ranks configs by a
    seeded hash of the config alone, so problems share their sampled configs (and compiled kernels).
    ``workers``: compile processes (default: CPU count - 1).
    ``timing``: ``"graph"`` (CUDA-graph replays, CUDA events around each run, L2 flushed before
    each; the default) or ``"inductor"`` (Inductor's own ``benchmarker.benchmark_gpu`` on a Python
    launch, exactly as max-autotune times; slower, for comparisons).
    ``budget_us``: GPU time for the timed repetitions of one config (at least ``min_reps``, at most
    ``max_reps``) after ``estimate_reps`` estimating runs.
    ``graph_chunk``, ``max_queued_us``: the configs of one CUDA graph of a timing pass, at most
    (count, and GPU time once their kernels' times are estimated); two graphs are queued at most,
    so an interrupt (Ctrl-C, a deadline) is handled within about a second.
    ``check``: compare each Triton kernel's output with a float64 reference and record mismatches.
    ``literal_sizes``: compile every kernel with the problem's sizes and strides as literals, as
    Inductor renders its template (True, the default): the kernel timed is Inductor's, register
    allocation and spills included, and it serves one problem. False shares one compiled kernel
    per (config, :class:`KernelSpec`) across problems (faster: fewer compiles), but run-time sizes
    give some configs other register allocations than Inductor's literal ones (up to 8x faster
    than Inductor's kernel for fp32 tiles that spill with a literal K loop): use it only where
    that difference does not matter.
    ``compile_timeout_s``: a kernel whose compile has not finished after this many seconds is
    stopped and recorded as a failure (reason ``timeout``) instead of holding its problem up (None,
    the default: no limit). The limit is checked whenever the compile is in Python or waits for
    ``ptxas`` (which is then killed), so a single long LLVM pass can overrun it.
    ``max_compile_cost``: leave out, before sampling, the Triton configs whose
    :func:`compile_cost` exceeds this (None, the default: sweep them all). The configs left out are
    counted in ``SweepCollector.skipped["compile_cost"]``, never recorded as failures. An fp32
    (no TF32) config costs about 8 per FMA per thread, so ``131072`` drops the fp32 FMA tiles of 16,384+
    FMAs per thread (a minute or more of compiling each) and keeps every fp16/bf16 tile of EXHAUSTIVE.
    ``choice_lists``: a JSON file (:func:`write_choice_lists`) naming, per problem, the Triton
    configs to measure instead of a sample (ATen is measured as usual): for measuring a model's
    own top candidates on new problems, or any hand-picked set. A listed config that Inductor does
    not enumerate for the problem (or that ``max_compile_cost`` leaves out) is not measured and is
    counted in ``SweepCollector.skipped["not_enumerated"]``; a problem the file does not list is
    refused with a ``ValueError``. None (the default): ``max_configs``/``sample`` decide.
    ``shared_memory_guard``: the compile processes stop a kernel that needs more shared memory than
    the GPU has after Triton's LLVM-IR stage, before ``llc`` and ``ptxas`` (:func:`shared_memory_guard`),
    and it is recorded as the same ``OutOfResources`` failure that loading it would give (True, the
    default, where the installed Triton has the stages hook; the configs refused so are counted in
    ``SweepStats.refused_over_shared_memory``). False compiles such kernels in full.
    """

    search_space: str = "EXHAUSTIVE"
    max_configs: int | None = None
    seed: int = 0
    sample: str = "problem"
    include_aten: bool = True
    workers: int | None = None
    timing: str = "graph"
    budget_us: float = 1500.0
    min_reps: int = 3
    max_reps: int = 25
    estimate_reps: int = 2
    graph_chunk: int = 64
    max_queued_us: float = 500_000.0
    check: bool = True
    cache_dir: str | None = None
    max_compile_cost: float | None = None
    literal_sizes: bool = True
    compile_timeout_s: float | None = None
    shared_memory_guard: bool = True
    choice_lists: str | None = None

    def __post_init__(self) -> None:
        if self.search_space not in SEARCH_SPACES:
            raise ValueError(f"search_space: must be one of {', '.join(SEARCH_SPACES)}, got {self.search_space!r}")
        if self.max_configs is not None and (isinstance(self.max_configs, bool) or self.max_configs < 1):
            raise ValueError(f"max_configs: must be a positive integer or None, got {self.max_configs!r}")
        if self.sample not in SAMPLE_MODES:
            raise ValueError(f"sample: must be one of {', '.join(SAMPLE_MODES)}, got {self.sample!r}")
        if self.timing not in TIMING_MODES:
            raise ValueError(f"timing: must be one of {', '.join(TIMING_MODES)}, got {self.timing!r}")
        if self.min_reps < 1 or self.max_reps < self.min_reps or self.estimate_reps < 1:
            raise ValueError("reps: need 1 <= min_reps <= max_reps and estimate_reps >= 1")
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers: must be a positive integer or None, got {self.workers!r}")
        if isinstance(self.graph_chunk, bool) or not isinstance(self.graph_chunk, int) or self.graph_chunk < 1:
            raise ValueError(f"graph_chunk: must be a positive integer, got {self.graph_chunk!r}")
        if not self.max_queued_us > 0:
            raise ValueError(f"max_queued_us: must be a positive number of µs, got {self.max_queued_us!r}")
        if self.max_compile_cost is not None and not self.max_compile_cost > 0:
            raise ValueError(f"max_compile_cost: must be a positive number or None, got {self.max_compile_cost!r}")
        if self.choice_lists is not None and (not isinstance(self.choice_lists, str) or not self.choice_lists):
            raise ValueError(f"choice_lists: must be a file path or None, got {self.choice_lists!r}")
        if self.compile_timeout_s is not None and not self.compile_timeout_s > 0:
            raise ValueError(f"compile_timeout_s: must be a positive number or None, got {self.compile_timeout_s!r}")


@dataclass
class SweepStats:
    """Where the time went (seconds), summed over problems."""

    problems: int = 0
    configs_timed: int = 0
    failures: int = 0
    enumerate_s: float = 0.0
    compile_wait_s: float = 0.0
    load_s: float = 0.0
    measure_s: float = 0.0
    kernels_compiled: int = 0
    compile_cpu_s: float = 0.0
    slow_first_calls: int = 0  # first launches over 50 ms: a kernel compiled in this process
    slow_first_calls_s: float = 0.0
    refused_over_shared_memory: int = 0  # kernels stopped before ptxas by shared_memory_guard

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_TOL = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 2e-2}


class SweepCollector:
    """Measures ATen plus Inductor's Triton configs for one problem at a time.

    ``measure(problem)`` returns ``(timings, failures)`` like the Inductor collector (times in
    microseconds). Call ``prefetch(upcoming_problems)`` to compile their kernels in the background
    while measuring; ``close()`` (or ``with``) stops the compile processes.
    """

    name = "sweep"

    def __init__(self, hardware_key: str, options: SweepOptions | None = None, *, device: str = "cuda") -> None:
        if not hardware_key:
            raise ValueError("hardware_key: must be a non-empty string (see `diode hardware`)")
        if not str(device).startswith("cuda"):
            raise ValueError(
                f"device: the sweep collector times CUDA kernels; got {device!r} (use the inductor collector on CPU)"
            )
        self.hardware = hardware_key
        self.options = options or SweepOptions()
        self.device = str(device)
        self.revision = template_revision()
        self.compile_options = compile_options()
        self.skipped: dict[str, int] = {}
        self.stats = SweepStats()
        self._items: dict[Problem, list[SweepItem]] = {}
        self._futures: dict[tuple[Any, ...], cf.Future[tuple[str, str]]] = {}
        self._pool: cf.ProcessPoolExecutor | None = None
        self._flush: Any = None
        self._loaded: set[tuple[Any, ...]] = set()
        self._recompiled: set[tuple[Any, ...]] = set()  # kernels compiled again after a killed `ptxas`
        self._prefetched: set[Problem] = set()  # problems whose kernels are all submitted
        self._measured: dict[Problem, frozenset[Choice]] = {}  # top-up: Triton configs not to measure again
        self._shared_limit: int | None = None
        self._shared_limit_known = False
        self._lists: dict[Problem, list[Choice]] | None = None

    @classmethod
    def from_options(cls, options: Any, *, hardware: str, device: str = "cuda", **sweep_options: Any) -> SweepCollector:
        """Build from the runner's ``CollectOptions`` (its ``search_space``) plus sweep keyword
        options (``max_configs``, ``seed``, ``sample``, ``workers``, ``budget_us`` ... of
        :class:`SweepOptions`)."""
        known = set(SweepOptions.__dataclass_fields__)
        unknown = sorted(set(sweep_options) - known)
        if unknown:
            raise ValueError(
                f"sweep options: {plural(len(unknown), 'unknown option')} {unknown}; known: {', '.join(sorted(known))}"
            )
        kw = {"search_space": getattr(options, "search_space", "EXHAUSTIVE"), **sweep_options}
        return cls(hardware, SweepOptions(**kw), device=device)

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> SweepCollector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the compile processes (compiled kernels stay in Triton's cache).

        Kernels still queued are cancelled and compiles still running are stopped, so a run that
        ends early (a time budget, an interrupt) ends at once instead of finishing prefetched
        compiles whose problems it will not measure; Triton writes a cache entry only once its
        kernel is complete."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            procs = list(getattr(pool, "_processes", {}).values())  # CPython's worker table
            manager = getattr(pool, "_executor_manager_thread", None)  # shutdown() forgets it
            # A second SIGINT (`timeout` sends one to the process and one to its group) must not
            # cut this short: a worker left running keeps the interpreter from exiting.
            with interrupts_ignored():
                pool.shutdown(wait=False, cancel_futures=True)
                for proc in procs:
                    if proc.is_alive():
                        proc.terminate()
                deadline = time.monotonic() + 10
                for proc in procs:
                    proc.join(timeout=max(0.0, deadline - time.monotonic()))
                # CPython's pool thread reaps the workers too: a join here can lose that race (its
                # wait finds no child) and return while the thread is still recording the exit
                # status, so a worker would still read as alive after close(). Wait for the thread.
                if manager is not None:
                    manager.join(timeout=max(0.1, deadline - time.monotonic()))
        self._futures = {k: f for k, f in self._futures.items() if f.done() and not f.cancelled()}
        self._prefetched.clear()  # their cancelled kernels must be submitted again

    def _get_pool(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            from torch_diode.inductor.ptxas import ptxas_variables

            self._align_ptxas()
            n = self.options.workers or max(1, (os.cpu_count() or 2) - 1)
            ctx = multiprocessing.get_context("spawn")
            initargs = (self.options.cache_dir, os.getpid(), ptxas_variables())
            self._pool = cf.ProcessPoolExecutor(
                max_workers=n, mp_context=ctx, initializer=_worker_init, initargs=initargs
            )
        return self._pool

    def _align_ptxas(self) -> None:
        """Before the compile processes start (with the ptxas variables as they are now, which
        ``_worker_init`` sets in each): this process's Triton, which loads the kernels they build,
        must key its cache with the same ptxas version, or it compiles every kernel again as it
        times it (:func:`align_with_new_processes`: where a ``torch.compile`` in this process set
        ``TRITON_PTXAS_PATH`` after Triton had read another version). Only with the GPU: without
        one this process loads no kernel. Never raises (a failure is logged)."""
        import torch

        if not torch.cuda.is_available() or torch.version.hip:
            return
        from torch_diode.inductor.ptxas import align_with_new_processes, triton_arch

        try:
            arch = triton_arch(torch.cuda.get_device_capability(torch.device(self.device)))
        except Exception as e:  # the device's own error comes with the first measurement
            log.warning(
                "sweep: the ptxas version not aligned: the GPU's compute capability: %s: %s", type(e).__name__, e
            )
            return
        did = align_with_new_processes(arch)
        if did:
            log.warning("sweep: %s", did)

    # -- planning ----------------------------------------------------------------------------
    def skip_measured(self, measured: Mapping[Problem, Collection[Choice]]) -> None:
        """Top-up: leave out of each problem's choices the Triton configs ``measured`` already
        holds for it (timed or failed), so that a larger sample (a raised ``max_configs``) or an
        interrupted problem is completed without timing anything twice. ATen is timed again with
        the new configs, so each top-up has its own reference and the file a repeat of ATen."""
        self._measured = {p: frozenset(c) for p, c in measured.items()}
        self._items.clear()
        self._prefetched.clear()

    def needs_top_up(self, problem: Problem) -> bool:
        """Whether ``problem`` has sampled Triton configs that are not measured yet."""
        return any(it.kind == "triton" for it in self.choices(problem))

    def choices(self, problem: Problem) -> list[SweepItem]:
        """The (sampled) choices this collector measures for ``problem`` (less those of
        :meth:`skip_measured`)."""
        items = self._items.get(problem)
        if items is None:
            t0 = time.perf_counter()
            o = self.options
            all_items = inductor_choices(problem, o.search_space)
            if o.max_compile_cost is not None:
                kept = [
                    it
                    for it in all_items
                    if it.kind != "triton" or compile_cost(problem, it.choice) <= o.max_compile_cost
                ]
                if len(kept) < len(all_items):
                    self.skipped["compile_cost"] = self.skipped.get("compile_cost", 0) + len(all_items) - len(kept)
                all_items = kept
            if o.choice_lists is not None:
                items = self._listed(problem, all_items)
            elif o.sample == "shared":
                items = sample_shared(all_items, o.max_configs, o.seed)
            else:
                items = sample_choices(all_items, problem, o.max_configs, o.seed)
            if not o.include_aten:
                items = [it for it in items if it.kind != "aten"]
            have = self._measured.get(problem)
            if have:
                items = [it for it in items if it.kind == "aten" or it.choice not in have]
            self._items[problem] = items
            self.stats.enumerate_s += time.perf_counter() - t0
        return items

    def _listed(self, problem: Problem, items: Sequence[SweepItem]) -> list[SweepItem]:
        """ATen plus the Triton configs ``options.choice_lists`` names for ``problem``."""
        if self._lists is None:
            self._lists = read_choice_lists(self.options.choice_lists or "")
        wanted = self._lists.get(problem)
        if wanted is None:
            raise ValueError(
                f"{self.options.choice_lists}: no choice list for {problem.key()}; list it there or collect it without "
                "choice_lists"
            )
        triton = {it.choice: it for it in items if it.kind == "triton"}
        missing = sum(c not in triton for c in wanted)
        if missing:
            self.skipped["not_enumerated"] = self.skipped.get("not_enumerated", 0) + missing
        return [it for it in items if it.kind == "aten"] + [triton[c] for c in wanted if c in triton]

    def prefetch(self, problems: Iterable[Problem]) -> int:
        """Start compiling the kernels of ``problems`` in the background (in order); returns how
        many new kernels were submitted. ``measure`` waits only for the kernels it needs.

        A problem already prefetched is skipped: the runner passes a sliding window of upcoming
        problems on every step, and computing every compile key again would cost the main
        process time per problem and window slot."""
        n = 0
        for p in problems:
            if p in self._prefetched:
                continue
            new: dict[tuple[Any, ...], Choice] = {}
            for it in self.choices(p):
                if it.kind != "triton" or it.choice.template not in _SUPPORTED_TRITON:
                    continue
                try:
                    key = compile_key(p, it.choice, self.revision, literal=self.options.literal_sizes)
                except ValueError:
                    continue  # reported as a failure by measure()
                if key not in self._futures:
                    new.setdefault(key, it.choice)
            # Most expensive first (longest-processing-time order): a problem waits for its last
            # kernel, and one large fp32 FMA kernel submitted last would hold it up alone.
            for key, c in sorted(new.items(), key=lambda kv: -compile_cost(p, kv[1])):
                self._submit(p, c, key)
                n += 1
            self._prefetched.add(p)
        return n

    def shared_memory_limit(self) -> int | None:
        """The device's shared memory per block in bytes, as Triton checks it when it loads a kernel,
        for :func:`shared_memory_guard`; None (kernels compiled in full) when the guard is off, the
        installed Triton has no stages hook or another hook is installed, the device cannot be
        asked, or a small kernel does not compile under the guard (said once in the log)."""
        if not self._shared_limit_known:
            self._shared_limit_known = True
            try:
                self._shared_limit = self._guard_limit() if self.options.shared_memory_guard else None
            except _NoGuard as e:
                log.log(e.level, "sweep: kernels over the shared-memory limit are compiled in full: %s", e)
        return self._shared_limit

    def _guard_limit(self) -> int:
        if not stages_hook_supported():
            raise _NoGuard("this Triton has no knobs.runtime.add_stages_inspection_hook")
        from triton import knobs

        if knobs.runtime.add_stages_inspection_hook is not None:
            raise _NoGuard("another Triton stages hook is installed")
        try:
            import torch
            from triton.runtime import driver

            dev = torch.device(self.device)
            idx = dev.index if dev.index is not None else torch.cuda.current_device()
            limit = int(driver.active.utils.get_device_properties(idx)["max_shared_mem"])
        except Exception as e:  # no GPU here (tests), a driver that cannot say
            raise _NoGuard(f"the device's limit is unknown ({type(e).__name__}: {e})") from e
        # The guard must never fail a kernel that compiles without it (a Triton whose stages differ
        # from what it expects): compile a small one with it first.
        problem, choice = _GUARD_CHECK
        status, msg = _compile_task(
            problem.to_dict(), choice.to_dict(), self.revision, self.compile_options, self.options.literal_sizes,
            None, limit,
        )  # fmt: skip
        if status != "ok":
            raise _NoGuard(f"a small kernel did not compile with the guard ({status}: {msg})", logging.WARNING)
        return limit

    def _submit(self, problem: Problem, choice: Choice, key: tuple[Any, ...]) -> cf.Future[tuple[str, str]]:
        fut = self._get_pool().submit(
            _compile_task,
            problem.to_dict(),
            choice.to_dict(),
            self.revision,
            self.compile_options,
            self.options.literal_sizes,
            self.options.compile_timeout_s,
            self.shared_memory_limit(),
        )
        self._futures[key] = fut
        return fut

    # -- measuring ---------------------------------------------------------------------------
    def measure(
        self,
        problem: Problem,
        *,
        on_part: Callable[[list[TimingRecord], list[FailureRecord]], None] | None = None,
        part_s: float = 60.0,
    ) -> tuple[list[TimingRecord], list[FailureRecord]]:
        """Time ATen and every (sampled) Triton config of ``problem``; microseconds.

        ``on_part``: checkpoint a long problem. Whenever kernels have waited ``part_s`` seconds for
        the rest of the problem's compiles, the compiled ones are timed (with ATen beside them) and
        handed to ``on_part(records, failures)`` to save; once all are compiled, they are timed in
        slices of :data:`TIMING_SLICE` and handed over likewise every ``part_s`` seconds. The
        return value then holds only what was not handed over. An interrupted problem thus keeps its timed parts, and a rerun that
        :meth:`skip_measured` them times only the rest."""
        # The compile processes' stages hook is part of Triton's cache key: load with the same one.
        with shared_memory_guard(self.shared_memory_limit()):
            return self._measure(problem, on_part=on_part, part_s=part_s)

    def _measure(
        self,
        problem: Problem,
        *,
        on_part: Callable[[list[TimingRecord], list[FailureRecord]], None] | None,
        part_s: float,
    ) -> tuple[list[TimingRecord], list[FailureRecord]]:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("the sweep collector needs a CUDA GPU; run it on the GPU machine")
        if ":" in self.device:
            torch.cuda.set_device(torch.device(self.device))
        t_start = time.perf_counter()
        st0 = SweepStats(**self.stats.to_dict())
        self.prefetch([problem])
        items = self.choices(problem)
        failures: list[FailureRecord] = []

        def fail(choice: Choice | None, reason: str, message: str) -> None:
            failures.append(
                FailureRecord(problem=problem, choice=choice, reason=reason, message=message, hardware=self.hardware)
            )

        try:
            tensors = self.example_tensors(problem)
        except torch.cuda.OutOfMemoryError as e:
            torch.cuda.empty_cache()
            fail(None, "oom", f"allocating the inputs: {str(e).splitlines()[0]}")
            return [], failures
        aten: list[tuple[Choice, Any]] = []
        waiting: dict[cf.Future[tuple[str, str]], list[tuple[Choice, tuple[Any, ...]]]] = {}
        for it in items:
            c = it.choice
            if it.kind == "aten":
                try:
                    aten.append((c, self._aten_runner(c, tensors)))
                except ValueError as e:
                    fail(c, "error", str(e))
                continue
            if c.template not in _SUPPORTED_TRITON:
                fail(c, "error", f"template {c.template} is not swept")
                continue
            try:
                key = compile_key(problem, c, self.revision, literal=self.options.literal_sizes)
            except ValueError as e:
                fail(c, "error", str(e))
                continue
            waiting.setdefault(self._futures[key], []).append((c, key))

        runners: list[tuple[Choice, Any]] = []  # compiled Triton kernels not timed yet
        part_start = time.perf_counter()
        while waiting:
            t0 = time.perf_counter()
            timeout = None if on_part is None else max(0.0, part_start + part_s - t0)
            done, _ = cf.wait(list(waiting), timeout=timeout, return_when=cf.FIRST_COMPLETED)
            self.stats.compile_wait_s += time.perf_counter() - t0
            for fut in done:
                status, msg = fut.result()
                entries = waiting.pop(fut)  # the choices of one compile key
                first, key = entries[0]
                if status == "killed" and key not in self._recompiled:
                    # `ptxas` ended by a signal (not this config's error): compile it once more;
                    # a second such end is recorded as the compile error it then looks like.
                    self._recompiled.add(key)
                    log.warning("sweep %s: %s; compiling it again", problem.key(), msg)
                    waiting[self._submit(problem, first, key)] = entries
                    continue
                if status == "out_of_resources":
                    self.stats.refused_over_shared_memory += 1
                for c, key in entries:
                    if status != "ok":
                        fail(c, "timeout" if status == "timeout" else "compile_error", msg)
                        continue
                    if key not in self._loaded:
                        self._loaded.add(key)
                        self.stats.kernels_compiled += 1
                        self.stats.compile_cpu_s += float(msg)
                    runners.append((c, self._triton_runner(problem, c, tensors)))
            if on_part is not None and waiting and time.perf_counter() - part_start >= part_s:
                if runners or failures:  # failed compiles are progress too: they are not retried
                    part = self._time_runners(problem, tensors, aten + runners, fail) if runners else []
                    log.info(
                        "sweep %s: checkpoint of %d timed, %d failed; %s still compiling",
                        problem.key(), len(part), len(failures), plural(sum(len(v) for v in waiting.values()), "kernel"),
                    )  # fmt: skip
                    on_part(part, failures[:])
                    self.stats.configs_timed += len(part)
                    self.stats.failures += len(failures)
                    failures.clear()
                    runners = []
                part_start = time.perf_counter()
        # Every kernel is compiled. Timing a problem of large kernels can take minutes too
        # (session 18: `mm float16 4096x152064x3584`, 284 s of loading, checking and timing, and
        # a chunk lost 200 s of that at its deadline), so with ``on_part`` the rest is timed in
        # slices, handed over every ``part_s`` seconds like the parts above. ATen is timed once
        # per part (with the part's first slice), as the reference of that part's kernel times.
        records: list[TimingRecord] = []
        with_aten = True
        while True:
            n = TIMING_SLICE if on_part is not None else len(runners)
            batch, runners = runners[:n], runners[n:]
            records += self._time_runners(problem, tensors, (aten if with_aten else []) + batch, fail)
            with_aten = False
            if not runners:
                break
            if on_part is not None and time.perf_counter() - part_start >= part_s:
                log.info(
                    "sweep %s: checkpoint of %d timed, %d failed; %s still to time",
                    problem.key(), len(records), len(failures), plural(len(runners), "compiled kernel"),
                )  # fmt: skip
                on_part(records, failures[:])
                self.stats.configs_timed += len(records)
                self.stats.failures += len(failures)
                failures.clear()
                records, with_aten = [], True
                part_start = time.perf_counter()
        self.stats.problems += 1
        self.stats.configs_timed += len(records)
        self.stats.failures += len(failures)
        del tensors
        self._items.pop(problem, None)
        self._prefetched.discard(problem)
        s = self.stats
        log.info(
            "sweep %s: %d timed, %d failed in %.2fs (compile wait %.2fs, load+check %.2fs, timing %.2fs, %s, "
            "%d refused over shared memory before ptxas)",
            problem.key(), len(records), len(failures), time.perf_counter() - t_start,
            s.compile_wait_s - st0.compile_wait_s, s.load_s - st0.load_s, s.measure_s - st0.measure_s,
            plural(s.kernels_compiled - st0.kernels_compiled, "new kernel"),
            s.refused_over_shared_memory - st0.refused_over_shared_memory,
        )  # fmt: skip
        return records, failures

    def _time_runners(
        self,
        problem: Problem,
        tensors: dict[str, Any],
        runners: Sequence[tuple[Choice, Any]],
        fail: Callable[[Choice | None, str, str], None],
    ) -> list[TimingRecord]:
        """Load, check and time ``runners`` (ATen and compiled Triton kernels of ``problem``);
        what cannot be run, is wrong or gets no valid time goes to ``fail``."""
        import torch

        # Warm-up: one eager call each (loads the module, surfaces OutOfResources), then check.
        t0 = time.perf_counter()
        ok: list[tuple[Choice, Any]] = []
        errs: list[tuple[Choice, Any]] = []
        ref, scale = tensors["ref"], tensors["ref_scale"]
        queued: collections.deque[Any] = collections.deque()  # one event per warm-up call
        for c, run in runners:
            try:
                if len(queued) >= WARMUP_QUEUE:  # not minutes of slow kernels ahead of an interrupt
                    wait_for_gpu(queued.popleft())
                tensors["c"].fill_(float("nan"))
                t1 = time.perf_counter()
                run()
                dt = time.perf_counter() - t1
                if dt > 0.05:
                    self.stats.slow_first_calls += 1
                    self.stats.slow_first_calls_s += dt
                if self.options.check and not c.is_aten:
                    errs.append((c, (tensors["c"].float() - ref).abs().max() / scale))
                queued.append(_record_event())
                ok.append((c, run))
            except Exception as e:
                torch.cuda.synchronize()
                name = type(e).__name__
                reason = (
                    "compile_error" if name in ("OutOfResources", "CompilationError", "PTXASError") else "runtime_error"
                )
                fail(c, reason, f"{name}: {str(e).splitlines()[0] if str(e) else ''}"[:500])
        if queued:
            wait_for_gpu(queued[-1])
        torch.cuda.synchronize()
        bad: set[Choice] = set()
        if errs:
            vals = torch.stack([e for _, e in errs]).tolist()
            tol = _TOL.get(problem.dtype, 2e-2) * (4 if problem.k > 8192 else 1)
            for (c, _), v in zip(errs, vals):
                if not (v <= tol):  # NaN (an unwritten output) fails too
                    bad.add(c)
                    fail(c, "runtime_error", f"wrong result: max error {v:.3g} of max |ref| (tolerance {tol})")
        ok = [(c, r) for c, r in ok if c not in bad]
        self.stats.load_s += time.perf_counter() - t0

        t0 = time.perf_counter()
        if self.options.timing == "inductor":
            times = self._time_inductor(ok)
        else:
            times = self._time(ok)
        self.stats.measure_s += time.perf_counter() - t0
        records = []
        for (c, _), t in zip(ok, times):
            if t is None or not math.isfinite(t) or t <= 0:
                fail(c, "runtime_error", f"no valid timing ({t})")
                continue
            records.append(TimingRecord(problem=problem, choice=c, time_us=t, hardware=self.hardware))
        return records

    # -- internals -------------------------------------------------------------------------
    def example_tensors(self, problem: Problem) -> dict[str, Any]:
        """Random inputs with the problem's strides: ``a``, ``b``, ``bias`` (broadcast, for
        addmm/baddbmm), the output ``c`` and the float64 reference ``ref``."""
        import torch

        p = problem
        dev = torch.device("cuda")
        dt = getattr(torch, p.dtype)
        sa, sb, so = _shapes(p)
        gen = torch.Generator(device=dev)
        gen.manual_seed(1234)

        def strided(shape: Sequence[int], stride: Sequence[int]) -> Any:
            n = _storage_numel(shape, stride)
            buf = torch.randn(n, generator=gen, device=dev, dtype=torch.float32).to(dt)
            return torch.as_strided(buf, tuple(shape), tuple(stride))

        t: dict[str, Any] = {"a": strided(sa, p.stride_a), "b": strided(sb, p.stride_b)}
        t["c"] = torch.empty_strided(so, _out_stride(p), device=dev, dtype=getattr(torch, p.out_dtype))
        if p.stride_bias is not None:
            t["bias"] = strided(so, p.stride_bias)
        with torch.no_grad():
            ref = torch.matmul(t["a"].double(), t["b"].double())
            if "bias" in t:
                ref = ref + t["bias"].double()
        t["ref"] = ref.float()
        t["ref_scale"] = ref.abs().max().float().clamp_min(1e-6)
        del ref
        self._ensure_flush()
        return t

    def _ensure_flush(self) -> None:
        """Allocate the L2-sized buffer zeroed before each timed run (once)."""
        import torch

        if self._flush is None:
            l2 = torch.cuda.get_device_properties(torch.device("cuda")).L2_cache_size or 256 * 1024 * 1024
            self._flush = torch.empty(l2 // 4, dtype=torch.int, device="cuda")

    def _aten_runner(self, choice: Choice, t: dict[str, Any]) -> Any:
        import torch

        a, b, c = t["a"], t["b"], t["c"]
        name = choice.template
        if name == "aten::mm":
            return lambda: torch.mm(a, b, out=c)
        if name == "aten::bmm":
            return lambda: torch.bmm(a, b, out=c)
        if name == "aten::addmm":
            return lambda: torch.addmm(t["bias"], a, b, out=c)
        if name == "aten::baddbmm":
            return lambda: torch.baddbmm(t["bias"], a, b, out=c)
        if name == "aten::bias_addmm":
            from torch._inductor.kernel.mm import bias_addmm

            return lambda: bias_addmm(t["bias"], a, b, out=c)
        raise ValueError(f"ATen choice {name} is not supported by the sweep")

    def _triton_runner(self, problem: Problem, choice: Choice, t: dict[str, Any]) -> Any:
        from torch_diode.collect.sweep_kernels import KERNELS

        p = problem
        cx = _constexprs_for_triton(launch_constexprs(p, choice, self.revision, literal=self.options.literal_sizes))
        kernel = KERNELS[kernel_spec(p).kernel]
        args = _kernel_args(p, t)
        tiles = math.ceil(p.m / cx["BLOCK_M"]) * math.ceil(p.n / cx["BLOCK_N"])
        if p.op not in BATCHED_OPS:
            grid = (tiles, 1, 1)
        elif self.revision >= 213:  # batch on grid y, split into y/z above 65535
            gy = min(p.batch, 65535)
            grid = (tiles, gy, math.ceil(p.batch / gy))
        else:
            grid = (tiles, p.batch, 1)
        kw = {"num_warps": choice.num_warps, "num_stages": choice.num_stages, **self.compile_options, **cx}

        def run() -> None:
            kernel[grid](*args, **kw)

        return run

    def _time_inductor(self, runners: Sequence[tuple[Choice, Any]]) -> list[float | None]:
        """Inductor's own benchmarker on a Python launch (what max-autotune does), in µs."""
        from torch._inductor.runtime.benchmarking import benchmarker

        out: list[float | None] = []
        for _, run in runners:
            try:
                out.append(float(benchmarker.benchmark_gpu(run)) * 1000.0)
            except Exception as e:
                log.warning("sweep: benchmarking failed: %s", e)
                out.append(None)
        return out

    def time_callables(self, fns: Sequence[Any], stream: Any = None) -> list[float | None]:
        """Time GPU callables (each launching one kernel) exactly as the sweep times its own:
        µs, minimum over L2-flushed repetitions inside CUDA graphs. ``stream``: the stream to
        capture on, for callables bound to a stream when made (Inductor's ``make_run_fn``)."""
        self._ensure_flush()
        return self._time([(Choice(template=f"callable::{i}"), fn) for i, fn in enumerate(fns)], stream=stream)

    def _time(self, runners: Sequence[tuple[Choice, Any]], stream: Any = None) -> list[float | None]:
        """Minimum over repetitions of the kernel time (µs), each repetition after an L2 flush,
        timed with CUDA events recorded inside CUDA graphs."""
        opts = self.options
        if not runners:
            return []
        est = self._pass(runners, [opts.estimate_reps] * len(runners), stream)
        est_us = [min(samples) if samples else 0.0 for samples in est]
        reps = [
            int(max(opts.min_reps, min(opts.max_reps, opts.budget_us // max(e + 20.0, 1.0)))) if samples else 0
            for samples, e in zip(est, est_us)
        ]
        second = self._pass(runners, reps, stream, est_us)
        out: list[float | None] = []
        for s1, s2 in zip(est, second):
            s = [x for x in (*s1, *s2) if x > 0]
            out.append(min(s) if s else None)
        return out

    def _pass(
        self,
        runners: Sequence[tuple[Choice, Any]],
        reps: Sequence[int],
        stream: Any = None,
        est_us: Sequence[float] | None = None,
    ) -> list[list[float]]:
        """Run each of ``runners`` ``reps`` times in CUDA graphs; the times of its runs (µs).

        A graph holds about ``max_queued_us`` of GPU time (from ``est_us``, each runner's
        estimate, or from the runs timed so far: :func:`graph_part`), and at most two graphs are
        queued: the host waits in Python (:func:`wait_for_gpu`) for the older one before
        launching a third. So an interrupt is handled within about a graph's time, where one
        ``torch.cuda.synchronize()`` after queueing every graph of a problem held the main thread
        in C for as long as they ran (up to minutes for slow fp32 kernels)."""
        import torch

        flush = self._flush
        opts = self.options
        results: list[list[float]] = [[] for _ in runners]
        stream = stream if stream is not None else torch.cuda.Stream()
        idx = [i for i, r in enumerate(reps) if r > 0]
        cost = [float(reps[i]) * est_us[i] for i in idx] if est_us is not None else None
        per_run: float | None = None  # mean GPU µs of one run so far, without estimates
        in_flight: collections.deque[tuple[list[tuple[Any, list[tuple[int, Any, Any]]]], Any]] = collections.deque()
        pos = 0
        while pos < len(idx) or in_flight:
            if pos < len(idx):
                if cost is not None:
                    n = graph_part(cost, pos, opts.max_queued_us, opts.graph_chunk)
                else:  # the next configs at the mean time of the runs timed so far
                    window = idx[pos : pos + opts.graph_chunk]
                    guess = None if per_run is None else [float(reps[i]) * per_run for i in window]
                    n = graph_part(guess, 0, opts.max_queued_us, opts.graph_chunk)
                part = idx[pos : pos + n]
                pos += n
                in_flight.append((self._launch(runners, reps, part, flush, stream), _record_event()))
            if len(in_flight) < 2 and pos < len(idx):
                continue  # one graph runs while the next is captured
            graphs, done = in_flight.popleft()
            wait_for_gpu(done)
            total, runs = 0.0, 0
            for _, evs in graphs:
                for i, start, end in evs:
                    t = start.elapsed_time(end) * 1000.0
                    results[i].append(t)
                    total, runs = total + t, runs + 1
            if runs:
                per_run = total / runs
        torch.cuda.synchronize()
        return results

    def _launch(
        self, runners: Sequence[tuple[Choice, Any]], reps: Sequence[int], part: Sequence[int], flush: Any, stream: Any
    ) -> list[tuple[Any, list[tuple[int, Any, Any]]]]:
        """Capture ``part`` of ``runners`` in one graph and replay it; a part that fails to
        capture is captured config by config, and a config that fails alone is left out (logged)."""
        import torch

        try:
            g = self._capture(runners, reps, part, flush, stream)
            g[0].replay()
            return [g]
        except Exception:
            torch.cuda.synchronize()
        out = []
        for i in part:
            try:
                g = self._capture(runners, reps, [i], flush, stream)
                g[0].replay()
                out.append(g)
            except Exception as exc:
                torch.cuda.synchronize()
                log.warning("sweep: %s failed in graph capture: %s", runners[i][0].key(), exc)
        return out

    @staticmethod
    def _capture(
        runners: Sequence[tuple[Choice, Any]], reps: Sequence[int], part: Sequence[int], flush: Any, stream: Any
    ) -> tuple[Any, list[tuple[int, Any, Any]]]:
        import torch

        g = torch.cuda.CUDAGraph()
        evs: list[tuple[int, Any, Any]] = []
        with torch.cuda.graph(g, stream=stream, capture_error_mode="thread_local"):
            for i in part:
                run = runners[i][1]
                for _ in range(reps[i]):
                    s = torch.cuda.Event(enable_timing=True, external=True)
                    e = torch.cuda.Event(enable_timing=True, external=True)
                    flush.zero_()
                    s.record()
                    run()
                    e.record()
                    evs.append((i, s, e))
        return g, evs


def versions() -> dict[str, str]:
    """torch, triton and GPU of this process (for provenance and reports)."""
    import torch

    out: dict[str, str] = {"torch": str(torch.__version__)}
    try:
        import triton

        out["triton"] = str(triton.__version__)
    except ImportError:
        out["triton"] = ""
    if torch.cuda.is_available():
        out["gpu"] = str(torch.cuda.get_device_name())
        out["cuda"] = str(torch.version.cuda)
    return out
