"""Agent Zero interop: real LangChain stores in, Agent-Zero-loadable folders out, hostile pickles refused.

Tests that take `backend` run on both backends (an Agent Zero folder into / out of a PostgreSQL store too).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import memctl
from memctl.embeddings import FakeEmbedder, ModelInfo
from memctl.integrations.agent_zero.folder import a0_embedding, a0_time_to_iso, iso_to_a0_time, model_matches
from memctl.integrations.agent_zero.pickle_read import load_index_pkl
from memctl.integrations.agent_zero.pickle_write import dump_index_pkl

FAKE_MODEL = {"model_provider": "fake", "model_name": "hash-384"}  # what memctl's fake embedder is called
# Documents shaped like Agent Zero's: memories, a knowledge chunk, consolidation fields, an area memctl lacks.
A0_DOCS: list[dict[str, Any]] = [
    {
        "id": "Mem0000001",
        "text": "User prefers dark mode in every editor",
        "metadata": {"area": "main", "timestamp": "2025-01-02 10:11:12"},
    },
    {
        "id": "Mem0000002",
        "text": "The staging database is called orion",
        "metadata": {"area": "fragments", "timestamp": "2025-07-01 08:30:00", "tags": ["db", "staging"]},
    },
    {
        "id": "Mem0000003",
        "text": "To fix the flaky deploy, pin the base image digest",
        "metadata": {
            "area": "solutions",
            "timestamp": "2025-03-04T05:06:07+02:00",
            "consolidation_action": "merge",
            "original_memory_ids": ["old1", "old2"],
        },
    },
    {
        "id": "Know000001",
        "text": "Kubernetes runs the production workloads of the team",
        "metadata": {
            "area": "main",
            "timestamp": "2025-02-02 02:02:02",
            "source": "docs/infra.md",
            "source_file": "infra.md",
            "source_path": "/a0/knowledge/custom/main/infra.md",
            "file_type": "md",
            "knowledge_source": True,
            "import_timestamp": None,
        },
    },
    {
        "id": "Inst000001",
        "text": "The yt_download instrument downloads a video",
        "metadata": {"area": "instruments", "timestamp": "2025-05-05 05:05:05"},
    },
]


def lc():
    """LangChain pieces (skips the test when langchain-community, a dev/bench extra, is absent)."""
    pytest.importorskip("langchain_community")
    from langchain_community.docstore.in_memory import InMemoryDocstore
    from langchain_community.vectorstores import FAISS
    from langchain_community.vectorstores.utils import DistanceStrategy
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings

    class FakeLangchainEmbeddings(Embeddings):
        """memctl's FakeEmbedder behind LangChain's interface, so both sides compute the same vectors."""

        def __init__(self) -> None:
            self.inner = FakeEmbedder()

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return self.inner.embed(list(texts)).tolist()

        def embed_query(self, text: str) -> list[float]:
            return self.inner.embed([text])[0].tolist()

    return FAISS, InMemoryDocstore, DistanceStrategy, Document, FakeLangchainEmbeddings


def build_a0_store(
    folder: Path, docs: list[dict[str, Any]], embedding: dict[str, str] | None = FAKE_MODEL, sha: bool = False
) -> None:
    """An Agent Zero memory folder, made the way Agent Zero makes it (IndexFlatIP, COSINE, save_local)."""
    import faiss

    FAISS, InMemoryDocstore, DistanceStrategy, Document, Fake = lc()
    db = FAISS(
        embedding_function=Fake(),
        index=faiss.IndexFlatIP(384),
        docstore=InMemoryDocstore(),
        index_to_docstore_id={},
        distance_strategy=DistanceStrategy.COSINE,
    )
    documents = [Document(d["text"], metadata={**d["metadata"], "id": d["id"]}) for d in docs]
    db.add_documents(documents, ids=[d["id"] for d in docs])
    db.save_local(str(folder))
    if embedding is not None:
        (folder / "embedding.json").write_text(json.dumps(embedding))
    if sha:
        digest = hashlib.sha256((folder / "index.faiss").read_bytes()).hexdigest()
        (folder / "index.faiss.sha256").write_text(digest)


def local_iso(a0_time: str) -> str:
    from datetime import UTC, datetime

    return (
        datetime.strptime(a0_time, "%Y-%m-%d %H:%M:%S").astimezone().astimezone(UTC).isoformat(timespec="milliseconds")
    )


@pytest.fixture
def berlin():
    """A local time zone with an offset and DST, so 'local time' is not silently UTC."""
    previous = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Berlin"
    time.tzset()
    yield
    if previous is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = previous
    time.tzset()


# -- import ---------------------------------------------------------------------------------------
def test_import_of_a_real_langchain_store_keeps_ids_texts_areas_timestamps_metadata(backend, cli, tmp_path, berlin):
    folder = tmp_path / "usr" / "memory" / "default"
    build_a0_store(folder, A0_DOCS, sha=True)
    result = cli("import-agent-zero", folder, "--subdir", "agent0", "--timezone", "Europe/Berlin", "--json")
    assert result.code == 0, result.err
    doc = result.json
    assert set(doc) == {
        "subdir",
        "source",
        "documents",
        "imported",
        "reused_vectors",
        "reembedded",
        "batches",
        "skipped",
        "notes",
    }
    assert doc["subdir"] == "agent0" and doc["documents"] == 5 and doc["imported"] == 5
    assert doc["reused_vectors"] == 5 and doc["reembedded"] == 0 and doc["skipped"] == []
    assert any("'instruments'" in note for note in doc["notes"])

    memories = {m["id"]: m for m in cli("list", "--subdir", "agent0", "--json").json["items"]}
    assert set(memories) == {d["id"] for d in A0_DOCS}
    first, second, third, knowledge, instrument = (memories[d["id"]] for d in A0_DOCS)
    assert first["text"] == A0_DOCS[0]["text"] and first["area"] == "main" and first["metadata"] == {}
    # naive Agent Zero times in --timezone (Berlin: +01:00 in winter, +02:00 in summer), stored as UTC
    assert first["created_at"] == "2025-01-02T09:11:12.000+00:00" == first["updated_at"]
    assert second["created_at"] == "2025-07-01T06:30:00.000+00:00"
    assert second["area"] == "fragments" and second["metadata"] == {"tags": ["db", "staging"]}
    assert third["created_at"] == "2025-03-04T03:06:07.000+00:00" and third["area"] == "solutions"
    assert third["metadata"] == {"consolidation_action": "merge", "original_memory_ids": ["old1", "old2"]}
    assert knowledge["metadata"] == {
        "source": "docs/infra.md",
        "source_file": "infra.md",
        "file_type": "md",
        "source_path": "/a0/knowledge/custom/main/infra.md",
        "knowledge_source": True,
        "import_timestamp": None,
    }
    assert instrument["area"] == "main" and instrument["metadata"] == {"a0": {"area": "instruments"}}
    for memory in memories.values():
        assert not {"id", "area", "timestamp", "created_at", "updated_at"} & set(memory["metadata"])

    # the stored vectors were reused: each text finds itself at relevance 1
    hits = cli("load", A0_DOCS[1]["text"], "--subdir", "agent0", "--json").json["results"]
    assert hits[0]["id"] == "Mem0000002" and hits[0]["score"] == pytest.approx(1.0, abs=1e-5)
    history = cli("history", "Mem0000001", "--subdir", "agent0", "--json").json["entries"]
    assert [(e["op"], e["actor"]) for e in history] == [("import", "import-agent-zero")]


def test_enum_areas_are_read_without_importing_agent_zero(cli, tmp_path, monkeypatch):
    """Some stores pickle Memory.Area itself; memctl maps it to its value and never imports the module."""
    package = tmp_path / "a0src" / "python" / "helpers"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "memory.py").write_text(
        "from enum import Enum\n\n\nclass Memory:\n    class Area(Enum):\n        MAIN = 'main'\n"
        "        FRAGMENTS = 'fragments'\n        SOLUTIONS = 'solutions'\n        INSTRUMENTS = 'instruments'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "a0src"))
    from python.helpers.memory import Memory  # type: ignore[import-not-found]

    docs = [
        {
            "id": "e1",
            "text": "enum area main",
            "metadata": {"area": Memory.Area.MAIN, "timestamp": "2025-01-01 00:00:00"},
        },
        {"id": "e2", "text": "enum area solutions", "metadata": {"area": Memory.Area.SOLUTIONS}},
    ]
    build_a0_store(tmp_path / "a0", docs)
    assert b"Memory.Area" in (tmp_path / "a0" / "index.pkl").read_bytes()
    for name in ("python.helpers.memory", "python.helpers", "python"):
        monkeypatch.delitem(sys.modules, name)
    result = cli("import-agent-zero", tmp_path / "a0", "--json")
    assert result.code == 0, result.err
    assert "python.helpers.memory" not in sys.modules
    assert cli("show", "e1", "--json").json["memory"]["area"] == "main"
    assert cli("show", "e2", "--json").json["memory"]["area"] == "solutions"


def test_existing_ids_empty_texts_and_unknown_model_are_reported(backend, cli, tmp_path):
    docs = A0_DOCS[:2] + [{"id": "Empty00001", "text": "   ", "metadata": {"area": "main"}}]
    build_a0_store(
        tmp_path / "a0",
        docs,
        embedding={"model_provider": "huggingface", "model_name": "sentence-transformers/all-MiniLM-L6-v2"},
    )
    first = cli("import-agent-zero", tmp_path / "a0", "--json").json
    assert first["imported"] == 2 and first["reused_vectors"] == 0 and first["reembedded"] == 2
    assert first["skipped"] == [{"id": "Empty00001", "reason": "empty text"}]
    assert any("re-embedded" in note and "huggingface" in note for note in first["notes"])
    again = cli("import-agent-zero", tmp_path / "a0", "--json").json
    assert again["imported"] == 0 and again["reembedded"] == 0  # nothing embedded for ids already there
    assert {"id": "Mem0000001", "reason": "id exists in the store"} in again["skipped"]
    assert len(again["skipped"]) == 3
    human = cli("import-agent-zero", tmp_path / "a0")
    assert human.code == 0 and "imported 0 of 3 documents" in human.out and "empty text" in human.out


def test_a_stale_sha256_sidecar_never_forces_a_reembedding(backend, cli, tmp_path):
    """index.faiss.sha256 is no Agent Zero file: one that no longer matches (Agent Zero saved since) is ignored."""
    build_a0_store(tmp_path / "a0", A0_DOCS[:2])
    (tmp_path / "a0" / "index.faiss.sha256").write_text("0" * 64)
    doc = cli("import-agent-zero", tmp_path / "a0", "--json").json
    assert doc["imported"] == 2 and doc["reused_vectors"] == 2 and doc["reembedded"] == 0
    assert not any("sha256" in note for note in doc["notes"])


def test_missing_folder_or_files_is_a_usage_error(cli, tmp_path):
    assert cli("import-agent-zero", tmp_path / "nowhere").code == 2
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "index.faiss").write_bytes(b"")
    result = cli("import-agent-zero", tmp_path / "half", "--json")
    assert result.code == 2 and "index.pkl" in result.json["error"]["message"]


# -- hostile and broken pickles ---------------------------------------------------------------------
class _RunsShell:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (self.command,))


class _RunsProcess:
    def __init__(self, canary: Path) -> None:
        self.canary = canary

    def __reduce__(self) -> tuple[Any, ...]:
        return (subprocess.check_call, (["touch", str(self.canary)],))


def _store_snapshot(cli) -> tuple[Any, Any]:
    return cli("list", "--json").json, cli("history", "--json").json


def _hostile_pickles(tmp_path: Path, canary: Path) -> dict[str, bytes]:
    hostile = {
        "os.system": pickle.dumps(_RunsShell(f"touch {canary}")),
        "subprocess": pickle.dumps((_RunsProcess(canary), {0: "x"})),
    }
    try:  # the payload hidden in the metadata of an otherwise genuine LangChain docstore
        _, InMemoryDocstore, _, Document, _ = lc()
    except pytest.skip.Exception:
        return hostile
    doc = Document("looks harmless", metadata={"id": "x", "area": _RunsShell(f"touch {canary}")}, id="x")
    hostile["inside metadata"] = pickle.dumps((InMemoryDocstore({"x": doc}), {0: "x"}))
    return hostile


def test_the_hostile_payloads_are_armed(tmp_path):
    """Plain pickle.loads does run them (in a child process), so the refusal below means something."""
    armed = tmp_path / "armed"
    payload = _hostile_pickles(tmp_path, armed)["os.system"]
    subprocess.run(
        [sys.executable, "-c", "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"],
        input=payload,
        check=True,
        timeout=60,
    )
    assert armed.exists()


def test_a_pickle_that_would_run_code_is_refused_before_anything_runs(backend, cli, tmp_path):
    canary = tmp_path / "canary"
    cli("save", "an existing memory")
    before = _store_snapshot(cli)
    hostile = _hostile_pickles(tmp_path, canary)
    for label, payload in hostile.items():
        folder = tmp_path / label.replace(" ", "_")
        folder.mkdir()
        (folder / "index.faiss").write_bytes(b"not read")
        (folder / "index.pkl").write_bytes(payload)
        result = cli("import-agent-zero", folder, "--json")
        assert result.code == 1, (label, result.err)
        error = result.json["error"]
        assert error["type"] == "UnsafePickleError"
        assert "refused" in error["message"] and ("system" in error["message"] or "check_call" in error["message"])
        assert not canary.exists(), f"{label}: the pickle ran code"
    assert len(hostile) >= 2
    assert _store_snapshot(cli) == before


def test_truncated_foreign_and_garbage_pickles_exit_1_and_change_nothing(cli, tmp_path):
    cli("save", "an existing memory")
    before = _store_snapshot(cli)
    genuine = dump_index_pkl([("a", "some text", {"id": "a", "area": "main"})])
    cases = {
        "truncated": genuine[: len(genuine) // 2],
        "foreign": pickle.dumps({"just": "a dict"}),
        "garbage": b"\x00\x01 definitely not a pickle",
        "empty": b"",
    }
    for label, payload in cases.items():
        folder = tmp_path / label
        folder.mkdir()
        (folder / "index.faiss").write_bytes(b"")
        (folder / "index.pkl").write_bytes(payload)
        result = cli("import-agent-zero", folder, "--json")
        assert result.code == 1, (label, result.err)
        assert result.json["error"]["type"] == "UnsafePickleError" and result.json["error"]["message"]
        assert "index.pkl" in result.err
    assert _store_snapshot(cli) == before


# -- export ---------------------------------------------------------------------------------------
def _seed(store) -> list[str]:
    texts = [
        "User prefers dark mode in every editor",
        "The staging database is called orion",
        "Deploys run on Fridays after the standup",
        "The editor font is JetBrains Mono",
        "Kubernetes runs the production workloads",
        "Dark roast coffee for the team on Mondays",
        "The deploy pipeline lints, tests, then ships",
    ]
    ids = store.add(texts[:4], area="main", metadata=[{"tags": ["ui"]}, None, {"priority": 2}, None])
    ids += store.add(texts[4:6], area="fragments")
    ids += store.add(texts[6:], area="solutions", metadata=[{"nested": {"a": [1, 2.5, None, True]}}])
    return ids


def test_an_exported_folder_loads_in_langchain_and_ranks_like_memctl(backend, cli, store, tmp_path):
    FAISS, _, DistanceStrategy, _, Fake = lc()
    import faiss

    ids = _seed(store)
    dest = tmp_path / "usr" / "memory" / "default"
    result = cli("export-agent-zero", dest, "--json")
    assert result.code == 0, result.err
    doc = result.json
    assert set(doc) == {"subdir", "path", "count", "dimension", "embedding", "replaced", "knowledge_import", "notes"}
    assert doc["count"] == 7 and doc["dimension"] == 384 and doc["replaced"] is False
    assert json.loads((dest / "embedding.json").read_text()) == FAKE_MODEL == doc["embedding"]
    assert not (dest / "index.faiss.sha256").exists()  # not an Agent Zero file
    assert isinstance(faiss.read_index(str(dest / "index.faiss")), faiss.IndexFlatIP)
    assert not [p for p in dest.parent.iterdir() if p.name.startswith(".")]  # no temp folder left

    db = FAISS.load_local(
        str(dest), Fake(), allow_dangerous_deserialization=True, distance_strategy=DistanceStrategy.COSINE
    )
    assert db.index.ntotal == 7 and db.index_to_docstore_id == dict(enumerate(ids))
    for query in ("dark mode editor", "deploy on Fridays", "database staging orion", "coffee"):
        theirs = [d.metadata["id"] for d, _ in db.similarity_search_with_score(query, k=5)]
        ours = [h.id for h in store.search(query, limit=5, threshold=0.0)]
        assert theirs == ours, query
    first = db.docstore.search(ids[0])
    assert first.id == ids[0] and first.page_content == "User prefers dark mode in every editor"
    memory = store.get_one(ids[0])
    assert first.metadata == {
        "id": ids[0],
        "area": "main",
        "timestamp": iso_to_a0_time(memory.created_at),
        "tags": ["ui"],
    }
    assert db.docstore.search(ids[6]).metadata["nested"] == {"a": [1, 2.5, None, True]}


def test_the_hand_written_pickle_equals_what_langchain_writes(tmp_path):
    """Same objects as FAISS.save_local's pickle of the same documents (class paths and pydantic state)."""
    FAISS, InMemoryDocstore, DistanceStrategy, Document, Fake = lc()
    import faiss

    docs = [
        (
            f"id{i:04d}",
            f"text number {i}",
            {
                "id": f"id{i:04d}",
                "area": "main",
                "timestamp": "2025-01-01 00:00:00",
                "n": i,
                "big": 10**20,
                "neg": -70000,
                "f": 0.5,
            },
        )
        for i in range(1200)
    ]  # more than one SETITEMS batch and more than 256 memo entries
    ours = pickle.loads(dump_index_pkl(docs))
    db = FAISS(
        embedding_function=Fake(),
        index=faiss.IndexFlatIP(384),
        docstore=InMemoryDocstore(),
        index_to_docstore_id={},
        distance_strategy=DistanceStrategy.COSINE,
    )
    db.add_documents([Document(text, metadata=meta) for _, text, meta in docs], ids=[d[0] for d in docs])
    db.save_local(str(tmp_path))
    theirs = pickle.loads((tmp_path / "index.pkl").read_bytes())
    assert type(ours[0]) is type(theirs[0]) and ours[1] == theirs[1]
    assert ours[0]._dict == theirs[0]._dict
    sample = ours[0]._dict["id0007"]
    assert sample.__getstate__() == theirs[0]._dict["id0007"].__getstate__()
    assert sample.model_fields_set == theirs[0]._dict["id0007"].model_fields_set


