"""Named, ordered schema migrations for memories.sqlite (applied on open, each once)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from memctl.errors import StoreError
from memctl.store.validate import normalised_or_kept


def _terms(seq: str, meta: str, source: str = "") -> str:
    """A SELECT of the filter postings (m007_filter_terms) of memory `seq` with metadata `meta`: the
    columns of each row of `source` ("FROM memories AS m"), or a trigger's new/old row."""
    ok = f"CASE WHEN json_valid({meta}) THEN json_type({meta}) = 'object' END"  # json_type raises on bad JSON
    safe = f"CASE WHEN {ok} THEN {meta} ELSE '{{}}' END"
    bad = (
        f"CASE WHEN json_valid({meta}) THEN json_type({meta}) != 'object' OR {meta} GLOB '*{'[0-9]' * 19}*' ELSE 1 END"
    )
    rows = f"{source}{', ' if source else 'FROM '}json_each({safe}) AS j"
    return f"""SELECT '', 'bad', '', {seq} {source} WHERE {bad}
    UNION ALL SELECT j.key, CASE j.type WHEN 'text' THEN 's' WHEN 'object' THEN 'o' ELSE 'n' END,
        coalesce(j.atom, ''), {seq} {rows} WHERE j.type NOT IN ('null', 'array')
    UNION ALL SELECT j.key, 'e', e.atom, {seq} {rows}, json_each(j.value) AS e
        WHERE j.type = 'array' AND e.atom IS NOT NULL"""


_INSERT_TERMS = "INSERT OR IGNORE INTO meta_terms (key, kind, value, seq) "
# No index on seq (it would cost a quarter of an insert): a delete recomputes the old row's postings.
_DELETE_TERMS = "DELETE FROM meta_terms WHERE (key, kind, value, seq) IN "

# Metadata filters run in SQL (memctl/store/filter_sql.py); these postings let an index find the rows a
# filter can match. Per top-level field: a string value ('s'), a number or boolean ('n', booleans as 1/0),
# an object ('o', value ''), each scalar element of an array ('e'). Metadata the json functions cannot
# read exactly (not a JSON object, NaN/Infinity, an integer past 64 bits) is marked 'bad' and judged by
# the Python evaluator.
_FILTER_TERMS = f"""
CREATE TABLE meta_terms (
    key TEXT NOT NULL, kind TEXT NOT NULL, value NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (key, kind, value, seq)
) WITHOUT ROWID;
CREATE TRIGGER memories_terms_ai AFTER INSERT ON memories BEGIN
    {_INSERT_TERMS}{_terms("new.seq", "new.metadata")};
END;
CREATE TRIGGER memories_terms_ad AFTER DELETE ON memories BEGIN
    {_DELETE_TERMS}({_terms("old.seq", "old.metadata")});
END;
CREATE TRIGGER memories_terms_au AFTER UPDATE OF metadata ON memories BEGIN
    {_DELETE_TERMS}({_terms("old.seq", "old.metadata")});
    {_INSERT_TERMS}{_terms("new.seq", "new.metadata")};
END;
{_INSERT_TERMS}{_terms("m.seq", "m.metadata", "FROM memories AS m")};
"""


# The stored form of a timestamp (memctl/store/validate.py): a value of this shape is left alone.
_STORED_FORM = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]"
_NOT_STORED_FORM = f"{{0}} NOT GLOB '{_STORED_FORM}+00:00' AND {{0}} NOT GLOB '{_STORED_FORM}[0-9][0-9][0-9]+00:00'"


def _utc_timestamps(db: sqlite3.Connection) -> None:
    """m008_utc_timestamps: created_at and updated_at of memories and of the archive in the stored form (UTC
    ISO 8601 with offset). Imports kept offsets as written (`+05:00`), and filters and `list` compare the
    columns as text, so 10:00+05:00 sorted after 06:00+00:00. Values that read as no timestamp stay."""
    for table, key in (("memories", "seq"), ("archive", "id")):
        where = " OR ".join(_NOT_STORED_FORM.format(column) for column in ("created_at", "updated_at"))
        rows = db.execute(f"SELECT {key}, created_at, updated_at FROM {table} WHERE {where}").fetchall()
        changed = [
            (normalised_or_kept(created), normalised_or_kept(updated), ident)
            for ident, created, updated in rows
            if (normalised_or_kept(created), normalised_or_kept(updated)) != (created, updated)
        ]
        db.executemany(f"UPDATE {table} SET created_at = ?, updated_at = ? WHERE {key} = ?", changed)


