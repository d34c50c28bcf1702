"""Turning command-line text into values: '-' for stdin, '@file', key=value metadata."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from memctl.errors import UsageError


def read_text(value: str, what: str = "text", *, limit: int) -> str:
    """'-' reads stdin, '@path' reads a file, '@@...' is a literal starting with '@'.

    At most `limit` bytes (config max_text_bytes; 0: no limit) are read from stdin or a file: one byte
    more is an error, so `@/dev/zero` or `yes | memctl save -` stops at once instead of filling memory."""
    if value == "-":
        text = _decode(_read_stdin(limit, what), what, "stdin")
    elif value.startswith("@@"):
        text = value[1:]
    elif value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            with path.open("rb") as handle:
                data = _bounded(handle.read(limit + 1) if limit else handle.read(), limit, what, repr(str(path)))
        except FileNotFoundError as exc:
            raise UsageError(f"{what} file {str(path)!r} does not exist", hint="write '@@' for a literal '@'") from exc
        except OSError as exc:
            raise UsageError(f"cannot read {what} from {str(path)!r}: {exc.strerror or exc}") from exc
        text = _decode(data, what, repr(str(path)))
    else:
        text = value
    text = text.strip()
    if not text:
        raise UsageError(f"{what} is empty")
    return text


def _read_stdin(limit: int, what: str) -> bytes:
    stream = getattr(sys.stdin, "buffer", None)
    if stream is not None:
        return _bounded(stream.read(limit + 1) if limit else stream.read(), limit, what, "stdin")
    # A text stream without bytes underneath (an embedding application's): characters are at most bytes.
    chars = sys.stdin.read(limit + 1) if limit else sys.stdin.read()
    return _bounded(chars.encode("utf-8", "surrogatepass"), limit, what, "stdin")


def _bounded(data: bytes, limit: int, what: str, where: str) -> bytes:
    if limit and len(data) > limit:
        raise UsageError(
            f"the {what} from {where} is over the limit of {limit:,} bytes (max_text_bytes); reading stopped there",
            hint="split it into smaller memories, or raise max_text_bytes in the config",
        )
    return data


def _decode(data: bytes, what: str, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"the {what} from {where} is not UTF-8 text ({exc.reason} at byte {exc.start})",
            hint="pass text: memories, queries and files must be UTF-8",
        ) from exc


def text_limit(store: Any) -> int:
    """The most bytes a text argument may have for this store (config max_text_bytes; 0: no limit)."""
    return int(store.config.get("max_text_bytes") or 0)


def unit_interval(value: float | None) -> float | None:
    """Option callback: a relevance or importance in [0, 1]. Click's FloatRange lets NaN through
    (every comparison with NaN is false), and `--min-importance inf` would prune everything."""
    import math

    if value is not None and not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise UsageError(f"{value} is not a number in [0, 1]", hint="e.g. 0.7")
    return value


def _as_text(name: str) -> Any:
    raise ValueError(name)  # NaN / Infinity are not JSON: the value stays the text the user typed


def parse_meta(pairs: list[str] | None) -> dict[str, Any]:
    """key=value pairs; a value that parses as JSON (number, true, list, object) keeps that type."""
    meta: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--meta {pair!r} is not key=value", hint="e.g. --meta source=chat --meta priority=2")
        try:
            meta[key] = json.loads(raw, parse_constant=_as_text)
        except (ValueError, RecursionError):
            meta[key] = raw
    return meta
