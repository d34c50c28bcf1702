"""Consolidation: every action, the safety downgrade, races, timeouts, garbage replies, provenance links.

Tests that take `backend` run on both backends, with the same scripted replies and the same expected results.
"""

from __future__ import annotations

import json

import pytest

from memctl.errors import StoreError
from memctl.llm import LLMError, UtilityModel
from memctl.memorize.consolidate import Consolidator, merge_metadata, parse_decision
from memctl.memorize.store_consolidation import consolidate_store
from tests.scripted_llm import Router, existing_memories

STORED = "User prefers dark mode in every editor"
NEAR = "User prefers dark mode in every editor app"  # relevance ~0.96 to STORED with the fake embedder
LOOSE = "User prefers light themes in terminals"  # shares a few words only


def _worker(store, *, dry_run=False, **scripts):
    router = Router(**scripts)
    return Consolidator(store, UtilityModel(store.config, completion=router), dry_run=dry_run), router


def _decide(action, *targets_text, text=None):
    """A consolidation reply naming targets by their text (indices depend on the similarity order)."""

    def reply(message):
        shown = existing_memories(message)
        return json.dumps(
            {
                "action": action,
                "targets": [shown.index(t) for t in targets_text],
                "text": text,
                "reason": f"scripted {action}",
            }
        )

    return reply


def test_keep_separate_inserts(backend, store):
    [old] = store.add([STORED], area="fragments")
    worker, router = _worker(store, consolidate=_decide("keep_separate"))
    out = worker.consolidate(NEAR, "fragments", {"source": "t"})
    assert out.fate == "kept_separate" and len(store) == 2 and store.get_one(out.ids[0]).text == NEAR
    assert store.get_one(old).text == STORED and router.count("keywords") == 1


def test_skip_stores_nothing(backend, store):
    [old] = store.add([STORED], area="fragments")
    worker, _ = _worker(store, consolidate=_decide("skip", STORED))
    out = worker.consolidate(NEAR, "fragments")
    assert out.fate == "skipped" and out.ids == [old] and len(store) == 1


def _superseded(store, old: str, new: str, old_text: str) -> None:
    """`old` (holding `old_text`) was superseded by `new`: kept for --as-of, not current."""
    from memctl.store.validity import superseded_version

    version = superseded_version(store, old)
    assert version is not None and version.text == old_text and version.metadata["superseded_by"] == new
    assert store.get([old]) == [] and store.get_one(new).metadata["supersedes"] == [old]
    entry = store.history(old)[0]
    assert (entry.op, entry.old_text) == ("supersede", old_text)


def test_update_supersedes_the_old_value_and_keeps_it(backend, store):
    [old] = store.add([STORED], area="fragments", metadata=[{"tags": ["ui"], "source": "a"}])
    worker, _ = _worker(store, consolidate=_decide("update", STORED, text="User prefers light mode in every editor"))
    out = worker.consolidate(
        "User now prefers light mode in every editor", "fragments", {"tags": ["new"], "source": "b"}
    )
    assert out.fate == "updated" and out.ids != [old] and len(store) == 1  # no duplicate inserted
    memory = store.get_one(out.ids[0])
    assert memory.text == "User prefers light mode in every editor"
    assert memory.metadata["tags"] == ["ui", "new"] and memory.metadata["source"] == "b"
    _superseded(store, old, memory.id, STORED)
    assert store.history(old)[0].actor == "memorize"


def test_replace_removes_close_targets_and_links_them(backend, store):
    [old] = store.add([STORED], area="fragments")
    worker, _ = _worker(store, consolidate=_decide("replace", STORED))
    out = worker.consolidate(NEAR, "fragments")
    assert out.fate == "replaced" and out.removed == [old] and len(store) == 1
    [new] = out.ids
    assert store.get_one(new).text == NEAR and store.get([old]) == []
    assert store.derived_ids([old]) == [new]  # provenance: the original is the parent
    assert [e.op for e in store.history(old)][0] == "replace"


def test_merge_links_originals_and_survives_their_deletion(backend, store):
    ids = store.add(
        [STORED, "User prefers dark mode in every editor window"],
        area="fragments",
        metadata=[{"tags": ["a", "b"]}, {"tags": ["b", "c"], "k": 1}],
    )
    merged_text = "User prefers dark mode in every editor, app and window"
    worker, _ = _worker(
        store, consolidate=_decide("merge", STORED, "User prefers dark mode in every editor window", text=merged_text)
    )
    out = worker.consolidate(NEAR, "fragments", {"tags": ["d"], "k": 2})
    assert out.fate == "merged" and sorted(out.removed) == sorted(ids) and out.result_text == merged_text
    [merged] = out.ids
    memory = store.get_one(merged)
    assert memory.text == merged_text and memory.metadata["k"] == 2
    assert set(memory.metadata["tags"]) == {"a", "b", "c", "d"} and memory.metadata["tags"][-1] == "d"
    assert store.derived_ids(ids) == [merged] and len(store) == 1
    # the originals are gone; deleting the merged memory removes nothing else
    result = store.delete([merged])
    assert result.deleted == [merged] and result.cascaded == []


