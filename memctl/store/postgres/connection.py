"""The PostgreSQL backend's first layer: connecting (redacted URLs, timeouts, pgvector, migrations), the
connection's statements and transactions, the store's counts, model record and vector index."""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.embeddings import Embedder, ModelInfo
from memctl.errors import LockTimeoutError, StoreError, UsageError
from memctl.store.base import StoreBase
from memctl.store.interface import StoreSpec
from memctl.store.records import (
    Hit,
    RowReader,
    now_iso,
)

if TYPE_CHECKING:
    from memctl.config import Config


# Seconds to wait for the server before giving up (a URL's own connect_timeout wins).
CONNECT_TIMEOUT = 3
# A store's memctl_counts rows (one per server process that wrote to it) are folded into one past this many.
COUNT_SLOTS_MAX = 16
HNSW_EF_SEARCH = 100
# Memory for building an HNSW index (maintenance_work_mem, raised for that one statement, never lowered):
# pgvector builds several times faster while the graph fits in it (about dimension x 4 + 400 bytes a row).
HNSW_BUILD_MEMORY_MAX_MB = 2048


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
    if "application_name" not in params:  # a name the URL gives is the user's (pg_stat_activity shows it)
        extra["application_name"] = "memctl"
    try:
        conn = psycopg.connect(url, autocommit=True, **extra)
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


class _PostgresConnection(StoreBase):
    """A memory store as the rows of one subdir in a PostgreSQL database: the connection, its statements
    and transactions, the counts, the model record and the vector index (the first layer of PostgresStore)."""

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


def _vector_bytes(value: Any) -> bytes:
    """A pgvector value (Vector or ndarray, by pgvector version) as little-endian float32 bytes."""
    import numpy as np

    array = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(array, dtype="<f4").tobytes()


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)
