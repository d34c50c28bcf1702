"""The PostgreSQL backend: subdirs, migrations, concurrent writers, the CLI, migrate, bad connections."""

from __future__ import annotations

import multiprocessing
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

import memctl
from memctl.embeddings import FakeEmbedder
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
        assert [r[0] for r in conn.execute("SELECT name FROM memctl_migrations")] == ["m001_initial"]
        indexes = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")}
    assert {"memctl_memories_hnsw_384", "memctl_memories_tsv", "memctl_memories_subdir_id"} <= indexes
    with open_pg(pg, "race") as store:
        assert len(store) == 4


def test_hnsw_path_with_filters_and_other_subdirs(pg: str, monkeypatch: pytest.MonkeyPatch):
    """Past EXACT_MAX the HNSW index answers; iterative scans keep k rows despite other subdirs' rows."""
    import numpy as np

    from memctl.store import postgres

    monkeypatch.setattr(postgres, "EXACT_MAX", 100)
    monkeypatch.setattr(postgres, "EXACT_FILTERED_MAX", 10)
    emb = FakeEmbedder()
    texts = [f"ticket {i} about service {i % 13} in zone {i % 7}" for i in range(600)]
    vectors = emb.embed(texts)
    with open_pg(pg, "noise") as noise:
        noise.insert_records([{"text": t} for t in texts], vectors, emb.info)
    with open_pg(pg, "big") as store:
        store.insert_records([{"id": f"t{i}", "text": t, "area": "solutions" if i % 20 == 0 else "main"}
                              for i, t in enumerate(texts)], vectors, emb.info)
        store.conn.execute("ANALYZE memctl_memories")
        store.conn.execute("SET enable_seqscan = off")  # so small a table is cheaper to sort: show the index fits
        store.conn.execute("SET enable_bitmapscan = off")
        plan = store.conn.execute(
            "EXPLAIN SELECT seq FROM memctl_memories WHERE subdir = 'big' AND vector_dims(vector) = 384"
            " ORDER BY vector::vector(384) <#> %s::vector(384) LIMIT 10", (vectors[0],)).fetchall()
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
    start = time.perf_counter()
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    assert [p.exitcode for p in procs] == [0] * 8
    elapsed = time.perf_counter() - start
    with open_pg(pg, "crowd") as store:
        assert len(store) == 2000
        seen = {(m.metadata["worker"], m.metadata["i"]) for m, _ in store.iter_all()}
        assert seen == {(w, i) for w in range(8) for i in range(250)}
        assert len({m.id for m, _ in store.iter_all()}) == 2000
        assert len([e for e in store.history() if e.op == "add"]) == 2000
    print(f"8 x 250 saves in {elapsed:.1f} s")


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
    assert run("recall", "which editor theme", "--format", "json").code in (0, 3)
    stats = run("stats", "--json").json["stores"][0]
    assert stats["count"] == 2 and "password" not in stats["path"] and stats["path"].endswith("#agent1")
    assert {s["name"] for s in cli("--store", pg, "subdirs", "--json").json["subdirs"]} == {"agent1", "copy"}
    assert run("prune", "--older-than", "0h", "--area", "fragments", "--json").json["count"] == 0
    assert run("forget", "dark mode editor", "--threshold", "0.8", "--json").json["count"] == 1
    deleted = run("delete", first, "--json").json
    assert deleted["deleted"] == [first] and run("show", first).code == 3
    assert second not in {m["id"] for m in run("list", "--json").json["items"]}
    for command in (["backup", str(tmp_path / "b")], ["restore", first], ["purge", "--all", "--yes"],
                    ["behaviour", "show"], ["import-knowledge", str(tmp_path)]):
        result = run(*command)
        assert result.code == 2 and "embedded store only" in result.err, command
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
    start = time.perf_counter()
    result = run_memctl("--store", bad, "save", "a secret memory", env={"MEMCTL_HOME": str(home)}, timeout=60)
    elapsed = time.perf_counter() - start
    assert result.code == 1 and elapsed < 5, (result, elapsed)
    assert "cannot connect to PostgreSQL" in result.err and "password authentication failed" in result.err
    assert "not-the-password" not in result.err
    assert not home.exists()


def test_unresponsive_host_times_out_quickly(tmp_path: Path):
    """A server that accepts TCP but never answers (a blackholed host, on loopback): exit 1 within 5 s."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    home = tmp_path / "never"
    try:
        start = time.perf_counter()
        result = run_memctl("--json", "--store", f"postgresql://memctl:pw@127.0.0.1:{port}/memctl", "list",
                            env={"MEMCTL_HOME": str(home)}, timeout=60)
        elapsed = time.perf_counter() - start
    finally:
        listener.close()
    assert result.code == 1 and elapsed < 5, (result, elapsed)
    assert result.json["error"]["type"] == "StoreError" and "timeout" in result.json["error"]["message"]
    assert not home.exists()


def test_bad_store_value_is_a_usage_error(cli, home: Path):
    result = cli("--store", "mysql://x@y/z", "list")
    assert result.code == 2 and "postgresql://" in result.err
    assert not home.exists()


def test_embedded_path_never_imports_psycopg(home: Path):
    code = ("import sys, memctl\n"
            "from memctl.embeddings import FakeEmbedder\n"
            f"with memctl.open_store({str(home)!r}, embedder=FakeEmbedder()) as s:\n"
            "    s.add(['x y z']); s.search('x', threshold=0.0)\n"
            "assert not any(m.startswith(('psycopg', 'pgvector')) for m in sys.modules), 'psycopg imported'\n")
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