def test_round_trip_agent_zero_to_memctl_and_back(backend, cli, tmp_path):
    build_a0_store(tmp_path / "a0", A0_DOCS)
    assert cli("import-agent-zero", tmp_path / "a0").code == 0
    assert cli("delete", "Mem0000002", "--yes").code == 0
    assert cli("export-agent-zero", tmp_path / "back").code == 0
    docs, rows = load_index_pkl((tmp_path / "back" / "index.pkl").read_bytes())
    assert sorted(docs) == sorted(d["id"] for d in A0_DOCS if d["id"] != "Mem0000002")
    for original in A0_DOCS:
        if original["id"] == "Mem0000002":
            continue
        fields = docs[original["id"]].fields
        meta = dict(original["metadata"])
        meta["timestamp"] = iso_to_a0_time(a0_time_to_iso(meta["timestamp"]))  # offsets become local time
        assert fields["page_content"] == original["text"] and fields["id"] == original["id"]
        assert fields["metadata"] == {"id": original["id"], **meta}  # instruments comes back as instruments
    assert sorted(rows) == list(range(4))
    assert iso_to_a0_time(a0_time_to_iso("2025-01-02 10:11:12")) == "2025-01-02 10:11:12"


def test_export_refuses_to_overwrite_without_force_then_swaps_and_keeps_knowledge_import(backend, cli, store, tmp_path):
    ids = _seed(store)
    dest = tmp_path / "a0"
    dest.mkdir()
    dest.chmod(0o750)
    (dest / "index.faiss").write_bytes(b"old index")
    (dest / "old-extra.txt").write_text("old")
    knowledge = {
        "/a0/knowledge/main/x.md": {"file": "/a0/knowledge/main/x.md", "checksum": "abc", "ids": [ids[0], "gone-id"]}
    }
    (dest / "knowledge_import.json").write_text(json.dumps(knowledge))
    refused = cli("export-agent-zero", dest, "--json")
    assert refused.code == 2 and "--force" in refused.json["error"]["hint"]
    assert (dest / "index.faiss").read_bytes() == b"old index"

    forced = cli("export-agent-zero", dest, "--force", "--json")
    assert forced.code == 0, forced.err
    assert forced.json["replaced"] is True and forced.json["knowledge_import"] is True
    assert sorted(p.name for p in dest.iterdir()) == [
        "embedding.json",
        "index.faiss",
        "index.pkl",
        "knowledge_import.json",
        "memctl_sync.json",
    ]
    carried = json.loads((dest / "knowledge_import.json").read_text())
    entry = carried["/a0/knowledge/main/x.md"]
    assert entry["ids"] == [ids[0]] and entry["checksum"] == "abc"  # ids limited to what was exported
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    assert dest.stat().st_mode & 0o777 == 0o750  # the replaced folder's permissions are kept


