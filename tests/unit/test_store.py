"""The embedded store through the Python API."""

from __future__ import annotations

from pathlib import Path

import pytest

import memctl
from memctl.embeddings import FakeEmbedder
from memctl.errors import ModelMismatchError, NotFoundError, UsageError


def test_add_search_get_len(store):
    ids = store.add(
        ["User prefers dark mode in every editor", "The deploy target is Kubernetes"], metadata=[{"tags": ["ui"]}, None]
    )
    assert len(ids) == 2 and len(set(ids)) == 2 and len(store) == 2
    hits = store.search("dark mode editor", limit=10, threshold=0.0)
    assert [h.id for h in hits][0] == ids[0]
    assert hits[0].score > hits[1].score and 0.0 <= hits[1].score <= 1.0
    assert store.get([ids[1], "missing", ids[0]])[0].text == "The deploy target is Kubernetes"
    assert store.get_one(ids[0]).metadata == {"tags": ["ui"]}


def test_score_is_documented_relevance(store):
    [mid] = store.add(["exact same text"])
    [hit] = store.search("exact same text", threshold=0.0)
    assert hit.id == mid and hit.score == pytest.approx(1.0, abs=1e-5)


def test_threshold_and_limit(store):
    store.add([f"note number {i} about apples" for i in range(30)])
    assert len(store.search("apples note", limit=7, threshold=0.0)) == 7
    assert store.search("zebra xylophone quantum", limit=10, threshold=0.9) == []


def test_bad_area_and_reserved_metadata(store):
    with pytest.raises(UsageError, match="unknown area"):
        store.add(["x"], area="notes")
    with pytest.raises(UsageError, match="reserved"):
        store.add(["x"], metadata=[{"id": "abc"}])
    with pytest.raises(UsageError, match="empty"):
        store.add(["   "])
    assert len(store) == 0


def test_update_keeps_history_and_reembeds(store):
    [mid] = store.add(["The database is MySQL"], metadata=[{"tags": ["db"]}])
    updated = store.update(mid, text="The database is PostgreSQL 16", metadata={"owner": "ops"})
    assert updated.id == mid and updated.text.endswith("16")
    assert updated.metadata == {"tags": ["db"], "owner": "ops"}
    assert store.search("PostgreSQL 16 database", threshold=0.0)[0].id == mid
    ops = [(e.op, e.old_text, e.new_text) for e in store.history(mid)]
    assert ops[0] == ("update", "The database is MySQL", "The database is PostgreSQL 16")
    assert ops[-1][0] == "add"
    with pytest.raises(NotFoundError):
        store.update("nope", text="x")


def test_delete_cascades_through_links(store):
    a, b = store.add(["fact A about cats", "fact B about dogs"])
    [merged] = store.add(["cats and dogs merged"], derived_from={"consolidated_from": [a, b]})
    [grandchild] = store.add(["summary of merged"], derived_from={"updated_from": [merged]})
    [other] = store.add(["unrelated"])
    assert store.derived_ids([a]) == [merged, grandchild]
    result = store.delete([a, "missing"])
    assert result.deleted == [a] and result.cascaded == [merged, grandchild] and result.missing == ["missing"]
    assert {m.id for m in store.get([a, b, merged, grandchild, other])} == {b, other}
    assert {e.memory_id for e in store.history() if e.op == "delete"} == {a, merged, grandchild}


def test_delete_plan_is_what_delete_then_does(store):
    a, b = store.add(["plan parent", "plan other"])
    [child] = store.add(["plan child"], derived_from={"consolidated_from": [a]})
    plan = store.delete_plan([a, "missing", a])
    assert (plan.deleted, plan.cascaded, plan.missing) == ([a], [child], ["missing"])
    assert len(store) == 3  # nothing deleted
    assert store.delete_plan([a], cascade=False).cascaded == []
    assert store.delete([a, "missing", a]) == plan
    assert len(store) == 1 and store.get([b])


def test_find_exact_honours_area_and_filter(store):
    [a] = store.add(["the same words"], metadata=[{"kind": "x"}])
    [b] = store.add(["the same words"], area="fragments", metadata=[{"kind": "y"}])
    store.add(["the same words, longer"])
    assert [m.id for m in store.find_exact("the same words")] == [a, b]
    assert [m.id for m in store.find_exact("the same words", "fragments")] == [b]
    assert [m.id for m in store.find_exact("the same words", filter="kind == 'x'")] == [a]
    assert store.find_exact("the same words", "main", filter="kind == 'y'") == []
    with pytest.raises(UsageError):
        store.find_exact("the same words", "nowhere")


def test_delete_without_cascade(store):
    a = store.add(["parent"])[0]
    child = store.add(["child"], derived_from={"consolidated_from": [a]})[0]
    store.delete([a], cascade=False)
    assert store.get([child])


