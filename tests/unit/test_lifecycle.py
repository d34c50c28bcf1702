"""A store's life: history of every change, restore, prune, purge, backup while writing, stats, export of all.

Tests that take `backend` run on both backends (folder stores, and PostgreSQL through MEMCTL_STORE).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.pg import query


def _ago(days: float) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="milliseconds")


def _save(cli, text: str, *args: str) -> str:
    result = cli("save", text, *args, "--json")
    assert result.code == 0, result.err
    return result.json["ids"][0]


def _seed(store, rows: list[dict]) -> list[str]:
    """Insert records with chosen timestamps/metadata (what days of use would have left behind)."""
    vectors = store.embedder.embed([r["text"] for r in rows])
    ids = store.insert_records(rows, vectors, store.embedder.info)
    for rid, row in zip(ids, rows, strict=True):
        if row.get("accessed_at"):
            assert store.touch([rid], at=row["accessed_at"]) == 1
    return ids


def _sql(backend: str, home: Path, sqlite_sql: str, pg_sql: str, args: tuple = ()) -> None:
    """Change the store behind memctl's back (what an older memctl or days of use would have left)."""
    if backend == "postgres":
        query(pg_sql, args)
        return
    with sqlite3.connect(home / "default" / "memories.sqlite") as db:
        db.execute(sqlite_sql, args)


# -- history and restore -------------------------------------------------------------------------


def test_delete_history_restore_round_trip(backend, cli, home: Path):
    mid = _save(
        cli,
        "The staging database lives on host db-7",
        "--area",
        "solutions",
        "--meta",
        'tags=["db", "ops"]',
        "--meta",
        "importance=0.9",
    )
    before = cli("show", mid, "--json").json["memory"]
    assert cli("delete", mid, "--json").code == 0
    assert cli("show", mid).code == 3
    entries = cli("history", mid, "--json").json["entries"]
    assert [(e["op"], e["actor"]) for e in entries] == [("delete", "cli"), ("add", "cli")]
    assert entries[0]["old_text"] == before["text"] and entries[0]["old_metadata"] == before["metadata"]

    doc = cli("restore", mid, "--json").json
    assert doc["sources"] == {mid: "archive"} and doc["reembedded"] == []
    after = cli("show", mid, "--json").json["memory"]
    for key in ("id", "text", "area", "metadata", "created_at"):
        assert after[key] == before[key], key
    assert [e["op"] for e in cli("history", mid, "--json").json["entries"]] == ["restore", "delete", "add"]
    hits = cli("load", "staging database host", "--json").json["results"]
    assert hits[0]["id"] == mid


def test_restore_reuses_the_archived_vector_without_a_model(backend, home: Path):
    import memctl
    from memctl.embeddings import FakeEmbedder
    from memctl.lifecycle.restore import restore

    embedder = FakeEmbedder()
    with memctl.open_store(home, "default", embedder=embedder) as store:
        mid = store.add(["Vectors come back from the archive"])[0]
        store.delete([mid])
        embedder.calls.clear()
        report = restore(store, [mid])
        assert embedder.calls == [] and report.reembedded == []
        assert store.search("Vectors come back from the archive", threshold=0.9)[0].id == mid


def test_restore_refuses_existing_and_unknown_ids(backend, cli):
    mid = _save(cli, "still here")
    result = cli("restore", mid, "--json")
    assert result.code == 2 and "exists" in result.json["error"]["message"]
    result = cli("restore", "nosuchid00", "--json")
    assert result.code == 3 and "no restorable version" in result.json["error"]["message"]
    assert cli("list", "--json").json["total"] == 1


def test_restore_from_history_re_embeds_when_no_vector_was_kept(backend, cli, home: Path):
    mid = _save(cli, "A memory deleted before archiving existed", "--meta", "k=v")
    created = cli("show", mid, "--json").json["memory"]["created_at"]
    cli("delete", mid)
    _sql(backend, home, "DELETE FROM archive", "DELETE FROM memctl_archive")  # as if an older memctl had deleted it
    doc = cli("restore", mid, "--json").json
    assert doc["sources"] == {mid: "history"} and doc["reembedded"] == [mid]
    memory = cli("show", mid, "--json").json["memory"]
    assert memory["text"] == "A memory deleted before archiving existed" and memory["metadata"] == {"k": "v"}
    assert abs(datetime.fromisoformat(memory["created_at"]) - datetime.fromisoformat(created)) < timedelta(seconds=5)
    assert cli("load", "memory deleted before archiving", "--json").json["results"][0]["id"] == mid


