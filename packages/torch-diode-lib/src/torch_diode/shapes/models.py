"""Open model architectures in plain PyTorch, built from their published configs, for GEMM extraction.

Only what issues GEMMs is modelled faithfully: every ``nn.Linear`` with its real in/out sizes and
bias, and attention written as eager ``matmul`` (the math path, whose score and value products
are ``bmm``). Norms, activations, rotary embeddings and convolutions are plain or omitted: they do
not change a GEMM shape. One transformer layer is traced (all layers of a model are identical);
``count`` in the resulting entries is per layer, except the LM head / classifier (once per model).
Models are built on the ``meta`` device, so a 70B config costs nothing.

Config numbers are the public ``config.json`` values of each checkpoint (hidden size,
intermediate size, heads, KV heads, head dim, vocabulary, qkv bias).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch_diode.shapes.extract import calls_to_entries, extract_gemms
from torch_diode.shapes.shapeset import ShapeEntry


@dataclass(frozen=True)
class DecoderConfig:
    """A Llama-style decoder (Llama, Mistral, Qwen2, Phi-3)."""

    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    head_dim: int = 0
    qkv_bias: bool = False
    fused_qkv: bool = False  # Phi-3: one qkv_proj and one gate_up_proj

    @property
    def hd(self) -> int:
        return self.head_dim or self.hidden // self.heads


@dataclass(frozen=True)
class EncoderConfig:
    """A BERT/ViT-style encoder layer (MLP = Linear-GELU-Linear, qkv with bias)."""

    hidden: int
    intermediate: int
    heads: int
    classes: int = 0  # classifier head size (0: none)


DECODERS: dict[str, DecoderConfig] = {
    "Llama-3.2-1B": DecoderConfig(hidden=2048, intermediate=8192, heads=32, kv_heads=8, vocab=128256, head_dim=64),
    "Llama-3.2-3B": DecoderConfig(hidden=3072, intermediate=8192, heads=24, kv_heads=8, vocab=128256, head_dim=128),
    "Llama-3.1-8B": DecoderConfig(hidden=4096, intermediate=14336, heads=32, kv_heads=8, vocab=128256),
    "Llama-3.1-70B": DecoderConfig(hidden=8192, intermediate=28672, heads=64, kv_heads=8, vocab=128256),
    "Mistral-7B-v0.1": DecoderConfig(hidden=4096, intermediate=14336, heads=32, kv_heads=8, vocab=32000),
    "Qwen2.5-1.5B": DecoderConfig(hidden=1536, intermediate=8960, heads=12, kv_heads=2, vocab=151936, qkv_bias=True),
    "Qwen2.5-7B": DecoderConfig(hidden=3584, intermediate=18944, heads=28, kv_heads=4, vocab=152064, qkv_bias=True),
    "Phi-3-mini-4k": DecoderConfig(hidden=3072, intermediate=8192, heads=32, kv_heads=32, vocab=32064, fused_qkv=True),
}

ENCODERS: dict[str, EncoderConfig] = {
    "BERT-base": EncoderConfig(hidden=768, intermediate=3072, heads=12),
    "BERT-large": EncoderConfig(hidden=1024, intermediate=4096, heads=16),
    "ViT-B/16": EncoderConfig(hidden=768, intermediate=3072, heads=12, classes=1000),
    "ViT-L/14": EncoderConfig(hidden=1024, intermediate=4096, heads=16, classes=1000),
}

#: Tokens per image of the ViTs at 224x224: (224/patch)^2 patches plus the class token.
VIT_TOKENS: dict[str, int] = {"ViT-B/16": 197, "ViT-L/14": 257}


def _attention(q: Any, k: Any, v: Any, heads: int, kv_heads: int, hd: int) -> Any:
    """Eager attention: q [B, T, H*hd], k/v [B, S, KV*hd] -> [B, T, H*hd] (GQA by repeating KV)."""
    b, t, _ = q.shape
    s = k.shape[1]
    q = q.view(b, t, heads, hd).transpose(1, 2)  # [B, H, T, hd]
    k = k.view(b, s, kv_heads, hd).transpose(1, 2)  # [B, KV, S, hd]
    v = v.view(b, s, kv_heads, hd).transpose(1, 2)
    if kv_heads != heads:
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
    scores = (q @ k.transpose(-2, -1)) * hd**-0.5  # [B, H, T, S]
    out = scores.softmax(-1) @ v  # [B, H, T, hd]
    return out.transpose(1, 2).reshape(b, t, heads * hd)


def build_decoder_layer(cfg: DecoderConfig) -> Any:
    """One decoder layer plus the LM head, as an ``nn.Module`` taking ``(x [B, T, D], past_len)``."""
    import torch
    from torch import nn

    class DecoderLayer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            d, hd, kvd = cfg.hidden, cfg.hd, cfg.kv_heads * cfg.hd
            attn = nn.ModuleDict()
            if cfg.fused_qkv:
                attn["qkv_proj"] = nn.Linear(d, cfg.heads * hd + 2 * kvd, bias=cfg.qkv_bias)
            else:
                attn["q_proj"] = nn.Linear(d, cfg.heads * hd, bias=cfg.qkv_bias)
                attn["k_proj"] = nn.Linear(d, kvd, bias=cfg.qkv_bias)
                attn["v_proj"] = nn.Linear(d, kvd, bias=cfg.qkv_bias)
            attn["o_proj"] = nn.Linear(cfg.heads * hd, d, bias=False)
            self.self_attn = attn
            mlp = nn.ModuleDict()
            if cfg.fused_qkv:
                mlp["gate_up_proj"] = nn.Linear(d, 2 * cfg.intermediate, bias=False)
            else:
                mlp["gate_proj"] = nn.Linear(d, cfg.intermediate, bias=False)
                mlp["up_proj"] = nn.Linear(d, cfg.intermediate, bias=False)
            mlp["down_proj"] = nn.Linear(cfg.intermediate, d, bias=False)
            self.mlp = mlp
            self.lm_head = nn.Linear(d, cfg.vocab, bias=False)

        def forward(self, x: Any, past_len: int = 0) -> Any:
            a = self.self_attn
            hd, kvd = cfg.hd, cfg.kv_heads * cfg.hd
            if cfg.fused_qkv:
                q, k, v = a["qkv_proj"](x).split([cfg.heads * hd, kvd, kvd], dim=-1)
            else:
                q, k, v = a["q_proj"](x), a["k_proj"](x), a["v_proj"](x)
            if past_len:  # decode: attend over a KV cache of past_len tokens plus the new ones
                b = x.shape[0]
                k = torch.cat([x.new_empty(b, past_len, kvd), k], dim=1)
                v = torch.cat([x.new_empty(b, past_len, kvd), v], dim=1)
            h = x + a["o_proj"](_attention(q, k, v, cfg.heads, cfg.kv_heads, hd))
            m = self.mlp
            if cfg.fused_qkv:
                gate, up = m["gate_up_proj"](h).chunk(2, dim=-1)
            else:
                gate, up = m["gate_proj"](h), m["up_proj"](h)
            h = h + m["down_proj"](torch.nn.functional.silu(gate) * up)
            return self.lm_head(h)

    return DecoderLayer()


def build_encoder_layer(cfg: EncoderConfig) -> Any:
    """One BERT/ViT encoder layer (plus the classifier head when ``cfg.classes``): ``x [B, T, D]``."""
    import torch
    from torch import nn

    class EncoderLayer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            d = cfg.hidden
            self.attention = nn.ModuleDict(
                {"query": nn.Linear(d, d), "key": nn.Linear(d, d), "value": nn.Linear(d, d), "output": nn.Linear(d, d)}
            )
            self.intermediate = nn.Linear(d, cfg.intermediate)
            self.output = nn.Linear(cfg.intermediate, d)
            self.classifier = nn.Linear(d, cfg.classes) if cfg.classes else None

        def forward(self, x: Any) -> Any:
            at = self.attention
            hd = cfg.hidden // cfg.heads
            h = x + at["output"](_attention(at["query"](x), at["key"](x), at["value"](x), cfg.heads, cfg.heads, hd))
            h = h + self.output(torch.nn.functional.gelu(self.intermediate(h)))
            if self.classifier is not None:
                return self.classifier(h[:, 0])  # the class token
            return h

    return EncoderLayer()


def build_resnet50_head(classes: int = 1000) -> Any:
    """ResNet-50's classifier: global-average-pooled 2048 features -> ``fc``. Input ``[B, 2048]``."""
    from torch import nn

    return nn.Sequential(nn.Linear(2048, classes))


