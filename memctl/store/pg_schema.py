"""Named, ordered schema migrations of the PostgreSQL backend (applied on first use, each once).

Every table carries `subdir`, so one database serves many stores. The first users of a new
database may start at the same moment: migrations run in one transaction under a transaction-
level advisory lock, so the second waits and then finds them applied.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memctl.errors import StoreError
from memctl.store.validate import normalised_or_kept

# pg_advisory_xact_lock key of memctl's schema changes (also taken to create a vector index).
LOCK_KEY = 0x6D656D63746C  # "memctl"
# First half of the two-key advisory lock a knowledge import holds on its subdir (second: hashtext(subdir)).
KNOWLEDGE_LOCK_CLASS = 0x6D656D6B  # "memk"

# The stored form of a timestamp (memctl/store/validate.py): a value of this shape is left alone.
_STORED_FORM = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(\d{3})?\+00:00$"


def _utc_timestamps(conn: Any) -> None:
    """m008_utc_timestamps: created_at and updated_at of memories and of the archive in the stored form (UTC
    ISO 8601 with offset), as the embedded store's m008 does (the same Python function decides). Imports kept
    offsets as written, and filters and `list` compare the columns as text. Values that read as no timestamp
    stay."""
    for table, key in (("memctl_memories", "seq"), ("memctl_archive", "subdir, id")):
        rows = conn.execute(
            f"SELECT {key}, created_at, updated_at FROM {table} WHERE created_at !~ %s OR updated_at !~ %s",
            (_STORED_FORM, _STORED_FORM),
        ).fetchall()
        changed = []
        for *ident, created, updated in rows:
            new = (normalised_or_kept(created), normalised_or_kept(updated))
            if new != (created, updated):
                changed.append((*new, *ident))
        where = " AND ".join(f"{column.strip()} = %s" for column in key.split(","))
        with conn.cursor() as cursor:
            cursor.executemany(f"UPDATE {table} SET created_at = %s, updated_at = %s WHERE {where}", changed)


# A migration is an SQL script or, where SQL cannot say it (Python's timestamp rules), a function of the
# connection; either runs in the one migration transaction.
MIGRATIONS: list[tuple[str, str | Callable[[Any], None]]] = [
    (
        "m001_initial",
        """
CREATE EXTENSION IF NOT EXISTS vector;

-- One row per store: the model its vectors come from, and the state of an unfinished reindex.
CREATE TABLE memctl_stores (
    subdir TEXT PRIMARY KEY,
    provider TEXT,
    model TEXT,
    dimension INTEGER,
    reindex JSONB,
    created_at TEXT NOT NULL
);

CREATE TABLE memctl_memories (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    subdir TEXT NOT NULL,
    id TEXT NOT NULL,
    text TEXT NOT NULL,
    area TEXT NOT NULL,
    created_at TEXT NOT NULL,               -- ISO 8601 with offset, as the embedded store keeps them
    updated_at TEXT NOT NULL,
    accessed_at TEXT,
    metadata JSON NOT NULL DEFAULT '{}',    -- json, not jsonb: keys keep their order
    keywords TEXT NOT NULL DEFAULT '',      -- metadata values for keyword search (keyword_metadata_keys)
    vector vector NOT NULL,                 -- any dimension; one HNSW index per dimension in use
    content_hash TEXT NOT NULL,
    -- Punctuation splits words, as in the embedded store's FTS5 (otherwise INC-46215 indexes as -46215).
    tsv tsvector GENERATED ALWAYS AS (
        to_tsvector('english'::regconfig, regexp_replace(text || ' ' || keywords, '[[:punct:]]', ' ', 'g'))) STORED,
    CONSTRAINT memctl_memories_subdir_id UNIQUE (subdir, id)
);
CREATE INDEX memctl_memories_created ON memctl_memories (subdir, created_at, seq);
CREATE INDEX memctl_memories_area ON memctl_memories (subdir, area);
CREATE INDEX memctl_memories_hash ON memctl_memories (subdir, content_hash);
CREATE INDEX memctl_memories_tsv ON memctl_memories USING gin (tsv);

CREATE TABLE memctl_history (
    hid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    subdir TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    op TEXT NOT NULL,
    actor TEXT NOT NULL,
    at TEXT NOT NULL,
    area TEXT,
    old_text TEXT,
    new_text TEXT,
    old_metadata JSON,
    new_metadata JSON
);
CREATE INDEX memctl_history_memory ON memctl_history (subdir, memory_id, hid);
CREATE INDEX memctl_history_at ON memctl_history (subdir, at);

