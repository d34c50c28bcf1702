"""The embedded store: one folder with memories.sqlite (truth), index.faiss (derived), embedding.json.

EmbeddedStore is the last of four layers, each a module of this package: database.py (opening, locking,
writing), rows.py (the tables' SQL), search.py (the vector index, search primitives) and this one
(finding stores, maintenance, the archive, behaviour, knowledge state, whole-store copies)."""

from __future__ import annotations

import builtins
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.embeddings import ModelInfo, content_hash
from memctl.errors import LockTimeoutError, NotFoundError, StoreError
from memctl.files import atomic_write_bytes
from memctl.store.embedded.database import _STORE_TRACES
from memctl.store.embedded.search import _EmbeddedSearch
from memctl.store.interface import StoreSpec, iter_chunks
from memctl.store.layout import (
    BEHAVIOUR_FILE,
    DB_FILE,
    KNOWLEDGE_FILE,
    KNOWLEDGE_FILE_VERSION,
    KNOWLEDGE_LOCK_FILE,
    folder_size,
    read_only_database,
)
from memctl.store.records import (
    ARCHIVE_COLUMNS,
    MEMORY_COLUMNS,
    ArchivedMemory,
    Memory,
    StoreList,
    StoreSummary,
    archive_values,
    archived_of,
)

if TYPE_CHECKING:
    import numpy as np