def build_sd_transformer_block(channels: int, context_dim: int = 768, heads: int = 8) -> Any:
    """A Stable Diffusion (v1.x) UNet ``BasicTransformerBlock`` with its ``proj_in``/``proj_out``:
    self-attention, cross-attention over the text encoder (77 tokens of ``context_dim``), and the
    GEGLU feed-forward (``C -> 8C``, ``4C -> C``). Input ``(x [B, HW, C], context [B, 77, ctx])``."""
    import torch
    from torch import nn

    c = channels

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj_in = nn.Linear(c, c)
            self.attn1 = nn.ModuleDict(
                {
                    "to_q": nn.Linear(c, c, bias=False),
                    "to_k": nn.Linear(c, c, bias=False),
                    "to_v": nn.Linear(c, c, bias=False),
                    "to_out": nn.Linear(c, c),
                }
            )
            self.attn2 = nn.ModuleDict(
                {
                    "to_q": nn.Linear(c, c, bias=False),
                    "to_k": nn.Linear(context_dim, c, bias=False),
                    "to_v": nn.Linear(context_dim, c, bias=False),
                    "to_out": nn.Linear(c, c),
                }
            )
            self.ff = nn.ModuleDict({"proj": nn.Linear(c, 8 * c), "out": nn.Linear(4 * c, c)})
            self.proj_out = nn.Linear(c, c)

        def forward(self, x: Any, context: Any) -> Any:
            hd = c // heads
            x = self.proj_in(x)
            a1 = self.attn1
            x = x + a1["to_out"](_attention(a1["to_q"](x), a1["to_k"](x), a1["to_v"](x), heads, heads, hd))
            a2 = self.attn2
            x = x + a2["to_out"](_attention(a2["to_q"](x), a2["to_k"](context), a2["to_v"](context), heads, heads, hd))
            h, gate = self.ff["proj"](x).chunk(2, dim=-1)
            x = x + self.ff["out"](h * torch.nn.functional.gelu(gate))
            return self.proj_out(x)

    return Block()


