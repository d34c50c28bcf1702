"""Hybrid retrieval: vector + keyword (FTS5 BM25) fused, with filters and areas honoured on both sides."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

import memctl
from memctl.errors import UsageError
from memctl.search.fusion import with_named
from memctl.search.tuning import tune


def _tickets(n: int = 60, seed: int = 4) -> list[str]:
    rng = random.Random(seed)
    reasons = ["the disk filled up", "a schema changed upstream", "the API token expired", "the source was late"]
    return [
        f"Ticket INC-{rng.randint(10000, 99999)}: the nightly ETL job failed because {rng.choice(reasons)}"
        for _ in range(n)
    ]


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


def test_keyword_area_and_filter_shortcuts_keep_the_results(store):
    """One area in the store: an area search is the unfiltered one, another area finds nothing; with two areas the
    area's rows alone, in BM25 order; a filter that allows every memory, or some, as the rows it allows."""
    from memctl.store.keyword import keyword_search

    store.add([f"invoice {n} for acme, invoice paid" if n % 3 else f"invoice {n}" for n in range(12)], area="main")
    plain = keyword_search(store.db, "invoice acme", 20)
    assert len(plain) == 12
    assert keyword_search(store.db, "invoice acme", 20, area="main") == plain
    assert keyword_search(store.db, "invoice acme", 20, area="solutions") == []
    everyone = [seq for seq, _ in plain]
    assert keyword_search(store.db, "invoice acme", 20, only=everyone) == plain
    assert keyword_search(store.db, "invoice acme", 20, only=everyone[::2]) == plain[::2]
    store.add(["an acme invoice solved", "nothing here"], area="solutions")
    both = keyword_search(store.db, "invoice acme", 20)
    assert len(both) == 13
    solutions = keyword_search(store.db, "invoice acme", 20, area="solutions")
    assert len(solutions) == 1
    assert keyword_search(store.db, "invoice acme", 20, area="main") == [p for p in both if p not in solutions]
    assert [h.area for h in store.search("invoice acme", threshold=0.0, area="main", limit=20)] == ["main"] * 12


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
    monkeypatch.setenv("MEMCTL_EMBEDDING_MODEL", MINILM)  # the scenario (dense misses the ticket) is MiniLM's
    texts = _tickets()
    target = texts[37]
    number = target.split()[1].rstrip(":")
    with memctl.open_store(home) as store:
        store.add(texts + ["Mr. Kowalczyk signs the warehouse lease", "The warehouse lease is signed by facilities"])
        query = f"what went wrong in {number}?"
        tune(store, calibrated=False)  # the plain (1 + cosine) / 2 score in every mode
        dense = store.search(query, limit=3, threshold=0.0, mode="dense")
        assert target not in [h.text for h in dense[:1]], "the scenario needs dense to miss"
        hybrid = store.search(query, limit=3, threshold=0.7, mode="hybrid")
        assert hybrid[0].text == target
        assert hybrid[0].score == pytest.approx(
            next(h.score for h in store.search(query, limit=100, threshold=0.0, mode="dense") if h.text == target),
            abs=1e-6,
        )
        surname = store.search("who is Kowalczyk", limit=1, threshold=0.7)
        assert surname[0].text.startswith("Mr. Kowalczyk")
        tune(store, calibrated=True)  # the calibrated score orders: the rare token still wins, by evidence alone
        assert store.calibration() is not None
        assert store.search(query, limit=3, threshold=0.0)[0].text == target
        assert store.search(query, limit=3, threshold=store.default_threshold("recall"))[0].text == target
        assert store.search("who is Kowalczyk", limit=1)[0].text.startswith("Mr. Kowalczyk")


def _chat_store(store, extra: list[tuple[str, str, str]]) -> None:
    """120 chat turns, half of them naming Caroline (as chat partners do), plus `extra` (text, speaker, date)."""
    filler = [
        (
            f"Thanks Caroline, talk soon {i}" if i % 2 else f"Busy week at work again {i}",
            "Melanie",
            f"{i // 10 + 1} May 2023",
        )
        for i in range(120)
    ]
    rows = filler + extra
    store.add([t for t, _, _ in rows], metadata=[{"speaker": s, "date": d} for _, s, d in rows])