def test_every_kind_of_change_is_recorded_with_its_actor(backend, cli, home: Path, tmp_path: Path):
    import memctl

    a = _save(cli, "first version of a fact")
    cli("update", a, "--text", "second version of a fact")
    export = tmp_path / "in.jsonl"
    export.write_text(json.dumps({"id": "imported01", "text": "an imported fact"}) + "\n")
    cli("import", export)
    with memctl.open_store(home, "default", actor="consolidate") as store:
        b, c = store.add(["merge target", "to be replaced"])
        store.update(b, text="merge target plus merged detail", op="merge")
        store.delete([c], op="replace")
    cli("delete", a)
    cli("restore", a)
    cli("prune", "--filter", "id == 'imported01'", "--yes")
    got = {(e["memory_id"], e["op"], e["actor"]) for e in cli("history", "--json").json["entries"]}
    assert {
        (a, "add", "cli"),
        (a, "update", "cli"),
        (a, "delete", "cli"),
        (a, "restore", "cli"),
        ("imported01", "import", "import"),
        ("imported01", "prune", "prune"),
        (b, "merge", "consolidate"),
        (c, "replace", "consolidate"),
    } <= got
    assert cli("restore", c, "--json").json["sources"] == {c: "archive"}  # a replaced memory comes back too
    entry = next(e for e in cli("history", a, "--json").json["entries"] if e["op"] == "update")
    assert (entry["old_text"], entry["new_text"]) == ("first version of a fact", "second version of a fact")


# -- prune ---------------------------------------------------------------------------------------


@pytest.fixture
def aged(backend, store):
    """Memories of various ages, access times, importance and sources."""
    rows = [
        {"text": "old chat about lunch", "created_at": _ago(400), "metadata": {}},
        {"text": "old but important decision", "created_at": _ago(400), "metadata": {"importance": 0.9}},
        {"text": "old chat read last week", "created_at": _ago(200), "accessed_at": _ago(7), "metadata": {}},
        {"text": "fresh chat from today", "created_at": _ago(0.1), "metadata": {"importance": 0.1}},
        {
            "text": "knowledge chunk from a manual",
            "area": "fragments",
            "created_at": _ago(120),
            "metadata": {"knowledge_source": True, "source_file": "manual.md"},
        },
        {
            "text": "recent knowledge chunk",
            "area": "fragments",
            "created_at": _ago(2),
            "metadata": {"knowledge_source": True, "importance": 0.2},
        },
        {"text": "tagged temporary note", "area": "solutions", "created_at": _ago(40), "metadata": {"tags": ["tmp"]}},
    ]
    return dict(zip([r["text"] for r in rows], _seed(store, rows), strict=True))


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ["--older-than", "30d"],
            {
                "old chat about lunch",
                "old but important decision",
                "old chat read last week",
                "knowledge chunk from a manual",
                "tagged temporary note",
            },
        ),
        (
            ["--not-accessed-for", "90d"],
            {"old chat about lunch", "old but important decision", "knowledge chunk from a manual"},
        ),
        (
            ["--not-accessed-for", "90d", "--min-importance", "0.6"],
            {"old chat about lunch", "knowledge chunk from a manual"},
        ),
        (["--min-importance", "0.3"], {"fresh chat from today", "recent knowledge chunk"}),
        (["--source", "knowledge"], {"knowledge chunk from a manual", "recent knowledge chunk"}),
        (
            ["--source", "conversation", "--older-than", "8w"],
            {"old chat about lunch", "old but important decision", "old chat read last week"},
        ),
        (["--area", "solutions", "--filter", "'tmp' in tags"], {"tagged temporary note"}),
        (
            ["--older-than", "1000h", "--area", "main"],
            {"old chat about lunch", "old but important decision", "old chat read last week"},
        ),
    ],
)
def test_prune_dry_run_lists_exactly_what_prune_removes(
    backend, cli, aged: dict[str, str], args: list[str], expected: set[str]
):
    preview = cli("prune", *args, "--json")  # no terminal and no --yes: a dry run
    assert preview.code == 0 and preview.json["dry_run"] is True, preview.err
    listed = {m["id"] for m in preview.json["pruned"]}
    assert {m["text"] for m in preview.json["pruned"]} == expected
    assert cli("list", "--json", "-n", "100").json["total"] == len(aged)  # nothing changed

    real = cli("prune", *args, "--yes", "--json").json
    assert real["dry_run"] is False and {m["id"] for m in real["pruned"]} == listed
    remaining = {m["id"] for m in cli("list", "--json", "-n", "100").json["items"]}
    assert remaining == set(aged.values()) - listed
    assert cli("stats", "--json").json["stores"][0]["archived"] == len(listed)

    restored = cli("restore", *sorted(listed), "--json").json  # every pruned memory comes back
    assert {m["id"] for m in restored["restored"]} == listed and restored["reembedded"] == []
    assert cli("list", "--json", "-n", "100").json["total"] == len(aged)


