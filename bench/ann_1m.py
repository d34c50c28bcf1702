"""P6: 1M memories with the approximate (IVF) index: search latency, recall@10 vs exact, memory.

    python bench/ann_1m.py [--size 1000000] [--queries 200] [--nprobe 32]

Vectors are synthetic (384-d, 2,000 clusters plus noise, unit length); exact search over the
same vectors (numpy) is the reference for recall, and FAISS's exact flat index the speed peer.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import table  # noqa: E402

DIM = 384


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def make_vectors(n: int, rng: np.random.Generator, centers: np.ndarray, noise: float) -> np.ndarray:
    labels = rng.integers(0, len(centers), n)
    out = centers[labels] + rng.standard_normal((n, DIM)).astype(np.float32) * (noise / np.sqrt(DIM))
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--nprobe", type=int, default=32)
    args = parser.parse_args()
    import faiss

    import memctl
    from memctl.embeddings import FakeEmbedder

    rng = np.random.default_rng(0)
    centers = rng.standard_normal((2000, DIM)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    work = Path(tempfile.mkdtemp(prefix="memctl-bench-ann-"))
    embedder = FakeEmbedder(DIM)
    overrides = {
        "index_type": "ivf",
        "index_nprobe": args.nprobe,
        "embedding_cache": False,
        "index_checkpoint_every": 10**9,
    }
    store = memctl.open_store(work, "big", embedder=embedder, overrides=overrides)
    start = time.perf_counter()
    all_vectors = np.empty((args.size, DIM), dtype=np.float32)
    for offset in range(0, args.size, 50_000):
        count = min(50_000, args.size - offset)
        vectors = make_vectors(count, rng, centers, 1.0)
        all_vectors[offset : offset + count] = vectors
        store.insert_records(
            [{"id": f"m{offset + i:07d}", "text": f"memory {offset + i}"} for i in range(count)], vectors, embedder.info
        )
    insert_s = time.perf_counter() - start
    start = time.perf_counter()
    store.rebuild_index()
    build_s = time.perf_counter() - start
    store.close()
    start = time.perf_counter()
    store = memctl.open_store(work, "big", embedder=embedder, overrides=overrides)
    index = store.vector_index()
    open_s = time.perf_counter() - start
    assert index.is_approximate
    rss_open = current_rss_mb()

    queries = make_vectors(args.queries, rng, centers, 0.6)
    latencies, results = [], []
    for q in queries:
        t = time.perf_counter()
        hits = store.search_vector(q, limit=10, threshold=0.0)
        latencies.append(time.perf_counter() - t)
        results.append([int(h.id[1:]) for h in hits])
    exact = faiss.IndexFlatIP(DIM)
    exact.add(all_vectors)
    flat_lat = []
    truth = []
    for q in queries:
        t = time.perf_counter()
        _, ids = exact.search(q.reshape(1, -1), 10)
        flat_lat.append(time.perf_counter() - t)
        truth.append(ids[0].tolist())
    recall = statistics.mean(len(set(r) & set(t)) / 10 for r, t in zip(results, truth, strict=True))
    p50 = statistics.median(latencies) * 1000
    p95 = sorted(latencies)[int(0.95 * len(latencies))] * 1000
    flat_p50 = statistics.median(flat_lat) * 1000
    disk_mb = sum(f.stat().st_size for f in (work / "big").iterdir() if f.is_file()) / 2**20
    rows = [
        ["search p50 (ms)", p50, flat_p50, flat_p50 / p50, "≤ 20 ms"],
        ["search p95 (ms)", p95, "", "", ""],
        ["recall@10 vs exact", recall, 1.0, "", "≥ 0.95"],
        ["open store + load index (s)", open_s, "", "", ""],
        ["peak RSS of this process (MB)", rss_mb(), "", "", "reported"],
        [f"insert {args.size:,} rows (s)", insert_s, "", "", ""],
        ["build IVF index (s)", build_s, "", "", ""],
        ["store size on disk (MB)", disk_mb, "", "", ""],
    ]
    print(
        table(
            f"P6: {args.size:,} memories, IVF nlist={index.index.nlist} nprobe={args.nprobe}, {args.queries} queries",
            ["what", "memctl (IVF)", "FAISS exact flat", "ratio", "target"],
            rows,
        )
    )
    print(
        json.dumps(
            {
                "p50_ms": p50,
                "p95_ms": p95,
                "recall10": recall,
                "flat_p50_ms": flat_p50,
                "open_s": open_s,
                "rss_after_open_mb": rss_open,
                "peak_rss_mb": rss_mb(),
            }
        )
    )
    store.close()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
