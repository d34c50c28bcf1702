"""scripts/model_selection.py: the one-standard-error rule both fitting scripts choose an L2 strength by."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
sys.path.insert(0, str(ROOT))

from scripts.fit_gate import strongest_l2  # noqa: E402
from scripts.model_selection import strongest_within_one_se, weighted_mean_and_se  # noqa: E402


def test_the_standard_error_counts_heavy_rows_as_fewer():
    """The error is over the effective number of rows, so a few heavy questions do not look like many."""
    rows = np.array([0.1, 0.3, 0.2, 0.6])
    mean, se = weighted_mean_and_se(rows, np.ones(4))
    assert mean == np.mean(rows) and np.isclose(se, np.std(rows) / 2)
    weights = np.array([10.0, 1.0, 1.0, 1.0])
    mean_skewed, se_skewed = weighted_mean_and_se(rows, weights)
    variance = float((weights * (rows - mean_skewed) ** 2).sum() / 13)
    assert np.isclose(mean_skewed, 2.1 / 13) and np.isclose(se_skewed, np.sqrt(variance / (13**2 / 103)))
    assert np.isclose(weighted_mean_and_se(rows, np.full(4, 10.0))[1], se)


def test_the_strongest_penalty_within_one_error_of_the_lowest_loss_is_chosen():
    tried = {0.1: (0.30, 0.01), 1.0: (0.305, 0.02), 3.0: (0.309, 0.01), 10.0: (0.32, 0.01)}
    assert strongest_within_one_se(tried) == (3.0, 0.1)
    assert strongest_within_one_se({0.1: (0.30, 0.0), 1.0: (0.301, 0.0)}) == (0.1, 0.1)


def test_the_gate_weighs_its_rows_alike():
    """The gate's rule is the shared one with every held-out row weighted one: mean and std / sqrt(n)."""
    rng = np.random.default_rng(1)
    losses = {0.3: rng.exponential(0.13, 400), 1.0: rng.exponential(0.125, 400), 3.0: rng.exponential(0.14, 400)}
    best = min(losses, key=lambda k: losses[k].mean())
    bound = losses[best].mean() + losses[best].std() / np.sqrt(400)
    assert strongest_l2(losses) == max(k for k, rows in losses.items() if rows.mean() <= bound)