def test_replace_below_safety_threshold_is_applied_as_an_update(backend, store):
    """A replace of a memory it may act on but not remove: an update (the old text kept as a superseded version)."""
    [old] = store.add([LOOSE], area="fragments")
    worker, _ = _worker(store, consolidate=_decide("replace", LOOSE))
    worker.consider_min = 0.5  # LOOSE may be acted on (updated), not removed (replace needs 0.9)
    out = worker.consolidate(STORED, "fragments")
    assert out.fate == "updated" and out.removed == [] and len(store) == 1
    assert store.get_one(out.ids[0]).text == STORED and any("applied as an update" in n for n in out.notes)
    _superseded(store, old, out.ids[0], LOOSE)


def test_replace_of_a_target_it_may_not_act_on_is_downgraded(backend, store):
    [old] = store.add([LOOSE], area="fragments")

    def decide_then_tighten(message):  # the safety is re-checked when the action is applied
        worker.consider_min, worker.keyword_overlap = 0.999, 2.0
        return _decide("replace", LOOSE)(message)

    worker, _ = _worker(store, consolidate=decide_then_tighten)
    worker.consider_min = 0.5
    out = worker.consolidate(STORED, "fragments")
    assert out.fate == "kept_separate" and "replace_similarity_threshold" in out.reason
    assert store.get_one(old).text == LOOSE and len(store) == 2 and out.removed == []


def test_merge_removes_only_the_close_targets(backend, store):
    close, loose = store.add([STORED, LOOSE], area="fragments")
    worker, _ = _worker(store, consolidate=_decide("merge", STORED, LOOSE, text="User prefers dark mode in editors"))
    worker.consider_min = 0.0  # show LOOSE to the model too
    out = worker.consolidate(NEAR, "fragments")
    assert out.fate == "merged" and out.removed == [close]
    assert store.get_one(loose).text == LOOSE and any("kept" in n and loose in n for n in out.notes)


@pytest.mark.parametrize("action", ["update", "merge", "replace"])
def test_target_vanishing_before_apply_loses_nothing(backend, store, home, action):
    import memctl

    [old] = store.add([STORED], area="fragments")

    def vanish_then_decide(message):
        with memctl.open_store(home) as other:  # another process deletes the target meanwhile
            other.delete([old])
        return _decide(action, STORED, text="User prefers dark mode everywhere")(message)

    worker, _ = _worker(store, consolidate=vanish_then_decide)
    out = worker.consolidate(NEAR, "fragments")
    assert out.fate == "kept_separate" and out.removed == []
    assert any("no longer exists" in n for n in out.notes)
    assert [m.text for m in store.list()[0]] == [NEAR]


@pytest.mark.parametrize(
    "reply",
    [
        LLMError("utility model 'x' failed: Timeout: request timed out"),
        "I would merge these two, they are similar!",
        '{"action": "explode", "targets": [0]}',
        '{"action": "merge", "targets": [42], "text": "x"}',
        '{"action": "update", "targets": [0]}',
        '{"action": "merge", "targets": [0], "text": "Sure! Here is the JSON you want"}',
        "[1, 2, 3]",
    ],
)
def test_failed_or_garbage_decision_inserts_as_is(backend, store, reply):
    [old] = store.add([STORED], area="fragments")
    worker, _ = _worker(store, consolidate=reply)
    out = worker.consolidate(NEAR, "fragments")
    assert out.fate == "inserted" and "consolidation failed" in out.reason
    assert {m.text for m in store.list()[0]} == {STORED, NEAR} and store.get_one(old).text == STORED


def test_keyword_failure_falls_back_to_first_sentence(backend, store):
    store.add([STORED], area="fragments")
    worker, router = _worker(store, keywords=LLMError("timeout"), consolidate=_decide("keep_separate"))
    out = worker.consolidate("User likes Vim. Also uses tmux daily", "fragments")
    assert any("first sentence" in n for n in out.notes) and out.fate == "inserted"  # nothing similar stored
    worker2, _ = _worker(store, keywords='{"keywords": []}')
    notes: list[str] = []
    assert worker2.keywords("Alpha beta. Gamma", notes) == ["Alpha beta."] and notes