def test_list_newest_first_paginated_and_filtered(store):
    ids = [store.add([f"memory {i}"], area="fragments" if i % 2 else "main", metadata=[{"n": i}])[0] for i in range(9)]
    page, total = store.list(limit=4)
    assert total == 9 and [m.id for m in page] == ids[::-1][:4]
    page2, _ = store.list(limit=4, offset=4)
    assert [m.id for m in page2] == ids[::-1][4:8]
    frag, total = store.list(area="fragments", limit=100)
    assert total == 4 and all(m.area == "fragments" for m in frag)
    big, total = store.list(filter="n >= 6", limit=100)
    assert total == 3 and [m.metadata["n"] for m in big] == [8, 7, 6]


def test_filtered_search_sees_all_candidates_not_top_k(home: Path):
    """The Agent Zero bug: a filter applied after a top-20 cut misses a small area's low-similarity items.
    2,000 memories: far more than any cut (top-k, PostgreSQL's ef_search 100), on the search paths 10,000 take
    (exact: PostgreSQL up to EXACT_MAX 10,000 memories, the embedded flat index below index_ivf_min_size)."""
    emb = FakeEmbedder()
    with memctl.open_store(home, "big", embedder=emb) as store:
        store.add(
            [f"deploy pipeline step {i} for kubernetes cluster" for i in range(1990)],
            area="main",
            metadata=[{"kind": "noise"} for _ in range(1990)],
        )
        wanted = store.add(
            [f"recipe {i}: bake bread at 220 degrees" for i in range(10)],
            area="solutions",
            metadata=[{"kind": "recipe", "n": i} for i in range(10)],
        )
        query = "deploy pipeline kubernetes cluster"
        unfiltered = store.search(query, limit=10, threshold=0.0)
        assert not set(wanted) & {h.id for h in unfiltered}
        by_area = store.search(query, limit=10, threshold=0.0, area="solutions")
        assert sorted(h.id for h in by_area) == sorted(wanted)
        by_filter = store.search(query, limit=20, threshold=0.0, filter="kind == 'recipe' and n < 5")
        assert sorted(h.id for h in by_filter) == sorted(wanted[:5])
        assert all(a.score >= b.score for a, b in zip(by_area, by_area[1:], strict=False))


def test_search_all_above_has_no_cap(store):
    store.add([f"the build uses gradle cache variant {i}" for i in range(300)])
    store.add([f"unrelated zebra fact {i}" for i in range(50)])
    hits = store.search_all_above("the build uses gradle cache variant", 0.75)
    assert len(hits) == 300


def test_model_mismatch_refuses_and_reindex_fixes(home: Path):
    with memctl.open_store(home, "m", embedder=FakeEmbedder(384)) as store:
        store.add(["alpha fact", "beta fact"])
    other = FakeEmbedder(128)
    with memctl.open_store(home, "m", embedder=other) as store:
        with pytest.raises(ModelMismatchError, match="memctl reindex"):
            store.search("alpha", threshold=0.0)
        with pytest.raises(ModelMismatchError):
            store.add(["gamma"])
        assert len(store.list()[0]) == 2  # reading without embeddings still works
        assert store.reindex() == 2
        assert store.model_info() == {"provider": "fake", "model": "hash-128", "dimension": 128}
        assert store.search("alpha fact", threshold=0.0)[0].text == "alpha fact"


def test_interrupted_reindex_is_resumed(home: Path, monkeypatch: pytest.MonkeyPatch):
    with memctl.open_store(home, "r", embedder=FakeEmbedder(384)) as store:
        store.add([f"fact {i}" for i in range(50)])
    flaky = FakeEmbedder(64)
    calls = {"n": 0}
    real = flaky.embed

    def dies_on_third(texts):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(texts)

    monkeypatch.setattr(flaky, "embed", dies_on_third)
    with memctl.open_store(home, "r", embedder=flaky) as store:
        with pytest.raises(KeyboardInterrupt):
            store.reindex(batch_size=10)
        with pytest.raises(ModelMismatchError, match="interrupted"):
            store.search("fact 1", threshold=0.0)
    resumed = FakeEmbedder(64)
    with memctl.open_store(home, "r", embedder=resumed) as store:
        assert store.reindex(batch_size=10) == 30  # 20 were done before the interruption
        assert store.search("fact 7", threshold=0.0)[0].text == "fact 7"


def test_other_process_writes_are_seen_by_open_store(home: Path):
    emb = FakeEmbedder()
    with memctl.open_store(home, embedder=emb) as reader, memctl.open_store(home, embedder=emb) as writer:
        writer.add(["first memory about rust"])
        assert reader.search("first memory about rust", threshold=0.0)[0].text == "first memory about rust"
        [second] = writer.add(["second memory about go"])
        assert reader.search("second memory about go", threshold=0.0)[0].id == second
        writer.delete([second])
        assert all(h.id != second for h in reader.search("second memory about go", threshold=0.0))


