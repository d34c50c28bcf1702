"""Durations and timestamps the lifecycle commands read: `12h`, `30d`, `8w`; stored ISO 8601 times."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from memctl.errors import UsageError

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([hdw])\s*", re.IGNORECASE)
_UNIT_SECONDS = {"h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str, option: str = "duration") -> timedelta:
    """'12h', '30d', '8w' (hours, days, weeks) -> timedelta; anything else is a usage error."""
    match = _DURATION.fullmatch(text or "")
    if not match:
        raise UsageError(f"{option} {text!r} is not a duration", hint="a number and a unit h, d or w: 12h, 30d, 8w")
    return timedelta(seconds=float(match[1]) * _UNIT_SECONDS[match[2].lower()])


def is_knowledge(metadata: dict[str, Any]) -> bool:
    """Knowledge chunks carry `knowledge_source: true`; everything else came from conversations."""
    return metadata.get("knowledge_source") in (True,)
