"""The suffix-stripping stemmers (English), side by side.

Three variants, each read by a fitted model or a measured threshold, so they stay as they are:
`relevance` (search's word overlap feature), `grounding` (memorize's grounding and keyword evidence:
also drops a possessive and keeps at most six letters) and `plural` (importance's word overlap:
only plural and third-person -s).
"""

from __future__ import annotations

import re
from functools import lru_cache

_RELEVANCE_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "ed", "es", "s", "ly")
_GROUNDING_SUFFIXES = ("ingly", "edly", "ings", "ing", "ied", "ies", "ed", "es", "ly", "s")


@lru_cache(maxsize=65536)
def relevance(word: str) -> str:
    """The first listed suffix off a lower-case word, when at least three letters stay."""
    for suffix in _RELEVANCE_SUFFIXES:
        if len(word) - len(suffix) >= 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def grounding(word: str) -> str:
    """Lower-cased, edge punctuation and a possessive off, the first listed suffix off, six letters at most."""
    w = word.lower().strip("'’.-/:")
    w = re.sub(r"['’]s$", "", w)
    for suffix in _GROUNDING_SUFFIXES:
        if len(w) - len(suffix) >= 3 and w.endswith(suffix):
            w = w[: -len(suffix)]
            break
    return w[:6]


def plural(word: str) -> str:
    """Plural and third-person -s off, so "answers" meets "answer" and "prefers" meets "prefer"."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word
