"""The embedded store: one folder with memories.sqlite (truth), index.faiss (derived), embedding.json."""

from __future__ import annotations

import builtins
import json
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.embeddings import Embedder, ModelInfo, content_hash, embed_queries
from memctl.errors import ConfigError, LockTimeoutError, ModelMismatchError, NotFoundError, StoreError, sqlite_hint
from memctl.files import atomic_write_bytes, recover_swap, remove_lock_only_folder
from memctl.store.base import StoreBase
from memctl.store.doctor_rows import DoctorRun, Finding, figures_of, related_of
from memctl.store.filters import Filter
from memctl.store.interface import PreparedRow, StoreSpec, iter_chunks
from memctl.store.interface import json_or_none as _json_or_none
from memctl.store.keyword import register_functions
from memctl.store.layout import (
    BEHAVIOUR_FILE,
    COMMITS_FILE,
    DB_FILE,
    EMBEDDING_FILE,
    KNOWLEDGE_FILE,
    KNOWLEDGE_FILE_VERSION,
    KNOWLEDGE_LOCK_FILE,
    LOCK_FILE,
    folder_size,
    read_only_database,
)
from memctl.store.records import (
    ARCHIVE_COLUMNS,
    MEMORY_COLUMNS,
    PENDING_COLUMNS,
    ArchivedMemory,
    HistoryEntry,
    Hit,
    Memory,
    PendingItem,
    RowReader,
    StoreList,
    StoreSummary,
    archive_values,
    archived_of,
    history_entry,
    now_iso,
    pending_of,
    relevance,
)
from memctl.store.schema import MIGRATIONS, apply_migrations
from memctl.store.validate import check_area
from memctl.store.vector_index import INDEX_FILE, SCAN_MIN, SIDECAR_FILE, IndexOptions, VectorIndex

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from memctl.config import Config

MODEL_META = "model"  # the database's copy of embedding.json (the truth; the file mirrors it)
REINDEX_HINT = (
    "run `memctl reindex`: it re-embeds every memory with the configured model and rewrites the "
    "record (or restore the store from a backup)"
)
INDEX_TEMP_PREFIX = "index.faiss."  # temp files of checkpoints: .index.faiss.XXXX (vector_index.py)
# With an approximate index, filtered searches over at most this many candidates are done exactly.
EXACT_FILTERED_MAX = 200_000
# Seconds `touch` (access times after `load`) waits for a busy writer before skipping.
TOUCH_WAIT = 1.0


