"""The months a text names with their year ("in May 2023", "8 May, 2023", "2023-05-12", "2023年5月").

A question that says when ("What did Caroline sign up for in August 2023?") is answered by the turn stored with
a date in that month (its `date` keyword metadata, docs/search.md); the hybrid search lifts such turns
(memctl.search.fusion.add_date_boost). A month name alone is not read: "May" is also a verb, and a month with
no year names one month of every year.
"""

from __future__ import annotations

import calendar
import re

# English month names and their three-letter abbreviations ("Sept" too), lower-case -> 1..12.
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_MONTHS["sept"] = 9
_NAME = "|".join(sorted(_MONTHS, key=len, reverse=True))
# "May 2023", "May, 2023", "May 8, 2023", "May 8th 2023" (and so "8 May 2023", "8 May, 2023").
_WRITTEN = re.compile(rf"\b({_NAME})\.?(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?,?\s+(\d{{4}})\b", re.IGNORECASE)
_ISO = re.compile(r"\b(\d{4})-(\d{1,2})(?:-\d{1,2})?\b")
_CJK = re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月")
_MAX_TEXT = 2000  # a month is looked for in a question or a metadata value, not in a document


def months_named(text: str) -> set[tuple[int, int]]:
    """The (year, month) pairs `text` names, each with its year."""
    text = text[:_MAX_TEXT]
    found = {(int(year), _MONTHS[name.lower()]) for name, year in _WRITTEN.findall(text)}
    found |= {(int(year), int(month)) for year, month in _ISO.findall(text) + _CJK.findall(text)}
    return {(year, month) for year, month in found if 1 <= month <= 12}
