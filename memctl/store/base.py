"""What every store backend shares: validation, ids, the search pipeline and hybrid fusion.

A backend (EmbeddedStore, PostgresStore) supplies the primitives — candidate rows allowed by an
area/filter, dense and keyword rankings over them, rows for keys — and inherits the rest, so
both answer a search the same way: filters before the top-k cut, reciprocal-rank fusion, the
keyword gate, the rare-token rule and `score` = relevance. Rows are addressed by an integer key
(`seq`) that is unique within the backend.
"""

from __future__ import annotations

import abc
import builtins
import json
import os
import string
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Self

from memctl.config.paths import DEFAULT_SUBDIR
from memctl.embeddings import CachedEmbedder, Embedder, ModelInfo, content_hash, make_embedder
from memctl.errors import ModelMismatchError, NotFoundError, UsageError
from memctl.store.doctor_rows import FINDING_KINDS, DoctorRun, Finding
from memctl.store.filters import Filter, compile_filter
from memctl.store.records import (
    AREAS,
    ArchivedMemory,
    DeleteResult,
    HistoryEntry,
    Hit,
    Memory,
    PendingItem,
    StoreList,
    now_iso,
    relevance,
)
from memctl.store.validate import (
    check_area,
    check_metadata,
    check_record,
    check_stored_metadata,
    check_text_size,
    normalised_or_kept,
)

if TYPE_CHECKING:
    import numpy as np

    from memctl.config import Config
    from memctl.search.relevance import Calibration

_ID_ALPHABET = string.ascii_lowercase + string.digits


class _RandomPool:
    """OS randomness fetched 4 KiB at a time: one `urandom` call per id cost 27 µs here (a sandboxed
    syscall), 0.55 s of a 20k import. A forked child starts with an empty pool, so it never
    repeats its parent's ids."""

    SIZE = 4096

    def __init__(self) -> None:
        self.reset()
        os.register_at_fork(after_in_child=self.reset)

    def reset(self) -> None:
        # A new lock too: another thread may have held the old one at the moment of the fork.
        self._lock = threading.Lock()
        self._buffer, self._used = b"", 0

    def take(self, n: int) -> bytes:
        with self._lock:
            if self._used + n > len(self._buffer):
                self._buffer, self._used = os.urandom(self.SIZE), 0
            chunk = self._buffer[self._used : self._used + n]
            self._used += n
            return chunk


_RANDOM = _RandomPool()


def new_id() -> str:
    """10 random characters of [a-z0-9] (~51 bits)."""
    return "".join(_ID_ALPHABET[b % 36] for b in _RANDOM.take(10))


def _stored_record(record: Mapping[str, Any], now: str) -> dict[str, Any]:
    """A memory a store already held, as _prepare_rows inserts it: timestamps in the stored form when they
    read as timestamps, nothing else refused but what no row may hold (metadata that is not JSON, an area
    memctl does not have)."""
    created_at = normalised_or_kept(record.get("created_at")) or now
    return {
        **record,
        "area": check_area(record.get("area") or "main"),
        "metadata": check_stored_metadata(record.get("metadata")),
        "created_at": created_at,
        "updated_at": normalised_or_kept(record.get("updated_at")) or created_at,
    }


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def keywords_of(config: Config, metadata: Mapping[str, Any]) -> str:
    """Metadata values indexed for keyword search only (config keyword_metadata_keys)."""
    values: builtins.list[str] = []
    for key in config["keyword_metadata_keys"]:
        value = metadata.get(key)
        if isinstance(value, list):
            values += [str(v) for v in value if isinstance(v, str | int | float)]
        elif isinstance(value, str | int | float) and not isinstance(value, bool):
            values.append(str(value))
    return " ".join(values)


def iter_chunks(items: Iterable[Any], size: int) -> Iterator[builtins.list[Any]]:
    chunk: builtins.list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


DF_CACHE_MAX = 100_000  # keyword document frequencies kept per store generation (then started afresh)


class PreparedRow(NamedTuple):
    """One validated memory row, in column order; each backend encodes `vector` its own way."""

    id: str
    text: str
    area: str
    created_at: str
    updated_at: str
    metadata: str
    vector: Any
    content_hash: str
    keywords: str


@dataclass(frozen=True)
class StoreSpec:
    """A store as memctl.store resolved it, and how to open it: the URL of its backend's database (None:
    the default backend, folder stores under `root`), the root (also the embedding cache's home), the subdir."""

    url: str | None
    root: Path
    subdir: str = DEFAULT_SUBDIR
    config: Config | None = None
    overrides: dict[str, Any] | None = None
    embedder: Embedder | None = None
    actor: str = "api"
    create: bool = True
    read_only: bool = False  # nothing is created or written (stats, list, export, backup's source)

    @property
    def cache_dir(self) -> Path:
        return self.root / ".cache" / "embeddings"


