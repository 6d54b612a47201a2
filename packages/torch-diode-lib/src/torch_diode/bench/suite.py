"""The problems ``diode bench`` measures: single GEMMs of real layers and awkward shapes, and whole
modules compiled as a user would.

GEMMs of real layers come from :func:`torch_diode.shapes.models.model_entries` (one layer of each
published architecture traced on the meta device, the way ``data/shapesets/real_models.json`` is
built): decoder LLMs at decode (M = batch = 1..64 over a 2048-token KV cache) and prefill token
counts, encoders, vision transformers and the ResNet-50 classifier. ``nn.Linear`` layers are
compiled through ``F.linear`` (as a model calls them), attention products through ``torch.bmm``.
Awkward shapes (primes, non-multiples of 16, tall-skinny, very large K, transposed operands)
are listed by hand.

Modules are a Llama-style decoder block (RMSNorm, q/k/v/o projections with grouped-query
``scaled_dot_product_attention``, SwiGLU MLP), at prefill and at decode over a KV cache, and a
ViT block (LayerNorm, fused qkv, attention, GELU MLP), with the sizes of published models.

Each case has a stable name (a GEMM's is its problem key, e.g. ``mm bfloat16 16x4096x4096
row/col``), which keys its results in the results file, so a rerun resumes where one stopped.
The ``quick`` suite is the first part of ``all``, in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch_diode.records import Problem
from torch_diode.shapes.models import DECODERS, ENCODERS, VIT_TOKENS
from torch_diode.shapes.shapeset import strides_for

#: Every mode, in the order a case measures them (the slow exhaustive search last).
MODES: tuple[str, ...] = ("default", "max-autotune", "diode-top1", "diode-top3", "exhaustive")
#: Modes that install torch-diode's choices handler, and the ``top_k_configs`` each uses.
DIODE_TOP_K: dict[str, int] = {"diode-top1": 1, "diode-top3": 3}
SUITES: tuple[str, ...] = ("quick", "all")


@dataclass(frozen=True)
class GemmCase:
    """One GEMM compiled alone.

    Attributes:
        problem: what Inductor lowers (op, sizes, dtype, strides).
        source: where the shape comes from (model, layer, batch and tokens), or ``awkward ...``.
        via_linear: compile ``F.linear(x, weight[, bias])`` (an ``nn.Linear``) instead of the op.
    """

    problem: Problem
    source: str
    tags: tuple[str, ...] = ()
    via_linear: bool = False

    kind = "gemm"

    @property
    def name(self) -> str:
        return self.problem.key()

    def describe(self) -> str:
        return f"{self.name} ({self.source})"

    def build(self, device: Any) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """The eager function and its inputs on ``device`` (``meta`` builds nothing real)."""
        from torch_diode.collect.inductor import gemm_function, make_inputs

        return gemm_function(self.problem.op, via_linear=self.via_linear), make_inputs(
            self.problem, device, via_linear=self.via_linear
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "source": self.source,
            "tags": list(self.tags),
            "via_linear": self.via_linear,
            "problem": self.problem.to_dict(),
        }


@dataclass(frozen=True)
class ModuleCase:
    """A whole module compiled as a user would (``torch.compile(module)``), in inference.

    Attributes:
        name: stable name, e.g. ``module Llama-3.2-1B block prefill B=1 T=512``.
        arch: ``decoder`` or ``vit``.
        config: the published model whose sizes it uses (a key of ``DECODERS`` or ``ENCODERS``).
        batch, tokens: input sequences and new tokens per sequence.
        past: decoder only: KV-cache length (decode when > 0).
    """

    name: str
    arch: str
    config: str
    batch: int
    tokens: int
    past: int = 0
    dtype: str = "bfloat16"
    tags: tuple[str, ...] = field(default=())

    kind = "module"

    def describe(self) -> str:
        return self.name

    def build(self, device: Any) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """The module (eval mode, ``dtype``) and its inputs on ``device``."""
        import torch

        dt = getattr(torch, self.dtype)
        gen = None if str(device) == "meta" else torch.Generator(device=device).manual_seed(0)

        def rand(*shape: int) -> Any:
            if gen is None:
                return torch.empty(*shape, dtype=dt, device=device)
            return torch.randn(*shape, generator=gen, device=device, dtype=torch.float32).to(dt)

        if self.arch == "decoder":
            cfg = DECODERS[self.config]
            with torch.device(device):
                module = _decoder_block(cfg.hidden, cfg.intermediate, cfg.heads, cfg.kv_heads, cfg.hd)
            module = module.to(dt).eval()
            args: tuple[Any, ...] = (rand(self.batch, self.tokens, cfg.hidden),)
            if self.past:
                cache = (self.batch, cfg.kv_heads, self.past, cfg.hd)
                args += (rand(*cache), rand(*cache))
            return module, args
        if self.arch == "vit":
            enc = ENCODERS[self.config]
            with torch.device(device):
                module = _vit_block(enc.hidden, enc.intermediate, enc.heads)
            return module.to(dt).eval(), (rand(self.batch, self.tokens, enc.hidden),)
        raise ValueError(f"arch: unknown module architecture {self.arch!r}; known: decoder, vit")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "arch": self.arch,
            "config": self.config,
            "batch": self.batch,
            "tokens": self.tokens,
            "past": self.past,
            "dtype": self.dtype,
            "tags": list(self.tags),
        }


Case = GemmCase | ModuleCase


# -- modules ------------------------------------------------------------------------------------


def _decoder_block(hidden: int, intermediate: int, heads: int, kv_heads: int, head_dim: int) -> Any:
    """A Llama-style decoder block: ``forward(x [B, T, D], k_cache=None, v_cache=None [B, KV, S, hd])``.

    Rotary embeddings are left out: they are pointwise and change no GEMM.
    """
    import torch
    import torch.nn.functional as F
    from torch import nn

    class DecoderBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn_norm = nn.RMSNorm(hidden)
            self.q_proj = nn.Linear(hidden, heads * head_dim, bias=False)
            self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
            self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False)
            self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)
            self.mlp_norm = nn.RMSNorm(hidden)
            self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
            self.up_proj = nn.Linear(hidden, intermediate, bias=False)
            self.down_proj = nn.Linear(intermediate, hidden, bias=False)

        def forward(self, x: Any, k_cache: Any = None, v_cache: Any = None) -> Any:
            b, t, _ = x.shape
            h = self.attn_norm(x)
            q = self.q_proj(h).view(b, t, heads, head_dim).transpose(1, 2)  # [B, H, T, hd]
            k = self.k_proj(h).view(b, t, kv_heads, head_dim).transpose(1, 2)  # [B, KV, T, hd]
            v = self.v_proj(h).view(b, t, kv_heads, head_dim).transpose(1, 2)
            if k_cache is not None:
                k = torch.cat([k_cache, k], dim=2)  # [B, KV, S + T, hd]
                v = torch.cat([v_cache, v], dim=2)
            if kv_heads != heads:
                k = k.repeat_interleave(heads // kv_heads, dim=1)  # [B, H, S + T, hd]
                v = v.repeat_interleave(heads // kv_heads, dim=1)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=k_cache is None)  # [B, H, T, hd]
            x = x + self.o_proj(o.transpose(1, 2).reshape(b, t, heads * head_dim))
            h = self.mlp_norm(x)
            return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))

    return DecoderBlock()


def _vit_block(hidden: int, intermediate: int, heads: int) -> Any:
    """A ViT encoder block (pre-norm, fused qkv with bias, GELU MLP): ``forward(x [B, T, D])``."""
    import torch.nn.functional as F
    from torch import nn

    class VitBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm1 = nn.LayerNorm(hidden)
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.proj = nn.Linear(hidden, hidden)
            self.norm2 = nn.LayerNorm(hidden)
            self.fc1 = nn.Linear(hidden, intermediate)
            self.fc2 = nn.Linear(intermediate, hidden)

        def forward(self, x: Any) -> Any:
            b, t, d = x.shape
            qkv = self.qkv(self.norm1(x)).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)  # [3, B, H, T, hd]
            o = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])  # [B, H, T, hd]
            x = x + self.proj(o.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))

    return VitBlock()


QUICK_MODULES: tuple[ModuleCase, ...] = (
    ModuleCase("module Llama-3.2-1B block prefill B=1 T=512", "decoder", "Llama-3.2-1B", 1, 512, tags=("llm",)),
    ModuleCase("module ViT-B/16 block B=8", "vit", "ViT-B/16", 8, VIT_TOKENS["ViT-B/16"], tags=("vision",)),
)
MORE_MODULES: tuple[ModuleCase, ...] = (
    ModuleCase(
        "module Llama-3.1-8B block decode B=16 past=2047", "decoder", "Llama-3.1-8B", 16, 1, past=2047, tags=("llm",)
    ),
    ModuleCase("module Llama-3.1-8B block prefill B=1 T=2048", "decoder", "Llama-3.1-8B", 1, 2048, tags=("llm",)),
    ModuleCase(
        "module ViT-L/14 block B=32", "vit", "ViT-L/14", 32, VIT_TOKENS["ViT-L/14"], dtype="float16", tags=("vision",)
    ),
)


# -- GEMMs --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Run:
    """One traced forward of a published model: ``model_entries(model, batch, tokens, past_len)``."""

    model: str
    batch: int
    tokens: int = 0
    past: int = 0
    dtype: str = "bfloat16"


def _run_cases(run: _Run) -> list[GemmCase]:
    from torch_diode.shapes.models import model_entries

    out = []
    for entry in model_entries(run.model, batch=run.batch, tokens=run.tokens, past_len=run.past, dtype=run.dtype):
        problem = entry.problems()[0]
        # Every mm/addmm of a traced model comes from an nn.Linear (x @ W.T): compile it as one.
        linear = problem.op in ("mm", "addmm") and problem.layout_b == "col"
        source = entry.source.replace("ResNet-50 0 ", "ResNet-50 fc ")  # the classifier is Sequential's layer 0
        out.append(GemmCase(problem, source, tuple(entry.tags), via_linear=linear))
    return out


def _awkward(
    op: str, m: int, n: int, k: int, dtype: str, tag: str, *, batch: int = 1, layout: str = "row/row"
) -> GemmCase:
    """An awkward shape, dense in ``layout`` (:func:`torch_diode.shapes.shapeset.strides_for`; the
    bias, if any, broadcast from a vector)."""
    stride_a, stride_b = strides_for(op, m, n, k, layout)
    problem = Problem(op=op, m=m, n=n, k=k, batch=batch, dtype=dtype, stride_a=stride_a, stride_b=stride_b)
    return GemmCase(problem, f"awkward {tag}", ("awkward", tag))


#: (model run, layers to keep) of the quick suite: ``layers`` match the entry's source text.
_QUICK_PICKS: tuple[tuple[_Run, tuple[str, ...]], ...] = (
    (_Run("Llama-3.1-8B", 1, 1, 2047), ("self_attn.q_proj",)),
    (_Run("Llama-3.1-8B", 16, 1, 2047), ("mlp.gate_proj",)),
    (_Run("Llama-3.1-8B", 64, 1, 2047), ("mlp.down_proj",)),
    (_Run("Llama-3.1-8B", 1, 2048), ("self_attn.q_proj", "mlp.gate_proj")),
    (_Run("Qwen2.5-7B", 1, 2048), ("self_attn.k_proj",)),
    (_Run("BERT-base", 8, 128, dtype="float16"), ("intermediate",)),
    (_Run("ViT-B/16", 8, dtype="bfloat16"), ("attention bmm",)),
    (_Run("ResNet-50", 32, dtype="float32"), ("ResNet-50",)),
)

_QUICK_AWKWARD: tuple[GemmCase, ...] = (
    _awkward("mm", 1000, 1000, 1000, "float16", "unaligned"),
    _awkward("mm", 4093, 1021, 4093, "bfloat16", "prime", layout="row/col"),
    _awkward("mm", 65536, 8, 64, "float32", "tall-skinny"),
)

#: Model runs of the full suite (every GEMM of one layer, plus the LM head or classifier).
_ALL_RUNS: tuple[_Run, ...] = (
    _Run("Llama-3.1-8B", 1, 1, 2047),
    _Run("Llama-3.1-8B", 16, 1, 2047),
    _Run("Llama-3.1-8B", 64, 1, 2047),
    _Run("Llama-3.1-8B", 1, 2048),
    _Run("Llama-3.2-1B", 1, 512),
    _Run("Qwen2.5-7B", 4, 1, 2047),
    _Run("Llama-3.1-70B", 32, 1, 2047),
    _Run("BERT-base", 8, 128, dtype="float16"),
    _Run("ViT-B/16", 8, dtype="bfloat16"),
    _Run("ViT-L/14", 64, dtype="float16"),
    _Run("ResNet-50", 32, dtype="float32"),
    _Run("ResNet-50", 256, dtype="float16"),
)

_MORE_AWKWARD: tuple[GemmCase, ...] = (
    _awkward("mm", 127, 255, 383, "bfloat16", "prime"),
    _awkward("mm", 8, 16384, 256, "float16", "tall-skinny", layout="col/row"),
    _awkward("mm", 1024, 1024, 65536, "bfloat16", "large-k"),
    _awkward("addmm", 200, 40, 1500, "float16", "unaligned", layout="col/row"),
    _awkward("bmm", 100, 300, 520, "float16", "unaligned", batch=16, layout="row/col"),
    _awkward("baddbmm", 251, 8191, 2039, "float16", "prime", batch=4, layout="col/row"),
)


def _dedup(cases: Sequence[Case]) -> list[Case]:
    seen: dict[str, Case] = {}
    for c in cases:
        seen.setdefault(c.name, c)
    return list(seen.values())


def quick_gemms() -> list[GemmCase]:
    """The GEMMs of the quick suite (12: real layers first, then awkward shapes).

    Raises:
        LookupError: a pick matches no traced layer (the suite definition is wrong).
    """
    out: list[GemmCase] = []
    for run, layers in _QUICK_PICKS:
        cases = _run_cases(run)
        for layer in layers:
            match = [c for c in cases if layer in c.source]
            if not match:
                raise LookupError(f"no GEMM of {run} matches {layer!r}: {[c.source for c in cases]}")
            out.append(match[0])
    out.extend(_QUICK_AWKWARD)
    return [c for c in _dedup(out) if isinstance(c, GemmCase)]


def suite(which: str = "quick") -> list[Case]:
    """The cases of a suite, in measuring order: quick GEMMs, quick modules, then the rest.

    Raises:
        ValueError: ``which`` is not one of :data:`SUITES`.
    """
    if which not in SUITES:
        raise ValueError(f"problems: unknown suite {which!r}; use one of {', '.join(SUITES)}")
    cases: list[Case] = [*quick_gemms(), *QUICK_MODULES]
    if which == "all":
        for run in _ALL_RUNS:
            cases.extend(_run_cases(run))
        cases.extend(_MORE_AWKWARD)
        cases.extend(MORE_MODULES)
    return _dedup(cases)


def exhaustive_names(cases: Sequence[Case], n: int) -> set[str]:
    """The cases measured with the EXHAUSTIVE search: the first ``n`` GEMMs in suite order (whole
    modules never: one takes many times a GEMM's hour-scale search)."""
    gemms = [c.name for c in cases if isinstance(c, GemmCase)]
    return set(gemms[: max(n, 0)])


def module_gemms(case: ModuleCase) -> list[Problem]:
    """The GEMMs Inductor lowers in one forward of a module case: its projections (``mm``/``addmm``
    of the ``nn.Linear`` layers), traced on the meta device. Attention is
    ``scaled_dot_product_attention``, a fused kernel on a GPU (not a GEMM template), so the math
    path's ``bmm`` that the meta trace shows is left out."""
    from torch_diode.shapes.extract import extract_gemms

    module, args = case.build("meta")
    return [call.problem for call in extract_gemms(module, *args) if call.problem.op in ("mm", "addmm")]
