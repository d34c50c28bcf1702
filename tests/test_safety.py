"""Data safety (issue 17): what is acknowledged is kept, whatever runs beside it, and exports re-import.

Tests that apply to both backends take the `backend` fixture (embedded, then PostgreSQL).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memctl
from memctl.embeddings import FakeEmbedder


def _raw_metadata_types(store) -> set[str]:
    """The JSON type of every stored metadata value, read by the database itself."""
    if type(store).__name__ == "PostgresStore":
        rows = store._all("SELECT DISTINCT json_typeof(metadata) FROM memctl_memories WHERE subdir = %s",
                          (store.subdir,))
    else:
        rows = store.db.execute("SELECT DISTINCT json_type(metadata) FROM memories").fetchall()
    return {r[0] for r in rows}


# -- 1. metadata of large insert batches -------------------------------------------------------------
@pytest.mark.parametrize("size", [1, 49, 50, 5000])
def test_metadata_is_an_object_for_every_batch_size(home: Path, backend: str, size: int):
    with memctl.open_store(home, f"batch{size}", embedder=FakeEmbedder()) as store:
        metas = [{"kind": "probe", "n": i, "knowledge_source": True, "knowledge_folder": "k",
                  "source_path": f"f{i}.md"} for i in range(size)]
        ids = store.add([f"fact number {i} about batches" for i in range(size)], metadata=metas)
        assert len(ids) == size
        assert _raw_metadata_types(store) == {"object"}
        assert store.get([ids[-1]])[0].metadata["n"] == size - 1
        hits = store.search("fact number about batches", limit=size, threshold=0.0, filter=f"n == {size - 1}")
        assert [h.id for h in hits] == [ids[-1]]
        assert store.stats()["knowledge"] == size


def test_pg_migration_repairs_metadata_stored_as_strings(home: Path):
    """Rows written by the old COPY path (metadata a JSON string) are objects again after the migration."""
    import psycopg

    from tests.pg import pg_schema

    with pg_schema() as url:
        with memctl.open_store(None, "old", store=url, embedder=FakeEmbedder()) as store:
            ids = store.add(["one stored memory", "another stored memory"], metadata=[{"a": 1}, {"b": [2]}])
            store.delete([ids[1]])
        with psycopg.connect(url, autocommit=True) as conn:  # what the bug left behind
            conn.execute("UPDATE memctl_memories SET metadata = to_json(metadata::text)")
            conn.execute("UPDATE memctl_archive SET metadata = to_json(metadata::text)")
            assert conn.execute("SELECT json_typeof(metadata) FROM memctl_memories").fetchone()[0] == "string"
            conn.execute("DELETE FROM memctl_migrations WHERE name = 'm003_repair_metadata_strings'")
        with memctl.open_store(None, "old", store=url, embedder=FakeEmbedder()) as store:
            assert _raw_metadata_types(store) == {"object"}
            assert store.search("stored memory", threshold=0.0, filter="a == 1")[0].id == ids[0]
            assert store.archived(ids[1]).memory.metadata == {"b": [2]}
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT json_typeof(metadata) FROM memctl_archive").fetchone()[0] == "object"


def test_import_knowledge_twice_adds_nothing_on_both_backends(home: Path, backend: str, cli, tmp_path: Path):
    folder = tmp_path / "knowledge" / "main"
    folder.mkdir(parents=True)
    (folder / "facts.jsonl").write_text("".join(json.dumps({"text": f"knowledge line {i} about owls"}) + "\n"
                                                for i in range(60)), encoding="utf-8")
    counts = []
    for _ in range(3):
        result = cli("import-knowledge", str(tmp_path / "knowledge"), "--json")
        assert result.code == 0, result.err
        counts.append(cli("stats", "--json").json["stores"][0]["count"])
    assert counts[0] > 0 and counts == [counts[0]] * 3
    assert cli("stats", "--json").json["stores"][0]["knowledge"] == counts[0]
