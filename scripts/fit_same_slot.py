"""Fit the update safety (memctl/memorize/same_slot.py) for the configured embedding model on the TUNE half.

    python scripts/fit_same_slot.py --corpus eval/corpus/tune [--write]
    MEMCTL_EMBEDDING_MODEL=sentence-transformers/all-MiniLM-L6-v2 python scripts/fit_same_slot.py ...

Positives: each series' labelled update pairs (an old value and the statement that changed it), seen from the
new value as the candidate. Negatives: every other pair of the series' facts, which is what a wrong `update`
could overwrite, seen from whichever side stands nearer in the other's neighbourhood (the view that exposes it
more). A text's neighbourhood is every other text of its series. The features are
`same_slot.FEATURES`; the model is a class-balanced logistic regression on standardised features. Every pair
is scored by a model fitted without its writer's series (eval/corpus/writers.json), and the cut is the highest
at which at least RECALL_GOAL of the held-out update pairs may be acted on. The same held-out figures are
printed beside those of the hand-set rule it replaced. Needs scikit-learn (the dev extra).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from memctl.memorize.consolidate import same_subject  # noqa: E402
from memctl.memorize.same_slot import FEATURES, pair_features  # noqa: E402
from scripts.corpus import read_writers  # noqa: E402

# The share of held-out update pairs the cut must let through. The cut must keep more update pairs than the
# hand rule while exposing well under its other pairs. On 304 series with categorical updates (batch 25),
# multilingual-e5, held out by writer: 0.98 exposed 7,503 other pairs, 0.985 10,785, 0.99 15,426 (83 % of the
# rule's 18,649), 0.995 40,172; 0.985 keeps 1,271/1,290 against the rule's 1,242. Consolidation's end-to-end goal
# is 95 % of updates, and the gate and grounding lose some of the rest.
RECALL_GOAL = 0.985
C_GRID = (0.1, 1.0, 10.0, 100.0)  # inverse L2 strength, chosen by held-out log loss
RULE = (0.75, 0.6)  # the rule it replaced: consolidation_threshold, consolidation_keyword_overlap
OUT = REPO / "memctl" / "data" / "same_slot.json"


def norm(text: str) -> str:
    return " ".join(str(text).split())


def series_of(folder: Path) -> dict[str, list[dict]]:
    series: dict[str, list[dict]] = {}
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and "messages" in data:
            series.setdefault(str(data.get("series") or path.stem), []).append(data)
    return series


def parts(value: str) -> list[str]:
    """A labelled new value, or the statements it joins with '; ' (extracted one by one)."""
    pieces = [p.strip() for p in value.split("; ") if p.strip()]
    return pieces if len(pieces) > 1 else [value]


Row = tuple[str, str, float, float, int]  # candidate, stored memory, relevance, the candidate's nearest, place


def view(texts: list[str], rel: np.ndarray, c: int, s: int) -> Row:
    """The pair as `same_slot.pair_features` sees it with texts[c] the candidate and texts[s] stored."""
    place = int((rel[c] > rel[c, s]).sum())
    return (texts[c], texts[s], float(rel[c, s]), float(rel[c].max()), place)


def pairs(folder: Path, embed) -> tuple[list[Row], np.ndarray, list[str]]:
    """A row for every pair of facts per series, its label, and its series."""
    rows: list[Row] = []
    labels: list[int] = []
    groups: list[str] = []
    for name, cases in series_of(folder).items():
        updates = [(norm(u["old"]), norm(u["new"])) for c in cases for u in c.get("updates") or []]
        true = {(old, p) for old, new in updates for p in parts(new)}
        texts = list(
            dict.fromkeys(
                [norm(t) for c in cases for t in c.get("expected_fragments") or []] + [x for p in true for x in p]
            )
        )
        vectors = np.asarray(embed(texts), dtype=np.float64)
        rel = (1.0 + vectors @ vectors.T) / 2.0
        np.fill_diagonal(rel, -1.0)  # a text is not its own neighbour
        for i, j in itertools.combinations(range(len(texts)), 2):
            if (texts[i], texts[j]) in true:
                row, label = view(texts, rel, j, i), 1
            elif (texts[j], texts[i]) in true:
                row, label = view(texts, rel, i, j), 1
            else:
                row, label = min(view(texts, rel, i, j), view(texts, rel, j, i), key=lambda r: (r[3] - r[2], r[4])), 0
            rows.append(row)
            labels.append(label)
            groups.append(name)
    return rows, np.asarray(labels), groups


def model(c: float):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=c, class_weight="balanced", max_iter=5000))


def held_out(x: np.ndarray, y: np.ndarray, groups: np.ndarray, c: float) -> np.ndarray:
    p = np.zeros(len(y))
    for group in np.unique(groups):
        test = groups == group
        if y[~test].min() == y[~test].max():
            continue
        p[test] = model(c).fit(x[~test], y[~test]).predict_proba(x[test])[:, 1]
    return p


def log_loss(p: np.ndarray, y: np.ndarray) -> float:
    """Class-balanced: each class weighs the same, as in the fit."""
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-(np.log(p[y == 1]).mean() + np.log(1 - p[y == 0]).mean()) / 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="a TUNE-half corpus folder")
    parser.add_argument("--write", action="store_true", help=f"save the fit into {OUT.relative_to(REPO)}")
    args = parser.parse_args()
    if "report" in args.corpus.parts:
        raise SystemExit("fit on the tune half only; the report half is measured once, never fitted on")

    from memctl.config import load_config
    from memctl.embeddings import make_embedder

    embedder = make_embedder(load_config(overrides={"embedding_provider": "local"}))
    rows, y, names = pairs(args.corpus, embedder.embed)
    writers = read_writers(REPO / "eval" / "corpus" / "writers.json")
    groups = np.asarray([writers.get(n.removeprefix("tune-"), n) for n in names])
    x = np.asarray([pair_features(*row) for row in rows])
    losses = {c: log_loss(p, y) for c in C_GRID for p in [held_out(x, y, groups, c)]}
    best = min(losses, key=lambda c: losses[c])
    p = held_out(x, y, groups, best)
    cut = float(np.sort(p[y == 1])[::-1][int(np.ceil(RECALL_GOAL * (y == 1).sum())) - 1])
    rule = np.asarray([r >= RULE[0] or same_subject(a, b, RULE[1]) for a, b, r, _, _ in rows])
    fitted = model(best).fit(x, y)
    scaler, logistic = fitted[0], fitted[-1]
    figures = {
        "update_pairs": int((y == 1).sum()),
        "other_pairs": int((y == 0).sum()),
        "writers": len(set(groups.tolist())),
        "series": len(set(names)),
        "held_out_log_loss": {str(c): round(v, 4) for c, v in losses.items()},
        "held_out_update_pairs_kept": int((p[y == 1] >= cut).sum()),
        "held_out_other_pairs_exposed": int((p[y == 0] >= cut).sum()),
        "rule_update_pairs_kept": int(rule[y == 1].sum()),
        "rule_other_pairs_exposed": int(rule[y == 0].sum()),
    }
    fit = {
        "features": list(FEATURES),
        "mean": [round(float(v), 6) for v in scaler.mean_],
        "scale": [round(float(v), 6) for v in scaler.scale_],
        "weights": [round(float(v), 6) for v in logistic.coef_[0]],
        "bias": round(float(logistic.intercept_[0]), 6),
        "cut": round(cut, 6),
        "c": best,
        "corpus": str(args.corpus),
        "held_out_by_writer": figures,
    }
    print(json.dumps({"embedding_model": embedder.info.model, **fit}, indent=1))
    if args.write:
        doc = json.loads(OUT.read_text(encoding="utf-8")) if OUT.exists() else {}
        doc.setdefault(
            "about", "the update safety per embedding model: scripts/fit_same_slot.py, memorize/same_slot.py"
        )
        doc.setdefault("models", {})[embedder.info.model] = fit
        OUT.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
