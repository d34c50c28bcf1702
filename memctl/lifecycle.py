"""A store's life: JSONL export and import, prune, archive/restore, purge, stats.

Core only (no typer/rich): the CLI's lifecycle commands call one function each.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from memctl.embeddings import ModelInfo
from memctl.errors import InputFormatError, NotFoundError, UsageError
from memctl.store.base import StoreBase, check_area, check_metadata, iter_chunks
from memctl.store.embedded import folder_size  # noqa: F401 - part of this module's API
from memctl.store.records import Memory, now_iso

EXPORT_FORMAT = 1
HEADER_KEY = "memctl_export"


def export_lines(store: StoreBase, *, with_vectors: bool = False, area: str | None = None) -> Iterator[str]:
    """The header line, then one JSON object per memory (oldest first)."""
    info = store.model_info()
    header = {HEADER_KEY: EXPORT_FORMAT, "subdir": store.name, "exported_at": now_iso(),
              "count": len(store), "vectors": with_vectors, "embedding": info if with_vectors else None}
    yield json.dumps(header, ensure_ascii=False)
    for memory, blob in store.iter_all(area=area, with_vectors=with_vectors):
        record = memory.to_dict()
        if with_vectors and blob is not None:
            record["vector"] = base64.b64encode(blob).decode("ascii")
        yield json.dumps(record, ensure_ascii=False)


def export_jsonl(store: StoreBase, out: IO[str], *, with_vectors: bool = False, area: str | None = None,
                 progress: Callable[[int], None] | None = None) -> int:
    count = -1
    for count, line in enumerate(export_lines(store, with_vectors=with_vectors, area=area)):
        out.write(line + "\n")
        if progress and count % 1000 == 0:
            progress(count)
    return max(count, 0)


@dataclass
class ImportReport:
    imported: int = 0
    skipped: int = 0
    reembedded: int = 0
    batches: int = 0
    ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("ids")
        return data


def parse_jsonl(lines: list[str], source: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Validate every line before anything is written; errors name the file and line."""
    header: dict[str, Any] | None = None
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise InputFormatError(f"{source}:{number}: not valid JSON ({exc.msg})",
                                   hint="expected one JSON object per line, as `memctl export` writes") from exc
        if not isinstance(obj, dict):
            raise InputFormatError(f"{source}:{number}: expected a JSON object, got {type(obj).__name__}")
        if HEADER_KEY in obj:
            header = obj
            continue
        records.append(_check_record(obj, f"{source}:{number}"))
    return header, records


