"""The committed shape set ``data/shapesets/real_models.json``: real architectures plus awkward shapes.

``build_real_models()`` regenerates it exactly (no randomness outside a fixed seed), via
``diode shapes --real-models --output data/shapesets/real_models.json``:

* decoder LLMs (:data:`~torch_diode.shapes.models.DECODERS`, 1B to 70B): decode with M = batch =
  1..64 over a 2048-token KV cache, and prefill of 128..8192 tokens;
* encoders (BERT-base/large at 128 and 512 tokens), vision transformers (ViT-B/16, ViT-L/14 at
  224x224), the ResNet-50 classifier, and the Stable Diffusion 1.5 UNet transformer blocks;
* awkward shapes: primes, sizes that are not multiples of 16, tall-skinny and very large K.
"""

from __future__ import annotations

import itertools

from torch_diode.shapes.models import DECODERS, ENCODERS, model_entries
from torch_diode.shapes.shapeset import ShapeEntry, merge_entries

DECODE_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
DECODE_PAST = 2047  # attention over a 2048-token context
PREFILL: tuple[tuple[int, int], ...] = ((1, 128), (1, 512), (1, 2048), (1, 8192), (4, 1024))
ENCODER_RUNS: tuple[tuple[int, int], ...] = ((1, 128), (8, 128), (32, 128), (1, 512), (8, 512), (32, 512))
VISION_BATCHES: tuple[int, ...] = (1, 8, 64)
RESNET_BATCHES: tuple[int, ...] = (1, 8, 32, 128, 256)
SD_BATCHES: tuple[int, ...] = (1, 2)

LLM_DTYPES: tuple[str, ...] = ("bfloat16", "float16")
ALL_DTYPES: tuple[str, ...] = ("float16", "bfloat16", "float32")

#: Largest operand (elements, batch included) an awkward shape may have: 2**28 is 512 MiB in fp16.
MAX_OPERAND_ELEMENTS = 2**28


def real_model_entries() -> list[ShapeEntry]:
    """Entries of every model at the batch/token counts above (merged by shape)."""
    out: list[ShapeEntry] = []
    for name in DECODERS:
        for b in DECODE_BATCHES:
            out += model_entries(name, batch=b, tokens=1, past_len=DECODE_PAST, dtypes=LLM_DTYPES)
        for b, t in PREFILL:
            out += model_entries(name, batch=b, tokens=t, dtypes=LLM_DTYPES)
    for name in ENCODERS:
        if name.startswith("ViT"):
            for b in VISION_BATCHES:
                out += model_entries(name, batch=b, tokens=0, dtypes=ALL_DTYPES)
        else:
            for b, t in ENCODER_RUNS:
                out += model_entries(name, batch=b, tokens=t, dtypes=ALL_DTYPES)
    for b in RESNET_BATCHES:
        out += model_entries("ResNet-50", batch=b, dtypes=ALL_DTYPES)
    for b in SD_BATCHES:
        out += model_entries("SD-1.5-UNet", batch=b, dtypes=("float16", "bfloat16"))
    return merge_entries(out)


def _fits(m: int, n: int, k: int, batch: int) -> bool:
    return max(m * k, k * n, m * n) * batch <= MAX_OPERAND_ELEMENTS


def awkward_entries() -> list[ShapeEntry]:
    """Shapes that stress kernels: primes, non-multiples of 16, tall-skinny, very large K.

    Enumerated deterministically (fixed lists and strides through them), across mm, addmm and
    bmm, baddbmm, row/row, row/col and col/row layouts, in all three dtypes.
    """
    primes = (7, 17, 61, 127, 251, 509, 1021, 2039, 4093, 8191)
    odd = (24, 40, 100, 200, 300, 520, 1000, 1500, 2500, 3000, 5000, 6150)
    layouts = ("row/row", "row/col", "col/row")
    ops = ("mm", "addmm", "bmm", "baddbmm")
    out: list[ShapeEntry] = []

    def add(op: str, m: int, n: int, k: int, tag: str, i: int) -> None:
        batch = (2, 4, 8, 16)[(i // 4) % 4] if op in ("bmm", "baddbmm") else 1
        if not _fits(m, n, k, batch):
            return
        out.append(
            ShapeEntry(
                op=op,
                m=m,
                n=n,
                k=k,
                batch=batch,
                dtypes=ALL_DTYPES,
                layout=layouts[i % 3],
                source=f"awkward {tag}",
                tags=("awkward", tag),
            )
        )

    # Primes: every 7th triple of the 1000 (m, n, k) combinations, a spread of small and large.
    for i, (m, n, k) in enumerate(itertools.islice(itertools.product(primes, repeat=3), 0, None, 7)):
        add(ops[i % 4], m, n, k, "prime", i)
    # Not multiples of 16 (but of 4 or 8): every 11th triple.
    for i, (m, n, k) in enumerate(itertools.islice(itertools.product(odd, repeat=3), 0, None, 11)):
        add(ops[i % 4], m, n, k, "unaligned", i)
    # Tall-skinny, both ways round.
    for i, (big, small, k) in enumerate(itertools.product((16384, 65536, 262144), (8, 16, 32, 64), (64, 256, 1024))):
        add(ops[i % 2], big, small, k, "tall-skinny", i)
        add(ops[(i + 1) % 2], small, big, k, "tall-skinny", i + 1)
    # Very large K (decompose_k territory): K >= 32 * max(M, N).
    for i, (k, mn) in enumerate(itertools.product((32768, 65536, 131072, 262144), (16, 64, 128, 512, 1024))):
        if k >= 32 * mn:
            add(ops[i % 4], mn, mn if i % 2 else max(mn // 2, 8), k, "large-k", i)
    return merge_entries(out)


def build_real_models() -> list[ShapeEntry]:
    """The entries of ``data/shapesets/real_models.json``: real models, then awkward shapes."""
    return merge_entries(real_model_entries() + awkward_entries())


DESCRIPTION = (
    "GEMMs of real open architectures traced on the meta device from their published configs "
    "(torch_diode.shapes.models: decoder LLMs 1B-70B at decode M=1..64 over a 2048-token cache and "
    "prefill 128..8192 tokens; BERT-base/large; ViT-B/16, ViT-L/14; ResNet-50 head; SD-1.5 UNet "
    "transformer blocks) plus awkward shapes (primes, non-multiples of 16, tall-skinny, very large K). "
    "Regenerate with `diode shapes --real-models --output data/shapesets/real_models.json`. "
    "split: torch_diode.shapes.shapeset.split_of (sha256 of op:m:n:k:batch:layout, 20% val)."
)
