"""The question-level answered model (memctl/search/answered.py): features, parameters, the fit, and how
`load` and the MCP search tool consult it at default settings only."""

from __future__ import annotations

import math

import pytest

from memctl.errors import ConfigError
from memctl.search.answered import (
    BEST_EVIDENCE,
    PAIR_FEATURES,
    QUESTION_FEATURES,
    SMALL_STORE,
    Answered,
    fit,
    question_features,
    with_pairs,
)
from memctl.search.relevance import FEATURES, Calibration, shipped


def _answered(threshold: float, **weights: float) -> Answered:
    n = len(QUESTION_FEATURES)
    return Answered((0.0,) * n, (1.0,) * n, tuple(weights.get(name, 0.0) for name in QUESTION_FEATURES), 0.0, threshold)


def _calibration(answered: Answered | None) -> Calibration:
    weights = tuple(4.0 if name == "cosine" else 0.0 for name in FEATURES)
    return Calibration("fake", (0.0,) * len(FEATURES), (1.0,) * len(FEATURES), weights, -1.0, 0.3, answered=answered)


def test_question_features_describe_the_best_scores_and_the_best_candidate():
    best = {name: 0.5 for name in FEATURES}
    got = dict(zip(QUESTION_FEATURES, question_features([0.2, 0.9, 0.4], best), strict=True))
    assert got["best"] == 0.9 and got["second"] == 0.4 and got["margin"] == pytest.approx(0.5)
    assert got["mean_shown"] == pytest.approx((0.9 + 0.4 + 0.2) / 5)  # missing candidates count 0
    assert got["best_logit"] == pytest.approx(math.log(0.9 / 0.1))
    assert got["candidates_log"] == pytest.approx(math.log(4)) and got["single"] == 0.0
    assert all(got[f"top_{name}"] == 0.5 for name in BEST_EVIDENCE)
    alone = dict(zip(QUESTION_FEATURES, question_features([1.0], {}), strict=True))
    assert alone["single"] == 1.0 and alone["second"] == 0.0 and math.isfinite(alone["best_logit"])


def test_parameters_round_trip_and_bad_ones_are_a_config_error():
    model = _answered(0.8, best=2.0, margin=-1.0)
    assert Answered.from_dict(model.to_dict()) == model
    calibration = _calibration(model)
    assert Calibration.from_dict(calibration.to_dict()).answered == model
    assert Calibration.from_dict(_calibration(None).to_dict()).answered is None
    doc = calibration.to_dict()
    for bad in ({"threshold": 1.5}, {"features": ["best"]}, {"scale": [0.0] * len(QUESTION_FEATURES)}):
        with pytest.raises(ConfigError, match="answered"):
            Calibration.from_dict({**doc, "answered": {**doc["answered"], **bad}})


def test_a_small_store_has_its_own_threshold_that_round_trips():
    """A question that saw at most SMALL_STORE candidates is judged by `small_threshold` when one was fitted;
    a model without one (older calibrations) uses its one threshold everywhere."""
    from dataclasses import replace

    model = replace(_answered(0.9), small_threshold=0.4)
    assert model.threshold_for(SMALL_STORE) == 0.4 and model.threshold_for(SMALL_STORE + 1) == 0.9
    assert _answered(0.9).threshold_for(1) == 0.9
    assert Answered.from_dict(model.to_dict()) == model
    assert "small_threshold" not in _answered(0.9).to_dict()
    with pytest.raises(ConfigError, match="answered"):
        Answered.from_dict({**model.to_dict(), "small_threshold": 2.0})


