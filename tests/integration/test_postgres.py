"""The PostgreSQL backend: subdirs, migrations, concurrent writers, the CLI, migrate, bad connections."""

from __future__ import annotations

import multiprocessing
import os
import socket
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path

import pytest

import memctl
from memctl.embeddings import FakeEmbedder
from memctl.store.pg_schema import MIGRATIONS as PG_MIGRATIONS
from tests.conftest import run_memctl
from tests.pg import PG_URL, pg_schema, require_pg


@pytest.fixture
def pg(monkeypatch: pytest.MonkeyPatch, isolated_env: Path):
    """A URL with a schema of its own; MEMCTL_STORE is left unset (tests pass --store / store=)."""
    with pg_schema() as url:
        yield url


def open_pg(url: str, subdir: str = "default", **kwargs):
    return memctl.open_store(None, subdir, store=url, embedder=kwargs.pop("embedder", FakeEmbedder()), **kwargs)


def test_subdirs_share_a_database_but_not_memories(pg: str):
    with open_pg(pg, "agent1") as one, open_pg(pg, "projects/site") as two:
        emb = FakeEmbedder()
        one.insert_records([{"id": "same-id", "text": "agent one knows about owls"}], emb.embed(["owls"]), emb.info)
        two.insert_records([{"id": "same-id", "text": "project knows about bats"}], emb.embed(["bats"]), emb.info)
        assert len(one) == 1 and len(two) == 1
        assert one.get_one("same-id").text.startswith("agent one")
        assert [h.text for h in two.search("owls", threshold=0.0)] == ["project knows about bats"]
        assert sorted(name for name, _ in one.subdirs()) == ["agent1", "projects/site"]
        with pytest.raises(memctl.UsageError, match="already exists"):
            one.insert_records([{"id": "same-id", "text": "again"}], emb.embed(["again"]), emb.info)


def test_schema_migrated_once_by_racing_first_users(pg: str):
    import psycopg

    errors: list[BaseException] = []

    def first_use() -> None:
        try:
            with open_pg(pg, "race") as store:
                store.add(["hello from a first user"])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=first_use) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with psycopg.connect(pg, autocommit=True) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM memctl_migrations ORDER BY name")] == sorted(
            name for name, _ in PG_MIGRATIONS
        )
        indexes = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")}
    assert {"memctl_memories_hnsw_384", "memctl_memories_tsv", "memctl_memories_subdir_id"} <= indexes
    with open_pg(pg, "race") as store:
        assert len(store) == 4


def _hnsw_indexes(store) -> list[str]:
    rows = store.conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname LIKE '%%hnsw%%'"
    ).fetchall()
    return [r[0] for r in rows]


def test_bulk_builds_the_hnsw_index_after_the_inserts(pg: str, monkeypatch: pytest.MonkeyPatch):
    """Inside bulk() the COPYs do not maintain an HNSW graph: the index is built once at the end (with
    maintenance_work_mem raised for the build only); outside bulk() the first insert creates it as before."""
    from memctl.store.postgres import search as pg_search  # where _dense_pairs reads EXACT_MAX

    monkeypatch.setattr(pg_search, "EXACT_MAX", 50)
    emb = FakeEmbedder()
    texts = [f"note {i} about service {i % 11} in zone {i % 5}" for i in range(240)]
    vectors = emb.embed(texts)
    statements: list[str] = []
    with open_pg(pg, "loaded") as store:
        store.conn.execute("SET maintenance_work_mem = '1MB'")  # a server setting below what the build wants
        real_execute = store._execute

        def spy(sql, args=None):
            statements.append(sql)
            return real_execute(sql, args)

        monkeypatch.setattr(store, "_execute", spy)
        with store.bulk():
            for start in range(0, 240, 80):  # COPY batches (50 rows or more)
                batch = [{"text": t} for t in texts[start : start + 80]]
                store.insert_records(batch, vectors[start : start + 80], emb.info)
                assert _hnsw_indexes(store) == []
            assert len(store) == 240
            assert len(store.search("service 3 zone 2", limit=5, threshold=0.0, mode="dense")) == 5  # no index: exact
            assert _hnsw_indexes(store) == []
        assert _hnsw_indexes(store) == ["memctl_memories_hnsw_384"]
        assert [sql for sql in statements if sql.startswith("SET LOCAL maintenance_work_mem")] == [
            "SET LOCAL maintenance_work_mem = '64MB'"
        ]
        assert store.conn.execute("SHOW maintenance_work_mem").fetchone()[0] == "1MB"  # SET LOCAL: the build only
        assert store.vector_count() == 240
        hits = store.search("service 3 zone 2", limit=10, threshold=0.0, mode="dense")
        assert len(hits) == 10
    with open_pg(pg, "second") as other:  # the index exists now: a bulk load keeps it up to date
        with other.bulk():
            other.insert_records([{"text": t} for t in texts[:60]], vectors[:60], emb.info)
        assert other.vector_count() == 60 and _hnsw_indexes(other) == ["memctl_memories_hnsw_384"]


