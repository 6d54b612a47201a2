"""Wording helpers for messages."""

from __future__ import annotations


def plural(n: int, noun: str, plural_noun: str | None = None) -> str:
    """``n`` (with thousands separators) and ``noun``, in the plural unless ``n`` is 1:
    ``plural(1, "epoch")`` is ``1 epoch``, ``plural(2163, "row")`` ``2,163 rows``
    (``plural_noun``: an irregular plural; the default appends ``s``)."""
    return f"{n:,} {noun if n == 1 else plural_noun or noun + 's'}"
