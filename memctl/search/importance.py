"""The stored importance of a memory: its value in metadata, and how it fades when nobody uses it.

The value is a number in [0, 1] kept in the metadata key `importance` (reserved by convention:
`prune --min-importance`, `prune --decayed-below`, filters and the optional re-ranking read it).
`memorize` assigns it (memctl.memorize.importance); `effective()` is the value as time goes by: it
halves every `importance_half_life` days since the memory was last returned by `load`/`recall`
(never returned: since it was created).

Core module: no typer/rich.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from memctl.store.records import parse_time

KEY = "importance"  # the metadata key


def check(value: Any, what: str = "importance") -> float:
    """A finite number in [0, 1] (bools and strings refused), or a UsageError naming `what`: the rule every
    write path applies (memctl.store.validate)."""
    from memctl.store.validate import check_importance

    return check_importance(value, what)


def check_metadata(metadata: Mapping[str, Any]) -> None:
    """A metadata `importance` given by hand (`--meta importance=...`) obeys the same rule as --importance."""
    if KEY in metadata:
        check(metadata[KEY], "metadata 'importance'")


def of(metadata: Mapping[str, Any], default: float) -> float:
    """The stored importance, `default` when missing or not a number in [0, 1]."""
    value = metadata.get(KEY)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0.0 <= value <= 1.0
    ):
        return default
    return float(value)


def age_days(since: str | None, now: datetime) -> float | None:
    stamp = parse_time(since)
    return None if stamp is None else max(0.0, (now - stamp).total_seconds() / 86400.0)


def halving(days: float, half_life: float) -> float:
    """0.5 ** (days / half_life); 1 when half_life is 0 (no decay)."""
    return 1.0 if half_life <= 0 else 0.5 ** (max(0.0, days) / half_life)


def effective(importance: float, last_used: str | None, now: datetime, half_life: float) -> float | None:
    """Importance halved every `half_life` days since `last_used`; None when that time cannot be read."""
    days = age_days(last_used, now)
    return None if days is None else importance * halving(days, half_life)


def decayed_below(
    threshold: float, default: float, half_life: float, now: datetime
) -> Callable[[Any, str | None], bool]:
    """Predicate for prune: (memory, accessed_at) -> its effective importance is below `threshold`.

    The clock starts at the last access, else at creation; an unreadable time is never selected."""

    def test(memory: Any, accessed_at: str | None) -> bool:
        value = effective(of(memory.metadata, default), accessed_at or memory.created_at, now, half_life)
        return value is not None and value < threshold

    return test