def test_failed_bulk_leaves_the_index_to_the_next_search(pg: str, monkeypatch: pytest.MonkeyPatch):
    from memctl.store.postgres import search as pg_search  # where _dense_pairs reads EXACT_MAX

    monkeypatch.setattr(pg_search, "EXACT_MAX", 50)
    emb = FakeEmbedder()
    texts = [f"entry {i} on topic {i % 9}" for i in range(120)]
    with open_pg(pg) as store:
        with pytest.raises(KeyboardInterrupt), store.bulk():
            store.insert_records([{"text": t} for t in texts], emb.embed(texts), emb.info)
            raise KeyboardInterrupt
        assert _hnsw_indexes(store) == [] and len(store) == 120  # what was loaded is kept
        assert len(store.search("topic 4", limit=10, threshold=0.0, mode="dense")) == 10
        assert _hnsw_indexes(store) == ["memctl_memories_hnsw_384"]


def test_exact_or_hnsw_decided_by_a_bounded_count(pg: str):
    emb = FakeEmbedder()
    texts = [f"row {i}" for i in range(60)]
    with open_pg(pg) as store, open_pg(pg, "other") as other:
        store.insert_records([{"text": t} for t in texts], emb.embed(texts), emb.info)
        other.insert_records([{"text": t} for t in texts[:5]], emb.embed(texts[:5]), emb.info)
        assert [store._at_most(n) for n in (0, 59, 60, 1000)] == [False, False, True, True]
        assert [other._at_most(n) for n in (4, 5)] == [False, True]


def _true_count(url: str, subdir: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute("SELECT count(*) FROM memctl_memories WHERE subdir = %s", (subdir,)).fetchone()[0])


def test_a_search_sees_the_count_another_writer_just_changed(pg: str, monkeypatch: pytest.MonkeyPatch):
    """The store's size comes from memctl_counts (no count of its rows per search): exact after every kind of
    write by another store object, by plain SQL on another connection, and for the exact-or-HNSW choice."""
    import psycopg

    from memctl.store.postgres import search as pg_search  # where _dense_pairs reads EXACT_MAX

    monkeypatch.setattr(pg_search, "EXACT_MAX", 60)
    emb = FakeEmbedder()
    texts = [f"row {i} about topic {i % 7}" for i in range(58)]
    with open_pg(pg) as server, open_pg(pg) as writer, open_pg(pg, "other") as other:
        writer.insert_records([{"text": t} for t in texts], emb.embed(texts), emb.info)  # one COPY (>= 50 rows)
        other.add(["a memory of another store"])
        assert len(server) == 58 and server._at_most(60)
        generation = server._generation()
        assert len(server.search("topic 3", limit=100, threshold=0.0)) == 58
        writer.add(["row 58 about topic 3", "row 59 about topic 3", "row 60 about topic 3"])  # a few INSERTs
        assert server._generation() != generation
        assert len(server) == 61 and not server._at_most(60)
        assert len(server.search("topic 3", limit=100, threshold=0.0, mode="dense")) == 61  # through HNSW now
        with psycopg.connect(pg, autocommit=True) as raw:  # a writer that is not memctl: the triggers count it
            raw.execute("DELETE FROM memctl_memories WHERE subdir = 'default' AND text LIKE 'row 5%%'")
            assert len(server) == 61 - 11 == _true_count(pg, "default")
            raw.execute(
                "UPDATE memctl_memories SET subdir = 'other' WHERE subdir = 'default' AND text = 'row 1 about topic 1'"
            )
            assert (len(server), len(other)) == (49, 2)
        victims = [h.id for h in server.search("topic 2", limit=3, threshold=0.0, mode="keyword")]
        writer.delete(victims)
        assert len(server) == 46 == _true_count(pg, "default")
        with pytest.raises(RuntimeError), writer.transaction():  # rolled back: counted neither way
            writer.add(["row 99 about topic 9"])
            assert len(writer) == 47 and len(server) == 46
            raise RuntimeError
        assert len(server) == 46 and len(writer) == 46
        with writer.transaction():
            writer.clear()
        assert len(server) == 0 and server.search("topic 3", threshold=0.0) == []
        assert sorted(server.subdirs()) == [("other", 2)]  # clear() dropped its model record too


def test_access_times_leave_the_generation_and_edits_move_it(pg: str):
    emb = FakeEmbedder()
    with open_pg(pg) as server, open_pg(pg) as writer:
        [first, _] = writer.insert_records(
            [{"text": "alpha memory"}, {"text": "beta memory"}], emb.embed(["alpha", "beta"]), emb.info
        )
        generation = server._generation()
        assert writer.touch([first]) == 1  # `load` marking what it returned
        assert server._generation() == generation
        writer.update(first, metadata={"speaker": "Gina"})
        moved = server._generation()
        assert moved != generation
        writer.update(first, area="solutions")
        assert server._generation() != moved
        with server.transaction():  # inside a transaction nothing is kept between searches
            assert server._generation() is None