def test_common_name_left_out_of_the_vector_query_but_not_out_of_the_score(store):
    _chat_store(
        store,
        [
            ("We went camping at Zion with the kids", "Caroline", "20 May 2023"),
            ("Caroline Caroline, camping is not for me", "Melanie", "21 May 2023"),
        ],
    )
    query = "When did Caroline go camping at Zion?"
    assert store.search(query, limit=1, threshold=0.0, mode="dense")[0].text.startswith("Caroline Caroline")
    store.embedder.calls.clear()
    hits = store.search(query, limit=3, threshold=0.0)
    assert any("When did go camping at Zion?" in call for call in store.embedder.calls)  # the ranking query
    assert hits[0].text == "We went camping at Zion with the kids"
    dense = {h.text: h.score for h in store.search(query, limit=200, threshold=0.0, mode="dense")}
    assert all(h.score == pytest.approx(dense[h.text], abs=1e-6) for h in hits)  # relevance of the query as asked
    tune(store, drop_common_names=False)
    store.embedder.calls.clear()
    store.search(query, limit=3, threshold=0.0)
    assert store.embedder.calls == [[query]]


def test_a_cjk_name_is_found_in_the_speakers_metadata_and_left_out_of_the_vector_query(store):
    """CJK text marks no name by case or space, and the segmenter joins a name to its verb ("王芳去"): the
    speaker names a Chinese query writes are found among the keyword side's candidates' metadata, then
    dropped from the vector query and searched by speaker, as capitalised names are."""
    filler = [
        (f"谢谢王芳，回头再聊 {i}" if i % 2 else f"这周工作又很忙 {i}", "李静", f"2023年5月{i // 10 + 1}日")
        for i in range(120)
    ]
    extra = [("我们带孩子去黄山露营了", "王芳", "2023年5月20日"), ("王芳王芳，露营不适合我", "李静", "2023年5月21日")]
    rows = filler + extra
    store.add([t for t, _, _ in rows], metadata=[{"speaker": s, "date": d} for _, s, d in rows])
    query = "王芳去黄山露营了吗？"
    store.embedder.calls.clear()
    hits = store.search(query, limit=3, threshold=0.0)
    assert any(" 去黄山露营了吗？" in call for call in store.embedder.calls)  # the ranking query, without the name
    assert hits[0].text == "我们带孩子去黄山露营了"
    tune(store, drop_common_names=False)
    store.embedder.calls.clear()
    store.search(query, limit=3, threshold=0.0)
    assert store.embedder.calls == [[query]]


def test_in_a_large_store_words_with_many_postings_leave_the_bm25_query(store, monkeypatch):
    """keyword_max_postings bounds what BM25 reads: past it a word leaves the keyword query even when it is
    under the common-word share (here 10 % of 401 = 40 memories; the bound is lowered to 5 to show it)."""
    store.add([f"invoice {i} sent by post" for i in range(12)] + [f"weather note {i}" for i in range(388)])
    target = store.add(["the zebra invoice came back"])[0]
    seen: list[list[int]] = []
    real = store._keyword_pairs

    def keyword_pairs(query, k, area, only, common_df, common_text_df):
        pairs = real(query, k, area, only, common_df, common_text_df)
        seen.append([seq for seq, _ in pairs])
        return pairs

    monkeypatch.setattr(store, "_keyword_pairs", keyword_pairs)
    store.search("zebra invoice", limit=3, threshold=0.0)
    assert len(seen[-1]) == 13  # "invoice" (13 memories, under 40) is read: every invoice memory matches
    tune(store, keyword_max_postings=5)
    hits = store.search("zebra invoice", limit=3, threshold=0.0)
    assert len(seen[-1]) == 1 and hits[0].id == target  # only "zebra" is read; the rare word still finds it


def test_names_are_kept_in_small_stores(store):
    store.add(["Caroline likes tea", "Caroline runs", "Melanie paints"])
    store.embedder.calls.clear()
    store.search("What does Caroline drink?", threshold=0.0)
    assert store.embedder.calls == [["What does Caroline drink?"]]


