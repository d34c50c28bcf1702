"""Is this question answered by the store at all? A second, question-level probability for `load`.

The relevance score (memctl/search/relevance.py) estimates, memory by memory, the probability that a memory
answers the query. A question about something never said (a contact's phone number when only their name and
role were stored) still has candidates that look close, and cutting them by their own score costs answers:
in leave-one-domain-out cross-validation on the tune half, the cut at which 80 % of such questions got nothing
kept the answer of 19 % of the answerable ones. This model looks at the question's candidates together: how
the best scores stand (best, second, margin, their mean, how many there were) and the evidence of the best one
(memctl.search.relevance.FEATURES). Fitted on the held-out scores of the relevance fit's folds
(scripts/fit_relevance.py), logistic, signs free, over those features and (`pairs`) their products two by two;
at the same 80 % silence it kept 53 % of the answers linear and 62 % with the pairs (112 domains held out by
writer, multilingual-e5).
`load` (and the MCP search tool) at default settings return nothing when it falls below its threshold; an
explicit threshold and the `recall` block do not consult it. A store small enough that the question sees at
most SMALL_STORE candidates (a new user's) has a threshold of its own, chosen by the same cross-validation on
the questions asked of small stores: their candidates are all there is, so the same probability means
something else there. A large store has one too (`large_threshold`): the more memories a store holds, the more
near misses a question about something never said meets by chance, and at the series stores' threshold a store of
every tune series (5,543 memories) kept silent on only 58 % of such questions (held out by writer). The threshold
rises linearly in the log of the store's size, from `threshold` at the series stores' median size to
`large_threshold` at the size of that one store (`large_sizes`), each chosen by the same cross-validation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memctl.errors import ConfigError
from memctl.search.logistic import Fitted
from memctl.search.relevance import FEATURES

CANDIDATES = 15  # the question's candidates it sees: the best by the search's own order (the fit's --candidates)
SMALL_STORE = 8  # at most this many candidates: a small store (the fit's few-memory stores hold 1 to 8)
SHOWN = 5  # the candidates whose mean score it takes (the results a question's reader looks at first)
# Of the best-scored candidate: its evidence (every relevance feature but `metadata`, 0 in the corpus).
BEST_EVIDENCE = tuple(name for name in FEATURES if name != "metadata")
QUESTION_FEATURES = (
    "best",  # the best relevance score among the candidates
    "second",  # the second best (0 with one candidate)
    "margin",  # best - second
    "mean_shown",  # the mean of the best SHOWN scores (missing ones count 0)
    "best_logit",  # log odds of the best score: the model's own scale, where a high score is spread out
    "best_squared",  # best ** 2: lets a very high best score count for more than a linear term does
    "candidates_log",  # log(1 + candidates): a small store's candidates say less by their ranks
    "single",  # 1 when the store offered one candidate only
    *(f"top_{name}" for name in BEST_EVIDENCE),
)


# Products of every two question features (squares included): how the best score should count depends on
# the rest (a 0.6 best alone in a one-memory store against a 0.6 best among close seconds), which a model of
# the features one by one cannot say. Cross-validated on the tune half (leave one domain out), the pairs
# raised the answers found at 80 % silence on never-said questions from 54 % to 60 % (docs/evaluation.md).
PAIR_FEATURES = tuple(f"{a}*{b}" for i, a in enumerate(QUESTION_FEATURES) for b in QUESTION_FEATURES[i:])


def with_pairs(values: Sequence[float]) -> list[float]:
    """The question features followed by their products two by two (PAIR_FEATURES' order)."""
    return list(values) + [a * b for i, a in enumerate(values) for b in values[i:]]


def feature_names(pairs: bool) -> tuple[str, ...]:
    """The features a model reads: the question features, and their products with `pairs`."""
    return QUESTION_FEATURES + PAIR_FEATURES if pairs else QUESTION_FEATURES


def question_features(scores: Sequence[float], best: Mapping[str, float]) -> list[float]:
    """The features of one question: its candidates' relevance scores (any order) and the evidence of the
    best-scored one."""
    ranked = sorted(scores, reverse=True)
    top = ranked[0] if ranked else 0.0
    second = ranked[1] if len(ranked) > 1 else 0.0
    shown = (ranked + [0.0] * SHOWN)[:SHOWN]
    clipped = min(max(top, 1e-6), 1 - 1e-6)
    own = [
        top,
        second,
        top - second,
        sum(shown) / SHOWN,
        math.log(clipped / (1 - clipped)),
        top * top,
        math.log1p(len(ranked)),
        1.0 if len(ranked) == 1 else 0.0,
    ]
    return own + [float(best.get(name, 0.0)) for name in BEST_EVIDENCE]


@dataclass(frozen=True)
class Answered(Fitted):
    """A fitted logistic model over QUESTION_FEATURES (and, with `pairs`, their products two by two) and the
    threshold `load` applies to it (`small_threshold`, when fitted, for a question with at most SMALL_STORE
    candidates)."""

    threshold: float
    pairs: bool = False
    small_threshold: float | None = None
    # Each QUESTION_FEATURES value's range in the fit. A question outside it is read at the nearest edge: the
    # products two by two grow quadratically there, and a model should not extrapolate past its evidence.
    low: tuple[float, ...] | None = None
    high: tuple[float, ...] | None = None
    # The threshold at the larger of `large_sizes` (memories in the store); `threshold` holds at the smaller.
    large_threshold: float | None = None
    large_sizes: tuple[int, int] | None = None

    def threshold_for(self, candidates: int, memories: int | None = None) -> float:
        """The threshold for a question that saw `candidates` candidates in a store of `memories` memories."""
        if self.small_threshold is not None and candidates <= SMALL_STORE:
            return self.small_threshold
        if self.large_threshold is None or self.large_sizes is None or memories is None:
            return self.threshold
        return self.threshold + size_share(memories, self.large_sizes) * (self.large_threshold - self.threshold)

    def with_large(self, threshold: float, sizes: tuple[int, int]) -> Answered:
        """This model with a large store's threshold (`threshold` at the larger of `sizes`)."""
        return replace(self, large_threshold=threshold, large_sizes=sizes)

    def row(self, features: Sequence[float]) -> list[float]:
        """What the model reads of one question's QUESTION_FEATURES: each held within its fitted range."""
        values = list(features)
        if self.low is not None and self.high is not None:
            values = [min(max(v, lo), hi) for v, lo, hi in zip(values, self.low, self.high, strict=True)]
        return with_pairs(values) if self.pairs else values

    def probability(self, scores: Sequence[float], best: Mapping[str, float]) -> float:
        """The probability that the store holds an answer to the question."""
        return self.probability_of(self.row(question_features(scores, best)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "features": list(feature_names(self.pairs)),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "weights": list(self.weights),
            "bias": self.bias,
            "threshold": self.threshold,
            **({} if self.small_threshold is None else {"small_threshold": self.small_threshold}),
            **({} if self.low is None or self.high is None else {"low": list(self.low), "high": list(self.high)}),
            **(
                {}
                if self.large_threshold is None or self.large_sizes is None
                else {"large_threshold": self.large_threshold, "large_sizes": list(self.large_sizes)}
            ),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "calibration") -> Answered:
        try:
            names = [str(n) for n in data["features"]]
            pairs = names == list(feature_names(True))
            if not pairs and names != list(QUESTION_FEATURES):
                raise ValueError(f"features must be {list(QUESTION_FEATURES)}, alone or with their pairs")
            mean, scale, weights = (tuple(float(x) for x in data[k]) for k in ("mean", "scale", "weights"))
            if not len(mean) == len(scale) == len(weights) == len(names):
                raise ValueError("mean/scale/weights must have one value per feature")
            if any(s <= 0 for s in scale):
                raise ValueError("scales must be > 0")
            threshold = float(data["threshold"])
            small = None if data.get("small_threshold") is None else float(data["small_threshold"])
            if not all(0.0 <= t <= 1.0 for t in (threshold, threshold if small is None else small)):
                raise ValueError("thresholds must be in [0, 1]")
            low, high = _fitted_range(data)
            large, sizes = _large_store(data)
            return cls(mean, scale, weights, float(data["bias"]), threshold, pairs, small, low, high, large, sizes)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: 'answered' is not a valid question model: {exc}") from exc


def _fitted_range(data: Mapping[str, Any]) -> tuple[tuple[float, ...] | None, tuple[float, ...] | None]:
    """The optional `low` and `high` of a saved model (one value per QUESTION_FEATURES, low <= high); a model
    saved before they existed has neither and reads its features as they are."""
    if data.get("low") is None and data.get("high") is None:
        return None, None
    low, high = (tuple(float(x) for x in data[k]) for k in ("low", "high"))
    if not len(low) == len(high) == len(QUESTION_FEATURES) or any(lo > hi for lo, hi in zip(low, high, strict=True)):
        raise ValueError(f"low/high must have one value per question feature ({len(QUESTION_FEATURES)}), low <= high")
    return low, high


def _large_store(data: Mapping[str, Any]) -> tuple[float | None, tuple[int, int] | None]:
    """The optional `large_threshold` and its `large_sizes` [series size, large size] of a saved model."""
    if data.get("large_threshold") is None and data.get("large_sizes") is None:
        return None, None
    large = float(data["large_threshold"])
    sizes = tuple(int(n) for n in data["large_sizes"])
    if not 0.0 <= large <= 1.0:
        raise ValueError("large_threshold must be in [0, 1]")
    if len(sizes) != 2 or not 1 <= sizes[0] < sizes[1]:
        raise ValueError("large_sizes must be two store sizes, 1 <= smaller < larger")
    return large, (sizes[0], sizes[1])


def size_share(memories: int, sizes: tuple[int, int]) -> float:
    """Where a store of `memories` memories stands between `sizes` on a log scale: 0 at or below the smaller,
    1 at or above the larger (a store ten times as large meets about ten times the chance near misses)."""
    low, high = sizes
    if memories <= low:
        return 0.0
    if memories >= high:
        return 1.0
    return math.log(memories / low) / math.log(high / low)


def fit(
    rows: Sequence[Sequence[float]],
    labels: Sequence[int],
    weights: Sequence[float],
    threshold: float,
    l2: float,
    pairs: bool = False,
) -> Answered:
    """Logistic regression over QUESTION_FEATURES rows (label 1: the store holds the answer), signs free; with
    `pairs`, over the rows and their products two by two. The model keeps each feature's range in `rows`."""
    from memctl.search.logistic import fit_logistic

    if any(len(row) != len(QUESTION_FEATURES) for row in rows) or len(set(labels)) < 2:
        raise ValueError("fit needs rows of len(QUESTION_FEATURES) values and both labels")
    read = [with_pairs(row) for row in rows] if pairs else rows
    got = fit_logistic(read, labels, l2=l2, sample_weight=weights, nonnegative=False)
    columns = list(zip(*rows, strict=True))
    low, high = tuple(min(c) for c in columns), tuple(max(c) for c in columns)
    return Answered(got.mean, got.scale, got.weights, got.bias, threshold, pairs, low=low, high=high)
