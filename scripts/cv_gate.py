#!/usr/bin/env python3
"""Leave-one-domain-out figures of the gate's classifier on the tune half, for comparing variants.

    python scripts/cv_gate.py [--corpus eval/corpus/tune] [--variant NAME ...] [--nested]

Every domain is scored by a model fitted on the other domains; the threshold is the one
`scripts/train_gate.py` would ship (`pick_threshold` over all the held-out scores). Printed per variant:
held-out noise caught and facts dropped at that threshold; the noise the enabled rules miss that the
classifier catches (what it adds, and what matters on domains the rules were not written for); and
"rules OR classifier" facts kept / noise kept out over the fragments path. With --nested each domain's
threshold is also picked without it (leave-one-domain-out inside the other 23): the facts that an unseen
domain loses when even the threshold never saw it.

Only the tune half: a corpus holding report-half transcripts is refused.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._gate_corpus import all_items, load_cases, measure_rules  # noqa: E402
from memctl.gate_classifier import features, fit, predict  # noqa: E402
from memctl.gate_rules import rules_for  # noqa: E402
from scripts.train_gate import _embedder, enabled, pick_threshold  # noqa: E402

Fitter = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, float]]


def held_out(x: np.ndarray, y: np.ndarray, domains: np.ndarray, fitter: Fitter) -> np.ndarray:
    """P(noise) of every candidate from the model fitted without its domain."""
    p = np.zeros(len(y))
    for domain in sorted(set(domains)):
        test = domains == domain
        weights, bias = fitter(x[~test], y[~test])
        p[test] = predict(x[test], weights, bias)
    return p


def nested_drops(x: np.ndarray, y: np.ndarray, domains: np.ndarray, fitter: Fitter, p: np.ndarray) -> np.ndarray:
    """Drops when each domain's threshold is picked on the other domains' held-out scores only."""
    dropped = np.zeros(len(y), dtype=bool)
    for domain in sorted(set(domains)):
        test = domains == domain
        inner = held_out(x[~test], y[~test], domains[~test], fitter)
        threshold = pick_threshold(inner, y[~test])[0]
        dropped[test] = p[test] >= threshold
    return dropped


def report(name: str, p: np.ndarray, y: np.ndarray, by_rules: np.ndarray, nested: np.ndarray | None) -> None:
    threshold, precision, recall = pick_threshold(p, y)
    drop = p >= threshold
    noise, facts = y == 1, y == 0
    residual = noise & ~by_rules
    both = drop | by_rules
    line = (
        f"{name:28} t {threshold:.3f}  noise caught {recall:.3f} ({int((drop & noise).sum())}/{int(noise.sum())})"
        f"  facts dropped {int((drop & facts).sum())}  rules-missed noise caught "
        f"{int((drop & residual).sum())}/{int(residual.sum())}  | rules+clf facts kept "
        f"{100 * (~both & facts).sum() / facts.sum():.1f} %  noise out {100 * (both & noise).sum() / noise.sum():.1f} %"
    )
    if nested is not None:
        line += (
            f"  | nested: facts dropped {int((nested & facts).sum())}, noise caught "
            f"{(nested & noise).sum() / noise.sum():.3f}, rules+clf noise out "
            f"{100 * ((nested | by_rules) & noise).sum() / noise.sum():.1f} %"
        )
    print(line, flush=True)


def cached_embeddings(texts: list[str]) -> np.ndarray:
    """MiniLM vectors of `texts`, kept in the system temp folder between runs (keyed by the texts)."""
    import hashlib
    import tempfile

    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"memctl-cv-gate-{key}.npy"
    if path.exists():
        return np.load(path)
    vectors = np.asarray(_embedder()(texts), dtype=np.float32)
    np.save(path, vectors)
    return vectors


def shipped(texts: list[str], vectors: np.ndarray) -> np.ndarray:
    return features(texts, lambda _: vectors).astype(np.float64)


VARIANTS: dict[str, tuple[Callable[[list[str], np.ndarray], np.ndarray], Fitter]] = {
    "shipped": (shipped, fit),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REPO / "eval" / "corpus" / "tune")
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS), help="default: all")
    parser.add_argument("--nested", action="store_true", help="also pick each domain's threshold without it (slow)")
    args = parser.parse_args()
    cases = load_cases(args.corpus)
    if not cases or any(c.get("half") == "report" for c in cases):
        print(f"{args.corpus}: no transcripts, or report-half ones (tune half only)", file=sys.stderr)
        return 2
    items = all_items(cases)
    pool = [i for i in items if i.label in ("fact", "noise")]
    texts = [i.text for i in pool]
    y = np.asarray([1.0 if i.label == "noise" else 0.0 for i in pool])
    domains = np.asarray([i.domain for i in pool])
    allowed = set(enabled(measure_rules(items))["fragments"])
    rules = [r for r in rules_for("fragments") if r.name in allowed]
    by_rules = np.asarray([any(r.check(" ".join(t.split())) for r in rules) for t in texts])
    print(
        f"{len(cases)} transcripts, {len(set(domains))} domains: {int((y == 0).sum())} facts, {int(y.sum())} noise; "
        f"rules alone: facts kept {100 * (~by_rules & (y == 0)).sum() / (y == 0).sum():.1f} %, "
        f"noise out {100 * (by_rules & (y == 1)).sum() / y.sum():.1f} %"
    )
    vectors = cached_embeddings(texts)
    chosen = args.variant or list(VARIANTS)
    for name in chosen:
        build, fitter = VARIANTS[name]
        x = build(texts, vectors)
        p = held_out(x, y, domains, fitter)
        nested = nested_drops(x, y, domains, fitter, p) if args.nested else None
        report(f"{name} [{x.shape[1]}]", p, y, by_rules, nested)
    return 0


if __name__ == "__main__":
    sys.exit(main())
