"""A learned gate measured against the rules: logistic regression over the embedding plus shape features.

numpy only at run time. The weights (JSON lists, no pickle) are fitted by `scripts/train_gate.py` on
the tune half and shipped in `memctl/data/gate.json` under `classifier`. It scores fragment
candidates (durable fact vs noise); the solutions path keeps the measured rules. Whether memctl
uses it is decided by `bench/quality_gate.py` on the report half (see bench/README.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from memctl.gate_rules import _ABSOLUTE_DATE, _RECURRING, MAX_FRAGMENT_CHARS, rules_for, size
from memctl.grounding import cjk_share

EmbedFn = Callable[[list[str]], np.ndarray]


def shape_features(text: str) -> list[float]:
    """What the rules see, as numbers: each fragment rule fires or not, plus a few shapes."""
    clean = " ".join(text.split())[: MAX_FRAGMENT_CHARS + 1]  # longer is too_long anyway; bounds regex time
    fired = [1.0 if rule.check(clean) else 0.0 for rule in rules_for("fragments")]
    return fired + [
        cjk_share(clean),
        1.0 if any(c.isdigit() for c in clean) else 0.0,
        math.log1p(size(clean)) / 4.0,
        1.0 if _ABSOLUTE_DATE.search(clean) else 0.0,
        1.0 if _RECURRING.search(clean) else 0.0,
    ]


def feature_names() -> list[str]:
    return [f"rule:{r.name}" for r in rules_for("fragments")] + [
        "cjk_share",
        "has_digit",
        "log_size",
        "absolute_date",
        "recurring",
    ]


def features(texts: Sequence[str], embed: EmbedFn) -> np.ndarray:
    vectors = np.asarray(embed(list(texts)), dtype=np.float32)
    shapes = np.asarray([shape_features(t) for t in texts], dtype=np.float32)
    return np.hstack([vectors, shapes])


def fit(
    x: np.ndarray, y: np.ndarray, l2: float = 1e-2, steps: int = 600, rate: float = 0.5
) -> tuple[np.ndarray, float]:
    """Logistic regression by full-batch gradient descent, classes weighted to balance."""
    weights = np.zeros(x.shape[1], dtype=np.float64)
    bias = 0.0
    positive = max(1.0, float(y.sum()))
    negative = max(1.0, float(len(y) - y.sum()))
    sample = np.where(y == 1, len(y) / (2 * positive), len(y) / (2 * negative))
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(x @ weights + bias)))
        error = (p - y) * sample
        weights -= rate * (x.T @ error / len(y) + l2 * weights)
        bias -= rate * float(error.mean())
    return weights, bias


def predict(x: np.ndarray, weights: np.ndarray, bias: float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(x @ weights + bias)))


class GateClassifier:
    """P(noise) of a fragment candidate; dropped when it reaches the shipped threshold."""

    def __init__(self, weights: Sequence[float], bias: float, threshold: float, names: Sequence[str]) -> None:
        if list(names) != feature_names():
            raise ValueError("the classifier was trained on other features: rerun scripts/train_gate.py")
        self.weights = np.asarray(weights, dtype=np.float64)
        self.bias = float(bias)
        self.threshold = float(threshold)

    @staticmethod
    def _data() -> dict[str, Any] | None:
        from memctl.quality import gate_data

        return gate_data().get("classifier")

    @classmethod
    def available(cls) -> bool:
        data = cls._data()
        return bool(data and data.get("weights"))

    @classmethod
    def load(cls) -> GateClassifier:
        data = cls._data()
        if not data or not data.get("weights"):
            raise ValueError("no classifier weights in memctl/data/gate.json: run scripts/train_gate.py")
        return cls(data["weights"], data["bias"], data["threshold"], data["features"])

    def probability(self, texts: Sequence[str], embed: EmbedFn) -> np.ndarray:
        return predict(features(texts, embed).astype(np.float64), self.weights, self.bias)

    def reason(self, text: str, area: str, embed: EmbedFn) -> tuple[str, str] | None:
        """("classifier", p) when a fragment candidate is noise with enough confidence; the solutions
        path is left to the measured rules."""
        if area == "solutions":
            from memctl.quality import rule_reason

            return rule_reason(text, area)
        p = float(self.probability([text], embed)[0])
        return ("classifier", f"p(noise) {p:.2f}") if p >= self.threshold else None
