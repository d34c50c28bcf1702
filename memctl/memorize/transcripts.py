"""Reading conversation transcripts: JSON lists, {"messages": [...]}, JSONL, and plain text.

Plain text: lines starting with `User:`, `Assistant:`, `Tool:` or `System:` (any case) open a
message; other lines continue the current one. Anything else is refused with a message naming
the file and the formats expected.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memctl.errors import InputFormatError

ROLES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "agent": "assistant",
    "tool": "tool",
    "function": "tool",
    "system": "system",
}
EXPECTED = (
    'a JSON list of {"role", "content"}, {"messages": [...]}, JSONL with one message per line, '
    "or text with 'User:' / 'Assistant:' / 'Tool:' prefixes"
)
_PREFIX = re.compile(r"^\s*(user|human|assistant|ai|agent|tool|function|system)\s*:\s?(.*)$", re.IGNORECASE)


@dataclass(frozen=True)
class Message:
    role: str
    content: str

    def line(self) -> str:
        return f"{self.role.capitalize()}: {self.content}"


def read_transcript(path: Path, max_chars: int = 80_000) -> list[Message]:
    return trim(parse_transcript(read_transcript_text(path), str(path)), max_chars)


def read_transcript_text(path: Path) -> str:
    """The file's text, or an InputFormatError naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise InputFormatError(f"transcript {str(path)!r} does not exist") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFormatError(f"cannot read transcript {str(path)!r}: {exc}") from exc


def parse_transcript(raw: str, source: str = "<text>") -> list[Message]:
    text = raw.strip()
    if not text:
        raise InputFormatError(f"transcript {source} is empty", hint=f"expected {EXPECTED}")
    messages = _from_json(text, source) if text[0] in "[{" else None
    if messages is None:
        messages = _from_prefixed_text(text)
    if not messages:
        raise InputFormatError(f"{source}: no conversation found", hint=f"expected {EXPECTED}")
    return messages


def _from_json(text: str, source: str) -> list[Message] | None:
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = _jsonl(text, source)
        if data is None:
            return None
    if isinstance(data, dict):
        data = data.get("messages")
    if not isinstance(data, list):
        raise InputFormatError(f"{source}: JSON without a list of messages", hint=f"expected {EXPECTED}")
    return [_message(item, f"{source}: message {i + 1}") for i, item in enumerate(data)]


def _jsonl(text: str, source: str) -> list[Any] | None:
    items = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except ValueError:
            if number == 1:
                return None  # not JSON at all: try the text format
            raise InputFormatError(f"{source}:{number}: not valid JSON", hint=f"expected {EXPECTED}") from None
    return items


def _message(item: Any, where: str) -> Message:
    if not isinstance(item, dict):
        raise InputFormatError(f"{where} is not an object", hint='each message needs "role" and "content"')
    role = ROLES.get(str(item.get("role", "")).lower())
    content = item.get("content")
    if isinstance(content, list):  # OpenAI-style content parts
        content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    if role is None or not isinstance(content, str):
        raise InputFormatError(
            f"{where} needs a role (user/assistant/tool/system) and text content", hint=f"expected {EXPECTED}"
        )
    return Message(role, content)


def _from_prefixed_text(text: str) -> list[Message]:
    messages: list[Message] = []
    for line in text.splitlines():
        match = _PREFIX.match(line)
        if match:
            messages.append(Message(ROLES[match.group(1).lower()], match.group(2)))
        elif messages:
            messages[-1] = Message(messages[-1].role, messages[-1].content + "\n" + line)
        elif line.strip():
            return []  # text before any speaker prefix: not a transcript
    return [Message(m.role, m.content.strip()) for m in messages]


def trim(messages: list[Message], max_chars: int) -> list[Message]:
    """Keep the newest messages within max_chars (the oldest end is cut; a message may be cut in part)."""
    kept: list[Message] = []
    budget = max_chars
    for message in reversed(messages):
        if budget <= 0:
            break
        content = message.content if len(message.content) <= budget else message.content[-budget:]
        kept.append(Message(message.role, content))
        budget -= len(content)
    return list(reversed(kept))


def as_text(messages: list[Message]) -> str:
    return "\n".join(m.line() for m in messages)
