"""PostgresStore, the PostgreSQL backend: opening by URL, maintenance, purging, behaviour rules, knowledge
state, row-by-row interop (backup/restore) and the database's list of stores."""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from memctl.embeddings import ModelInfo, content_hash
from memctl.errors import LockTimeoutError
from memctl.store.interface import StoreSpec
from memctl.store.postgres.connection import _url, _vector_bytes, redact
from memctl.store.postgres.search import _PostgresSearch
from memctl.store.records import (
    ARCHIVE_COLUMNS,
    MEMORY_COLUMNS,
    ArchivedMemory,
    Memory,
    StoreList,
    StoreSummary,
    archive_values,
    archived_of,
    now_iso,
)

if TYPE_CHECKING:
    import numpy as np

    from memctl.config import Config


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


class PostgresStore(_PostgresSearch):
    """A memory store as the rows of one subdir in a PostgreSQL database."""

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


def _archived(record: dict[str, Any]) -> ArchivedMemory:
    vector = record["vector"]
    return archived_of(record, None if vector is None else _vector_bytes(vector))


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
