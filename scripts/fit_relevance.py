"""Fit the relevance calibration of an embedding model on the TUNE half of the corpus and ship it.

    python scripts/fit_relevance.py --corpus eval/corpus/tune [--corpus DIR ...] [--write | --cross-validate]

Training pairs (query, candidate memory, answers: yes/no), all from the given tune-half folders:
- each recall probe against a store of its series' memories, and against one store of every memory
  of the folder (other domains as distractors): the memory it should recall is a yes;
- negative probes (should_recall null): the best `--negatives` candidates by the fusion are a no;
- synthetic negatives: every probe of one series asked of the store of another series (nothing
  there answers it; cross-domain, so never a hidden yes): its best candidates are a no.
The evidence of each candidate is what the search computes (memctl.search.relevance.FEATURES), except that
cosine_z is measured against the background sentences of the OTHER domains only (a search on an unseen
domain has none of its own in the background). The background (memctl/data/relevance/background.json)
is `--background-per-domain` sentences of each tune domain's conversations, drawn with a fixed seed. A logistic
regression with weights >= 0 is fitted (numpy), answers and non-answers weighing the same in total.
The cut is the score at which the most answerable probes keep their answer (within the recall block's
`--limit`) plus the most unanswerable ones (negative and synthetic, pooled) stay silent on these same
tune-half stores (the mean number of non-answers kept beside an answer is printed, not optimised: a
penalty on it pushed the cut to where half the answers were lost); the odds are then shifted so that
this cut is the default threshold 0.7 (default_config.yaml search_threshold). `--write` saves
memctl/data/relevance/<model>.json, the background sentences and <model>.background.npy (their unit
vectors under this model, float16). Never run on the report half.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memctl.search.relevance import (  # noqa: E402
    FEATURES,
    SLOT_MISS_FACTOR,
    Calibration,
    background_file,
    file_name,
    fit,
    lacks,
    slots,
    standing,
    z_score,
)
from scripts.corpus import Probe, Series, configured, fill, load_series  # noqa: E402

SYNTHETIC = "\x00synthetic\x00"
SLOT_MISS = "\x00slot_miss\x00"  # evidence key: the memory lacks the exact value the question asks for
# thresholds at which --cross-validate also sums the held-out folds (the trade-off curve, not one point)
SWEEP = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85)

DEFAULT = 0.7  # default_config.yaml search_threshold
# A neutral calibration: every candidate gets the evidence computed, scored 0.5 (order: the fusion's).
NEUTRAL = Calibration("neutral", (0.0,) * len(FEATURES), (1.0,) * len(FEATURES), (0.0,) * len(FEATURES), 0.0)


SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")


def build_background(folders: list[Path], per_domain: int, seed: int = 20) -> list[dict[str, str]]:
    """`per_domain` sentences (15-220 characters, any turn) of each domain's conversations, drawn with `seed`."""
    by_domain: dict[str, list[str]] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.json")):
            data = json.loads(path.read_text(encoding="utf-8"))
            found = by_domain.setdefault(str(data.get("domain") or data.get("series") or path.stem), [])
            for message in data.get("messages", []):
                found += [t.strip() for t in SENTENCE.split(message["content"]) if 15 <= len(t.strip()) <= 220]
    rng = random.Random(seed)
    chosen = []
    for domain in sorted(by_domain):
        texts = list(dict.fromkeys(by_domain[domain]))
        chosen += [{"domain": domain, "text": t} for t in rng.sample(texts, min(per_domain, len(texts)))]
    return chosen


class Background:
    """The background sentences' vectors under the store's model, and the query's standing without some domains."""

    def __init__(self, embedder, sentences: list[dict[str, str]]) -> None:
        self.domains = np.array([s["domain"] for s in sentences])
        self.vectors = np.asarray(embedder.embed([s["text"] for s in sentences]), dtype=np.float32)

    def without(self, domains: set[str]):
        keep = ~np.isin(self.domains, sorted(domains)) if domains else slice(None)
        return self.vectors[keep]