def test_concurrent_writers_of_one_store_do_not_wait_for_the_counts(pg: str):
    """Each server process counts in a row of its own: a transaction holding uncommitted inserts keeps no other
    writer of the store waiting (one counter row per store would, until it commits). `one` commits only after
    `two` is done, so a wait of `two` could only end by its lock_timeout (1 s): a LockTimeoutError here."""
    emb = FakeEmbedder()
    with open_pg(pg, overrides={"lock_timeout": 1}) as one, open_pg(pg, overrides={"lock_timeout": 1}) as two:
        one.add(["made before: the HNSW index exists (its creation waits for open writers)"])
        with one.transaction():
            one.add(["written in a long transaction"])
            two.insert_records([{"text": "written beside it"}], emb.embed(["beside"]), emb.info)
            two.delete([two.search("beside", limit=1, threshold=0.0, mode="keyword")[0].id])
            assert len(two) == 1 and len(one) == 2
        assert len(two) == 2 == _true_count(pg, "default")


def test_counter_rows_of_many_writers_are_folded(pg: str):
    """Every server process that writes to a store has a counter row; readers fold those no transaction holds
    into one (keeping sums and generation), so a store's rows stay few."""
    import psycopg

    from memctl.store.postgres import connection  # where _counts reads COUNT_SLOTS_MAX

    emb = FakeEmbedder()
    many = connection.COUNT_SLOTS_MAX + 4
    for i in range(many):  # each store object is a connection (a server process) of its own
        with open_pg(pg) as writer:
            writer.insert_records([{"text": f"memory {i}"}], emb.embed([f"memory {i}"]), emb.info)
    with psycopg.connect(pg, autocommit=True) as raw:

        def slots() -> int:
            return raw.execute("SELECT count(*) FROM memctl_counts WHERE subdir = 'default'").fetchone()[0]

        assert slots() <= connection.COUNT_SLOTS_MAX + 1
        with open_pg(pg) as reader, open_pg(pg) as holder:
            holder.add(["committed: the holder's counter row exists"])
            holder.conn.execute("BEGIN")  # a transaction that holds its counter row below
            holder.conn.execute(
                "INSERT INTO memctl_memories (subdir, id, text, area, created_at, updated_at, vector, content_hash)"
                " SELECT subdir, 'held', 'held by an open transaction', area, created_at, updated_at, vector,"
                " content_hash FROM memctl_memories WHERE subdir = 'default' LIMIT 1"
            )
            assert len(reader) == many + 1
            generation = reader._generation()
            raw.execute(  # rows as idle writers leave them (no memories, no changes: the sums stay)
                "INSERT INTO memctl_counts (subdir, slot, memories, changes)"
                " SELECT 'default', -g, 0, 0 FROM generate_series(1, %s) AS g",
                (connection.COUNT_SLOTS_MAX,),
            )
            assert slots() > connection.COUNT_SLOTS_MAX
            assert reader._generation() == generation  # counted (and folded, the held row skipped, not waited for)
            assert slots() == 2 and len(reader) == many + 1
            holder.conn.execute("COMMIT")
            assert len(reader) == many + 2 == _true_count(pg, "default")
            assert reader._generation() != generation


def test_unbulked_insert_creates_the_index_first(pg: str):
    emb = FakeEmbedder()
    with open_pg(pg) as store:
        store.insert_records([{"text": "one memory"}], emb.embed(["one memory"]), emb.info)
        assert _hnsw_indexes(store) == ["memctl_memories_hnsw_384"]


def test_hnsw_path_with_filters_and_other_subdirs(pg: str, monkeypatch: pytest.MonkeyPatch):
    """Past EXACT_MAX the HNSW index answers; iterative scans keep k rows despite other subdirs' rows."""
    import numpy as np

    from memctl.store.postgres import search as pg_search  # where _dense_pairs reads EXACT_MAX

    monkeypatch.setattr(pg_search, "EXACT_MAX", 100)
    monkeypatch.setattr(pg_search, "EXACT_FILTERED_MAX", 10)
    emb = FakeEmbedder()
    texts = [f"ticket {i} about service {i % 13} in zone {i % 7}" for i in range(600)]
    vectors = emb.embed(texts)
    with open_pg(pg, "noise") as noise:
        noise.insert_records([{"text": t} for t in texts], vectors, emb.info)
    with open_pg(pg, "big") as store:
        store.insert_records(
            [{"id": f"t{i}", "text": t, "area": "solutions" if i % 20 == 0 else "main"} for i, t in enumerate(texts)],
            vectors,
            emb.info,
        )
        store.conn.execute("ANALYZE memctl_memories")
        store.conn.execute("SET enable_seqscan = off")  # so small a table is cheaper to sort: show the index fits
        store.conn.execute("SET enable_bitmapscan = off")
        plan = store.conn.execute(
            "EXPLAIN SELECT seq FROM memctl_memories WHERE subdir = 'big' AND vector_dims(vector) = 384"
            " ORDER BY vector::vector(384) <#> %s::vector(384) LIMIT 10",
            (vectors[0],),
        ).fetchall()
        assert "memctl_memories_hnsw_384" in " ".join(r[0] for r in plan)
        store.conn.execute("RESET ALL")
        store.conn.execute("SET hnsw.iterative_scan = strict_order")
        q = emb.embed(["service 5 zone 3"])[0]
        exact = [f"t{i}" for i in np.argsort(-(vectors @ q))[:10]]
        hits = store.search("service 5 zone 3", limit=10, threshold=0.0, mode="dense")
        assert len(hits) == 10 and len(set([h.id for h in hits]) & set(exact)) >= 8  # approximate, recall >= 0.8
        solutions = store.search("service 5 zone 3", limit=30, threshold=0.0, mode="dense", area="solutions")
        assert len(solutions) == 30 and all(h.area == "solutions" for h in solutions)


