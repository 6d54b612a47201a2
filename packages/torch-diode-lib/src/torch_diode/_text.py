"""Wording helpers for messages."""

from __future__ import annotations

NO_MATPLOTLIB = "matplotlib is not installed, so no plot was written; pip install 'torch-diode-lib[plot]'"
"""What every plotting caller says when matplotlib is missing (an optional dependency: the ``plot`` extra)."""


def plural(n: int, noun: str, plural_noun: str | None = None) -> str:
    """``n`` (with thousands separators) and ``noun``, in the plural unless ``n`` is 1:
    ``plural(1, "epoch")`` is ``1 epoch``, ``plural(2163, "row")`` ``2,163 rows``
    (``plural_noun``: an irregular plural; the default appends ``s``)."""
    return f"{n:,} {noun if n == 1 else plural_noun or noun + 's'}"


def recorded_number(n: object) -> str:
    """A count read from a results file, with thousands separators; a value not recorded there
    (``?``, None) as it is."""
    return f"{n:,}" if isinstance(n, int) and not isinstance(n, bool) else str(n)


def recorded_count(n: object, noun: str) -> str:
    """:func:`plural` of a count read from a results file; a value not recorded there (``?``, None)
    with the plural noun."""
    return plural(n, noun) if isinstance(n, int) and not isinstance(n, bool) else f"{n} {noun}s"
