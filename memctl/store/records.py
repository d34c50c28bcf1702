"""Typed records the store returns; only the CLI renders them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

AREAS = ("main", "fragments", "solutions")
RESERVED_METADATA_KEYS = frozenset({"id", "area", "created_at", "updated_at"})


def now_iso() -> str:
    """ISO 8601 with offset, UTC, so stored timestamps sort chronologically as text."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def relevance(inner_product: float) -> float:
    """The documented score: clamp((1 + cosine) / 2, 0, 1) on normalised vectors."""
    return min(1.0, max(0.0, (1.0 + float(inner_product)) / 2.0))


@dataclass
class Memory:
    id: str
    text: str
    area: str
    created_at: str
    updated_at: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def filter_names(self) -> dict[str, Any]:
        """What a filter expression can read: metadata plus the record's own columns."""
        names = dict(self.metadata)
        names.update(
            id=self.id,
            area=self.area,
            created_at=self.created_at,
            updated_at=self.updated_at,
            timestamp=self.created_at,
        )
        return names


@dataclass
class Hit(Memory):
    score: float = 0.0


@dataclass
class HistoryEntry:
    hid: int
    memory_id: str
    op: str
    actor: str
    at: str
    area: str | None
    old_text: str | None
    new_text: str | None
    old_metadata: dict[str, Any] | None
    new_metadata: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DeleteResult:
    deleted: list[str]
    cascaded: list[str]
    missing: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StoreSummary:
    """One store of a root or database, as `memctl subdirs` lists it."""

    name: str
    count: int | None  # memories; None when the store could not be read
    path: str  # its folder, or DATABASE#subdir

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StoreList:
    """Every store of a root folder or a PostgreSQL database (`where` names it, without password)."""

    where: str
    stores: list[StoreSummary]


@dataclass
class ArchivedMemory:
    """The last removed version of a memory as the archive keeps it (`restore`, backups)."""

    memory: Memory
    vector: bytes | None  # little-endian float32, as the store had it
    model: str | None  # provider:model that made the vector
    accessed_at: str | None
    archived_at: str
    op: str  # delete, prune, replace, merge, ...
    actor: str


def history_entry(row: Any, old_metadata: dict[str, Any] | None, new_metadata: dict[str, Any] | None) -> HistoryEntry:
    """A history row (hid, memory_id, op, actor, at, area, old_text, new_text, ...) by name."""
    return HistoryEntry(
        hid=row[0],
        memory_id=row[1],
        op=row[2],
        actor=row[3],
        at=row[4],
        area=row[5],
        old_text=row[6],
        new_text=row[7],
        old_metadata=old_metadata,
        new_metadata=new_metadata,
    )