def test_metadata_boost_prefers_the_named_speaker(home: Path):
    from memctl.embeddings import FakeEmbedder

    def top(boost: float) -> str:
        with memctl.open_store(home, f"meta-{boost}", embedder=FakeEmbedder()) as store:
            tune(store, metadata_boost=boost, keyword_share=0.0)  # BM25 sees names too
            store.add([f"Weather note number {i}" for i in range(20)])
            store.add(
                ["I adopted a beagle from the shelter today", "I adopted a beagle from the shelter"],
                metadata=[{"speaker": "Ann"}, {"speaker": "Bob"}],
            )
            return store.search("Which beagle did Bob adopt today?", limit=1, threshold=0.0)[0].metadata["speaker"]

    assert top(0.0) == "Ann"  # closer by words
    assert top(0.5) == "Bob"  # but Bob is the one asked about


@pytest.mark.parametrize("boosted_first", [True, False])
def test_neighbour_boost_lifts_the_reply_next_to_a_strong_hit(store, boosted_first: bool):
    sessions = [("1 May", "We adopted a beagle puppy from the shelter"), ("9 May", "The weather was grey all day")]
    for date, opener in sessions if boosted_first else sessions[::-1]:
        store.add([opener, "We called him Max!"], metadata=[{"date": date}] * 2)
    # The two replies are the same text; only the turn before tells them apart (without the boost
    # they tie, and which comes first depends on the order they were stored in).
    hits = store.search("What is the name of the beagle puppy adopted from the shelter? Max", limit=4, threshold=0.0)
    assert next(h.metadata["date"] for h in hits if h.text == "We called him Max!") == "1 May"


def test_neighbours_need_the_same_session_and_area(store):
    store.add(["We adopted a beagle puppy from the shelter"], metadata=[{"date": "1 May"}])
    store.add(["We called him Max!"], metadata=[{"date": "2 May"}])  # next to it, but another session
    store.add(["We called him Max!"], area="fragments", metadata=[{"date": "1 May"}])  # same session, other area
    store.add(["We called him Max!"], metadata=[{"date": "3 May"}])
    hits = store.search("beagle puppy from the shelter Max", limit=4, threshold=0.0)
    tune(store, neighbour_boost=0.0)
    assert [h.id for h in store.search("beagle puppy from the shelter Max", limit=4, threshold=0.0)] == [
        h.id for h in hits
    ]


def test_fusion_setting(store):
    store.add(["alpha beta gamma", "delta epsilon"])
    tune(store, fusion="rrf")
    assert store.search("alpha gamma", threshold=0.0)[0].text == "alpha beta gamma"
    tune(store, fusion="borda")
    with pytest.raises(UsageError, match="fusion"):
        store.search("alpha")


@pytest.mark.usefixtures("backend")
def test_words_common_in_texts_leave_the_keyword_query(home: Path):
    from memctl.embeddings import FakeEmbedder

    with memctl.open_store(home, "common", embedder=FakeEmbedder()) as store:
        store.add([f"Weather note number {i}" for i in range(20)])
        store.add([f"Service {name} uses a queue" for name in "ABCDEF"])  # "use" in 6 of 30 texts (> 10 %)
        store.add(["The HTTP API is built on FastAPI"], metadata=[{"speaker": "Ann"}])
        store.add([f"Note {i}" for i in range(5)], metadata=[{"speaker": "Ann"}] * 5)  # Ann: metadata only

        def matched(query: str, text_df: int) -> set[str]:
            return {h.text for _, h in store._seq_hits(store._keyword_pairs(query, 50, None, None, 0, text_df))}

        assert len(matched("Which API should the new endpoint use?", 0)) == 7  # "use" matches at random
        assert matched("Which API should the new endpoint use?", 3) == {"The HTTP API is built on FastAPI"}
        assert len(matched("What does it use?", 3)) == 6  # only common words: kept, rather than nothing
        assert len(matched("API Ann", 3)) == 6  # a speaker in keyword metadata is not a common text word
        tune(store, keyword_share=1.0)  # rank by BM25 alone: the common word ranked nothing
        hits = store.search("Which API should the new endpoint use?", limit=2, threshold=0.0)
        assert hits[0].text == "The HTTP API is built on FastAPI"
        tune(store, common_word_share=0.0)
        off = store.search("Which API should the new endpoint use?", limit=2, threshold=0.0)
        assert off[1].text.endswith("uses a queue")