def test_apply_failure_rolls_back_and_inserts(backend, store, monkeypatch):
    [old] = store.add([STORED], area="fragments")
    worker, _ = _worker(store, consolidate=_decide("replace", STORED))
    real_delete = store.delete

    def broken_delete(*args, **kwargs):
        real_delete(*args, **kwargs)
        raise StoreError("disk full")

    monkeypatch.setattr(store, "delete", broken_delete)
    out = worker.consolidate(NEAR, "fragments")
    assert out.fate == "inserted" and "disk full" in out.reason
    assert store.get_one(old).text == STORED and len(store) == 2  # the half-done replace was rolled back


def test_dry_run_writes_nothing(backend, store):
    [old] = store.add([STORED], area="fragments")
    worker, _ = _worker(store, dry_run=True, consolidate=_decide("replace", STORED))
    out = worker.consolidate(NEAR, "fragments")
    assert out.fate == "replaced" and out.removed == [old] and out.ids == []
    assert len(store) == 1 and store.get_one(old).text == STORED


def test_without_consolidation_replaces_above_threshold(backend, home):
    import memctl
    from memctl.embeddings import FakeEmbedder

    with memctl.open_store(home, embedder=FakeEmbedder(), overrides={"memorize_consolidation": False}) as store:
        [old] = store.add([STORED], area="fragments")
        [other_area] = store.add([STORED], area="main")
        keep = store.add([LOOSE], area="fragments")
        worker = Consolidator(store, UtilityModel(store.config, completion=Router()))
        out = worker.consolidate(NEAR, "fragments")
        assert out.fate == "replaced" and out.removed == [old]
        assert store.derived_ids([old]) == out.ids and store.get([other_area]) and store.get(keep)


def test_knowledge_chunks_are_never_consolidated(backend, store):
    store.add([STORED], area="fragments", metadata=[{"knowledge_source": True}])
    worker, router = _worker(store)
    out = worker.consolidate(NEAR, "fragments")
    assert out.fate == "inserted" and out.reason == "no similar memory" and router.count("consolidate") == 0


def test_parse_decision_tolerates_shapes():
    d = parse_decision([{"action": "Keep Separate"}], 2)
    assert d.action == "keep_separate"
    d = parse_decision({"action": "merge", "target": "1", "text": " a   b "}, 2)
    assert d.targets == [1] and d.text == "a b"
    d = parse_decision({"action": "update", "targets": ["id2", True, 7], "text": "t"}, 2, ["id1", "id2"])
    assert d.targets == [1]
    with pytest.raises(LLMError):
        parse_decision({"action": "replace", "targets": []}, 2)


def test_merge_metadata_new_wins_tags_unioned():
    assert merge_metadata({"a": 1, "tags": ["x", "y"]}, None, {"a": 2, "tags": ["y", "z"]}) == {
        "a": 2,
        "tags": ["x", "y", "z"],
    }


def test_consolidate_store_merges_near_duplicates_first(backend, store):
    ids = store.add([STORED, NEAR, "Deploys go to Kubernetes on Fridays"], area="fragments")
    router = Router(
        consolidate=lambda m: json.dumps(
            {"action": "merge", "targets": [0], "text": "User prefers dark mode in every editor and app"}
        )
    )
    llm = UtilityModel(store.config, completion=router)
    dry = consolidate_store(store, llm, area="fragments", dry_run=True)
    assert [g.fate for g in dry.groups] == ["merged"] and len(store) == 3
    report = consolidate_store(store, llm, area="fragments")
    [group] = report.groups
    assert group.fate == "merged" and set(group.removed) == set(ids[:2])
    assert {m.text for m in store.list()[0]} == {
        "User prefers dark mode in every editor and app",
        "Deploys go to Kubernetes on Fridays",
    }
    assert store.derived_ids(ids[:2]) == group.ids


def test_consolidate_store_failure_changes_nothing(backend, store):
    store.add([STORED, NEAR], area="fragments")
    llm = UtilityModel(store.config, completion=Router(consolidate=LLMError("timeout")))
    report = consolidate_store(store, llm)
    assert [g.fate for g in report.groups] == ["unchanged"] and "timeout" in report.groups[0].reason
    assert len(store) == 2


# --- acting on what is shown: the update safety (vector similarity or keyword evidence) ----------------

OLD_VALUE = "ledgerline's HTTP API is built with Flask"
NEW_VALUE = (
    "ledgerline's HTTP API is built with FastAPI; the Flask app is being retired and all new endpoints go "
    "in the FastAPI service"
)
UNRELATED = "User's dog is called Bruno and sleeps in the hallway"


def test_keyword_evidence_counts_words_and_chinese_character_pairs():
    from memctl.memorize.consolidate import keyword_evidence, same_subject

    shared, share = keyword_evidence(OLD_VALUE, NEW_VALUE)
    assert shared >= 4 and share >= 0.8  # ledgerline, http, api, built, flask
    assert keyword_evidence("User prefers tea", "User prefers dark mode") == (0, 0.0)  # frame words do not count
    assert same_subject("论文答辩定在 2027-03-14", "论文答辩推迟到 2027-04-18", 0.5)
    assert not same_subject("用户住在成都高新区", "用户的狗叫小白", 0.5)
    assert not same_subject(OLD_VALUE, NEW_VALUE, 1.5)  # above 1: the keyword route is off


