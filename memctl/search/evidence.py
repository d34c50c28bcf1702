"""The evidence a search computes about each candidate (memctl.search.relevance.FEATURES), and the per-row facts
it keeps between searches to compute it cheaply."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memctl.search.protocol import SearchableStore
    from memctl.store.records import Hit

MEMO_MAX_ROWS = 30_000  # per-row search facts kept per store generation (then started afresh)
MEMO_MAX_TEXT = 1_000  # content units are kept only for texts up to this many characters
# A query token found in at most this share of memories (and at least 3) counts as rare.
RARE_TOKEN_SHARE = 0.002
# The evidence only the keyword index gives: left out of a dense search's.
KEYWORD_EVIDENCE = ("keyword", "known_words", "rare")


def words_of(text: str) -> set[str]:
    from memctl.store.keyword import word_set

    return word_set(text)


def session_in(metadata: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    """The chat session a memory belongs to: the value of the first of `keys` in its metadata."""
    for key in keys:
        value = metadata.get(key)
        if isinstance(value, str | int | float) and not isinstance(value, bool) and str(value):
            return str(value)
    return None


class Facts:
    """What a search derives from one stored row (its area, chat session, keyword-metadata words, content
    units, answer kinds held). Only a write changes a row, so these are kept for the store's generation
    (StoreBase._memo); the words and units are filled on first use, from the row as that search read it."""

    __slots__ = ("area", "session", "words", "units", "holds")

    def __init__(self, area: str, session: str | None) -> None:
        self.area = area
        self.session = session
        self.words: set[str] | None = None
        self.units: set[str] | None = None
        self.holds: dict[str, bool] = {}

    def metadata_words(self, store: SearchableStore, hit: Hit) -> set[str]:
        if self.words is None:
            self.words = words_of(store._keywords(hit.metadata))
        return self.words

    def content_units(self, text: str) -> set[str]:
        from memctl.search.relevance import content_units

        if self.units is not None:
            return self.units
        units = content_units(text)
        if len(text) <= MEMO_MAX_TEXT:  # a long chunk's units are not worth their memory
            self.units = units
        return units

    def answer_type(self, kinds: set[str], text: str) -> float:
        from memctl.search.relevance import holds

        for kind in kinds:
            held = self.holds.get(kind)
            if held is None:
                held = self.holds[kind] = holds(kind, text)
            if held:
                return 1.0
        return 0.0


def facts_of(
    store: SearchableStore, memo: dict[Any, Any], hits: Mapping[int, Hit], more: Iterable[int] = ()
) -> dict[int, Facts | None]:
    """Facts of the hits and of the rows `more` names (None for a key with no row), kept in `memo`."""
    from memctl.search.tuning import tuning_of

    session_keys = tuning_of(store).neighbour_keys
    slot = ("facts", session_keys, tuple(str(k) for k in store.config["keyword_metadata_keys"]))
    table: dict[int, Facts | None] | None = memo.get(slot)
    if table is None or len(table) > MEMO_MAX_ROWS:
        table = memo[slot] = {}
    for key, hit in hits.items():
        if table.get(key) is None:
            table[key] = Facts(hit.area, session_in(hit.metadata, session_keys))
    missing = [key for key in more if key not in table]
    if missing:
        found = store._seq_meta(missing)
        for key in missing:
            row = found.get(key)
            table[key] = None if row is None else Facts(row[0], session_in(row[1], session_keys))
    return table


class Lazy(Mapping[int, Any]):
    """A read-only mapping over the keys of `keys` whose values are computed on first use, then kept."""

    def __init__(self, keys: Collection[int], compute: Callable[[int], Any]) -> None:
        self._keys = keys
        self._compute = compute
        self._values: dict[int, Any] = {}

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __getitem__(self, key: int) -> Any:
        if key not in self._values:
            if key not in self._keys:
                raise KeyError(key)
            self._values[key] = self._compute(key)
        return self._values[key]

    def get(self, key: int, default: Any = None) -> Any:  # type: ignore[override]
        return self[key] if key in self._keys else default

    def __iter__(self) -> Iterator[int]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def rare_query_tokens(store: SearchableStore, query: str) -> set[str]:
    """The query's identifier tokens (a word with a digit, or capitalised mid-sentence) found in few memories."""
    from memctl.store.keyword import identifier_tokens

    return store._rare_tokens(identifier_tokens(query), max(3, int(store._size() * RARE_TOKEN_SHARE)))


def evidence_of(
    store: SearchableStore,
    query: str,
    hits: Mapping[int, Hit],
    cosines: Mapping[int, float],
    keyword: Mapping[int, float],
    fused: Mapping[int, float],
    facts: Mapping[int, Facts | None],
    stand: tuple[float, float] | None = None,
    *,
    dense_only: bool = False,
) -> Callable[[int], dict[str, float]]:
    """The evidence (memctl.search.relevance.FEATURES) of one candidate at a time: what depends on all of them
    is computed now, the rest per call; `cosines` of the query as asked. `stand`: the query's (mean, spread)
    over the calibration's background sentences (cosine_z). `dense_only`: no keyword query ran, so the
    evidence that needs the keyword index (keyword, rare, known_words) is left out: the calibration takes a
    missing value as its training mean, which moves the score neither way."""
    from memctl.search.relevance import asks, content_units, lacks, slots, z_score
    from memctl.store.keyword import count_tokens, query_tokens

    units = content_units(query)
    kinds = asks(query)
    wanted = slots(query)
    tokens = query_tokens(query)
    known = 0.0
    rare: set[str] = set()
    if not dense_only:
        known = len(store._rare_tokens(tokens, max(store._size(), 1))) / len(tokens) if tokens else 0.0
        rare = rare_query_tokens(store, query)
    words = set(tokens)
    ranked = sorted(cosines.values(), reverse=True)
    best = ranked[0] if ranked else 0.0
    mean_top = sum(ranked[:10]) / len(ranked[:10]) if ranked else 0.0
    best_keyword = max(keyword.values(), default=0.0)
    best_fused = max(fused.values(), default=0.0)

    def of(key: int) -> dict[str, float]:
        hit = hits[key]
        cos = cosines.get(key, -1.0)
        row = facts[key]
        assert row is not None  # every hit has its facts
        found = {
            "cosine": cos,
            "cosine_gap": cos - best,
            "cosine_lift": cos - mean_top,
            "overlap": len(units & row.content_units(hit.text)) / len(units) if units else 0.0,
            "keyword": keyword.get(key, 0.0) / best_keyword if best_keyword > 0 else 0.0,
            "metadata": 1.0 if words and words & row.metadata_words(store, hit) else 0.0,
            "fused": max(fused.get(key, 0.0), 0.0) / best_fused if best_fused > 0 else 0.0,
            "answer_type": row.answer_type(kinds, hit.text),
            "known_words": known,
            "cosine_z": z_score(cos, stand),
            "rare": min(count_tokens(hit.text, rare), len(rare)) / len(rare) if rare else 0.0,
            "slot_fit": 0.0 if lacks(wanted, hit.text) else 1.0,
        }
        if dense_only:
            for name in KEYWORD_EVIDENCE:
                del found[name]
        return found

    return of