def _check_record(obj: dict[str, Any], where: str) -> dict[str, Any]:
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise InputFormatError(f"{where}: record has no text", hint='each line needs at least {"text": "..."}')
    try:
        check_area(obj.get("area") or "main")
        check_metadata(obj.get("metadata") or {})
    except Exception as exc:  # noqa: BLE001 - re-raised with the line number
        raise InputFormatError(f"{where}: {exc}") from exc
    for key in ("id", "created_at", "updated_at"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise InputFormatError(f"{where}: {key} must be a string")
    return obj


def _vectors_usable(header: dict[str, Any] | None, records: list[dict[str, Any]], info: ModelInfo) -> int | None:
    """The dimension of the records' vectors if they all exist and come from the configured model."""
    embedding = (header or {}).get("embedding") or {}
    if (embedding.get("provider"), embedding.get("model")) != (info.provider, info.model):
        return None
    if not records or not all(isinstance(r.get("vector"), str) for r in records):
        return None
    return int(embedding.get("dimension") or 0) or None


def import_jsonl(store: StoreBase, path: Path | None, lines: list[str], *, batch_size: int = 500,
                 on_conflict: str = "skip", progress: Callable[[int, int], None] | None = None) -> ImportReport:

    header, records = parse_jsonl(lines, str(path) if path else "<stdin>")
    info = store.embedder.info
    store.check_model(info)
    dimension = _vectors_usable(header, records, info)
    report = ImportReport()
    with store.bulk():
        for batch, vectors in _with_vectors(store, iter_chunks(records, batch_size), dimension):
            if not dimension:
                report.reembedded += len(batch)
            ids = store.insert_records(batch, vectors, info, actor="import", op="import", on_conflict=on_conflict)
            report.imported += len(ids)
            report.skipped += len(batch) - len(ids)
            report.batches += 1
            report.ids += ids
            if progress:
                progress(report.imported + report.skipped, len(records))
    return report


def _stored_vectors(batch: list[dict[str, Any]], dimension: int) -> Any:
    import numpy as np

    try:
        vectors = np.stack([np.frombuffer(base64.b64decode(r["vector"]), dtype=np.float32) for r in batch])
    except ValueError as exc:
        raise InputFormatError(f"a stored vector is malformed: {exc}", hint="export again") from exc
    if vectors.shape[1] != dimension:
        raise InputFormatError(f"vector dimension {vectors.shape[1]} does not match the header's {dimension}")
    return vectors


def _with_vectors(store: Any, batches: Iterator[list[dict[str, Any]]],
                  dimension: int | None) -> Iterator[tuple[list[dict[str, Any]], Any]]:
    """(batch, vectors); the next batch is embedded while the caller writes this one (the model and
    SQLite both release the GIL), so an import costs about the embedding time alone."""
    if dimension:
        for batch in batches:
            yield batch, _stored_vectors(batch, dimension)
        return
    from concurrent.futures import ThreadPoolExecutor

    embedder = store.embedder  # the model alone: the store's connection stays in this thread
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = None
        for batch in batches:
            future = pool.submit(embedder.embed, [r["text"] for r in batch])
            if pending is not None:
                yield pending[0], pending[1].result()
            pending = (batch, future)
        if pending is not None:
            yield pending[0], pending[1].result()


# -- durations ---------------------------------------------------------------------------
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([hdw])\s*", re.IGNORECASE)
_UNIT_SECONDS = {"h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str, option: str = "duration") -> timedelta:
    """'12h', '30d', '8w' (hours, days, weeks) -> timedelta; anything else is a usage error."""
    match = _DURATION.fullmatch(text or "")
    if not match:
        raise UsageError(f"{option} {text!r} is not a duration", hint="a number and a unit h, d or w: 12h, 30d, 8w")
    return timedelta(seconds=float(match[1]) * _UNIT_SECONDS[match[2].lower()])


def parse_time(value: str | None) -> datetime | None:
    """A stored ISO 8601 timestamp (naive ones read as UTC); None when absent or unreadable."""
    if not value:
        return None
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def is_knowledge(metadata: dict[str, Any]) -> bool:
    """Knowledge chunks carry `knowledge_source: true`; everything else came from conversations."""
    return metadata.get("knowledge_source") in (True,)


# -- prune -------------------------------------------------------------------------------
PRUNE_SOURCES = ("knowledge", "conversation")
PRUNE_BATCH = 5000  # memories removed per transaction (the lock is free between them)


@dataclass(frozen=True)
class PruneCriteria:
    """What `prune` removes: memories matching every criterion given (at least one)."""

    older_than: str | None = None  # created more than this long ago
    not_accessed_for: str | None = None  # last returned by `load` (else created) this long ago
    area: str | None = None
    min_importance: float | None = None  # metadata `importance` below this (missing: config default)
    source: str | None = None  # knowledge | conversation
    filter: str | None = None

    def check(self) -> None:
        if all(v is None for v in asdict(self).values()):
            raise UsageError("prune needs at least one criterion",
                             hint="--older-than, --not-accessed-for, --area, --min-importance, --source or --filter")
        if self.older_than is not None:
            parse_duration(self.older_than, "--older-than")
        if self.not_accessed_for is not None:
            parse_duration(self.not_accessed_for, "--not-accessed-for")
        if self.area is not None:
            check_area(self.area)
        if self.source is not None and self.source not in PRUNE_SOURCES:
            raise UsageError(f"--source must be knowledge or conversation, not {self.source!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def select_for_prune(store: StoreBase, criteria: PruneCriteria, now: datetime | None = None) -> list[Memory]:
    """The one selection both `prune --dry-run` and a real prune use (oldest first).

    A memory whose timestamps cannot be read is never selected by a time criterion.
    """
    criteria.check()
    now = now or datetime.now(UTC)
    created_before = now - parse_duration(criteria.older_than) if criteria.older_than else None
    seen_before = now - parse_duration(criteria.not_accessed_for) if criteria.not_accessed_for else None
    default_importance = float(store.config["prune_default_importance"])
    flt = store.compile(criteria.filter)
    # The database selects what the filter matches, as a filtered search does (memctl/store/filter_sql.py).
    allowed = store.matching_ids(flt, area=criteria.area) if flt is not None else None
    selected: list[Memory] = []
    for memory, accessed_at in store.iter_with_access(area=criteria.area):
        if created_before is not None and not _before(memory.created_at, created_before):
            continue
        if seen_before is not None and not _before(accessed_at or memory.created_at, seen_before):
            continue
        if criteria.source is not None and is_knowledge(memory.metadata) != (criteria.source == "knowledge"):
            continue
        if criteria.min_importance is not None and not importance(memory.metadata, default_importance) < \
                criteria.min_importance:
            continue
        if allowed is not None and memory.id not in allowed:
            continue
        selected.append(memory)
    return selected


def _before(value: str | None, cutoff: datetime) -> bool:
    stamp = parse_time(value)
    return stamp is not None and stamp < cutoff


def importance(metadata: dict[str, Any], default: float) -> float:
    value = metadata.get("importance")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value)


@dataclass
class PruneReport:
    dry_run: bool
    purged: bool
    criteria: PruneCriteria
    pruned: list[Memory] = field(default_factory=list)
    compacted: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "purged": self.purged, "criteria": self.criteria.to_dict(),
                "count": len(self.pruned), "compacted": self.compacted, "pruned": [m.to_dict() for m in self.pruned]}


def prune(store: StoreBase, criteria: PruneCriteria, *, dry_run: bool = False, purge: bool = False,
          now: datetime | None = None, selected: list[Memory] | None = None) -> PruneReport:
    """Remove what `select_for_prune` selects (or the `selected` list it returned earlier).

    Pruned memories are archived and restorable; with `purge` they are not archived, their
    history keeps the operations but loses the text, and the database is compacted.
    """
    chosen = select_for_prune(store, criteria, now) if selected is None else selected
    report = PruneReport(dry_run=dry_run, purged=purge and not dry_run, criteria=criteria)
    if dry_run:
        report.pruned = chosen
        return report
    for batch in iter_chunks(chosen, PRUNE_BATCH):
        ids = [m.id for m in batch]
        with store.transaction():
            gone = set(store.delete(ids, cascade=False, actor="prune", op="prune", archive=not purge).deleted)
            if purge:
                store.forget_text(ids)
        report.pruned += [m for m in batch if m.id in gone]
    if purge and report.pruned:
        report.compacted = store.compact()
    return report


# -- restore -----------------------------------------------------------------------------
@dataclass
class Version:
    """A removed memory as it can be brought back."""

    memory: Memory
    source: str  # archive | history
    vector: bytes | None = None
    model: str | None = None
    accessed_at: str | None = None


def restorable(store: StoreBase, memory_id: str) -> Version | None:
    """The archived row of a removed memory, else its last removal in history (text, area, metadata)."""
    archived = store.archived(memory_id)
    if archived is not None:
        return Version(archived.memory, "archive", vector=archived.vector, model=archived.model,
                       accessed_at=archived.accessed_at)
    entries = store.history(memory_id)
    if not entries or entries[0].old_text is None or entries[0].new_text is not None:
        return None  # never existed, purged, or its last change was not a removal
    last = entries[0]
    first = entries[-1]
    changed = next((e.at for e in entries[1:] if e.new_text is not None), first.at)
    memory = Memory(id=memory_id, text=last.old_text, area=last.area or "main", created_at=first.at,
                    updated_at=changed, metadata=dict(last.old_metadata or {}))
    return Version(memory, "history")


@dataclass
class RestoreReport:
    restored: list[Memory] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    reembedded: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"restored": [m.to_dict() for m in self.restored], "sources": self.sources,
                "reembedded": self.reembedded}