class EmbeddedStore(_EmbeddedSearch):
    """A memory store in one folder. Writers lock; readers see committed snapshots (WAL)."""

    # -- finding and opening folder stores (memctl/store/__init__.py) --------------------
    @classmethod
    def open_at(cls, spec: StoreSpec) -> EmbeddedStore:
        from memctl.config import load_config

        folder = cls.folder_at(spec)
        # A bad store config.yaml is named before anything else.
        config = spec.config if spec.config is not None else load_config(folder, spec.overrides)
        check_store_folder(spec.root, folder, spec.create)
        return cls(
            folder, config, embedder=spec.embedder, actor=spec.actor, cache_dir=spec.cache_dir, read_only=spec.read_only
        )

    @classmethod
    def stores_at(cls, spec: StoreSpec, *, counts: bool = True) -> StoreList:
        from memctl.config.paths import list_subdirs

        root = spec.root
        return StoreList(
            str(root),
            [
                StoreSummary(name, stored_count(root / name) if counts else None, str(root / name))
                for name in list_subdirs(root)
            ],
        )

    @classmethod
    def location_at(cls, spec: StoreSpec) -> str:
        folder = cls.folder_at(spec)
        if not spec.create and not (folder / DB_FILE).is_file():
            raise NotFoundError(f"there is no store at {folder}", hint="check --root and --subdir (`memctl subdirs`)")
        return str(folder)

    @classmethod
    def folder_at(cls, spec: StoreSpec) -> Path:
        from memctl.config.paths import store_dir

        return store_dir(spec.root, spec.subdir)

    # -- many writes, one index checkpoint -----------------------------------------------
    @contextmanager
    def bulk(self) -> Iterator[EmbeddedStore]:
        """Many write transactions in a row (an import): one index checkpoint at the end, not one per
        `index_checkpoint_every` rows (each rewrites the whole index file)."""
        outer = self._bulk
        self._bulk = True
        try:
            yield self
        finally:
            self._bulk = outer
            if not outer:
                with self._locked():
                    self._checkpoint_after_commit()

    # -- maintenance ---------------------------------------------------------------------
    def _reindex_state(self) -> Any:
        return self._meta("reindex")

    def _set_reindex_state(self, value: Any) -> None:
        self._set_meta("reindex", value)

    @contextmanager
    def _reindexing(self) -> Iterator[None]:
        """No index checkpoints meanwhile; model_info tolerates a missing model record; the model file is
        mirrored again afterwards."""
        self._reindexing_now = True
        try:
            yield
        finally:
            self._reindexing_now = False
            self._mirrored = False

    def _texts_after(self, seq: int, limit: int) -> builtins.list[tuple[int, str]]:
        return [
            (int(r[0]), r[1])
            for r in self.db.execute("SELECT seq, text FROM memories WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit))
        ]

    def _set_vectors(self, vectors: Sequence[tuple[int, np.ndarray]]) -> None:
        import numpy as np

        self.db.executemany(
            "UPDATE memories SET vector = ? WHERE seq = ?",
            [(np.asarray(v, dtype=np.float32).tobytes(), seq) for seq, v in vectors],
        )

    def integrity_check(self) -> str:
        return str(self.db.execute("PRAGMA integrity_check").fetchone()[0])

    def compact(self) -> bool:
        """Leave no trace of removed text in the files: rebuild every FTS5 index from the live rows
        (deleted rows' terms otherwise linger in old segments), VACUUM (drops free pages), then
        checkpoint and truncate the WAL. False when a reader kept the WAL from being truncated."""
        with self._locked():
            self.db.execute("PRAGMA secure_delete=ON")
            names = [
                r[0]
                for r in self.db.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                    " AND lower(sql) LIKE 'create virtual table%fts5%'"
                )
            ]
            self.db.execute("BEGIN IMMEDIATE")
            try:
                for name in names:
                    quoted = '"' + name.replace('"', '""') + '"'
                    try:
                        self.db.execute(f"INSERT INTO {quoted}({quoted}) VALUES ('rebuild')")
                    except sqlite3.OperationalError:  # contentless: merging drops deleted entries
                        self.db.execute(f"INSERT INTO {quoted}({quoted}) VALUES ('optimize')")
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.db.execute("VACUUM")
            busy = self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        return not busy

    def ids_with_hashes(self, hashes: set[str]) -> builtins.list[str]:
        found: builtins.list[str] = []
        for chunk in iter_chunks(sorted(hashes), 900):
            marks = ",".join("?" * len(chunk))
            found += [r[0] for r in self.db.execute(f"SELECT id FROM memories WHERE content_hash IN ({marks})", chunk)]
        return found

    def index_strays(self) -> dict[str, int]:
        """The vector index as written to index.faiss (checkpointed now, then read back from the file) and
        the FTS5 keyword index, each held against the live rows."""
        import faiss

        from memctl.store.vector_index import index_keys

        live = {int(r[0]) for r in self.db.execute("SELECT seq FROM memories")}
        vector = 0
        if self.dimension() is not None:
            with self._locked():
                index = self.vector_index()
                assert index is not None  # a store with a dimension has an index
                index.checkpoint(self.db)
            on_disk = faiss.read_index(str(index.path))
            vector = sum(1 for key in index_keys(on_disk) if int(key) not in live)
            vector += sum(1 for key in index_keys(index.index) if int(key) not in live)
        try:  # external-content FTS5: verifies every index entry against the live rows' text
            self.db.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)")
            keyword = 0
        except sqlite3.DatabaseError:  # SQLITE_CORRUPT_VTAB: an entry no live row accounts for
            keyword = 1
        return {"vector_index": vector, "keyword_index": keyword}

    # -- the archive, purging, size and stats --------------------------------------------
    def archived(self, memory_id: str) -> ArchivedMemory | None:
        read, cursor = self._named(f"SELECT {ARCHIVE_COLUMNS} FROM archive WHERE id = ?", (memory_id,))
        row = cursor.fetchone()
        return _archived(read.record(row)) if row else None

    def iter_archive(self) -> Iterator[ArchivedMemory]:
        read, cursor = self._named(f"SELECT {ARCHIVE_COLUMNS} FROM archive ORDER BY archived_at, id")
        while batch := cursor.fetchmany(1000):
            yield from (_archived(read.record(row)) for row in batch)

    def unarchive(self, ids: Sequence[str]) -> None:
        with self._write() as db:
            for chunk in iter_chunks(ids, 900):
                db.execute(f"DELETE FROM archive WHERE id IN ({','.join('?' * len(chunk))})", chunk)

    def forget_text(self, ids: Sequence[str]) -> None:
        with self._write() as db:
            for chunk in iter_chunks(ids, 900):
                marks = ",".join("?" * len(chunk))
                db.execute(
                    f"UPDATE history SET old_text = NULL, new_text = NULL, old_metadata = NULL,"
                    f" new_metadata = NULL WHERE memory_id IN ({marks})",
                    chunk,
                )
                db.execute(f"DELETE FROM archive WHERE id IN ({marks})", chunk)

    @staticmethod
    def _purge_where(before: str | None) -> tuple[str, str, Sequence[str]]:
        return ("at < ?", "archived_at < ?", [before]) if before else ("1", "1", [])

    def purge_counts(self, before: str | None) -> tuple[int, int]:
        h_where, a_where, args = self._purge_where(before)
        history = self.db.execute(f"SELECT COUNT(*) FROM history WHERE {h_where}", args).fetchone()[0]
        archived = self.db.execute(f"SELECT COUNT(*) FROM archive WHERE {a_where}", args).fetchone()[0]
        return int(history), int(archived)

    def purge_rows(self, before: str | None, *, found: Callable[[set[str]], None] | None = None) -> set[str]:
        h_where, a_where, args = self._purge_where(before)
        hashes: set[str] = set()
        self.db.execute("PRAGMA secure_delete=ON")  # deleted text overwritten in place, before any VACUUM
        with self._write() as db:
            for old, new in db.execute(
                f"SELECT old_text, new_text FROM history WHERE {h_where}"
                f" UNION ALL SELECT text, NULL FROM archive WHERE {a_where}",
                [*args, *args],
            ):
                hashes.update(content_hash(t) for t in (old, new) if t)
            hashes -= {
                r[0] for r in db.execute("SELECT content_hash FROM memories UNION SELECT content_hash FROM pending")
            }
            if found is not None:
                found(hashes)
            db.execute(f"DELETE FROM history WHERE {h_where}", args)
            db.execute(f"DELETE FROM archive WHERE {a_where}", args)
        return hashes

    def hashes_used_elsewhere(self, hashes: set[str]) -> set[str]:
        """Hashes that the other folder stores of this root hold (they share the embedding cache)."""
        from memctl.config.paths import list_subdirs, store_dir

        if not hashes or self._cache_dir is None:
            return set()
        root = self._cache_dir.parent.parent  # <root>/.cache/embeddings
        return _hashes_in_folder_stores(
            root, list_subdirs(root) if root.is_dir() else [], hashes, skip=self.folder.resolve(), store_dir=store_dir
        )

    def size_bytes(self) -> int:
        return folder_size(self.folder)

    def _area_counts(self) -> builtins.list[tuple[str, int, int]]:
        return [
            (area, int(count), int(knowledge))
            for area, count, knowledge in self.db.execute(
                "SELECT area, COUNT(*), COALESCE(SUM(json_extract(metadata, '$.knowledge_source') IS 1), 0)"
                " FROM memories GROUP BY area"
            )
        ]

    def _age_summary(self) -> tuple[str | None, str | None, int, str | None]:
        oldest, newest, never, last = self.db.execute(
            "SELECT MIN(created_at), MAX(created_at), COALESCE(SUM(accessed_at IS NULL), 0), MAX(accessed_at)"
            " FROM memories"
        ).fetchone()
        return oldest, newest, int(never), last

    def _log_counts(self) -> tuple[int, int]:
        return (
            int(self.db.execute("SELECT COUNT(*) FROM archive").fetchone()[0]),
            int(self.db.execute("SELECT COUNT(*) FROM history").fetchone()[0]),
        )

    # -- behaviour rules: behaviour.md ---------------------------------------------------
    @property
    def behaviour_location(self) -> str:
        return str(self.folder / BEHAVIOUR_FILE)

    def read_behaviour(self) -> str | None:
        path = self.folder / BEHAVIOUR_FILE
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(
                f"{path} is unreadable: {exc}",
                hint="fix it, or run `memctl behaviour reset` to start from the defaults",
            ) from exc

    def write_behaviour(self, rules: str) -> None:
        self._exist()
        atomic_write_bytes(self.folder / BEHAVIOUR_FILE, rules.encode("utf-8"))

    # -- knowledge import state: knowledge_import.json, a mirror of the chunks' metadata --
    def knowledge_chunks(self) -> Sequence[tuple[Any, ...]]:
        return [
            tuple(r)
            for r in self.db.execute(
                "SELECT id, area, json_extract(metadata, '$.knowledge_folder'),"
                " json_extract(metadata, '$.source_path'),"
                " json_extract(metadata, '$.source_checksum'), json_extract(metadata, '$.file_type'),"
                " json_extract(metadata, '$.chunk') FROM memories"
                " WHERE json_extract(metadata, '$.knowledge_source') = 1"
                " AND json_extract(metadata, '$.knowledge_folder')"
                " IS NOT NULL AND json_extract(metadata, '$.source_path') IS NOT NULL ORDER BY seq"
            )
        ]

    def knowledge_state(self) -> dict[str, Any]:
        try:
            data = json.loads((self.folder / KNOWLEDGE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # a lost or damaged mirror is rebuilt from the store
        if not isinstance(data, dict) or data.get("version") != KNOWLEDGE_FILE_VERSION:
            return {}
        folders = data.get("folders")
        return folders if isinstance(folders, dict) else {}

    def save_knowledge_state(self, document: dict[str, Any]) -> None:
        path = self.folder / KNOWLEDGE_FILE
        data = (
            json.dumps({"version": KNOWLEDGE_FILE_VERSION, "folders": document}, indent=1, ensure_ascii=False) + "\n"
        ).encode()
        if self._knowledge_bytes is None:
            try:
                self._knowledge_bytes = path.read_bytes()
            except OSError:
                self._knowledge_bytes = b""
        if data != self._knowledge_bytes:
            self._exist()
            atomic_write_bytes(path, data)
            self._knowledge_bytes = data

    @contextmanager
    def knowledge_lock(self) -> Iterator[None]:
        import filelock

        if self._pending:
            self._make_folder()
        lock = filelock.FileLock(str(self.folder / KNOWLEDGE_LOCK_FILE), timeout=float(self.config["lock_timeout"]))
        try:
            lock.acquire()
        except filelock.Timeout as exc:
            raise LockTimeoutError(
                f"another knowledge import into {self.folder} is running",
                hint=f"retry later or raise lock_timeout ({self.config['lock_timeout']} s)",
            ) from exc
        try:
            yield
        finally:
            lock.release()
            self._remove_unused_folder()

    def _exist(self) -> None:
        """A store that has no database yet gets one before a file of it is written (an empty commit)."""
        if self._pending:
            with self._write():
                pass

    def _by_hash(self, hashes: Sequence[str], column: str) -> Iterator[tuple[str, Any]]:
        for chunk in iter_chunks(hashes, 500):
            yield from self.db.execute(
                f"SELECT content_hash, {column} FROM memories WHERE content_hash IN ({','.join('?' * len(chunk))})",
                chunk,
            )

    def vectors_for_hashes(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        import numpy as np

        return {digest: np.frombuffer(blob, dtype=np.float32) for digest, blob in self._by_hash(hashes, "vector")}

    def known_hashes(self, hashes: Sequence[str]) -> set[str]:
        return {digest for digest, _ in self._by_hash(hashes, "NULL")}

    def memories_with_hashes(self, hashes: Sequence[str]) -> builtins.list[Memory]:
        """The memories whose text has one of these content hashes (an import's duplicate check)."""
        found: builtins.list[Memory] = []
        for chunk in iter_chunks(list(hashes), 500):
            read, rows = self._named(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE content_hash IN ({','.join('?' * len(chunk))})", chunk
            )
            found += map(read.memory, rows)
        return found

    # -- whole-store copies --------------------------------------------------------------
    @contextmanager
    def snapshot(self) -> Iterator[EmbeddedStore]:
        """One read transaction: WAL readers see the state of its first read while writers go on."""
        if self._depth:
            yield self
            return
        self.db.execute("BEGIN")
        try:
            yield self
        finally:
            self.db.execute("COMMIT")

    def iter_rows(self) -> Iterator[tuple[Memory, bytes, str | None]]:
        read, cursor = self._named(f"SELECT {MEMORY_COLUMNS}, vector, accessed_at FROM memories ORDER BY seq")
        while batch := cursor.fetchmany(1000):
            yield from ((read.memory(row), read.get(row, "vector"), read.get(row, "accessed_at")) for row in batch)

    def put_rows(self, rows: Sequence[tuple[Memory, bytes, str | None]], info: ModelInfo, dimension: int) -> None:
        with self._write() as db:
            if rows:
                self._record_model(info, dimension)
            db.executemany(
                "INSERT INTO memories (id, text, area, created_at, updated_at, metadata, vector, content_hash,"
                " keywords, accessed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(*self._restored_row(m, blob), accessed) for m, blob, accessed in rows],
            )

    def put_links(self, links: Sequence[tuple[str, str, str, str]]) -> None:
        with self._write() as db:
            db.executemany("INSERT OR IGNORE INTO links VALUES (?, ?, ?, ?)", [tuple(link) for link in links])

    def put_archive(self, rows: Sequence[ArchivedMemory]) -> None:
        with self._write() as db:
            db.executemany(
                f"INSERT OR REPLACE INTO archive ({ARCHIVE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [archive_values(a, a.vector) for a in rows],
            )


def _archived(record: dict[str, Any]) -> ArchivedMemory:
    return archived_of(record, record["vector"])  # SQLite keeps the vector as float32 bytes already


def _hashes_in_folder_stores(
    root: Path, names: Sequence[str], hashes: set[str], *, skip: Path | None, store_dir: Any
) -> set[str]:
    """The hashes among `hashes` that memories of the folder stores `names` under root hold (read-only)."""
    used: set[str] = set()
    keys = sorted(hashes)
    for name in names:
        folder = store_dir(root, name)
        if skip is not None and folder.resolve() == skip:
            continue
        try:
            db = read_only_database(folder / DB_FILE)  # another store: read without leaving a file in it
        except StoreError:
            used |= hashes  # unreadable: keep every entry rather than drop one it may need
            continue
        try:
            for chunk in iter_chunks(keys, 500):
                used.update(
                    r[0]
                    for r in db.execute(
                        f"SELECT content_hash FROM memories WHERE content_hash IN ({','.join('?' * len(chunk))})", chunk
                    )
                )
        except sqlite3.Error:
            used |= hashes
        finally:
            db.close()
    return used


def stored_count(folder: Path) -> int | None:
    """How many memories the folder store holds, read-only (None when its database cannot be read)."""
    try:
        db = read_only_database(folder / DB_FILE)
    except StoreError:
        return None
    try:
        return int(db.execute("SELECT COUNT(*) FROM memories").fetchone()[0])
    except sqlite3.Error:
        return None
    finally:
        db.close()


def check_store_folder(root: Path, folder: Path, create: bool) -> None:
    """Refuse a root that is not a folder, a store that lost its database, and (unless `create`) a
    store that does not exist."""
    from memctl.config.paths import STORE_MARKER
    from memctl.errors import NotFoundError, StoreError, UsageError

    if str(root) == "":
        raise UsageError("--root is empty", hint="name a folder, or leave --root out for the default")
    if root.exists() and not root.is_dir():
        raise UsageError(f"root {str(root)!r} is not a folder", hint="point --root (or MEMCTL_HOME) at a folder")
    database = folder / STORE_MARKER
    if database.exists() and not database.is_file():
        raise StoreError(f"{database} is not a file", hint="move it away; memctl keeps the store's database there")
    if database.is_file():
        return
    traces = [name for name in _STORE_TRACES if (folder / name).exists()]
    if traces:
        raise StoreError(
            f"the store at {folder} has lost its database {STORE_MARKER} (still there: "
            f"{', '.join(traces)}); memctl will not create an empty store in its place",
            hint="restore it with `memctl restore-backup` or from your export (`memctl import`); "
            "to start over, remove the folder",
        )
    if not create:
        raise NotFoundError(
            f"no store at {folder}",
            hint="check --root / --subdir (`memctl subdirs` lists the stores); `memctl save` creates a store",
        )