#: Every model name ``model_entries`` understands.
MODEL_NAMES: tuple[str, ...] = (*DECODERS, *ENCODERS, "ResNet-50", "SD-1.5-UNet")


def model_entries(
    name: str,
    *,
    batch: int = 1,
    tokens: int = 128,
    past_len: int = 0,
    dtype: str = "bfloat16",
    dtypes: Sequence[str] | None = None,
    tags: Sequence[str] = (),
) -> list[ShapeEntry]:
    """The GEMM shape-set entries of one forward of model ``name``.

    Args:
        name: one of :data:`MODEL_NAMES`.
        batch: sequences (or images) per forward.
        tokens: new tokens per sequence (decoders: 1 for decode; encoders: sequence length;
            ViTs use their patch count and SD its latent tokens when ``tokens`` is 0).
        past_len: decoders only: KV-cache length (decode attends over ``past_len + tokens``).
        dtype: the dtype traced (it does not change shapes); ``dtypes`` is what the entries list.
        tags: extra tags for every entry.

    Raises:
        ValueError: unknown model name (the message lists the known ones).
    """
    import torch

    tdt = getattr(torch, dtype)
    meta = torch.device("meta")
    note = f"B={batch} T={tokens}" + (f" past={past_len}" if past_len else "")
    if name in DECODERS:
        cfg = DECODERS[name]
        with meta:
            mod = build_decoder_layer(cfg).to(tdt)
        calls = extract_gemms(mod, torch.empty(batch, tokens, cfg.hidden, dtype=tdt, device=meta), past_len)
        family = ["llm", "decode" if past_len else "prefill"]
    elif name in ENCODERS:
        cfg_e = ENCODERS[name]
        t = tokens or VIT_TOKENS.get(name, 128)
        note = f"B={batch} T={t}"
        with meta:
            mod = build_encoder_layer(cfg_e).to(tdt)
        calls = extract_gemms(mod, torch.empty(batch, t, cfg_e.hidden, dtype=tdt, device=meta))
        family = ["vision" if name.startswith("ViT") else "encoder"]
    elif name == "ResNet-50":
        with meta:
            mod = build_resnet50_head().to(tdt)
        calls = extract_gemms(mod, torch.empty(batch, 2048, dtype=tdt, device=meta))
        note = f"B={batch}"
        family = ["vision", "cnn"]
    elif name == "SD-1.5-UNet":
        calls = []
        # (channels, latent side) of the transformer blocks at 512x512 (64x64 latents).
        for channels, side in ((320, 64), (640, 32), (1280, 16), (1280, 8)):
            with meta:
                mod = build_sd_transformer_block(channels).to(tdt)
            x = torch.empty(batch, side * side, channels, dtype=tdt, device=meta)
            ctx = torch.empty(batch, 77, 768, dtype=tdt, device=meta)
            calls += extract_gemms(mod, x, ctx)
        note = f"B={batch} 512x512"
        family = ["diffusion"]
    else:
        raise ValueError(f"model: unknown model {name!r}; known: {', '.join(MODEL_NAMES)}")
    return calls_to_entries(calls, model=name, tags=[*family, *tags], dtypes=dtypes or (dtype,), note=note)
