"""Hybrid retrieval: vector + keyword (FTS5 BM25) fused, with filters and areas honoured on both sides."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import memctl
from memctl.errors import UsageError


def _tickets(n: int = 60, seed: int = 4) -> list[str]:
    rng = random.Random(seed)
    reasons = ["the disk filled up", "a schema changed upstream", "the API token expired", "the source was late"]
    return [f"Ticket INC-{rng.randint(10000, 99999)}: the nightly ETL job failed because {rng.choice(reasons)}"
            for _ in range(n)]


def test_modes_and_bad_mode(store):
    store.add(["alpha beta gamma", "delta epsilon"])
    for mode in ("dense", "keyword", "hybrid"):
        assert store.search("alpha gamma", threshold=0.0, mode=mode)[0].text == "alpha beta gamma"
    with pytest.raises(UsageError, match="search mode"):
        store.search("alpha", mode="fuzzy")


def test_keyword_side_honours_area_and_filter(store):
    store.add(["the invoice number 4417 belongs to acme"], area="main", metadata=[{"client": "acme"}])
    store.add(["invoice 4417 was paid in full"], area="solutions", metadata=[{"client": "globex"}])
    by_area = store.search("invoice 4417", threshold=0.0, area="solutions")
    assert [h.area for h in by_area] == ["solutions"]
    by_filter = store.search("invoice 4417", threshold=0.0, filter="client == 'acme'", mode="keyword")
    assert [h.metadata["client"] for h in by_filter] == ["acme"]


def test_keyword_query_syntax_is_inert(store):
    store.add(['he said "quote" AND NEAR(x y) - ok'])
    for query in ['"unbalanced', "NEAR(", "a AND OR b", "col:value", "*", "^start"]:
        store.search(query, threshold=0.0, mode="keyword")  # never raises on FTS syntax


def test_threshold_keeps_meaning_in_hybrid(store):
    store.add(["apples are red", "zebras are striped"])
    hits = store.search("apples are red", threshold=0.9)
    assert [h.text for h in hits] == ["apples are red"] and hits[0].score >= 0.9


@pytest.mark.integration
def test_rare_token_found_by_hybrid_when_dense_misses(home: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("MEMCTL_EMBEDDING_PROVIDER")
    texts = _tickets()
    target = texts[37]
    number = target.split()[1].rstrip(":")
    with memctl.open_store(home) as store:
        store.add(texts + ["Mr. Kowalczyk signs the warehouse lease", "The warehouse lease is signed by facilities"])
        query = f"what went wrong in {number}?"
        dense = store.search(query, limit=3, threshold=0.0, mode="dense")
        assert target not in [h.text for h in dense[:1]], "the scenario needs dense to miss"
        hybrid = store.search(query, limit=3, threshold=0.7, mode="hybrid")
        assert hybrid[0].text == target
        assert hybrid[0].score == pytest.approx(next(h.score for h in store.search(
            query, limit=100, threshold=0.0, mode="dense") if h.text == target), abs=1e-6)
        surname = store.search("who is Kowalczyk", limit=1, threshold=0.7)
        assert surname[0].text.startswith("Mr. Kowalczyk")
