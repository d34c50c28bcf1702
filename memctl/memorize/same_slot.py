"""The update safety as a fitted model: may consolidation act on a stored memory for a new candidate?

Consolidation shows the utility model only stored memories it may update; a wrong `update` overwrites a
memory that held something else. Whether a stored memory holds the same slot as the candidate (the same
price, the same weekly slot, the same supplier, said again with a new value) is scored by a logistic
regression over a few broad pair features: their relevance (`(1 + cosine) / 2` of the store's embeddings),
the content words they share and that count's share of the shorter one, whether one is Chinese and the other
not (shared words cannot show it then), their lengths, and where the memory stands among the candidate's
neighbours in the store (how far below the nearest one, and whether it is the nearest or second nearest: a new
value's old one is usually its nearest memory even when the words differ, as in "vegetarian" then
"pescatarian"). It replaced a hand-set rule (relevance >= 0.75, or
two shared words making 60 % of the shorter memory's) that, held out by writer on the tune half, let through
six times as many unrelated pairs for the same share of labelled update pairs (docs/evaluation.md, "A fitted
update safety").

`scripts/fit_same_slot.py` fits one model per embedding model on the tune half's labelled update pairs
against every other pair of facts of the same series, and chooses the cut by cross-validation that leaves out
one writer at a time; the weights ship in `memctl/data/same_slot.json` (JSON, no pickle). A store whose
embedding model has no fitted model, or with `consolidation_same_slot` off, keeps the rule
(`consolidation_threshold`, `consolidation_keyword_overlap`). numpy only at run time.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from memctl.errors import MemctlError
from memctl.search.logistic import Fitted
from memctl.text.cjk import KANA_HAN

FEATURES = (
    "relevance",
    "relevance squared",
    "shared words (at most 6)",
    "shared share of the shorter",
    "shared words x share",
    "two or more shared",
    "relevance x share",
    "one Chinese, one not",
    "one Chinese, one not x relevance",
    "log length of the shorter",
    "log length ratio",
    "relevance below the nearest",
    "the nearest",
    "one of the two nearest",
)

_CJK = re.compile(f"[{KANA_HAN}]")


def chinese_share(text: str) -> float:
    """1 for text written mostly in Chinese/Japanese characters, 0.5 for some, 0 for none."""
    count = len(_CJK.findall(text))
    return 1.0 if count > 0.3 * len(text) else 0.5 if count else 0.0


def pair_features(text: str, other: str, relevance: float, nearest: float | None = None, rank: int = 0) -> list[float]:
    """The features of FEATURES for a candidate and a stored memory at `relevance`. `nearest` is the candidate's
    best relevance to any stored memory it was compared with, and `rank` this memory's place among them (0 the
    nearest); without them the memory counts as the nearest."""
    from memctl.memorize.consolidate import keyword_evidence

    shared, share = keyword_evidence(text, other)
    shared = min(shared, 6)
    cross = abs(chinese_share(text) - chinese_share(other))
    shorter, longer = sorted((max(len(text), 1), max(len(other), 1)))
    return [
        relevance,
        relevance * relevance,
        float(shared),
        share,
        shared * share,
        float(shared >= 2),
        relevance * share,
        cross,
        cross * relevance,
        math.log(shorter),
        math.log(longer / shorter),
        max((relevance if nearest is None else nearest) - relevance, 0.0),
        float(rank <= 0),
        float(rank <= 1),
    ]


@dataclass(frozen=True)
class SameSlot:
    """One embedding model's fitted update safety: a logistic model over standardised FEATURES, and its cut."""

    model: Fitted
    cut: float

    def probability(
        self, text: str, other: str, relevance: float, nearest: float | None = None, rank: int = 0
    ) -> float:
        """P(same slot) of a stored memory `other` at `relevance` to the candidate `text` (`pair_features`)."""
        return self.model.probability_of(pair_features(text, other, relevance, nearest, rank))

    def may_act(self, text: str, other: str, relevance: float, nearest: float | None = None, rank: int = 0) -> bool:
        return self.probability(text, other, relevance, nearest, rank) >= self.cut

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SameSlot:
        try:
            fields = {k: tuple(float(v) for v in data[k]) for k in ("mean", "scale", "weights")}
            if list(data["features"]) != list(FEATURES) or any(len(v) != len(FEATURES) for v in fields.values()):
                raise ValueError("the features differ from this memctl's")
            if any(s <= 0 for s in fields["scale"]):
                raise ValueError("a scale is not positive")
            return cls(Fitted(**fields, bias=float(data["bias"])), cut=float(data["cut"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise MemctlError(f"memctl/data/same_slot.json is unusable ({exc}); reinstall memctl") from exc


@cache
def _shipped() -> dict[str, Any]:
    text = (resources.files("memctl") / "data" / "same_slot.json").read_text(encoding="utf-8")
    doc = json.loads(text)
    return dict(doc.get("models") or {})


def for_model(embedding_model: str | None) -> SameSlot | None:
    """The fitted update safety of an embedding model, or None (no fit for it: the rule decides)."""
    data = _shipped().get(str(embedding_model or ""))
    return SameSlot.from_dict(data) if data else None
