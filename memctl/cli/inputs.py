"""Turning command-line text into values: '-' for stdin, '@file', key=value metadata."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from memctl.errors import UsageError


def read_text(value: str, what: str = "text") -> str:
    """'-' reads stdin, '@path' reads a file, '@@...' is a literal starting with '@'."""
    if value == "-":
        text = sys.stdin.read()
    elif value.startswith("@@"):
        text = value[1:]
    elif value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise UsageError(f"{what} file {str(path)!r} does not exist", hint="write '@@' for a literal '@'") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read {what} from {str(path)!r}: {exc}") from exc
    else:
        text = value
    text = text.strip()
    if not text:
        raise UsageError(f"{what} is empty")
    return text


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
