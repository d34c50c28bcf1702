"""The same store interface on two backends at 100k memories: embedded (SQLite + FAISS) vs PostgreSQL + pgvector.

    python bench/postgres_vs_embedded.py [--size 100000] [--runs 5] [--url postgresql://...]

Without --url (or MEMCTL_TEST_PG_URL) a throwaway server is started with scripts/pg_test_server.sh
and stopped at the end. The PostgreSQL side works in a fresh schema that is dropped afterwards.
Vectors are synthetic (384-d, 100 clusters, unit length, as in bench/store_ops.py) and given to
both sides, so only the stores are measured; hybrid search embeds its query with the fake embedder.
Figures are medians; recall@10 is against exact inner-product search over the same vectors.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import REPO, table  # noqa: E402
from bench.store_ops import DIM, THRESHOLD, make_data  # noqa: E402


def median_ms(fn, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def build(store, embedder, vectors, areas, texts) -> float:
    """Bulk load in batches of 10k (one transaction each); returns memories per second."""
    start = time.perf_counter()
    for begin in range(0, len(texts), 10_000):
        end = min(begin + 10_000, len(texts))
        records = [{"id": f"m{i:06d}", "text": texts[i], "area": areas[i]} for i in range(begin, end)]
        store.insert_records(records, vectors[begin:end], embedder.info)
    store.rebuild_index()
    return len(texts) / (time.perf_counter() - start)


def measure(store, embedder, vectors, queries, areas, texts, runs: int) -> dict[str, float]:
    rng = np.random.default_rng(1)
    extra = rng.standard_normal((1000, DIM)).astype(np.float32)
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    counter = iter(range(10**9))

    def save_one() -> None:
        i = next(counter)
        store.insert_records([{"text": f"new memory {i}"}], extra[i % 1000 : i % 1000 + 1], embedder.info)

    batches = iter([[f"m{j:06d}" for j in range(1 + 100 * k, 1 + 100 * (k + 1)) if j % 100] for k in range(400)])
    truth = [set(np.argsort(-(vectors @ q))[:10].tolist()) for q in queries]
    got = [{int(h.id[1:]) for h in store.search_vector(q, limit=10, threshold=0.0)} for q in queries]
    recall = sum(len(a & b) for a, b in zip(got, truth, strict=True)) / (10 * len(queries))
    text_queries = [texts[i] for i in range(0, len(texts), max(1, len(texts) // len(queries)))][: len(queries)]
    per_query = len(queries)
    return {
        "save": median_ms(save_one, max(runs, 50)),
        "delete": median_ms(lambda: store.delete(next(batches)), max(runs, 10)),
        "flat": median_ms(lambda: [store.search_vector(q, limit=10, threshold=0.0) for q in queries], runs) / per_query,
        "area": median_ms(
            lambda: [store.search_vector(q, limit=10, threshold=THRESHOLD, area="solutions") for q in queries], runs
        )
        / per_query,
        "filter": median_ms(
            lambda: [
                store.search_vector(q, limit=10, threshold=THRESHOLD, filter="area == 'solutions'") for q in queries
            ],
            1,
        )
        / per_query,
        "hybrid": median_ms(lambda: [store.search(t, limit=10, threshold=0.0) for t in text_queries], runs) / per_query,
        "recall": recall,
    }


def start_server() -> tuple[str, str]:
    out = subprocess.run(
        ["bash", str(REPO / "scripts" / "pg_test_server.sh"), "start"], check=True, capture_output=True, text=True
    ).stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return values["MEMCTL_TEST_PG_URL"], values["MEMCTL_TEST_PG_DIR"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--url", default=os.environ.get("MEMCTL_TEST_PG_URL"))
    args = parser.parse_args()
    import psycopg

    import memctl
    from memctl.embeddings import FakeEmbedder
    from tests.pg import with_options

    url, server_dir = (args.url, None) if args.url else start_server()
    schema = f"memctl_bench_{secrets.token_hex(4)}"
    work = Path(tempfile.mkdtemp(prefix="memctl-bench-pg-"))
    vectors, queries, areas, texts = make_data(args.size)
    results = {}
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        overrides = {"embedding_cache": False}
        for name, store_arg in (("embedded", "embedded"), ("postgres", with_options(url, schema))):
            embedder = FakeEmbedder(DIM)
            with memctl.open_store(work, "bench", embedder=embedder, overrides=overrides, store=store_arg) as store:
                rate = build(store, embedder, vectors, areas, texts)
                results[name] = {"bulk": rate, **measure(store, embedder, vectors, queries, areas, texts, args.runs)}
            print(f"{name}: done", file=sys.stderr)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        shutil.rmtree(work, ignore_errors=True)
        if server_dir:
            subprocess.run(["bash", str(REPO / "scripts" / "pg_test_server.sh"), "stop", server_dir], check=False)
    e, p = results["embedded"], results["postgres"]
    rows = [
        ["bulk insert, 10k per transaction (memories/s)", e["bulk"], p["bulk"], p["bulk"] / e["bulk"]],
        ["save 1 memory (ms)", e["save"], p["save"], p["save"] / e["save"]],
        ["writes/s, one writer (1000 / save ms)", 1000 / e["save"], 1000 / p["save"], e["save"] / p["save"]],
        ["delete 100 (ms)", e["delete"], p["delete"], p["delete"] / e["delete"]],
        ["search top-10, unfiltered (ms)", e["flat"], p["flat"], p["flat"] / e["flat"]],
        ["search top-10, 1 % area (ms)", e["area"], p["area"], p["area"] / e["area"]],
        ["search top-10, filter expression on 1 % (ms)", e["filter"], p["filter"], p["filter"] / e["filter"]],
        ["hybrid search incl. fake embedding (ms)", e["hybrid"], p["hybrid"], p["hybrid"] / e["hybrid"]],
        ["recall@10 vs exact, unfiltered", e["recall"], p["recall"], ""],
    ]
    print(
        table(
            f"{args.size:,} memories, {DIM}-d; medians of >= {args.runs} runs; ratio = PostgreSQL / embedded",
            ["operation", "embedded", "PostgreSQL", "ratio"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