@pytest.mark.integration
def test_a_store_of_the_default_model_exports_minilm_vectors_agent_zero_keeps(
    backend, cli, home, tmp_path, monkeypatch
):
    """multilingual-e5 (memctl's default) is no model Agent Zero can load: the export embeds the texts with
    all-MiniLM-L6-v2, Agent Zero's default, and names it, so Agent Zero keeps the vectors (no re-indexing on
    start) and ranks with them; importing the folder back re-embeds for an e5 store, reuses for a MiniLM one."""
    import faiss
    import numpy as np
    from langchain_core.embeddings import Embeddings

    from memctl.embeddings import MINILM_MODEL, MULTILINGUAL_MODEL, LocalEmbedder

    FAISS, _, DistanceStrategy, _, _ = lc()
    monkeypatch.delenv("MEMCTL_EMBEDDING_PROVIDER")  # the real default model
    texts = ["User prefers dark mode in every editor", "The deploy target is Kubernetes", "数据库使用 PostgreSQL 16"]
    with memctl.open_store(home, "e5") as store:
        ids = store.add(texts)
        assert store.model_info()["model"] == MULTILINGUAL_MODEL
    dest = tmp_path / "a0"
    result = cli("-s", "e5", "export-agent-zero", dest, "--json")
    assert result.code == 0, result.err
    agent_zero_default = {"model_provider": "huggingface", "model_name": MINILM_MODEL}
    assert result.json["embedding"] == agent_zero_default == json.loads((dest / "embedding.json").read_text())
    assert result.json["dimension"] == 384 and any("Agent Zero's default model" in n for n in result.json["notes"])
    minilm = LocalEmbedder(MINILM_MODEL)
    _, rows = load_index_pkl((dest / "index.pkl").read_bytes())
    index = faiss.read_index(str(dest / "index.faiss"))
    written = index.reconstruct_n(0, index.ntotal)
    expected = minilm.embed([texts[ids.index(rows[i])] for i in range(index.ntotal)])
    assert float(np.min(np.sum(written * expected, axis=1))) >= 0.9999  # MiniLM's vectors of the same texts

    class MiniLM(Embeddings):
        def embed_documents(self, batch: list[str]) -> list[list[float]]:
            return minilm.embed(list(batch)).tolist()

        def embed_query(self, text: str) -> list[float]:
            return minilm.embed([text])[0].tolist()

    db = FAISS.load_local(
        str(dest), MiniLM(), allow_dangerous_deserialization=True, distance_strategy=DistanceStrategy.COSINE
    )
    assert db.similarity_search("what editor theme does the user prefer", k=1)[0].metadata["id"] == ids[0]

    back = cli("-s", "e5-again", "import-agent-zero", dest, "--json")  # the default model: re-embedded
    assert back.code == 0 and (back.json["reembedded"], back.json["reused_vectors"]) == (3, 0), back.out
    monkeypatch.setenv("MEMCTL_EMBEDDING_MODEL", MINILM_MODEL)
    reused = cli("-s", "minilm", "import-agent-zero", dest, "--json")  # MiniLM: Agent Zero's vectors kept
    assert reused.code == 0 and (reused.json["reembedded"], reused.json["reused_vectors"]) == (0, 3), reused.out
    monkeypatch.delenv("MEMCTL_EMBEDDING_MODEL")
    synced = cli("-s", "e5", "import-agent-zero", dest, "--sync", "--json")  # nothing changed on either side
    assert synced.code == 0 and (synced.json["unchanged"], synced.json["added"]) == (3, 0), synced.out
    with memctl.open_store(home, "e5") as store:
        assert store.model_info()["model"] == MULTILINGUAL_MODEL and len(store) == 3