def test_load_records_access_for_not_accessed_for(backend, cli, store):
    ids = _seed(
        store,
        [
            {"text": "kubernetes cluster upgrade notes", "created_at": _ago(200)},
            {"text": "unrelated grocery list", "created_at": _ago(200)},
        ],
    )
    assert cli("stats", "--json").json["stores"][0]["never_accessed"] == 2
    hits = cli("load", "kubernetes cluster upgrade notes", "--json").json["results"]
    assert hits[0]["id"] == ids[0]
    stats = cli("stats", "--json").json["stores"][0]
    assert stats["never_accessed"] == 2 - len(hits) and stats["last_accessed"] is not None
    pruned = cli("prune", "--not-accessed-for", "90d", "--json").json["pruned"]
    assert [m["id"] for m in pruned] == [i for i in ids if i not in {h["id"] for h in hits}]


def test_touch_skips_quietly_when_a_writer_holds_the_store(store, monkeypatch):
    import sqlite3

    from memctl.store.embedded import rows as embedded_rows
    from memctl.store.layout import DB_FILE

    mid = store.add(["touch me"])[0]
    monkeypatch.setattr(embedded_rows, "TOUCH_WAIT", 0.05)
    other = sqlite3.connect(store.folder / DB_FILE, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer's open transaction
    statements: list[str] = []
    store.db.set_trace_callback(statements.append)
    assert store.touch([mid]) == 0
    store.db.set_trace_callback(None)
    # the UPDATE waited TOUCH_WAIT (50 ms), not lock_timeout; afterwards lock_timeout applies again
    lock_ms = int(float(store.config["lock_timeout"]) * 1000)
    update = next(i for i, sql in enumerate(statements) if sql.startswith("UPDATE memories SET accessed_at"))
    waits = [(i, sql) for i, sql in enumerate(statements) if sql.startswith("PRAGMA busy_timeout")]
    assert [sql for _, sql in waits] == ["PRAGMA busy_timeout = 50", f"PRAGMA busy_timeout = {lock_ms}"]
    assert waits[0][0] < update < waits[1][0] and lock_ms > 50
    other.execute("COMMIT")
    other.close()
    assert store.touch([mid]) == 1
    assert store.db.execute("SELECT accessed_at FROM memories WHERE id = ?", (mid,)).fetchone()[0]


@pytest.mark.parametrize(
    "args, words",
    [
        ([], "at least one criterion"),
        (["--older-than", "30"], "not a duration"),
        (["--older-than", "3 months"], "not a duration"),
        (["--source", "email"], "knowledge or conversation"),
        (["--area", "attic"], "unknown area"),
        (["--filter", "__import__('os')"], ""),
    ],
)
def test_prune_usage_errors(backend, cli, args: list[str], words: str):
    _save(cli, "anything")
    result = cli("prune", *args, "--yes", "--json")
    assert result.code == 2 and words in result.json["error"]["message"]
    assert cli("list", "--json").json["total"] == 1


def test_prune_purge_is_not_restorable_and_keeps_a_textless_record(backend, cli):
    mid = _save(cli, "secret to be pruned for good")
    doc = cli("prune", "--filter", f"id == '{mid}'", "--purge", "--yes", "--json").json
    assert doc["purged"] is True and doc["count"] == 1 and doc["compacted"] is True
    assert cli("restore", mid).code == 3
    entries = cli("history", mid, "--json").json["entries"]
    assert [e["op"] for e in entries] == ["prune", "add"]
    assert all(e["old_text"] is None and e["new_text"] is None for e in entries)


# -- purge ---------------------------------------------------------------------------------------


def _files_with(folder: Path, needle: bytes) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes().lower()]