def _saver(url: str, worker: int, count: int) -> None:
    with open_pg(url, "crowd", actor=f"worker{worker}") as store:
        for i in range(count):
            store.add([f"worker {worker} saves memory number {i}"], metadata=[{"worker": worker, "i": i}])


@pytest.mark.slow
def test_eight_processes_saving_concurrently_lose_nothing(pg: str):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_saver, args=(pg, w, 250)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    assert [p.exitcode for p in procs] == [0] * 8
    with open_pg(pg, "crowd") as store:
        assert len(store) == 2000
        seen = {(m.metadata["worker"], m.metadata["i"]) for m, _ in store.iter_all()}
        assert seen == {(w, i) for w in range(8) for i in range(250)}
        assert len({m.id for m, _ in store.iter_all()}) == 2000
        assert len([e for e in store.history() if e.op == "add"]) == 2000


def test_cli_commands_on_postgres(pg: str, cli, home: Path, tmp_path: Path):
    def run(*args: str, input: str | None = None):
        return cli("--store", pg, "-s", "agent1", *args, input=input)

    first = run("save", "The deploy target is Kubernetes", "--meta", 'tags=["ops"]', "--json").json["ids"][0]
    second = run("save", "User prefers dark mode in every editor").out.strip()
    assert run("load", "deploy target kubernetes", "--json").json["results"][0]["id"] == first
    assert cli("-s", "agent1", "load", "deploy kubernetes", "--store", pg, "--json").json["count"] >= 1  # after
    assert run("list", "--json").json["total"] == 2
    assert run("show", first, "--json").json["memory"]["metadata"] == {"tags": ["ops"]}
    assert run("update", first, "--text", "The deploy target is Nomad", "--json").json["reembedded"] is True
    assert [e["op"] for e in run("history", first, "--json").json["entries"]] == ["update", "add"]
    exported = tmp_path / "out.jsonl"
    assert run("export", "-o", str(exported), "--vectors", "--json").json["count"] == 2
    assert cli("--store", pg, "-s", "copy", "import", str(exported), "--json").json["imported"] == 2
    assert run("reindex", "--json").json["count"] == 2
    recalled = run("recall", "which editor theme", "-t", "0", "--format", "json")
    assert recalled.code == 0 and second in [m["id"] for m in recalled.json["memories"]], recalled.err
    stats = run("stats", "--json").json["stores"][0]
    assert stats["count"] == 2 and "password" not in stats["path"] and stats["path"].endswith("#agent1")
    assert {s["name"] for s in cli("--store", pg, "subdirs", "--json").json["subdirs"]} == {"agent1", "copy"}
    assert run("prune", "--older-than", "0h", "--area", "fragments", "--json").json["count"] == 0
    assert run("forget", "dark mode editor", "--threshold", "0.8", "--yes", "--json").json["count"] == 1
    deleted = run("delete", first, "--json").json
    assert deleted["deleted"] == [first] and run("show", first).code == 3
    assert second not in {m["id"] for m in run("list", "--json").json["items"]}
    assert run("restore", first, "--json").json["restored"][0]["id"] == first
    assert run("behaviour", "show", "--json").json["default"] is True
    knowledge = tmp_path / "kb"
    knowledge.mkdir()
    (knowledge / "a.md").write_text("The runbook says: restart the queue worker first.")
    assert run("import-knowledge", str(knowledge), "--json").json["summary"]["new"] == 1
    assert run("backup", str(tmp_path / "b"), "--json").json["count"] == 2
    assert run("purge", "--all", "--yes", "--json").json["history"] > 0
    written = run("export", "--all-subdirs", "-o", str(tmp_path / "all"), "--json").json["subdirs"]
    assert [(w["subdir"], w["count"]) for w in written] == [("agent1", 2), ("copy", 2)]
    # nothing of the PostgreSQL store went to the local root (only the embedding cache, shared by all backends)
    assert [p.name for p in home.iterdir()] == [".cache"]


