"""Model selection shared by the fitting scripts (not shipped in the package): the one-standard-error rule
that scripts/fit_gate.py and scripts/fit_relevance.py both use to choose an L2 strength from held-out losses.
"""

from __future__ import annotations

import numpy as np


def weighted_mean_and_se(rows: np.ndarray, weights: np.ndarray) -> tuple[float, float]:
    """The weighted mean of `rows` and its standard error (over the effective number of rows, (sum w)^2 / sum
    w^2, since a few heavily weighted rows carry less evidence than their count). With equal weights this is
    the plain mean and std / sqrt(n)."""
    total = float(weights.sum())
    mean = float((weights * rows).sum() / total)
    variance = float((weights * (rows - mean) ** 2).sum() / total)
    effective = total**2 / float((weights**2).sum())
    return mean, float(np.sqrt(variance / max(effective, 1.0)))


def strongest_within_one_se(tried: dict[float, tuple[float, float]]) -> tuple[float, float]:
    """(chosen, lowest): over {L2: (held-out loss, its standard error)}, the strongest L2 whose loss is within
    one standard error of the lowest one's, and the L2 with the lowest loss. A weaker penalty that is not
    clearly better is more likely to fit the tune writers' style than a new writer's."""
    best = min(tried, key=lambda k: tried[k][0])
    bound = tried[best][0] + tried[best][1]
    return max(l2 for l2, (loss, _) in tried.items() if loss <= bound), best
