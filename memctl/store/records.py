"""Typed records the store returns; only the CLI renders them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from operator import itemgetter
from typing import Any

AREAS = ("main", "fragments", "solutions")
# The columns of a memory row and of an archive row, by the names both backends' tables share;
# RowReader reads them by name, never by position.
MEMORY_COLUMNS = "seq, id, text, area, created_at, updated_at, metadata"
ARCHIVE_COLUMNS = "id, text, area, created_at, updated_at, metadata, vector, model, accessed_at, archived_at, op, actor"
RESERVED_METADATA_KEYS = frozenset({"id", "area", "created_at", "updated_at"})
# The columns of a pending row (the review queue), the same in both backends.
PENDING_COLUMNS = "id, text, area, created_at, metadata, reason, source, transcript"


def now_iso() -> str:
    """ISO 8601 with offset, UTC, so stored timestamps sort chronologically as text."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def parse_time(value: str | None) -> datetime | None:
    """A stored ISO 8601 timestamp (naive ones read as UTC); None when absent or unreadable."""
    if not value:
        return None
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


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
class PendingItem:
    """A candidate waiting for review (`memctl review`): stored apart from the memories, so no search,
    list, load, recall or consolidation sees it until it is approved."""

    id: str
    text: str
    area: str
    created_at: str
    reason: str  # why it waits: the gate's detail ("p(noise) 0.48"), or what the proposer said
    metadata: dict[str, Any] = field(default_factory=dict)
    source: str | None = None  # metadata `source`: memorize, mcp, ...
    transcript: str | None = None  # metadata `transcript`: the conversation it came from

    def row(self) -> tuple[Any, ...]:
        """The pending table's columns (PENDING_COLUMNS, then content_hash), as both backends insert them."""
        from memctl.embeddings import content_hash

        meta = json.dumps(self.metadata, ensure_ascii=False)
        return (
            self.id,
            self.text,
            self.area,
            self.created_at,
            meta,
            self.reason,
            self.source,
            self.transcript,
            content_hash(self.text),
        )

    @property
    def p_noise(self) -> float | None:
        """The gate's P(noise) when the gate put it here (metadata `gate_p_noise`), else None."""
        value = self.metadata.get("gate_p_noise")
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "p_noise": self.p_noise}


def pending_of(row: Mapping[str, Any]) -> PendingItem:
    """A PendingItem from a record of PENDING_COLUMNS (RowReader.record)."""
    return PendingItem(
        id=row["id"],
        text=row["text"],
        area=row["area"],
        created_at=row["created_at"],
        reason=row["reason"] or "",
        metadata=_metadata(row["metadata"]),
        source=row["source"],
        transcript=row["transcript"],
    )


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


_MEMORY_FIELDS = ("id", "text", "area", "created_at", "updated_at", "metadata")


def _metadata(value: Any) -> dict[str, Any]:
    """A metadata column: JSON text (SQLite, a PostgreSQL json column) or already parsed."""
    return json.loads(value) if isinstance(value, str) else value


def _memory(ident: str, text: str, area: str, created_at: str, updated_at: str, metadata: Any) -> Memory:
    return Memory(ident, text, area, created_at, updated_at, _metadata(metadata))


class RowReader:
    """Reads the rows of one query by column name. The names are looked up in the cursor's description
    (DB-API: name first) once per query, so rows stay plain tuples, the fastest rows of sqlite3 and
    psycopg (a sqlite3.Row or a dict per row made a 10k-row scan 10 % slower), and no code depends on
    the order of the columns in a SELECT."""

    def __init__(self, description: Sequence[Any]) -> None:
        self.names = [column[0] for column in description]
        self._index = {name: i for i, name in enumerate(self.names)}

    @cached_property
    def _memory_fields(self) -> itemgetter[Any]:
        return itemgetter(*(self._index[name] for name in _MEMORY_FIELDS))

    def get(self, row: Sequence[Any], name: str) -> Any:
        """The value of column `name` in `row`."""
        return row[self._index[name]]

    def memory(self, row: Sequence[Any]) -> Memory:
        """The Memory a row holding MEMORY_COLUMNS stands for (the hot path: searches, scans)."""
        return _memory(*self._memory_fields(row))

    def hit(self, row: Sequence[Any], score: float) -> Hit:
        """The Hit a row holding MEMORY_COLUMNS stands for, made at once (a search reads ~80 rows: a Memory
        first and a copy cost a second dataclass per row, 0.4 ms a search)."""
        ident, text, area, created_at, updated_at, metadata = self._memory_fields(row)
        return Hit(ident, text, area, created_at, updated_at, _metadata(metadata), score)

    def record(self, row: Sequence[Any]) -> dict[str, Any]:
        """`row` as {column: value} (rows read rarely: history, archive)."""
        return dict(zip(self.names, row, strict=True))


def archived_of(row: Mapping[str, Any], vector: bytes | None) -> ArchivedMemory:
    """An ArchivedMemory from a record of ARCHIVE_COLUMNS, with its vector as float32 bytes (each backend
    decodes its own vector column)."""
    memory = _memory(*(row[name] for name in _MEMORY_FIELDS))
    return ArchivedMemory(memory, vector, row["model"], row["accessed_at"], row["archived_at"], row["op"], row["actor"])


def archive_values(archived: ArchivedMemory, vector: Any) -> tuple[Any, ...]:
    """`archived` as the values of ARCHIVE_COLUMNS, in their order, with the vector as the backend stores it."""
    memory = archived.memory
    return (
        memory.id,
        memory.text,
        memory.area,
        memory.created_at,
        memory.updated_at,
        json.dumps(memory.metadata, ensure_ascii=False),
        vector,
        archived.model,
        archived.accessed_at,
        archived.archived_at,
        archived.op,
        archived.actor,
    )


def history_entry(
    row: Mapping[str, Any], old_metadata: dict[str, Any] | None, new_metadata: dict[str, Any] | None
) -> HistoryEntry:
    """A history record (hid, memory_id, op, actor, at, area, old_text, new_text: RowReader.record); each
    backend decodes the metadata columns its own way."""
    return HistoryEntry(
        hid=row["hid"],
        memory_id=row["memory_id"],
        op=row["op"],
        actor=row["actor"],
        at=row["at"],
        area=row["area"],
        old_text=row["old_text"],
        new_text=row["new_text"],
        old_metadata=old_metadata,
        new_metadata=new_metadata,
    )