def test_export_never_replaces_a_memctl_store_and_refuses_an_empty_store(cli, home, tmp_path):
    cli("save", "something")
    result = cli("export-agent-zero", home / "default", "--force", "--json")
    assert result.code == 2 and "memctl store" in result.json["error"]["message"]
    assert (home / "default" / "memories.sqlite").is_file()
    missing = cli("export-agent-zero", tmp_path / "out", "--subdir", "missing", "--json")
    assert missing.code == 3 and "no store" in missing.json["error"]["message"]  # and none is created
    assert not (home / "missing").exists()
    cli("save", "x", "--subdir", "empty")
    cli("forget", "x", "--exact", "--subdir", "empty", "--yes")
    empty = cli("export-agent-zero", tmp_path / "out", "--subdir", "empty", "--json")
    assert empty.code == 2 and "empty" in empty.json["error"]["message"]
    assert not (tmp_path / "out").exists()


# -- units ------------------------------------------------------------------------------------------
def test_restricted_reader_round_trips_the_writer_without_langchain():
    docs = [
        (
            f"d{i}",
            f"text {i} ünïcødé",
            {
                "id": f"d{i}",
                "area": "fragments",
                "timestamp": "2025-01-01 00:00:00",
                "list": [i, -i, 1.5, None, False],
                "deep": {"k": {"j": "v"}},
            },
        )
        for i in range(300)
    ]
    store, rows = load_index_pkl(dump_index_pkl(docs))
    assert rows == {i: f"d{i}" for i in range(300)}
    for doc_id, text, meta in docs:
        fields = store[doc_id].fields
        assert fields == {"id": doc_id, "metadata": meta, "page_content": text, "type": "Document"}


