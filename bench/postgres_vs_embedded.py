"""The same store interface on two backends at 100k memories: embedded (SQLite + FAISS) vs PostgreSQL + pgvector.

    python bench/postgres_vs_embedded.py [--size 100000] [--runs 5] [--url postgresql://...]

Without --url (or MEMCTL_TEST_PG_URL) a throwaway server is started with scripts/pg_test_server.sh
and stopped at the end. The PostgreSQL side works in a fresh schema that is dropped afterwards.
Vectors are synthetic (384-d, 100 clusters, unit length, as in bench/store_ops.py) and given to
both sides, so only the stores are measured; hybrid search embeds its query with the fake embedder.
Figures are medians; recall@10 is against exact inner-product search over the same vectors.

    python bench/postgres_vs_embedded.py --baseline /tmp/before [--rounds 2] [--profile]

--baseline DIR (a tree of an older memctl, e.g. `git archive d5b5968 | tar -x -C /tmp/before`) compares
that code with this one on the same stores, in one run: each store is built by the baseline, then every
round measures it with the baseline and then with this tree (child processes; the PostgreSQL schema is
upgraded in place by this tree's first open, so both see the same rows and HNSW graph). The embedded
side also times the bare `faiss.IndexFlatIP.search` over the same vectors, query by query against
memctl's unfiltered search. --profile prints a cProfile of each side's hybrid searches to stderr.
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


def measure(
    store, embedder, vectors, queries, areas, texts, runs: int, round_no: int = 0, profile: bool = False
) -> dict[str, float]:
    rng = np.random.default_rng(1)
    extra = rng.standard_normal((1000, DIM)).astype(np.float32)
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    counter = iter(range(10**9))

    def save_one() -> None:
        i = next(counter)
        store.insert_records([{"text": f"new memory {i}"}], extra[i % 1000 : i % 1000 + 1], embedder.info)

    first = 50 * round_no  # each measuring pass deletes batches of its own
    batches = iter(
        [[f"m{j:06d}" for j in range(1 + 100 * k, 1 + 100 * (k + 1)) if j % 100] for k in range(first, first + 400)]
    )
    present = sorted(int(m.id[1:]) for m in store.get([f"m{i:06d}" for i in range(len(texts))]))  # earlier deletes
    kept = vectors[present]
    truth = [{present[j] for j in np.argsort(-(kept @ q))[:10].tolist()} for q in queries]
    got = [
        {int(h.id[1:]) for h in store.search_vector(q, limit=10, threshold=0.0) if h.id[1:].isdigit()} for q in queries
    ]
    recall = sum(len(a & b) for a, b in zip(got, truth, strict=True)) / (10 * len(queries))
    text_queries = [texts[i] for i in range(0, len(texts), max(1, len(texts) // len(queries)))][: len(queries)]
    per_query = len(queries)

    def cold(text: str) -> None:  # as the first search after a write: nothing kept for the store's generation
        store.__dict__.pop("_memo_held", None)
        store.search(text, limit=10, threshold=0.0)

    if profile:
        import cProfile
        import io
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        for t in text_queries:
            store.search(t, limit=10, threshold=0.0)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
        print(out.getvalue(), file=sys.stderr)
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
        "hybrid_cold": median_ms(lambda: [cold(t) for t in text_queries], runs) / per_query,
        "recall": recall,
    }


def bare_faiss(store, vectors, queries, runs: int) -> dict[str, float]:
    """memctl's unfiltered top-10 and the bare `faiss.IndexFlatIP.search` over the same vectors, query by query in
    a rotating order (medians, ms)."""
    import faiss

    from bench.store_ops import interleaved

    flat = faiss.IndexFlatIP(DIM)
    flat.add(vectors)
    fns = {
        "memctl": lambda q: store.search_vector(q, limit=10, threshold=0.0),
        "faiss": lambda q: flat.search(q.reshape(1, -1), 10),
    }
    return {f"{k}_ms": v * 1000 for k, v in interleaved(fns, queries, runs).items()}


def child(args: argparse.Namespace) -> None:
    """One side in one process: build (`--phase build`) or measure (`--phase measure`) the store with the memctl
    at --code; prints one JSON line."""
    import json

    sys.path.insert(0, args.code)  # before the first import of memctl: the code under test
    import memctl
    from memctl.embeddings import FakeEmbedder

    assert Path(memctl.__file__).resolve().is_relative_to(Path(args.code).resolve()), memctl.__file__
    vectors, queries, areas, texts = make_data(args.size)
    embedder = FakeEmbedder(DIM)
    result: dict[str, float] = {}
    with memctl.open_store(
        Path(args.work), "bench", embedder=embedder, overrides={"embedding_cache": False}, store=args.store
    ) as store:
        if args.phase == "build":
            result["bulk"] = build(store, embedder, vectors, areas, texts)
        else:
            result.update(measure(store, embedder, vectors, queries, areas, texts, args.runs, args.round, args.profile))
            if args.store == "embedded":
                result.update(bare_faiss(store, vectors, queries, args.runs))
    print(json.dumps(result))


def run_child(code: str, phase: str, store: str, work: Path, args: argparse.Namespace, round_no: int = 0) -> dict:
    import json

    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--code", code, "--phase", phase]
    command += ["--store", store, "--work", str(work), "--size", str(args.size), "--runs", str(args.runs)]
    command += ["--round", str(round_no)] + (["--profile"] if args.profile else [])
    env = {**os.environ, "PYTHONPATH": code}
    out = subprocess.run(command, check=True, capture_output=False, stdout=subprocess.PIPE, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


# How to take this tree's migrations off the benchmark's schema again, so that the baseline (which refuses a database
# with migrations it does not know) can measure it in the next round; this tree's next open upgrades it anew.
UNDO = {
    "m007_store_counts": "DROP TABLE memctl_counts; DROP FUNCTION memctl_counts_added, memctl_counts_removed,"
    " memctl_counts_changed, memctl_counts_truncated CASCADE",
}


def undo_migrations(url: str, baseline: str) -> None:
    import psycopg

    known = set((Path(baseline) / "memctl" / "store" / "pg_schema.py").read_text(encoding="utf-8").split('"'))
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        for (name,) in conn.execute("SELECT name FROM memctl_migrations ORDER BY name DESC").fetchall():
            if name not in known:
                conn.execute(UNDO[name])
                conn.execute("DELETE FROM memctl_migrations WHERE name = %s", (name,))


def compare(args: argparse.Namespace, url: str, schema: str, work: Path) -> None:
    """--baseline: the same stores measured with the baseline code and with this tree, side by side."""
    from tests.pg import with_options

    stores = {"embedded": "embedded", "postgres": with_options(url, schema)}
    here, before = str(REPO), str(Path(args.baseline).resolve())
    results: dict[tuple[str, str], list[dict]] = {}
    for name, store in stores.items():
        bulk = run_child(before, "build", store, work / name, args)
        print(f"{name}: built ({bulk['bulk']:.0f}/s)", file=sys.stderr)
        for round_no in range(args.rounds):
            for label, code in (("before", before), ("after", here)):
                got = run_child(code, "measure", store, work / name, args, 2 * round_no + (label == "after"))
                results.setdefault((name, label), []).append(got)
                print(f"{name} {label} round {round_no + 1}: {got}", file=sys.stderr)
                if name == "postgres" and label == "after" and round_no + 1 < args.rounds:
                    undo_migrations(store, before)
    keys = [
        ("search top-10, unfiltered (ms)", "flat"),
        ("search top-10, 1 % area (ms)", "area"),
        ("search top-10, filter expression on 1 % (ms)", "filter"),
        ("hybrid search incl. fake embedding (ms)", "hybrid"),
        ("… the same, nothing kept (as after a write) (ms)", "hybrid_cold"),
        ("save 1 memory (ms)", "save"),
        ("delete 100 (ms)", "delete"),
        ("recall@10 vs exact, unfiltered", "recall"),
    ]

    def cell(name: str, label: str, key: str) -> str:
        values = [r[key] for r in results[(name, label)]]
        return " / ".join(f"{v:.3f}" if key in ("recall", "ratio") else f"{v:.1f}" for v in values)

    rows = [[title, *(cell(n, lbl, key) for n in stores for lbl in ("before", "after"))] for title, key in keys]
    for label in ("before", "after"):
        for r in results[("embedded", label)]:
            r["ratio"] = r["memctl_ms"] / r["faiss_ms"]
    for title, key in (
        ("bare faiss.IndexFlatIP.search top-10 (ms)", "faiss_ms"),
        ("memctl unfiltered / bare FAISS, query by query", "ratio"),
    ):
        rows.append([title, cell("embedded", "before", key), cell("embedded", "after", key), "", ""])
    print(
        table(
            f"{args.size:,} memories, {DIM}-d, FakeEmbedder; medians of >= {args.runs} runs; one value per round",
            ["operation", "embedded before", "embedded after", "PostgreSQL before", "PostgreSQL after"],
            rows,
        )
    )


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
    parser.add_argument("--baseline", help="a tree of an older memctl to compare with this one, same stores")
    parser.add_argument("--rounds", type=int, default=1, help="with --baseline: before/after passes")
    parser.add_argument("--profile", action="store_true", help="cProfile of the hybrid searches (stderr)")
    for name in ("--code", "--phase", "--store", "--work"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    parser.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
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
        if args.baseline:
            compare(args, url, schema, work)
            return
        overrides = {"embedding_cache": False}
        for name, store_arg in (("embedded", "embedded"), ("postgres", with_options(url, schema))):
            embedder = FakeEmbedder(DIM)
            with memctl.open_store(work, "bench", embedder=embedder, overrides=overrides, store=store_arg) as store:
                rate = build(store, embedder, vectors, areas, texts)
                results[name] = {
                    "bulk": rate,
                    **measure(store, embedder, vectors, queries, areas, texts, args.runs, profile=args.profile),
                }
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
        ["… the same, nothing kept (ms)", e["hybrid_cold"], p["hybrid_cold"], p["hybrid_cold"] / e["hybrid_cold"]],
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
