"""Crash safety: a damaged index is rebuilt from stored vectors; killed writers lose nothing committed;
concurrent writers lose nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import memctl
from memctl.embeddings import FakeEmbedder
from tests.conftest import REPO, run_memctl


def _snapshot(store, queries):
    return [[(h.id, round(h.score, 5)) for h in store.search(q, limit=5, threshold=0.0)] for q in queries]


@pytest.mark.parametrize("damage", ["truncate", "garbage", "delete", "sidecar", "stale"])
def test_damaged_index_is_rebuilt_without_embedding(home: Path, damage: str):
    texts = [f"memory {i} about topic {i % 13} and colour {i % 7}" for i in range(500)]
    queries = ["topic 3 colour 2", "memory 42", "colour 5"]
    with memctl.open_store(home, embedder=FakeEmbedder()) as store:
        store.add(texts)
        store.rebuild_index()
        before = _snapshot(store, queries)
    index = home / "default" / "index.faiss"
    if damage == "truncate":
        index.write_bytes(index.read_bytes()[: index.stat().st_size // 3])
    elif damage == "garbage":
        index.write_bytes(os.urandom(index.stat().st_size))
    elif damage == "delete":
        index.unlink()
    elif damage == "sidecar":
        (home / "default" / "index.faiss.sha256").write_text("0" * 64 + "  index.faiss\n")
    else:  # the file is fine but a checkpoint record points past the data: counts disagree
        import sqlite3

        with sqlite3.connect(home / "default" / "memories.sqlite") as db:
            db.execute("UPDATE index_checkpoints SET jseq = jseq + 100000")
    counting = FakeEmbedder()
    with memctl.open_store(home, embedder=counting) as store:
        after = _snapshot(store, queries)
        assert counting.calls == [[q] for q in queries]  # only the queries were embedded
        assert store.vector_index().index.ntotal == 500
    assert after == before
    with memctl.open_store(home, embedder=FakeEmbedder()) as store:  # the rebuilt index was written back
        store.vector_index()
        assert not store.vector_index().rebuilt


def test_damaged_index_via_cli_returns_same_results(cli, home: Path):
    for i in range(50):
        assert cli("save", f"fact number {i} about subject {i % 5}").code == 0
    first = cli("load", "fact number 7 about subject 2", "--json", "-t", "0").json["results"]
    (home / "default" / "index.faiss").write_bytes(b"not a faiss index")
    again = cli("load", "fact number 7 about subject 2", "--json", "-t", "0").json["results"]
    assert [(r["id"], r["score"]) for r in again] == [(r["id"], r["score"]) for r in first]


KILL_WRITER = """
import sys, memctl
from memctl.lifecycle.jsonl import import_jsonl
from pathlib import Path
path = Path(sys.argv[1])
with memctl.open_store(sys.argv[2], "default", actor="import") as store:
    import_jsonl(store, path, path.read_text().splitlines(), batch_size=int(sys.argv[3]), on_conflict="skip",
                 progress=lambda done, total: print(done, flush=True))
"""


@pytest.mark.slow
def test_kill_9_during_bulk_import_keeps_every_committed_batch(home: Path, tmp_path: Path):
    """kill -9 right after the importer reports its k-th committed batch (while it writes the next one):
    the store holds exactly a prefix of whole batches, at least the k reported, for k = 1, 4, 9."""
    n, batch = 10_000, 250
    source = tmp_path / "memories.jsonl"
    records = [
        {
            "id": f"m{i:05d}",
            "text": f"imported memory {i} on subject {i % 97}",
            "area": "main",
            "created_at": f"2026-01-01T00:00:{i % 60:02d}+00:00",
            "metadata": {"n": i},
        }
        for i in range(n)
    ]
    source.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = 0  # what the store holds before a run (which skips it and goes on; progress counts from the start)
    for k in (1, 4, 9):
        proc = subprocess.Popen(
            [sys.executable, "-c", KILL_WRITER, str(source), str(home), str(batch)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        reported = [int(proc.stdout.readline()) for _ in range(k)]  # blocks until the k-th batch is in
        proc.kill()
        reported += [int(line) for line in proc.stdout.read().split()]
        assert proc.wait() == -signal.SIGKILL  # killed mid-import, not finished
        with memctl.open_store(home, embedder=FakeEmbedder()) as store:
            assert store.integrity_check() == "ok"
            count = len(store)
            assert count % batch == 0, "a batch was half-committed"
            assert count >= max(reported) and count >= done + k * batch, "a committed batch is missing"
            assert count < n  # the kill came before the end
            ids = sorted(m.id for m, _ in store.iter_all())
            assert ids == [f"m{i:05d}" for i in range(count)]  # exactly a prefix, in order
            assert store.search(records[count - 1]["text"], threshold=0.0)[0].id == ids[-1]
        done = count
    result = subprocess.run(
        [sys.executable, "-c", KILL_WRITER, str(source), str(home), str(batch)], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr
    with memctl.open_store(home, embedder=FakeEmbedder()) as store:
        assert len(store) == n
        memory = store.get_one("m01234")
        assert memory.text == records[1234]["text"] and memory.metadata == {"n": 1234}


CONCURRENT_WRITER = """
import sys, memctl
with memctl.open_store(sys.argv[1], "default") as store:
    for i in range(int(sys.argv[3])):
        store.add([f"writer {sys.argv[2]} memory {i}"])
"""


@pytest.mark.slow
def test_two_processes_saving_500_each(home: Path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "MEMCTL_EMBEDDING_PROVIDER": "fake"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT_WRITER, str(home), name, "500"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    with memctl.open_store(home, embedder=FakeEmbedder()) as store:
        assert len(store) == 1000
        texts = {m.text for m, _ in store.iter_all()}
        assert texts == {f"writer {w} memory {i}" for w in "ab" for i in range(500)}
        assert store.vector_index().index.ntotal == 1000
        assert store.search("writer b memory 499", threshold=0.0)[0].text == "writer b memory 499"


def test_cli_process_sees_consistent_store_after_kill(home: Path):
    """A separate memctl process opens the store cleanly after a killed writer (integrity + search)."""
    env = {"MEMCTL_HOME": str(home)}
    assert run_memctl("save", "a memory before the crash", env=env).code == 0
    result = run_memctl("load", "a memory before the crash", "--json", env=env)
    assert result.code == 0 and result.json["results"][0]["text"] == "a memory before the crash"