def test_old_value_found_only_by_keywords_is_updated_not_downgraded(backend, store):
    """The failure of issue #20: the old value is below consolidation_threshold by vector, the model asks for
    an update, and the stale value must not survive."""
    [old, other] = store.add([OLD_VALUE, UNRELATED], area="fragments")
    worker, router = _worker(
        store, consolidate=_decide("update", OLD_VALUE, text=NEW_VALUE), keywords='["ledgerline", "HTTP API", "Flask"]'
    )
    worker.consider_min = 0.999  # no vector match: only the keyword side can find and qualify it
    out = worker.consolidate(NEW_VALUE, "fragments")
    assert [s.id for s in out.similar] == [old] and out.similar[0].score < worker.consider_min
    assert out.fate == "updated" and len(store) == 2
    assert store.get_one(out.ids[0]).text == NEW_VALUE
    _superseded(store, old, out.ids[0], OLD_VALUE)
    shown = existing_memories(router.calls[-1][1])
    assert shown == [OLD_VALUE]  # the unrelated memory was never offered


def test_memory_without_evidence_is_not_shown_and_cannot_be_updated(backend, store):
    [other] = store.add([UNRELATED], area="fragments")
    worker, router = _worker(
        store, consolidate=_decide("update", UNRELATED, text=NEW_VALUE), keywords='["User", "dog", "service"]'
    )
    worker.consider_min = 0.999
    out = worker.consolidate(NEW_VALUE, "fragments")
    assert out.fate == "inserted" and router.count("consolidate") == 0
    assert store.get_one(other).text == UNRELATED and len(store) == 2


def test_consolidate_groups_a_keyword_pair_and_updates_the_old_value(backend, home):
    import memctl
    from memctl.embeddings import FakeEmbedder

    overrides = {"consolidation_threshold": 0.999}  # the vector side groups nothing
    with memctl.open_store(home, embedder=FakeEmbedder(), overrides=overrides) as store:
        old, unrelated = store.add([OLD_VALUE, UNRELATED], area="fragments")
        [new] = store.add([NEW_VALUE], area="fragments")
        router = Router(consolidate=_decide("update", OLD_VALUE, text=NEW_VALUE))
        report = consolidate_store(store, UtilityModel(store.config, completion=router), area="fragments")
        [group] = report.groups
        assert [m.id for m in group.members] == [new, old]  # the newest plays the candidate
        assert group.fate == "updated" and group.removed == [new]
        assert {m.text for m in store.list()[0]} == {NEW_VALUE, UNRELATED}
        assert store.get_one(group.ids[0]).text == NEW_VALUE and store.derived_ids([new]) == group.ids
        _superseded(store, old, group.ids[0], OLD_VALUE)


def test_one_rule_book_for_candidates_and_stored_groups(store):
    """Consolidator.resolve judges the model's decision the same way for `memorize` and `consolidate`;
    only `skip` differs: dropping a stored member needs a close target that keeps its content."""
    from memctl.memorize.consolidate import Similar

    consolidator = Consolidator(store, None)
    close = Similar("c", "User's cat is called Miso", 0.95, {})
    near = Similar("n", "User's cat is called Tofu", 0.80, {})  # may act (>= 0.75), not remove (< 0.9)
    far = Similar("f", "Deploys happen on Fridays", 0.40, {})
    text = "User's cat is called Miso now"
    for group in (False, True):
        merged = consolidator.resolve("merge", [far, close, near], text, skip_needs_close=group)
        assert (merged.action, merged.targets) == ("merge", [close])
        assert any("kept f" in n for n in merged.notes) and any("kept n" in n for n in merged.notes)
        updated = consolidator.resolve("replace", [far, near], text, skip_needs_close=group)
        assert (updated.action, updated.targets) == ("update", [near]) and "applied as an update" in updated.notes[0]
        assert consolidator.resolve("update", [far, near], text, skip_needs_close=group).targets == [near]
        refused = consolidator.resolve("update", [far], text, skip_needs_close=group)
        assert refused.action == "keep_separate" and "update downgraded" in refused.downgraded
        nothing = consolidator.resolve("merge", [far], text, skip_needs_close=group)
        assert nothing.action == "keep_separate" and "best 0.400" in nothing.downgraded
    assert consolidator.resolve("skip", [near], text, skip_needs_close=False).action == "skip"
    assert consolidator.resolve("skip", [near], text, skip_needs_close=True).action == "keep_separate"
    assert consolidator.resolve("skip", [close], text, skip_needs_close=True).targets == [close]
