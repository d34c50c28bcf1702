"""How the hybrid search gathers and orders its candidates before they are scored.

Measured in bench/retrieval.py (each step kept only because it moved Recall@k):
1. The vector side ranks with the query minus the names found in over 10 % of the store (a chat partner's
   name is in half the turns and pulls the embedding towards any turn that names them); the keyword side
   drops those words too, and words found in the text of over `common_word_share` of the memories.
2. base = (1 - share) x min-max-normalised similarity + share x BM25 / best BM25, over the candidates.
3. + `metadata_boost` when a query word is one of the memory's keyword metadata values.
4. + `neighbour_boost` x the best base score among its chat neighbours (same session, within a window): a
   short reply ("We called him Max!") is found through the turn it answers.
5. + `date_boost` when the query names a month with its year ("in May 2023") and a keyword metadata value of
   the memory (its `date`) is a date in that month (memctl.text.months): of two trips, the one the question dates.
The result is the `fused` evidence of each candidate; the calibrated score (memctl.search.relevance) weighs it
beside the rest, and that one score orders and cuts the results.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memctl.errors import UsageError
from memctl.search.evidence import Facts, facts_of
from memctl.store.records import relevance

if TYPE_CHECKING:
    import numpy as np

    from memctl.search.protocol import SearchableStore
    from memctl.search.tuning import Tuning
    from memctl.store.records import Hit

# A query word found in more than this share of memories is too common to rank by keyword.
COMMON_TOKEN_SHARE = 0.1
# Names are left out of the vector query only in stores of at least 100 memories (10 % = 10).
COMMON_NAME_MIN_DF = 10
# Score fusion leaves out of the BM25 query only words found in the text of more than this many memories
# (so that a rare token, found in at most 3, always stays).
COMMON_WORD_MIN_DF = 3


def rrf_fuse(rankings: Sequence[tuple[float, Sequence[tuple[int, float]]]], k0: float) -> dict[int, float]:
    """Reciprocal rank fusion: key -> sum over rankings of weight / (k0 + rank), rank from 1."""
    fused: dict[int, float] = {}
    for weight, ranked in rankings:
        for rank, (key, _) in enumerate(ranked):
            fused[key] = fused.get(key, 0.0) + weight / (k0 + rank + 1)
    return fused


def gate_keyword(keyword: list[tuple[int, float]], gate: float) -> list[tuple[int, float]]:
    """Keyword matches weaker than `gate` x the best one only add noise to a fusion."""
    if not keyword:
        return keyword
    bound = gate * keyword[0][1]
    return [(key, score) for key, score in keyword if score >= bound]


class BaseScores:
    """Score fusion's base score of a key: (1 - share) x normalised similarity + share x normalised BM25."""

    def __init__(
        self,
        store: SearchableStore,
        ranking: np.ndarray,
        dense: list[tuple[int, float]],
        keyword: list[tuple[int, float]],
        share: float,
    ) -> None:
        self.ranking = ranking
        self.share = min(max(share, 0.0), 1.0)
        self.dense_relevance = {key: relevance(ip) for key, ip in dense}
        values = list(self.dense_relevance.values())
        self.low, self.high = (min(values), max(values)) if values else (0.0, 1.0)
        self.keyword = dict(keyword)
        self.best_keyword = max(self.keyword.values(), default=0.0)
        self._known: dict[int, float] = {}  # of() so far (a neighbour is asked for by up to 2 x window turns)
        self.add_dense(store, [key for key, _ in keyword])

    def add_dense(self, store: SearchableStore, keys: list[int]) -> None:
        missing = [key for key in keys if key not in self.dense_relevance]
        self.dense_relevance.update(store._relevance_of(missing, self.ranking))
        self._known.clear()

    def of(self, key: int) -> float:
        known = self._known.get(key)
        if known is None:
            span = self.high - self.low
            similarity = self.dense_relevance.get(key, self.low)
            dense = 1.0 if span <= 0 else min(max((similarity - self.low) / span, 0.0), 1.0)
            bm25 = self.keyword.get(key, 0.0) / self.best_keyword if self.best_keyword > 0 else 0.0
            known = self._known[key] = (1 - self.share) * dense + self.share * bm25
        return known


def cjk_names(store: SearchableStore, query: str, hits: Mapping[int, Hit], common_df: int) -> set[str]:
    """The CJK keyword-metadata values (a speaker's name) of the candidates that the query writes and that
    over `common_df` memories hold: the CJK counterpart of the capitalised names of step 1, found where a
    name is recorded since CJK text marks no name by case or space."""
    from memctl.search.evidence import words_of

    if common_df < COMMON_NAME_MIN_DF:
        return set()
    values = {v for hit in hits.values() for v in words_of(store._keywords(hit.metadata))}
    named = cjk_written_in(query.lower(), values)
    return store._common_tokens(sorted(named), common_df) if named else set()


def cjk_written_in(lowered_query: str, values: Collection[str]) -> set[str]:
    """The CJK values (a speaker's name, 2 characters or more) written inside the query: CJK text has no
    spaces, and the segmenter often joins a name to the verb after it ("王芳会弹")."""
    from memctl.text.segment import has_cjk

    return {v for v in values if len(v) >= 2 and has_cjk(v) and v in lowered_query}


def named_within(lowered_query: str, values: set[str]) -> bool:
    """Whether a CJK keyword-metadata value is written inside the query (the metadata boost's CJK match)."""
    return bool(cjk_written_in(lowered_query, values))


