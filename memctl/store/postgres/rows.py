"""The PostgreSQL backend's rows: inserting, linking, archiving, history, the pending queue, doctor runs,
access times, updates and reading memories back."""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from memctl.embeddings import content_hash
from memctl.errors import UsageError
from memctl.store.doctor_rows import DoctorRun, Finding, figures_of, related_of
from memctl.store.filters import Filter
from memctl.store.interface import PreparedRow
from memctl.store.postgres.connection import _first_line, _json, _PostgresConnection, _vector_bytes
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


# Seconds `touch` (access times after `load`) waits for a row lock before skipping.
TOUCH_WAIT = 1.0


class _PostgresRows(_PostgresConnection):
    """PostgresStore's rows: writing, reading and archiving memories and their side tables."""

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