-- Provenance: child_id was derived from parent_id (consolidation, ...); delete cascades through it.
CREATE TABLE memctl_links (
    subdir TEXT NOT NULL,
    parent_id TEXT NOT NULL,
    child_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (subdir, parent_id, child_id, kind)
);
CREATE INDEX memctl_links_child ON memctl_links (subdir, child_id);

-- The last removed version of each deleted/replaced/pruned memory, vector included.
CREATE TABLE memctl_archive (
    subdir TEXT NOT NULL,
    id TEXT NOT NULL,
    text TEXT NOT NULL,
    area TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    accessed_at TEXT,
    metadata JSON NOT NULL DEFAULT '{}',
    vector vector,
    model TEXT,
    archived_at TEXT NOT NULL,
    op TEXT NOT NULL,
    actor TEXT NOT NULL,
    PRIMARY KEY (subdir, id)
);
CREATE INDEX memctl_archive_at ON memctl_archive (subdir, archived_at);
""",
    ),
    (
        "m002_behaviour_knowledge",
        """
-- The behaviour rules of a store (an embedded store's behaviour.md).
CREATE TABLE memctl_behaviour (
    subdir TEXT PRIMARY KEY,
    rules TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

-- Knowledge imports (an embedded store's knowledge_import.json): the path each knowledge folder
-- was last imported from, and per file its checksum, area, chunk ids, chunking and import time.
CREATE TABLE memctl_knowledge_folders (
    subdir TEXT NOT NULL,
    folder TEXT NOT NULL,
    path TEXT NOT NULL,
    PRIMARY KEY (subdir, folder)
);
CREATE TABLE memctl_knowledge_files (
    subdir TEXT NOT NULL,
    folder TEXT NOT NULL,
    source_path TEXT NOT NULL,
    checksum TEXT,
    area TEXT NOT NULL,
    file_type TEXT NOT NULL,
    ids JSON NOT NULL,
    chunking TEXT NOT NULL,
    imported_at TEXT NOT NULL,
    PRIMARY KEY (subdir, folder, source_path)
);

-- A store's knowledge chunks, found without reading its other memories.
CREATE INDEX memctl_memories_knowledge ON memctl_memories (subdir, seq)
    WHERE (metadata->>'knowledge_source') = 'true';
""",
    ),
    (
        "m003_fts_cjk_characters",
        r"""
-- Keyword search finds Chinese, Japanese and Korean words: each CJK character becomes a token of
-- its own (as the embedded store's memctl_fts_text does), and queries search each CJK word as the
-- phrase of its characters (memctl/text/segment.py). Before, the parser kept a run of Han characters up
-- to the next punctuation as one word, so no Chinese word was ever found. Re-adding the generated
-- column recomputes it for every stored row.
CREATE FUNCTION memctl_fts_text(t text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT regexp_replace(regexp_replace(t, '[[:punct:]]', ' ', 'g'),
        '([\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f'  -- kana (memctl/text/segment.py CJK_CLASS)
        '\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f'  -- Han
        '\uac00-\ud7af\u1100-\u11ff\u3130-\u318f])',  -- Hangul
        ' \1 ', 'g')
$$;
ALTER TABLE memctl_memories DROP COLUMN tsv;
ALTER TABLE memctl_memories ADD COLUMN tsv tsvector GENERATED ALWAYS AS (
    to_tsvector('english'::regconfig, memctl_fts_text(text || ' ' || keywords))) STORED;
CREATE INDEX memctl_memories_tsv ON memctl_memories USING gin (tsv);
""",
    ),
    (
        "m004_repair_metadata_strings",
        """
-- Batches of 50 or more rows were once copied with their metadata encoded twice: the column held
-- a JSON string whose text is the object. Decode those back into the object (metadata is always one).
UPDATE memctl_memories SET metadata = (metadata #>> '{}')::json WHERE json_typeof(metadata) = 'string';
UPDATE memctl_archive SET metadata = (metadata #>> '{}')::json WHERE json_typeof(metadata) = 'string';
""",
    ),
    (
        "m005_filter_meta",
        r"""
-- Metadata filters run in SQL (memctl/store/filter_sql.py). memctl_meta(metadata) is the metadata as
-- jsonb plus, under "id" (a reserved key: a filter's `id` reads the column), each field's JSON type, so
-- a GIN index answers `tag == 'x'`, `'x' in tags` (array element, or a string/object field) by
-- containment. Metadata jsonb cannot hold (\u0000) or that numeric would compare with integers unlike
-- Python (a float written with e+) becomes {"id": {"": "suspect"}}: the Python evaluator judges those.
CREATE FUNCTION memctl_meta(m json) RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN json_typeof(m) <> 'object' OR strpos(m::text, '\u0000') > 0 OR strpos(m::text, 'e+') > 0
        THEN '{"id": {"": "suspect"}}'::jsonb
        ELSE m::jsonb || jsonb_build_object('id', (SELECT coalesce(jsonb_object_agg(key, json_typeof(value)),
                                                                   '{}'::jsonb) FROM json_each(m))) END
$$;
-- Stored, not an expression index: jsonb_path_ops always rechecks, and recomputing memctl_meta() for
-- each candidate row cost 40 ms for 1,000 rows; the stored column makes the recheck a plain containment.
ALTER TABLE memctl_memories ADD COLUMN meta_index jsonb GENERATED ALWAYS AS (memctl_meta(metadata)) STORED;
CREATE INDEX memctl_memories_meta ON memctl_memories USING gin (meta_index jsonb_path_ops);
""",
    ),
    (
        "m006_filter_ranges",
        r"""
-- Range terms of metadata filters (`score >= 99`, `due < '2025-01'`) answered by a btree: one posting per
-- top-level scalar field of each memory (numbers and booleans as numeric, True = 1; strings by their first
-- 100 characters, in code-point order as Python compares), taken from meta_index (so suspect rows, which
-- the Python evaluator judges, have none). GIN jsonb_path_ops answers equality only. Statement-level
-- triggers keep the postings (one INSERT ... SELECT per COPY batch, not one per row); an UPDATE that
-- leaves meta_index and subdir alone (access times, vectors) does not touch them.
CREATE TABLE memctl_meta_ranges (
    seq BIGINT NOT NULL,                    -- memctl_memories.seq
    subdir TEXT NOT NULL,
    key TEXT NOT NULL,
    num NUMERIC,                            -- a number or boolean field, else NULL
    str TEXT COLLATE "C"                    -- left(a string field, 100), else NULL
);
CREATE INDEX memctl_meta_ranges_num ON memctl_meta_ranges (subdir, key, num, seq) WHERE num IS NOT NULL;
CREATE INDEX memctl_meta_ranges_str ON memctl_meta_ranges (subdir, key, str, seq) WHERE str IS NOT NULL;
CREATE INDEX memctl_meta_ranges_seq ON memctl_meta_ranges (seq);

CREATE FUNCTION memctl_meta_postings(m jsonb) RETURNS TABLE (key text, num numeric, str text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT e.key,
        CASE jsonb_typeof(e.value) WHEN 'number' THEN (e.value #>> '{}')::numeric
            WHEN 'boolean' THEN CASE WHEN e.value = 'true'::jsonb THEN 1 ELSE 0 END END,
        CASE WHEN jsonb_typeof(e.value) = 'string' THEN left(e.value #>> '{}', 100) END
    FROM jsonb_each(m) AS e
    WHERE e.key <> 'id' AND jsonb_typeof(e.value) IN ('number', 'boolean', 'string')
$$;

CREATE FUNCTION memctl_meta_ranges_added() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO memctl_meta_ranges (seq, subdir, key, num, str)
        SELECT r.seq, r.subdir, p.key, p.num, p.str FROM new_rows AS r, memctl_meta_postings(r.meta_index) AS p;
    RETURN NULL;
END $$;
CREATE FUNCTION memctl_meta_ranges_removed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM memctl_meta_ranges WHERE seq IN (SELECT seq FROM old_rows);
    RETURN NULL;
END $$;
CREATE FUNCTION memctl_meta_ranges_changed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    -- One statement: the DELETE and the INSERT see the same snapshot, so the DELETE drops the old postings only.
    WITH changed AS (
        SELECT n.seq FROM new_rows AS n JOIN old_rows AS o ON o.seq = n.seq
        WHERE o.meta_index IS DISTINCT FROM n.meta_index OR o.subdir <> n.subdir
    ), dropped AS (
        DELETE FROM memctl_meta_ranges WHERE seq IN (SELECT seq FROM changed)
    )
    INSERT INTO memctl_meta_ranges (seq, subdir, key, num, str)
        SELECT r.seq, r.subdir, p.key, p.num, p.str FROM new_rows AS r, memctl_meta_postings(r.meta_index) AS p
        WHERE r.seq IN (SELECT seq FROM changed);
    RETURN NULL;
END $$;
CREATE TRIGGER memctl_meta_ranges_insert AFTER INSERT ON memctl_memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memctl_meta_ranges_added();
CREATE TRIGGER memctl_meta_ranges_delete AFTER DELETE ON memctl_memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memctl_meta_ranges_removed();
CREATE TRIGGER memctl_meta_ranges_update AFTER UPDATE ON memctl_memories
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memctl_meta_ranges_changed();

-- Back-fill the stores written before this migration.
INSERT INTO memctl_meta_ranges (seq, subdir, key, num, str)
    SELECT m.seq, m.subdir, p.key, p.num, p.str FROM memctl_memories AS m, memctl_meta_postings(m.meta_index) AS p;
ANALYZE memctl_meta_ranges;
""",
    ),
    (
        "m007_store_counts",
        """
-- Each store's memory count and a change counter, kept by statement-level triggers: a search reads its store's
-- size (exact or HNSW search, the hybrid's depth and word shares) and whether any writer changed the store since
-- its last search (PostgresStore._generation: its per-generation caches) from a few rows, where counting the
-- subdir scanned its index (11-14 ms at 170k, on every search). One row per (subdir, slot), a writer's slot its
-- server process id: concurrent writers never wait for one another's counter row (one row per store would be a
-- store-wide lock held to commit, and could deadlock with row locks a transaction takes after its first insert).
-- A reader sums a store's rows, exact in any snapshot; slot 0 holds what PostgresStore folds from slots no open
-- transaction holds, so the rows stay few. `changes` only grows: +1 per statement that inserted, deleted, or
-- changed more of a memory than its access time.
CREATE TABLE memctl_counts (
    subdir TEXT NOT NULL,
    slot INTEGER NOT NULL,
    memories BIGINT NOT NULL DEFAULT 0,
    changes BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (subdir, slot)
);

CREATE FUNCTION memctl_counts_added() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO memctl_counts AS c (subdir, slot, memories, changes)
        SELECT r.subdir, pg_backend_pid(), count(*), 1 FROM new_rows AS r GROUP BY r.subdir
        ON CONFLICT (subdir, slot) DO UPDATE SET memories = c.memories + EXCLUDED.memories, changes = c.changes + 1;
    RETURN NULL;
END $$;
CREATE FUNCTION memctl_counts_removed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO memctl_counts AS c (subdir, slot, memories, changes)
        SELECT r.subdir, pg_backend_pid(), -count(*), 1 FROM old_rows AS r GROUP BY r.subdir
        ON CONFLICT (subdir, slot) DO UPDATE SET memories = c.memories + EXCLUDED.memories, changes = c.changes + 1;
    RETURN NULL;
END $$;
CREATE FUNCTION memctl_counts_changed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    -- An update of access times only (`load` touching what it returned) changes nothing a search keeps.
    WITH changed AS (
        SELECT o.subdir AS was, n.subdir AS now FROM new_rows AS n JOIN old_rows AS o ON o.seq = n.seq
        WHERE (o.subdir, o.id, o.text, o.area, o.created_at, o.updated_at, o.metadata::text, o.keywords,
               o.content_hash, o.vector)
            IS DISTINCT FROM (n.subdir, n.id, n.text, n.area, n.created_at, n.updated_at, n.metadata::text,
                              n.keywords, n.content_hash, n.vector)
    ), deltas AS (
        SELECT now AS subdir, CASE WHEN was <> now THEN 1 ELSE 0 END AS d FROM changed
        UNION ALL SELECT was, -1 FROM changed WHERE was <> now
    )
    INSERT INTO memctl_counts AS c (subdir, slot, memories, changes)
        SELECT subdir, pg_backend_pid(), sum(d), 1 FROM deltas GROUP BY subdir
        ON CONFLICT (subdir, slot) DO UPDATE SET memories = c.memories + EXCLUDED.memories, changes = c.changes + 1;
    RETURN NULL;
END $$;
CREATE FUNCTION memctl_counts_truncated() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE memctl_counts SET memories = 0, changes = changes + 1;
    RETURN NULL;
END $$;

-- CREATE TRIGGER locks out writers until this migration commits, so the back-fill below misses no row.
LOCK TABLE memctl_memories IN SHARE ROW EXCLUSIVE MODE;
CREATE TRIGGER memctl_counts_insert AFTER INSERT ON memctl_memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memctl_counts_added();
CREATE TRIGGER memctl_counts_delete AFTER DELETE ON memctl_memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memctl_counts_removed();
CREATE TRIGGER memctl_counts_update AFTER UPDATE ON memctl_memories
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memctl_counts_changed();
CREATE TRIGGER memctl_counts_truncate AFTER TRUNCATE ON memctl_memories
    FOR EACH STATEMENT EXECUTE FUNCTION memctl_counts_truncated();

-- Back-fill the stores written before this migration.
INSERT INTO memctl_counts (subdir, slot, memories, changes)
    SELECT subdir, 0, count(*), 1 FROM memctl_memories GROUP BY subdir;
""",
    ),
    ("m008_utc_timestamps", _utc_timestamps),
    (
        "m009_pending",
        """
-- The review queue (the embedded store's `pending` table): candidates the gate was unsure of and memories
-- an agent proposed. Not memories: no vector, no tsv, no counts, so no search, list or consolidation sees them.
CREATE TABLE memctl_pending (
    subdir TEXT NOT NULL,
    id TEXT NOT NULL,
    text TEXT NOT NULL,
    area TEXT NOT NULL,
    created_at TEXT NOT NULL,
    metadata JSON NOT NULL DEFAULT '{}',
    reason TEXT NOT NULL DEFAULT '',
    source TEXT,
    transcript TEXT,
    content_hash TEXT NOT NULL,
    PRIMARY KEY (subdir, id)
);
CREATE INDEX memctl_pending_created ON memctl_pending (subdir, created_at, id);
CREATE INDEX memctl_pending_hash ON memctl_pending (subdir, content_hash);
""",
    ),
    (
        "m010_doctor_runs",
        """
-- `memctl doctor` (the embedded store's doctor_runs and doctor_findings): one row per run with its figures,
-- and the latest run's findings, which `review list --kind` lists.
CREATE TABLE memctl_doctor_runs (
    subdir TEXT NOT NULL,
    run BIGINT GENERATED ALWAYS AS IDENTITY,
    at TEXT NOT NULL,
    figures JSON NOT NULL,
    PRIMARY KEY (subdir, run)
);
CREATE TABLE memctl_doctor_findings (
    subdir TEXT NOT NULL,
    run BIGINT NOT NULL,
    kind TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    score DOUBLE PRECISION,
    related JSON NOT NULL DEFAULT '[]',
    PRIMARY KEY (subdir, kind, memory_id)
);
""",
    ),
]


def apply_pg_migrations(conn: Any) -> list[str]:
    """Apply pending migrations in order, all in one transaction under the advisory lock."""
    import psycopg

    known = [name for name, _ in MIGRATIONS]
    if _applied(conn) == set(known):
        return []  # the usual case: no lock taken
    applied: list[str] = []
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS memctl_migrations"
                " (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            done = _applied(conn)
            unknown = sorted(done - set(known))
            if unknown:
                raise StoreError(
                    f"the database has memctl migrations this memctl does not know: {unknown}", hint="upgrade memctl"
                )
            for name, sql in MIGRATIONS:
                if name in done:
                    continue
                if callable(sql):
                    sql(conn)
                else:
                    conn.execute(sql)
                conn.execute("INSERT INTO memctl_migrations (name) VALUES (%s)", (name,))
                applied.append(name)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise StoreError(
            f"cannot create memctl's tables: {str(exc).strip()}",
            hint="the pgvector extension must be created once by a superuser (`CREATE EXTENSION vector;` "
            "in this database), and memctl's user needs CREATE on its schema",
        ) from exc
    except psycopg.errors.FeatureNotSupported as exc:
        raise StoreError(
            f"cannot create memctl's tables: {str(exc).strip()}",
            hint="install pgvector >= 0.5 on the server (HNSW indexes)",
        ) from exc
    except psycopg.errors.UndefinedFile as exc:
        raise StoreError(
            f"the server has no pgvector extension: {str(exc).strip()}",
            hint="install pgvector on the server (https://github.com/pgvector/pgvector)",
        ) from exc
    return applied


def _applied(conn: Any) -> set[str]:
    # In the schema memctl creates tables in (the first of search_path), not one further down the path.
    if conn.execute("SELECT to_regclass(format('%I.memctl_migrations', current_schema()))").fetchone()[0] is None:
        return set()
    return {row[0] for row in conn.execute("SELECT name FROM memctl_migrations")}
