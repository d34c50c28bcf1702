"""Who said a chat line: "Caroline: I went to the support group" or "王芳：我昨天去了" names its speaker.

A chat saved one turn per memory with the speaker written into the text and no metadata loses the speaker to
the search: the name is in most turns, so it leaves the keyword and vector queries, and only a `speaker`
value brings that person's turns back (memctl.search.fusion.with_named, the `metadata` evidence). `add`
records the name as the memory's `speaker` when the caller gives none (config `speaker_from_text`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# One to three capitalised words ("Caroline", "Mary Ann", "O'Brien"; not "TODO" or "NB"), a colon, a space
# and the line; or two to four Han characters, a colon (either width) and the line.
_WORD = r"[A-ZÀ-Þ][A-Za-zÀ-ÿ'’-]*[a-zß-ÿ]"
_LATIN = rf"{_WORD}(?: {_WORD}){{0,2}}(?=:\s+\S)"
_HAN = r"[\u4e00-\u9fff]{2,4}(?=\s*[:：]\s*\S)"
_LINE = re.compile(rf"^\s*({_LATIN}|{_HAN})")
SPEAKER_KEY = "speaker"


def speaker_of(text: str) -> str | None:
    """The name a chat line starts with, or None."""
    match = _LINE.match(text)
    return match.group(1) if match else None


def with_speaker(text: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """`metadata` with the line's speaker added when it names none."""
    name = None if SPEAKER_KEY in metadata else speaker_of(text)
    return dict(metadata) if name is None else {**metadata, SPEAKER_KEY: name}
