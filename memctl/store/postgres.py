"""The PostgreSQL + pgvector backend: many agents on many machines share one database.

One database (or one schema of it: `?options=-csearch_path%3Dmemctl,public`) holds every store;
a store is the rows of one `subdir`. Vectors live in a pgvector column with an HNSW index
(inner product) per dimension; keyword search is PostgreSQL full-text search (a generated
tsvector column under a GIN index, ranked by ts_rank_cd) fed into the same fusion as the
embedded store (memctl/store/base.py). Writers use ordinary transactions and row locks — no
store-wide lock — so any number of processes can write at once; ids are unique per subdir by a
constraint. The schema is created and migrated on first use (memctl/store/pg_schema.py).

psycopg and pgvector are imported here only, so the embedded path never loads them.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.embeddings import Embedder, ModelInfo, content_hash, embed_queries
from memctl.errors import LockTimeoutError, ModelMismatchError, StoreError, UsageError
from memctl.store.base import StoreBase
from memctl.store.doctor_rows import DoctorRun, Finding, figures_of, related_of
from memctl.store.filters import Filter
from memctl.store.interface import PreparedRow, StoreSpec
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
from memctl.store.validate import check_area

if TYPE_CHECKING:
    import numpy as np

    from memctl.config import Config

# Seconds to wait for the server before giving up (a URL's own connect_timeout wins).
CONNECT_TIMEOUT = 3
# Below this many memories in a store (or candidates after a filter), dense search is exact:
# a sequential scan of that many vectors is fast, and exact beats any approximate index.
EXACT_MAX = 10_000
EXACT_FILTERED_MAX = 200_000
# A store's memctl_counts rows (one per server process that wrote to it) are folded into one past this many.
COUNT_SLOTS_MAX = 16
# Seconds `touch` (access times after `load`) waits for a row lock before skipping.
TOUCH_WAIT = 1.0
HNSW_EF_SEARCH = 100
# Memory for building an HNSW index (maintenance_work_mem, raised for that one statement, never lowered):
# pgvector builds several times faster while the graph fits in it (about dimension x 4 + 400 bytes a row).
HNSW_BUILD_MEMORY_MAX_MB = 2048
_KNOWLEDGE_ENTRY = ("checksum", "area", "file_type", "ids", "chunking", "imported_at")
# Every table holding a store's rows (restore-backup replaces them all).
_STORE_TABLES = (
    "memctl_memories",
    "memctl_history",
    "memctl_links",
    "memctl_archive",
    "memctl_behaviour",
    "memctl_knowledge_folders",
    "memctl_knowledge_files",
    "memctl_pending",
    "memctl_doctor_runs",
    "memctl_doctor_findings",
    "memctl_stores",
)
_TS_CONFIG = "english"


def redact(url: str) -> str:
    """The URL as it may appear in a message: no password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - a malformed URL is reported by the connect that follows
        return url.split("@")[-1] if "@" in url else url
    host = info.get("host") or "localhost"
    port = info.get("port") or "5432"
    user = f"{info['user']}@" if info.get("user") else ""
    return f"postgresql://{user}{host}:{port}/{info.get('dbname') or ''}"