def test_migrate_embedded_to_postgres_and_back(pg: str, cli, home: Path, tmp_path: Path):
    import numpy as np

    emb = FakeEmbedder()
    with memctl.open_store(home, "src", embedder=emb) as src:
        a, b = src.add(["cats purr when content", "dogs bark at the mail carrier"], metadata=[{"n": 1}, {"n": 2}])
        [merged] = src.add(["pets make noises"], derived_from={"consolidated_from": [a, b]})
        src.update(a, text="cats purr and knead when content")
        src.delete([b], cascade=False)
        before = {m.id: (m, blob) for m, blob in src.iter_all(with_vectors=True)}
        history = [(e.memory_id, e.op, e.at, e.old_text, e.new_text) for e in src.history()]
    to_pg = cli("-s", "src", "migrate", "--to", pg, "--to-subdir", "moved", "--json")
    assert to_pg.code == 0, to_pg.err
    assert to_pg.json["count"] == 2 and to_pg.json["history"] == len(history) and to_pg.json["links"] == 2
    password = pg.split("://", 1)[1].split("@", 1)[0].partition(":")[2]
    assert to_pg.json["to"].endswith("#moved") and (not password or password not in to_pg.json["to"])
    with open_pg(pg, "moved", embedder=emb) as moved:
        after = {m.id: (m, blob) for m, blob in moved.iter_all(with_vectors=True)}
        assert {i: m for i, (m, _) in after.items()} == {i: m for i, (m, _) in before.items()}
        for i, (_, blob) in before.items():
            assert np.array_equal(np.frombuffer(after[i][1], np.float32), np.frombuffer(blob, np.float32))
        copied = [(e.memory_id, e.op, e.at, e.old_text, e.new_text) for e in moved.history() if e.op != "migrate"]
        assert copied == history
        assert moved.derived_ids([a]) == [merged]
        assert moved.search("cats purr knead", threshold=0.0)[0].id == a
    again = cli("-s", "src", "migrate", "--to", pg, "--to-subdir", "moved")
    assert again.code == 2 and "already holds 2 memories" in again.err
    back = cli("--store", pg, "-s", "moved", "migrate", "--to", str(tmp_path / "root2"), "--json")
    assert back.code == 0, back.err
    with memctl.open_store(tmp_path / "root2", "moved", embedder=emb, store="embedded") as local:
        assert {m.id: m for m, _ in local.iter_all()} == {i: m for i, (m, _) in before.items()}
        assert local.search("cats purr knead", threshold=0.0)[0].id == a
        assert local.derived_ids([b]) == [merged]


def test_wrong_password_fails_fast_and_writes_nothing(tmp_path: Path):
    url = require_pg()
    bad = url.replace("://postgres:", "://postgres:not-the-password-", 1)
    assert bad != url
    home = tmp_path / "never"
    result = run_memctl("--store", bad, "save", "a secret memory", env={"MEMCTL_HOME": str(home)}, timeout=60)
    assert result.code == 1, result
    assert "cannot connect to PostgreSQL" in result.err and "password authentication failed" in result.err
    assert "not-the-password" not in result.err
    assert not home.exists()


def test_unresponsive_host_times_out_quickly(tmp_path: Path):
    """A server that accepts TCP but never answers (a blackholed host, on loopback): exit 1 once the connect
    timeout (CONNECT_TIMEOUT, a few seconds) is over."""
    from memctl.store.postgres import CONNECT_TIMEOUT

    assert CONNECT_TIMEOUT <= 5
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    home = tmp_path / "never"
    try:
        result = run_memctl(
            "--json",
            "--store",
            f"postgresql://memctl:pw@127.0.0.1:{port}/memctl",
            "list",
            env={"MEMCTL_HOME": str(home)},
            timeout=60,
        )
    finally:
        listener.close()
    assert result.code == 1, result
    assert result.json["error"]["type"] == "StoreError" and "timeout" in result.json["error"]["message"]
    assert not home.exists()


def test_bad_store_value_is_a_usage_error(cli, home: Path):
    result = cli("--store", "mysql://x@y/z", "list")
    assert result.code == 2 and "postgresql://" in result.err
    assert not home.exists()


def test_embedded_path_never_imports_psycopg(home: Path):
    code = (
        "import sys, memctl\n"
        "from memctl.embeddings import FakeEmbedder\n"
        f"with memctl.open_store({str(home)!r}, embedder=FakeEmbedder()) as s:\n"
        "    s.add(['x y z']); s.search('x', threshold=0.0)\n"
        "assert not any(m.startswith(('psycopg', 'pgvector')) for m in sys.modules), 'psycopg imported'\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MEMCTL_STORE"}
    import subprocess

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_store_url_from_config_and_env(pg: str, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    config = tmp_path / "user.yaml"
    config.write_text(f"store_url: '{pg}'\n", encoding="utf-8")
    monkeypatch.setenv("MEMCTL_CONFIG", str(config))
    with memctl.open_store(home, "cfg", embedder=FakeEmbedder()) as store:
        assert type(store).__name__ == "PostgresStore"
    with memctl.open_store(home, "cfg", embedder=FakeEmbedder(), store="embedded") as store:
        assert type(store).__name__ == "EmbeddedStore"
    monkeypatch.setenv("MEMCTL_STORE", "embedded")
    with memctl.open_store(home, "cfg2", embedder=FakeEmbedder()) as store:
        assert type(store).__name__ == "EmbeddedStore"


def test_ci_cannot_skip_postgres(monkeypatch: pytest.MonkeyPatch):
    from tests import pg as pg_module

    monkeypatch.setattr(pg_module, "PG_URL", None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="MEMCTL_TEST_PG_URL"):
        pg_module.require_pg()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        pg_module.require_pg()


assert PG_URL is None or PG_URL.startswith("postgresql://")


def test_migrating_a_database_of_an_older_memctl(pg: str):
    """A database with only m001 (memctl before behaviour and knowledge lived in PostgreSQL) gets m002 on first use."""
    import psycopg

    from memctl.store import pg_schema

    old = pg_schema.MIGRATIONS[:1]
    with psycopg.connect(pg, autocommit=True) as conn:
        real = pg_schema.MIGRATIONS
        pg_schema.MIGRATIONS = old
        try:
            assert pg_schema.apply_pg_migrations(conn) == ["m001_initial"]
        finally:
            pg_schema.MIGRATIONS = real
    with open_pg(pg, "old") as store:
        store.add(["saved before the upgrade finished"])
        store.write_behaviour("- be brief\n")
        assert store.read_behaviour() == "- be brief\n"
    with psycopg.connect(pg, autocommit=True) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM memctl_migrations ORDER BY name")] == sorted(
            name for name, _ in PG_MIGRATIONS
        )