def collect(
    store,
    probes: list[tuple[Probe, bool, str]],
    candidates: int,
    background: Background,
    store_domain: str | None,
) -> list[tuple[str, list[dict], list[int], str]]:
    """Per probe (probe, answerable, its domain): (query, evidence of its top candidates by the fusion,
    labels, the probe's domain); the query of a synthetic negative (asked of another series' store) is
    marked with a leading SYNTHETIC. cosine_z sees no background sentence of the probe's domain or of
    the store's (`store_domain`; None: the store holds every domain, so only the probe's is left out)."""
    out = []
    with configured(store, {"search_threshold": 0.0}):
        store.calibration = lambda: NEUTRAL
        try:
            for probe, answerable, domain in probes:
                got = store.search_evidence(probe.query, limit=1000, threshold=0.0, mode="hybrid")
                unseen = {domain} if store_domain is None else {domain, store_domain}
                stand = standing(background.without(unseen), store._embed_query(probe.query))
                for _, evidence in got:
                    evidence["cosine_z"] = z_score(evidence["cosine"], stand)
                got.sort(key=lambda pair: -pair[1]["fused"])
                got = got[:candidates]
                kinds = slots(probe.query)
                for hit, evidence in got:  # the search's slot rule, applied after the calibrated score
                    evidence[SLOT_MISS] = lacks(kinds, hit.text)
                labels = [int(answerable and probe.want is not None and hit.text == probe.want) for hit, _ in got]
                query = probe.query if answerable else SYNTHETIC + probe.query
                out.append((query, [ev for _, ev in got], labels, domain))
        finally:
            del store.calibration
    return out


def domains_of(folder: Path) -> dict[str, str]:
    """series -> domain of the folder's transcripts (a transcript naming no domain: its series' name)."""
    found: dict[str, str] = {}
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        series = str(data.get("series") or path.stem)
        found.setdefault(series, str(data.get("domain") or series))
    return found


def gather(
    folders: list[Path], home: Path, candidates: int, background: Background
) -> tuple[list[list[tuple[str, list[dict], list[int], str]]], list[str | None]]:
    """Groups of probe results, one per store (a series' store, or the whole folder's), with the probes
    asked of it; and each group's store domain (None: the whole folder)."""
    import memctl

    groups = []
    store_domains: list[str | None] = []
    for f_number, folder in enumerate(folders):
        all_series: list[Series] = load_series(folder)
        in_folder = domains_of(folder)
        domains = {series.name: in_folder.get(series.name, series.name) for series in all_series}
        for number, series in enumerate(all_series):
            with memctl.open_store(home, f"fit{f_number}-s{number}") as store:
                fill(store, series.memories)
                if not len(store):
                    continue
                own = domains[series.name]
                asked = [(p, True, own) for p in series.probes]
                asked += [
                    (p, False, domains[other.name]) for other in all_series if other is not series for p in other.probes
                ]
                groups.append(collect(store, asked, candidates, background, own))
                store_domains.append(own)
        with memctl.open_store(home, f"fit{f_number}-half") as store:
            for series in all_series:
                fill(store, series.memories)
            asked = [(p, True, domains[s.name]) for s in all_series for p in s.probes]
            groups.append(collect(store, asked, candidates, background, None))
            store_domains.append(None)
    return groups, store_domains