def connect(url: str, *, lock_timeout: float | None = None) -> Any:
    """An autocommit connection with pgvector registered and the schema migrated."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    from memctl.store.pg_schema import apply_pg_migrations

    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise UsageError(
            f"--store {redact(url)!r} is not a valid PostgreSQL URL: {exc}",
            hint="postgresql://USER:PASSWORD@HOST:PORT/DBNAME",
        ) from exc
    extra: dict[str, Any] = {} if "connect_timeout" in params else {"connect_timeout": CONNECT_TIMEOUT}
    try:
        conn = psycopg.connect(url, autocommit=True, application_name="memctl", **extra)
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot connect to PostgreSQL at {redact(url)}: {_first_line(exc)}",
            hint="check the host, port, user and password in --store / MEMCTL_STORE / store_url, "
            "and that the server accepts connections from this machine",
        ) from exc
    try:
        apply_pg_migrations(conn)
        from pgvector.psycopg import register_vector

        register_vector(conn)
        if lock_timeout is not None:
            conn.execute(f"SET lock_timeout = {int(lock_timeout * 1000)}")
        _set_optional(conn, "hnsw.iterative_scan", "strict_order")  # filters keep k results (pgvector >= 0.8)
        _set_optional(conn, "hnsw.ef_search", str(HNSW_EF_SEARCH))
    except BaseException:
        conn.close()
        raise
    return conn


def _set_optional(conn: Any, name: str, value: str) -> None:
    import psycopg

    try:
        conn.execute("SELECT set_config(%s, %s, false)", (name, value))
    except psycopg.Error:
        pass


def _url(spec: StoreSpec) -> str:
    if spec.url is None:  # memctl.store.backend_of gives a PostgresStore only the URLs of its schemes
        raise UsageError("a PostgreSQL store needs a postgresql:// URL")
    return spec.url


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return " ".join(line.strip() for line in text.splitlines() if line.strip()) or type(exc).__name__


class PostgresStore(StoreBase):
    """A memory store as the rows of one subdir in a PostgreSQL database."""

    holds_nul = False  # text and jsonb refuse U+0000

    schemes = ("postgresql", "postgres")  # postgresql://USER:PASSWORD@HOST:PORT/DB, libpq's two spellings
    url_example = "postgresql://memctl:PASSWORD@db.example:5432/memctl"

    def __init__(
        self,
        url: str,
        subdir: str,
        config: Config,
        embedder: Embedder | None = None,
        actor: str = "api",
        cache_dir: Path | None = None,
    ) -> None:
        self.url = url
        self.subdir = subdir
        self.config = config
        self.actor = actor
        self._embedder = embedder
        self._cache_dir = cache_dir
        self._depth = 0
        self._indexed_dims: set[int] = set()
        self._defer_index = False  # inside bulk(): a missing HNSW index is built after the inserts
        self._fold_failed = False  # a read-only connection (a standby) cannot fold memctl_counts' rows
        self._counts_oid: int | None = None
        self.conn = connect(url, lock_timeout=float(config["lock_timeout"]))

    # -- finding and opening the database's stores (memctl/store/__init__.py) ------------
    @classmethod
    def open_at(cls, spec: StoreSpec) -> PostgresStore:
        from memctl.config import load_config
        from memctl.config.paths import validate_subdir
        from memctl.errors import NotFoundError

        name = validate_subdir(spec.subdir)
        config = spec.config or load_config(None, spec.overrides)
        opened = cls(_url(spec), name, config, embedder=spec.embedder, actor=spec.actor, cache_dir=spec.cache_dir)
        if spec.read_only:  # stats, list, export, backup: the server refuses any write of this session
            opened.conn.execute("SET default_transaction_read_only = on")
        if not spec.create and name not in {known for known, _ in opened.subdirs()}:
            opened.close()
            raise NotFoundError(
                f"no store {name!r} in the PostgreSQL database",
                hint="check --subdir (`memctl subdirs` lists the stores); `memctl save` creates one",
            )
        return opened

    @classmethod
    def stores_at(cls, spec: StoreSpec, *, counts: bool = True) -> StoreList:
        from memctl.config import load_config

        where = redact(_url(spec))
        found = database_stores(_url(spec), load_config(None, spec.overrides))
        return StoreList(where, [StoreSummary(name, count, f"{where}#{name}") for name, count in found])

    @classmethod
    def where_at(cls, spec: StoreSpec) -> str:
        return redact(_url(spec))

    @classmethod
    def location_at(cls, spec: StoreSpec) -> str:
        return f"{redact(_url(spec))}#{spec.subdir}"  # whether it exists, the connection that follows says

    # -- plumbing ------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.subdir

    @property
    def location(self) -> str:
        """Where the store is, for messages and `stats` (no password)."""
        return f"{redact(self.url)}#{self.subdir}"

    def close(self) -> None:
        self._close_embedder()
        self.conn.close()

    def __len__(self) -> int:
        return self._counts()[0]

    def _at_most(self, limit: int) -> bool:
        """Whether the store holds at most `limit` memories."""
        return len(self) <= limit

    def _counts(self) -> tuple[int, int]:
        """(memories, changes) of this store from its memctl_counts rows (pg_schema.py m007), which triggers keep
        for every writer: exact in the statement's snapshot, a few rows read by primary key where counting the
        subdir scanned its index (11-14 ms at 170k rows). Read once per search."""
        scope = self._scope()
        if scope is not None and "counts" in scope:
            return scope["counts"]
        memories, changes, slots = self._one(
            "SELECT coalesce(sum(memories), 0), coalesce(sum(changes), 0), count(*) FROM memctl_counts"
            " WHERE subdir = %s",
            (self.subdir,),
        )
        if slots > COUNT_SLOTS_MAX:
            self._fold_counts()
        counts = (int(memories), int(changes))
        if scope is not None:
            scope["counts"] = counts
        return counts

    def _fold_counts(self) -> None:
        """Sum the store's counter rows that no open transaction holds into its slot 0 (each writing server
        process adds a row; folding keeps them few). Best effort: skipped inside a transaction or where the
        connection may not write."""
        import psycopg

        if self._fold_failed or self._depth or self.conn.info.transaction_status != 0:
            return
        try:
            self.conn.execute(
                "WITH gone AS (DELETE FROM memctl_counts WHERE (subdir, slot) IN (SELECT subdir, slot"
                " FROM memctl_counts WHERE subdir = %s AND slot <> 0 FOR UPDATE SKIP LOCKED)"
                " RETURNING memories, changes)"
                " INSERT INTO memctl_counts AS c (subdir, slot, memories, changes)"
                " SELECT %s, 0, sum(memories), sum(changes) FROM gone HAVING count(*) > 0"
                " ON CONFLICT (subdir, slot) DO UPDATE SET memories = c.memories + EXCLUDED.memories,"
                " changes = c.changes + EXCLUDED.changes",
                (self.subdir, self.subdir),
            )
        except psycopg.Error:
            self._fold_failed = True

    def _generation(self) -> Any:
        """The store's change counter (it grows with every committed insert, delete or change of a memory by any
        writer; a fold keeps it) and the counter table's identity (a schema dropped and made again starts over);
        None inside a transaction, whose own uncommitted writes may yet be rolled back."""
        if self._depth or self.conn.info.transaction_status != 0:
            return None
        return (self._counts_table(), self._counts()[1])

    def _counts_table(self) -> int:
        if self._counts_oid is None:
            self._counts_oid = int(self._one("SELECT 'memctl_counts'::regclass::oid")[0])
        return self._counts_oid

    def search_evidence(self, *args: Any, **kwargs: Any) -> builtins.list[tuple[Hit, dict[str, float] | None]]:
        """StoreBase.search_evidence (and so search) in one search scope from the start: the store's counts are
        read once (its emptiness, size, exact-or-HNSW choice and generation)."""
        with self._search_scope():
            return super().search_evidence(*args, **kwargs)

    # -- the connection: reconnect once per call after the server went away ---------------
    def _connection_lost(self) -> bool:
        return bool(self.conn.closed or getattr(self.conn, "broken", False))

    def _reconnect(self) -> None:
        """A new connection in place of one the server closed (a restart, a failover, an idle timeout).
        Raises StoreError (saying so) when the server does not answer."""
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - it is gone already
            pass
        try:
            self.conn = connect(self.url, lock_timeout=float(self.config["lock_timeout"]))
        except StoreError as exc:
            raise StoreError(
                f"lost the connection to PostgreSQL at {redact(self.url)} and could not reconnect: {exc.message}",
                hint="check that the server is up; committed changes are kept",
            ) from exc
        self._indexed_dims = set()
        self._counts_oid = None
        self._fold_failed = False
        self.__dict__.pop("_memo_held", None)  # another server may answer: nothing kept from the old one

    def _execute(self, sql: str, args: Sequence[Any] | Mapping[str, Any] | None = None) -> Any:
        import psycopg

        if self._depth == 0 and self._connection_lost():
            self._reconnect()
        try:
            return self.conn.execute(sql, args)
        except psycopg.OperationalError as exc:
            # Outside a transaction a statement on a connection the server closed is retried once on a new
            # one (inside a transaction the whole transaction failed: the caller hears of it).
            if self._depth or not self._connection_lost() or isinstance(exc, psycopg.errors.LockNotAvailable):
                raise self._store_error(exc) from exc
        self._reconnect()
        try:
            return self.conn.execute(sql, args)
        except psycopg.OperationalError as exc:
            raise self._store_error(exc) from exc

    def _store_error(self, exc: BaseException) -> StoreError:
        import psycopg

        if isinstance(exc, psycopg.errors.LockNotAvailable):
            return LockTimeoutError(
                f"another process holds rows of store {self.subdir!r} too long",
                hint=f"retry later or raise lock_timeout ({self.config['lock_timeout']} s)",
            )
        return StoreError(
            f"PostgreSQL at {redact(self.url)} failed: {_first_line(exc)}",
            hint="check that the server is up; committed changes are kept",
        )

    def _one(self, sql: str, args: Sequence[Any] | None = None) -> Any:
        return self._execute(sql, args).fetchone()

    def _all(self, sql: str, args: Sequence[Any] | None = None) -> builtins.list[Any]:
        return self._execute(sql, args).fetchall()

    def _named(self, sql: str, args: Sequence[Any] | None = None) -> tuple[RowReader, builtins.list[Any]]:
        """The rows of `sql` and the reader of them by column name."""
        cursor = self._execute(sql, args)
        return RowReader(cursor.description), cursor.fetchall()

    @contextmanager
    def _write(self) -> Iterator[Any]:
        """One transaction (nested uses join it). Row locks only: other writers go on in parallel."""
        import psycopg

        if self._depth:
            self._depth += 1
            try:
                yield self.conn
            finally:
                self._depth -= 1
            return
        self._depth = 1
        try:
            with self._begin():
                yield self.conn
        except psycopg.errors.LockNotAvailable as exc:
            raise LockTimeoutError(
                f"another process holds rows of store {self.subdir!r} too long",
                hint=f"retry later or raise lock_timeout ({self.config['lock_timeout']} s)",
            ) from exc
        except psycopg.OperationalError as exc:
            raise StoreError(
                f"PostgreSQL at {redact(self.url)} failed: {_first_line(exc)}",
                hint="nothing of this change was written; retry",
            ) from exc
        finally:
            self._depth = 0

    @contextmanager
    def _begin(self) -> Iterator[None]:
        """A transaction on a live connection: one the server closed is replaced once, at BEGIN
        (nothing of the transaction was sent yet)."""
        import psycopg

        with ExitStack() as stack:
            if self._connection_lost():
                self._reconnect()
            try:
                stack.enter_context(self.conn.transaction())
            except psycopg.OperationalError:
                if not self._connection_lost():
                    raise
                self._reconnect()
                stack.enter_context(self.conn.transaction())
            yield

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
        self._history_rows(
            [
                (
                    memory_id,
                    op,
                    actor or self.actor,
                    now_iso(),
                    area,
                    old_text,
                    new_text,
                    _json(old_metadata),
                    _json(new_metadata),
                )
            ]
        )

    def _history_rows(self, rows: Sequence[tuple[Any, ...]]) -> None:
        if not rows:
            return
        with self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memctl_history (subdir, memory_id, op, actor, at, area, old_text, new_text,"
                " old_metadata, new_metadata) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(self.subdir, *row) for row in rows],
            )

    # -- the model -----------------------------------------------------------------------
    def _store_row(self) -> Any:
        """The store's model record; read once per search (which asks for it three times)."""
        scope = self._scope()
        if scope is not None and "store row" in scope:
            return scope["store row"]
        row = self._one(
            "SELECT provider, model, dimension, reindex FROM memctl_stores WHERE subdir = %s", (self.subdir,)
        )
        if scope is not None:
            scope["store row"] = row
        return row

    def model_info(self) -> dict[str, Any] | None:
        row = self._store_row()
        if row is None or row[0] is None:
            return None
        return {"provider": row[0], "model": row[1], "dimension": row[2]}

    def _model_state(self) -> tuple[Any, dict[str, Any] | None]:
        row = self._store_row()
        if row is None:
            return None, None
        return row[3], None if row[0] is None else {"provider": row[0], "model": row[1], "dimension": row[2]}

    def _write_model(self, info: ModelInfo, dimension: int) -> None:
        self._execute(
            "INSERT INTO memctl_stores (subdir, provider, model, dimension, created_at) VALUES (%s, %s, %s, %s, %s)"
            " ON CONFLICT (subdir) DO UPDATE SET provider = EXCLUDED.provider, model = EXCLUDED.model,"
            " dimension = EXCLUDED.dimension",
            (self.subdir, info.provider, info.model, int(dimension), now_iso()),
        )

    def _reindex_state(self) -> Any:
        row = self._store_row()
        return row[3] if row is not None else None

    def _set_reindex_state(self, value: Any) -> None:
        self._execute(
            "INSERT INTO memctl_stores (subdir, reindex, created_at) VALUES (%s, %s, %s)"
            " ON CONFLICT (subdir) DO UPDATE SET reindex = EXCLUDED.reindex",
            (self.subdir, _json(value), now_iso()),
        )

    def _ensure_vector_index(self, dim: int) -> None:
        """The HNSW index for vectors of `dim` dimensions (one partial index per dimension in use).

        Created in its own transaction under an advisory lock, never inside a writer's transaction
        (CREATE INDEX waits for writers; inside one it could wait for another waiting on us). Inside
        `bulk()` a missing index is left for the end of the bulk: built once from the loaded rows.
        """
        if dim in self._indexed_dims:
            return
        name = f"memctl_memories_hnsw_{int(dim)}"
        if self._one("SELECT to_regclass(format('%%I.%%I', current_schema(), %s::text))", (name,))[0] is None:
            if self._defer_index or self.conn.info.transaction_status != 0:  # inside a transaction: the next call
                return
            from memctl.store.pg_schema import LOCK_KEY

            with self.conn.transaction():
                self._execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                self._raise_build_memory(dim)
                self._execute(
                    f"CREATE INDEX IF NOT EXISTS {name} ON memctl_memories USING hnsw"
                    f" ((vector::vector({int(dim)})) vector_ip_ops) WHERE vector_dims(vector) = {int(dim)}"
                )
        self._indexed_dims.add(dim)

    def _raise_build_memory(self, dim: int) -> None:
        """maintenance_work_mem for this transaction's index build: enough for the graph of the rows there
        are (up to HNSW_BUILD_MEMORY_MAX_MB), never below the server's setting."""
        rows = int(self._one("SELECT count(*) FROM memctl_memories")[0])  # a second at 1M rows; the build: minutes
        wanted_mb = min(HNSW_BUILD_MEMORY_MAX_MB, rows * (int(dim) * 4 + 400) // 2**20 + 64)
        current_kb = int(self._one("SELECT setting::bigint FROM pg_settings WHERE name = 'maintenance_work_mem'")[0])
        if wanted_mb * 1024 > current_kb:
            self._execute(f"SET LOCAL maintenance_work_mem = '{int(wanted_mb)}MB'")

    @contextmanager
    def bulk(self) -> Iterator[PostgresStore]:
        """Many inserts in a row (an import, a bulk load). A missing HNSW index is built once after them
        instead of being created before the first COPY and updated row by row (pgvector's graph insert,
        about 2 ms a row on a small machine, bounded a load to a few hundred rows a second). Where the index
        exists already (another store of this dimension in the database), the COPYs keep it up to date.
        After a failed bulk the index is left to the next search, which builds it."""
        outer = self._defer_index
        self._defer_index = True
        try:
            yield self
        except BaseException:
            self._defer_index = outer
            raise
        self._defer_index = outer
        dim = self.dimension()
        if not outer and dim is not None and self.conn.info.transaction_status == 0:
            self._ensure_vector_index(dim)

    # -- writing -------------------------------------------------------------------------
    @contextmanager
    def _insert_errors(self) -> Iterator[None]:
        import psycopg

        try:
            yield
        except psycopg.errors.UniqueViolation as exc:  # another process took an id between check and insert
            raise UsageError(
                "an id of this batch was just stored by another process; nothing was inserted",
                hint="retry (with --on-conflict skip to keep the stored ones)",
            ) from exc
        except psycopg.DataError as exc:  # NUL characters, untranslatable ones
            raise UsageError(
                f"PostgreSQL cannot store this text: {_first_line(exc)}",
                hint="PostgreSQL text holds no NUL (U+0000) characters; remove them",
            ) from exc

    def _insert_prepared(self, rows: Sequence[PreparedRow], history: Sequence[tuple[Any, ...]]) -> None:
        import numpy as np

        self._insert_rows([(self.subdir, *r[:6], np.asarray(r.vector, dtype=np.float32), *r[7:]) for r in rows])
        self._history_rows(history)

    def _insert_rows(self, rows: builtins.list[tuple[Any, ...]], *, with_access: bool = False) -> None:
        """Many rows: binary COPY (several times faster than INSERTs); a few: one INSERT each.

        A row: subdir, id, text, area, created_at, updated_at, metadata, vector, content_hash, keywords
        (and accessed_at `with_access`).
        """
        if not rows:
            return
        columns = "subdir, id, text, area, created_at, updated_at, metadata, vector, content_hash, keywords"
        # metadata arrives as JSON text: COPY sends it as text bytes (json_recv reads them as they are);
        # the "json" dumper would encode the text once more, storing a JSON *string* (issue 17.1).
        types = ["text", "text", "text", "text", "text", "text", "text", "vector", "text", "text"]
        if with_access:
            columns, types = columns + ", accessed_at", [*types, "text"]
        with self.conn.cursor() as cur:
            if len(rows) < 50:
                cur.executemany(
                    f"INSERT INTO memctl_memories ({columns}) VALUES ({', '.join(['%s'] * len(types))})", rows
                )
                return
            with cur.copy(f"COPY memctl_memories ({columns}) FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(types)
                for row in rows:
                    copy.write_row(row)

    def _existing_ids(self, ids: Sequence[str], *, lock: bool = False) -> set[str]:
        if not ids:
            return set()
        sql = "SELECT id FROM memctl_memories WHERE subdir = %s AND id = ANY(%s)"
        return {r[0] for r in self._all(sql + (" FOR UPDATE" if lock else ""), (self.subdir, list(ids)))}

    def _lock_ids(self, ids: Sequence[str]) -> set[str]:
        return self._existing_ids(ids, lock=True)

    def _link(self, parent_ids: Sequence[str], child_id: str, kind: str) -> None:
        stamp = now_iso()
        with self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memctl_links (subdir, parent_id, child_id, kind, created_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [(self.subdir, p, child_id, kind, stamp) for p in parent_ids],
            )

    def links(self) -> builtins.list[tuple[str, str, str, str]]:
        """Every provenance link of the store: (parent_id, child_id, kind, created_at)."""
        return [
            tuple(r)
            for r in self._all(
                "SELECT parent_id, child_id, kind, created_at FROM memctl_links WHERE subdir = %s"
                " ORDER BY created_at, parent_id, child_id",
                (self.subdir,),
            )
        ]

    def append_history(self, entries: Sequence[HistoryEntry]) -> None:
        """Copy history entries (oldest first) as they are: op, actor and time kept."""
        with self._write(), self._insert_errors():
            self._history_rows(
                [
                    (
                        e.memory_id,
                        e.op,
                        e.actor,
                        e.at,
                        e.area,
                        e.old_text,
                        e.new_text,
                        _json(e.old_metadata),
                        _json(e.new_metadata),
                    )
                    for e in entries
                ]
            )

    def derived_ids(self, ids: Sequence[str]) -> builtins.list[str]:
        """Ids derived (transitively, through the link table) from `ids`, excluding `ids`."""
        if not ids:
            return []
        rows = self._all(
            "WITH RECURSIVE d(id) AS (SELECT unnest(%s::text[]) UNION SELECT l.child_id FROM memctl_links l"
            " JOIN d ON l.parent_id = d.id WHERE l.subdir = %s)"
            " SELECT m.id FROM d JOIN memctl_memories m ON m.subdir = %s AND m.id = d.id"
            " WHERE NOT (d.id = ANY(%s::text[])) ORDER BY m.seq",
            (list(ids), self.subdir, self.subdir, list(ids)),
        )
        return [r[0] for r in rows]

    def _delete_rows(self, ids: Sequence[str]) -> None:
        self._execute("DELETE FROM memctl_memories WHERE subdir = %s AND id = ANY(%s)", (self.subdir, list(ids)))

    def _archive(self, ids: Sequence[str], op: str, actor: str | None) -> None:
        """Copy rows about to be removed into `memctl_archive` (one version per id: the latest)."""
        info = self.model_info() or {}
        model = f"{info.get('provider')}:{info.get('model')}" if info else None
        self._execute(
            "INSERT INTO memctl_archive (subdir, id, text, area, created_at, updated_at, accessed_at, metadata,"
            " vector, model, archived_at, op, actor) SELECT subdir, id, text, area, created_at, updated_at,"
            " accessed_at, metadata, vector, %s, %s, %s, %s FROM memctl_memories WHERE subdir = %s AND id = ANY(%s)"
            " ON CONFLICT (subdir, id) DO UPDATE SET text = EXCLUDED.text, area = EXCLUDED.area,"
            " created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, accessed_at = EXCLUDED.accessed_at,"
            " metadata = EXCLUDED.metadata, vector = EXCLUDED.vector, model = EXCLUDED.model,"
            " archived_at = EXCLUDED.archived_at, op = EXCLUDED.op, actor = EXCLUDED.actor",
            (model, now_iso(), op, actor or self.actor, self.subdir, list(ids)),
        )

    def forget_text(self, ids: Sequence[str]) -> None:
        """History keeps who did what and when for these ids, not the text; the archive drops them (prune --purge)."""
        with self._write():
            self._execute(
                "UPDATE memctl_history SET old_text = NULL, new_text = NULL, old_metadata = NULL,"
                " new_metadata = NULL WHERE subdir = %s AND memory_id = ANY(%s)",
                (self.subdir, list(ids)),
            )
            self._execute("DELETE FROM memctl_archive WHERE subdir = %s AND id = ANY(%s)", (self.subdir, list(ids)))

    # -- the review queue: memctl_pending (m009_pending) ----------------------------------
    def _insert_pending(self, items: Sequence[PendingItem]) -> None:
        if not items:
            return
        with self.conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO memctl_pending (subdir, {PENDING_COLUMNS}, content_hash)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(self.subdir, *i.row()) for i in items],
            )

    def _pending_with_hash(self, digest: str, area: str, text: str) -> str | None:
        # FOR UPDATE: two memorize runs queueing the same text at once — the second waits, then finds it.
        row = self._one(
            "SELECT id FROM memctl_pending WHERE subdir = %s AND content_hash = %s AND area = %s AND text = %s"
            " ORDER BY created_at LIMIT 1 FOR UPDATE",
            (self.subdir, digest, area, text),
        )
        return row[0] if row else None

    def _pending_rows(self, ids: Sequence[str]) -> builtins.list[PendingItem]:
        if not ids:
            return []
        lock = " FOR UPDATE" if self._depth else ""  # inside a write: decided once, by one reviewer
        read, rows = self._named(
            f"SELECT {PENDING_COLUMNS} FROM memctl_pending WHERE subdir = %s AND id = ANY(%s){lock}",
            (self.subdir, list(ids)),
        )
        return [pending_of(read.record(row)) for row in rows]

    def _pending_page(self, limit: int | None, offset: int, area: str | None) -> builtins.list[PendingItem]:
        read, rows = self._named(
            f"SELECT {PENDING_COLUMNS} FROM memctl_pending WHERE subdir = %s AND (%s::text IS NULL OR area = %s)"
            " ORDER BY created_at, id LIMIT %s OFFSET %s",
            (self.subdir, area, area, limit, int(offset)),
        )
        return [pending_of(read.record(row)) for row in rows]

    def _pending_count(self, area: str | None) -> int:
        row = self._one(
            "SELECT count(*) FROM memctl_pending WHERE subdir = %s AND (%s::text IS NULL OR area = %s)",
            (self.subdir, area, area),
        )
        return int(row[0])

    def _delete_pending(self, ids: Sequence[str]) -> None:
        self._execute("DELETE FROM memctl_pending WHERE subdir = %s AND id = ANY(%s)", (self.subdir, list(ids)))

    # -- doctor runs: memctl_doctor_runs, memctl_doctor_findings (m010_doctor_runs) --------
    def _insert_doctor_run(self, at: str, figures: str) -> int:
        row = self._one(
            "INSERT INTO memctl_doctor_runs (subdir, at, figures) VALUES (%s, %s, %s) RETURNING run",
            (self.subdir, at, figures),
        )
        return int(row[0])

    def _replace_findings(self, run: int, findings: Sequence[Finding]) -> None:
        self._execute("DELETE FROM memctl_doctor_findings WHERE subdir = %s", (self.subdir,))
        if not findings:
            return
        with self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memctl_doctor_findings (subdir, run, kind, memory_id, reason, score, related)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [(self.subdir, run, f.kind, f.memory_id, f.reason, f.score, json.dumps(f.related)) for f in findings],
            )

    def _doctor_runs(self, last: int | None) -> builtins.list[DoctorRun]:
        rows = self._all(
            "SELECT run, at, figures FROM (SELECT run, at, figures FROM memctl_doctor_runs WHERE subdir = %s"
            " ORDER BY run DESC LIMIT %s) r ORDER BY run",
            (self.subdir, last),
        )
        return [DoctorRun(int(run), at, figures_of(figures)) for run, at, figures in rows]

    def _doctor_findings(self, kind: str | None) -> builtins.list[Finding]:
        rows = self._all(
            "SELECT kind, memory_id, reason, score, related, run FROM memctl_doctor_findings"
            " WHERE subdir = %s AND (%s::text IS NULL OR kind = %s) ORDER BY kind, memory_id",
            (self.subdir, kind, kind),
        )
        return [
            Finding(k, mid, reason, None if score is None else float(score), related_of(related), int(run))
            for k, mid, reason, score, related, run in rows
        ]

    def touch(self, ids: Sequence[str], at: str | None = None) -> int:
        """Record that `ids` were just read (accessed_at). Best effort: skipped when rows stay locked."""
        import psycopg

        ids = list(dict.fromkeys(ids))[:900]
        if not ids:
            return 0
        sql = "UPDATE memctl_memories SET accessed_at = %s WHERE subdir = %s AND id = ANY(%s)"
        args = (at or now_iso(), self.subdir, ids)
        if self._depth:
            return int(self._execute(sql, args).rowcount)
        try:
            with self.conn.transaction():
                self.conn.execute(f"SET LOCAL lock_timeout = {int(TOUCH_WAIT * 1000)}")
                self.conn.execute("SET LOCAL synchronous_commit = off")  # the next regular commit makes it durable
                return int(self.conn.execute(sql, args).rowcount)
        except psycopg.Error:
            return 0

    def _update_row(
        self,
        memory_id: str,
        text: str | None,
        vector: np.ndarray | None,
        metadata: dict[str, Any],
        area: str,
        updated_at: str,
    ) -> None:
        import numpy as np

        if text is not None and vector is not None:
            self._execute(
                "UPDATE memctl_memories SET text = %s, vector = %s, content_hash = %s WHERE subdir = %s AND id = %s",
                (text, np.asarray(vector, dtype=np.float32), content_hash(text), self.subdir, memory_id),
            )
        self._execute(
            "UPDATE memctl_memories SET metadata = %s, area = %s, updated_at = %s, keywords = %s"
            " WHERE subdir = %s AND id = %s",
            (
                json.dumps(metadata, ensure_ascii=False),
                area,
                updated_at,
                self._keywords(metadata),
                self.subdir,
                memory_id,
            ),
        )

    # -- reading -------------------------------------------------------------------------
    def get(self, ids: Sequence[str]) -> builtins.list[Memory]:
        """Memories for the ids that exist, in the order asked."""
        ids = list(ids)
        if not ids:
            return []
        read, rows = self._named(
            f"SELECT {MEMORY_COLUMNS} FROM memctl_memories WHERE subdir = %s AND id = ANY(%s)", (self.subdir, ids)
        )
        found = {memory.id: memory for memory in map(read.memory, rows)}
        return [found[i] for i in ids if i in found]

    def _exact_rows(self, text: str, area: str | None) -> builtins.list[Memory]:
        if "\x00" in text:  # PostgreSQL text holds no NUL: no stored memory has this text (and the query would fail)
            return []
        sql = f"SELECT {MEMORY_COLUMNS} FROM memctl_memories WHERE subdir = %s AND content_hash = %s AND text = %s"
        args: builtins.list[Any] = [self.subdir, content_hash(text), text]
        if area:
            sql += " AND area = %s"
            args.append(area)
        read, rows = self._named(sql + " ORDER BY seq", args)
        return [read.memory(r) for r in rows]

    def _rows(self, area: str | None, flt: Filter | None, order: str = "seq") -> Iterator[tuple[int, Memory]]:
        sql = f"SELECT {MEMORY_COLUMNS} FROM memctl_memories WHERE subdir = %s"
        args: builtins.list[Any] = [self.subdir]
        if area:
            sql += " AND area = %s"
            args.append(check_area(area))
        read, rows = self._named(f"{sql} ORDER BY {order}", args)
        for row in rows:
            memory = read.memory(row)
            if flt is None or flt.matches(memory.filter_names()):
                yield read.get(row, "seq"), memory

    def _page(self, area: str | None, limit: int, offset: int) -> tuple[builtins.list[Memory], int]:
        where, args = "WHERE subdir = %s", [self.subdir]
        if area:
            where += " AND area = %s"
            args.append(area)
        total = int(self._one(f"SELECT count(*) FROM memctl_memories {where}", args)[0])
        read, rows = self._named(
            f"SELECT {MEMORY_COLUMNS} FROM memctl_memories {where}"
            " ORDER BY created_at DESC, seq DESC LIMIT %s OFFSET %s",
            [*args, limit, offset],
        )
        return [read.memory(r) for r in rows], total

    def _seq_rows(self, seqs: Sequence[int]) -> Iterator[tuple[int, Memory]]:
        if not seqs:
            return
        read, rows = self._named(
            f"SELECT {MEMORY_COLUMNS} FROM memctl_memories WHERE seq = ANY(%s) AND subdir = %s",
            ([int(seq) for seq in seqs], self.subdir),
        )
        for r in rows:
            yield int(read.get(r, "seq")), read.memory(r)

    def _filtered(self, area: str | None, flt: Filter, order: str = "seq") -> builtins.list[tuple[int, str]]:
        """(seq, id) of the memories in `area` that `flt` matches, in `order`.

        PostgreSQL selects them (memctl/store/filter_sql.py: containment on meta_index under
        its GIN index finds the candidates, the compiled expression over metadata::jsonb decides);
        suspect rows and filters with no exact SQL form go through the Python evaluator.
        """
        from memctl.store.filter_sql import PG_SUSPECT_TERM, compile_filter_sql, pg_prefilter

        compiled = compile_filter_sql(flt, "postgres")
        if compiled is None:
            return [(seq, memory.id) for seq, memory in self._rows(area, flt, order)]
        where, args = ["subdir = %s"], [self.subdir]
        if area:
            where.append("area = %s")
            args.append(check_area(area))
        if compiled.prefilter is not None:
            pre, pre_args = pg_prefilter(compiled.prefilter, self.subdir)
            where.append(f"({pre} OR {PG_SUSPECT_TERM})")
            args += pre_args
        # The expression reads meta_index (the stored jsonb, no parse of metadata per row); NULL marks a suspect.
        # OFFSET 0 keeps the subquery whole.
        rows = self._all(
            f"SELECT seq, id, j IS NULL FROM (SELECT seq, id, area, created_at, updated_at,"
            f" CASE WHEN {PG_SUSPECT_TERM} THEN NULL ELSE meta_index END AS j FROM memctl_memories"
            f" WHERE {' AND '.join(where)} OFFSET 0) AS s WHERE j IS NULL OR ({compiled.where}) = 1"
            f" ORDER BY {order}",
            [*args, *compiled.params],
        )
        suspects = [seq for seq, _, bad in rows if bad]
        kept: set[int] = set()
        if suspects:
            kept = {seq for seq, memory in self._seq_rows(suspects) if flt.matches(memory.filter_names())}
        return [(int(seq), rid) for seq, rid, bad in rows if not bad or seq in kept]

    def iter_all(self, *, area: str | None = None, with_vectors: bool = False) -> Iterator[tuple[Memory, bytes | None]]:
        """Oldest first, in batches by key (no long-running transaction)."""
        for read, row in self._rows_by_seq(", vector" if with_vectors else "", area):
            yield read.memory(row), _vector_bytes(read.get(row, "vector")) if with_vectors else None

    def iter_with_access(self, *, area: str | None = None) -> Iterator[tuple[Memory, str | None]]:
        """Every memory (oldest first) with when `load` last returned it (None: never)."""
        for read, row in self._rows_by_seq(", accessed_at", area):
            yield read.memory(row), read.get(row, "accessed_at")

    def _rows_by_seq(self, extra_columns: str, area: str | None) -> Iterator[tuple[RowReader, Any]]:
        """The subdir's rows (the memory columns, then `extra_columns`) in pages of 1,000 by key, each with
        the reader of its page."""
        last = 0
        sql = f"SELECT {MEMORY_COLUMNS}{extra_columns} FROM memctl_memories WHERE subdir = %s"
        args: builtins.list[Any] = [self.subdir]
        if area:
            sql += " AND area = %s"
            args.append(check_area(area))
        while True:
            read, rows = self._named(sql + " AND seq > %s ORDER BY seq LIMIT 1000", [*args, last])
            if not rows:
                return
            yield from ((read, row) for row in rows)
            last = read.get(rows[-1], "seq")

    def history(self, memory_id: str | None = None, limit: int | None = None) -> builtins.list[HistoryEntry]:
        sql = (
            "SELECT hid, memory_id, op, actor, at, area, old_text, new_text, old_metadata, new_metadata"
            " FROM memctl_history WHERE subdir = %s"
        )
        args: builtins.list[Any] = [self.subdir]
        if memory_id:
            sql += " AND memory_id = %s"
            args.append(memory_id)
        sql += " ORDER BY hid DESC" + (" LIMIT %s" if limit else "")
        if limit:
            args.append(limit)
        read, rows = self._named(sql, args)
        return [history_entry(e, e["old_metadata"], e["new_metadata"]) for e in map(read.record, rows)]

    # -- searching: the primitives StoreBase builds on -----------------------------------
    def _embed_query(self, query: str) -> np.ndarray:
        self.check_model()
        vector = embed_queries(self.embedder, [query])[0]
        dim = self.dimension()
        if dim is not None and vector.shape[0] != dim:
            raise ModelMismatchError(
                f"embedding dimension {vector.shape[0]} differs from the store's {dim}", hint="run `memctl reindex`"
            )
        return vector

    def _candidates(self, area: str | None, flt: Filter | None) -> Collection[int] | None:
        if area is None and flt is None:
            return None
        if flt is None:
            return [
                r[0]
                for r in self._all(
                    "SELECT seq FROM memctl_memories WHERE subdir = %s AND area = %s",
                    (self.subdir, check_area(area or "")),
                )
            ]
        return [seq for seq, _ in self._filtered(area, flt)]

    def _dense_pairs(
        self, vector: np.ndarray, k: int, only: Collection[int] | None
    ) -> builtins.list[tuple[int, float]]:
        import numpy as np

        dim = self.dimension()
        if dim is None or k <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        # Exact: ordered by the output column, so each vector is detoasted and compared once, not once for
        # `ip` and again for the sort key (half the cost of 1,000 filtered rows). ip DESC = distance ASC.
        if only is not None and len(only) <= EXACT_FILTERED_MAX:
            rows = self._all(
                "SELECT seq, (vector <#> %s) * -1 AS ip FROM memctl_memories"
                " WHERE seq = ANY(%s::bigint[]) AND subdir = %s ORDER BY ip DESC, seq LIMIT %s",
                (query, _seq_array(only), self.subdir, k),
            )
        elif only is None and self._at_most(EXACT_MAX):
            rows = self._all(
                "SELECT seq, (vector <#> %s) * -1 AS ip FROM memctl_memories"
                " WHERE subdir = %s ORDER BY ip DESC, seq LIMIT %s",
                (query, self.subdir, k),
            )
        else:  # the HNSW index of this dimension, with iterative scans so the subdir filter keeps k rows
            self._ensure_vector_index(dim)
            cast = f"vector({int(dim)})"
            extra, args = ("", []) if only is None else (" AND seq = ANY(%s::bigint[])", [_seq_array(only)])
            rows = self._all(
                f"SELECT seq, (vector::{cast} <#> %s::{cast}) * -1 AS ip FROM memctl_memories"
                f" WHERE subdir = %s AND vector_dims(vector) = {int(dim)}{extra}"
                f" ORDER BY vector::{cast} <#> %s::{cast} LIMIT %s",
                (query, self.subdir, *args, query, k),
            )
            rows.sort(key=lambda r: -r[1])
        return [(int(seq), float(ip)) for seq, ip in rows]

    def _keys_of(self, ids: Sequence[str], area: str | None) -> dict[int, str]:
        if not ids:
            return {}
        sql = "SELECT seq, id FROM memctl_memories WHERE subdir = %s AND id = ANY(%s)"
        args: builtins.list[Any] = [self.subdir, list(ids)]
        if area is not None:
            sql, args = sql + " AND area = %s", [*args, check_area(area)]
        return {int(seq): str(i) for seq, i in self._all(sql, tuple(args))}

    def _relevance_of(self, keys: builtins.list[int], vector: np.ndarray) -> dict[int, float]:
        import numpy as np

        if not keys:
            return {}
        rows = self._all(
            "SELECT seq, (vector <#> %s) * -1 FROM memctl_memories WHERE seq = ANY(%s) AND subdir = %s",
            (np.asarray(vector, dtype=np.float32), list(keys), self.subdir),
        )
        return {int(seq): relevance(ip) for seq, ip in rows}

    def _doc_freq(self, token: str, cap: int) -> int:
        """Memories holding `token` (stemmed as the index has it; a CJK word as the phrase of its
        characters), counted up to `cap` + 1 only."""
        from memctl.text.segment import phrase

        return self._capped_count(
            ("df", token),
            cap,
            f"SELECT count(*) FROM (SELECT 1 FROM memctl_memories WHERE subdir = %s"
            f" AND tsv @@ phraseto_tsquery('{_TS_CONFIG}', %s) LIMIT %s) AS s",
            (self.subdir, phrase(token)),
        )

    def _text_doc_freq(self, token: str, cap: int) -> int:
        """Memories holding `token` in their text (not their keyword metadata), counted up to `cap` + 1 only."""
        from memctl.text.segment import phrase

        return self._capped_count(
            ("text df", token),
            cap,
            f"SELECT count(*) FROM (SELECT 1 FROM memctl_memories, phraseto_tsquery('{_TS_CONFIG}', %s) AS q"
            f" WHERE subdir = %s AND tsv @@ q AND to_tsvector('{_TS_CONFIG}', memctl_fts_text(text)) @@ q"
            f" LIMIT %s) AS s",
            (phrase(token), self.subdir),
        )

    def _capped_count(self, key: tuple[str, str], cap: int, sql: str, args: tuple[Any, ...]) -> int:
        """min(count, cap + 1) of `sql` (args, then its LIMIT), kept for the store's generation (a word in every
        memory costs ~13 ms to count to 10,001 at 100k rows, and each hybrid search asks for several): a count
        below its limit is exact for any cap; one that reached it answers every cap below."""
        table = self._df_cache()  # (count, exact) by (kind, token)
        known = table.get(key)
        if known is not None and (known[1] or known[0] >= cap + 1):
            return min(known[0], cap + 1)
        found = int(self._one(sql, (*args, cap + 1))[0])
        table[key] = (found, found <= cap)
        return found

    def _keyword_pairs(
        self,
        query: str,
        k: int,
        area: str | None,
        only: Collection[int] | None,
        common_df: int,
        common_text_df: int = 0,
    ) -> builtins.list[tuple[int, float]]:
        from memctl.store.keyword import common_text_words, query_tokens
        from memctl.text.segment import has_cjk, phrase

        tokens = query_tokens(query)
        if common_df > 50:
            tokens = [t for t in tokens if self._doc_freq(t, common_df) <= common_df]
        if common_text_df > 0:

            def text_df(token: str) -> int:  # in the text of no more memories than hold it at all: often no count
                anywhere = self._doc_freq(token, common_text_df)
                return anywhere if anywhere <= common_text_df else self._text_doc_freq(token, common_text_df)

            tokens = common_text_words(tokens, common_text_df, text_df)
        if not tokens or k <= 0:
            return []
        # websearch_to_tsquery never fails on user text; the tokens are \w+ runs (a CJK word: the
        # quoted phrase of its characters, as the index holds them), joined by OR.
        terms = [f'"{phrase(t)}"' if has_cjk(t) else t for t in tokens]
        sql = (
            f"SELECT seq, ts_rank_cd(tsv, q) AS score FROM memctl_memories,"
            f" websearch_to_tsquery('{_TS_CONFIG}', %s) AS q WHERE subdir = %s AND tsv @@ q"
        )
        args: builtins.list[Any] = [" or ".join(terms), self.subdir]
        if area is not None:
            sql += " AND area = %s"
            args.append(area)
        if only is not None:
            sql += " AND seq = ANY(%s::bigint[])"
            args.append(_seq_array(only))
        rows = self._all(sql + " ORDER BY score DESC, seq LIMIT %s", [*args, k])
        return [(int(seq), float(score)) for seq, score in rows]

    def _rare_tokens(self, tokens: Sequence[str], max_df: int) -> set[str]:
        return {t for t in tokens if 0 < self._doc_freq(t, max_df) <= max_df}

    def _common_tokens(self, tokens: Sequence[str], min_df: int) -> set[str]:
        return {t for t in tokens if self._doc_freq(t, min_df) > min_df}

    def _seq_hits(self, pairs: builtins.list[tuple[int, float]]) -> builtins.list[tuple[int, Hit]]:
        if not pairs:
            return []
        read, found = self._named(
            f"SELECT {MEMORY_COLUMNS} FROM memctl_memories WHERE seq = ANY(%s) AND subdir = %s",
            ([p[0] for p in pairs], self.subdir),
        )
        rows = {read.get(r, "seq"): r for r in found}
        return [(seq, read.hit(rows[seq], round(score, 6))) for seq, score in pairs if seq in rows]

    def _seq_meta(self, seqs: builtins.list[int]) -> dict[int, tuple[str, dict[str, Any]]]:
        """seq -> (area, metadata) without the texts (a search's chat neighbours need no more)."""
        if not seqs:
            return {}
        found: dict[int, tuple[str, dict[str, Any]]] = {}
        for seq, area, metadata in self._all(
            "SELECT seq, area, metadata FROM memctl_memories WHERE seq = ANY(%s) AND subdir = %s",
            ([int(s) for s in seqs], self.subdir),
        ):
            found[int(seq)] = (area, json.loads(metadata) if isinstance(metadata, str) else metadata)
        return found

    # -- maintenance ---------------------------------------------------------------------
    def vector_count(self) -> int:
        """The vectors of the store's dimension that its HNSW index covers (the index is made sure of)."""
        dim = self.dimension()
        if dim is None:
            return 0
        self._ensure_vector_index(dim)
        return int(
            self._one(
                "SELECT count(*) FROM memctl_memories WHERE subdir = %s AND vector_dims(vector) = %s",
                (self.subdir, dim),
            )[0]
        )

    def rebuild_index(self) -> int:
        """PostgreSQL maintains the HNSW index itself: make sure it exists; return the vectors it covers."""
        return self.vector_count()

    def _texts_after(self, seq: int, limit: int) -> builtins.list[tuple[int, str]]:
        return [
            (int(r[0]), r[1])
            for r in self._all(
                "SELECT seq, text FROM memctl_memories WHERE subdir = %s AND seq > %s ORDER BY seq LIMIT %s",
                (self.subdir, seq, limit),
            )
        ]

    def _set_vectors(self, vectors: Sequence[tuple[int, np.ndarray]]) -> None:
        import numpy as np

        with self.conn.cursor() as cur:
            cur.executemany(
                "UPDATE memctl_memories SET vector = %s WHERE seq = %s",
                [(np.asarray(v, dtype=np.float32), seq) for seq, v in vectors],
            )

    def integrity_check(self) -> str:
        dim = self.dimension()
        if dim is None:
            return "ok"
        bad = int(
            self._one(
                "SELECT count(*) FROM memctl_memories WHERE subdir = %s AND vector_dims(vector) <> %s",
                (self.subdir, dim),
            )[0]
        )
        return "ok" if bad == 0 else f"{bad} vectors differ from the store's dimension {dim}"

    def compact(self) -> bool:
        """VACUUM memctl's tables so removed rows' space is reclaimed (the server decides when files shrink)."""
        import psycopg

        try:
            for table in ("memctl_memories", "memctl_meta_ranges", "memctl_history", "memctl_archive"):
                self.conn.execute(f"VACUUM {table}")
        except psycopg.Error:
            return False
        return True

    def ids_with_hashes(self, hashes: set[str]) -> builtins.list[str]:
        return [
            r[0]
            for r in self._all(
                "SELECT id FROM memctl_memories WHERE subdir = %s AND content_hash = ANY(%s)",
                (self.subdir, sorted(hashes)),
            )
        ]

    def index_strays(self) -> dict[str, int]:
        """The vector (pgvector) and the keyword (tsvector) index are columns of the memory rows: an index
        entry of a deleted row is a dead tuple no query returns. What can stray is a row the store does
        not count (a vector of another dimension is never searched): counted against the live rows."""
        dim = self.dimension()
        odd = self._one(
            "SELECT count(*) FILTER (WHERE vector IS NULL OR vector_dims(vector) <> %s),"
            " count(*) FILTER (WHERE tsv IS NULL) FROM memctl_memories WHERE subdir = %s",
            (dim or 0, self.subdir),
        )
        return {"vector_index": int(odd[0]) if dim else 0, "keyword_index": int(odd[1])}

    def _area_counts(self) -> builtins.list[tuple[str, int, int]]:
        return [
            (area, int(count), int(knowledge))
            for area, count, knowledge in self._all(
                "SELECT area, count(*), count(*) FILTER (WHERE (metadata->>'knowledge_source') = 'true')"
                " FROM memctl_memories WHERE subdir = %s GROUP BY area",
                (self.subdir,),
            )
        ]

    def _age_summary(self) -> tuple[str | None, str | None, int, str | None]:
        oldest, newest, never, last = self._one(
            "SELECT min(created_at), max(created_at), count(*) FILTER (WHERE accessed_at IS NULL), max(accessed_at)"
            " FROM memctl_memories WHERE subdir = %s",
            (self.subdir,),
        )
        return oldest, newest, int(never), last

    def _log_counts(self) -> tuple[int, int]:
        return (
            int(self._one("SELECT count(*) FROM memctl_archive WHERE subdir = %s", (self.subdir,))[0]),
            int(self._one("SELECT count(*) FROM memctl_history WHERE subdir = %s", (self.subdir,))[0]),
        )

    def subdirs(self) -> builtins.list[tuple[str, int]]:
        """Every store in this database with its memory count."""
        return [
            (r[0], int(r[1]))
            for r in self._all(
                "SELECT s.subdir, (SELECT coalesce(sum(c.memories), 0) FROM memctl_counts c WHERE c.subdir = s.subdir)"
                " FROM (SELECT subdir FROM memctl_stores"
                " UNION SELECT subdir FROM memctl_counts GROUP BY subdir HAVING sum(memories) > 0"
                " UNION SELECT subdir FROM memctl_behaviour"
                " UNION SELECT DISTINCT subdir FROM memctl_knowledge_folders"
                " UNION SELECT DISTINCT subdir FROM memctl_pending) s"
                " ORDER BY s.subdir"
            )
        ]

    # -- the archive, purging, size ------------------------------------------------------
    def archived(self, memory_id: str) -> ArchivedMemory | None:
        read, rows = self._named(
            f"SELECT {ARCHIVE_COLUMNS} FROM memctl_archive WHERE subdir = %s AND id = %s", (self.subdir, memory_id)
        )
        return _archived(read.record(rows[0])) if rows else None

    def iter_archive(self) -> Iterator[ArchivedMemory]:
        last: tuple[str, str] = ("", "")
        while True:
            read, rows = self._named(
                f"SELECT {ARCHIVE_COLUMNS} FROM memctl_archive WHERE subdir = %s"
                " AND (archived_at, id) > (%s, %s) ORDER BY archived_at, id LIMIT 1000",
                (self.subdir, *last),
            )
            records = [read.record(row) for row in rows]
            if not records:
                return
            yield from map(_archived, records)
            last = (records[-1]["archived_at"], records[-1]["id"])

    def unarchive(self, ids: Sequence[str]) -> None:
        with self._write():
            self._execute("DELETE FROM memctl_archive WHERE subdir = %s AND id = ANY(%s)", (self.subdir, list(ids)))

    def purge_counts(self, before: str | None) -> tuple[int, int]:
        history = self._one(
            "SELECT count(*) FROM memctl_history WHERE subdir = %s AND (%s::text IS NULL OR at < %s)",
            (self.subdir, before, before),
        )[0]
        archived = self._one(
            "SELECT count(*) FROM memctl_archive WHERE subdir = %s AND (%s::text IS NULL OR archived_at < %s)",
            (self.subdir, before, before),
        )[0]
        return int(history), int(archived)

    def purge_rows(self, before: str | None, *, found: Callable[[set[str]], None] | None = None) -> set[str]:
        with self._write():
            rows = self._all(
                "SELECT old_text, new_text FROM memctl_history WHERE subdir = %s"
                " AND (%s::text IS NULL OR at < %s) UNION ALL SELECT text, NULL FROM memctl_archive"
                " WHERE subdir = %s AND (%s::text IS NULL OR archived_at < %s)",
                (self.subdir, before, before, self.subdir, before, before),
            )
            hashes = {content_hash(t) for row in rows for t in row if t}
            live = self._all(
                "SELECT content_hash FROM memctl_memories WHERE subdir = %s AND content_hash = ANY(%s)"
                " UNION SELECT content_hash FROM memctl_pending WHERE subdir = %s AND content_hash = ANY(%s)",
                (self.subdir, sorted(hashes), self.subdir, sorted(hashes)),
            )
            hashes -= {r[0] for r in live}
            if found is not None:
                found(hashes)
            self._execute(
                "DELETE FROM memctl_history WHERE subdir = %s AND (%s::text IS NULL OR at < %s)",
                (self.subdir, before, before),
            )
            self._execute(
                "DELETE FROM memctl_archive WHERE subdir = %s AND (%s::text IS NULL OR archived_at < %s)",
                (self.subdir, before, before),
            )
        return hashes

    def hashes_used_elsewhere(self, hashes: set[str]) -> set[str]:
        """Hashes that other subdirs of this database, or folder stores of this root, hold (the
        embedding cache of this machine's root serves them all)."""
        from memctl.config.paths import list_subdirs, store_dir
        from memctl.store.embedded import _hashes_in_folder_stores

        if not hashes:
            return set()
        used = {
            r[0]
            for r in self._all(
                "SELECT DISTINCT content_hash FROM memctl_memories WHERE subdir <> %s AND content_hash = ANY(%s)",
                (self.subdir, sorted(hashes)),
            )
        }
        if self._cache_dir is not None and self._cache_dir.parent.parent.is_dir():
            root = self._cache_dir.parent.parent
            used |= _hashes_in_folder_stores(root, list_subdirs(root), hashes, skip=None, store_dir=store_dir)
        return used

    def size_bytes(self) -> int:
        """The size of the store's rows (memories, history, archive); the server decides about files."""
        return int(
            self._one(
                "SELECT (SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM memctl_memories t WHERE subdir = %s)"
                " + (SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM memctl_history t WHERE subdir = %s)"
                " + (SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM memctl_archive t WHERE subdir = %s)",
                (self.subdir, self.subdir, self.subdir),
            )[0]
        )

    # -- behaviour rules: a row of memctl_behaviour --------------------------------------
    @property
    def behaviour_location(self) -> str:
        return f"{self.location} (behaviour rules)"

    def read_behaviour(self) -> str | None:
        row = self._one("SELECT rules FROM memctl_behaviour WHERE subdir = %s", (self.subdir,))
        return None if row is None else str(row[0])

    def write_behaviour(self, rules: str) -> None:
        with self._write():
            self._execute(
                "INSERT INTO memctl_behaviour (subdir, rules, updated_at) VALUES (%s, %s, %s)"
                " ON CONFLICT (subdir) DO UPDATE SET rules = EXCLUDED.rules,"
                " updated_at = EXCLUDED.updated_at",
                (self.subdir, rules, now_iso()),
            )

    # -- knowledge import state: memctl_knowledge_folders / memctl_knowledge_files -------
    def knowledge_chunks(self) -> Sequence[tuple[Any, ...]]:
        rows = self._all(
            "SELECT id, area, metadata->>'knowledge_folder', metadata->>'source_path', metadata->>'source_checksum',"
            " metadata->>'file_type', metadata->>'chunk' FROM memctl_memories WHERE subdir = %s"
            " AND (metadata->>'knowledge_source') = 'true' AND metadata->>'knowledge_folder' IS NOT NULL"
            " AND metadata->>'source_path' IS NOT NULL ORDER BY seq",
            (self.subdir,),
        )
        return [(*row[:6], _int_or_none(row[6])) for row in rows]

    def knowledge_state(self) -> dict[str, Any]:
        folders: dict[str, Any] = {}
        for folder, path in self._all(
            "SELECT folder, path FROM memctl_knowledge_folders WHERE subdir = %s", (self.subdir,)
        ):
            folders[folder] = {"path": path, "files": {}}
        for row in self._all(
            "SELECT folder, source_path, checksum, area, file_type, ids, chunking, imported_at"
            " FROM memctl_knowledge_files WHERE subdir = %s ORDER BY folder, source_path",
            (self.subdir,),
        ):
            entry = dict(zip(_KNOWLEDGE_ENTRY, row[2:], strict=True))
            folders.setdefault(row[0], {"path": "", "files": {}})["files"][row[1]] = entry
        return folders

    def save_knowledge_state(self, document: dict[str, Any]) -> None:
        """One transaction that writes the files and folders whose entries changed, and drops the gone ones."""
        files = {
            (folder, rel): (
                entry.get("checksum"),
                entry.get("area", "main"),
                entry.get("file_type", ""),
                json.dumps(list(entry.get("ids") or [])),
                str(entry.get("chunking", "")),
                str(entry.get("imported_at") or ""),
            )
            for folder, data in document.items()
            for rel, entry in (data.get("files") or {}).items()
        }
        paths = {folder: str(data.get("path") or "") for folder, data in document.items()}
        with self._write(), self.conn.cursor() as cur:
            stored = {
                (r[0], r[1]): tuple(r[2:])
                for r in self._all(
                    "SELECT folder, source_path, checksum, area, file_type, ids::text, chunking, imported_at"
                    " FROM memctl_knowledge_files WHERE subdir = %s FOR UPDATE",
                    (self.subdir,),
                )
            }
            cur.executemany(
                "DELETE FROM memctl_knowledge_files WHERE subdir = %s AND folder = %s AND source_path = %s",
                [(self.subdir, *key) for key in stored if key not in files],
            )
            cur.executemany(
                "INSERT INTO memctl_knowledge_files (subdir, folder, source_path, checksum, area, file_type, ids,"
                " chunking, imported_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (subdir, folder,"
                " source_path) DO UPDATE SET checksum = EXCLUDED.checksum, area = EXCLUDED.area, file_type ="
                " EXCLUDED.file_type, ids = EXCLUDED.ids, chunking = EXCLUDED.chunking, imported_at ="
                " EXCLUDED.imported_at",
                [(self.subdir, *key, *value) for key, value in files.items() if stored.get(key) != value],
            )
            known = dict(
                self._all(
                    "SELECT folder, path FROM memctl_knowledge_folders WHERE subdir = %s FOR UPDATE", (self.subdir,)
                )
            )
            cur.executemany(
                "DELETE FROM memctl_knowledge_folders WHERE subdir = %s AND folder = %s",
                [(self.subdir, folder) for folder in known if folder not in paths],
            )
            cur.executemany(
                "INSERT INTO memctl_knowledge_folders (subdir, folder, path) VALUES (%s, %s, %s)"
                " ON CONFLICT (subdir, folder) DO UPDATE SET path = EXCLUDED.path",
                [(self.subdir, name, path) for name, path in paths.items() if known.get(name) != path],
            )

    @contextmanager
    def knowledge_lock(self) -> Iterator[None]:
        """A session-level advisory lock on (knowledge, subdir): released at the end, or when the connection goes."""
        from memctl.store.pg_schema import KNOWLEDGE_LOCK_CLASS

        key = (KNOWLEDGE_LOCK_CLASS, self.subdir)
        try:
            self._execute("SELECT pg_advisory_lock(%s, hashtext(%s))", key)
        except LockTimeoutError as exc:
            raise LockTimeoutError(
                f"another knowledge import into store {self.subdir!r} is running",
                hint=f"retry later or raise lock_timeout ({self.config['lock_timeout']} s)",
            ) from exc
        try:
            yield
        finally:
            self._execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", key)

    def vectors_for_hashes(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        import numpy as np

        rows = self._all(
            "SELECT DISTINCT ON (content_hash) content_hash, vector FROM memctl_memories"
            " WHERE subdir = %s AND content_hash = ANY(%s)",
            (self.subdir, list(hashes)),
        )
        return {digest: np.frombuffer(_vector_bytes(vector), dtype="<f4") for digest, vector in rows}

    def memories_with_hashes(self, hashes: Sequence[str]) -> builtins.list[Memory]:
        """The memories whose text has one of these content hashes (an import's duplicate check)."""
        if not hashes:
            return []
        read, rows = self._named(
            f"SELECT {MEMORY_COLUMNS} FROM memctl_memories WHERE subdir = %s AND content_hash = ANY(%s)",
            (self.subdir, list(hashes)),
        )
        return [read.memory(r) for r in rows]

    def known_hashes(self, hashes: Sequence[str]) -> set[str]:
        rows = self._all(
            "SELECT DISTINCT content_hash FROM memctl_memories WHERE subdir = %s AND content_hash = ANY(%s)",
            (self.subdir, list(hashes)),
        )
        return {r[0] for r in rows}

    # -- whole-store copies --------------------------------------------------------------
    @contextmanager
    def snapshot(self) -> Iterator[PostgresStore]:
        """A read-only REPEATABLE READ transaction: every read inside sees one state; writers go on."""
        if self._depth:
            yield self
            return
        self._depth = 1
        try:
            with self._begin():
                self._execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                yield self
        finally:
            self._depth = 0

    def iter_rows(self) -> Iterator[tuple[Memory, bytes, str | None]]:
        for read, row in self._rows_by_seq(", vector, accessed_at", None):
            yield read.memory(row), _vector_bytes(read.get(row, "vector")), read.get(row, "accessed_at")

    def put_rows(self, rows: Sequence[tuple[Memory, bytes, str | None]], info: ModelInfo, dimension: int) -> None:
        import numpy as np

        if not rows:
            return
        self._ensure_vector_index(dimension)
        with self._write():
            self._record_model(info, dimension)
            self._insert_rows(
                [
                    (self.subdir, *self._restored_row(m, np.frombuffer(blob, dtype="<f4")), accessed)
                    for m, blob, accessed in rows
                ],
                with_access=True,
            )

    def put_links(self, links: Sequence[tuple[str, str, str, str]]) -> None:
        with self._write(), self.conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memctl_links (subdir, parent_id, child_id, kind, created_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [(self.subdir, *link) for link in links],
            )

    def put_archive(self, rows: Sequence[ArchivedMemory]) -> None:
        import numpy as np

        with self._write(), self.conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO memctl_archive (subdir, {ARCHIVE_COLUMNS}) VALUES"
                " (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (subdir, id) DO NOTHING",
                [
                    (
                        self.subdir,
                        *archive_values(a, None if a.vector is None else np.frombuffer(a.vector, dtype="<f4")),
                    )
                    for a in rows
                ],
            )

    # -- replacing a whole store (restore-backup) ----------------------------------------
    def lock_writers(self) -> None:
        """Inside a transaction: make every other writer of memctl's tables wait until it ends (reads go on)."""
        self._execute("LOCK TABLE " + ", ".join(_STORE_TABLES) + " IN SHARE ROW EXCLUSIVE MODE")

    def has_content(self) -> bool:
        """True when the store holds memories, history, archive or pending rows, behaviour rules or knowledge state."""
        return bool(
            self._one(
                "SELECT "
                + " OR ".join(
                    f"EXISTS (SELECT 1 FROM {t} WHERE subdir = %s)" for t in _STORE_TABLES if t != "memctl_stores"
                ),
                [self.subdir] * (len(_STORE_TABLES) - 1),
            )[0]
        )

    def clear(self) -> None:
        """Delete every row of the store (its model record too). Joins an open transaction."""
        with self._write():
            for table in _STORE_TABLES:
                self._execute(f"DELETE FROM {table} WHERE subdir = %s", (self.subdir,))


def database_stores(url: str, config: Config) -> builtins.list[tuple[str, int]]:
    """Every store (subdir) of the database at `url` with its memory count; no row is written."""
    with PostgresStore(url, "default", config) as store:
        return store.subdirs()


def _seq_array(seqs: Collection[int]) -> str:
    """Keys as the text of a bigint[]: psycopg's list dumper costs ~3 µs an element (3 ms for a filter's 1,000
    candidates), this ~0.1 µs."""
    return "{" + ",".join(map(str, map(int, seqs))) + "}"


def _vector_bytes(value: Any) -> bytes:
    """A pgvector value (Vector or ndarray, by pgvector version) as little-endian float32 bytes."""
    import numpy as np

    array = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(array, dtype="<f4").tobytes()


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _archived(record: dict[str, Any]) -> ArchivedMemory:
    vector = record["vector"]
    return archived_of(record, None if vector is None else _vector_bytes(vector))


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
