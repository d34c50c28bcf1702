"""The embedded store's rows: the model record, writing and reading memories, history, links, the review
queue (pending) and doctor runs.

The second of EmbeddedStore's layers, over the database (memctl/store/embedded/database.py)."""

from __future__ import annotations

import builtins
import json
import sqlite3
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from memctl.embeddings import ModelInfo, content_hash
from memctl.errors import StoreError
from memctl.files import atomic_write_bytes
from memctl.store.doctor_rows import DoctorRun, Finding, figures_of, related_of
from memctl.store.embedded.database import _EmbeddedDatabase
from memctl.store.filters import Filter
from memctl.store.interface import PreparedRow, iter_chunks
from memctl.store.interface import json_or_none as _json_or_none
from memctl.store.layout import EMBEDDING_FILE
from memctl.store.records import (
    MEMORY_COLUMNS,
    PENDING_COLUMNS,
    HistoryEntry,
    Memory,
    PendingItem,
    RowReader,
    history_entry,
    now_iso,
    pending_of,
)
from memctl.store.validate import check_area

if TYPE_CHECKING:
    import numpy as np


MODEL_META = "model"  # the database's copy of embedding.json (the truth; the file mirrors it)
REINDEX_HINT = (
    "run `memctl reindex`: it re-embeds every memory with the configured model and rewrites the "
    "record (or restore the store from a backup)"
)
# Seconds `touch` (access times after `load`) waits for a busy writer before skipping.
TOUCH_WAIT = 1.0


class _EmbeddedRows(_EmbeddedDatabase):
    """The SQL of the store's tables: memories, history, links, archive, pending, doctor runs, meta."""

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

    # -- the meta table: the model record's truth and the reindex state ------------------
    def _meta(self, key: str) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def _set_meta(self, key: str, value: Any) -> None:
        if value is None:
            self.db.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

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


def _json_loads(text: str | None) -> Any:
    return json.loads(text) if text else None
