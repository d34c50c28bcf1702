"""`memctl mcp`: a warm memory_search against the cold CLI `memctl load`, on one 10k-memory store, in one run.

    python bench/mcp_latency.py [--size 10000] [--calls 200] [--cold-runs 7] [--clients 4]
                                [--per-client 200] [--embedder local|fake] [--home DIR] [--baseline TREE] [--block 10]

1. Builds a store of `--size` memories (the default model, multilingual-e5-small-q4, or the one
   MEMCTL_EMBEDDING_MODEL names; `--embedder fake` when the real model is too slow to build it on the
   machine — the table says which was used).
2. Warm: one `memctl mcp` process over stdio, driven by the SDK's own client; `--calls` searches,
   each a new query (no embedding-cache hit), timed at the client (JSON-RPC round trip included).
   Beside it, in the bench process: the query embedding alone, and `store.search` alone (embedding excluded).
3. Cold: `memctl load QUERY --json` as fresh processes (`--cold-runs`, new queries), wall time.
4. Concurrency: one `memctl mcp --http 127.0.0.1:0` process, `--clients` SDK clients at once,
   `--per-client` searches each; every error is counted.

`--home DIR` keeps the store there (built on the first run, reused after: the MiniLM build takes minutes).
`--baseline TREE` also runs another memctl source tree (e.g. `git archive main | tar -x -C /tmp/before`) on the
same store, in the same run: its warm server beside this one (blocks of `--block` calls, 10 by default, taking
turns; `--block 1` alternates call by call) and its cold CLI runs between this one's, so "before" and "after" share
the machine's load.

Prints a table (p50/p95 in ms, the cold/warm ratio, the goals) and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import REPO, SUBJECTS, generated_texts, python, table  # noqa: E402


def build(home: Path, size: int, embedder: str) -> float:
    """The store, in one batched add; returns the seconds it took."""
    import memctl

    texts = generated_texts(size)
    start = time.perf_counter()
    with memctl.open_store(
        home, "default", overrides={"embedding_cache": False, "embedding_provider": embedder}
    ) as store:
        store.add(texts)
    return time.perf_counter() - start


# Differs in every run: a store kept with --home keeps its embedding cache, and a query text of an earlier run
# would be served from it (no embedding) and flatter the warm and the cold figures alike.
RUN = random.SystemRandom().randrange(10**5, 10**6)


def queries(prefix: str, count: int) -> list[str]:
    """New query texts: none is in the embedding cache (not even from an earlier run), so every call embeds."""
    rng = random.Random(prefix)
    return [
        f"{prefix} {RUN}.{i}: what does {rng.choice(SUBJECTS)} {rng.choice(['use', 'run on', 'avoid'])}?"
        for i in range(count)
    ]


def embed_alone(embedder: str, count: int) -> list[float]:
    """The query embedding by itself (model, session kind and thread settings of the warm server), in-process."""
    from memctl.config import load_config
    from memctl.embeddings import make_embedder
    from memctl.mcp.pool import SERVER_SPIN

    config = load_config(None, {"embedding_provider": embedder, "embedding_cache": False})
    model = make_embedder(config, spin=SERVER_SPIN)
    model.embed([f"warm-up text {i}" for i in range(16)])  # the full session, as the server warms it
    samples = []
    for query in queries("embed alone", count):
        start = time.perf_counter()
        model.embed([query])
        samples.append(time.perf_counter() - start)
    return samples


def search_alone(home: Path, embedder: str, count: int) -> list[float]:
    """`store.search` on the same store in this process, the query embedding excluded: each query's vector
    is computed before the clock starts and handed over by a wrapper embedder."""
    import memctl
    from memctl.config import load_config
    from memctl.embeddings import make_embedder
    from memctl.mcp.pool import SERVER_SPIN

    model = make_embedder(
        load_config(None, {"embedding_provider": embedder, "embedding_cache": False}), spin=SERVER_SPIN
    )
    texts = queries("search alone", count)
    vectors = {text: vector for text, vector in zip(texts, model.embed(texts), strict=True)}

    class Precomputed:
        info = model.info

        def embed(self, batch: list[str]) -> Any:
            import numpy as np

            return np.stack([vectors[t] if t in vectors else model.embed([t])[0] for t in batch])

    samples = []
    with memctl.open_store(home, "default", embedder=Precomputed(), overrides={"embedding_cache": False}) as store:
        store.search("warm-up query")
        for text in texts:
            start = time.perf_counter()
            store.search(text)
            samples.append(time.perf_counter() - start)
    return samples


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


BLOCK = 10  # calls in a row to one server before the next takes its turn (--block)


async def warm_stdio(
    envs: dict[str, dict[str, str]], calls: int, block: int = BLOCK
) -> dict[str, tuple[list[float], list[float]]]:
    """Per tree: (memory_search times, memory_list times), the second the protocol's floor (no embedding, one
    row). The servers run side by side and take turns, `block` calls each; every query is new to every server
    (they share the store's embedding cache)."""
    from contextlib import AsyncExitStack

    from mcp import Client, StdioServerParameters

    out: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label in envs}
    async with AsyncExitStack() as stack:
        clients = {}
        for label, env in envs.items():
            tree = env["PYTHONPATH"].split(os.pathsep)[0]
            params = StdioServerParameters(command=python(), args=["-m", "memctl", "mcp", "-q"], env=env, cwd=tree)
            clients[label] = await stack.enter_async_context(Client(params))
            for query in queries(f"warm-up {label}", 5):
                await _search(clients[label], query)
        texts = {label: queries(f"stdio {label}", calls) for label in envs}
        turns = [list(clients.items()), list(clients.items())[::-1]]  # who goes first alternates
        for start in range(0, calls, block):
            for label, client in turns[start // block % 2]:
                for query in texts[label][start : start + block]:
                    began = time.perf_counter()
                    await _search(client, query)
                    out[label][0].append(time.perf_counter() - began)
        for start in range(0, 50, block):
            for label, client in turns[start // block % 2]:
                for _ in range(block):
                    began = time.perf_counter()
                    await client.call_tool("memory_list", {"limit": 1})
                    out[label][1].append(time.perf_counter() - began)
    return out


async def _search(client: Any, query: str) -> dict[str, Any]:
    result = await client.call_tool("memory_search", {"query": query})
    if result.is_error:
        raise RuntimeError(result.content[0].text)
    return result.structured_content


async def concurrent_http(url: str, clients: int, per_client: int) -> tuple[list[float], int, float]:
    import anyio
    from mcp import Client

    samples: list[float] = []
    errors = 0

    async def one(index: int) -> None:
        nonlocal errors
        async with Client(url) as client:
            for query in queries(f"http client {index}", per_client):
                start = time.perf_counter()
                try:
                    result = await client.call_tool("memory_search", {"query": query})
                    errors += bool(result.is_error)
                except Exception:  # noqa: BLE001 - counted, the run goes on
                    errors += 1
                samples.append(time.perf_counter() - start)

    async with Client(url) as client:  # the server is warm before the clock starts
        for query in queries("http warm-up", 5):
            await _search(client, query)
    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for index in range(clients):
            group.start_soon(one, index)
    return samples, errors, time.perf_counter() - start


def start_http(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [python(), "-m", "memctl", "mcp", "--http", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        found = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", line)
        if found:
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, found.group(1)
    raise RuntimeError("memctl mcp --http did not start")


def tree_env(tree: Path, home: Path, embedder: str) -> dict[str, str]:
    env = {
        **os.environ,
        "MEMCTL_HOME": str(home),
        "MEMCTL_EMBEDDING_PROVIDER": embedder,
        "PYTHONPATH": str(tree) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    env.pop("MEMCTL_STORE", None)
    return env


def cold_load(tree: Path, env: dict[str, str], query: str) -> float:
    """Wall time of a fresh `memctl load QUERY --json` of `tree` (its own folder first on sys.path)."""
    start = time.perf_counter()
    done = subprocess.run(
        [python(), "-m", "memctl", "load", query, "--json"],
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wall = time.perf_counter() - start
    if done.returncode not in (0, 3):  # 3: nothing matched (a documented exit code)
        raise RuntimeError(f"memctl load failed in {tree}: {done.stderr}")
    return wall


def ensure_store(home: Path, size: int, embedder: str, env: dict[str, str]) -> float | None:
    """Seconds the build took; None when `home` already holds the store (`--home`, a later run)."""
    if (home / "default" / "memories.sqlite").is_file():
        return None
    return float(
        subprocess.run(
            [
                python(),
                "-c",
                f"import sys; sys.path.insert(0, {str(REPO)!r}); "
                f"from bench.mcp_latency import build; from pathlib import Path; "
                f"print(build(Path({str(home)!r}), {size}, {embedder!r}))",
            ],
            check=True,
            capture_output=True,
            text=True,
            env=env,
        ).stdout.split()[-1]
    )


def main() -> None:
    import anyio

    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--cold-runs", type=int, default=7)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--per-client", type=int, default=200)
    parser.add_argument("--embedder", choices=["local", "fake"], default="local")
    parser.add_argument("--home", type=Path, help="keep the store in this folder (reused by the next run)")
    parser.add_argument("--baseline", type=Path, help="another memctl source tree, measured beside this one")
    parser.add_argument("--block", type=int, default=BLOCK, help="calls in a row to one warm server (--baseline)")
    args = parser.parse_args()

    home = args.home.resolve() if args.home else Path(tempfile.mkdtemp(prefix="memctl-bench-mcp-"))
    home.mkdir(parents=True, exist_ok=True)
    trees = {"this tree": REPO}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()
    envs = {label: tree_env(tree, home, args.embedder) for label, tree in trees.items()}
    env = envs["this tree"]
    built = ensure_store(home, args.size, args.embedder, env)
    for tree in trees.values():
        subprocess.run([python(), "-m", "compileall", "-q", str(tree / "memctl")], check=True)

    load_before = os.getloadavg()[0]
    warm_all = anyio.run(warm_stdio, envs, args.calls, max(1, args.block))
    alone = embed_alone(args.embedder, min(args.calls, 100))
    searched = search_alone(home, args.embedder, min(args.calls, 100))
    colds: dict[str, list[float]] = {label: [] for label in trees}
    for label, tree in trees.items():
        cold_load(tree, envs[label], f"cold warm-up query ({label})")  # page cache
    for index, query in enumerate(queries("cold", args.cold_runs)):
        for label, tree in list(trees.items()) if index % 2 == 0 else list(trees.items())[::-1]:
            colds[label].append(cold_load(tree, envs[label], f"{query} ({label})"))  # taking turns
    proc, url = start_http(env)
    try:
        samples, errors, wall = anyio.run(concurrent_http, url, args.clients, args.per_client)
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    ms = lambda s: s * 1000  # noqa: E731
    warm, floor = warm_all["this tree"]
    cold = colds["this tree"]
    warm_p50, warm_p95 = ms(statistics.median(warm)), ms(percentile(warm, 0.95))
    cold_p50 = ms(statistics.median(cold))
    calls = args.clients * args.per_client
    rows = [
        [f"warm memory_search, stdio ({args.calls} calls)", warm_p50, warm_p95, "p50 ≤ 15 ms"],
        [
            "  of which: query embedding alone (in-process)",
            ms(statistics.median(alone)),
            ms(percentile(alone, 0.95)),
            f"model: {args.embedder}",
        ],
        [
            "  of which: store.search alone (in-process, embedding excluded)",
            ms(statistics.median(searched)),
            ms(percentile(searched, 0.95)),
            "hybrid, the default mode",
        ],
        [
            "  floor: memory_list of 1, stdio (50 calls)",
            ms(statistics.median(floor)),
            ms(percentile(floor, 0.95)),
            "protocol + store, no embedding",
        ],
        [f"cold `memctl load` (fresh process, {args.cold_runs} runs)", cold_p50, ms(percentile(cold, 0.95)), ""],
        ["cold / warm (p50)", cold_p50 / warm_p50, "", "≥ 20x"],
        [
            f"HTTP, {args.clients} clients x {args.per_client} calls at once",
            ms(statistics.median(samples)),
            ms(percentile(samples, 0.95)),
            f"{errors} errors (goal 0); {calls / wall:.0f} calls/s",
        ],
    ]
    if "baseline" in trees:
        b_warm, b_floor = warm_all["baseline"]
        b_cold = colds["baseline"]
        b_p50 = ms(statistics.median(b_warm))
        rows += [
            [f"baseline: warm memory_search, stdio ({args.calls} calls)", b_p50, ms(percentile(b_warm, 0.95)), ""],
            ["baseline: floor, memory_list of 1", ms(statistics.median(b_floor)), ms(percentile(b_floor, 0.95)), ""],
            ["baseline: cold `memctl load`", ms(statistics.median(b_cold)), ms(percentile(b_cold, 0.95)), ""],
            ["baseline: cold / warm (p50)", ms(statistics.median(b_cold)) / b_p50, "", ""],
            ["warm: baseline / this tree (p50)", b_p50 / warm_p50, "", f"same run, turns of {args.block} calls"],
        ]
    title = (
        f"memctl mcp: {args.size:,} memories, embedder {args.embedder} "
        + (f"(store built in {built:.0f} s)" if built is not None else f"(store reused from {home})")
        + f"; load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, {os.cpu_count()} CPUs"
    )
    print(table(title, ["what", "p50 ms", "p95 ms", "goal / note"], rows))
    summary: dict[str, Any] = {
        "size": args.size,
        "embedder": args.embedder,
        "load_average": load_before,
        "load_average_after": os.getloadavg()[0],
        "warm_p50_ms": warm_p50,
        "warm_p95_ms": warm_p95,
        "floor_p50_ms": ms(statistics.median(floor)),
        "embed_alone_p50_ms": ms(statistics.median(alone)),
        "search_alone_p50_ms": ms(statistics.median(searched)),
        "cold_p50_ms": cold_p50,
        "ratio": cold_p50 / warm_p50,
        "http_clients": args.clients,
        "http_calls": calls,
        "http_errors": errors,
        "http_p50_ms": ms(statistics.median(samples)),
        "http_p95_ms": ms(percentile(samples, 0.95)),
        "http_calls_per_s": calls / wall,
    }
    if "baseline" in trees:
        summary["baseline"] = {
            "tree": str(trees["baseline"]),
            "block": args.block,
            "warm_p50_ms": ms(statistics.median(warm_all["baseline"][0])),
            "warm_p95_ms": ms(percentile(warm_all["baseline"][0], 0.95)),
            "floor_p50_ms": ms(statistics.median(warm_all["baseline"][1])),
            "cold_p50_ms": ms(statistics.median(colds["baseline"])),
        }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