def test_purge_leaves_no_trace_of_the_text(cli, home: Path):
    import memctl
    from memctl.embeddings import content_hash

    marker = "qzxmarker91735"
    texts = [f"updated away {marker} alpha", f"deleted {marker} beta", f"pruned {marker} gamma"]
    a, b, c = (_save(cli, t) for t in texts)
    keep = _save(cli, "a memory that stays, about gardening")
    cli("update", a, "--text", "updated text without the word")
    cli("delete", b)
    cli("prune", "--filter", f"id == '{c}'", "--yes")
    store_folder, cache = home / "default", home / ".cache"
    hashes = [content_hash(t).encode() for t in texts]
    # An idle reader keeps memories.sqlite-wal and -shm in place while purge runs.
    with memctl.open_store(home, "default") as reader:
        assert reader.get([keep])
        assert _files_with(store_folder, marker.encode())  # the test is not vacuous: the text is there
        assert any(_files_with(cache, h) for h in hashes)
        doc = cli("purge", "--all", "--yes", "--json").json
        assert doc["history"] >= 7 and doc["archived"] == 2 and doc["compacted"] is True
        assert doc["cache_entries"] >= 3
        files = {p.name for p in store_folder.iterdir()}
        assert {"memories.sqlite", "memories.sqlite-wal", "memories.sqlite-shm"} <= files
        assert _files_with(store_folder, marker.encode()) == []
        assert _files_with(cache, marker.encode()) == []
        assert [h for h in hashes if _files_with(cache, h)] == []
    assert _files_with(store_folder, marker.encode()) == []
    assert cli("restore", b).code == 3 and cli("restore", c).code == 3
    assert cli("load", "gardening memory that stays", "--json").json["results"][0]["id"] == keep
    assert cli("history", "--json").json["entries"] == []


def test_purge_older_than_keeps_recent_entries(backend, cli, home: Path):
    old = _save(cli, "deleted long ago")
    cli("delete", old)
    recent = _save(cli, "deleted just now")
    cli("delete", recent)
    _sql(
        backend,
        home,
        "UPDATE history SET at = ? WHERE memory_id = ?",
        "UPDATE memctl_history SET at = %s WHERE memory_id = %s",
        (_ago(40), old),
    )
    _sql(
        backend,
        home,
        "UPDATE archive SET archived_at = ? WHERE id = ?",
        "UPDATE memctl_archive SET archived_at = %s WHERE id = %s",
        (_ago(40), old),
    )
    preview = cli("purge", "--older-than", "30d", "--json").json  # no terminal: dry run
    assert preview["dry_run"] is True and (preview["history"], preview["archived"]) == (2, 1)
    done = cli("purge", "--older-than", "30d", "--yes", "--json").json
    assert done["dry_run"] is False and (done["history"], done["archived"]) == (2, 1)
    assert cli("history", old, "--json").code == 3
    assert cli("restore", recent, "--json").code == 0


def test_purge_needs_one_scope(backend, cli):
    cli("save", "a memory, so the store exists")
    assert cli("purge", "--yes").code == 2
    assert cli("purge", "--all", "--older-than", "3d", "--yes").code == 2
    assert cli("purge", "--older-than", "soon", "--yes").code == 2


# -- backup and restore-backup -------------------------------------------------------------------

WRITER = """
import sys
import memctl
root, total, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with memctl.open_store(root, "default") as store:
    for start in range(0, total, batch):
        store.add([f"memory number {i} is seq{i:05d}" for i in range(start, min(total, start + batch))])
"""


def _count(db_path: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30) as db:
            return int(db.execute("SELECT COUNT(*) FROM memories").fetchone()[0])
    except sqlite3.Error:
        return 0


