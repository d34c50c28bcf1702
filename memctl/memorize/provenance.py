"""Where and when each recalled memory came from, and which group an agent reads it in.

- date: the day its text was last written (`updated_at`, else `created_at`), YYYY-MM-DD;
- source: `knowledge` (a knowledge file; name = the file), `consolidation` (merged or rewritten by
  consolidation; name = the conversation it last came from, if known), `conversation` (memorized
  from a transcript; name = the transcript file), `saved` (by `save`, `import` or the library);
- group: `rules` (standing preferences and rules), `facts`, or `solutions` (area solutions).

`recall --format json` and the prompt block both use `describe()`. Core module: no typer/rich.
"""

from __future__ import annotations

import re
from typing import Any

from memctl.memorize.importance import KEEP_TEXT, KEEP_TEXT_ZH

GROUPS = ("rules", "facts", "solutions")
SOURCES = ("knowledge", "consolidation", "conversation", "saved")
# Wording of a standing preference or rule, beyond the keep-signals importance looks for.
RULE_WORDS = re.compile(
    r"\b(do not|don't|doesn't want|wants|should|needs? to|avoid|only use|"
    r"prefers?|likes|dislikes)\b",
    re.IGNORECASE,
)
# The suffix the item template appends ("- text [2026-11-30, conversation t03.json]").
SUFFIX = re.compile(r"\s+\[\d{4}-\d{2}-\d{2}(, [^\]\n]*)?\]\s*$")


def source_of(metadata: dict[str, Any]) -> tuple[str, str | None]:
    if metadata.get("knowledge_source") is True:
        return "knowledge", _name(metadata.get("source_file") or metadata.get("source_path"))
    transcript = _name(metadata.get("transcript"))
    if metadata.get("consolidation_action"):
        return "consolidation", transcript
    if metadata.get("source") == "memorize" or transcript:
        return "conversation", transcript
    return "saved", None


def group_of(hit: Any) -> str:
    if hit.area == "solutions":
        return "solutions"
    if hit.metadata.get("knowledge_source") is True:
        return "facts"
    text = hit.text
    if KEEP_TEXT.search(text) or KEEP_TEXT_ZH.search(text) or RULE_WORDS.search(text):
        return "rules"
    return "facts"


def date_of(hit: Any) -> str:
    return str(hit.updated_at or hit.created_at or "")[:10]


def describe(hit: Any) -> dict[str, Any]:
    """The provenance fields of one hit (added to its JSON and used by the block)."""
    kind, name = source_of(hit.metadata)
    return {"date": date_of(hit), "source": kind, "source_name": name, "group": group_of(hit)}


def label(fields: dict[str, Any]) -> str:
    """'conversation t03.json', 'knowledge file setup.md', 'consolidation', 'saved'."""
    kind, name = fields["source"], fields["source_name"]
    if kind == "knowledge":
        return f"knowledge file {name}" if name else "knowledge file"
    return f"{kind} {name}" if name else kind


def strip_label(item: str) -> str:
    """A recalled item's text without the date/source suffix (for spotting echoes of the block)."""
    return SUFFIX.sub("", item)


def _name(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return value.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