class StoreBase(abc.ABC):
    """The store contract and its backend-neutral half. Subclasses set config, actor, _embedder, _cache_dir."""

    config: Config
    actor: str
    # Whether texts, metadata and ids may hold U+0000 (PostgreSQL's text and jsonb cannot).
    holds_nul: bool = True
    _embedder: Embedder | None
    _cache_dir: Path | None

    # -- how memctl/store/__init__.py finds and opens a backend's stores -----------------
    # The URL schemes (--store / MEMCTL_STORE / store_url) this backend opens; the default backend
    # (the folder store, first in memctl.store.BACKENDS) has none and gets url None.
    schemes: ClassVar[tuple[str, ...]] = ()
    url_example: ClassVar[str] = ""  # for the hint of a URL no backend opens

    @classmethod
    @abc.abstractmethod
    def open_at(cls, spec: StoreSpec) -> StoreBase:
        """Open the store `spec` names. `spec.create` False: NotFoundError when there is no such store
        (see memctl.open_store)."""
        raise NotImplementedError

    @classmethod
    @abc.abstractmethod
    def stores_at(cls, spec: StoreSpec, *, counts: bool = True) -> StoreList:
        """Every store where `spec` points (its subdir aside), with its memory count (`counts=False`:
        None where a count would mean opening the store)."""
        raise NotImplementedError

    @classmethod
    @abc.abstractmethod
    def location_at(cls, spec: StoreSpec) -> str:
        """What `location` of the store `spec` names would say, without opening it. `spec.create`
        False: NotFoundError when the backend can tell without connecting that the store is not there."""
        raise NotImplementedError

    @classmethod
    def where_at(cls, spec: StoreSpec) -> str:
        """Where the backend keeps the stores `spec` points to, for messages (no secret, no connection):
        this default says the root folder."""
        return str(spec.root)

    @classmethod
    def folder_at(cls, spec: StoreSpec) -> Path | None:
        """The store's folder when the backend keeps a store as a memctl store folder, which
        memctl/lifecycle/backup.py then copies file by file and restores by a folder swap; None (this
        default) when the store is rows elsewhere: backup copies them through iter_rows/put_rows
        and restore replaces them in place (has_content, lock_writers, clear)."""
        return None

    # -- replacing a store's rows in place (restore-backup of a store that is no folder) --
    def has_content(self) -> bool:
        """True when the store holds memories, history, archive rows, behaviour rules or knowledge state.
        Needed only where folder_at is None (memctl/lifecycle/backup.py reads a folder store's files instead)."""
        raise NotImplementedError(f"{type(self).__name__} is restored by a folder swap (folder_at)")

    def lock_writers(self) -> None:
        """Inside a transaction: make every other writer of the store wait until it ends (reads go on).
        Needed only where folder_at is None (a folder store is swapped whole instead)."""
        raise NotImplementedError(f"{type(self).__name__} is restored by a folder swap (folder_at)")

    def clear(self) -> None:
        """Delete everything the store holds (its model record too), joining an open transaction.
        Needed only where folder_at is None (a folder store is swapped whole instead)."""
        raise NotImplementedError(f"{type(self).__name__} is restored by a folder swap (folder_at)")

    # -- to be provided by a backend ----------------------------------------------------
    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The store's name in messages (its subdir)."""
        raise NotImplementedError

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection and the embedder."""
        raise NotImplementedError

    @abc.abstractmethod
    def __len__(self) -> int:
        """How many memories the store holds."""
        raise NotImplementedError

    def _is_empty(self) -> bool:
        return len(self) == 0

    @abc.abstractmethod
    def model_info(self) -> dict[str, Any] | None:
        """The {provider, model, dimension} the stored vectors were made with; None before the first vector."""
        raise NotImplementedError

    def check_model(self, info: ModelInfo | None = None) -> None:
        """Refuse to mix vectors of different models in one store (an interrupted reindex too)."""
        info = info or self.embedder.info
        reindexing, stored = self._model_state()
        if reindexing:
            raise ModelMismatchError(
                f"a reindex of store {self.name!r} was interrupted", hint="run `memctl reindex` to finish it"
            )
        if stored is None or self._is_empty():
            return
        if (stored.get("provider"), stored.get("model")) != (info.provider, info.model):
            raise ModelMismatchError(
                f"store {self.name!r} was built with embedding model "
                f"{stored.get('provider')}:{stored.get('model')}, but the configured model is {info.label()}",
                hint="run `memctl reindex` to re-embed it with the configured model, or change embedding_model back",
            )

    @abc.abstractmethod
    def _model_state(self) -> tuple[Any, dict[str, Any] | None]:
        """(the state of an unfinished reindex or None, model_info() when there is none), in one read where
        the backend can."""

    def _record_model(self, info: ModelInfo, dimension: int) -> None:
        """Make the store's model record say `info` and `dimension` (joins an open transaction)."""
        if self.model_info() != {"provider": info.provider, "model": info.model, "dimension": int(dimension)}:
            self._write_model(info, dimension)

    @abc.abstractmethod
    def _write_model(self, info: ModelInfo, dimension: int) -> None:
        """Write the store's model record (joins an open transaction)."""

    @abc.abstractmethod
    def get(self, ids: Sequence[str]) -> builtins.list[Memory]:
        """Memories for the ids that exist, in the order asked."""
        raise NotImplementedError

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Where the store is, for messages and `stats` (a folder, or a database URL without password)."""
        raise NotImplementedError

    def find_exact(
        self, text: str, area: str | None = None, filter: str | Filter | None = None
    ) -> builtins.list[Memory]:
        """The memories whose text is exactly `text` (in `area`, matching `filter`), oldest first."""
        if area:
            check_area(area)
        flt = self.compile(filter)
        return [m for m in self._exact_rows(text, area) if flt is None or flt.matches(m.filter_names())]

    @abc.abstractmethod
    def _exact_rows(self, text: str, area: str | None) -> builtins.list[Memory]:
        """The memories with this content hash and text (in `area`), oldest first."""

    def list(
        self, *, area: str | None = None, filter: str | Filter | None = None, limit: int = 20, offset: int = 0
    ) -> tuple[builtins.list[Memory], int]:
        """One page of memories, newest first, and how many match in all."""
        if area:
            check_area(area)
        flt = self.compile(filter)
        if flt is None:
            return self._page(area, limit, offset)
        matched = [seq for seq, _ in self._filtered(area, flt, order="created_at DESC, seq DESC")]
        page = matched[offset : offset + limit]
        rows = dict(self._seq_rows(page))
        return [rows[seq] for seq in page if seq in rows], len(matched)

    @abc.abstractmethod
    def _page(self, area: str | None, limit: int, offset: int) -> tuple[builtins.list[Memory], int]:
        """`list` with no filter: one page newest first (created_at, then key), and the total in `area`."""

    @abc.abstractmethod
    def _seq_rows(self, seqs: Sequence[int]) -> Iterator[tuple[int, Memory]]:
        """(key, memory) of the rows with these keys that exist, in any order."""

    @abc.abstractmethod
    def _filtered(self, area: str | None, flt: Filter, order: str = "seq") -> builtins.list[tuple[int, str]]:
        """(key, id) of the memories in `area` that `flt` matches, in `order` (an ORDER BY of the memory columns)."""

    @abc.abstractmethod
    def derived_ids(self, ids: Sequence[str]) -> builtins.list[str]:
        """Ids derived (transitively, through provenance links) from `ids`, excluding `ids`, oldest first."""
        raise NotImplementedError

    def reindex(self, batch_size: int = 256, progress: Any = None) -> int:
        """Re-embed every memory with the configured model, then rebuild the index; the number re-embedded.

        Resumable: progress is committed with each batch, so a killed reindex continues where it stopped.
        """
        info = self.embedder.info
        state = self._reindex_state()
        resuming = bool(state) and state.get("model") == info.label()
        last_seq = int(state["last_seq"]) if resuming else 0
        dimension = state.get("dimension") if resuming else None
        total, done = len(self), 0
        with self._reindexing():  # before the first write: the old model record may be what is broken
            with self._write():
                self._set_reindex_state({"model": info.label(), "last_seq": last_seq, "dimension": dimension})
            while rows := self._texts_after(last_seq, batch_size):
                vectors = self.embedder.embed([text for _, text in rows])
                dimension, last_seq = int(vectors.shape[1]), rows[-1][0]
                with self._write():
                    self._set_vectors([(seq, vector) for (seq, _), vector in zip(rows, vectors, strict=True)])
                    self._set_reindex_state({"model": info.label(), "last_seq": last_seq, "dimension": dimension})
                done += len(rows)
                if progress:
                    progress(done, total)
            with self._write():
                if dimension is not None:
                    self._write_model(info, int(dimension))
                self._set_reindex_state(None)
        self.rebuild_index()
        return done

    def _reindexing(self) -> AbstractContextManager[Any]:
        """Held while `reindex` runs (a backend with derived files defers their upkeep)."""
        from contextlib import nullcontext

        return nullcontext()

    @abc.abstractmethod
    def _reindex_state(self) -> Any:
        """The progress record of an unfinished reindex ({model, last_seq, dimension}), or None."""

    @abc.abstractmethod
    def _set_reindex_state(self, value: Any) -> None:
        """Write (None: clear) the reindex progress record; joins an open transaction."""

    @abc.abstractmethod
    def _texts_after(self, seq: int, limit: int) -> builtins.list[tuple[int, str]]:
        """(key, text) of at most `limit` memories with keys above `seq`, in key order."""

    @abc.abstractmethod
    def _set_vectors(self, vectors: Sequence[tuple[int, np.ndarray]]) -> None:
        """Replace the vectors of these keys; joins an open transaction."""

    @abc.abstractmethod
    def integrity_check(self) -> str:
        """ "ok", or what is wrong with the stored data."""
        raise NotImplementedError

    @abc.abstractmethod
    def vector_count(self) -> int:
        """How many vectors the vector index covers (0 before the first vector): `reindex` checks it."""
        raise NotImplementedError

    def bulk(self) -> AbstractContextManager[Any]:
        """Context for many writes in a row; backends with deferred maintenance override it."""
        from contextlib import nullcontext

        return nullcontext(self)

    def _checked_dimension(self, records: Sequence[Mapping[str, Any]], vectors: np.ndarray, info: ModelInfo) -> int:
        """The dimension of a batch about to be inserted (0 for an empty batch), once the model, the
        record/vector counts and the store's dimension agree."""
        self.check_model(info)
        if len(records) != len(vectors):
            raise UsageError(f"{len(records)} records but {len(vectors)} vectors")
        dim = int(vectors.shape[1]) if len(records) else 0
        known_dim = self.dimension()
        if known_dim is not None and dim and dim != known_dim and not self._is_empty():
            raise ModelMismatchError(
                f"vectors of dimension {dim} cannot join a store of dimension {known_dim}", hint="run `memctl reindex`"
            )
        return dim

    def _prepare_rows(
        self,
        records: Sequence[Mapping[str, Any]],
        vectors: np.ndarray,
        taken: set[str],
        on_conflict: str,
        op: str,
        actor: str | None,
        stored: bool = False,
    ) -> tuple[builtins.list[PreparedRow], builtins.list[tuple[Any, ...]]]:
        """Validated rows to insert and their history rows; resolves id conflicts (skip / error / new-id).
        `stored`: memories a store already held (migrate, restore) keep what memctl once accepted; their
        timestamps only take the stored form."""
        now = now_iso()
        rows: builtins.list[PreparedRow] = []
        history: builtins.list[tuple[Any, ...]] = []
        for record, vector in zip(records, vectors, strict=True):
            rid = record.get("id") or new_id()
            if rid in taken:
                if on_conflict == "skip":
                    continue
                if on_conflict == "error":
                    raise UsageError(f"id {rid!r} already exists in the store", hint="use --on-conflict skip or new-id")
                rid = new_id()
            taken.add(rid)
            checked = (
                _stored_record(record, now)
                if stored
                else check_record(record, now, int(self.config.get("max_text_bytes") or 0))
            )
            meta, area = checked["metadata"], checked["area"]
            meta_json = json.dumps(meta, ensure_ascii=False)
            rows.append(
                PreparedRow(
                    rid,
                    record["text"],
                    area,
                    checked["created_at"],
                    checked["updated_at"],
                    meta_json,
                    vector,
                    content_hash(record["text"]),
                    self._keywords(meta),
                )
            )
            history.append((rid, op, actor or self.actor, now, area, None, record["text"], None, meta_json))
        return rows, history

    def insert_records(
        self,
        records: Sequence[Mapping[str, Any]],
        vectors: np.ndarray,
        info: ModelInfo,
        *,
        actor: str | None = None,
        op: str = "add",
        on_conflict: str = "error",
        links: Mapping[str, Sequence[str]] | None = None,
        stored: bool = False,
    ) -> builtins.list[str]:
        """Insert fully prepared records (ids and timestamps optional) with their vectors, atomically.

        on_conflict: "error" (refuse the batch), "skip" (keep the stored one) or "new-id".
        Every record is validated (memctl.store.validate.check_record) unless `stored` (memories a store
        held: migrate, restore).
        Returns the ids inserted (skipped records are left out).
        """
        dim = self._checked_dimension(records, vectors, info)
        if dim:
            self._ensure_vector_index(dim)
        inserted: builtins.list[str] = []
        with self._insert_errors(), self._write():
            if dim:
                self._record_model(info, dim)
            taken = self._existing_ids([r["id"] for r in records if r.get("id")])
            prepared, history = self._prepare_rows(records, vectors, taken, on_conflict, op, actor, stored)
            inserted += [r.id for r in prepared]
            self._insert_prepared(prepared, history)
            for kind, parents in (links or {}).items():
                for rid in inserted:
                    self._link(parents, rid, kind)
        return inserted

    def _ensure_vector_index(self, dim: int) -> None:  # noqa: B027 - a hook: most backends need nothing here
        """Make sure an index serves vectors of `dim` dimensions; called outside any transaction."""

    def _insert_errors(self) -> AbstractContextManager[Any]:
        """Around an insert: turns the backend's errors about the rows (an id taken meanwhile, a text it
        cannot store) into UsageError."""
        from contextlib import nullcontext

        return nullcontext()

    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        """The ids among `ids` that a memory of this store has."""
        return self._existing_ids(ids) if ids else set()

    @abc.abstractmethod
    def _existing_ids(self, ids: Sequence[str]) -> set[str]:
        """The ids among `ids` that a memory has."""

    @abc.abstractmethod
    def _lock_ids(self, ids: Sequence[str]) -> set[str]:
        """Inside a write transaction: the ids among `ids` that a memory has, their rows kept from other
        writers until it ends."""

    @abc.abstractmethod
    def _insert_prepared(self, rows: Sequence[PreparedRow], history: Sequence[tuple[Any, ...]]) -> None:
        """Insert validated rows and their history rows (memory_id, op, actor, at, area, old_text, new_text,
        old_metadata, new_metadata); joins an open transaction."""

    @abc.abstractmethod
    def _write(self) -> AbstractContextManager[Any]:
        """One atomic write transaction (nested uses join it); yields the backend's connection."""

    @contextmanager
    def transaction(self) -> Iterator[Self]:
        """Group writes into one atomic transaction (nested uses join it). Embed before entering: embedding
        inside holds the store's writers back while the model runs."""
        with self._write():
            yield self

    def update(
        self,
        memory_id: str,
        *,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        replace_metadata: bool = False,
        unset: Sequence[str] = (),
        area: str | None = None,
        actor: str | None = None,
        op: str = "update",
    ) -> Memory:
        """Change text (re-embedded) and/or metadata in place; history keeps the old version."""
        old = self.get_one(memory_id)
        new_text = self._check_text(text) if text is not None else old.text
        new_meta = {} if replace_metadata else dict(old.metadata)
        new_meta.update(check_metadata(metadata))
        for key in unset:
            new_meta.pop(key, None)
        new_area = check_area(area) if area is not None else old.area
        vector = self.embed([new_text])[0] if new_text != old.text else None
        with self._write():
            self._lock_ids([memory_id])  # concurrent updates of one memory queue up
            current = self.get_one(memory_id)  # it may have changed or gone while we embedded
            self._update_row(memory_id, new_text if vector is not None else None, vector, new_meta, new_area, now_iso())
            self._history(
                memory_id,
                op,
                area=new_area,
                old_text=current.text,
                new_text=new_text,
                old_metadata=current.metadata,
                new_metadata=new_meta,
                actor=actor,
            )
        return self.get_one(memory_id)

    @abc.abstractmethod
    def _update_row(
        self,
        memory_id: str,
        text: str | None,
        vector: np.ndarray | None,
        metadata: dict[str, Any],
        area: str,
        updated_at: str,
    ) -> None:
        """Set a memory's metadata (and keywords), area and updated_at, and its text, vector and content hash
        when `text` is not None; joins an open transaction."""

    @abc.abstractmethod
    def _history(
        self,
        memory_id: str,
        op: str,
        *,
        area: str | None = None,
        old_text: str | None = None,
        new_text: str | None = None,
        old_metadata: Any = None,
        new_metadata: Any = None,
        actor: str | None = None,
    ) -> None:
        """Append one history entry, stamped now; joins an open transaction."""

    def delete(
        self,
        ids: Sequence[str],
        *,
        cascade: bool = True,
        actor: str | None = None,
        op: str = "delete",
        archive: bool = True,
    ) -> DeleteResult:
        """Delete ids (and, with cascade, what was derived from them) in one transaction.

        `archive` keeps each removed row (vector included) in the archive for `restore`.
        """
        ids = list(dict.fromkeys(ids))
        with self._write():
            plan = self._delete_plan(ids, self._lock_ids(ids), cascade)
            if plan.cascaded:
                self._lock_ids(plan.cascaded)
            removed = plan.deleted + plan.cascaded
            for memory in self.get(removed):
                self._history(
                    memory.id, op, area=memory.area, old_text=memory.text, old_metadata=memory.metadata, actor=actor
                )
            if removed:
                if archive:
                    self._archive(removed, op, actor)
                self._delete_rows(removed)
        return plan

    def delete_plan(self, ids: Sequence[str], *, cascade: bool = True) -> DeleteResult:
        """What `delete` would remove now (`delete --dry-run`): the ids found, what derives from them, the missing."""
        ids = list(dict.fromkeys(ids))
        return self._delete_plan(ids, self._existing_ids(ids), cascade)

    def _delete_plan(self, ids: builtins.list[str], present: set[str], cascade: bool) -> DeleteResult:
        targets = [i for i in ids if i in present]
        cascaded = [i for i in self.derived_ids(targets) if i not in present] if cascade else []
        return DeleteResult(deleted=targets, cascaded=cascaded, missing=[i for i in ids if i not in present])

    @abc.abstractmethod
    def _archive(self, ids: Sequence[str], op: str, actor: str | None) -> None:
        """Copy rows about to be removed into the archive (one version per id: the latest)."""

    @abc.abstractmethod
    def _delete_rows(self, ids: Sequence[str]) -> None:
        """Remove these memories' rows; joins an open transaction."""

    def link(self, parent_ids: Sequence[str], child_id: str, kind: str) -> None:
        """Record that `child_id` derives from `parent_ids` (a provenance link of `kind`)."""
        with self._write():
            self._link(parent_ids, child_id, kind)

    @abc.abstractmethod
    def _link(self, parent_ids: Sequence[str], child_id: str, kind: str) -> None:
        """Insert provenance links stamped now (existing ones are kept); joins an open transaction."""

    @abc.abstractmethod
    def links(self) -> builtins.list[tuple[str, str, str, str]]:
        """Every provenance link of the store: (parent_id, child_id, kind, created_at)."""
        raise NotImplementedError

    @abc.abstractmethod
    def touch(self, ids: Sequence[str], at: str | None = None) -> int:
        """Record that `ids` were just read (accessed_at); best effort, returns the rows touched."""
        raise NotImplementedError

    @abc.abstractmethod
    def history(self, memory_id: str | None = None, limit: int | None = None) -> builtins.list[HistoryEntry]:
        """History entries, newest first (of one memory, or all), at most `limit`."""
        raise NotImplementedError

    @abc.abstractmethod
    def append_history(self, entries: Sequence[HistoryEntry]) -> None:
        """Copy history entries (oldest first) as they are: op, actor and time kept."""
        raise NotImplementedError

    @abc.abstractmethod
    def iter_all(self, *, area: str | None = None, with_vectors: bool = False) -> Iterator[tuple[Memory, bytes | None]]:
        """Every memory (in `area`), oldest first, with its vector bytes when asked."""
        raise NotImplementedError

    @abc.abstractmethod
    def iter_with_access(self, *, area: str | None = None) -> Iterator[tuple[Memory, str | None]]:
        """Every memory (oldest first) with when `load` last returned it (None: never)."""
        raise NotImplementedError

    @abc.abstractmethod
    def rebuild_index(self) -> int:
        """Rebuild (or make sure of) the vector index from the stored vectors; the vectors it covers."""
        raise NotImplementedError

    @abc.abstractmethod
    def compact(self) -> bool:
        """Reclaim the space and traces of removed rows; False when that could not be done fully."""
        raise NotImplementedError

    # -- removal receipts (memctl.lifecycle.receipts): what a removal left behind, by location ------------
    @abc.abstractmethod
    def ids_with_hashes(self, hashes: set[str]) -> builtins.list[str]:
        """Ids of the live memories whose text has one of these content hashes."""
        raise NotImplementedError

    @abc.abstractmethod
    def index_strays(self) -> dict[str, int]:
        """Entries of the derived indexes that belong to no live memory, by index ({"vector_index": n,
        "keyword_index": n}), after the indexes are brought up to date and written where they persist.
        0 everywhere proves that nothing removed can be found through them."""
        raise NotImplementedError

    def _embed_query(self, query: str) -> np.ndarray:
        raise NotImplementedError

    def _start_query_embedding(
        self, queries: builtins.list[str], scan: bool = False
    ) -> Callable[[], builtins.list[np.ndarray]]:
        """Start embedding `queries`; the function returned waits for their vectors, in order. Here they are
        embedded at once, one by one through `_embed_query`; a backend that can run the model on a thread of
        its own returns before it is done, and the search reads its keyword side meanwhile. `scan`: the dense
        side will rank the whole store with the last vector (a backend may start that there too)."""
        vectors = [self._embed_query(query) for query in queries]
        return lambda: vectors

    def _candidates(self, area: str | None, flt: Filter | None) -> Collection[int] | None:
        """Keys allowed by area/filter (None = all). Applied before the top-k cut."""
        raise NotImplementedError

    def matching_ids(self, filter: str | Filter, area: str | None = None) -> set[str]:
        """Ids of the memories (in `area`) a filter matches, selected in the database as `_candidates` selects
        them (memctl/store/filter_sql.py); `prune --filter` uses it."""
        flt = self.compile(filter)
        if flt is None:
            raise UsageError("matching_ids needs a filter")
        return {rid for _, rid in self._filtered(area, flt)}

    def _dense_pairs(
        self, vector: np.ndarray, k: int, only: Collection[int] | None
    ) -> builtins.list[tuple[int, float]]:
        """Top-k (key, inner product) among `only` (None: all), best first."""
        raise NotImplementedError

    def _relevance_of(self, keys: builtins.list[int], vector: np.ndarray) -> dict[int, float]:
        raise NotImplementedError

    @abc.abstractmethod
    def _keys_of(self, ids: Sequence[str], area: str | None) -> dict[int, str]:
        """Key -> id of the listed memories that exist (in `area`)."""

    def scores_of(self, vector: np.ndarray, ids: Sequence[str], area: str | None = None) -> dict[str, float]:
        """Relevance `(1 + cosine) / 2` of each listed memory (in `area`) to `vector`; absent ids left out."""
        keys = self._keys_of(list(dict.fromkeys(ids)), area)
        return {keys[key]: score for key, score in self._relevance_of(list(keys), vector).items()}

    def _keyword_pairs(
        self,
        query: str,
        k: int,
        area: str | None,
        only: Collection[int] | None,
        common_df: int,
        common_text_df: int = 0,
    ) -> builtins.list[tuple[int, float]]:
        """Top-k (key, keyword score; higher is better) among memories in `area` / `only`, leaving out
        query words found in over `common_df` memories (when > 50) or, when > 0, in over
        `common_text_df` memory texts (unless that leaves none)."""
        raise NotImplementedError

    def _rare_tokens(self, tokens: Sequence[str], max_df: int) -> set[str]:
        raise NotImplementedError

    def _common_tokens(self, tokens: Sequence[str], min_df: int) -> set[str]:
        """The tokens found in more than `min_df` memories."""
        raise NotImplementedError

    def _seq_hits(self, pairs: builtins.list[tuple[int, float]]) -> builtins.list[tuple[int, Hit]]:
        """(key, Hit) for the pairs whose rows still exist, in the given order."""
        raise NotImplementedError

    # -- the review queue (memctl/review) ----------------------------------------------
    # Pending items live in a table of their own: no vector, no keyword row, so nothing that reads
    # memories (search, list, load, recall, consolidation, export) ever sees one.
    def add_pending(
        self,
        text: str,
        area: str = "fragments",
        metadata: Mapping[str, Any] | None = None,
        reason: str = "",
        *,
        actor: str | None = None,
    ) -> str:
        """Queue `text` for review (not embedded, not searchable); its id. The same text already waiting in
        the same area is not queued twice: its id is returned (memorize run again on one transcript)."""
        text = self._check_text(text)
        check_area(area)
        meta = check_metadata(metadata)
        digest = content_hash(text)
        with self._write():
            waiting = self._pending_with_hash(digest, area, text)
            if waiting is not None:
                return waiting
            rid = self._unused_id()
            item = PendingItem(
                rid,
                text,
                area,
                now_iso(),
                str(reason or ""),
                meta,
                _text_or_none(meta.get("source")),
                _text_or_none(meta.get("transcript")),
            )
            self._insert_pending([item])
            self._history(rid, "pending", area=area, new_text=text, new_metadata=meta, actor=actor)
        return rid

    def _unused_id(self) -> str:
        """A new id that no memory, pending item or archived memory has (restore finds archived ones by id)."""
        while True:
            rid = new_id()
            if not self._existing_ids([rid]) and not self._pending_rows([rid]) and self.archived(rid) is None:
                return rid

    def pending_items(
        self, limit: int | None = None, offset: int = 0, area: str | None = None
    ) -> builtins.list[PendingItem]:
        """Pending items, oldest first (the order a queue is worked through), in `area` when given."""
        if area:
            check_area(area)
        return self._pending_page(limit, offset, area)

    def get_pending(self, ids: Sequence[str]) -> builtins.list[PendingItem]:
        """The pending items with these ids that exist, in the order asked."""
        found = {item.id: item for item in self._pending_rows(list(dict.fromkeys(ids)))}
        return [found[i] for i in ids if i in found]

    def count_pending(self, area: str | None = None) -> int:
        """How many items wait for review (in `area`)."""
        if area:
            check_area(area)
        return self._pending_count(area)

    def require_pending(self, ids: Sequence[str]) -> builtins.list[PendingItem]:
        """The pending items `ids` name (duplicates once); NotFoundError naming the first that is not pending."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            raise UsageError("no pending id given", hint="`memctl review list` shows the ids")
        items = self.get_pending(ids)
        missing = [i for i in ids if i not in {item.id for item in items}]
        if missing:
            raise NotFoundError(
                f"no pending item {missing[0]!r} in store {self.name!r}"
                + (f" (nor {len(missing) - 1} more of the ids)" if len(missing) > 1 else "")
                + "; nothing was changed",
                hint="`memctl review list` shows what waits; `memctl history ID` what became of it",
            )
        return items

    def approve_pending(self, ids: Sequence[str], text: str | None = None, actor: str = "review") -> builtins.list[str]:
        """Make pending items memories (all or none): embedded now, inserted with the pending id, the item's
        area, metadata and created_at, and removed from the queue in one transaction; history records op
        `approve` by `actor`. `text` (one id only) replaces the text first (edit, then approve)."""
        items = self.require_pending(ids)
        if text is not None and len(items) != 1:
            raise UsageError("--text edits one item: give exactly one id with it", hint="approve the others apart")
        texts = [self._check_text(text) if text is not None else item.text for item in items]
        vectors = self.embed(texts)  # before the transaction: the model does not hold writers back
        info = self.embedder.info
        if len(items):
            self._ensure_vector_index(int(vectors.shape[1]))
        stamp = now_iso()
        records = [
            {
                "id": i.id,
                "text": t,
                "area": i.area,
                "created_at": i.created_at,
                "updated_at": stamp,
                "metadata": i.metadata,
            }
            for i, t in zip(items, texts, strict=True)
        ]
        approved = [item.id for item in items]
        with self._write():
            self.require_pending(approved)  # another reviewer may have decided them while we embedded
            self.insert_records(records, vectors, info, actor=actor, op="approve", on_conflict="error")
            self._delete_pending(approved)
            self.touch(approved, at=stamp)  # an approval is a use: not pruned tonight for never being read
        return approved

    def reject_pending(self, ids: Sequence[str], actor: str = "review") -> builtins.list[str]:
        """Remove pending items (all or none), kept in the archive (op `reject`, no vector) so that `memctl
        restore ID` brings one back as a memory; history records op `reject` by `actor`."""
        with self._write():
            items = self.require_pending(ids)
            rejected = [item.id for item in items]
            stamp = now_iso()
            for item in items:
                self._history(
                    item.id, "reject", area=item.area, old_text=item.text, old_metadata=item.metadata, actor=actor
                )
            self.unarchive(rejected)  # one archived version per id: this one
            self.put_archive(
                [
                    ArchivedMemory(
                        Memory(item.id, item.text, item.area, item.created_at, stamp, item.metadata),
                        None,
                        None,
                        None,
                        stamp,
                        "reject",
                        actor,
                    )
                    for item in items
                ]
            )
            self._delete_pending(rejected)
        return rejected

    def requeue_pending(self, item: PendingItem, actor: str = "review") -> str:
        """Put a decided item back in the queue with its own id (undo in `memctl review`): the memory an
        approval made must be gone already, a rejection's archived copy goes; history records `requeue`."""
        with self._write():
            if self._existing_ids([item.id]) or self._pending_rows([item.id]):
                raise UsageError(f"{item.id} is a memory or waits already: it cannot be queued again")
            self.unarchive([item.id])
            self._insert_pending([item])
            self._history(
                item.id, "requeue", area=item.area, new_text=item.text, new_metadata=item.metadata, actor=actor
            )
        return item.id

    def put_pending(self, items: Sequence[PendingItem]) -> None:
        """Insert pending items exactly as given, with no history entries (a backup being restored, a
        migration). Joins an open transaction."""
        with self._write():
            self._insert_pending(items)

    @abc.abstractmethod
    def _insert_pending(self, items: Sequence[PendingItem]) -> None:
        """Insert pending rows as given (content hash computed here); joins an open transaction."""

    @abc.abstractmethod
    def _pending_with_hash(self, digest: str, area: str, text: str) -> str | None:
        """The id of a pending item in `area` with this content hash and text, if one waits."""

    @abc.abstractmethod
    def _pending_rows(self, ids: Sequence[str]) -> builtins.list[PendingItem]:
        """The pending items with these ids, in any order."""

    @abc.abstractmethod
    def _pending_page(self, limit: int | None, offset: int, area: str | None) -> builtins.list[PendingItem]:
        """Pending items oldest first (created_at, then id), `limit` None: all."""

    @abc.abstractmethod
    def _pending_count(self, area: str | None) -> int:
        """How many pending items (in `area`)."""

    @abc.abstractmethod
    def _delete_pending(self, ids: Sequence[str]) -> None:
        """Remove these pending rows; joins an open transaction."""

    # -- doctor runs (memctl/review/doctor.py; m010_doctor_runs) -------------------------
    def record_doctor_run(self, at: str, figures: Mapping[str, Any], findings: Sequence[Finding]) -> int:
        """Keep one `memctl doctor` run and make its findings the store's current ones (the previous run's
        go), in one transaction; the run's number."""
        unknown = {f.kind for f in findings} - set(FINDING_KINDS)
        if unknown:
            raise UsageError(f"unknown finding kinds {sorted(unknown)}")
        with self._write():
            run = self._insert_doctor_run(at, json.dumps(dict(figures), ensure_ascii=False))
            self._replace_findings(run, findings)
        return run

    def doctor_runs(self, last: int | None = None) -> builtins.list[DoctorRun]:
        """The kept doctor runs, oldest first: all, or the `last` ones."""
        return self._doctor_runs(last)

    def doctor_findings(self, kind: str | None = None) -> builtins.list[Finding]:
        """The latest run's findings (of `kind`), by kind then memory id."""
        if kind is not None and kind not in FINDING_KINDS:
            raise UsageError(f"unknown kind {kind!r}", hint=f"use one of: {', '.join(FINDING_KINDS)}")
        return self._doctor_findings(kind)

    def _insert_doctor_run(self, at: str, figures: str) -> int:
        """Insert a run row (joins the open transaction); its number."""
        raise NotImplementedError

    def _replace_findings(self, run: int, findings: Sequence[Finding]) -> None:
        """Delete every finding, then insert these (joins the open transaction)."""
        raise NotImplementedError

    def _doctor_runs(self, last: int | None) -> builtins.list[DoctorRun]:
        raise NotImplementedError

    def _doctor_findings(self, kind: str | None) -> builtins.list[Finding]:
        raise NotImplementedError

    # -- the archive, history purging, size (memctl/lifecycle/) -------------------------
    @abc.abstractmethod
    def archived(self, memory_id: str) -> ArchivedMemory | None:
        """The archived (last removed) version of a memory, if the archive holds one."""
        raise NotImplementedError

    @abc.abstractmethod
    def iter_archive(self) -> Iterator[ArchivedMemory]:
        """Every archived memory, oldest archiving first."""
        raise NotImplementedError

    @abc.abstractmethod
    def unarchive(self, ids: Sequence[str]) -> None:
        """Drop archived versions (a restore brought them back). Joins an open transaction."""
        raise NotImplementedError

    @abc.abstractmethod
    def forget_text(self, ids: Sequence[str]) -> None:
        """History keeps who did what and when for these ids, not the text; the archive drops them."""
        raise NotImplementedError

    @abc.abstractmethod
    def purge_counts(self, before: str | None) -> tuple[int, int]:
        """(history entries, archived memories) older than `before` (ISO time; None: all)."""
        raise NotImplementedError

    @abc.abstractmethod
    def purge_rows(self, before: str | None, *, found: Callable[[set[str]], None] | None = None) -> set[str]:
        """Delete those history entries and archived memories in one transaction; return the content
        hashes of the texts they held that no live memory holds (for the embedding cache). `found`
        gets those hashes inside the transaction, before anything is deleted (to record them durably)."""
        raise NotImplementedError

    @abc.abstractmethod
    def hashes_used_elsewhere(self, hashes: set[str]) -> set[str]:
        """The hashes among `hashes` that memories of other stores sharing this store's embedding
        cache hold (their cache entries must stay)."""
        raise NotImplementedError

    @abc.abstractmethod
    def size_bytes(self) -> int:
        """What the store occupies: its folder's files, or its rows in PostgreSQL."""
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        """What `memctl stats` shows for this store."""
        areas = {area: {"count": 0, "knowledge": 0, "conversation": 0} for area in AREAS}
        for area, count, knowledge in self._area_counts():
            areas[area] = {"count": count, "knowledge": knowledge, "conversation": count - knowledge}
        oldest, newest, never, last = self._age_summary()
        archived, history = self._log_counts()
        knowledge = sum(a["knowledge"] for a in areas.values())
        count = sum(a["count"] for a in areas.values())
        return {
            "subdir": self.name,
            "path": self.location,
            "count": count,
            "areas": areas,
            "knowledge": knowledge,
            "conversation": count - knowledge,
            "oldest": oldest,
            "newest": newest,
            "never_accessed": never,
            "last_accessed": last,
            "archived": archived,
            "history": history,
            "pending": self.count_pending(),
            "bytes": self.size_bytes(),
            "model": self.model_info(),
        }

    @abc.abstractmethod
    def _area_counts(self) -> Iterable[tuple[str, int, int]]:
        """(area, memories, knowledge chunks among them) of each area that holds memories."""

    @abc.abstractmethod
    def _age_summary(self) -> tuple[str | None, str | None, int, str | None]:
        """(oldest created_at, newest created_at, memories never accessed, last accessed_at)."""

    @abc.abstractmethod
    def _log_counts(self) -> tuple[int, int]:
        """(archived memories, history entries)."""

    # -- behaviour rules (memctl/behaviour.py) -------------------------------------------
    @property
    @abc.abstractmethod
    def behaviour_location(self) -> str:
        """Where the rules are kept, for messages."""
        raise NotImplementedError

    @abc.abstractmethod
    def read_behaviour(self) -> str | None:
        """The store's behaviour rules; None when it has none (the defaults apply)."""
        raise NotImplementedError

    @abc.abstractmethod
    def write_behaviour(self, rules: str) -> None:
        """Replace the rules atomically."""
        raise NotImplementedError

    # -- knowledge import state (memctl/knowledge/sync.py) ------------------------------------
    @abc.abstractmethod
    def knowledge_chunks(self) -> Sequence[tuple[Any, ...]]:
        """(id, area, knowledge_folder, source_path, source_checksum, file_type, chunk) of every
        knowledge chunk (metadata `knowledge_source: true` with a folder and path), oldest first."""
        raise NotImplementedError

    @abc.abstractmethod
    def knowledge_state(self) -> dict[str, Any]:
        """The saved state of knowledge imports (memctl.knowledge.sync.state_document's shape); {} if none."""
        raise NotImplementedError

    @abc.abstractmethod
    def save_knowledge_state(self, document: dict[str, Any]) -> None:
        """Replace the saved knowledge state atomically (writing only what changed)."""
        raise NotImplementedError

    @abc.abstractmethod
    def knowledge_lock(self) -> AbstractContextManager[None]:
        """Held by a knowledge import from start to end, so two imports into one store never interleave."""
        raise NotImplementedError

    @abc.abstractmethod
    def vectors_for_hashes(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors of memories whose text has these content hashes (one per hash)."""
        raise NotImplementedError

    @abc.abstractmethod
    def known_hashes(self, hashes: Sequence[str]) -> set[str]:
        """The content hashes among `hashes` that some memory's text has."""
        raise NotImplementedError

    @abc.abstractmethod
    def memories_with_hashes(self, hashes: Sequence[str]) -> builtins.list[Memory]:
        """The memories whose text has one of these content hashes (an import's duplicate check)."""
        raise NotImplementedError

    # -- whole-store copies (memctl/lifecycle/backup.py) -------------------------------------------
    def snapshot(self) -> AbstractContextManager[Any]:
        """Reads inside see one consistent state of the store (writers go on)."""
        from contextlib import nullcontext

        return nullcontext(self)

    @abc.abstractmethod
    def iter_rows(self) -> Iterator[tuple[Memory, bytes, str | None]]:
        """Every memory, oldest first, with its vector (float32 bytes) and last access time."""
        raise NotImplementedError

    @abc.abstractmethod
    def put_rows(self, rows: Sequence[tuple[Memory, bytes, str | None]], info: ModelInfo, dimension: int) -> None:
        """Insert memories exactly as given (ids, timestamps, access times, vectors), with no history
        entries: a backup being restored. Joins an open transaction."""
        raise NotImplementedError

    def _restored_row(self, memory: Memory, vector: Any) -> PreparedRow:
        """`memory` as the columns of its row, ids and times as given (put_rows: a backup being restored)."""
        metadata = json.dumps(memory.metadata, ensure_ascii=False)
        return PreparedRow(
            memory.id,
            memory.text,
            memory.area,
            normalised_or_kept(memory.created_at) or memory.created_at,
            normalised_or_kept(memory.updated_at) or memory.updated_at,
            metadata,
            vector,
            content_hash(memory.text),
            self._keywords(memory.metadata),
        )

    @abc.abstractmethod
    def put_links(self, links: Sequence[tuple[str, str, str, str]]) -> None:
        """Insert provenance links (parent_id, child_id, kind, created_at) as they are."""
        raise NotImplementedError

    @abc.abstractmethod
    def put_archive(self, rows: Sequence[ArchivedMemory]) -> None:
        """Insert archived memories as they are."""
        raise NotImplementedError

    # -- shared --------------------------------------------------------------------------
    def __enter__(self) -> Self:
        """The store itself; leaving the block closes it."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the store."""
        self.close()

    def _close_embedder(self) -> None:
        if isinstance(self._embedder, CachedEmbedder):
            self._embedder.close()

    @property
    def embedder(self) -> Embedder:
        """The configured embedding model (made on first use, with the root's embedding cache)."""
        if self._embedder is None:
            cache = self._cache_dir if self.config["embedding_cache"] else None
            self._embedder = make_embedder(self.config, cache)
        return self._embedder

    @property
    def cache_dir(self) -> Path | None:
        """The embedding cache folder (shared by the stores of one root), if any."""
        return self._cache_dir

    def dimension(self) -> int | None:
        """The dimension of the stored vectors (None before the first)."""
        info = self.model_info()
        return int(info["dimension"]) if info and info.get("dimension") else None

    def embed(self, texts: builtins.list[str]) -> np.ndarray:
        """Vectors of `texts` by the configured model, once it is the store's model and dimension."""
        self.check_model()
        vectors = self.embedder.embed(texts)
        dim = self.dimension()
        if dim is not None and not self._is_empty() and vectors.shape[1] != dim:
            raise ModelMismatchError(
                f"embedding dimension {vectors.shape[1]} differs from the store's {dim}", hint="run `memctl reindex`"
            )
        return vectors

    def _check_text(self, text: Any) -> str:
        if not isinstance(text, str) or not text.strip():
            raise UsageError("memory text is empty", hint="pass the text to store")
        check_text_size(text, int(self.config.get("max_text_bytes") or 0))
        return text

    def _keywords(self, metadata: Mapping[str, Any]) -> str:
        return keywords_of(self.config, metadata)

    def compile(self, filter: str | Filter | None) -> Filter | None:
        """A filter expression compiled (config filter_max_length applies); a compiled one or None as is."""
        if filter is None or isinstance(filter, Filter):
            return filter
        return compile_filter(filter, max_length=int(self.config["filter_max_length"]))

    def get_one(self, memory_id: str) -> Memory:
        """The memory with this id; NotFoundError when there is none."""
        got = self.get([memory_id])
        if not got:
            raise NotFoundError(
                f"no memory with id {memory_id!r} in store {self.name!r}", hint="`memctl list` shows the ids"
            )
        return got[0]

    def add(
        self,
        texts: Sequence[str],
        area: str = "main",
        metadata: Sequence[Mapping[str, Any] | None] | None = None,
        *,
        derived_from: Mapping[str, Sequence[str]] | None = None,
        actor: str | None = None,
    ) -> builtins.list[str]:
        """Embed and insert texts in one transaction; return their new ids.

        `derived_from` maps a link kind (e.g. "consolidated_from") to parent ids each new memory derives from.
        """
        texts = [self._check_text(t) for t in texts]
        check_area(area)
        metas = [check_metadata(m) for m in (metadata or [None] * len(texts))]
        if len(metas) != len(texts):
            raise UsageError(f"{len(texts)} texts but {len(metas)} metadata entries")
        if not texts:
            return []
        vectors = self.embed(list(texts))
        stamp = now_iso()
        records = [
            {"id": None, "text": t, "area": area, "created_at": stamp, "updated_at": stamp, "metadata": m}
            for t, m in zip(texts, metas, strict=True)
        ]
        return self.insert_records(records, vectors, self.embedder.info, actor=actor, links=derived_from)

    def search(
        self,
        query: str,
        limit: int = 10,
        threshold: float | None = None,
        area: str | None = None,
        filter: str | Filter | None = None,
        mode: str = "hybrid",
    ) -> builtins.list[Hit]:
        """Best matches at or above threshold (None: config search_threshold, else the calibration's default).

        mode "dense": the vector index only. "keyword": the keyword index (BM25 embedded, ts_rank_cd on
        PostgreSQL). "hybrid" (default): both, fused. `score` is the relevance (memctl/search/relevance.py): for
        an embedding model with shipped calibration parameters the estimated probability that the memory
        answers the query, which orders the results and cuts them; otherwise (1 + cosine) / 2. The pipeline
        is memctl/search/pipeline.py."""
        return [hit for hit, _ in self.search_evidence(query, limit, threshold, area, filter, mode)]

    def search_evidence(
        self,
        query: str,
        limit: int = 10,
        threshold: float | None = None,
        area: str | None = None,
        filter: str | Filter | None = None,
        mode: str = "hybrid",
    ) -> builtins.list[tuple[Hit, dict[str, float] | None]]:
        """`search`, each hit with the evidence its score was computed from (memctl.search.relevance.FEATURES;
        None when the plain formula scored it). scripts/fit_relevance.py fits the calibration on it."""
        from memctl.search.pipeline import search_evidence

        return search_evidence(self, query, limit, threshold, area, filter, mode)

    def default_threshold(self, purpose: str = "load") -> float:
        """The cut a search (purpose "load") or the recall block ("recall") uses when the caller names none."""
        from memctl.search.pipeline import default_threshold

        return default_threshold(self, purpose)

    # -- what searches keep between calls: facts only a write changes --------------------
    def _generation(self) -> Any:
        """A value that changes whenever a row, the keyword index or the store itself may have changed (a
        write by this handle or any other process, a restore); None: nothing is kept between searches."""
        return None

    def _memo(self) -> dict[Any, Any]:
        """This generation's cache (document frequencies, per-row facts); a new one when it changed. Looked up
        once per search (the store does not change while one runs)."""
        scope = self._scope()
        if scope is not None and "memo" in scope:
            return scope["memo"]
        generation = self._generation()
        memo: dict[Any, Any] = {}
        if generation is not None:
            held = self.__dict__.get("_memo_held")
            if held is None or held[0] != generation:
                held = (generation, memo)
                self.__dict__["_memo_held"] = held
            memo = held[1]
        if scope is not None:
            scope["memo"] = memo
        return memo

    def _df_cache(self) -> dict[Any, Any]:
        """Keyword document frequencies counted since the store last changed (each backend keys its own)."""
        memo = self._memo()
        cache: dict[Any, Any] | None = memo.get("df")
        if cache is None or len(cache) > DF_CACHE_MAX:
            cache = memo["df"] = {}
        return cache

    def _scope(self) -> dict[str, Any] | None:
        """What the search running in this thread keeps until it returns (None outside a search)."""
        local = self.__dict__.get("_scope_local")
        return None if local is None else getattr(local, "scope", None)

    @contextmanager
    def _search_scope(self) -> Iterator[None]:
        local = self.__dict__.get("_scope_local")
        if local is None:
            local = self.__dict__["_scope_local"] = threading.local()
        if getattr(local, "scope", None) is not None:  # a search inside a search: the outer one's
            yield
            return
        local.scope = {}
        try:
            yield
        finally:
            local.scope = None

    def _size(self) -> int:
        """len(self), counted once per search."""
        scope = self._scope()
        if scope is None:
            return len(self)
        if "len" not in scope:
            scope["len"] = len(self)
        return int(scope["len"])

    def _seq_meta(self, seqs: builtins.list[int]) -> dict[int, tuple[str, dict[str, Any]]]:
        """seq -> (area, metadata) of the rows that exist (a backend may read less than a whole row)."""
        return {key: (hit.area, hit.metadata) for key, hit in self._seq_hits([(key, 0.0) for key in seqs])}

    def calibration(self) -> Calibration | None:
        """The relevance calibration of this store's embedding model (None: plain (1 + cosine) / 2)."""
        from memctl.search.relevance import shipped
        from memctl.search.tuning import tuning_of

        if not tuning_of(self).calibrated:
            return None
        return shipped(self.embedder.info.model)

    def search_vector(
        self,
        vector: np.ndarray,
        *,
        limit: int = 10,
        threshold: float = 0.0,
        area: str | None = None,
        filter: str | Filter | None = None,
    ) -> builtins.list[Hit]:
        """Dense search with a query vector, ordered by relevance."""
        only = self._candidates(area, self.compile(filter))
        if only is not None and len(only) == 0:
            return []
        pairs = [(key, relevance(ip)) for key, ip in self._dense_pairs(vector, limit, only)]
        return self._hits([(key, score) for key, score in pairs if score >= threshold])

    def search_all_above(
        self, query: str, threshold: float, area: str | None = None, filter: str | Filter | None = None
    ) -> builtins.list[Hit]:
        """Every memory at or above threshold, however many (no silent cap)."""
        flt = self.compile(filter)
        query = self._check_text(query)
        if self._is_empty():
            return []
        vector = self._embed_query(query)
        k = 64
        while True:
            hits = self.search_vector(vector, limit=k, threshold=threshold, area=area, filter=flt)
            if len(hits) < k or k >= len(self):
                return hits
            k *= 4

    def _hits(self, pairs: builtins.list[tuple[int, float]]) -> builtins.list[Hit]:
        return [hit for _, hit in self._seq_hits(pairs)]