def test_model_matching_is_lenient_about_agent_zero_provider_names():
    minilm = "sentence-transformers/all-MiniLM-L6-v2"
    local = ModelInfo("local", minilm)
    assert model_matches({"model_provider": "huggingface", "model_name": minilm}, local)
    assert model_matches({"model_provider": "HUGGINGFACE", "model_name": minilm}, local)
    assert model_matches({"provider": "local", "model": minilm}, local)  # memctl's own shape
    assert not model_matches({"model_provider": "openai", "model_name": minilm}, local)
    assert not model_matches({"model_provider": "huggingface", "model_name": "other"}, local)
    assert not model_matches(None, local) and not model_matches({}, local)
    small = ModelInfo("litellm", "openai/text-embedding-3-small")
    assert model_matches({"model_provider": "openai", "model_name": "text-embedding-3-small"}, small)
    assert model_matches(a0_embedding({"provider": "litellm", "model": small.model}), small)
    assert model_matches(a0_embedding({"provider": "local", "model": minilm}), local)
    expected = {"model_provider": "huggingface", "model_name": minilm}
    assert a0_embedding({"provider": "local", "model": minilm}) == expected


def test_timestamps(berlin):
    from memctl.integrations.agent_zero.folder import parse_timezone

    # default: UTC (Agent Zero's Docker image), whatever this machine's zone (here Berlin)
    assert a0_time_to_iso("2025-01-02 10:11:12") == "2025-01-02T10:11:12.000+00:00"
    assert iso_to_a0_time("2025-07-02T08:11:12.000+00:00") == "2025-07-02 08:11:12"
    berlin_tz = parse_timezone("Europe/Berlin")
    assert a0_time_to_iso("2025-01-02 10:11:12", berlin_tz) == "2025-01-02T09:11:12.000+00:00"
    assert a0_time_to_iso("2025-07-02 10:11:12", berlin_tz) == "2025-07-02T08:11:12.000+00:00"
    assert a0_time_to_iso("2025-07-02T10:11:12Z", berlin_tz) == "2025-07-02T10:11:12.000+00:00"
    assert a0_time_to_iso("2025-07-02T10:11:12", parse_timezone("local")) == local_iso("2025-07-02 10:11:12")
    assert a0_time_to_iso("yesterday") is None and a0_time_to_iso(None) is None
    assert iso_to_a0_time("2025-07-02T08:11:12.000+00:00", berlin_tz) == "2025-07-02 10:11:12"
    with pytest.raises(memctl.UsageError, match="not a time zone"):
        parse_timezone("Mars/Olympus")


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/St_Johns"])
def test_a_round_trip_through_memctl_is_exact(backend, cli, tmp_path, berlin, zone):
    """Import then export: the same ids, texts, areas, timestamps and metadata, key for key (reserved
    names, an unknown area and a user's own a0_area key included)."""
    from memctl.integrations.agent_zero.pickle_read import load_index_pkl

    docs = [
        {
            "id": "r1",
            "text": "kept exactly",
            "metadata": {
                "area": "instruments",
                "timestamp": "2025-03-30 01:30:00",
                "created_at": "2024-01-01",
                "updated_at": "yesterday",
                "a0": {"x": 1},
                "a0_area": "mine",
                "k": [1],
            },
        },
        {"id": "r2", "text": "a plain one", "metadata": {"area": "solutions", "timestamp": "2025-10-26 02:30:00"}},
    ]
    build_a0_store(tmp_path / "a0", docs)
    assert cli("import-agent-zero", tmp_path / "a0", "--timezone", zone).code == 0
    assert cli("export-agent-zero", tmp_path / "back", "--timezone", zone).code == 0
    before = load_index_pkl((tmp_path / "a0" / "index.pkl").read_bytes())[0]
    after = load_index_pkl((tmp_path / "back" / "index.pkl").read_bytes())[0]
    assert {k: (d.fields["page_content"], d.fields["metadata"]) for k, d in after.items()} == {
        k: (d.fields["page_content"], d.fields["metadata"]) for k, d in before.items()
    }


