"""The fitted update safety: which stored memories consolidation may act on for a new candidate."""

from __future__ import annotations

import pytest

from memctl.errors import MemctlError
from memctl.memorize.same_slot import FEATURES, SameSlot, for_model, pair_features

E5 = "multilingual-e5-small-q4"


def test_the_default_embedding_model_has_a_fitted_safety_and_an_unknown_one_has_none():
    fitted = for_model(E5)
    assert fitted is not None and 0.0 < fitted.cut < 1.0
    assert for_model("some-model-nobody-fitted") is None and for_model(None) is None


def test_features_are_broad_and_symmetric_in_the_pair():
    a, b = "The rye loaf costs 4.20 at the Saturday stall", "The rye loaf now costs 4.60"
    assert len(pair_features(a, b, 0.8)) == len(FEATURES)
    assert pair_features(a, b, 0.8) == pytest.approx(pair_features(b, a, 0.8))
    cross = pair_features("用户每周二去游泳", "User swims on Tuesdays", 0.8)
    assert cross[FEATURES.index("one Chinese, one not")] == 1.0


def test_the_neighbourhood_features_say_how_far_below_the_nearest_memory_a_pair_stands():
    a, b = "User eats fish again", "User does not eat meat"
    alone = pair_features(a, b, 0.8)  # no neighbourhood known: counts as the nearest
    third = pair_features(a, b, 0.8, nearest=0.9, rank=2)
    gap, nearest, two = (
        FEATURES.index(f) for f in ("relevance below the nearest", "the nearest", "one of the two nearest")
    )
    assert (alone[gap], alone[nearest], alone[two]) == (0.0, 1.0, 1.0)
    assert third[gap] == pytest.approx(0.1) and (third[nearest], third[two]) == (0.0, 0.0)
    assert pair_features(a, b, 0.8, nearest=0.85, rank=1)[two] == 1.0


def test_by_relevance_ranks_the_compared_memories_and_tells_each_the_best_score():
    from memctl.memorize.consolidate import Similar, by_relevance

    ranked = by_relevance([Similar("a", "x", 0.7), Similar("b", "y", 0.9), Similar("c", "z", 0.8)])
    assert [(s.id, s.nearest, s.rank) for s in ranked] == [("b", 0.9, 0), ("c", 0.9, 1), ("a", 0.9, 2)]
    assert by_relevance([]) == []


def test_a_restated_slot_may_be_acted_on_where_an_unrelated_fact_at_the_same_relevance_may_not():
    fitted = for_model(E5)
    assert fitted is not None
    new = "The rye loaf at the Saturday stall now costs 4.60"
    old = "The rye loaf at the Saturday stall costs 4.20"
    unrelated = "Deliveries to the café on Mill Lane leave at 6:30"
    # At one relevance the words decide: the same subject said again is the same slot, another subject is not.
    assert fitted.probability(new, old, 0.82) > fitted.probability(new, unrelated, 0.82)
    assert fitted.may_act(new, old, 0.9)
    assert not fitted.may_act(new, unrelated, 0.7)
    # More relevance never makes a pair less likely to be the same slot (over the range stores see).
    scores = [fitted.probability(new, unrelated, r / 100) for r in range(70, 101, 2)]
    assert scores == sorted(scores)
    # The same pair is likelier the same slot when it is the candidate's nearest memory than when others
    # stand well above it (a new value's old one is usually its nearest, whatever the words).
    assert fitted.probability(new, old, 0.8, 0.8, 0) > fitted.probability(new, old, 0.8, 0.9, 4)


@pytest.mark.parametrize(
    "broken",
    [
        {},
        {"features": ["relevance"], "mean": [0], "scale": [1], "weights": [1], "bias": 0, "cut": 0.5},
        {"features": list(FEATURES), "mean": [0] * 14, "scale": [0] * 14, "weights": [1] * 14, "bias": 0, "cut": 0.5},
    ],
)
def test_unusable_shipped_weights_are_a_clear_error(broken):
    with pytest.raises(MemctlError, match="same_slot.json is unusable"):
        SameSlot.from_dict(broken)


def test_the_rule_decides_when_the_safety_is_off_or_the_model_has_no_fit(home):
    import memctl
    from memctl.embeddings import FakeEmbedder
    from memctl.memorize.consolidate import Consolidator, Similar

    with memctl.open_store(home, embedder=FakeEmbedder()) as store:
        worker = Consolidator(store, None)
        assert worker.same_slot is None  # the fake embedder has no fit
        far = Similar("f", "The rye loaf at the Saturday stall costs 4.20", 0.5, {})
        assert not worker.may_act("Deliveries leave at 6:30", far)
    with memctl.open_store(home, "off", overrides={"consolidation_same_slot": False}) as store:
        assert Consolidator(store, None).same_slot is None