def _check_backup(folder: Path) -> int:
    """The backup passes integrity_check and holds exactly the writes 0..k-1; returns k."""
    with sqlite3.connect(folder / "memories.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        seqs = sorted(int(re.search(r"seq(\d+)", t).group(1)) for (t,) in db.execute("SELECT text FROM memories"))
    assert seqs == list(range(len(seqs)))
    return len(seqs)


@pytest.mark.integration
@pytest.mark.slow
def test_backup_while_another_process_writes(cli, home: Path, tmp_path: Path):
    import memctl

    total = 5000
    env = {**os.environ, "MEMCTL_EMBEDDING_PROVIDER": "fake", "PYTHONPATH": str(REPO)}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(home), str(total), "5"], env=env, stderr=subprocess.PIPE, text=True
    )
    db_path = home / "default" / "memories.sqlite"
    taken: list[tuple[Path, int]] = []
    try:
        for n, when in enumerate((300, 1500, 3500)):
            deadline = time.monotonic() + 120
            while _count(db_path) < when and writer.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            dest = tmp_path / "backups" / f"b{n}"
            result = cli("backup", dest, "--json")
            assert result.code == 0, result.err
            taken.append((dest, result.json["count"]))
    finally:
        _, err = writer.communicate(timeout=300)
    assert writer.returncode == 0, err
    assert _count(db_path) == total
    taken.append((tmp_path / "backups" / "last", cli("backup", tmp_path / "backups" / "last", "--json").json["count"]))
    counts = []
    for dest, reported in taken:
        k = _check_backup(dest)
        assert k == reported
        counts.append(k)
        with memctl.open_store(dest.parent, dest.name) as copy:  # a backup is a store folder: it opens
            assert len(copy) == k
            hit = copy.search(f"memory number {k - 1} is seq{k - 1:05d}", limit=1)[0]
            assert hit.text == f"memory number {k - 1} is seq{k - 1:05d}" and hit.score > 0.99
            assert copy.vector_index().index.ntotal == k
    assert any(0 < k < total for k in counts), counts  # at least one was taken mid-stream
    assert counts == sorted(counts) and counts[-1] == total


@pytest.mark.smoke
def test_restore_backup_refuses_a_non_empty_store_and_swaps_atomically(cli, home: Path, tmp_path: Path):
    first = _save(cli, "the memory in the backup")
    (home / "default" / "behaviour.md").write_text("# rules\n- be brief\n")
    backup = cli("backup", tmp_path / "bk", "--json").json
    assert backup["count"] == 1 and {"memories.sqlite", "embedding.json", "behaviour.md"} <= set(backup["files"])
    assert cli("backup", tmp_path / "bk").code == 2  # an existing backup is not overwritten by accident
    cli("delete", first)
    _save(cli, "written after the backup")

    refused = cli("restore-backup", tmp_path / "bk", "--json")
    assert refused.code == 2 and "not empty" in refused.json["error"]["message"]
    doc = cli("restore-backup", tmp_path / "bk", "--force", "--json").json
    assert doc["replaced"] is True and Path(doc["kept_old"]).is_dir()
    items = cli("list", "--json").json["items"]
    assert [(m["id"], m["text"]) for m in items] == [(first, "the memory in the backup")]
    assert (home / "default" / "behaviour.md").read_text() == "# rules\n- be brief\n"
    assert not (home / "default" / "backup.json").exists()
    assert cli("load", "memory in the backup", "--json").json["results"][0]["id"] == first
    assert cli("subdirs", "--json").json["subdirs"] == [{"name": "default", "count": 1, "path": str(home / "default")}]

    fresh = cli("restore-backup", tmp_path / "bk", "-s", "projects/copy", "--json").json
    assert fresh["replaced"] is False and fresh["count"] == 1


def test_restore_backup_refuses_a_damaged_backup(backend, cli, tmp_path: Path):
    _save(cli, "some memory")
    cli("backup", tmp_path / "bk")
    (tmp_path / "bk" / "embedding.json").write_text("{}")
    result = cli("restore-backup", tmp_path / "bk", "-s", "other", "--json")
    assert result.code == 1 and "damaged" in result.json["error"]["message"]
    assert cli("restore-backup", tmp_path / "nothing", "-s", "other").code == 2


def test_backup_without_a_usable_index_rebuilds_on_open(backend, cli, home: Path, tmp_path: Path):
    import json

    import memctl

    ids = [_save(cli, f"note {i} about topic {i}") for i in range(5)]
    cli("backup", tmp_path / "bk")
    manifest = json.loads((tmp_path / "bk" / "backup.json").read_text())
    for name in ("index.faiss", "index.faiss.sha256"):
        (tmp_path / "bk" / name).unlink(missing_ok=True)
        manifest["files"].pop(name, None)
    (tmp_path / "bk" / "backup.json").write_text(json.dumps(manifest))
    assert cli("restore-backup", tmp_path / "bk", "-s", "again").code == 0
    with memctl.open_store(home, "again") as store:
        assert store.search("note 3 about topic 3", limit=1)[0].id == ids[3]