def training_rows(groups, negatives: int, neighbours: int) -> tuple[list[list[float]], list[int], list[bool]]:
    """The answer of each answerable probe (yes); the `negatives` best candidates (by the fusion) of each
    unanswerable probe (no); and the `neighbours` best non-answers of each answerable probe (no). Without
    the neighbours, evidence that is the same for every candidate of a query (known_words) looks like
    relevance, and an unrelated memory passes beside the answer whenever the question is in-domain.
    Returns rows, labels and which rows are neighbours (weighed apart: a few of them are hidden yeses)."""
    rows, labels, near = [], [], []
    for group in groups:
        for _, evidence, ys, _ in group:
            if any(ys):
                chosen = [(ev, 1, False) for ev, y in zip(evidence, ys, strict=True) if y]
                chosen += [(ev, 0, True) for ev, y in zip(evidence, ys, strict=True) if not y][:neighbours]
            else:
                chosen = [(ev, 0, False) for ev in evidence[:negatives]]
            for ev, y, is_neighbour in chosen:
                rows.append([float(ev[name]) for name in FEATURES])
                labels.append(y)
                near.append(is_neighbour)
    return rows, labels, near


def pass_rates(
    groups,
    calibration: Calibration | Scored,
    threshold: float,
    limit: int,
    synthetic: bool = False,
    pooled: bool = False,
) -> tuple[float, float, int, int]:
    """(share of answerable probes whose answer scores >= threshold within the top `limit`, share of
    unanswerable probes with nothing >= threshold, counts); unanswerable = the corpus' negative probes,
    or with `synthetic` the probes asked of another series' store."""
    found = positives = silent = negatives = 0
    for group in groups:
        for query, evidence, labels, _ in group:
            if not pooled and query.startswith(SYNTHETIC) != synthetic and not any(labels):
                continue
            # the search's order (the fusion's), the calibrated score deciding what passes
            ranked = sorted(zip(evidence, labels, strict=True), key=lambda pair: -pair[0]["fused"])
            kept = [y for ev, y in ranked if searched(calibration, ev) >= threshold][:limit]
            if any(labels):
                positives += 1
                found += any(kept)
            else:
                negatives += 1
                silent += not kept
    return found / max(positives, 1), silent / max(negatives, 1), positives, negatives


def companions(groups, calibration: Calibration | Scored, threshold: float, limit: int) -> float:
    """Mean number of non-answers kept (>= threshold, within the top `limit`) beside an answerable probe's answer."""
    kept_others = answered = 0
    for group in groups:
        for _, evidence, labels, _ in group:
            if not any(labels):
                continue
            ranked = sorted(zip(evidence, labels, strict=True), key=lambda pair: -pair[0]["fused"])
            kept = [y for ev, y in ranked if searched(calibration, ev) >= threshold][:limit]
            answered += 1
            kept_others += len(kept) - sum(kept)
    return kept_others / max(answered, 1)


class Scored:
    """A calibration's scores, each candidate's computed once (the cut search asks for them 97 times)."""

    def __init__(self, calibration: Calibration) -> None:
        self.calibration = calibration
        self.memo: dict[int, float] = {}

    def score(self, evidence: dict) -> float:
        key = id(evidence)
        if key not in self.memo:
            self.memo[key] = searched(self.calibration, evidence)
        return self.memo[key]


def searched(calibration: Calibration | Scored, evidence: dict) -> float:
    """The score a search shows: the calibrated one, lowered by the slot rule (memctl.search.relevance.lacks)."""
    if isinstance(calibration, Scored):
        return calibration.score(evidence)
    return calibration.score(evidence) * (SLOT_MISS_FACTOR if evidence.get(SLOT_MISS) else 1.0)