def test_range_postings_are_back_filled_and_kept(pg: str):
    """A database at m005 (filters in SQL, ranges by scan) gets m006_filter_ranges on first use: the postings of
    the stored memories are back-filled, range filters are answered from them, and writes keep them."""
    import psycopg

    from memctl.store import pg_schema

    def postings(conn) -> list[tuple]:
        return conn.execute(
            "SELECT m.id, r.key, r.num, r.str FROM memctl_meta_ranges AS r JOIN memctl_memories AS m USING (seq)"
            " ORDER BY m.id, r.key"
        ).fetchall()

    names = [name for name, _ in pg_schema.MIGRATIONS]
    real = pg_schema.MIGRATIONS
    pg_schema.MIGRATIONS = real[: names.index("m006_filter_ranges")]
    try:
        with open_pg(pg, "old") as store:
            emb = FakeEmbedder()
            metas = [{"score": 99.5, "tag": "a"}, {"score": 3, "ok": True, "list": [1]}, {"score": "x" * 120}]
            records = [{"id": f"r{i}", "text": f"memory {i}", "metadata": m} for i, m in enumerate(metas)]
            store.insert_records(records, emb.embed([r["text"] for r in records]), emb.info)
    finally:
        pg_schema.MIGRATIONS = real
    with open_pg(pg, "old") as store:
        assert store.matching_ids("score >= 99.0") == {"r0"}
        assert store.matching_ids("score < 99.0") == {"r1"}
        assert store.matching_ids(f"score > '{'x' * 110}'") == {"r2"}
        with psycopg.connect(pg, autocommit=True) as conn:
            assert postings(conn) == [
                ("r0", "score", Decimal("99.5"), None),
                ("r0", "tag", None, "a"),
                ("r1", "ok", 1, None),
                ("r1", "score", 3, None),
                ("r2", "score", None, "x" * 100),
            ]
        store.update("r0", metadata={"score": 1}, replace_metadata=True)
        store.touch(["r1"])  # an UPDATE that leaves the metadata alone
        store.delete(["r2"])
        assert store.matching_ids("score >= 99.0") == set()
        with psycopg.connect(pg, autocommit=True) as conn:
            assert postings(conn) == [("r0", "score", 1, None), ("r1", "ok", 1, None), ("r1", "score", 3, None)]


def test_store_counts_are_back_filled_on_upgrade(pg: str):
    """A database at m006 gets m007_store_counts on first use: the memories stored before are counted per
    store, and writes after the upgrade keep the counts exact."""
    import psycopg

    from memctl.store import pg_schema

    names = [name for name, _ in pg_schema.MIGRATIONS]
    real = pg_schema.MIGRATIONS
    pg_schema.MIGRATIONS = real[: names.index("m007_store_counts")]
    emb = FakeEmbedder()
    texts = [f"old memory {i}" for i in range(70)]
    try:
        with open_pg(pg, "a") as a, open_pg(pg, "b") as b:
            a.insert_records([{"text": t} for t in texts], emb.embed(texts), emb.info)
            b.add(["one in b", "two in b"])
            a.delete([a.list(limit=1)[0][0].id])
    finally:
        pg_schema.MIGRATIONS = real
    with open_pg(pg, "a") as a, open_pg(pg, "b", create=False) as b:
        assert (len(a), len(b)) == (69, 2)
        assert sorted(a.subdirs()) == [("a", 69), ("b", 2)]
        b.add(["three in b"])
        a.delete([a.list(limit=1)[0][0].id])
        assert (len(a), len(b)) == (68, 3) == (_true_count(pg, "a"), _true_count(pg, "b"))
    with psycopg.connect(pg, autocommit=True) as conn:
        assert "m007_store_counts" in {r[0] for r in conn.execute("SELECT name FROM memctl_migrations")}