# -- stats and export of every subdir ------------------------------------------------------------


def test_stats_json(backend, cli, home: Path):
    _save(cli, "a main memory")
    _save(cli, "a fragment", "--area", "fragments")
    _save(cli, "a knowledge chunk", "--area", "fragments", "--meta", "knowledge_source=true")
    gone = _save(cli, "soon deleted")
    cli("delete", gone)
    _save(cli, "in another store", "-s", "projects/site")
    doc = cli("stats", "--json").json
    assert set(doc) == {"root", "stores", "failed"} and len(doc["stores"]) == 1
    s = doc["stores"][0]
    assert set(s) == {
        "subdir",
        "path",
        "count",
        "areas",
        "knowledge",
        "conversation",
        "oldest",
        "newest",
        "never_accessed",
        "last_accessed",
        "archived",
        "history",
        "pending",
        "bytes",
        "model",
    }
    assert (s["count"], s["knowledge"], s["conversation"], s["archived"], s["pending"]) == (3, 1, 2, 1, 0)
    assert s["areas"]["fragments"] == {"count": 2, "knowledge": 1, "conversation": 1}
    assert s["areas"]["solutions"]["count"] == 0 and s["never_accessed"] == 3
    assert s["model"]["provider"] == "fake" and s["bytes"] > 0 and s["oldest"] <= s["newest"]
    every = cli("stats", "--all-subdirs", "--json").json["stores"]
    assert [(x["subdir"], x["count"]) for x in every] == [("default", 3), ("projects/site", 1)]
    assert cli("stats").code == 0


def test_export_all_subdirs(backend, cli, tmp_path: Path):
    _save(cli, "default memory")
    _save(cli, "agent memory one", "-s", "agent1")
    _save(cli, "agent memory two", "-s", "agent1")
    _save(cli, "project memory", "-s", "projects/web")
    out = tmp_path / "exports"
    doc = cli("export", "--all-subdirs", "-o", out, "--vectors", "--json").json
    assert [(s["subdir"], s["count"]) for s in doc["subdirs"]] == [("agent1", 2), ("default", 1), ("projects/web", 1)]
    assert (out / "projects" / "web.jsonl").is_file()
    lines = (out / "agent1.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["memctl_export"] == 1 and len(lines) == 3
    assert cli("import", out / "agent1.jsonl", "-s", "copy", "--json").json["imported"] == 2
    assert cli("export", "--all-subdirs").code == 2  # needs a folder


def test_json_documents_of_lifecycle_commands(backend, cli, tmp_path: Path):
    mid = _save(cli, "contract memory")
    cli("delete", mid)
    contracts = {
        ("restore", mid): {"subdir", "restored", "sources", "reembedded"},
        ("prune", "--older-than", "1d"): {"subdir", "dry_run", "purged", "criteria", "count", "compacted", "pruned"},
        ("purge", "--older-than", "30d"): {
            "subdir",
            "dry_run",
            "cutoff",
            "history",
            "archived",
            "cache_entries",
            "compacted",
            "bytes_before",
            "bytes_after",
        },
        ("backup", str(tmp_path / "b")): {"subdir", "path", "count", "bytes", "index", "files", "replaced"},
        ("restore-backup", str(tmp_path / "b"), "-s", "r"): {
            "subdir",
            "source",
            "path",
            "count",
            "replaced",
            "kept_old",
        },
        ("stats",): {"root", "stores", "failed"},
        ("export", "--all-subdirs", "-o", str(tmp_path / "x")): {"root", "path", "vectors", "subdirs", "failed"},
    }
    for args, keys in contracts.items():
        result = cli(*args, "--json")
        assert result.code == 0, (args, result.err)
        assert set(result.json) == keys, args
        assert len(result.out.strip().splitlines()) == 1


def test_prune_asks_on_a_terminal(backend, cli, home: Path):
    from tests.integration.test_tty import _run_on_tty

    mid = _save(cli, "a memory a terminal user is asked about")
    code, out = _run_on_tty(["prune", "--filter", f"id == '{mid}'"], "n", home)
    assert "Prune this memory?" in out and code == 1 and mid in out and "aborted" in out
    assert cli("show", mid).code == 0
    code, out = _run_on_tty(["prune", "--filter", f"id == '{mid}'"], "y", home)
    assert code == 0, out
    assert cli("show", mid).code == 3 and cli("restore", mid).code == 0