def fit_and_cut(groups, model: str, args, verbose: bool = False) -> tuple[Calibration, float]:
    """The calibration fitted on `groups` with its odds shifted so that the cut chosen on them is DEFAULT."""
    rows, labels, near = training_rows(groups, args.negatives, args.neighbours)
    dropped = [FEATURES.index(name) for name in args.drop]
    rows = [[0.0 if i in dropped else v for i, v in enumerate(row)] for row in rows]
    # Answers and non-answers weigh the same in total; among the non-answers, the neighbours carry
    # --neighbour-weight of it.
    n_yes, n_near = sum(labels), sum(near)
    n_far = len(labels) - n_yes - n_near
    share = args.neighbour_weight if n_near else 0.0
    weights = [
        0.5 / n_yes if y else (0.5 * share / n_near if is_near else 0.5 * (1 - share) / n_far)
        for y, is_near in zip(labels, near, strict=True)
    ]
    calibration = fit(rows, labels, model, l2=args.l2, sample_weight=weights)
    # The cut: most answers kept plus most unanswerable probes (the corpus' and the synthetic ones, pooled)
    # silent; ties go to the higher threshold.
    best = None
    scored = Scored(calibration)
    for step in range(2, 99):
        threshold = step / 100
        found, silent, positives, negatives = pass_rates(groups, scored, threshold, args.limit, pooled=True)
        key = (round(found + silent, 6), threshold)
        if best is None or key > best[0]:
            best = (key, threshold)
        if verbose and step % 10 == 0:
            beside = companions(groups, scored, threshold, args.limit)
            print(
                f"  fitted odds at {threshold:.2f}: answer kept {found:.1%}, unanswerable silent {silent:.1%}, "
                f"{beside:.2f} non-answers beside an answer"
            )
    assert best is not None
    cut = best[1]
    # Shift the odds so that the chosen cut is the configured default threshold (search_threshold).
    shift = math.log(DEFAULT / (1 - DEFAULT)) - math.log(cut / (1 - cut))
    shifted = Calibration(**{**calibration.__dict__, "bias": calibration.bias + shift, "default_threshold": DEFAULT})
    return shifted, cut