def test_a_large_store_raises_the_threshold_on_a_log_scale_and_round_trips():
    """With `large_threshold` the threshold moves from `threshold` at the smaller of `large_sizes` to
    `large_threshold` at the larger, linearly in the log of the store's size, and stays there beyond either;
    a small store keeps its own; a model without one, or a caller that names no size, uses `threshold`."""
    model = _answered(0.9).with_large(0.98, (20, 2000))
    assert model.threshold_for(15, 10) == 0.9 and model.threshold_for(15, 20) == 0.9
    assert model.threshold_for(15, 200) == pytest.approx(0.94)  # halfway on the log scale
    assert model.threshold_for(15, 2000) == pytest.approx(0.98) and model.threshold_for(15, 10**6) == 0.98
    assert model.threshold_for(15) == 0.9 and _answered(0.9).threshold_for(15, 10**6) == 0.9
    from dataclasses import replace

    assert replace(model, small_threshold=0.5).threshold_for(SMALL_STORE, 10**6) == 0.5
    assert Answered.from_dict(model.to_dict()) == model
    assert "large_threshold" not in _answered(0.9).to_dict()
    for bad in ({"large_threshold": 1.2}, {"large_sizes": [50, 20]}, {"large_sizes": [20]}, {"large_sizes": None}):
        with pytest.raises(ConfigError, match="answered"):
            Answered.from_dict({**model.to_dict(), **bad})


def test_load_in_a_small_store_uses_the_small_threshold(store):
    """Three memories: the question sees three candidates, so `load` consults `small_threshold`; the answered
    probability here is sigmoid(0) = 0.5 for every question."""
    from dataclasses import replace

    store.add(["apples are red and sweet", "zebras are striped", "the sky is blue today"])
    for small, expect in ((0.4, True), (0.6, False)):
        store.calibration = lambda s=small: _calibration(replace(_answered(0.6), small_threshold=s))
        try:
            assert bool(store.search("red apples")) is expect
        finally:
            del store.calibration


def test_load_and_mcp_search_read_the_threshold_at_the_stores_size(tmp_path, monkeypatch):
    """The answered probability is 0.5 here for every question; the threshold is 0.4 at two memories and 0.6 at
    four: the same question is answered in the two-memory store and not once it holds four (`memctl load`'s
    search and the MCP search tool alike), while an explicit threshold still takes the cut as asked."""
    import memctl
    import memctl.search.relevance
    from memctl.mcp.tools import search

    sized = _calibration(_answered(0.4).with_large(0.6, (2, 4)))
    monkeypatch.setattr(memctl.search.relevance, "shipped", lambda model: sized)
    args = dict(limit=None, area=None, filter=None, mode=None)
    with memctl.open_store(tmp_path, "main") as store:
        store.add(["apples are red and sweet", "zebras are striped"])
        assert store.search("red apples") and search(store, "main", "red apples", threshold=None, **args)["count"]
        store.add(["the sky is blue today", "pears are green"])
        assert not store.search("red apples")
        assert search(store, "main", "red apples", threshold=None, **args)["count"] == 0
        assert store.search("red apples", threshold=0.0)


def test_the_fit_learns_a_signed_weight():
    """Signs are free (unlike the relevance score's): when a best score standing well clear of the second says
    answered, the second score weighs against it."""
    rows, labels = [], []
    for i in range(200):
        top = 0.5 + 0.45 * (i % 10) / 10
        second = top * ((i * 7) % 10) / 10
        rows.append(question_features([top, second], {}))
        labels.append(int(top - second > 0.2))
    model = fit(rows, labels, [1.0] * len(rows), threshold=0.5, l2=0.01)
    weights = dict(zip(QUESTION_FEATURES, model.weights, strict=True))
    assert weights["second"] < 0 < weights["margin"]
    assert model.probability([0.9, 0.1], {}) > 0.5 > model.probability([0.9, 0.85], {})


def test_load_asks_the_model_only_at_default_settings(store):
    store.add(["apples are red and sweet", "zebras are striped", "the sky is blue today"])
    for answered, expect_default in ((None, True), (_answered(0.0), True), (_answered(1.0), False)):
        store.calibration = lambda a=answered: _calibration(a)
        try:
            assert bool(store.search("red apples")) is expect_default
            assert store.search("red apples", threshold=0.0)  # a threshold named by the caller: as asked
            store.config.values["search_threshold"] = 0.0  # ... or by the config
            assert store.search("red apples")
            store.config.values["search_threshold"] = None
        finally:
            del store.calibration


def test_the_shipped_default_model_carries_an_answered_model():
    calibration = shipped("multilingual-e5-small-q4")
    assert calibration is not None and calibration.answered is not None
    assert 0.0 < calibration.answered.threshold < 1.0


