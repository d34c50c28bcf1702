"""P2–P4 at 100k memories: memctl's embedded store vs LangChain's FAISS wrapper (what Agent Zero runs).

    python bench/store_ops.py [--size 100000] [--runs 5]

Vectors are synthetic (384-d, 100 clusters, unit length) and given to both sides, so only the
stores are measured. 1 % of the memories are in area `solutions`; filtered searches ask for it.
Peer: langchain-community FAISS with IndexFlatIP, add_embeddings/delete + save_local, load_local,
similarity_search_with_score_by_vector(filter=..., k=10) — the calls Agent Zero makes. The
unfiltered search is also timed against the bare `faiss.IndexFlatIP.search` on the same vectors,
query by query in a rotating order (so a busy machine's slow moments fall on both alike).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import table  # noqa: E402

DIM, CLUSTERS, THRESHOLD = 384, 100, 0.75


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((CLUSTERS, DIM)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    labels = rng.integers(0, CLUSTERS, n)
    vectors = centers[labels] + rng.standard_normal((n, DIM)).astype(np.float32) * (0.8 / np.sqrt(DIM))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    areas = ["solutions" if i % 100 == 0 else "main" for i in range(n)]
    texts = [f"memory {i} in cluster {labels[i]}" for i in range(n)]
    queries = centers[rng.integers(0, CLUSTERS, 50)] + rng.standard_normal((50, DIM)).astype(np.float32) * (
        0.5 / np.sqrt(DIM)
    )
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return vectors.astype(np.float32), queries.astype(np.float32), areas, texts


def build_memctl(root: Path, vectors, areas, texts):
    import memctl
    from memctl.embeddings import FakeEmbedder

    embedder = FakeEmbedder(DIM)
    store = memctl.open_store(root, "bench", embedder=embedder, overrides={"embedding_cache": False})
    for start in range(0, len(texts), 10_000):
        end = min(start + 10_000, len(texts))
        records = [{"id": f"m{i:06d}", "text": texts[i], "area": areas[i]} for i in range(start, end)]
        store.insert_records(records, vectors[start:end], embedder.info)
    store.rebuild_index()
    return store, embedder


def build_peer(folder: Path, vectors, areas, texts):
    import faiss
    from langchain_community.docstore.in_memory import InMemoryDocstore
    from langchain_community.vectorstores import FAISS
    from langchain_community.vectorstores.utils import DistanceStrategy
    from langchain_core.embeddings import Embeddings

    class Unused(Embeddings):
        def embed_documents(self, texts):  # pragma: no cover - vectors are always given
            raise NotImplementedError

        def embed_query(self, text):  # pragma: no cover
            raise NotImplementedError

    db = FAISS(
        embedding_function=Unused(),
        index=faiss.IndexFlatIP(DIM),
        docstore=InMemoryDocstore(),
        index_to_docstore_id={},
        distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT,
        relevance_score_fn=lambda d: min(1.0, max(0.0, (1 + d) / 2)),
    )
    db.add_embeddings(
        list(zip(texts, vectors.tolist(), strict=True)),
        metadatas=[{"area": a, "id": f"m{i:06d}"} for i, a in enumerate(areas)],
        ids=[f"m{i:06d}" for i in range(len(texts))],
    )
    db.save_local(str(folder))
    return db, Unused()


def timed(fn, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def interleaved(fns: dict, queries, runs: int) -> dict[str, float]:
    """Median seconds per query of each function, called query by query in a rotating order, so that a
    busy machine's slow moments fall on all of them alike (the same run, the same vectors)."""
    names, samples = list(fns), {name: [] for name in fns}
    for _ in range(runs):
        for i, q in enumerate(queries):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                start = time.perf_counter()
                fns[name](q)
                samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    n, runs = args.size, args.runs
    vectors, queries, areas, texts = make_data(n)
    work = Path(tempfile.mkdtemp(prefix="memctl-bench-ops-"))
    store, embedder = build_memctl(work / "memctl", vectors, areas, texts)
    peer, peer_embedder = build_peer(work / "peer", vectors, areas, texts)
    from langchain_community.vectorstores import FAISS

    rng = np.random.default_rng(1)
    extra = rng.standard_normal((1000, DIM)).astype(np.float32)
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    counter = iter(range(10**9))

    def ours_add() -> None:
        i = next(counter)
        store.insert_records([{"text": f"new memory {i}"}], extra[i % 1000 : i % 1000 + 1], embedder.info)

    def peer_add() -> None:
        i = next(counter)
        peer.add_embeddings(
            [(f"new memory {i}", extra[i % 1000].tolist())], metadatas=[{"area": "main"}], ids=[f"new{i}"]
        )
        peer.save_local(str(work / "peer"))

    to_delete = iter([[f"m{j:06d}" for j in range(1 + 100 * k, 1 + 100 * (k + 1)) if j % 100] for k in range(400)])
    ours_delete = lambda: store.delete(next(to_delete))  # noqa: E731
    half = n // 2 + 1
    peer_delete_ids = iter(
        [[f"m{j:06d}" for j in range(half + 100 * k, half + 100 * (k + 1)) if j % 100] for k in range(400)]
    )

    def peer_delete() -> None:
        peer.delete(next(peer_delete_ids))
        peer.save_local(str(work / "peer"))

    p2 = (timed(ours_add, max(runs, 20)), timed(peer_add, runs))
    p3 = (timed(ours_delete, max(runs, 10)), timed(peer_delete, runs))

    def ours_open() -> None:
        import memctl

        with memctl.open_store(work / "memctl", "bench", embedder=embedder) as fresh:
            fresh.vector_index()

    p4_open = (
        timed(ours_open, runs),
        timed(lambda: FAISS.load_local(str(work / "peer"), peer_embedder, allow_dangerous_deserialization=True), runs),
    )

    # Search: unfiltered top-10, and filtered to the 1 % area with the default threshold.
    store.vector_index()
    area_mask = np.array([a == "solutions" for a in areas])
    area_vectors, area_rows = vectors[area_mask], np.nonzero(area_mask)[0]
    truth = []
    for q in queries:
        rel = (1 + area_vectors @ q) / 2
        truth.append({f"m{area_rows[i]:06d}" for i in np.nonzero(rel >= THRESHOLD)[0]})
    live = {m.id for m, _ in store.iter_all(area="solutions")}
    truth = [t & live for t in truth]
    import faiss

    bare = faiss.IndexFlatIP(DIM)  # the bare FAISS search on the same vectors: the floor for memctl's search
    bare.add(vectors)
    flat = interleaved(
        {
            "memctl": lambda q: store.search_vector(q, limit=10, threshold=0.0),
            "bare": lambda q: bare.search(q.reshape(1, -1), 10),
        },
        queries,
        runs,
    )
    ours_flat, bare_flat = flat["memctl"], flat["bare"]
    ours_filtered = timed(
        lambda: [store.search_vector(q, limit=10, threshold=THRESHOLD, area="solutions") for q in queries], runs
    ) / len(queries)
    peer_flat = timed(
        lambda: [peer.similarity_search_with_score_by_vector(q.tolist(), k=10) for q in queries], runs
    ) / len(queries)
    peer_filtered = timed(
        lambda: [
            peer.similarity_search_with_score_by_vector(q.tolist(), k=10, filter={"area": "solutions"}) for q in queries
        ],
        runs,
    ) / len(queries)
    ours_all = [
        {h.id for h in store.search_vector(q, limit=100_000, threshold=THRESHOLD, area="solutions")} for q in queries
    ]
    peer_hits = []
    for q in queries:
        docs = peer.similarity_search_with_score_by_vector(q.tolist(), k=10, filter={"area": "solutions"})
        peer_hits.append({d.metadata["id"] for d, score in docs if (1 + score) / 2 >= THRESHOLD})
    want10 = sum(min(10, len(t)) for t in truth)
    ours10 = sum(
        len({h.id for h in store.search_vector(q, limit=10, threshold=THRESHOLD, area="solutions")} & t)
        for q, t in zip(queries, truth, strict=True)
    )
    peer10 = sum(len(h & t) for h, t in zip(peer_hits, truth, strict=True))
    ours_complete = sum(len(a & t) for a, t in zip(ours_all, truth, strict=True))
    total_true = sum(len(t) for t in truth)

    ms = lambda s: s * 1000  # noqa: E731
    rows = [
        ["P2 save 1 + persist (ms)", ms(p2[0]), ms(p2[1]), p2[1] / p2[0], "≤ 5 ms, ≥ 200×"],
        ["P3 delete 100 + persist (ms)", ms(p3[0]), ms(p3[1]), p3[1] / p3[0], "≤ 20 ms, ≥ 50×"],
        ["P4 open store (ms)", ms(p4_open[0]), ms(p4_open[1]), p4_open[1] / p4_open[0], "≤ 300 ms"],
        ["search top-10, unfiltered (ms)", ms(ours_flat), ms(peer_flat), peer_flat / ours_flat, ""],
        [
            "  vs bare IndexFlatIP.search (ms)",
            ms(ours_flat),
            ms(bare_flat),
            bare_flat / ours_flat,
            "memctl ≤ 1.1× bare",
        ],
        [
            "search top-10, 1 % area filter (ms)",
            ms(ours_filtered),
            ms(peer_filtered),
            peer_filtered / ours_filtered,
            "≤ 1.2× unfiltered",
        ],
        ["filtered: true matches in top-10", f"{ours10}/{want10}", f"{peer10}/{want10}", "", "all"],
        ["filtered: all true matches ≥ 0.75", f"{ours_complete}/{total_true}", "n/a (k-capped)", "", "all"],
        [
            "filtered: queries with no result",
            sum(
                1
                for t, q in zip(truth, queries, strict=True)
                if t and not store.search_vector(q, limit=10, threshold=THRESHOLD, area="solutions")
            ),
            sum(1 for h, t in zip(peer_hits, truth, strict=True) if t and not h),
            "",
            "0",
        ],
    ]
    print(
        table(
            f"P2–P4: {n:,} memories, {DIM}-d, medians of ≥ {runs} runs; ratio = peer / memctl",
            ["operation", "memctl", "LangChain FAISS", "ratio", "target"],
            rows,
        )
    )
    print(f"filtered/unfiltered search time (memctl): {ours_filtered / ours_flat:.2f}×")
    print(f"unfiltered search, memctl / bare IndexFlatIP: {ours_flat / bare_flat:.2f}×")
    print(
        json.dumps(
            {
                "p2_ms": ms(p2[0]),
                "p2_peer_ms": ms(p2[1]),
                "p3_ms": ms(p3[0]),
                "p3_peer_ms": ms(p3[1]),
                "open_ms": ms(p4_open[0]),
                "open_peer_ms": ms(p4_open[1]),
                "flat_ms": ms(ours_flat),
                "bare_flat_ms": ms(bare_flat),
                "filtered_ms": ms(ours_filtered),
                "true": total_true,
                "found": ours_complete,
            }
        )
    )
    store.close()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