def test_an_unreadable_index_faiss_means_re_embedding_not_failure(backend, cli, tmp_path):
    folder = tmp_path / "a0"
    folder.mkdir()
    meta = {"id": "k1", "area": "main", "timestamp": "not a time", "timestamp_extra": 1}
    (folder / "index.pkl").write_bytes(dump_index_pkl([("k1", "kept despite a broken index", meta)]))
    (folder / "index.faiss").write_bytes(b"garbage, not a faiss index")
    doc = cli("import-agent-zero", folder, "--json").json
    assert doc["imported"] == 1 and doc["reembedded"] == 1 and doc["reused_vectors"] == 0
    assert any("index.faiss is unreadable" in n for n in doc["notes"])
    assert any("unreadable timestamp" in n for n in doc["notes"])
    assert cli("show", "k1", "--json").json["memory"]["metadata"] == {"timestamp_extra": 1}


def test_export_metadata_puts_agent_zero_columns_first_and_they_win():
    from memctl.integrations.agent_zero.exporter import a0_metadata

    meta = a0_metadata(
        "x1",
        "main",
        "2025-07-02T08:11:12.000+00:00",
        {"timestamp": "a user key", "a0": {"area": "instruments"}, "k": 1},
    )
    assert list(meta) == ["id", "area", "timestamp", "k"]
    assert meta["area"] == "instruments" and meta["timestamp"] == iso_to_a0_time("2025-07-02T08:11:12.000+00:00")
    mine = a0_metadata("x2", "main", "2025-07-02T08:11:12.000+00:00", {"a0_area": "instruments"})
    assert mine["area"] == "main" and mine["a0_area"] == "instruments"  # a user key is only a key