class EmbeddedStore(StoreBase):
    """A memory store in one folder. Writers lock; readers see committed snapshots (WAL)."""

    def __init__(
        self,
        folder: Path,
        config: Config,
        embedder: Embedder | None = None,
        actor: str = "api",
        cache_dir: Path | None = None,
        *,
        read_only: bool = False,
    ) -> None:
        self.folder = folder
        self.config = config
        self.actor = actor
        self._embedder = embedder
        self._cache_dir = cache_dir
        self._index: VectorIndex | None = None
        self._lock: Any = None
        self._reindexing_now = False
        self._mirrored = False
        self._bulk = False
        self._depth = 0
        self._knowledge_bytes: bytes | None = None  # knowledge_import.json as last read or written
        self._model_thread: ThreadPoolExecutor | None = None  # embeds a warm handle's queries (_start_query_embedding)
        recover_swap(folder, float(config["lock_timeout"]))  # a restore killed between its two renames
        # A store on read-only media (or in a folder this user cannot write) stays readable; a read-only
        # open (stats, list, export, backup's source) reads through a connection that cannot write.
        self._media_read_only = (folder / DB_FILE).is_file() and not os.access(folder, os.W_OK)
        self.read_only = read_only or self._media_read_only
        # No database yet: the store comes into existence with its first commit (_materialize), so a
        # first command that fails (a bad model, an unreadable input) leaves nothing behind.
        self._pending = not (folder / DB_FILE).is_file()
        if self._pending and read_only:
            raise NotFoundError(f"no store at {folder}", hint="check --root / --subdir (`memctl subdirs`)")
        self._made_folder = False
        if self._pending:
            self.db = _empty_database()
            self._ident: tuple[int, int] | None = None
        else:
            self._open_database()
        try:
            self._check_commits()
        except BaseException:
            self.db.close()  # a refused store keeps no connection (and the WAL files it made go with it)
            raise

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

    # -- the store's generation: restore-backup swaps the whole folder -------------------
    def _db_ident(self) -> tuple[int, int] | None:
        """Which file the database path names now (device, inode); None when there is none."""
        try:
            info = os.stat(self.folder / DB_FILE)
        except FileNotFoundError:
            return None
        return (info.st_dev, info.st_ino)

    def _replaced(self) -> bool:
        return self._db_ident() != self._ident

    def _reopen(self) -> None:
        """Open the store now at the path (a restore replaced the one this handle had open).

        Never creates a store: a folder that vanished is first recovered from an interrupted swap,
        else reported."""
        recover_swap(self.folder, float(self.config["lock_timeout"]))
        if not (self.folder / DB_FILE).is_file():
            raise StoreError(
                f"store {self.folder} was removed while this process had it open",
                hint="restore it with `memctl restore-backup`, or open it again to start an empty one",
            )
        self.db.close()
        self._open_database()
        self._check_commits()
        self._index = None
        self._lock = None
        self._knowledge_bytes = None

    # -- opening the database, and creating it with the first commit -----------------------
    def _open_database(self) -> None:
        """Connect to the existing database and bring its schema up to date, refusing one that lost its
        content: nothing is written before that check (opening an empty file in WAL mode writes its header)."""
        lost = self._lost_database(empty=(self.folder / DB_FILE).stat().st_size == 0)
        if lost is not None:
            raise lost
        self.db = self._connect(create=False)
        self._ident = self._db_ident()
        applied = _applied_migrations(self.db)
        if not applied:
            lost = self._lost_database(empty=True)
            if lost is not None or self.read_only:
                self.db.close()
                raise lost or NotFoundError(
                    f"no store at {self.folder} ({DB_FILE} holds no memctl store)",
                    hint="check --root / --subdir (`memctl subdirs`); `memctl save` creates a store",
                )
        if self._media_read_only:
            return
        if not self.read_only:
            _make_private(self.folder)
            apply_migrations(self.db)
        elif len(applied) < len(MIGRATIONS):
            # A store an older memctl wrote: its schema is upgraded (content unchanged) so this one can read it.
            self.db.execute("PRAGMA query_only=OFF")
            try:
                apply_migrations(self.db)
            finally:
                self.db.execute("PRAGMA query_only=ON")

    def _lost_database(self, *, empty: bool) -> StoreError | None:
        """The error for a database that is empty (`empty`) while the folder shows a store was there."""
        if not empty:
            return None
        traces = [name for name in _STORE_TRACES if (self.folder / name).exists()]
        if _recorded_commits(self.folder / COMMITS_FILE):
            traces.append(COMMITS_FILE)
        if not traces:
            return None
        return StoreError(
            f"the store database {self.folder / DB_FILE} is empty, but the store held data (still there: "
            f"{', '.join(traces)}); memctl will not start an empty store in its place",
            hint="restore it with `memctl restore-backup` or from your export (`memctl import`); "
            "to start over, remove the folder",
        )

    def _materialize(self) -> bool:
        """At the first write of a store that had no database (write lock held): create it, or open the one
        another process created meanwhile. True when this call created it."""
        created = not (self.folder / DB_FILE).exists()
        self.db.close()
        if created:
            try:
                self.db = self._connect()
                self._ident = self._db_ident()
                _make_private(self.folder)
                apply_migrations(self.db)
            except BaseException:
                self._unmake()  # a disk that fills while the schema is written: no half-made store stays
                raise
        else:
            self._open_database()
        self._pending = False
        self._index = None
        self._knowledge_bytes = None
        self._mirrored = False
        self._check_commits()
        return created

    def _unmake(self) -> None:
        """Undo `_materialize` after the first transaction failed (write lock held): no empty store stays."""
        self.db.close()
        # The model record and an index file may already be written inside that first transaction; none of
        # them was there before (check_store_folder refuses a folder holding them without a database).
        for name in (
            DB_FILE,
            f"{DB_FILE}-wal",
            f"{DB_FILE}-shm",
            f"{DB_FILE}-journal",
            EMBEDDING_FILE,
            INDEX_FILE,
            SIDECAR_FILE,
        ):
            (self.folder / name).unlink(missing_ok=True)
        self.db = _empty_database()
        self._ident = None
        self._pending = True
        self._index = None

    def _make_folder(self) -> None:
        """The store's folder before its first lock; another process may be making it at the same moment."""
        if self.folder.is_dir():
            return
        try:
            self.folder.mkdir(mode=0o700, parents=True)
        except FileExistsError:
            return  # made by that other process: not ours to remove after a failed first command
        self._made_folder = True

    def _remove_unused_folder(self) -> None:
        """After a failed first command: the folder this handle made, if it holds only lock files."""
        if self._pending and self._made_folder:
            try:
                remove_lock_only_folder(self.folder)
            except OSError:
                return  # another process is creating the store there
            self._made_folder = False

    # -- lost commits: the write-ahead log removed or damaged ----------------------------
    def _record_commits(self, value: int) -> None:
        """After a commit (write lock held): the count of committed transactions, beside the database.

        One fixed-width write at offset 0, no fsync: after a power loss the file can only lag behind
        the database (its log was synced first), which is never reported."""
        try:
            fd = os.open(self.folder / COMMITS_FILE, os.O_WRONLY | os.O_CREAT, 0o600)
        except OSError:
            return
        try:
            os.pwrite(fd, f"{value:020d}\n".encode("ascii"), 0) if hasattr(os, "pwrite") else os.write(
                fd, f"{value:020d}\n".encode("ascii")
            )
        except OSError:
            pass
        finally:
            os.close(fd)

    def _check_commits(self) -> None:
        """Refuse to answer from a database that lost committed transactions (see m006_commit_counter)."""
        path = self.folder / COMMITS_FILE
        try:
            recorded = int(path.read_text(encoding="ascii").strip() or 0)
        except (OSError, ValueError):
            return
        row = self.db.execute("SELECT value FROM counters WHERE name = 'commits'").fetchone()
        stored = int(row[0]) if row else 0
        if stored < recorded:
            raise StoreError(
                f"store {self.folder} lost its last {recorded - stored} committed write(s): the database has "
                f"{stored} of the {recorded} recorded in {path} (its write-ahead log {DB_FILE}-wal was removed "
                "or damaged)",
                hint=f"put the -wal file back if you have it, or restore a backup (`memctl restore-backup`); "
                f"to go on with what the database holds, delete {path}",
            )

    def _refresh_for_read(self) -> None:
        """Outside any transaction, a read first follows a restore that replaced the store."""
        if not self._depth and not self.db.in_transaction and self._replaced():
            self._reopen()

    # -- plumbing ------------------------------------------------------------------------
    def _connect(self, *, create: bool = True) -> sqlite3.Connection:
        if self._media_read_only:
            return self._connect_read_only()
        if self.read_only:
            return self._connect_query_only()
        timeout = float(self.config["lock_timeout"])
        deadline = time.monotonic() + timeout
        target: Any = self.folder / DB_FILE
        if not create:
            target = "file:" + urllib.parse.quote(str(target)) + "?mode=rw"
        while True:
            db = None
            try:
                db = sqlite3.connect(
                    target, timeout=timeout, isolation_level=None, check_same_thread=False, uri=not create
                )
                # Switching a new file to WAL can fail with "locked" at once (no busy handler) when
                # another process opens it at the same moment; WAL then persists in the file.
                if str(db.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                    db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=FULL")
                db.execute("PRAGMA foreign_keys=ON")
                register_functions(db)  # the keyword index's triggers call memctl_fts_text
                db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
                return db
            except sqlite3.OperationalError as exc:
                if db is not None:
                    db.close()
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    # SQLite says "disk I/O error" when a full disk leaves no room for the WAL index (-shm).
                    cause = f"the disk is full ({exc})" if _full_disk(self.folder, exc) else str(exc)
                    raise StoreError(
                        f"cannot open store database {self.folder / DB_FILE}: {cause}",
                        hint=sqlite_hint(cause, self.folder),
                    ) from exc
                time.sleep(0.05)
            except sqlite3.DatabaseError as exc:
                if db is not None:
                    db.close()
                raise StoreError(
                    f"cannot open store database {self.folder / DB_FILE}: {exc}",
                    hint="restore it from a backup or export",
                ) from exc

    def _connect_query_only(self) -> sqlite3.Connection:
        """A read-only open of a writable store: SQLite refuses every change on this connection (query_only),
        and nothing is created (mode=rw). Unlike mode=ro it removes the WAL's -wal/-shm files it had to create
        when it is the last to close, so the folder is left exactly as it was."""
        target = "file:" + urllib.parse.quote(str(self.folder / DB_FILE)) + "?mode=rw"
        timeout = float(self.config["lock_timeout"])
        try:
            db = sqlite3.connect(target, timeout=timeout, isolation_level=None, check_same_thread=False, uri=True)
            db.execute("PRAGMA query_only=ON")
            register_functions(db)
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot read store database {self.folder / DB_FILE}: {exc}", hint=sqlite_hint(str(exc), self.folder)
            ) from exc

    def _connect_read_only(self) -> sqlite3.Connection:
        """Read-only media or folder: reading needs no lock and writes nothing. `mode=ro` still uses the
        WAL's index (-shm) when it can; `immutable=1` reads the file alone when even that cannot be had."""
        from urllib.parse import quote

        path = quote(str((self.folder / DB_FILE).resolve()))
        last: sqlite3.Error | None = None
        for flags in ("mode=ro", "mode=ro&immutable=1"):
            try:
                db = sqlite3.connect(f"file:{path}?{flags}", uri=True, isolation_level=None, check_same_thread=False)
                register_functions(db)
                db.execute("SELECT COUNT(*) FROM memories").fetchone()
                return db
            except sqlite3.Error as exc:
                last = exc
        raise StoreError(
            f"cannot read store database {self.folder / DB_FILE}: {last}", hint=sqlite_hint(str(last), self.folder)
        )

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def location(self) -> str:
        """Where the store is, for messages (the folder)."""
        return str(self.folder)

    def close(self) -> None:
        if self._model_thread is not None:
            self._model_thread.shutdown()
            self._model_thread = None
        self._close_embedder()
        self.db.close()

    def __len__(self) -> int:
        self._refresh_for_read()
        return int(self.db.execute("SELECT value FROM counters WHERE name = 'memories'").fetchone()[0])

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The store's exclusive write lock, shared by every process (re-entrant in one store)."""
        import filelock

        if self.read_only:
            raise StoreError(f"store {self.folder} was opened read-only", hint="open it without read_only to change it")
        nested = self._lock is not None and self._lock.is_locked
        for _ in range(5):
            if not nested and self._replaced():
                self._reopen()  # before taking the lock: it would re-create a vanished folder
            if self._pending:
                self._make_folder()
            if self._lock is None:
                self._lock = filelock.FileLock(str(self.folder / LOCK_FILE), timeout=float(self.config["lock_timeout"]))
            try:
                self._lock.acquire()
            except filelock.Timeout as exc:
                raise LockTimeoutError(
                    f"another process is writing to {self.folder}",
                    hint=f"retry later or raise lock_timeout ({self.config['lock_timeout']} s)",
                ) from exc
            except FileNotFoundError:
                # The folder was moved away while we waited (a restore between its two renames, or killed
                # there): recover the swap and take the lock of the store now at the path.
                self._lock = None
                continue
            # A restore may have swapped the store while we waited (our lock file moved with the old one).
            if nested or not self._replaced():
                break
            self._lock.release()
        else:
            raise StoreError(f"store {self.folder} keeps being replaced", hint="retry when restores are done")
        try:
            yield
        finally:
            self._lock.release()
            if not nested:
                self._remove_unused_folder()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """Exclusive across processes (file lock) and atomic (one IMMEDIATE transaction).

        Nested uses join the outer transaction, so `with store.transaction():` makes several
        operations (delete old chunks + insert new ones, a consolidation) commit or vanish together.
        """
        if self._depth:
            self._depth += 1
            try:
                yield self.db
            finally:
                self._depth -= 1
            return
        with self._locked():
            created = self._pending and self._materialize()
            self._depth = 1
            try:
                self.db.execute("BEGIN IMMEDIATE")
                yield self.db
                self.db.execute("UPDATE counters SET value = value + 1 WHERE name = 'commits'")
                commits = self.db.execute("SELECT value FROM counters WHERE name = 'commits'").fetchone()
                self.db.execute("COMMIT")
            except BaseException:
                # SQLite may already have rolled back (disk full, I/O error): a second ROLLBACK would
                # raise "no transaction is active" and hide the real error.
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                if created:
                    self._unmake()  # the store's first transaction failed: it never existed
                raise
            finally:
                self._depth = 0
            if commits is not None:
                self._record_commits(int(commits[0]))
            self._checkpoint_after_commit()

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
        self.db.execute(
            "INSERT INTO history (memory_id, op, actor, at, area, old_text, new_text, old_metadata, new_metadata)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                memory_id,
                op,
                actor or self.actor,
                now_iso(),
                area,
                old_text,
                new_text,
                _json_or_none(old_metadata),
                _json_or_none(new_metadata),
            ),
        )

    # -- embeddings ----------------------------------------------------------------------
    def model_info(self) -> dict[str, Any] | None:
        """The embedding model the stored vectors were made with.

        The truth is a copy in the database's `meta` table (written in the same transaction as the
        vectors); embedding.json is its readable mirror and is rewritten from it when it is missing
        or damaged. A store from before that copy existed has only the file: then a missing,
        unreadable or inconsistent file is an error naming the fix, never an empty answer.
        """
        record = self._meta(MODEL_META)
        if isinstance(record, dict):
            if not self._mirrored:  # once per open: the file only mirrors the database
                self._mirror_model_file(record)
                self._mirrored = True
            return record
        found = self._model_file()
        if self._reindexing_now:
            return found if isinstance(found, dict) else None
        if isinstance(found, str):
            raise StoreError(
                f"{self.folder / EMBEDDING_FILE} is unreadable ({found}), and this store keeps no other "
                "record of its embedding model",
                hint=REINDEX_HINT,
            )
        if found is None:
            if self._has_vectors():
                raise StoreError(
                    f"the store at {self.folder} holds memories but lost its model record {EMBEDDING_FILE}",
                    hint=REINDEX_HINT,
                )
            return None
        stored = self._stored_dimension()
        if stored is not None and stored != found.get("dimension"):
            raise StoreError(
                f"{self.folder / EMBEDDING_FILE} says dimension {found.get('dimension')}, but the stored "
                f"vectors have {stored}",
                hint=REINDEX_HINT,
            )
        return found

    def _model_file(self) -> dict[str, Any] | str | None:
        """embedding.json as a dict, None when absent, or what is wrong with it."""
        path = self.folder / EMBEDDING_FILE
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return str(exc)
        if (
            not isinstance(data, dict)
            or not {"provider", "model", "dimension"} <= set(data)
            or not isinstance(data["dimension"], int)
            or isinstance(data["dimension"], bool)
        ):
            return "not a model record {provider, model, dimension}"
        return data

    def _mirror_model_file(self, record: dict[str, Any]) -> None:
        if self.read_only or self._model_file() == record:
            return
        try:
            atomic_write_bytes(self.folder / EMBEDDING_FILE, (json.dumps(record, indent=2) + "\n").encode())
        except OSError:
            pass  # read-only media: the database's copy still answers

    def _has_vectors(self) -> bool:
        return self.db.execute("SELECT 1 FROM memories LIMIT 1").fetchone() is not None

    def _stored_dimension(self) -> int | None:
        row = self.db.execute("SELECT length(vector) FROM memories LIMIT 1").fetchone()
        return int(row[0]) // 4 if row and row[0] else None

    def _model_state(self) -> tuple[Any, dict[str, Any] | None]:
        reindexing = self._meta("reindex")
        return (reindexing, None) if reindexing else (None, self.model_info())

    def _write_model(self, info: ModelInfo, dimension: int) -> None:
        wanted = {"provider": info.provider, "model": info.model, "dimension": int(dimension)}
        with self._write():
            self._set_meta(MODEL_META, wanted)
        atomic_write_bytes(self.folder / EMBEDDING_FILE, (json.dumps(wanted, indent=2) + "\n").encode())
        self._index = None

    # -- the vector index ----------------------------------------------------------------
    def _index_options(self) -> IndexOptions:
        kind = self.config["index_type"]
        if kind not in ("auto", "flat", "ivf"):
            raise ConfigError(f"index_type must be auto, flat or ivf, not {kind!r}")
        return IndexOptions(kind, int(self.config["index_ivf_min_size"]), int(self.config["index_nprobe"]))

    def vector_index(self) -> VectorIndex | None:
        self._refresh_for_read()
        dim = self.dimension()
        if dim is None:
            return None
        if self._index is None or self._index.dimension != dim:
            self._index = VectorIndex(self.folder, dim, self._index_options())
        self._index.sync(self.db)
        if self._index.rebuilt and not self.read_only:  # a read-only open rebuilds in memory, writes nothing
            self._persist_rebuilt_index()
        return self._index

    def vector_count(self) -> int:
        """The vectors the FAISS index holds (brought up to date with the database first)."""
        index = self.vector_index()
        return int(index.index.ntotal) if index is not None else 0

    def _persist_rebuilt_index(self) -> None:
        """A rebuilt index is written back if no writer is busy; otherwise the next open rebuilds too."""
        import filelock

        lock = filelock.FileLock(str(self.folder / LOCK_FILE), timeout=0)
        try:
            with lock:
                assert self._index is not None
                self._index.checkpoint(self.db)
                self._index.rebuilt = False
        except (filelock.Timeout, OSError, sqlite3.Error, RuntimeError):  # RuntimeError: faiss's write errors
            pass

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

    def _checkpoint_after_commit(self) -> None:
        """The index checkpoint a commit may trigger. The memory is committed already: a failure here
        (disk full while the index file is rewritten) must not make the caller retry and store it
        twice. The index is derived; the next checkpoint or open catches up from the journal."""
        try:
            self._maybe_checkpoint()
        except (OSError, RuntimeError, sqlite3.Error):  # faiss reports write errors as RuntimeError
            self._index = None
            self._remove_stale_temp_files()

    def _remove_stale_temp_files(self) -> None:
        """Temp files of index checkpoints that a kill or a full disk left (write lock held: none is in use)."""
        for path in self.folder.glob(f".{INDEX_TEMP_PREFIX}*"):
            try:
                path.unlink()
            except OSError:
                pass

    def _maybe_checkpoint(self) -> None:
        dim = self.dimension()
        if dim is None or self._reindexing_now or self._bulk:
            return
        index = self._index if self._index is not None else VectorIndex(self.folder, dim, self._index_options())
        if index.pending(self.db) >= int(self.config["index_checkpoint_every"]) or not index.path.exists():
            self._remove_stale_temp_files()
            self._index = index
            index.checkpoint(self.db)
            index.rebuilt = False

    def rebuild_index(self) -> int:
        """Rebuild the vector index from stored vectors and write it (reindex --index-only)."""
        dim = self.dimension()
        if dim is None:
            return 0
        with self._locked():
            self._remove_stale_temp_files()
            self._index = VectorIndex(self.folder, dim, self._index_options())
            self.db.execute("BEGIN")
            try:
                self._index._rebuild(self.db)
            finally:
                self.db.execute("COMMIT")
            self._index.checkpoint(self.db)
            self._index.rebuilt = False
        return int(self._index.index.ntotal)

    # -- writing -------------------------------------------------------------------------
    def _insert_prepared(self, rows: Sequence[PreparedRow], history: Sequence[tuple[Any, ...]]) -> None:
        self.db.executemany(
            "INSERT INTO memories (id, text, area, created_at, updated_at, metadata, vector, content_hash,"
            " keywords) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*r[:6], r.vector.astype("float32").tobytes(), *r[7:]) for r in rows],
        )
        self.db.executemany(
            "INSERT INTO history (memory_id, op, actor, at, area, old_text, new_text, old_metadata, new_metadata)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            history,
        )

    def _existing_ids(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(ids), 900):
            chunk = list(ids[start : start + 900])
            marks = ",".join("?" * len(chunk))
            found.update(r[0] for r in self.db.execute(f"SELECT id FROM memories WHERE id IN ({marks})", chunk))
        return found

    def _lock_ids(self, ids: Sequence[str]) -> set[str]:
        return self._existing_ids(ids)  # the store's write lock keeps every other writer out already

    def _link(self, parent_ids: Sequence[str], child_id: str, kind: str) -> None:
        stamp = now_iso()
        self.db.executemany(
            "INSERT OR IGNORE INTO links VALUES (?, ?, ?, ?)", [(p, child_id, kind, stamp) for p in parent_ids]
        )

    def derived_ids(self, ids: Sequence[str]) -> builtins.list[str]:
        """Ids derived (transitively, through the link table) from `ids`, excluding `ids`."""
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(
            f"WITH RECURSIVE d(id) AS (SELECT value FROM json_each(?) "
            f"UNION SELECT l.child_id FROM links l JOIN d ON l.parent_id = d.id) "
            f"SELECT m.id FROM d JOIN memories m ON m.id = d.id WHERE d.id NOT IN ({marks}) ORDER BY m.seq",
            (json.dumps(list(ids)), *ids),
        ).fetchall()
        return [r[0] for r in rows]

    def _delete_rows(self, ids: Sequence[str]) -> None:
        for chunk in iter_chunks(ids, 900):
            self.db.execute(f"DELETE FROM memories WHERE id IN ({','.join('?' * len(chunk))})", chunk)

    def _archive(self, ids: Sequence[str], op: str, actor: str | None) -> None:
        """Copy rows about to be removed into `archive` (one version per id: the latest)."""
        info = self.model_info() or {}
        model = f"{info.get('provider')}:{info.get('model')}" if info else None
        stamp = now_iso()
        for start in range(0, len(ids), 900):
            chunk = list(ids[start : start + 900])
            self.db.execute(
                "INSERT OR REPLACE INTO archive (id, text, area, created_at, updated_at, accessed_at, metadata,"
                " vector, model, archived_at, op, actor) SELECT id, text, area, created_at, updated_at, accessed_at,"
                f" metadata, vector, ?, ?, ?, ? FROM memories WHERE id IN ({','.join('?' * len(chunk))})",
                (model, stamp, op, actor or self.actor, *chunk),
            )

    # -- the review queue: the `pending` table (m009_pending) ----------------------------
    def _insert_pending(self, items: Sequence[PendingItem]) -> None:
        self.db.executemany(
            f"INSERT INTO pending ({PENDING_COLUMNS}, content_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [i.row() for i in items],
        )

    def _has_pending_table(self) -> bool:
        """False only for a read-only store written before m009_pending (it cannot be migrated: nothing waits)."""
        if not self.read_only:
            return True
        return self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'pending'").fetchone() is not None

    def _pending_with_hash(self, digest: str, area: str, text: str) -> str | None:
        row = self.db.execute(
            "SELECT id FROM pending WHERE content_hash = ? AND area = ? AND text = ? ORDER BY created_at LIMIT 1",
            (digest, area, text),
        ).fetchone()
        return row[0] if row else None

    def _pending_rows(self, ids: Sequence[str]) -> builtins.list[PendingItem]:
        if not self._has_pending_table():
            return []
        found: builtins.list[PendingItem] = []
        for chunk in iter_chunks(ids, 900):
            read, rows = self._named(
                f"SELECT {PENDING_COLUMNS} FROM pending WHERE id IN ({','.join('?' * len(chunk))})", chunk
            )
            found += [pending_of(read.record(row)) for row in rows]
        return found

    def _pending_page(self, limit: int | None, offset: int, area: str | None) -> builtins.list[PendingItem]:
        if not self._has_pending_table():
            return []
        where, args = ("WHERE area = ?", [area]) if area else ("", [])
        read, rows = self._named(
            f"SELECT {PENDING_COLUMNS} FROM pending {where} ORDER BY created_at, id LIMIT ? OFFSET ?",
            [*args, -1 if limit is None else int(limit), int(offset)],
        )
        return [pending_of(read.record(row)) for row in rows]

    def _pending_count(self, area: str | None) -> int:
        if not self._has_pending_table():
            return 0
        where, args = ("WHERE area = ?", [area]) if area else ("", [])
        return int(self.db.execute(f"SELECT COUNT(*) FROM pending {where}", args).fetchone()[0])

    def _delete_pending(self, ids: Sequence[str]) -> None:
        for chunk in iter_chunks(ids, 900):
            self.db.execute(f"DELETE FROM pending WHERE id IN ({','.join('?' * len(chunk))})", chunk)

    # -- doctor runs: doctor_runs, doctor_findings (m010_doctor_runs) ---------------------
    def _has_doctor_tables(self) -> bool:
        """False only for a read-only store written before m010_doctor_runs (no run was ever kept)."""
        if not self.read_only:
            return True
        return self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'doctor_runs'").fetchone() is not None

    def _insert_doctor_run(self, at: str, figures: str) -> int:
        return int(self.db.execute("INSERT INTO doctor_runs (at, figures) VALUES (?, ?)", (at, figures)).lastrowid or 0)

    def _replace_findings(self, run: int, findings: Sequence[Finding]) -> None:
        self.db.execute("DELETE FROM doctor_findings")
        self.db.executemany(
            "INSERT INTO doctor_findings (run, kind, memory_id, reason, score, related) VALUES (?, ?, ?, ?, ?, ?)",
            [(run, f.kind, f.memory_id, f.reason, f.score, json.dumps(f.related)) for f in findings],
        )

    def _doctor_runs(self, last: int | None) -> builtins.list[DoctorRun]:
        if not self._has_doctor_tables():
            return []
        rows = self.db.execute(
            "SELECT run, at, figures FROM (SELECT * FROM doctor_runs ORDER BY run DESC LIMIT ?) ORDER BY run",
            (-1 if last is None else int(last),),
        ).fetchall()
        return [DoctorRun(int(run), at, figures_of(figures)) for run, at, figures in rows]

    def _doctor_findings(self, kind: str | None) -> builtins.list[Finding]:
        if not self._has_doctor_tables():
            return []
        where, args = ("WHERE kind = ?", [kind]) if kind else ("", [])
        rows = self.db.execute(
            f"SELECT kind, memory_id, reason, score, related, run FROM doctor_findings {where}"
            " ORDER BY kind, memory_id",
            args,
        ).fetchall()
        return [
            Finding(k, mid, reason, score, related_of(related), run) for k, mid, reason, score, related, run in rows
        ]

    def touch(self, ids: Sequence[str], at: str | None = None) -> int:
        """Record that `ids` were just read (accessed_at, for prune --not-accessed-for).

        One UPDATE after a search, never inside it. Best effort: when another writer holds the
        store for more than a moment, or the store is read-only, the access is simply not recorded.
        """
        ids = list(dict.fromkeys(ids))[:900]
        if not ids:
            return 0
        sql = f"UPDATE memories SET accessed_at = ? WHERE id IN ({','.join('?' * len(ids))})"
        args = (at or now_iso(), *ids)
        if self._depth:
            return self.db.execute(sql, args).rowcount
        # No store lock: accessed_at feeds no trigger (index, keyword index), so SQLite's own write
        # lock is enough, and a read-only `load` need not import filelock (~30 ms of a cold call).
        # Access times need no fsync of their own: the next regular (FULL) commit makes them durable.
        self.db.execute(f"PRAGMA busy_timeout = {int(TOUCH_WAIT * 1000)}")
        self.db.execute("PRAGMA synchronous=NORMAL")
        try:
            return self.db.execute(sql, args).rowcount
        except sqlite3.OperationalError:
            return 0
        finally:
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute(f"PRAGMA busy_timeout = {int(float(self.config['lock_timeout']) * 1000)}")

    def _update_row(
        self,
        memory_id: str,
        text: str | None,
        vector: np.ndarray | None,
        metadata: dict[str, Any],
        area: str,
        updated_at: str,
    ) -> None:
        if text is not None and vector is not None:
            self.db.execute(
                "UPDATE memories SET text = ?, vector = ?, content_hash = ? WHERE id = ?",
                (text, vector.astype("float32").tobytes(), content_hash(text), memory_id),
            )
        self.db.execute(
            "UPDATE memories SET metadata = ?, area = ?, updated_at = ?, keywords = ? WHERE id = ?",
            (json.dumps(metadata, ensure_ascii=False), area, updated_at, self._keywords(metadata), memory_id),
        )

    # -- reading -------------------------------------------------------------------------
    def _named(self, sql: str, args: Sequence[Any] = ()) -> tuple[RowReader, sqlite3.Cursor]:
        """The cursor of `sql` and the reader of its rows by column name."""
        cursor = self.db.execute(sql, args)
        return RowReader(cursor.description), cursor

    def get(self, ids: Sequence[str]) -> builtins.list[Memory]:
        """Memories for the ids that exist, in the order asked."""
        found: dict[str, Memory] = {}
        ids = list(ids)
        for start in range(0, len(ids), 900):
            chunk = ids[start : start + 900]
            marks = ",".join("?" * len(chunk))
            read, rows = self._named(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN ({marks})", chunk)
            found.update((memory.id, memory) for memory in map(read.memory, rows))
        return [found[i] for i in ids if i in found]

    def _exact_rows(self, text: str, area: str | None) -> builtins.list[Memory]:
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories WHERE content_hash = ? AND text = ?"
        args: builtins.list[Any] = [content_hash(text), text]
        if area:
            sql += " AND area = ?"
            args.append(area)
        read, rows = self._named(sql + " ORDER BY seq", args)
        return [read.memory(r) for r in rows]

    def _rows(self, area: str | None, flt: Filter | None, order: str = "seq") -> Iterator[tuple[int, Memory]]:
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories"
        args: builtins.list[Any] = []
        if area:
            sql += " WHERE area = ?"
            args.append(check_area(area))
        read, rows = self._named(f"{sql} ORDER BY {order}", args)
        for row in rows:
            memory = read.memory(row)
            if flt is None or flt.matches(memory.filter_names()):
                yield read.get(row, "seq"), memory

    def _page(self, area: str | None, limit: int, offset: int) -> tuple[builtins.list[Memory], int]:
        where, args = ("WHERE area = ?", [area]) if area else ("", [])
        total = int(self.db.execute(f"SELECT COUNT(*) FROM memories {where}", args).fetchone()[0])
        read, rows = self._named(
            f"SELECT {MEMORY_COLUMNS} FROM memories {where} ORDER BY created_at DESC, seq DESC LIMIT ? OFFSET ?",
            [*args, limit, offset],
        )
        return [read.memory(r) for r in rows], total

    def _seq_rows(self, seqs: Sequence[int]) -> Iterator[tuple[int, Memory]]:
        for start in range(0, len(seqs), 900):
            chunk = [int(s) for s in seqs[start : start + 900]]
            read, rows = self._named(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE seq IN ({','.join('?' * len(chunk))})", chunk
            )
            for row in rows:
                yield read.get(row, "seq"), read.memory(row)

    def _filtered(self, area: str | None, flt: Filter, order: str = "seq") -> builtins.list[tuple[int, str]]:
        """(seq, id) of the memories in `area` that `flt` matches, in `order`.

        SQLite selects them (memctl/store/filter_sql.py: postings in meta_terms find the candidates,
        the compiled expression decides); rows marked 'bad' (metadata the json functions cannot read
        exactly) and filters with no exact SQL form go through the Python evaluator.
        """
        from memctl.store.filter_sql import SQLITE_SUSPECT, compile_filter_sql, sqlite_prefilter

        compiled = compile_filter_sql(flt, "sqlite")
        if compiled is None:
            return [(seq, memory.id) for seq, memory in self._rows(area, flt, order)]
        where, args = [], []
        if area:
            where.append("area = ?")
            args.append(check_area(area))
        if compiled.prefilter is not None:
            pre, pre_args = sqlite_prefilter(compiled.prefilter)
            where.append(f"seq IN (SELECT seq FROM ({pre}) UNION {SQLITE_SUSPECT})")
            args += pre_args
        where.append(f"CASE WHEN seq IN ({SQLITE_SUSPECT}) THEN 1 ELSE {compiled.where} END = 1")
        args += compiled.params
        rows = self.db.execute(
            f"SELECT seq, id, seq IN ({SQLITE_SUSPECT}) FROM memories WHERE {' AND '.join(where)} ORDER BY {order}",
            args,
        ).fetchall()
        suspects = [seq for seq, _, bad in rows if bad]
        kept = {seq for seq, memory in self._seq_rows(suspects) if flt.matches(memory.filter_names())}
        return [(seq, rid) for seq, rid, bad in rows if not bad or seq in kept]

    def iter_all(self, *, area: str | None = None, with_vectors: bool = False) -> Iterator[tuple[Memory, bytes | None]]:
        sql = f"SELECT {MEMORY_COLUMNS}, vector FROM memories"
        args = [check_area(area)] if area else []
        read, cursor = self._named(sql + (" WHERE area = ?" if area else "") + " ORDER BY seq", args)
        while batch := cursor.fetchmany(1000):
            for row in batch:
                yield read.memory(row), (read.get(row, "vector") if with_vectors else None)

    def iter_with_access(self, *, area: str | None = None) -> Iterator[tuple[Memory, str | None]]:
        """Every memory (oldest first) with when `load` last returned it (None: never)."""
        sql = f"SELECT {MEMORY_COLUMNS}, accessed_at FROM memories"
        args = [check_area(area)] if area else []
        read, cursor = self._named(sql + (" WHERE area = ?" if area else "") + " ORDER BY seq", args)
        while batch := cursor.fetchmany(1000):
            for row in batch:
                yield read.memory(row), read.get(row, "accessed_at")

    def links(self) -> builtins.list[tuple[str, str, str, str]]:
        """Every provenance link of the store: (parent_id, child_id, kind, created_at)."""
        return [
            tuple(r)
            for r in self.db.execute(
                "SELECT parent_id, child_id, kind, created_at FROM links ORDER BY created_at, parent_id, child_id"
            )
        ]

    def append_history(self, entries: Sequence[HistoryEntry]) -> None:
        """Copy history entries (oldest first) as they are: op, actor and time kept (`memctl migrate`)."""
        with self._write() as db:
            db.executemany(
                "INSERT INTO history (memory_id, op, actor, at, area, old_text, new_text, old_metadata, new_metadata)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        e.memory_id,
                        e.op,
                        e.actor,
                        e.at,
                        e.area,
                        e.old_text,
                        e.new_text,
                        _json_or_none(e.old_metadata),
                        _json_or_none(e.new_metadata),
                    )
                    for e in entries
                ],
            )

    def history(self, memory_id: str | None = None, limit: int | None = None) -> builtins.list[HistoryEntry]:
        sql = "SELECT hid, memory_id, op, actor, at, area, old_text, new_text, old_metadata, new_metadata FROM history"
        args: builtins.list[Any] = []
        if memory_id:
            sql += " WHERE memory_id = ?"
            args.append(memory_id)
        sql += " ORDER BY hid DESC" + (" LIMIT ?" if limit else "")
        if limit:
            args.append(limit)
        read, rows = self._named(sql, args)
        entries = map(read.record, rows)
        return [history_entry(e, _json_loads(e["old_metadata"]), _json_loads(e["new_metadata"])) for e in entries]

    # -- searching -----------------------------------------------------------------------
    def _candidates(self, area: str | None, flt: Filter | None) -> np.ndarray | None:
        """Seqs allowed by area/filter (None = all). Applied before the top-k cut."""
        import numpy as np

        if area is None and flt is None:
            return None
        if flt is None:
            rows = self.db.execute("SELECT seq FROM memories WHERE area = ?", (check_area(area or ""),))
            return np.array([r[0] for r in rows], dtype=np.int64)
        return np.array([seq for seq, _ in self._filtered(area, flt)], dtype=np.int64)

    def _keyword_pairs(
        self, query: str, k: int, area: str | None, only: Any, common_df: int, common_text_df: int = 0
    ) -> builtins.list[tuple[int, float]]:
        from memctl.store.keyword import keyword_search

        return keyword_search(
            self.db, query, k, area, only, common_df=common_df, common_text_df=common_text_df, cache=self._df_cache()
        )

    def _rare_tokens(self, tokens: Sequence[str], max_df: int) -> set[str]:
        from memctl.store.keyword import rare_tokens

        return rare_tokens(self.db, tokens, max_df, self._df_cache())

    def _common_tokens(self, tokens: Sequence[str], min_df: int) -> set[str]:
        from memctl.store.keyword import doc_freq

        cache = self._df_cache()
        return {t for t in tokens if doc_freq(self.db, t, cache=cache) > min_df}

    def _search_index(self) -> VectorIndex | None:
        """vector_index(), synced once per search."""
        scope = self._scope()
        if scope is None:
            return self.vector_index()
        if "index" not in scope:
            scope["index"] = self.vector_index()
        return scope["index"]

    def _generation(self) -> Any:
        """Changes with every commit, by this handle (the commit counter) or any other connection (SQLite's
        data_version), and when a restore replaced the database; None inside a transaction."""
        if self._depth or self.db.in_transaction:
            return None
        self._refresh_for_read()
        version = self.db.execute("PRAGMA data_version").fetchone()[0]
        commits = self.db.execute("SELECT value FROM counters WHERE name = 'commits'").fetchone()
        return (id(self.db), self._ident, int(version), int(commits[0]) if commits else 0)

    def _seq_meta(self, seqs: builtins.list[int]) -> dict[int, tuple[str, dict[str, Any]]]:
        found: dict[int, tuple[str, dict[str, Any]]] = {}
        for start in range(0, len(seqs), 900):
            chunk = [int(s) for s in seqs[start : start + 900]]
            for seq, area, metadata in self.db.execute(
                f"SELECT seq, area, metadata FROM memories WHERE seq IN ({','.join('?' * len(chunk))})", chunk
            ):
                found[seq] = (area, json.loads(metadata))
        return found

    def _dense_pairs(
        self, vector: np.ndarray, k: int, only: Collection[int] | None
    ) -> builtins.list[tuple[int, float]]:
        import numpy as np

        index = self._search_index()
        if index is None:
            return []
        keys = None if only is None else np.asarray(only, dtype=np.int64)  # a no-op for _candidates' array
        if keys is not None and index.is_approximate and len(keys) <= EXACT_FILTERED_MAX:
            return self._exact_search(vector, k, keys)  # a filter must not lose matches to IVF probing
        return index.search(vector, k, keys)

    def _keys_of(self, ids: Sequence[str], area: str | None) -> dict[int, str]:
        found: dict[int, str] = {}
        for start in range(0, len(ids), 500):  # below SQLite's bound-variable limit
            chunk = list(ids[start : start + 500])
            marks = ", ".join("?" * len(chunk))
            sql = f"SELECT seq, id FROM memories WHERE id IN ({marks})"  # noqa: S608 - placeholders only
            args: builtins.list[Any] = chunk
            if area is not None:
                sql, args = sql + " AND area = ?", [*chunk, check_area(area)]
            found.update({int(seq): str(i) for seq, i in self.db.execute(sql, args)})
        return found

    def _relevance_of(self, seqs: builtins.list[int], vector: np.ndarray) -> dict[int, float]:
        import numpy as np

        if not seqs:
            return {}
        index = self._search_index()
        found = index.inner_products(vector, np.array(seqs)) if index is not None else None
        if found is not None:
            return {seq: relevance(ip) for seq, ip in found.items()}
        return {seq: relevance(ip) for seq, ip in self._exact_search(vector, len(seqs), np.array(seqs))}

    def _embed_query(self, query: str) -> np.ndarray:
        """Embed the query while the vector index loads: a cold CLI call pays for the slower of the two."""
        from concurrent.futures import ThreadPoolExecutor

        self.check_model()
        embedder = self.embedder
        if self._index is not None:  # a warm handle (a server): the index only syncs, no thread to start
            vector = embed_queries(embedder, [query])[0]
            self._search_index()
        else:
            with ThreadPoolExecutor(max_workers=1) as pool:
                future = pool.submit(embed_queries, embedder, [query])
                self._search_index()
                vector = future.result()[0]
        self._check_query_dimension(vector.shape[0])
        return vector

    def _start_query_embedding(
        self, queries: builtins.list[str], scan: bool = False
    ) -> Callable[[], builtins.list[np.ndarray]]:
        """A warm handle embeds on a thread it keeps (one started per query cost more than it saved), so the
        search reads its keyword side meanwhile: the model call (onnxruntime, an HTTP request) releases the
        GIL, and this thread keeps the connection to itself. With `scan`, the thread then scans the flat index
        with the last vector (`_embed_and_scan`). A cold handle (the CLI's one search) embeds beside the index
        load instead (`_embed_query`); a handle whose `_embed_query` a caller replaced (bench/hybrid_search.py
        hands precomputed vectors in through it) embeds at once, and only the scan goes to the thread."""
        if self._index is None:
            return super()._start_query_embedding(queries, scan)
        if "_embed_query" in self.__dict__:
            import numpy as np

            computed = super()._start_query_embedding(queries)()
            index = self._search_index()
            if scan and index is not None and index.can_scan(SCAN_MIN):
                self._model_executor().submit(_scanned, np.stack(computed), index)
            return lambda: computed
        self.check_model()
        index = self._search_index()  # synced here: the thread touches no connection but the embedding cache's
        embedded: Future[np.ndarray] = Future()
        self._model_executor().submit(_embed_and_scan, self.embedder, list(queries), index if scan else None, embedded)

        def wait() -> builtins.list[np.ndarray]:
            vectors = embedded.result()
            self._check_query_dimension(vectors.shape[1])
            return list(vectors)

        return wait

    def _model_executor(self) -> ThreadPoolExecutor:
        if self._model_thread is None:
            from concurrent.futures import ThreadPoolExecutor

            self._model_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memctl-embed")
        return self._model_thread

    def _check_query_dimension(self, dimension: int) -> None:
        dim = self.dimension()
        if dim is not None and dimension != dim:
            raise ModelMismatchError(
                f"embedding dimension {dimension} differs from the store's {dim}", hint="run `memctl reindex`"
            )

    def _exact_search(self, vector: np.ndarray, k: int, only: np.ndarray) -> builtins.list[tuple[int, float]]:
        import numpy as np

        from memctl.store.vector_index import vectors_from_blobs

        seqs: builtins.list[int] = []
        blobs: builtins.list[bytes] = []
        for start in range(0, len(only), 900):
            chunk = [int(x) for x in only[start : start + 900]]
            for seq, blob in self.db.execute(
                f"SELECT seq, vector FROM memories WHERE seq IN ({','.join('?' * len(chunk))})", chunk
            ):
                seqs.append(seq)
                blobs.append(blob)
        if not seqs:
            return []
        scores = vectors_from_blobs(blobs, len(vector)) @ vector.astype(np.float32)
        top = np.argsort(-scores, kind="stable")[:k]
        return [(seqs[i], float(scores[i])) for i in top]

    def _seq_hits(self, pairs: builtins.list[tuple[int, float]]) -> builtins.list[tuple[int, Hit]]:
        """(seq, Hit) for the pairs whose rows still exist, in the given order."""
        if not pairs:
            return []
        rows: dict[int, tuple[RowReader, tuple[Any, ...]]] = {}
        seqs = [p[0] for p in pairs]
        for start in range(0, len(seqs), 900):
            chunk = seqs[start : start + 900]
            read, found = self._named(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE seq IN ({','.join('?' * len(chunk))})", chunk
            )
            rows.update((read.get(r, "seq"), (read, r)) for r in found)
        return [(seq, rows[seq][0].hit(rows[seq][1], round(score, 6))) for seq, score in pairs if seq in rows]

    # -- maintenance ---------------------------------------------------------------------
    def _meta(self, key: str) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def _set_meta(self, key: str, value: Any) -> None:
        if value is None:
            self.db.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

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