def common_names_dropped(store: SearchableStore, tuning: Tuning, query: str, common_df: int) -> tuple[set[str], str]:
    """The capitalised query words found in over `common_df` memories, and the query without them (the
    query itself when there are none or the store is too small to tell): step 1."""
    from memctl.store.keyword import name_tokens, without_words

    if not tuning.drop_common_names or common_df < COMMON_NAME_MIN_DF:
        return set(), query
    names = store._common_tokens(name_tokens(query), common_df)
    return names, without_words(query, names)


def pool_hits(
    store: SearchableStore,
    dense: list[tuple[int, float]],
    keyword: list[tuple[int, float]],
    keyword_hits: Mapping[int, Hit],
) -> dict[int, Hit]:
    """The candidates of both sides, dense first, each read once: the keyword side's rows were read
    while the query was embedded."""
    pool = list(dict.fromkeys([key for key, _ in dense] + [key for key, _ in keyword]))
    more = dict(store._seq_hits([(key, 0.0) for key in pool if key not in keyword_hits]))
    found = {**more, **keyword_hits}
    return {key: found[key] for key in pool if key in found}


def with_named(
    store: SearchableStore,
    dense: list[tuple[int, float]],
    ranking: np.ndarray,
    depth: int,
    query: str,
    names: set[str],
    area: str | None,
    only: Collection[int] | None,
) -> list[tuple[int, float]]:
    """`dense` plus the vector side's best `depth` among the memories whose keyword metadata is one of the
    (common) names the query mentions: in a long chat the turn a question is about is one of that
    speaker's hundreds, and the best 50 of the whole store often miss it."""
    words = {w for w in re.findall(r"\w+", query) if w.lower() in names} | cjk_written_in(query, names)
    keys = [k for k in store.config["keyword_metadata_keys"] if re.fullmatch(r"[A-Za-z_]\w*", str(k))]
    if not words or not keys:
        return dense
    # One membership test per key: `key == w1 or key == w2 ...` for every key nests one SQL CASE per term,
    # and two names x five keys overflowed SQLite's parser (the search crashed).
    listed = sorted(words)
    expression = " or ".join(f"{key} in {listed!r}" for key in keys)
    import numpy as np

    memo = store._memo()
    slot = ("named", area, expression)
    named = memo.get(slot)
    if named is None:
        try:
            selected = store._candidates(area, store.compile(expression))
        except UsageError:  # too long a filter: the plain candidates
            return dense
        # Kept sorted, as an array: a speaker's turns are thousands of keys at 100k memories, and
        # sorting a set of them on every search cost more than ranking them.
        found = [] if selected is None else [int(k) for k in selected]
        named = memo[slot] = np.unique(np.asarray(found, dtype=np.int64))
    if only is not None and len(named):  # the area and the caller's filter still apply
        named = named[np.isin(named, np.fromiter((int(k) for k in only), dtype=np.int64))]
    if len(named) == 0:
        return dense
    extra = store._dense_pairs(ranking, depth, named)
    merged = dict(dense)
    for key, ip in extra:
        merged.setdefault(key, ip)
    return sorted(merged.items(), key=lambda pair: -pair[1])


def add_neighbour_boost(
    store: SearchableStore,
    tuning: Tuning,
    hits: dict[int, Hit],
    final: dict[int, float],
    base: BaseScores,
    only: Collection[int] | None,
    memo: dict[Any, Any],
) -> None:
    """Raise each chat turn by `neighbour_boost` x the best base score of its session neighbours (step 4)."""
    weight, window = tuning.neighbour_boost, tuning.neighbour_window
    facts = facts_of(store, memo, hits)
    sessions = {key: facts[key].session for key in hits}  # type: ignore[union-attr]
    if weight <= 0 or window <= 0 or not any(s is not None for s in sessions.values()):
        return
    near = {
        key: [n for n in range(key - window, key + window + 1) if n != key]
        for key, session in sessions.items()
        if session is not None
    }
    extra = sorted({n for ns in near.values() for n in ns} - set(hits))
    facts = facts_of(store, memo, hits, extra)
    allowed = None if only is None else {int(k) for k in only}
    same: dict[int, list[int]] = {}  # a turn's neighbours in its area and session, as allowed
    for key, neighbours in near.items():
        own = facts[key]
        assert own is not None
        same[key] = [n for n in neighbours if _same_session(facts.get(n), own, sessions[key], n, allowed)]
    # Only the neighbours that count need their similarity (each is computed alone, so which others
    # are asked for changes no value).
    base.add_dense(store, sorted({n for ns in same.values() for n in ns} - set(hits)))
    for key, neighbours in same.items():
        final[key] += weight * max((base.of(n) for n in neighbours), default=0.0)


def add_date_boost(
    store: SearchableStore, tuning: Tuning, query: str, hits: Mapping[int, Hit], final: dict[int, float]
) -> None:
    """Raise each memory whose keyword metadata (`date` by default) is a date in a month the query names with
    its year (step 5)."""
    from memctl.text.months import months_named

    asked = months_named(query) if tuning.date_boost > 0 else set()
    if not asked:
        return
    for key, hit in hits.items():
        if asked & months_named(store._keywords(hit.metadata or {})):
            final[key] += tuning.date_boost


def _same_session(row: Facts | None, own: Facts, session: str | None, key: int, allowed: set[int] | None) -> bool:
    return row is not None and (allowed is None or key in allowed) and row.area == own.area and row.session == session
