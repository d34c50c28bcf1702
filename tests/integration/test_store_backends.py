"""The store-level suite on both backends: the same tests, the same results, embedded and PostgreSQL.

Every test here runs twice (autouse `backend`): on the embedded store, and with MEMCTL_STORE
pointing at PostgreSQL in a schema of its own, so `memctl.open_store(home, subdir)` — what the
tests call — opens a PostgresStore. The tests are the ones of tests/unit/test_store.py and test_hybrid.py
that do not look at the embedded store's files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import memctl
from memctl.embeddings import FakeEmbedder
from memctl.errors import UsageError
from tests.pg import pg_schema
from tests.unit import test_hybrid, test_store


@pytest.fixture(params=["embedded", "postgres"], autouse=True)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, isolated_env: Path):
    if request.param == "embedded":
        yield "embedded"
        return
    with pg_schema() as url:
        monkeypatch.setenv("MEMCTL_STORE", url)
        yield "postgres"


@pytest.fixture
def store(home: Path, backend: str):
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as opened:
        assert type(opened).__name__ == ("PostgresStore" if backend == "postgres" else "EmbeddedStore")
        yield opened


# test_store.py: everything but the checks of index.faiss, its journal and the store folder.
test_add_search_get_len = test_store.test_add_search_get_len
test_score_is_documented_relevance = test_store.test_score_is_documented_relevance
test_threshold_and_limit = test_store.test_threshold_and_limit
test_bad_area_and_reserved_metadata = test_store.test_bad_area_and_reserved_metadata
test_update_keeps_history_and_reembeds = test_store.test_update_keeps_history_and_reembeds
test_delete_cascades_through_links = test_store.test_delete_cascades_through_links
test_delete_without_cascade = test_store.test_delete_without_cascade
test_delete_plan_is_what_delete_then_does = test_store.test_delete_plan_is_what_delete_then_does
test_find_exact_honours_area_and_filter = test_store.test_find_exact_honours_area_and_filter
test_list_newest_first_paginated_and_filtered = test_store.test_list_newest_first_paginated_and_filtered
test_filtered_search_sees_all_candidates_not_top_k = test_store.test_filtered_search_sees_all_candidates_not_top_k
test_search_all_above_has_no_cap = test_store.test_search_all_above_has_no_cap
test_model_mismatch_refuses_and_reindex_fixes = test_store.test_model_mismatch_refuses_and_reindex_fixes
test_interrupted_reindex_is_resumed = test_store.test_interrupted_reindex_is_resumed
test_other_process_writes_are_seen_by_open_store = test_store.test_other_process_writes_are_seen_by_open_store
test_transaction_is_all_or_nothing = test_store.test_transaction_is_all_or_nothing

# test_hybrid.py: modes, keyword side under area/filter, inert query syntax, threshold, rare tokens.
test_modes_and_bad_mode = test_hybrid.test_modes_and_bad_mode
test_keyword_side_honours_area_and_filter = test_hybrid.test_keyword_side_honours_area_and_filter
test_keyword_query_syntax_is_inert = test_hybrid.test_keyword_query_syntax_is_inert
test_threshold_keeps_meaning_in_hybrid = test_hybrid.test_threshold_keeps_meaning_in_hybrid
test_rare_token_found_by_hybrid_when_dense_misses = test_hybrid.test_rare_token_found_by_hybrid_when_dense_misses
# ... and score fusion: names left out of the vector query, chat neighbours, the fusion setting.
test_common_name_left_out = test_hybrid.test_common_name_left_out_of_the_vector_query_but_not_out_of_the_score
test_names_are_kept_in_small_stores = test_hybrid.test_names_are_kept_in_small_stores
test_neighbour_boost = test_hybrid.test_neighbour_boost_lifts_the_reply_next_to_a_strong_hit
test_neighbours_need_the_same_session_and_area = test_hybrid.test_neighbours_need_the_same_session_and_area
test_fusion_setting = test_hybrid.test_fusion_setting


def test_bad_subdir_names_are_refused_before_anything_opens(home: Path):
    for bad in ["..", "../x", "/abs", "a/b", "projects/../x", "", "projects", "a b"]:
        with pytest.raises(UsageError):
            memctl.open_store(home, bad, embedder=FakeEmbedder())
    assert not home.exists()


def test_archive_touch_and_iter_with_access(store):
    a, b = store.add(["first fact about owls", "second fact about bats"])
    assert store.touch([a], at="2026-01-02T00:00:00.000+00:00") == 1
    access = {m.id: at for m, at in store.iter_with_access()}
    assert access == {a: "2026-01-02T00:00:00.000+00:00", b: None}
    store.delete([b])
    assert [m.id for m, _ in store.iter_all()] == [a]
    assert [e.op for e in store.history(b)] == ["delete", "add"]


def test_same_results_on_both_backends(home: Path, backend: str):
    """Dense search returns the same ids and scores as on the other backend (checked against exact math)."""
    import numpy as np

    emb = FakeEmbedder()
    texts = [f"service {i % 17} runs on port {8000 + i} in region {i % 5}" for i in range(400)]
    with memctl.open_store(home, "same", embedder=emb) as store:
        store.insert_records(
            [
                {"id": f"m{i:03d}", "text": t, "area": "solutions" if i % 10 == 0 else "main"}
                for i, t in enumerate(texts)
            ],
            emb.embed(texts),
            emb.info,
        )
        vectors = emb.embed(texts)
        for query in ("service 3 region 2", "port 8123", "region 4 service 9"):
            q = emb.embed([query])[0]
            expected = np.argsort(-(vectors @ q), kind="stable")[:10]
            hits = store.search(query, limit=10, threshold=0.0, mode="dense")
            assert [h.id for h in hits] == [f"m{i:03d}" for i in expected]
            assert [h.score for h in hits] == pytest.approx(
                [(1 + float(vectors[i] @ q)) / 2 for i in expected], abs=1e-5
            )
            area = store.search(query, limit=5, threshold=0.0, mode="dense", area="solutions")
            allowed = [i for i in expected.tolist() + np.argsort(-(vectors @ q)).tolist() if i % 10 == 0]
            assert [h.id for h in area] == [f"m{i:03d}" for i in list(dict.fromkeys(allowed))[:5]]