def restore(store: StoreBase, ids: list[str], *, actor: str | None = None) -> RestoreReport:
    """Bring removed memories back with their id, text, area, metadata and timestamps (all or none).

    The archived vector is reused when it was made by the configured model; otherwise (or when
    only history holds the memory) the text is re-embedded.
    """
    import numpy as np

    ids = list(dict.fromkeys(ids))
    if not ids:
        raise UsageError("no id to restore")
    _refuse_existing(store, ids)
    versions: dict[str, Version] = {}
    for memory_id in ids:
        version = restorable(store, memory_id)
        if version is None:
            raise NotFoundError(f"no restorable version of {memory_id!r} in store {store.name!r}",
                                hint="`memctl history ID` shows what is known; purge removes versions for good")
        versions[memory_id] = version
    info = store.embedder.info
    dim = store.dimension()
    vectors: dict[str, Any] = {}
    for memory_id, version in versions.items():
        blob = version.vector
        if blob and version.model == info.label() and (dim is None or len(blob) == 4 * dim):
            vectors[memory_id] = np.frombuffer(blob, dtype=np.float32)
    fresh = [i for i in ids if i not in vectors]
    if fresh:
        for memory_id, vector in zip(fresh, store.embed([versions[i].memory.text for i in fresh]), strict=True):
            vectors[memory_id] = vector
    records = [versions[i].memory.to_dict() for i in ids]
    stamp = now_iso()
    with store.transaction():
        _refuse_existing(store, ids)  # nobody took an id while we embedded
        store.insert_records(records, np.stack([vectors[i] for i in ids]), info, actor=actor, op="restore",
                             on_conflict="error")
        store.unarchive(ids)
        # A restore is a use: the memory is not pruned again tonight for not being accessed.
        for chunk in iter_chunks(ids, 900):
            store.touch(chunk, at=stamp)
    return RestoreReport(restored=store.get(ids), sources={i: versions[i].source for i in ids}, reembedded=fresh)