def _rows_holding(url: str, needle: str) -> list[str]:
    """Every text or JSON column of memctl's tables that holds `needle` somewhere, as table.column."""
    import psycopg

    found = []
    with psycopg.connect(url, autocommit=True) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND table_name LIKE 'memctl%%' AND data_type IN ('text', 'json', 'jsonb', 'tsvector')"
        ).fetchall()
        for table, column in columns:
            if conn.execute(
                f'SELECT count(*) FROM {table} WHERE "{column}"::text ILIKE %s', (f"%{needle}%",)
            ).fetchone()[0]:
                found.append(f"{table}.{column}")
    return found


def test_purge_on_postgres_leaves_no_row_with_the_text(pg: str, cli, home: Path):
    from memctl.embeddings import content_hash

    def run(*args: str):
        return cli("--store", pg, *args)

    marker = "qzxmarker91735"
    texts = [f"updated away {marker} alpha", f"deleted {marker} beta", f"pruned {marker} gamma"]
    a, b, c = (run("save", t, "--json").json["ids"][0] for t in texts)
    keep = run("save", "a memory that stays, about gardening", "--json").json["ids"][0]
    run("update", a, "--text", "updated text without the word")
    run("delete", b)
    run("prune", "--filter", f"id == '{c}'", "--yes")
    assert set(_rows_holding(pg, marker)) == {
        "memctl_history.old_text",
        "memctl_history.new_text",
        "memctl_archive.text",
    }  # not vacuous
    cache = home / ".cache"
    hashes = [content_hash(t).encode() for t in texts]
    assert any(h in p.read_bytes() for p in cache.rglob("*") if p.is_file() for h in hashes)
    doc = run("purge", "--all", "--yes", "--json").json
    assert doc["history"] >= 7 and doc["archived"] == 2 and doc["compacted"] is True
    assert doc["cache_entries"] >= 3 and doc["bytes_after"] < doc["bytes_before"]
    assert _rows_holding(pg, marker) == []
    assert not any(h in p.read_bytes() for p in cache.rglob("*") if p.is_file() for h in hashes)
    assert run("restore", b).code == 3 and run("restore", c).code == 3
    assert run("history", "--json").json["entries"] == []
    assert run("load", "gardening memory that stays", "--json").json["results"][0]["id"] == keep


def _everything(store) -> dict:
    """All a store holds, as comparable data (the rows, history, links, archive, rules, knowledge state)."""
    return {
        "rows": [(m, blob, at) for m, blob, at in store.iter_rows()],
        "history": [(e.memory_id, e.op, e.actor, e.at, e.old_text, e.new_text) for e in store.history()],
        "links": store.links(),
        "archive": list(store.iter_archive()),
        "rules": store.read_behaviour(),
        "knowledge": store.knowledge_state(),
        "model": store.model_info(),
    }


def _fill(store, folder: Path) -> None:
    from memctl.knowledge import sync as knowledge

    a, b = store.add(["cats purr when content", "dogs bark at the mail carrier"], metadata=[{"n": 1}, None])
    store.add(["pets make noises"], derived_from={"consolidated_from": [a, b]})
    store.update(a, text="cats purr and knead when content")
    store.delete([b], cascade=False)
    store.touch([a], at="2026-01-02T00:00:00.000+00:00")
    store.write_behaviour("# rules\n- be brief\n")
    (folder / "solutions").mkdir(parents=True)
    (folder / "solutions" / "fix.md").write_text("Problem: builds hang. Solution: clear the gradle cache.")
    knowledge.import_knowledge(store, knowledge.resolve_folders(store.config, [folder]))


def test_backup_and_restore_backup_on_postgres(pg: str, cli, home: Path, tmp_path: Path):
    def run(*args: str):
        return cli("--store", pg, *args)

    with open_pg(pg) as store:
        _fill(store, tmp_path / "kb")
        before = _everything(store)
    backup = run("backup", tmp_path / "bk", "--json").json
    assert backup["count"] == 3 and backup["index"] == "copied" and backup["replaced"] is False
    assert {"memories.sqlite", "embedding.json", "behaviour.md", "knowledge_import.json", "index.faiss"} <= set(
        backup["files"]
    )
    assert run("backup", tmp_path / "bk").code == 2  # an existing backup is not overwritten by accident
    assert run("-s", "nosuchstore", "backup", tmp_path / "none").code == 3
    import shutil

    shutil.copytree(tmp_path / "bk", tmp_path / "copy" / "bk")  # opening a store writes to it: open a copy
    with memctl.open_store(tmp_path / "copy", "bk", embedder=FakeEmbedder(), store="embedded") as folder:  # a store
        assert _everything(folder) == before
        assert folder.search("cats purr knead", threshold=0.0)[0].text == "cats purr and knead when content"

    later = run("save", "written after the backup", "--json").json["ids"][0]
    refused = run("restore-backup", tmp_path / "bk", "--json")
    assert refused.code == 2 and "not empty" in refused.json["error"]["message"]
    doc = run("restore-backup", tmp_path / "bk", "--force", "--json").json
    assert doc["replaced"] is True and doc["count"] == 3 and doc["path"].endswith("#default")
    kept = Path(doc["kept_old"])
    assert kept.parent == home and kept.name.startswith(".default.replaced-")
    with open_pg(pg) as store:
        assert _everything(store) == before
        assert store.search("cats purr knead", threshold=0.0)[0].text == "cats purr and knead when content"
    # the replaced store is itself a backup: it restores (here into another subdir)
    assert run("-s", "kept", "restore-backup", kept, "--json").json["count"] == 4
    assert run("-s", "kept", "show", later).code == 0

    # across backends: this backup into a folder store, and a folder store's backup into PostgreSQL
    assert cli("--store", "embedded", "-s", "local", "restore-backup", tmp_path / "bk").code == 0
    with memctl.open_store(home, "local", embedder=FakeEmbedder(), store="embedded") as local:
        assert _everything(local) == before
    assert cli("--store", "embedded", "-s", "local", "backup", tmp_path / "bk2").code == 0
    assert run("-s", "back", "restore-backup", tmp_path / "bk2", "--json").json["replaced"] is False
    with open_pg(pg, "back") as back:
        assert _everything(back) == before


