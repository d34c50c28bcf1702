"""A search, from query to results: candidates from the store's indexes, their evidence, one score.

Every mode gathers candidates the same way for every backend (memctl/search/protocol.py): "dense" from the
vector index only (no keyword query), "keyword" from the keyword index (BM25 embedded, ts_rank_cd on
PostgreSQL), "hybrid" (default) from both, fused as memctl/search/fusion.py says. Each candidate's evidence
(memctl.search.relevance.FEATURES) goes through the store model's calibration, and that one score, the
estimated probability that the memory answers the query, cuts the results at the threshold: nothing
overrides it afterwards (no rare-token bypass, no slot rule: both are evidence). The results come in the mode's
order, which the score also weighs (`fused`): ordering them by the score itself gained 1 point of R@5 on the
tune half but lost 13 on the LoCoMo-shaped long chats (bench/retrieval.py set D), whose chat-turn signals the
fit has not seen; `TUNING.order_by_score` switches to it. A model with no shipped calibration (or a tuning with
`calibrated` off) scores (1 + cosine) / 2 instead; its results keep the mode's own order, a keyword match
on a rare identifier ranks first and passes, and the slot rule lowers a memory without the value asked for.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memctl.errors import UsageError
from memctl.search import fusion
from memctl.search.evidence import Lazy, evidence_of, facts_of, rare_query_tokens
from memctl.search.tuning import FUSIONS, tuning_of
from memctl.store.records import relevance
from memctl.store.validate import check_area

if TYPE_CHECKING:
    import numpy as np

    from memctl.search.answered import Answered
    from memctl.search.protocol import SearchableStore
    from memctl.search.relevance import Calibration
    from memctl.search.tuning import Tuning
    from memctl.store.filters import Filter
    from memctl.store.records import Hit

SEARCH_MODES = ("hybrid", "dense", "keyword")
PLAIN_THRESHOLD = 0.7  # the default cut of the plain (1 + cosine) / 2, with no calibration to say otherwise
Results = list[tuple["Hit", "dict[str, float] | None"]]


@dataclass
class Pool:
    """The candidates of one search and what their evidence is computed from."""

    hits: dict[int, Hit]
    shown: Mapping[int, float]  # relevance (1 + cosine) / 2 of the query as asked
    fused: Mapping[int, float]  # the mode's own order: fusion score, BM25 or similarity
    vector: np.ndarray  # the query as asked
    keyword: dict[int, float] = field(default_factory=dict)  # BM25 of the keyword side's candidates
    rare_hits: dict[int, int] = field(default_factory=dict)  # rare query tokens each holds (plain scoring)
    dense_only: bool = False  # no keyword query ran: keyword evidence is unknown, not 0


def default_threshold(store: SearchableStore, purpose: str = "load") -> float:
    """The cut when the caller names none: config search_threshold, else the calibration's own: for `load` (and
    every search) the one that balances answers found against never-said questions left silent, for the
    `recall` block the lower one shipped beside it (context an agent can ignore; a missed answer is lost)."""
    configured = store.config["search_threshold"]
    if configured is not None:
        return float(configured)
    calibration = store.calibration() if tuning_of(store).calibrated else None
    if calibration is None or calibration.default_threshold is None:
        return PLAIN_THRESHOLD
    if purpose == "recall" and calibration.recall_threshold is not None:
        return calibration.recall_threshold
    return calibration.default_threshold


def search_evidence(
    store: SearchableStore,
    query: str,
    limit: int = 10,
    threshold: float | None = None,
    area: str | None = None,
    filter: str | Filter | None = None,
    mode: str = "hybrid",
) -> Results:
    """Results at or above threshold, best first, each with the evidence its score came from (None when the
    plain formula scored it)."""
    if mode not in SEARCH_MODES:
        raise UsageError(f"search mode must be one of {', '.join(SEARCH_MODES)}, not {mode!r}")
    tuning = tuning_of(store)
    if tuning.fusion not in FUSIONS:
        raise UsageError(f"fusion must be one of {', '.join(FUSIONS)}, not {tuning.fusion!r}")
    flt = store.compile(filter)
    if area is not None:
        check_area(area)
    query = store._check_text(query)
    cut = default_threshold(store) if threshold is None else float(threshold)
    # At default settings a search also asks whether the store answers the question at all (answered.py);
    # a threshold named by the caller or the config is taken as asked.
    ask_answered = threshold is None and store.config["search_threshold"] is None
    if store._is_empty():
        return []
    with store._search_scope():
        calibration = store.calibration() if tuning.calibrated else None
        only = None
        if mode == "hybrid" and tuning.fusion == "score":  # embeds the query itself, beside its keyword side
            pool = _hybrid(store, tuning, query, limit, area, flt)
        else:
            vector = store._embed_query(query)
            only = store._candidates(area, flt)
            if only is not None and len(only) == 0:
                return []
            if mode == "dense" and calibration is None:
                found = store.search_vector(vector, limit=limit, threshold=cut, area=area, filter=flt)
                return [(hit, None) for hit in found]
            if mode == "dense":
                pool = _dense(store, tuning, vector, limit, only)
            else:
                pool = _fused(store, tuning, query, vector, limit, area, flt, only, use_dense=mode == "hybrid")
        if pool is None:
            return []
        if calibration is None:
            return _select_plain(query, pool, limit, cut)
        return _select_calibrated(
            store, calibration, query, pool, limit, cut, calibration.answered if ask_answered else None
        )


def _depth(tuning: Tuning, limit: int) -> int:
    return max(limit * 3, tuning.candidates)


def _dense(
    store: SearchableStore, tuning: Tuning, vector: np.ndarray, limit: int, only: Collection[int] | None
) -> Pool:
    """The vector side alone: no keyword query runs."""
    dense = store._dense_pairs(vector, _depth(tuning, limit), only)
    hits = dict(store._seq_hits([(key, 0.0) for key, _ in dense]))
    shown = {key: relevance(ip) for key, ip in dense if key in hits}
    low = min(shown.values(), default=0.0)
    return Pool(hits, shown, {key: rel - low for key, rel in shown.items()}, vector, dense_only=True)


def _fused(
    store: SearchableStore,
    tuning: Tuning,
    query: str,
    vector: np.ndarray,
    limit: int,
    area: str | None,
    flt: Filter | None,
    only: Collection[int] | None,
    *,
    use_dense: bool,
) -> Pool:
    """Keyword mode, or hybrid by reciprocal rank fusion."""
    depth = _depth(tuning, limit)
    dense = store._dense_pairs(vector, depth, only) if use_dense else []
    common_df = int(store._size() * fusion.COMMON_TOKEN_SHARE)
    keyword = store._keyword_pairs(
        query, depth, area if flt is None else None, only if flt is not None else None, common_df
    )
    if use_dense:
        keyword = fusion.gate_keyword(keyword, tuning.keyword_gate)
    shown = {key: relevance(ip) for key, ip in dense}
    shown.update(store._relevance_of([key for key, _ in keyword if key not in shown], vector))
    ranked = fusion.rrf_fuse([(tuning.dense_weight, dense), (tuning.keyword_weight, keyword)], tuning.rrf_k)
    hits = dict(store._seq_hits([(key, 0.0) for key in ranked]))
    order = dict(keyword) if not use_dense else ranked  # keyword mode: the BM25 order is the mode's own
    rare = _rare_hits(store, query, hits, {key for key, _ in keyword})
    return Pool(hits, shown, order, vector, dict(keyword), rare)


def _hybrid(
    store: SearchableStore, tuning: Tuning, query: str, limit: int, area: str | None, flt: Filter | None
) -> Pool | None:
    """Score fusion (memctl/search/fusion.py). The query is embedded while the keyword side (BM25, its rows,
    the rare-token hits) is read: that side needs no vector, and the model (onnxruntime releases the GIL)
    runs on a thread of its own where the backend has one."""
    from memctl.store.keyword import query_tokens
    from memctl.text.segment import has_cjk

    total = store._size()
    common_df = int(total * fusion.COMMON_TOKEN_SHARE)
    names, stripped = fusion.common_names_dropped(store, tuning, query, common_df)
    depth = _depth(tuning, limit)
    share = tuning.common_word_share
    common_text_df = max(int(total * share), fusion.COMMON_WORD_MIN_DF) if share > 0 else 0
    if common_text_df and tuning.keyword_max_postings > 0:
        common_text_df = min(common_text_df, max(tuning.keyword_max_postings, fusion.COMMON_WORD_MIN_DF))

    def keyword_side(only):
        pairs = store._keyword_pairs(
            query, depth, area if flt is None else None, only if flt is not None else None, common_df, common_text_df
        )
        return pairs, dict(store._seq_hits([(key, 0.0) for key, _ in pairs]))

    # CJK text marks no name by case or space: the names a CJK query writes are found among the keyword
    # side's candidates' metadata (a speaker), so that side runs before the embedding, which drops them.
    cjk_first = tuning.drop_common_names and has_cjk(query)
    if cjk_first:
        only = store._candidates(area, flt)
        if only is not None and len(only) == 0:
            return None
        keyword, keyword_hits = keyword_side(only)
        cjk = fusion.cjk_names(store, query, keyword_hits, common_df)
        names = names | cjk
        for name in cjk:
            stripped = stripped.replace(name, " ")
    vectors = store._start_query_embedding([query] if stripped == query else [query, stripped], scan=flt is None)
    if not cjk_first:
        only = store._candidates(area, flt)
        if only is not None and len(only) == 0:
            vectors()  # an embedding error is reported as when the search embedded first
            return None
        keyword, keyword_hits = keyword_side(only)
    rare = _rare_hits(store, query, keyword_hits, set(keyword_hits))  # a dense-only hit holds none
    embedded = vectors()
    vector, ranking = embedded[0], embedded[-1]
    dense = store._dense_pairs(ranking, depth, only)
    if names and tuning.named_candidates:
        dense = fusion.with_named(store, dense, ranking, depth, query, names, area, only)
    hits = fusion.pool_hits(store, dense, keyword, keyword_hits)
    memo = store._memo()
    facts = facts_of(store, memo, hits)
    base = fusion.BaseScores(store, ranking, dense, keyword, tuning.keyword_share)
    final = {key: base.of(key) for key in hits}
    words = set(query_tokens(query))
    lowered = query.lower()
    if tuning.metadata_boost and words:
        for key, hit in hits.items():
            row = facts[key]
            assert row is not None
            values = row.metadata_words(store, hit)
            if words & values or fusion.named_within(lowered, values):
                final[key] += tuning.metadata_boost
    fusion.add_neighbour_boost(store, tuning, hits, final, base, only, memo)
    fusion.add_date_boost(store, tuning, query, hits, final)
    shown = (
        {key: base.dense_relevance[key] for key in hits}
        if ranking is vector
        else store._relevance_of(list(hits), vector)
    )
    return Pool(hits, shown, final, vector, dict(keyword), rare)


def _rare_hits(store: SearchableStore, query: str, hits: Mapping[int, Hit], from_keyword: set[int]) -> dict[int, int]:
    from memctl.store.keyword import count_tokens

    rare = rare_query_tokens(store, query)
    return {key: count_tokens(h.text, rare) if key in from_keyword else 0 for key, h in hits.items()}


def _select_calibrated(
    store: SearchableStore,
    calibration: Calibration,
    query: str,
    pool: Pool,
    limit: int,
    threshold: float,
    answered: Answered | None = None,
) -> Results:
    """Every candidate scored by the calibration; that score cuts them. They come in the mode's order (the
    fusion's in hybrid; TUNING.order_by_score: by the score): ordering by the score lost long-chat recall.
    With `answered`, nothing comes back when the question seems not answered by the store at all."""
    cosines = {key: 2.0 * rel - 1.0 for key, rel in pool.shown.items()}
    facts = facts_of(store, store._memo(), pool.hits)
    compute = evidence_of(
        store,
        query,
        pool.hits,
        cosines,
        pool.keyword,
        pool.fused,
        facts,
        calibration.standing(pool.vector),
        dense_only=pool.dense_only,
    )
    evidence = {key: compute(key) for key in pool.hits}
    own = calibration.for_query(query)  # the CJK parameters for a question in CJK text, when fitted
    scores = {key: own.score(evidence[key]) for key in pool.hits}
    if answered is not None and not _is_answered(answered, pool, scores, evidence, store._size()):
        return []
    if tuning_of(store).order_by_score:
        order = sorted(pool.hits, key=lambda key: (-scores[key], -pool.fused.get(key, 0.0)))
    else:  # the mode's order (the fusion's in hybrid), the score breaking its ties
        order = sorted(pool.hits, key=lambda key: (-pool.fused.get(key, 0.0), -scores[key]))
    results: Results = []
    for key in order:
        if limit > 0 and len(results) >= limit:
            break
        if scores[key] >= threshold:
            pool.hits[key].score = round(scores[key], 6)
            results.append((pool.hits[key], evidence[key]))
    return results


def _is_answered(
    answered: Answered,
    pool: Pool,
    scores: Mapping[int, float],
    evidence: Mapping[int, dict[str, float]],
    memories: int,
) -> bool:
    """The question model's verdict over the candidates it was fitted on: the best CANDIDATES in the mode's
    order, as scripts/fit_relevance.py gathers them; its threshold rises with the store's size (`memories`,
    the whole store's even when a filter narrows the search: a cheap counter, and the conservative side)."""
    from memctl.search.answered import CANDIDATES

    seen = sorted(pool.hits, key=lambda key: -pool.fused.get(key, 0.0))[:CANDIDATES]
    if not seen:
        return False
    best = max(seen, key=lambda key: scores[key])
    probability = answered.probability([scores[key] for key in seen], evidence[best])
    return probability >= answered.threshold_for(len(seen), memories)