def _json_loads(text: str | None) -> Any:
    return json.loads(text) if text else None


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


def _empty_database() -> sqlite3.Connection:
    """An in-memory database of the current schema: what a store reads as before its first commit."""
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    register_functions(db)
    apply_migrations(db)
    return db


def _applied_migrations(db: sqlite3.Connection) -> set[str]:
    """The migrations the database records (none: it holds no memctl store), without writing."""
    try:
        return {row[0] for row in db.execute("SELECT name FROM schema_migrations")}
    except sqlite3.OperationalError:
        return set()


def _recorded_commits(path: Path) -> int:
    try:
        return int(path.read_text(encoding="ascii").strip() or 0)
    except (OSError, ValueError):
        return 0


def _make_private(folder: Path) -> None:
    """The store holds every text: its folder 0700 and its database files 0600 (SQLite creates them
    from the umask, usually 0644). Only the owner's stores are changed; a failure changes nothing."""
    import stat

    try:
        if os.stat(folder).st_uid != os.getuid():
            return
        for path, private in (
            (folder, 0o700),
            (folder / DB_FILE, 0o600),
            (folder / f"{DB_FILE}-wal", 0o600),
            (folder / f"{DB_FILE}-shm", 0o600),
        ):
            try:
                mode = stat.S_IMODE(os.stat(path).st_mode)
            except FileNotFoundError:
                continue
            if mode & 0o077:
                os.chmod(path, private)
    except (OSError, AttributeError):  # AttributeError: os.getuid does not exist on Windows
        pass


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