# -- the calibrated relevance (memctl/search/relevance.py) ------------------------------------------------
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
EVIDENCE = {
    "cosine": 0.3,
    "cosine_gap": -0.05,
    "cosine_lift": 0.1,
    "overlap": 0.25,
    "keyword": 0.0,
    "metadata": 0.0,
    "fused": 0.8,
    "answer_type": 0.0,
    "known_words": 0.5,
    "cosine_z": 1.0,
    "rare": 0.0,
    "slot_fit": 0.0,
}
STEPS = {
    "cosine": 0.2,
    "cosine_gap": 0.05,
    "cosine_lift": 0.1,
    "overlap": 0.25,
    "keyword": 0.5,
    "metadata": 1.0,
    "fused": 0.2,
    "answer_type": 1.0,
    "known_words": 0.25,
    "cosine_z": 0.5,
    "rare": 0.5,
    "slot_fit": 1.0,
}


def _calibration(**weights: float):
    from memctl.search.relevance import FEATURES, Calibration

    return Calibration(
        "fake",
        (0.0,) * len(FEATURES),
        (1.0,) * len(FEATURES),
        tuple(weights.get(name, 0.0) for name in FEATURES),
        -1.0,
        0.7,
    )


def test_shipped_calibration_is_monotone_in_every_kind_of_evidence():
    from memctl.search.relevance import FEATURES, shipped

    calibration = shipped(MINILM)
    assert calibration is not None and set(STEPS) == set(FEATURES) == set(EVIDENCE)
    base = calibration.score(EVIDENCE)
    assert 0.0 < base < 1.0
    for name in FEATURES:
        more = calibration.score({**EVIDENCE, name: EVIDENCE[name] + STEPS[name]})
        assert more >= base, f"more {name} lowered the score"
    # similarity always counts: a closer memory has a higher cosine, a smaller gap to the best, more lift, a higher z
    closer = {**EVIDENCE, "cosine": 0.6, "cosine_gap": 0.0, "cosine_lift": 0.4, "cosine_z": 3.0}
    assert calibration.score(closer) > base
    assert calibration.for_query("店几点开门？").score(closer) > calibration.for_query("店几点开门？").score(EVIDENCE)
    assert calibration.default_threshold is not None and 0.0 < calibration.default_threshold < 1.0


def test_a_calibration_with_a_negative_weight_or_other_features_is_refused():
    from memctl.errors import ConfigError
    from memctl.search.relevance import Calibration

    good = _calibration(cosine=1.0).to_dict()
    assert Calibration.from_dict(good).weights == _calibration(cosine=1.0).weights
    with pytest.raises(ConfigError, match="weights >= 0"):
        Calibration.from_dict({**good, "weights": [-1.0] + good["weights"][1:]})
    with pytest.raises(ConfigError, match="features"):
        Calibration.from_dict({**good, "features": good["features"][::-1]})
    with pytest.raises(ConfigError, match="one value per feature"):
        Calibration.from_dict({**good, "features": good["features"][:-1]})


def test_a_question_in_cjk_text_is_scored_by_the_cjk_parameters():
    from memctl.errors import ConfigError
    from memctl.search.relevance import FEATURES, Calibration

    english = _calibration(cosine=2.0)
    chinese = _calibration(overlap=2.0)
    both = replace(english, cjk=(chinese.mean, chinese.scale, chinese.weights, chinese.bias))
    assert both.for_query("When does the shop open?") is both
    assert both.for_query("店几点开门？").weights == chinese.weights
    assert both.for_query("店几点开门？").default_threshold == both.default_threshold  # one cut for both
    evidence = {**dict.fromkeys(FEATURES, 0.0), "cosine": 0.9}
    assert both.for_query("店几点开门？").score(evidence) < both.for_query("When?").score(evidence)
    doc = both.to_dict()
    assert Calibration.from_dict(doc).cjk == both.cjk and "cjk" not in english.to_dict()
    with pytest.raises(ConfigError, match="weights >= 0"):
        Calibration.from_dict({**doc, "cjk": {**doc["cjk"], "weights": [-1.0] + doc["cjk"]["weights"][1:]}})