def test_cli_load_and_mcp_search_skip_it_with_an_explicit_threshold(tmp_path, monkeypatch):
    """`memctl load` and the MCP search tool pass the caller's threshold through: None (the default) lets the
    answered model silence a question, -t/threshold takes the cut as asked."""
    import memctl
    import memctl.search.relevance
    from memctl.mcp.tools import search

    never = _calibration(_answered(1.0))
    monkeypatch.setattr(memctl.search.relevance, "shipped", lambda model: never)
    with memctl.open_store(tmp_path, "main") as store:
        store.add(["apples are red and sweet", "zebras are striped"])
        args = dict(limit=None, area=None, filter=None, mode=None)
        assert search(store, "main", "red apples", threshold=None, **args)["count"] == 0
        shown = search(store, "main", "red apples", threshold=0.0, **args)
        assert shown["count"] == 2 and shown["threshold"] == 0.0


def test_a_model_with_pairs_reads_the_products_and_round_trips():
    """With `pairs` the model reads the question features and their products two by two: an answer told by
    the best score only when the margin is also wide (an interaction) is learned, and the parameters name
    every product."""
    rows, labels = [], []
    for i in range(400):
        top = 0.3 + 0.6 * (i % 20) / 20
        second = top * ((i * 7) % 10) / 10
        rows.append(question_features([top, second], {}))
        labels.append(int(top > 0.6 and top - second > 0.3))
    linear = fit(rows, labels, [1.0] * len(rows), threshold=0.5, l2=0.001)
    paired = fit(rows, labels, [1.0] * len(rows), threshold=0.5, l2=0.001, pairs=True)
    assert paired.pairs and len(paired.weights) == len(QUESTION_FEATURES) + len(PAIR_FEATURES)

    def errors(model: Answered) -> int:
        return sum((model.probability_of(model.row(r)) >= 0.5) != bool(y) for r, y in zip(rows, labels, strict=True))

    assert errors(paired) < errors(linear)
    doc = paired.to_dict()
    assert doc["features"][-1] == f"top_{BEST_EVIDENCE[-1]}*top_{BEST_EVIDENCE[-1]}"
    assert Answered.from_dict(doc) == paired
    with pytest.raises(ConfigError, match="answered"):
        Answered.from_dict({**doc, "features": doc["features"][:-1]})


def test_a_question_outside_the_fitted_range_is_read_at_its_edge():
    """The fit keeps each question feature's range; a question beyond it is read at the nearest edge, so the
    products two by two cannot extrapolate quadratically past the evidence (a fitted model with pairs would
    otherwise turn ever more sure, or ever less, the further a store lies from the ones it was fitted on)."""
    rows, labels = [], []
    for i in range(400):
        top = 0.3 + 0.4 * (i % 20) / 20  # best scores from 0.30 to 0.68 only
        second = top * ((i * 7) % 10) / 10
        rows.append(question_features([top, second] + [0.05] * (i % 5), {}))
        labels.append(int(top > 0.5 and top - second > 0.2))
    model = fit(rows, labels, [1.0] * len(rows), threshold=0.5, l2=0.001, pairs=True)
    position = QUESTION_FEATURES.index("best")
    assert model.low is not None and model.high is not None
    assert model.low[position] == pytest.approx(0.3) and model.high[position] == pytest.approx(0.68)
    far = question_features([0.99, 0.2], {})
    edge = [min(max(v, lo), hi) for v, lo, hi in zip(far, model.low, model.high, strict=True)]
    assert edge[position] == pytest.approx(0.68)
    assert model.row(far) == with_pairs(edge) != with_pairs(far)
    inside = rows[7]
    assert model.row(inside)[: len(QUESTION_FEATURES)] == inside  # within range: read as it is
    assert Answered.from_dict(model.to_dict()) == model
    unbounded = Answered.from_dict({k: v for k, v in model.to_dict().items() if k not in ("low", "high")})
    assert unbounded.low is None and unbounded.row(far)[: len(QUESTION_FEATURES)] == far
    for bad in ({"low": [0.0]}, {"low": [1.0] * len(QUESTION_FEATURES), "high": [0.0] * len(QUESTION_FEATURES)}):
        with pytest.raises(ConfigError, match="answered"):
            Answered.from_dict({**model.to_dict(), **bad})