# Files only a store that once had a database holds (the cache and config.yaml are not enough).
_STORE_TRACES = ("index.faiss", "embedding.json", "knowledge_import.json")


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


def _embed_and_scan(
    embedder: Embedder, queries: builtins.list[str], index: VectorIndex | None, embedded: Future[np.ndarray]
) -> None:
    """On the model thread: the query vectors (handed over through `embedded` as soon as they exist), then
    the flat index scanned for the last one, the vector the dense side ranks with (`VectorIndex.scan` keeps
    the scores for the search; a search that asks for them meanwhile waits on the scan's lock). The scan
    runs without the GIL while the search reads its keyword side. A dimension that does not fit is left
    for the caller to report."""
    try:
        vectors = embed_queries(embedder, queries)
    except BaseException as exc:  # noqa: BLE001 - handed to the waiting search, which raises it
        embedded.set_exception(exc)
        return
    embedded.set_result(vectors)
    _scanned(vectors, index)


def _scanned(vectors: np.ndarray, index: VectorIndex | None) -> None:
    if index is not None and index.can_scan(SCAN_MIN) and len(vectors) and vectors.shape[1] == index.dimension:
        index.scan(vectors[-1])


def _full_disk(folder: Path, exc: BaseException) -> bool:
    """An SQLite I/O failure on a file system with (almost) no space left: the disk is full."""
    if "disk i/o" not in str(exc).lower():
        return False
    try:
        stats = os.statvfs(folder)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < (1 << 20)
