"""The search path's caches and batching change no result: golden ids and scores of a generated store,
and a write from another handle (a CLI `save` beside a warm server) is seen by the next search."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memctl
from memctl.embeddings import FakeEmbedder
from memctl.search.relevance import Calibration

DATA = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file()) / "tests" / "data"
# MiniLM's calibration as it was when the golden files were made, frozen here: a refit of the shipped one
# changes scores, and these files check that caches and batching change none.
GOLDEN_CALIBRATION = Calibration.from_dict(json.loads((DATA / "golden_calibration.json").read_text(encoding="utf-8")))
GOLDEN = {
    "embedded": DATA / "search_golden.json",
    "postgresql": DATA / "search_golden_pg.json",
}
NAMES = ["Alice", "Bob", "Caroline", "Melanie", "Jon", "Gina"]
TOPICS = [
    "the deploy pipeline",
    "the staging database",
    "the backup job",
    "customer billing",
    "the dog Max",
    "marathon training",
    "a trip to Lisbon",
    "the search index",
]
VERBS = ["uses", "moved to", "must avoid", "prefers", "talked about", "was worried about"]
OBJECTS = [
    "PostgreSQL 16",
    "Kubernetes",
    "port 8443",
    "Stripe",
    "Mondays at 9",
    "three weeks",
    "order 48213",
    "version 2.4",
    "her new job",
]


def _records(n: int) -> list[dict[str, Any]]:
    rng = random.Random(7)
    out, session, turn = [], 0, 0
    for i in range(n):
        if turn == 0 or rng.random() < 0.08:
            session, turn = session + 1, 0
        turn += 1
        speaker = NAMES[(session + turn) % len(NAMES)]
        text = f"{speaker}: {rng.choice(TOPICS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"
        if rng.random() < 0.2:
            text += f" (ticket {rng.randrange(10**4)})"
        if rng.random() < 0.15:
            text = f"Yes! {rng.choice(OBJECTS)}."
        meta: dict[str, Any] = {"speaker": speaker, "session": f"s{session}", "date": f"2024-03-{1 + session % 28:02d}"}
        if rng.random() < 0.1:
            meta["tags"] = [rng.choice(["ops", "family", "billing"])]
        out.append(
            {
                "id": f"m{i:05d}",
                "text": text,
                "area": "solutions" if i % 9 == 0 else "main",
                "metadata": meta,
                "created_at": "2024-03-01T00:00:00Z",
                "updated_at": "2024-03-01T00:00:00Z",
            }
        )
    return out


def _queries() -> list[str]:
    rng = random.Random(11)
    forms = [
        "What does {n} say about {t}?",
        "When did {n} mention {o}?",
        "Who talked about {t}?",
        "What did Alice and {n} decide on {o}?",
        "Which day is {t}?",
        "ticket {k}",
        "Why was {n} worried?",
    ]
    return [
        rng.choice(forms).format(
            n=rng.choice(NAMES), t=rng.choice(TOPICS), o=rng.choice(OBJECTS), k=rng.randrange(10**4)
        )
        for _ in range(24)
    ]


CASES = [  # (mode, area, filter, calibrated)
    ("hybrid", None, None, True),
    ("hybrid", None, None, False),
    ("hybrid", "main", None, True),
    ("hybrid", None, "speaker == 'Bob' or tags == 'ops'", True),
    ("dense", None, None, True),
    ("keyword", None, None, True),
    ("keyword", "main", None, False),
]


def _open(folder: Path, calibrated: bool, name: str = "golden", url: str | None = None) -> Any:
    embedder = FakeEmbedder(64)
    store = memctl.open_store(
        folder, name, embedder=embedder, overrides={"embedding_cache": False}, store=url or "embedded"
    )
    calibration = GOLDEN_CALIBRATION if calibrated else None
    store.calibration = lambda: calibration  # the fake model has no calibration; a fixed one scores its evidence
    return store


def _build(folder: Path, records: list[dict[str, Any]], name: str = "golden", url: str | None = None) -> None:
    embedder = FakeEmbedder(64)
    with memctl.open_store(
        folder, name, embedder=embedder, overrides={"embedding_cache": False}, store=url or "embedded"
    ) as store:
        store.insert_records(records, embedder.embed([r["text"] for r in records]), embedder.info)


def _results(folder: Path, url: str | None = None) -> dict[str, list[list[list[Any]]]]:
    out = {}
    for mode, area, flt, calibrated in CASES:
        store = _open(folder, calibrated, url=url)
        try:
            out[f"{mode}|{area}|{flt}|{calibrated}"] = [
                [[h.id, h.score] for h in store.search(q, limit=8, threshold=0.8, area=area, filter=flt, mode=mode)]
                for q in _queries()
            ]
        finally:
            store.close()
    return out


@pytest.fixture(scope="module", params=["embedded", "postgresql"])
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Any]]:
    """(folder, store URL or None) of the generated store, on each backend."""
    folder = tmp_path_factory.mktemp("golden")
    if request.param == "embedded":
        _build(folder, _records(1500))
        yield folder, None
        return
    from tests.pg import pg_schema

    with pg_schema() as url:
        _build(folder, _records(1500), url=url)
        yield folder, url


def _rare(store: Any, query: str) -> list[str]:
    """The results whose evidence says they hold every rare identifier of the query (document frequencies
    counted as the store stands now)."""
    return [hit.id for hit, ev in store.search_evidence(query, threshold=0.0) if ev and ev["rare"] == 1.0]


def _same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got.keys() == want.keys()
    for case in want:
        for query, g, w in zip(_queries(), got[case], want[case], strict=True):
            assert [i for i, _ in g] == [i for i, _ in w], (case, query)
            assert [s for _, s in g] == pytest.approx([s for _, s in w], abs=2e-6), (case, query)


def test_results_match_the_golden_file(built: tuple[Path, Any]) -> None:
    """Ids, order and scores as the search gave them before its caches and batching (tests/data)."""
    folder, url = built
    want = json.loads(GOLDEN["embedded" if url is None else "postgresql"].read_text(encoding="utf-8"))
    got = _results(folder, url)
    assert any(len(v) >= 3 for case in got.values() for v in case)  # the cases find something
    _same(got, want)


def test_a_warm_store_answers_as_a_fresh_one(built: tuple[Path, Any]) -> None:
    """The same store asked twice (caches warm) answers as a store opened for each search."""
    store = _open(built[0], True, url=built[1])
    try:
        first = [[(h.id, h.score) for h in store.search(q, limit=8, threshold=0.3)] for q in _queries()]
        again = [[(h.id, h.score) for h in store.search(q, limit=8, threshold=0.3)] for q in _queries()]
    finally:
        store.close()
    assert first == again


def test_a_warm_embedded_store_embeds_on_the_thread_it_keeps(tmp_path: Path) -> None:
    """A warm handle embeds its queries on one thread it keeps (the keyword side is read meanwhile) and
    answers as a cold handle, which embeds on the calling side; closing the handle ends the thread."""
    import threading

    _build(tmp_path, _records(400), "t")
    queries = _queries()
    cold = []
    for q in queries:  # a fresh handle per query: each search is its first
        with _open(tmp_path, True, "t") as store:
            cold.append([(h.id, h.score) for h in store.search(q, limit=8, threshold=0.3)])
    store = _open(tmp_path, True, "t")
    seen: set[str] = set()
    inner = store.embedder.embed

    def embed(texts: list[str]) -> Any:
        seen.add(threading.current_thread().name)
        return inner(texts)

    store.embedder.embed = embed
    try:
        warm = [[(h.id, h.score) for h in store.search(q, limit=8, threshold=0.3)] for q in queries]
        kept = store._model_thread
        assert kept is not None
    finally:
        store.close()
    assert warm == cold
    assert len([name for name in seen if name.startswith("memctl-embed")]) == 1
    assert store._model_thread is None


@pytest.mark.parametrize("backend", ["embedded", "postgresql"])
def test_a_write_from_another_handle_is_seen_by_the_next_search(tmp_path: Path, backend: str) -> None:
    """A warm handle (a server) sees a save, an update and a delete made through another handle (a CLI)."""
    from contextlib import nullcontext

    from tests.pg import pg_schema

    with nullcontext(None) if backend == "embedded" else pg_schema() as url:
        _build(tmp_path, _records(400), "w", url)
        embedder = FakeEmbedder(64)
        warm = _open(tmp_path, True, "w", url)
        cli = memctl.open_store(
            tmp_path, "w", embedder=embedder, overrides={"embedding_cache": False}, store=url or "embedded"
        )
        try:
            query = "Who set up Zanzibar 777 for Alice?"
            assert all("Zanzibar" not in h.text for h in warm.search(query, threshold=0.0))
            assert _rare(warm, query) == []  # "Zanzibar" counted: in no memory yet
            [new] = cli.add(
                ["Zanzibar 777 was set up by Gina for Alice"], metadata=[{"speaker": "Gina", "session": "s1"}]
            )
            assert warm.search(query, threshold=0.0)[0].id == new
            assert _rare(warm, query) == [new]  # counted again: now rare
            cli.update(new, text="Quokka 778 was set up by Gina")
            assert all(h.id != new for h in warm.search("Zanzibar 777", threshold=0.0))
            assert warm.search("Quokka 778", threshold=0.0)[0].id == new
            cli.update(new, metadata={"speaker": "Zanzibar"})
            assert any(h.id == new for h in warm.search("Zanzibar", threshold=0.0, mode="keyword"))
            cli.delete([new])
            assert all(h.id != new for h in warm.search("Quokka 778", threshold=0.0))
        finally:
            cli.close()
            warm.close()


if __name__ == "__main__":  # regenerate a golden file (only from a commit whose results are the reference)
    import os
    import sys
    import tempfile

    pg = sys.argv[1:] == ["postgresql"]
    with tempfile.TemporaryDirectory() as tmp:
        if pg:
            os.environ.setdefault("MEMCTL_TEST_PG_URL", "")
            from tests.pg import pg_schema

            with pg_schema() as url:
                _build(Path(tmp), _records(1500), url=url)
                GOLDEN["postgresql"].write_text(json.dumps(_results(Path(tmp), url)), encoding="utf-8")
        else:
            _build(Path(tmp), _records(1500))
            GOLDEN["embedded"].write_text(json.dumps(_results(Path(tmp))), encoding="utf-8")


@pytest.mark.parametrize("backend", ["embedded", "postgresql"])
def test_a_search_inside_a_transaction_sees_its_own_writes(tmp_path: Path, backend: str) -> None:
    """Nothing kept between searches is used inside a transaction: its uncommitted rows are found, and
    after a rollback they are gone again."""
    from contextlib import ExitStack

    from tests.pg import pg_schema

    stack = ExitStack()
    url = None if backend == "embedded" else stack.enter_context(pg_schema())
    _build(tmp_path, _records(300), "t", url)
    store = _open(tmp_path, True, "t", url)
    stack.callback(store.close)
    with stack:
        query = "Who fixed Vortigern 991?"
        assert all("Vortigern" not in h.text for h in store.search(query, threshold=0.0))  # caches warm
        assert _rare(store, query) == []
        with pytest.raises(RuntimeError), store.transaction():
            [new] = store.add(["Vortigern 991 was fixed by Gina"], metadata=[{"speaker": "Gina", "session": "s2"}])
            assert store.search(query, threshold=0.0)[0].id == new
            # holds a rare identifier: counted in the transaction, not taken from the count made before it
            # (0, not rare)
            assert _rare(store, query) == [new]
            raise RuntimeError("roll back")
        assert all("Vortigern" not in h.text for h in store.search(query, threshold=0.0))
        assert _rare(store, query) == []


def test_the_flat_scan_gives_faiss_scores_and_is_forgotten_on_a_change(tmp_path: Path) -> None:
    """`VectorIndex.scan` (one pass over every vector, kept for the query) scores as FAISS's own flat search,
    ranks ties in index order, serves a restricted candidate set from the kept scores, and is not reused
    once the index changes."""
    import faiss
    import numpy as np

    _build(tmp_path, _records(300), "s")
    store = _open(tmp_path, True, "s")
    try:
        index = store.vector_index()
        query = store._embed_query("What does Alice say about the backup job?")
        q = np.asarray(query, dtype=np.float32).reshape(1, -1)
        flat = faiss.downcast_index(index.index.index)
        want_scores, want_positions = flat.search(q, 300)
        scores = index.scan(query)
        assert scores == pytest.approx(want_scores[0][np.argsort(want_positions[0])], abs=1e-6)
        got = index.search(query, 20)
        assert [s for _, s in got] == pytest.approx(sorted(want_scores[0], reverse=True)[:20], abs=1e-6)
        assert index._kept_scan(query) is scores  # kept for the query
        only = np.array([seq for seq, _ in got][::3], dtype=np.int64)
        restricted = index.search(query, 5, only)
        assert [seq for seq, _ in restricted] == [seq for seq, _ in got if seq in set(only.tolist())][:5]
        store.add(["Alice: the backup job moved to Mondays at 9"])
        index = store.vector_index()
        assert index._kept_scan(query) is None  # the index changed: a new scan
        assert len(index.scan(query)) == 301
    finally:
        store.close()


def test_a_warm_handle_reports_an_embedding_error_from_its_thread(tmp_path: Path) -> None:
    """The model thread embeds, then scans; an embedding that fails there fails the search with that error,
    and the handle goes on searching afterwards."""
    from memctl.errors import EmbeddingError

    _build(tmp_path, _records(200), "e")
    store = _open(tmp_path, True, "e")
    try:
        store.search("warm up the handle", limit=3, threshold=0.0)
        inner = store.embedder.embed
        store.embedder.embed = lambda texts: (_ for _ in ()).throw(EmbeddingError("model gone"))
        with pytest.raises(EmbeddingError, match="model gone"):
            store.search("What does Jon say about Stripe?", limit=3, threshold=0.0)
        store.embedder.embed = inner
        assert store.search("What does Jon say about Stripe?", limit=3, threshold=0.0)
    finally:
        store.close()


def test_a_restricted_search_is_exact_with_the_index_in_and_out_of_seq_order(tmp_path: Path) -> None:
    """Candidate positions are looked up directly while the flat index is in seq order (a rebuild, appended
    saves) and through the sorted order once an update moved a memory to the end: both rank as brute force."""
    import numpy as np

    _build(tmp_path, _records(300), "o")
    store = _open(tmp_path, True, "o")
    try:
        query = store._embed_query("When did Bob mention Kubernetes?")

        def brute(keys: list[int]) -> list[int]:
            index = store.vector_index()
            _, vectors, seqs = index._flat_parts()
            at = {int(s): p for p, s in enumerate(seqs)}
            scores = {k: float(vectors[at[k]] @ query) for k in keys}
            return sorted(keys, key=lambda k: (-scores[k], at[k]))[:7]

        keys = list(range(5, 300, 4))
        got = [seq for seq, _ in store.vector_index().search(query, 7, np.asarray(keys, dtype=np.int64))]
        assert store.vector_index()._positions_cache[1] is None  # in seq order: no sort needed
        assert got == brute(keys)
        first = store.db.execute("SELECT id FROM memories WHERE seq = 1").fetchone()[0]
        store.update(first, text="Bob: Kubernetes moved to port 8443 on Mondays at 9")
        index = store.vector_index()
        got = [seq for seq, _ in index.search(query, 7, np.asarray(keys + [1], dtype=np.int64))]
        assert index._positions_cache[1] is not None  # the updated memory went to the end
        assert got == brute(keys + [1])
    finally:
        store.close()


def test_a_second_scan_moves_the_vectors_to_huge_pages_and_scores_the_same(tmp_path: Path) -> None:
    """The first scan of a vector buffer only notes it (a one-shot search pays nothing); the second asks for
    2 MiB pages once (memctl/store/huge_pages.py), and the scores do not change."""
    import numpy as np

    from memctl.store import huge_pages

    embedder = FakeEmbedder(384)
    texts = [f"note {i}: the backup job moved to port {8000 + i}" for i in range(2000)]  # 3 MB of vectors
    with memctl.open_store(tmp_path, "h", embedder=embedder, overrides={"embedding_cache": False}) as store:
        store.add(texts)
        index = store.vector_index()
        first = index.scan(embedder.embed(["port 8443"])[0]).copy()
        assert index._huge_pages[1] == 0  # noted, not moved
        second = index.scan(embedder.embed(["the backup job"])[0])
        assert index._huge_pages[1] == 2000 * 384 * 4  # moved (or found impossible) once
        index._scans = {}  # scanned again from the moved pages
        assert np.array_equal(index.scan(embedder.embed(["port 8443"])[0]), first)
        assert np.array_equal(index.scan(embedder.embed(["the backup job"])[0]), second)
    assert huge_pages.collapse(0, 100) is False  # no whole 2 MiB page inside: nothing asked


def test_a_large_store_scans_on_the_model_thread_and_answers_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From SCAN_MIN vectors on (lowered here), a warm handle's model thread scans the index after embedding
    the query, and the search uses that scan: the same answers as a cold handle and as FAISS's own top-k."""
    import threading

    from memctl.store import vector_index
    from memctl.store.embedded import search as embedded_search

    _build(tmp_path, _records(400), "t")
    queries = _queries()
    with _open(tmp_path, True, "t") as store:
        want = [[(h.id, h.score) for h in store.search(q, limit=8, threshold=0.3)] for q in queries]
    monkeypatch.setattr(vector_index, "SCAN_MIN", 1)
    monkeypatch.setattr(embedded_search, "SCAN_MIN", 1)
    threads: list[str] = []
    scan = vector_index.VectorIndex.scan

    def noted(self: Any, query: Any) -> Any:
        threads.append(threading.current_thread().name)
        return scan(self, query)

    monkeypatch.setattr(vector_index.VectorIndex, "scan", noted)
    store = _open(tmp_path, True, "t")
    try:
        store.search("warm up", limit=3, threshold=0.0)
        threads.clear()
        got = [[(h.id, h.score) for h in store.search(q, limit=8, threshold=0.3)] for q in queries]
    finally:
        store.close()
    assert [[i for i, _ in g] for g in got] == [[i for i, _ in w] for w in want]
    for g, w in zip(got, want, strict=True):
        assert [s for _, s in g] == pytest.approx([s for _, s in w], abs=2e-6)
    assert any(name.startswith("memctl-embed") for name in threads)
