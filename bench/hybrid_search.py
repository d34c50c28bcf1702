"""Hybrid (default) search against its parts, on one store, in one run.

    python bench/hybrid_search.py [--sizes 10000,100000] [--queries 50] [--runs 5] [--profile]

Builds an embedded store of chat-like memories (speaker, session and date metadata; names, numbers
and ordinary words; vectors from the deterministic hashing embedder, so the build is fast) and times,
query by query in a rotating order (a busy machine's slow moments fall on all alike):

- `store.search(query)` in the default mode (hybrid, score fusion, calibrated relevance with the
  parameters shipped for MiniLM) with the query embedding excluded (each query's vectors computed
  before the clock starts, also those of the query without its common names);
- its parts: the bare vector-index search for the hybrid's 50 candidates (`VectorIndex.search`, i.e.
  FAISS) plus the bare FTS5 BM25 query for 50 on the same store's connection;
- the same hybrid search for questions whose words are in every memory ("user": every memory says whose
  it is), and `store.search(query, mode="dense")`, which runs no keyword query, beside bare FAISS.

Prints medians (ms) of `--runs` passes over the queries and hybrid / (FAISS + FTS5); "nothing kept" is
the hybrid search as the first one after a write (the store's per-generation caches emptied before each
query: keyword document frequencies, named-speaker candidates, per-row facts). `--profile`
also prints a cProfile of the hybrid searches at each size.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import table  # noqa: E402

MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # whose shipped calibration scores the results
NAMES = ["Alice", "Bob", "Caroline", "Melanie", "Jon", "Gina", "Priya", "Tomasz"]
TOPICS = [
    "the deploy pipeline",
    "the staging database",
    "the UI theme",
    "the backup job",
    "the API gateway",
    "customer billing",
    "the team standup",
    "the search index",
    "log retention",
    "the mobile app",
    "my sister's wedding",
    "a pottery class",
    "the dog Max",
    "marathon training",
    "a trip to Lisbon",
]
VERBS = [
    "uses",
    "depends on",
    "moved to",
    "is configured with",
    "must avoid",
    "prefers",
    "runs on",
    "is owned by",
    "started",
    "finished",
    "talked about",
    "was worried about",
]
OBJECTS = [
    "PostgreSQL 16",
    "Kubernetes",
    "dark mode",
    "a nightly cron",
    "port 8443",
    "Stripe",
    "Mondays at 9",
    "OpenSearch",
    "30 days",
    "React Native",
    "Terraform",
    "Redis",
    "the acme-logs bucket",
    "Frankfurt",
    "three weeks",
    "her new job",
    "the blue vase",
    "a half marathon",
    "order 48213",
    "version 2.4",
]
QUESTIONS = [
    "What does {n} say about {t}?",
    "When did {n} mention {o}?",
    "Who talked about {t}?",
    "How long has {t} {v} {o}?",
    "What did {n} decide on {t} and {o}?",
    "Which day is {t}?",
    "Where does {t} run?",
    "Why was {n} worried about {o}?",
]


def make_texts(n: int, seed: int = 0) -> tuple[list[str], list[dict[str, Any]]]:
    rng = random.Random(seed)
    texts, metas = [], []
    session, turn = 0, 0
    for i in range(n):
        if turn == 0 or rng.random() < 0.05:
            session, turn = session + 1, 0
        turn += 1
        speaker = NAMES[(session + turn) % len(NAMES)]
        other = rng.choice(NAMES)
        text = (
            f"{speaker} (user {i % 7}): {rng.choice(TOPICS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"
            + (f", {other} said" if rng.random() < 0.3 else "")
            + (f" (ticket {rng.randrange(10**5)})" if rng.random() < 0.2 else "")
        )
        texts.append(text if rng.random() < 0.8 else f"Yes! {rng.choice(OBJECTS)}.")
        metas.append(
            {
                "speaker": speaker,
                "session": f"s{session}",
                "date": f"2024-{1 + session % 12:02d}-{1 + session % 28:02d}",
                "seq": i,
            }
        )
    return texts, metas


def make_queries(count: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        q = rng.choice(QUESTIONS).format(
            n=rng.choice(NAMES), t=rng.choice(TOPICS), o=rng.choice(OBJECTS), v=rng.choice(VERBS)
        )
        out.append(q if i % 5 else q.rstrip("?") + f" ticket {rng.randrange(10**5)}?")
    return out


# Questions made only of words every memory holds (and stop words): the keyword side has nothing rare to rank by.
COMMON_QUESTIONS = ["What does the user say?", "user", "Which user?", "What did the user say to the user?"]


def build(folder: Path, n: int) -> Any:
    import memctl
    from memctl.embeddings import FakeEmbedder

    embedder = FakeEmbedder(384)
    texts, metas = make_texts(n)
    store = memctl.open_store(folder, "bench", embedder=embedder, overrides={"embedding_cache": False})
    for start in range(0, n, 10_000):
        end = min(start + 10_000, n)
        store.insert_records(
            [{"id": f"m{i:06d}", "text": texts[i], "area": "main", "metadata": metas[i]} for i in range(start, end)],
            embedder.embed(texts[start:end]),
            embedder.info,
        )
    store.rebuild_index()
    return store


def prepare(store: Any, queries: list[str]) -> None:
    """Query embeddings computed now (not timed), and the MiniLM calibration used (a fake model has none)."""
    from memctl.search.relevance import shipped

    vectors: dict[str, Any] = {}
    embed = store._embed_query

    def cached(query: str) -> Any:
        if query not in vectors:
            vectors[query] = embed(query)
        return vectors[query]

    store._embed_query = cached
    calibration = shipped(MODEL)
    store.calibration = lambda: calibration
    for q in queries + COMMON_QUESTIONS:
        store.search(q)  # fills the cache with every text the search embeds


def parts(store: Any) -> tuple[Any, Any]:
    from memctl.store.keyword import match_expression, query_tokens

    index = store.vector_index()
    from memctl.search.tuning import TUNING

    depth = TUNING.candidates

    def dense(query: str) -> Any:
        return index.search(store._embed_query(query), depth, None)

    def fts(query: str) -> Any:
        expression = match_expression(query_tokens(query))
        return store.db.execute(
            "SELECT rowid, -bm25(memories_fts) AS s FROM memories_fts WHERE memories_fts "
            "MATCH ? ORDER BY s DESC LIMIT ?",
            (expression, depth),
        ).fetchall()

    return dense, fts


def interleaved(fns: dict[str, Any], queries: list[str], runs: int) -> dict[str, list[float]]:
    names, passes = list(fns), {name: [] for name in fns}
    for _ in range(runs):
        samples: dict[str, list[float]] = {name: [] for name in names}
        for i, q in enumerate(queries):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                start = time.perf_counter()
                fns[name](q)
                samples[name].append(time.perf_counter() - start)
        for name in names:
            passes[name].append(statistics.median(samples[name]))
    return passes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--dump", help="write each size's results (ids, scores) to this JSON file")
    args = parser.parse_args()
    queries = make_queries(args.queries)
    rows, out, dumped = [], [], {}
    load_before = os.getloadavg()[0]
    for n in [int(s) for s in args.sizes.split(",")]:
        work = Path(tempfile.mkdtemp(prefix="memctl-bench-hybrid-"))
        store = build(work, n)
        prepare(store, queries)
        dense, fts = parts(store)
        if args.dump:
            dumped[str(n)] = [[(h.id, h.score) for h in store.search(q)] for q in queries]
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            for q in queries:
                store.search(q)
            profile.disable()
            text = io.StringIO()
            pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(45)
            print(f"--- profile at {n:,} ---\n{text.getvalue()}")

        def fresh(query: str, store: Any = store) -> Any:  # the first search after a write: nothing kept
            store.__dict__.pop("_memo_held", None)
            return store.search(query)

        def dense_mode(query: str, store: Any = store) -> Any:
            return store.search(query, mode="dense")

        passes = interleaved(
            {"hybrid": store.search, "fresh": fresh, "faiss": dense, "fts": fts, "dense": dense_mode},
            queries,
            args.runs,
        )
        common = interleaved({"hybrid": store.search, "faiss": dense}, COMMON_QUESTIONS * 5, args.runs)
        hybrid, first, faiss_ms, fts_ms, dense_ms = (
            statistics.median(passes[k]) * 1000 for k in ("hybrid", "fresh", "faiss", "fts", "dense")
        )
        common_ms, common_faiss = (statistics.median(common[k]) * 1000 for k in ("hybrid", "faiss"))
        rows.append(
            [
                f"{n:,}",
                hybrid,
                first,
                faiss_ms,
                fts_ms,
                hybrid / (faiss_ms + fts_ms),
                first / (faiss_ms + fts_ms),
                common_ms,
                common_ms / common_faiss,
                dense_ms,
                dense_ms / faiss_ms,
                "≤ 20 ms" if n >= 100_000 else "",
            ]
        )
        out.append(
            {
                "size": n,
                "hybrid_ms": hybrid,
                "hybrid_fresh_ms": first,
                "faiss_ms": faiss_ms,
                "fts_ms": fts_ms,
                "ratio": hybrid / (faiss_ms + fts_ms),
                "hybrid_common_word_ms": common_ms,
                "dense_mode_ms": dense_ms,
                "hybrid_passes_ms": [p * 1000 for p in passes["hybrid"]],
            }
        )
        store.close()
        shutil.rmtree(work, ignore_errors=True)
    print(
        table(
            f"hybrid store.search vs its parts, embedded, query embedding excluded; median of {args.runs} passes "
            f"x {args.queries} queries; load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, "
            f"{os.cpu_count()} CPUs",
            [
                "memories",
                "hybrid ms",
                "hybrid, nothing kept ms",
                "FAISS top-50 ms",
                "FTS5 top-50 ms",
                "hybrid / parts",
                "nothing kept / parts",
                "hybrid, words in every memory ms",
                "… / FAISS",
                "dense mode ms",
                "dense / FAISS",
                "goal (hybrid)",
            ],
            rows,
        )
    )
    print(json.dumps(out))
    if args.dump:
        Path(args.dump).write_text(json.dumps(dumped, indent=0), encoding="utf-8")


if __name__ == "__main__":
    main()
