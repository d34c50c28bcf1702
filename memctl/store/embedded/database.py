"""The embedded store's folder and its SQLite database: opening and creating it, connections, the write
lock and the write transaction, the commit record, and following a restore that replaced the store.

The first of EmbeddedStore's layers (database, rows, search, store: memctl/store/embedded/store.py)."""

from __future__ import annotations

import os
import sqlite3
import time
import urllib.parse
from abc import abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.embeddings import Embedder
from memctl.errors import LockTimeoutError, NotFoundError, StoreError, sqlite_hint
from memctl.files import recover_swap, remove_lock_only_folder
from memctl.store.base import StoreBase
from memctl.store.keyword import register_functions
from memctl.store.layout import COMMITS_FILE, DB_FILE, EMBEDDING_FILE, LOCK_FILE
from memctl.store.schema import MIGRATIONS, apply_migrations
from memctl.store.vector_index import INDEX_FILE, SIDECAR_FILE, VectorIndex

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from memctl.config import Config


class _EmbeddedDatabase(StoreBase):
    """A store folder's database: opened, locked and written (one IMMEDIATE transaction per write)."""

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

    @abstractmethod
    def _checkpoint_after_commit(self) -> None:
        """The vector index checkpoint a commit may trigger (memctl/store/embedded/search.py)."""


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


# Files only a store that once had a database holds (the cache and config.yaml are not enough).
_STORE_TRACES = ("index.faiss", "embedding.json", "knowledge_import.json")


def _full_disk(folder: Path, exc: BaseException) -> bool:
    """An SQLite I/O failure on a file system with (almost) no space left: the disk is full."""
    if "disk i/o" not in str(exc).lower():
        return False
    try:
        stats = os.statvfs(folder)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < (1 << 20)