def test_a_calibration_fitted_before_a_feature_existed_weighs_it_zero():
    from memctl.search.relevance import FEATURES, Calibration

    older = _calibration(cosine=1.0, known_words=0.5).to_dict()
    older = {**older, **{k: older[k][:-1] for k in ("features", "mean", "scale", "weights")}}
    loaded = Calibration.from_dict(older)
    assert loaded.weights[FEATURES.index("cosine_z")] == 0.0
    assert loaded.weights[FEATURES.index("known_words")] == 0.5
    assert loaded.score({**EVIDENCE, "cosine_z": 50.0}) == loaded.score(EVIDENCE)


def test_cosine_z_is_the_cosine_against_the_background_sentences(store):
    """A search's cosine_z is (cosine - mean) / spread of the query's cosines with the calibration's
    background vectors; without a background it is 0."""
    import dataclasses

    import numpy as np

    store.add(["apples are red", "zebras are striped", "the sky is blue", "rain falls in april"])
    background = store.embed(["zebras are striped", "the sky is blue", "rain falls in april"])
    plain = _calibration(cosine=1.0)
    with_background = dataclasses.replace(plain, background=np.asarray(background, dtype=np.float32))
    vector = store.embed(["red apples"])[0]
    cosines = background @ vector
    for calibration, expect in ((plain, None), (with_background, (cosines.mean(), cosines.std()))):
        store.calibration = lambda c=calibration: c
        try:
            got = store.search_evidence("red apples", threshold=0.0, mode="dense")
        finally:
            del store.calibration
        assert got
        for _hit, evidence in got:
            assert evidence is not None
            want = 0.0 if expect is None else (evidence["cosine"] - expect[0]) / max(expect[1], 0.02)
            assert evidence["cosine_z"] == pytest.approx(want, abs=1e-5)
    assert with_background.standing(vector) is not None and plain.standing(vector) is None


def test_uncalibrated_model_keeps_the_plain_formula(store):
    from memctl.store.records import relevance

    assert store.calibration() is None  # no parameters ship for the fake embedder
    store.add(["apples are red", "zebras are striped", "the sky is blue"])
    vector = store.embed(["red apples"])[0]
    plain = {h.id: h.score for h in store.search_vector(vector, limit=3)}
    for mode in ("dense", "hybrid"):
        for hit in store.search("red apples", threshold=0.0, mode=mode):
            assert hit.score == pytest.approx(plain[hit.id], abs=1e-6)
    assert all(0.0 <= relevance(ip) <= 1.0 for ip in (-2.0, -1.0, 0.0, 1.0, 2.0))
    assert [ev for _, ev in store.search_evidence("red apples", threshold=0.0)] == [None] * 3