def _refuse_existing(store: StoreBase, ids: list[str]) -> None:
    present = [m.id for m in store.get(ids)]
    if present:
        raise UsageError(f"memory {present[0]!r} exists in store {store.name!r}; nothing was restored",
                         hint="restore brings back deleted, replaced or pruned memories; `memctl show ID` shows it")


# -- purge -------------------------------------------------------------------------------
@dataclass
class PurgeReport:
    dry_run: bool
    cutoff: str | None
    history: int = 0
    archived: int = 0
    cache_entries: int = 0
    compacted: bool | None = None
    bytes_before: int = 0
    bytes_after: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def purge(store: StoreBase, *, older_than: str | None = None, everything: bool = False,
          dry_run: bool = False, now: datetime | None = None) -> PurgeReport:
    """Remove history entries and archived memories older than `older_than` (or all) for good.

    Then the text must be gone from every file: FTS indexes rebuilt, VACUUM, WAL truncated, and the
    embedding cache entries of the removed texts dropped (the cache holds vectors keyed by sha256,
    never text; a hash still confirms a guessed text, and losing an entry costs one re-embedding).
    """
    if everything == (older_than is not None):
        raise UsageError("purge needs exactly one of --older-than or --all")
    cutoff = None if everything else ((now or datetime.now(UTC)) - parse_duration(older_than or "", "--older-than"))
    bound = cutoff.isoformat(timespec="milliseconds") if cutoff else None
    report = PurgeReport(dry_run=dry_run, cutoff=bound, bytes_before=store.size_bytes())
    report.history, report.archived = store.purge_counts(bound)
    if dry_run:
        report.bytes_after = report.bytes_before
        return report
    hashes = store.purge_rows(bound)
    report.compacted = store.compact()
    report.cache_entries = scrub_cache(store.cache_dir, hashes)
    report.bytes_after = store.size_bytes()
    return report


def scrub_cache(cache_dir: Path | None, hashes: set[str]) -> int:
    """Drop these content hashes from every model's embedding cache under cache_dir; return how many."""
    import sqlite3

    if not hashes or cache_dir is None or not cache_dir.is_dir():
        return 0
    removed = 0
    keys = sorted(hashes)
    for path in sorted(cache_dir.glob("*.sqlite")):
        try:
            db = sqlite3.connect(path, timeout=10, isolation_level=None)
        except sqlite3.Error:
            continue
        try:
            for chunk in iter_chunks(keys, 500):
                removed += db.execute(f"DELETE FROM cache WHERE hash IN ({','.join('?' * len(chunk))})",
                                      chunk).rowcount
            db.execute("VACUUM")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass  # a cache in use keeps its entries until the next purge; it never held text
        finally:
            db.close()
    return removed


# -- stats -------------------------------------------------------------------------------
def store_stats(store: StoreBase, subdir: str) -> dict[str, Any]:
    """Counts per area and source, timestamps, access, archive and history sizes, model, bytes.

    `path` is the folder, or the PostgreSQL URL (no password) and subdir; `bytes` the folder's files
    or the subdir's rows."""
    return {**store.stats(), "subdir": subdir}


# -- every subdir at once ----------------------------------------------------------------
def export_all(root: Path | None, out_dir: Path, opener: Callable[[str], StoreBase], *, with_vectors: bool = False,
               area: str | None = None, subdirs: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One JSONL file per subdir under out_dir (`projects/x` -> out_dir/projects/x.jsonl), each written atomically.

    The subdirs are `subdirs` (e.g. those of a PostgreSQL database), else the stores under `root`."""
    import io

    from memctl.files import atomic_write_bytes
    from memctl.paths import list_subdirs

    written = []
    names = list(subdirs) if subdirs is not None else list_subdirs(root) if root is not None else []
    for name in names:
        path = out_dir / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.StringIO()
        with opener(name) as store:
            count = export_jsonl(store, buffer, with_vectors=with_vectors, area=area)
        atomic_write_bytes(path, buffer.getvalue().encode("utf-8"))
        written.append({"subdir": name, "path": str(path), "count": count})
    return written
