"""Metadata filters at 100k memories: compiled to SQL (memctl/store/filter_sql.py) vs the Python evaluator.

    python bench/filters.py [--size 100000] [--runs 5] [--url postgresql://...] [--backends embedded,postgres]

Both paths run in the same process on the same store: a filtered top-10 dense search
(`store.search_vector`, query vector given: no embedding), once with the filter compiled to SQL
and once with the compiler switched off so every row goes through the Python evaluator (what
memctl did before). Each filter matches 1 % of the memories; the table prints medians, the ratio
and whether both paths returned the same hits. Vectors are synthetic (bench/store_ops.py); the
PostgreSQL store is loaded without its HNSW index (filtered searches are exact and do not use it).
Without --url (or MEMCTL_TEST_PG_URL) a throwaway server is started and stopped.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import pg_server_url, stop_pg_servers, table  # noqa: E402
from bench.store_ops import make_data  # noqa: E402

FILTERS = [
    ("project == 'p7'", "field equality"),
    ("'t7' in tags", "list membership"),
    ("lang == 'l3' and priority == 9", "two fields"),
    ("project in ['p1', 'p2'] and priority < 5", "in-list + range"),
    ("area == 'solutions'", "column"),
    ("score >= 99.0", "range only (no index term)"),
]


def metadata(i: int) -> dict:
    return {
        "project": f"p{i % 100}",
        "tags": [f"t{(i * 7) % 100}", f"x{i % 3}"],
        "priority": i % 10,
        "lang": f"l{(i // 10) % 10}",
        "score": (i % 1000) / 10,
    }


def median_ms(fn, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def load(store, embedder, vectors, texts, areas) -> float:
    start = time.perf_counter()
    for begin in range(0, len(texts), 10_000):
        end = min(begin + 10_000, len(texts))
        records = [
            {"id": f"m{i:06d}", "text": texts[i], "area": areas[i], "metadata": metadata(i)} for i in range(begin, end)
        ]
        store.insert_records(records, vectors[begin:end], embedder.info)
    return len(texts) / (time.perf_counter() - start)


def measure(store, queries, runs: int) -> dict[str, tuple[float, float, int, bool]]:
    from memctl.store.filters import compile_filter

    out = {}
    for source, _ in FILTERS:
        flt = compile_filter(source)

        def search(flt=flt):
            return [[h.id for h in store.search_vector(q, limit=10, threshold=0.0, filter=flt)] for q in queries]

        sql_hits = search()
        sql_ms = median_ms(search, runs) / len(queries)
        matches = len(store.matching_ids(flt))
        with mock.patch("memctl.store.filter_sql.compile_filter_sql", return_value=None):
            py_hits = search()
            py_ms = median_ms(search, max(1, runs // 2)) / len(queries)
        out[source] = (sql_ms, py_ms, matches, sql_hits == py_hits)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=5)
    parser.add_argument("--url")
    parser.add_argument("--backends", default="embedded,postgres")
    args = parser.parse_args()

    import memctl
    from memctl.embeddings import FakeEmbedder

    vectors, queries, areas, texts = make_data(args.size)
    queries = queries[: args.queries]
    embedder = FakeEmbedder(vectors.shape[1])
    results, loads, servers = {}, {}, []
    root = Path(tempfile.mkdtemp(prefix="memctl-bench-filters-"))
    try:
        for backend in args.backends.split(","):
            url, schema = None, None
            if backend == "postgres":
                import psycopg

                from tests.pg import with_options

                base = pg_server_url(args.url, servers)
                schema = f"bench_filters_{secrets.token_hex(4)}"
                with psycopg.connect(base, autocommit=True) as conn:
                    conn.execute(f"CREATE SCHEMA {schema}")
                url = with_options(base, schema)
            try:
                with memctl.open_store(
                    root, backend, embedder=embedder, store=url or "embedded", overrides={"embedding_cache": False}
                ) as store:
                    if backend == "postgres":  # no HNSW upkeep during the load: filtered search is exact
                        with mock.patch.object(type(store), "_ensure_vector_index", lambda self, dim: None):
                            loads[backend] = load(store, embedder, vectors, texts, areas)
                        # What autovacuum does within a minute of a bulk load (insert threshold): the GIN pending
                        # list flushed, the visibility map set. Measured before it instead, a run depends on
                        # whether autovacuum ran (and competed for the CPU) during the measurement.
                        for name in ("memctl_memories", "memctl_meta_ranges"):  # the second: from m006 on
                            if store.conn.execute("SELECT to_regclass(%s)", (name,)).fetchone()[0]:
                                store.conn.execute(f"VACUUM ANALYZE {name}")
                    else:
                        loads[backend] = load(store, embedder, vectors, texts, areas)
                        store.rebuild_index()
                    results[backend] = measure(store, queries, args.runs)
            finally:
                if schema:
                    with psycopg.connect(base, autocommit=True) as conn:
                        conn.execute(f"DROP SCHEMA {schema} CASCADE")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        stop_pg_servers(servers)

    rows = []
    for source, kind in FILTERS:
        row = [f"{source}  ({kind})"]
        for backend in results:
            sql_ms, py_ms, matches, same = results[backend][source]
            row += [f"{matches}", f"{sql_ms:.1f}", f"{py_ms:.1f}", f"{py_ms / sql_ms:.0f}×", "yes" if same else "NO"]
        rows.append(row)
    header = ["filter (1 % of the store)"]
    for backend in results:
        header += [f"{backend}: matches", "SQL ms", "Python ms", "ratio", "same hits"]
    title = (
        f"{args.size:,} memories; filtered top-10 search, median ms per query ({args.queries} queries × "
        f"{args.runs} runs); load: " + ", ".join(f"{b} {r:,.0f}/s" for b, r in loads.items())
    )
    print(table(title, header, rows))


if __name__ == "__main__":
    main()