def test_calibrated_threshold_semantics(store, monkeypatch: pytest.MonkeyPatch):
    """With a calibration: results keep the mode's order, each at or above the threshold, and a higher threshold
    returns those of a lower one's results that reach it; search_calibration false gives the plain formula."""
    import memctl.search.relevance

    monkeypatch.setattr(memctl.search.relevance, "shipped", lambda model: _calibration(cosine=4.0, overlap=2.0))
    store.add(["apples are red and sweet", "red cars are fast", "zebras are striped", "the sky is blue today"])
    assert store.calibration() is not None
    for mode in ("hybrid", "dense", "keyword"):
        everything = store.search("red apples", threshold=0.0, mode=mode)
        assert all(0.0 <= h.score <= 1.0 for h in everything)
        assert everything[0].text == "apples are red and sweet"
        assert everything[0].score == max(h.score for h in everything)
        for threshold in (0.2, 0.5, 0.8):
            kept = store.search("red apples", threshold=threshold, mode=mode)
            assert [h.id for h in kept] == [h.id for h in everything if h.score >= threshold]
    pairs = store.search_evidence("red apples", threshold=0.0)
    assert pairs[0][1] is not None and pairs[0][1]["overlap"] == 1.0 and pairs[-1][1]["overlap"] < 1.0
    tune(store, calibrated=False)
    assert store.calibration() is None
    vector = store.embed(["red apples"])[0]
    plain = {h.id: h.score for h in store.search_vector(vector, limit=4)}
    assert {h.id: h.score for h in store.search("red apples", threshold=0.0, mode="dense")} == pytest.approx(plain)
    # memory-vs-memory similarity never changes meaning: search_vector stays (1 + cosine) / 2
    tune(store, calibrated=True)
    assert {h.id: h.score for h in store.search_vector(vector, limit=4)} == pytest.approx(plain)


def test_default_threshold_is_the_configured_one(store):
    store.add(["apples are red", "zebras are striped"])
    store.config.values["search_threshold"] = 0.99
    assert store.search("apples are red")[0].text == "apples are red"  # identical text: (1 + 1) / 2
    assert store.search("red zebras") == []
    store.config.values["search_threshold"] = 0.0
    assert len(store.search("red zebras")) == 2


def test_named_speaker_turns_join_the_candidates(store):
    """In a long chat the turn a question is about is one of its speaker's many; the best candidates of the
    whole store can all be someone else's. hybrid_named_candidates adds the named speaker's best turns."""
    extra = [(f"We love camping trips in the mountains, round {i}", "Melanie", "1 June 2023") for i in range(30)]
    _chat_store(store, extra + [("I slept in a tent in the desert last spring", "Caroline", "2 June 2023")])
    query = "Where did Caroline go camping?"
    vector = store.embed([query])[0]
    (target,) = [int(k) for k in store._candidates(None, store.compile("speaker == 'Caroline'"))]
    dense = store._dense_pairs(vector, 5, None)
    assert target not in dict(dense)
    merged = with_named(store, dense, vector, 5, query, {"caroline"}, None, None)
    assert target in dict(merged) and set(dict(dense)) < set(dict(merged))
    assert [ip for _, ip in merged] == sorted((ip for _, ip in merged), reverse=True)
    melanie = store._candidates(None, store.compile("speaker == 'Melanie'"))
    assert with_named(store, dense, vector, 5, query, {"caroline"}, None, melanie) == dense  # filters still apply
    assert with_named(store, dense, vector, 5, "where did she go camping?", {"caroline"}, None, None) == dense


@pytest.mark.parametrize("dated_first", [True, False])
def test_date_boost_lifts_the_turn_of_the_month_the_question_names(store, dated_first: bool):
    dates = ["3 August 2023", "12 May 2023"]
    for date in dates if dated_first else dates[::-1]:
        store.add(["We went camping at the lake again"], metadata=[{"date": date}])
    # The two turns are the same text; only the date the question names tells them apart.
    hits = store.search("Where did we go camping in August 2023?", limit=2, threshold=0.0)
    assert hits[0].metadata["date"] == "3 August 2023"
    hits = store.search("Where did we go camping in 2023年5月?", limit=2, threshold=0.0)
    assert hits[0].metadata["date"] == "12 May 2023"


@pytest.mark.parametrize("note_first", [True, False])
def test_date_boost_reads_only_keyword_metadata(store, note_first: bool):
    rows = [{"note": "3 August 2023"}, {"date": "12 May 2023"}]  # `note` is not a keyword metadata key
    for metadata in rows if note_first else rows[::-1]:
        store.add(["We went camping at the lake"], metadata=[metadata])

    def order(query: str) -> list[str]:
        return [h.id for h in store.search(query, limit=2, threshold=0.0)]

    boosted = order("Where did we go camping in August 2023?")
    tune(store, date_boost=0.0)
    assert order("Where did we go camping in August 2023?") == boosted
