"""Named, ordered schema migrations for memories.sqlite (applied on open, each once)."""

from __future__ import annotations

import sqlite3

from memctl.errors import StoreError

MIGRATIONS: list[tuple[str, str]] = [
    ("m001_initial", """
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
"""),
    ("m002_row_counter", """
-- COUNT(*) scans the table; the index check after every change needs the count in O(1).
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO counters VALUES ('memories', (SELECT COUNT(*) FROM memories));
CREATE TRIGGER memories_count_ai AFTER INSERT ON memories BEGIN
    UPDATE counters SET value = value + 1 WHERE name = 'memories';
END;
CREATE TRIGGER memories_count_ad AFTER DELETE ON memories BEGIN
    UPDATE counters SET value = value - 1 WHERE name = 'memories';
END;
"""),
    ("m003_lifecycle_archive_access", """
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
"""),
    ("m004_fts_porter_keywords", """
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
"""),
    ("m005_fts_cjk_characters", """
-- Keyword search v3: Chinese, Japanese and Korean text is indexed one character per token
-- (memctl_fts_text, registered by memctl on every connection: memctl/store/keyword.py), and
-- queries search each CJK word as the phrase of its characters (memctl/segment.py). Before, a run
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
"""),
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
            for statement in _split(sql):
                db.execute(statement)
            db.execute("INSERT INTO schema_migrations VALUES (?, datetime('now'))", (name,))
            db.execute("COMMIT")
        except BaseException:
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
