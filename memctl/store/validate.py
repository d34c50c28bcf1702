"""One validation of a memory's fields, whatever path writes them (save, update, JSONL import, MCP, Agent Zero
import, migrate): ids, areas, metadata (its `importance` included) and timestamps.

Timestamps are stored in one form, UTC ISO 8601 with offset and milliseconds (microseconds when the value
has them), so that comparing two stored values as text compares the instants: filters (`created_at >
'...'`) run as text comparisons in SQL on both backends, and `list` orders by the column.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from memctl.errors import UsageError
from memctl.store.records import AREAS, RESERVED_METADATA_KEYS

MAX_ID_LENGTH = 128
# Letters, digits and _ . : - (memctl's own ids, UUIDs, `x-01`, `chatcmpl-1`); not a path (`../../etc`),
# not an option (`-rf`), not empty.
_ID = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9_.:-]{{0,{MAX_ID_LENGTH - 1}}}")
IMPORTANCE_KEY = "importance"


def check_id(value: Any, what: str = "id") -> str:
    """A memory id given from outside (import): a string of 1-128 letters, digits and _ . : -, not starting
    with . : or -."""
    if not isinstance(value, str):
        raise UsageError(f"{what} must be a string, got {type(value).__name__}")
    if not _ID.fullmatch(value):
        shown = value if len(value) <= 40 else f"{value[:40]}… ({len(value):,} characters)"
        raise UsageError(
            f"{what} {shown!r} is not a valid memory id",
            hint=f"1 to {MAX_ID_LENGTH} letters, digits and _ . : -, starting with a letter, digit or _ "
            "(leave the id out and memctl makes one)",
        )
    return value


def check_area(area: str) -> str:
    if area not in AREAS:
        raise UsageError(f"unknown area {area!r}", hint=f"use one of: {', '.join(AREAS)}")
    return area


def check_importance(value: Any, what: str = "importance") -> float:
    """A finite number in [0, 1] (bools and strings refused), or a UsageError naming `what`."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0.0 <= value <= 1.0
    ):
        raise UsageError(
            f"{what} must be a number in [0, 1], got {value!r}",
            hint="e.g. 0.9 for a standing rule, 0.2 for a passing detail",
        )
    return float(value)


def check_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Metadata given to memctl: a JSON object without reserved keys, its `importance` in [0, 1]."""
    checked = check_stored_metadata(metadata)
    if IMPORTANCE_KEY in checked:
        check_importance(checked[IMPORTANCE_KEY], f"metadata {IMPORTANCE_KEY!r}")
    return checked


def check_stored_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Metadata any row may hold: a JSON object (finite numbers) without reserved keys."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise UsageError("metadata must be a JSON object (key: value)")
    bad = RESERVED_METADATA_KEYS & set(metadata)
    if bad:
        raise UsageError(f"metadata keys {sorted(bad)} are reserved", hint="they are columns of the memory itself")
    try:
        # allow_nan=False: NaN and Infinity are not JSON; SQLite's json functions (stats, filters)
        # reject the whole row set once one such value is stored.
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UsageError(
            f"metadata is not JSON-serialisable: {exc}",
            hint="values must be strings, finite numbers, booleans, null, lists or objects",
        ) from exc
    return dict(metadata)


def check_text_size(text: str, limit: int) -> None:
    """Refuse a text over `limit` bytes of UTF-8 (config max_text_bytes; 0: no limit) before it is
    embedded: the model's memory grows with the text (~150 MB per MB)."""
    if limit and len(text) > limit // 4 and len(text.encode("utf-8")) > limit:
        raise UsageError(
            f"the text is {len(text.encode('utf-8')):,} bytes, over the limit of {limit:,} bytes",
            hint="split it into smaller memories, or raise max_text_bytes in the config",
        )


def utc_iso(moment: datetime) -> str:
    """`moment` (naive: UTC) in the stored form: UTC, milliseconds, or microseconds when it has them."""
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment.isoformat(timespec="microseconds" if moment.microsecond % 1000 else "milliseconds")


def parse_timestamp(value: Any, what: str = "timestamp") -> datetime:
    """An ISO 8601 timestamp as an aware datetime (naive: UTC); a UsageError naming `what` otherwise."""
    if not isinstance(value, str):
        raise UsageError(f"{what} must be a string, got {type(value).__name__}")
    try:
        stamp = datetime.fromisoformat(value)
        return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)
    except (ValueError, OverflowError) as exc:  # OverflowError: 0001-01-01T00:00+05:00 is before year 1 in UTC
        shown = value if len(value) <= 60 else f"{value[:60]}…"
        raise UsageError(
            f"{what} {shown!r} is not an ISO 8601 timestamp", hint="e.g. 2025-03-01T12:00:00+00:00"
        ) from exc


def normalise_timestamp(value: Any, what: str = "timestamp") -> str:
    """`value` in the stored form (UTC ISO 8601 with offset); a UsageError when it is not a timestamp."""
    return utc_iso(parse_timestamp(value, what))


def normalised_or_kept(value: str | None) -> str | None:
    """`value` in the stored form when it reads as a timestamp, else as it is (rows copied from a store or a
    backup: memctl never refuses what it already holds)."""
    if value is None:
        return None
    try:
        return normalise_timestamp(value)
    except UsageError:
        return value


def check_times(created_at: Any, updated_at: Any, now: str) -> tuple[str, str]:
    """(created_at, updated_at) in the stored form. A missing created_at is updated_at when given, else now; a
    missing updated_at is created_at. updated_at before created_at is refused."""
    created = parse_timestamp(created_at, "created_at") if created_at is not None else None
    updated = parse_timestamp(updated_at, "updated_at") if updated_at is not None else None
    if created is not None and updated is not None and updated < created:
        raise UsageError(
            f"updated_at {updated_at!r} is before created_at {created_at!r}",
            hint="a memory cannot change before it exists: fix or drop updated_at",
        )
    if created is None and updated is None:
        return now, now
    first = created or updated
    assert first is not None
    return utc_iso(first), utc_iso(updated or first)


def check_record(record: Mapping[str, Any], now: str, max_text_bytes: int = 0) -> dict[str, Any]:
    """A memory record as every insert path stores it: text, id (optional), area, metadata and timestamps
    checked; timestamps in the stored form. Raises UsageError saying which field is wrong."""
    text = record.get("text")
    if not isinstance(text, str) or not text.strip():
        raise UsageError("record has no text", hint='each record needs at least {"text": "..."}')
    if max_text_bytes:
        check_text_size(text, max_text_bytes)
    ident = record.get("id")
    if ident is not None:
        check_id(ident)
    area = check_area(record.get("area") or "main")
    metadata = check_metadata(record.get("metadata"))
    created_at, updated_at = check_times(record.get("created_at"), record.get("updated_at"), now)
    return {
        **record,
        "id": ident or None,
        "text": text,
        "area": area,
        "metadata": metadata,
        "created_at": created_at,
        "updated_at": updated_at,
    }