# A migration is an SQL script or, where SQL cannot say it (Python's timestamp rules), a function of the
# connection; either runs in the migration's transaction.
MIGRATIONS: list[tuple[str, str | Callable[[sqlite3.Connection], None]]] = [
    (
        "m001_initial",
        """
CREATE TABLE memories (
    seq INTEGER PRIMARY KEY,          -- the FAISS id of the row
    id TEXT NOT NULL UNIQUE,
    text TEXT NOT NULL,
    area TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    vector BLOB NOT NULL,
    content_hash TEXT NOT NULL
);
CREATE INDEX memories_area_created ON memories(area, created_at);
CREATE INDEX memories_created ON memories(created_at);
CREATE INDEX memories_hash ON memories(content_hash);

CREATE VIRTUAL TABLE memories_fts USING fts5(text, content='memories', content_rowid='seq');

-- Every change to the vector set appends the touched row here; the FAISS file records the
-- journal position it includes, so opening replays only what came after it.
CREATE TABLE index_journal (jseq INTEGER PRIMARY KEY AUTOINCREMENT, seq INTEGER NOT NULL);
CREATE TABLE index_checkpoints (
    sha256 TEXT PRIMARY KEY, jseq INTEGER NOT NULL, ntotal INTEGER NOT NULL, created_at TEXT NOT NULL
);

CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO index_journal(seq) VALUES (new.seq);
    INSERT INTO memories_fts(rowid, text) VALUES (new.seq, new.text);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO index_journal(seq) VALUES (old.seq);
    INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.seq, old.text);
END;
CREATE TRIGGER memories_au AFTER UPDATE OF text, vector ON memories BEGIN
    INSERT INTO index_journal(seq) VALUES (new.seq);
    INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.seq, old.text);
    INSERT INTO memories_fts(rowid, text) VALUES (new.seq, new.text);
END;

CREATE TABLE history (
    hid INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id TEXT NOT NULL,
    op TEXT NOT NULL,                 -- add, update, delete, merge, replace, import, ...
    actor TEXT NOT NULL,              -- cli, api, memorize, consolidate, knowledge, prune, import
    at TEXT NOT NULL,
    area TEXT,
    old_text TEXT,
    new_text TEXT,
    old_metadata TEXT,
    new_metadata TEXT
);
CREATE INDEX history_memory ON history(memory_id, hid);

-- Provenance: child_id was derived from parent_id (consolidation, knowledge files, ...).
CREATE TABLE links (
    parent_id TEXT NOT NULL,
    child_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (parent_id, child_id, kind)
);
CREATE INDEX links_child ON links(child_id);

CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
""",
    ),
    (
        "m002_row_counter",
        """
-- COUNT(*) scans the table; the index check after every change needs the count in O(1).
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO counters VALUES ('memories', (SELECT COUNT(*) FROM memories));
CREATE TRIGGER memories_count_ai AFTER INSERT ON memories BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'memories';
END;
CREATE TRIGGER memories_count_ad AFTER DELETE ON memories BEGIN
    UPDATE counters SET value = value - 1 WHERE name = 'memories';
END;
""",
    ),
    (
        "m003_lifecycle_archive_access",
        """
-- When `load` last returned the memory (NULL: never); prune --not-accessed-for reads it.
ALTER TABLE memories ADD COLUMN accessed_at TEXT;

-- The last removed version of each deleted/replaced/pruned memory, vector included, so
-- `memctl restore` needs no model. `memctl purge` removes rows for good.
CREATE TABLE archive (
    id TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    area TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    accessed_at TEXT,
    metadata TEXT NOT NULL DEFAULT '{}',
    vector BLOB,
    model TEXT,                       -- provider:model of the vector
    archived_at TEXT NOT NULL,
    op TEXT NOT NULL,                 -- delete, prune, replace, merge, ...
    actor TEXT NOT NULL
);
CREATE INDEX archive_at ON archive(archived_at);
CREATE INDEX history_at ON history(at);
""",
    ),
    (
        "m004_fts_porter_keywords",
        """
-- Keyword search v2: Porter stemming (refunds ~ refund) and a second indexed column holding
-- selected metadata values (speaker, date, tags: config keyword_metadata_keys), which the
-- vector side never sees.
ALTER TABLE memories ADD COLUMN keywords TEXT NOT NULL DEFAULT '';
DROP TRIGGER memories_ai;
DROP TRIGGER memories_ad;
DROP TRIGGER memories_au;
DROP TABLE memories_fts;
CREATE VIRTUAL TABLE memories_fts USING fts5(
    text, keywords, content='memories', content_rowid='seq', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO index_journal(seq) VALUES (new.seq);
    INSERT INTO memories_fts(rowid, text, keywords) VALUES (new.seq, new.text, new.keywords);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO index_journal(seq) VALUES (old.seq);
    INSERT INTO memories_fts(memories_fts, rowid, text, keywords) VALUES ('delete', old.seq, old.text, old.keywords);
END;
CREATE TRIGGER memories_au AFTER UPDATE OF text, vector ON memories BEGIN
    INSERT INTO index_journal(seq) VALUES (new.seq);
END;
CREATE TRIGGER memories_au_fts AFTER UPDATE OF text, keywords ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text, keywords) VALUES ('delete', old.seq, old.text, old.keywords);
    INSERT INTO memories_fts(rowid, text, keywords) VALUES (new.seq, new.text, new.keywords);
END;
INSERT INTO memories_fts(memories_fts) VALUES ('rebuild');
""",
    ),
    (
        "m005_fts_cjk_characters",
        """
-- Keyword search v3: Chinese, Japanese and Korean text is indexed one character per token
-- (memctl_fts_text, registered by memctl on every connection: memctl/store/keyword.py), and
-- queries search each CJK word as the phrase of its characters (memctl/text/segment.py). Before, a run
-- of Han characters up to the next punctuation was one token and no Chinese word was ever found.
-- The index reads its source through a view, so 'rebuild' indexes what the triggers index.
DROP TRIGGER memories_ai;
DROP TRIGGER memories_ad;
DROP TRIGGER memories_au_fts;
DROP TABLE memories_fts;
CREATE VIEW memories_fts_source AS
    SELECT seq, memctl_fts_text(text) AS text, memctl_fts_text(keywords) AS keywords FROM memories;
CREATE VIRTUAL TABLE memories_fts USING fts5(
    text, keywords, content='memories_fts_source', content_rowid='seq',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO index_journal(seq) VALUES (new.seq);
    INSERT INTO memories_fts(rowid, text, keywords)
        VALUES (new.seq, memctl_fts_text(new.text), memctl_fts_text(new.keywords));
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO index_journal(seq) VALUES (old.seq);
    INSERT INTO memories_fts(memories_fts, rowid, text, keywords)
        VALUES ('delete', old.seq, memctl_fts_text(old.text), memctl_fts_text(old.keywords));
END;
CREATE TRIGGER memories_au_fts AFTER UPDATE OF text, keywords ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text, keywords)
        VALUES ('delete', old.seq, memctl_fts_text(old.text), memctl_fts_text(old.keywords));
    INSERT INTO memories_fts(rowid, text, keywords)
        VALUES (new.seq, memctl_fts_text(new.text), memctl_fts_text(new.keywords));
END;
INSERT INTO memories_fts(memories_fts) VALUES ('rebuild');
""",
    ),
    (
        "m006_commit_counter",
        """
-- Every write transaction adds one; the count is also written to the file .commits beside the
-- database after each commit. A database that opens with a lower count than that file lost
-- committed transactions (its write-ahead log was removed or damaged), and memctl says so.
INSERT OR IGNORE INTO counters VALUES ('commits', 0);
""",
    ),
    ("m007_filter_terms", _FILTER_TERMS),
    ("m008_utc_timestamps", _utc_timestamps),
    (
        "m009_pending",
        """
-- The review queue: candidates the gate was unsure of (memorize_pending: review) and memories an agent
-- proposed (MCP memory_propose). Not memories: no vector, no FTS row, no filter postings, so no search,
-- list or consolidation sees them. `memctl review approve` moves one into memories (embedded then);
-- `review reject` moves it to the archive, where `memctl restore` finds it.
CREATE TABLE pending (
    id TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    area TEXT NOT NULL,
    created_at TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    reason TEXT NOT NULL DEFAULT '',
    source TEXT,                      -- metadata `source`: memorize, mcp, ...
    transcript TEXT,                  -- metadata `transcript`
    content_hash TEXT NOT NULL
);
CREATE INDEX pending_created ON pending(created_at, id);
CREATE INDEX pending_hash ON pending(content_hash);
""",
    ),
    (
        "m010_doctor_runs",
        """
-- `memctl doctor`: one row per run with its figures (JSON), read back by `doctor --trend`; and the findings of
-- the latest run (likely junk, near-duplicates, conflicts, stale facts), which `review list --kind` lists.
-- Each run replaces the findings of the one before.
CREATE TABLE doctor_runs (
    run INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    figures TEXT NOT NULL
);
CREATE TABLE doctor_findings (
    run INTEGER NOT NULL,
    kind TEXT NOT NULL,               -- junk, duplicate, conflict, stale
    memory_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    score REAL,                       -- p(noise), similarity or effective importance, by kind
    related TEXT NOT NULL DEFAULT '[]',  -- JSON list of the other memories of a group or pair
    PRIMARY KEY (kind, memory_id)
);
""",
    ),
]


def apply_migrations(db: sqlite3.Connection) -> list[str]:
    """Apply pending migrations in order, each in its own transaction; return their names."""
    db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    done = {row[0] for row in db.execute("SELECT name FROM schema_migrations")}
    known = {name for name, _ in MIGRATIONS}
    if done - known:
        raise StoreError(
            f"store schema has migrations this memctl does not know: {sorted(done - known)}",
            hint="upgrade memctl",
        )
    applied = []
    for name, sql in MIGRATIONS:
        if name in done:
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            if db.execute("SELECT 1 FROM schema_migrations WHERE name = ?", (name,)).fetchone():
                db.execute("ROLLBACK")  # another process applied it while we waited
                continue
            if callable(sql):
                sql(db)
            else:
                for statement in _split(sql):
                    db.execute(statement)
            db.execute("INSERT INTO schema_migrations VALUES (?, datetime('now'))", (name,))
            db.execute("COMMIT")
        except BaseException:
            # SQLite may have rolled back already (disk full): a second ROLLBACK would raise
            # "no transaction is active" and hide the real error.
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        applied.append(name)
    return applied


def _split(script: str) -> list[str]:
    """Split a script into statements (triggers contain ';' so use sqlite3.complete_statement)."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return [s for s in statements if s]
