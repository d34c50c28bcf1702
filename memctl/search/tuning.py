"""The search pipeline's internal settings: measured in bench/retrieval.py, not meant for users to tune.

They were config keys (`hybrid_*`, `search_calibration`) until the config was cut to what a user sets; an
old config file that still names one gets a warning and the key is ignored (memctl/config). A bench or a
test that compares settings gives a store its own: `store.search_tuning = replace(TUNING, fusion="rrf")`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

FUSIONS = ("score", "rrf")


@dataclass(frozen=True)
class Tuning:
    fusion: str = "score"  # hybrid candidates ordered by score fusion, or by reciprocal rank ("rrf")
    candidates: int = 50  # candidates taken from each side (at least 3 x the limit)
    keyword_share: float = 0.25  # score fusion: weight of the normalised BM25 beside the normalised similarity
    drop_common_names: bool = True  # names in over 10 % of the memories leave the vector query
    named_candidates: bool = True  # ... and the turns whose speaker is such a name are searched too
    common_word_share: float = 0.1  # words in the text of more than this share of memories leave the BM25 query
    # ... and, in a large store, words in the text of more than this many: BM25's cost grows with the postings
    # it reads (hybrid at 100k: 23.6 -> 19.5 ms, bench/hybrid_search.py); below 20,000 memories the share binds.
    keyword_max_postings: int = 2000
    metadata_boost: float = 0.5  # fusion bonus when a query word is a keyword-metadata value
    neighbour_boost: float = 0.35  # fusion bonus: this x the best base score among the turn's chat neighbours
    neighbour_window: int = 2  # chat neighbours: memories stored within this many keys, same session
    neighbour_keys: tuple[str, ...] = ("session", "date")  # metadata naming a memory's chat session
    date_boost: float = 0.5  # fusion bonus when the query names the month and year of a memory's metadata date
    rrf_k: float = 60.0  # reciprocal rank fusion's k
    dense_weight: float = 1.0  # reciprocal rank fusion's weight of the vector side
    keyword_weight: float = 0.5  # ... and of the keyword side
    keyword_gate: float = 0.5  # rrf: keyword matches weaker than this x the best one are left out
    calibrated: bool = True  # the shipped calibration scores results (False: the plain (1 + cosine) / 2)
    order_by_score: bool = False  # results ordered by the calibrated score instead of the mode's (fusion's) order


TUNING = Tuning()


def tuning_of(store: Any) -> Tuning:
    """The store's own tuning (a bench or test set one), else the shipped one."""
    found = getattr(store, "search_tuning", None)
    return found if isinstance(found, Tuning) else TUNING


def tune(store: Any, **changes: Any) -> Tuning:
    """Give `store` its own tuning: its current one with `changes` (benches and tests compare settings)."""
    store.search_tuning = replace(tuning_of(store), **changes)
    return store.search_tuning