def cross_validate(groups, store_domains: list[str | None], model: str, args) -> None:
    """Leave one domain out: fit (and cut) on the probes and stores of the other domains, measure the held-out
    domain's series stores at DEFAULT; print each fold and the sums. An estimate, from the tune half alone,
    of what the fit does on domains it never saw."""
    domains = sorted({d for d in store_domains if d is not None})
    totals = [0] * 7
    sweep = [[0, 0] for _ in SWEEP]
    for held in domains:
        train = [
            [item for item in group if item[3] != held]
            for group, store_domain in zip(groups, store_domains, strict=True)
            if store_domain != held
        ]
        test = [group for group, store_domain in zip(groups, store_domains, strict=True) if store_domain == held]
        calibration, _ = fit_and_cut(train, model, args)
        for point, threshold in zip(sweep, SWEEP, strict=True):
            found, silent, positives, negatives = pass_rates(test, calibration, threshold, args.limit)
            point[0] += round(found * positives)
            point[1] += round(silent * negatives)
        found, silent, positives, negatives = pass_rates(test, calibration, DEFAULT, args.limit)
        _, other, _, others = pass_rates(test, calibration, DEFAULT, args.limit, synthetic=True)
        beside = companions(test, calibration, DEFAULT, args.limit) * positives
        fold = [round(found * positives), positives, round(silent * negatives), negatives]
        fold += [round(other * others), others, beside]
        totals = [a + b for a, b in zip(totals, fold, strict=True)]
        print(f"  held out {held:28s} found {fold[0]}/{fold[1]}, negatives silent {fold[2]}/{fold[3]}")
    f, p, s, n, o, on, beside = totals
    curve = "  ".join(f"{t:.2f}: {a}/{p} found, {b}/{n} silent" for t, (a, b) in zip(SWEEP, sweep, strict=True))
    print(f"  at other thresholds: {curve}")
    print(
        f"leave-one-domain-out ({len(domains)} folds, series stores, at {DEFAULT}): answer found {f}/{p} "
        f"({f / max(p, 1):.1%}), negative probes silent {s}/{n} ({s / max(n, 1):.1%}), other series' probes "
        f"silent {o / max(on, 1):.1%}, {beside / max(p, 1):.2f} non-answers beside an answer"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, action="append", required=True, help="a TUNE-half corpus folder")
    parser.add_argument("--candidates", type=int, default=15, help="candidates per probe kept (by the fusion)")
    parser.add_argument(
        "--negatives", type=int, default=3, help="best candidates of an unanswerable probe taken as non-answers"
    )
    parser.add_argument(
        "--neighbours", type=int, default=0, help="best non-answers of an answerable probe taken as non-answers"
    )
    parser.add_argument(
        "--neighbour-weight",
        type=float,
        default=0.15,
        help="share of the non-answers' total weight the neighbours carry",
    )
    parser.add_argument(
        "--drop", action="append", default=[], choices=FEATURES, help="evidence left out of the model (weight 0)"
    )
    parser.add_argument("--l2", type=float, default=0.01)
    parser.add_argument(
        "--background-per-domain", type=int, default=40, help="background sentences drawn from each tune domain"
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=5,
        help="results counted when choosing the threshold (the recall block shows recall_memories_max_result)",
    )
    parser.add_argument("--write", action="store_true", help="save memctl/data/relevance/<model>.json")
    parser.add_argument(
        "--cross-validate",
        action="store_true",
        help="leave one tune domain out per fold: fit on the others, measure it (writes nothing)",
    )
    args = parser.parse_args()
    for folder in args.corpus:
        if "report" in folder.resolve().parts:
            raise SystemExit(f"{folder}: the calibration is fitted on the tune half only")
    import memctl

    home = Path(tempfile.mkdtemp(prefix="memctl-fit-relevance-"))
    sentences = build_background(args.corpus, args.background_per_domain)
    with memctl.open_store(home, "info") as store:
        model = store.embedder.info.model
        background = Background(store.embedder, sentences)
    groups, store_domains = gather(args.corpus, home, args.candidates, background)
    if args.cross_validate:
        cross_validate(groups, store_domains, model, args)
        return
    calibration, cut = fit_and_cut(groups, model, args, verbose=True)
    rows, labels, _ = training_rows(groups, args.negatives, args.neighbours)
    print(f"cut {cut:.2f} on the fitted odds; shifted to {DEFAULT}. At the default threshold (tune half):")
    found, silent, positives, negatives = pass_rates(groups, calibration, DEFAULT, args.limit)
    _, other, _, others = pass_rates(groups, calibration, DEFAULT, args.limit, synthetic=True)
    print(
        f"  answer kept {found:.1%} of {positives}, silent on {silent:.1%} of {negatives} negative probes "
        f"and on {other:.1%} of {others} probes asked of another series' store"
    )
    beside = companions(groups, calibration, DEFAULT, args.limit)
    print(f"  non-answers kept beside an answerable probe's answer: {beside:.2f} on average")
    print(
        f"model {model}: {len(rows)} pairs ({sum(labels)} answers) from {positives} answerable and "
        f"{negatives} unanswerable probe-store pairs"
    )
    for name, weight in zip(FEATURES, calibration.weights, strict=True):
        print(f"  {name:12s} weight {weight:.3f}")
    if args.write:
        path = ROOT / "memctl" / "data" / "relevance" / file_name(model)
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            **calibration.to_dict(),
            "fitted_on": [f"{f.parent.name}/{f.name}" for f in args.corpus],
            "pairs": len(rows),
            "answers": sum(labels),
            "tune_half_at_default": {
                "answer_kept": round(found, 4),
                "negative_probes_silent": round(silent, 4),
                "other_series_probes_silent": round(other, 4),
                "non_answers_beside_answer": round(beside, 4),
            },
        }
        doc["fitted_with"] = {"drop": args.drop, "negatives": args.negatives, "neighbours": args.neighbours}
        path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        texts = path.parent / "background.json"
        texts.write_text(json.dumps(sentences, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
        np.save(path.parent / background_file(model), background.vectors.astype(np.float16), allow_pickle=False)
        print(f"wrote {path.relative_to(ROOT)}, {texts.name} and {background_file(model)}")


if __name__ == "__main__":
    main()