def test_project_memory_folders_import_and_export(cli, tmp_path):
    """Agent Zero projects keep memory in usr/projects/<name>/.a0proj/memory: a hidden folder on the way."""
    folder = tmp_path / "usr" / "projects" / "site" / ".a0proj" / "memory"
    build_a0_store(folder, A0_DOCS[:2])
    result = cli("import-agent-zero", folder, "-s", "projects/site", "--json")
    assert result.code == 0, result.err
    assert result.json["imported"] == 2
    assert cli("export-agent-zero", folder, "-s", "projects/site", "--force").code == 0
    again = cli("import-agent-zero", folder, "-s", "projects/copy", "--json").json
    assert again["imported"] == 2 and again["reused_vectors"] == 2


SYNC_DOCS = [
    {
        "id": f"S{i}",
        "text": f"agent zero memory number {i}",
        "metadata": {"area": "main", "timestamp": f"2025-05-0{i} 10:00:00"},
    }
    for i in range(1, 5)
]


def test_sync_applies_agent_zeros_additions_edits_and_deletions(backend, cli, tmp_path):
    folder = tmp_path / "usr" / "memory" / "default"
    build_a0_store(folder, SYNC_DOCS)
    assert cli("import-agent-zero", folder, "-s", "a0").code == 0
    assert cli("import-agent-zero", folder, "-s", "a0", "--sync", "--json").json["unchanged"] == 4
    cli("update", "S4", "-s", "a0", "--text", "curated in memctl")  # a memctl edit Agent Zero did not touch
    # Agent Zero runs: forgets S1, edits S2, memorises S5 (and saves its whole folder again)
    edited = [{**SYNC_DOCS[1], "text": "edited by agent zero", "metadata": {**SYNC_DOCS[1]["metadata"], "t": 1}}]
    new = [
        {"id": "S5", "text": "memorised later", "metadata": {"area": "fragments", "timestamp": "2025-06-01 09:00:00"}}
    ]
    build_a0_store(folder, edited + SYNC_DOCS[2:] + new)

    refused = cli("export-agent-zero", folder, "-s", "a0", "--force", "--json")
    assert refused.code == 2 and "--sync" in refused.json["error"]["hint"]
    assert "changed 3 memories" in refused.json["error"]["message"]

    doc = cli("import-agent-zero", folder, "-s", "a0", "--sync", "--json").json
    assert (doc["added"], doc["updated"], doc["deleted"], doc["unchanged"]) == (1, 1, 1, 2)
    memories = {m["id"]: m for m in cli("list", "-s", "a0", "--json").json["items"]}
    assert set(memories) == {"S2", "S3", "S4", "S5"}
    assert memories["S2"]["text"] == "edited by agent zero" and memories["S2"]["metadata"] == {"t": 1}
    assert memories["S4"]["text"] == "curated in memctl"
    assert memories["S5"]["area"] == "fragments"
    assert cli("restore", "S1", "-s", "a0").code == 0  # a deletion is archived, as any other

    assert cli("export-agent-zero", folder, "-s", "a0", "--force").code == 0  # now nothing would be undone
    again = cli("import-agent-zero", folder, "-s", "a0", "--sync", "--json").json
    assert (again["added"], again["updated"], again["deleted"]) == (0, 0, 0)


def test_sync_needs_an_earlier_import(cli, tmp_path):
    build_a0_store(tmp_path / "a0", SYNC_DOCS)
    result = cli("import-agent-zero", tmp_path / "a0", "--sync")
    assert result.code == 2 and "without --sync" in result.err


def test_an_agent_zero_save_of_the_same_memories_does_not_block_an_export(cli, tmp_path):
    folder = tmp_path / "a0"
    build_a0_store(folder, SYNC_DOCS)
    assert cli("import-agent-zero", folder).code == 0
    build_a0_store(folder, SYNC_DOCS)  # Agent Zero saved again: same memories, new files
    doc = cli("import-agent-zero", folder, "--json").json
    assert doc["imported"] == 0 and doc["reembedded"] == 0  # all ids known: nothing embedded
    assert cli("export-agent-zero", folder, "--force").code == 0
