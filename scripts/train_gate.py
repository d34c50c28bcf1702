#!/usr/bin/env python3
"""Measure the gate's rules (and train its classifier) on the tune half: writes memctl/data/gate.json.

    python scripts/train_gate.py [--corpus eval/corpus/tune] [--out memctl/data/gate.json] [--dry-run]
                                 [--no-classifier]

Only the tune half may be given (a corpus whose transcripts say `"half": "report"` is refused):
the report half is for `bench/quality_gate.py` to measure the finished gate on.

Rules. Every candidate a perfect extractor would propose is labelled (bench/_gate_corpus.py):
facts and noise on the fragments path; solutions and the same noise on the solutions path (a weak
model stores junk as a "solution" too). Each rule is run on every candidate of its path on its own
(not first-match), and its precision = noise it drops / everything it drops. A rule may drop
candidates in memctl only if its precision is >= MIN_PRECISION; a rule that never fired on the tune half
(no precision to measure, and no fact dropped) is enabled too and listed under `unmeasured`.

Classifier. Logistic regression over the MiniLM embedding of the candidate plus the rules'
verdicts and a few shape features, fitted by plain gradient descent (numpy), weights stored as
JSON lists (no pickle). Its drop threshold is the lowest whose precision on held-out domains of
the tune half (leave-one-domain-out) is >= MIN_PRECISION, both over all its drops and over the
WINDOW drops scored just above it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._gate_corpus import AREAS, Item, all_items, load_cases, measure_rules  # noqa: E402

MIN_PRECISION = 0.97
WINDOW = 40  # the classifier's last drops whose precision must reach MIN_PRECISION too (one fact among them)


def enabled(measured: dict[str, dict[str, dict]]) -> dict[str, list[str]]:
    """Rules measured precise enough, plus the rules that never fired on the tune half (listed apart
    as `unmeasured`: they dropped no fact there either, and the shared transcripts need them)."""
    return {
        area: [name for name, m in rules.items() if not m["drops"] or m["precision"] >= MIN_PRECISION]
        for area, rules in measured.items()
    }


def unmeasured(measured: dict[str, dict[str, dict]]) -> dict[str, list[str]]:
    return {area: [name for name, m in rules.items() if not m["drops"]] for area, rules in measured.items()}


def _embedder():
    from memctl.config import load_config
    from memctl.embeddings import make_embedder

    return make_embedder(load_config(overrides={"embedding_provider": "local", "embedding_cache": False})).embed


def pick_threshold(p: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """The lowest threshold whose drops are >= MIN_PRECISION noise, overall and among the last WINDOW drops
    (the candidates scored just above it): (threshold, precision, recall). Overall precision alone let the
    threshold slide into the band where facts and noise mix (on the 72-transcript tune half: 13 facts among
    the last 20 drops at an overall 0.969); the window stops it where the first facts begin."""
    best = (1.01, 1.0, 0.0)
    ranked = y[np.argsort(-p, kind="stable")]
    for t in sorted(set(np.round(p, 4)), reverse=True):
        dropped = p >= t
        if not dropped.any():
            continue
        n = int(dropped.sum())
        precision = float(y[dropped].mean())
        last = float(ranked[max(0, n - WINDOW) : n].mean())
        if precision < MIN_PRECISION or last < MIN_PRECISION:
            break
        best = (float(t), precision, float(y[dropped].sum() / max(1, y.sum())))
    return best


def train(items: list[Item]) -> dict:
    """Fit on the fragments path (facts vs noise); the threshold comes from leave-one-domain-out
    predictions, so it is set on domains the model did not see, as the report half will be."""
    from memctl.gate_classifier import feature_names, features, fit, predict

    pool = [i for i in items if i.label in ("fact", "noise")]
    x = features([i.text for i in pool], _embedder()).astype(np.float64)
    y = np.asarray([1.0 if i.label == "noise" else 0.0 for i in pool])
    domains = np.asarray([i.domain for i in pool])
    held_out = np.zeros(len(pool))
    for domain in sorted(set(domains)):
        test = domains == domain
        weights, bias = fit(x[~test], y[~test])
        held_out[test] = predict(x[test], weights, bias)
    threshold, precision, recall = pick_threshold(held_out, y)
    weights, bias = fit(x, y)
    return {
        "about": "logistic regression over the MiniLM embedding + shape features (memctl/gate_classifier.py)",
        "embedding_model": "sentence-transformers/all-MiniLM-L6-v2",
        "features": feature_names(),
        "threshold": round(threshold, 4),
        "cv_precision": round(precision, 4),
        "cv_recall": round(recall, 4),
        "bias": round(float(bias), 6),
        "weights": [round(float(w), 6) for w in weights],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REPO / "eval" / "corpus" / "tune")
    parser.add_argument("--out", type=Path, default=REPO / "memctl" / "data" / "gate.json")
    parser.add_argument("--dry-run", action="store_true", help="print the measurement, write nothing")
    parser.add_argument("--no-classifier", action="store_true", help="measure the rules only")
    args = parser.parse_args()
    cases = load_cases(args.corpus)
    if not cases:
        print(f"no transcripts in {args.corpus}", file=sys.stderr)
        return 1
    if any(c.get("half") == "report" for c in cases):
        print(f"{args.corpus} holds report-half transcripts: tune on the tune half only", file=sys.stderr)
        return 2
    items = all_items(cases)
    measured = measure_rules(items)
    doc: dict = {
        "about": "written by scripts/train_gate.py from the tune half; rules in `enabled` may drop candidates",
        "corpus": {
            "transcripts": len(cases),
            "domains": sorted({i.domain for i in items}),
            "facts": sum(i.label == "fact" for i in items),
            "noise": sum(i.label == "noise" for i in items),
            "solutions": sum(i.label == "solution" for i in items),
        },
        "min_precision": MIN_PRECISION,
        "enabled": enabled(measured),
        "unmeasured": unmeasured(measured),
        "rules": measured,
    }
    if not args.no_classifier:
        doc["classifier"] = train(items)
        print(
            f"classifier: threshold {doc['classifier']['threshold']:.3f}, out-of-domain precision "
            f"{doc['classifier']['cv_precision']}, noise caught {doc['classifier']['cv_recall']}"
        )
    for area in AREAS:
        print(f"{area}:")
        for name, m in measured[area].items():
            flag = "ON " if name in doc["enabled"][area] else "off"
            flag = "ON?" if name in doc["unmeasured"][area] else flag
            precision = "-" if m["precision"] is None else f"{m['precision']:.3f}"
            print(
                f"  {flag} {name:18} precision {precision:>6}  drops {m['drops']:3}  false {m['false_drops']:3}  "
                + "; ".join(m["wrongly_dropped"][:2])[:160]
            )
    if not args.dry_run:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