def test_index_checkpoint_prunes_journal(home: Path):
    with memctl.open_store(home, embedder=FakeEmbedder(), overrides={"index_checkpoint_every": 50}) as store:
        for i in range(5):
            store.add([f"batch {i} item {j}" for j in range(40)])
        pending = store.db.execute("SELECT COUNT(*) FROM index_journal").fetchone()[0]
        assert pending < 200
        assert (store.folder / "index.faiss").exists()
        assert store.search("batch 3 item 7", threshold=0.0)[0].text == "batch 3 item 7"
    with memctl.open_store(home, embedder=FakeEmbedder()) as store:
        assert store.vector_index().index.ntotal == 200
        assert not store.vector_index().rebuilt


def test_subdir_names(home: Path):
    for bad in [
        "..",
        "../x",
        "/abs",
        "a/b",
        "projects/../x",
        "projects/a/b",
        "a\\b",
        "",
        "projects",
        ".hidden",
        "projects/",
        "x/..",
        "a b",
    ]:
        with pytest.raises(UsageError):
            memctl.open_store(home, bad, embedder=FakeEmbedder())
    with memctl.open_store(home, "projects/alpha", embedder=FakeEmbedder()) as store:
        store.add(["project fact"])
    assert (home / "projects" / "alpha" / "memories.sqlite").is_file()


def test_transaction_is_all_or_nothing(store):
    [old] = store.add(["old chunk of a file"])
    vectors = store.embedder.embed(["new chunk one", "new chunk two"])
    with pytest.raises(RuntimeError), store.transaction():
        store.delete([old])
        store.insert_records([{"text": "new chunk one"}, {"text": "new chunk two"}], vectors, store.embedder.info)
        raise RuntimeError("reader failed half way")
    assert [m.text for m, _ in store.iter_all()] == ["old chunk of a file"]
    with store.transaction():
        store.delete([old])
        ids = store.insert_records([{"text": "new chunk one"}, {"text": "new chunk two"}], vectors, store.embedder.info)
    assert [m.id for m, _ in store.iter_all()] == ids
    assert store.search("new chunk two", threshold=0.0)[0].id == ids[1]


def test_approximate_index_past_the_size_threshold(home: Path):
    overrides = {"index_type": "auto", "index_ivf_min_size": 3000, "index_checkpoint_every": 100_000}
    emb = FakeEmbedder()
    texts = [f"record {i} topic {i % 50} colour {i % 11}" for i in range(4000)]
    with memctl.open_store(home, embedder=emb, overrides=overrides) as store:
        ids = store.add(texts[:2000], area="main")
        assert not store.vector_index().is_approximate
        ids += store.add(texts[2000:], area="solutions")
        store.rebuild_index()
        assert store.vector_index().is_approximate
        hit = store.search("record 1234 topic 34 colour 2", threshold=0.0, limit=1)[0]
        assert hit.text == texts[1234]
        exact_area = store.search("topic 7", area="solutions", limit=5000, threshold=0.0)
        assert len(exact_area) == 2000  # filtered searches stay exact under the approximate index
        store.delete(ids[:10])
        assert all(h.id not in ids[:10] for h in store.search("record 1 topic 1", limit=50, threshold=0.0))
    with memctl.open_store(home, embedder=emb, overrides=overrides) as store:  # reloaded from disk
        assert store.vector_index().is_approximate and store.vector_index().index.ntotal == 3990


def test_ids_are_unique_and_a_forked_child_does_not_repeat_its_parents_ids():
    import os
    import string

    from memctl.store.interface import new_id

    ids = {new_id() for _ in range(50_000)}
    assert len(ids) == 50_000 and all(
        len(i) == 10 and set(i) <= set(string.ascii_lowercase + string.digits) for i in ids
    )
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, then exit at once
        os.write(write, " ".join(new_id() for _ in range(100)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    parent = {new_id() for _ in range(100)}
    assert len(child) == 100 and not child & parent


def test_scores_of_listed_ids_match_a_vector_search(store):
    """Consolidation scores the memories it found by id (no `id in [...]` filter strings)."""
    ids = store.add([f"note number {n} about the garden shed" for n in range(30)])
    [other] = store.add(["the garden shed in fragments"], area="fragments")
    vector = store.embed(["garden shed"])[0]
    expected = {h.id: h.score for h in store.search_vector(vector, limit=100, threshold=0.0)}
    got = store.scores_of(vector, [*ids, other, "missing", ids[0]])
    assert set(got) == {*ids, other}
    assert all(got[i] == pytest.approx(expected[i], abs=1e-6) for i in got)
    assert set(store.scores_of(vector, [ids[0], other], area="fragments")) == {other}
    assert store.scores_of(vector, []) == {}
