"""Import of a 10k-document Agent Zero store, side by side with LangChain's own FAISS.load_local.

    python bench/agent_zero_import.py [--size 10000] [--runs 5]

The store is built with LangChain's FAISS (IndexFlatIP, COSINE, save_local) like Agent Zero builds
it, with random 384-d unit vectors and embedding.json naming memctl's fake model, so memctl reuses
the stored vectors (no embedding in the timing). Timed, medians of --runs:

- memctl read: the restricted unpickler + index.faiss read (`read_agent_zero`), in process;
- memctl import: read + insert into a fresh store (SQLite, history, vector index), in process;
- memctl import (CLI): `memctl import-agent-zero` as a process, interpreter start included;
- peer: `FAISS.load_local(..., allow_dangerous_deserialization=True)` of the same folder (plain pickle).

Needs the dev extra (langchain-community).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import python, run_child, table  # noqa: E402

WORDS = (
    "user prefers dark mode deploy target kubernetes database postgres staging cluster region backup nightly "
    "cron api gateway port billing stripe standup monday search index retention logs mobile app terraform "
    "redis bucket frankfurt owner team review release branch main hotfix alert pager oncall budget"
).split()
AREAS = ("main", "fragments", "solutions")


def build_store(folder: Path, size: int) -> None:
    import faiss
    import numpy as np
    from langchain_community.docstore.in_memory import InMemoryDocstore
    from langchain_community.vectorstores import FAISS
    from langchain_community.vectorstores.utils import DistanceStrategy
    from langchain_core.embeddings import FakeEmbeddings

    rng = random.Random(9)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16))) + f" #{i}" for i in range(size)]
    ids = [f"a0{i:08d}" for i in range(size)]
    metadatas = [
        {
            "id": doc_id,
            "area": AREAS[i % 3],
            "timestamp": f"2025-{1 + i % 12:02d}-{1 + i % 28:02d} 10:11:12",
            **({"knowledge_source": True, "source_file": f"doc{i % 50}.md", "file_type": "md"} if i % 7 == 0 else {}),
        }
        for i, doc_id in enumerate(ids)
    ]
    vectors = np.random.default_rng(9).standard_normal((size, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    db = FAISS(
        embedding_function=FakeEmbeddings(size=384),
        index=faiss.IndexFlatIP(384),
        docstore=InMemoryDocstore(),
        index_to_docstore_id={},
        distance_strategy=DistanceStrategy.COSINE,
    )
    db.add_embeddings(list(zip(texts, vectors.tolist(), strict=True)), metadatas=metadatas, ids=ids)
    db.save_local(str(folder))
    (folder / "embedding.json").write_text(json.dumps({"model_provider": "fake", "model_name": "hash-384"}))


def timed(fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from langchain_community.vectorstores import FAISS
    from langchain_core.embeddings import FakeEmbeddings

    import memctl
    from memctl.integrations.agent_zero.folder import read_agent_zero
    from memctl.integrations.agent_zero.importer import import_agent_zero

    work = Path(tempfile.mkdtemp(prefix="memctl-bench-a0-"))
    folder = work / "usr" / "memory" / "default"
    build_store(folder, args.size)
    fake = {"embedding_provider": "fake"}

    def import_once(run: int) -> None:
        source = read_agent_zero(folder)
        with memctl.open_store(work / "home", f"run{run}", overrides=fake) as store:
            report = import_agent_zero(store, source, batch_size=int(store.config["import_batch_size"]))
        assert report.imported == args.size and report.reused_vectors == args.size, report.to_dict()

    def cli_once(run: int) -> float:
        env = {"MEMCTL_HOME": str(work / "cli"), "MEMCTL_EMBEDDING_PROVIDER": "fake"}
        wall, _ = run_child(
            [python(), "-m", "memctl", "import-agent-zero", str(folder), "-s", f"run{run}", "--json"], env
        )
        return wall

    def peer_once() -> None:
        db = FAISS.load_local(str(folder), FakeEmbeddings(size=384), allow_dangerous_deserialization=True)
        assert db.index.ntotal == args.size

    peer_once()  # warm imports and the page cache on both sides
    read_agent_zero(folder)
    read = statistics.median(timed(lambda: read_agent_zero(folder)) for _ in range(args.runs))
    full = statistics.median(timed(lambda r=run: import_once(r)) for run in range(args.runs))
    cli = statistics.median(cli_once(run) for run in range(args.runs))
    peer = statistics.median(timed(peer_once) for _ in range(args.runs))
    n = args.size
    print(
        table(
            f"Agent Zero store of {n:,} documents (384-d), medians of {args.runs} runs",
            ["what", "documents", "seconds", "docs/s", "vs load_local"],
            [
                ["memctl read (restricted unpickle + index read)", n, read, n / read, f"{read / peer:.2f}x"],
                ["memctl import (read + fresh store, in process)", n, full, n / full, f"{full / peer:.2f}x"],
                ["memctl import-agent-zero (CLI process)", n, cli, n / cli, f"{cli / peer:.2f}x"],
                ["LangChain FAISS.load_local (plain pickle)", n, peer, n / peer, "1.00x"],
            ],
        )
    )
    print(
        json.dumps(
            {
                "documents": n,
                "read_s": read,
                "import_s": full,
                "cli_s": cli,
                "load_local_s": peer,
                "read_ratio": read / peer,
                "import_ratio": full / peer,
            }
        )
    )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