def test_restore_backup_failure_on_postgres_changes_nothing(pg: str, cli, tmp_path: Path, monkeypatch):
    from memctl.lifecycle import backup

    with open_pg(pg) as store:
        store.add(["the backed-up memory"])
    assert cli("--store", pg, "backup", tmp_path / "bk").code == 0
    with open_pg(pg) as store:
        store.add(["a second memory"])
        before = _everything(store)

    real = backup.copy_store

    def broken(source, dest):  # the replaced store is kept and cleared, then the copy into it fails
        if type(dest).__name__ == "PostgresStore":
            assert not dest.has_content()
            raise memctl.StoreError("disk on fire")
        return real(source, dest)

    monkeypatch.setattr(backup, "copy_store", broken)
    result = cli("--store", pg, "restore-backup", tmp_path / "bk", "--force", "--json")
    assert result.code == 1 and "disk on fire" in result.err
    with open_pg(pg) as store:
        assert _everything(store) == before
    assert not [p for p in Path(os.environ["MEMCTL_HOME"]).iterdir() if ".replaced-" in p.name]


BACKUP_WRITER = """
import sys
import memctl
total, batch = int(sys.argv[1]), int(sys.argv[2])
with memctl.open_store(None, "default") as store:
    for start in range(0, total, batch):
        store.add([f"memory number {i} is seq{i:05d}" for i in range(start, min(total, start + batch))])
"""


@pytest.mark.slow
def test_backup_on_postgres_while_another_process_writes(pg: str, cli, tmp_path: Path):
    """Each backup holds exactly the writes committed before its snapshot: a prefix, never a torn state."""
    import re
    import sqlite3
    import subprocess

    from tests.conftest import REPO

    total = 1500
    env = {**os.environ, "MEMCTL_STORE": pg, "MEMCTL_EMBEDDING_PROVIDER": "fake", "PYTHONPATH": str(REPO)}
    writer = subprocess.Popen(
        [sys.executable, "-c", BACKUP_WRITER, str(total), "5"], env=env, stderr=subprocess.PIPE, text=True
    )
    counts = []
    try:
        deadline = time.monotonic() + 120  # the store exists once the writer's first batch is in
        while "default" not in [s["name"] for s in cli("--store", pg, "subdirs", "--json").json["subdirs"]]:
            assert time.monotonic() < deadline and writer.poll() is None, "the writer never wrote"
            time.sleep(0.1)
        for n in range(4):
            time.sleep(1.0)
            result = cli("--store", pg, "backup", tmp_path / f"b{n}", "--json")
            assert result.code == 0, result.err
            counts.append(result.json["count"])
    finally:
        _, err = writer.communicate(timeout=300)
    assert writer.returncode == 0, err
    for n, count in enumerate(counts):
        with sqlite3.connect(tmp_path / f"b{n}" / "memories.sqlite") as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            seqs = sorted(int(re.search(r"seq(\d+)", t).group(1)) for (t,) in db.execute("SELECT text FROM memories"))
            history = db.execute("SELECT COUNT(*) FROM history").fetchone()[0]
        assert seqs == list(range(count)) and history == count
    assert counts == sorted(counts) and any(0 < c < total for c in counts), counts


def test_knowledge_imports_into_one_postgres_store_never_interleave(pg: str, cli, tmp_path: Path, monkeypatch):
    """A second import waits for the first one's advisory lock (here: lock_timeout), then reports it."""
    import psycopg

    from memctl.store.pg_schema import KNOWLEDGE_LOCK_CLASS

    monkeypatch.setenv("MEMCTL_LOCK_TIMEOUT", "1")
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.txt").write_text("a knowledge file")
    with psycopg.connect(pg, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (KNOWLEDGE_LOCK_CLASS, "default"))
        blocked = cli("--store", pg, "import-knowledge", kb, "--json")  # the holder never lets go: lock_timeout
        assert blocked.code == 1 and "another knowledge import" in blocked.json["error"]["message"]
        assert cli("--store", pg, "-s", "other", "import-knowledge", kb).code == 0  # other subdirs go on
        assert cli("--store", pg, "import-knowledge", kb, "--dry-run").code == 0  # a dry run takes no lock
    assert cli("--store", pg, "import-knowledge", kb, "--json").json["summary"]["new"] == 1
