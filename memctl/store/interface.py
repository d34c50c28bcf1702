"""The store contract a backend implements (EmbeddedStore: memctl/store/embedded, PostgresStore:
memctl/store/postgres), with the row types and helpers its signatures use.

StoreInterface holds only abstract primitives; memctl/store/writes.py (validation, ids, embedding, the
write paths) and memctl/store/base.py (review queue, stats, copies, the search entry points) build the
behaviour every backend shares on top of them. Rows are addressed by an integer key (`seq`) that is
unique within the backend.
"""

from __future__ import annotations

import abc
import builtins
import json
import os
import string
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from memctl.config.paths import DEFAULT_SUBDIR
from memctl.embeddings import Embedder, ModelInfo
from memctl.store.doctor_rows import DoctorRun, Finding
from memctl.store.filters import Filter
from memctl.store.records import (
    ArchivedMemory,
    HistoryEntry,
    Hit,
    Memory,
    PendingItem,
    StoreList,
)

if TYPE_CHECKING:
    import numpy as np

    from memctl.config import Config
    from memctl.store.base import StoreBase  # what open_at returns: the whole contract

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


class StoreInterface(abc.ABC):
    """What a backend implements: the abstract storage primitives (rows, vectors, keyword index, review
    queue, doctor runs, archive, behaviour rules, knowledge state, whole-store copies) and how memctl.store
    finds and opens its stores. Subclasses set config, actor, _embedder, _cache_dir."""

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

    @abc.abstractmethod
    def model_info(self) -> dict[str, Any] | None:
        """The {provider, model, dimension} the stored vectors were made with; None before the first vector."""
        raise NotImplementedError

    @abc.abstractmethod
    def _model_state(self) -> tuple[Any, dict[str, Any] | None]:
        """(the state of an unfinished reindex or None, model_info() when there is none), in one read where
        the backend can."""

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

    @abc.abstractmethod
    def _exact_rows(self, text: str, area: str | None) -> builtins.list[Memory]:
        """The memories with this content hash and text (in `area`), oldest first."""

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

    @abc.abstractmethod
    def _archive(self, ids: Sequence[str], op: str, actor: str | None) -> None:
        """Copy rows about to be removed into the archive (one version per id: the latest)."""

    @abc.abstractmethod
    def _delete_rows(self, ids: Sequence[str]) -> None:
        """Remove these memories' rows; joins an open transaction."""

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

    # -- search primitives (memctl/search/protocol.py) -------------------------------------------
    def _embed_query(self, query: str) -> np.ndarray:
        raise NotImplementedError

    def _candidates(self, area: str | None, flt: Filter | None) -> Collection[int] | None:
        """Keys allowed by area/filter (None = all). Applied before the top-k cut."""
        raise NotImplementedError

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

    # -- review queue rows (memctl/review) ---------------------------------------------------------
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

    # -- doctor runs (memctl/review/doctor.py; m010_doctor_runs) ---------------------------------
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

    # -- whole-store copies (memctl/lifecycle/backup.py) ------------------------------------------
    @abc.abstractmethod
    def iter_rows(self) -> Iterator[tuple[Memory, bytes, str | None]]:
        """Every memory, oldest first, with its vector (float32 bytes) and last access time."""
        raise NotImplementedError

    @abc.abstractmethod
    def put_rows(self, rows: Sequence[tuple[Memory, bytes, str | None]], info: ModelInfo, dimension: int) -> None:
        """Insert memories exactly as given (ids, timestamps, access times, vectors), with no history
        entries: a backup being restored. Joins an open transaction."""
        raise NotImplementedError

    @abc.abstractmethod
    def put_links(self, links: Sequence[tuple[str, str, str, str]]) -> None:
        """Insert provenance links (parent_id, child_id, kind, created_at) as they are."""
        raise NotImplementedError

    @abc.abstractmethod
    def put_archive(self, rows: Sequence[ArchivedMemory]) -> None:
        """Insert archived memories as they are."""
        raise NotImplementedError