def _select_plain(query: str, pool: Pool, limit: int, threshold: float) -> Results:
    """The plain formula's results: the mode's order (rare-token hits first), (1 + cosine) / 2 as the score, those
    below threshold left out unless they hold a rare query token; the slot rule applied."""
    scores, rare_hits = _answerable(query, pool.hits, pool.shown, pool.rare_hits)
    rank = pool.fused
    ranked = sorted(pool.hits, key=lambda key: (-rare_hits.get(key, 0), -rank.get(key, 0.0), -scores.get(key, 0.0)))
    results: Results = []
    for key in ranked:
        if limit > 0 and len(results) >= limit:
            break
        score = scores.get(key, 0.0)
        if score >= threshold or rare_hits.get(key, 0):
            pool.hits[key].score = round(score, 6)
            results.append((pool.hits[key], None))
    return results


def _answerable(
    query: str, hits: Mapping[int, Hit], scores: Mapping[int, float], rare_hits: Mapping[int, int]
) -> tuple[Mapping[int, float], Mapping[int, int]]:
    """The slot rule of the plain formula: a question for one exact value (a phone number, a price) scores a
    memory that holds no such value SLOT_MISS_FACTOR times lower, and the rare token it shares (the surname)
    no longer lifts it over the threshold or ranks it first."""
    from memctl.search.relevance import SLOT_MISS_FACTOR, lacks, slots

    kinds = slots(query)
    if not kinds:
        return scores, rare_hits
    missing = {key for key in hits if lacks(kinds, hits[key].text)}
    if not missing:
        return scores, rare_hits
    lowered = Lazy(hits, lambda key: scores.get(key, 0.0) * (SLOT_MISS_FACTOR if key in missing else 1.0))
    return lowered, {key: count for key, count in rare_hits.items() if key not in missing}
