"""memorize: the pipeline end to end with scripted model replies, the CLI, batches, and a series replay.

Every test runs on both backends (`backend`): the same scripted replies give the same results.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memctl.llm import LLMError, UtilityModel
from tests.conftest import REPO, stored_count
from tests.scripted_llm import Router, decide_from_updates, existing_memories

EVAL = REPO.parent / "shared" / "eval" / "transcripts"

pytestmark = pytest.mark.usefixtures("backend")

CHAT = [
    {
        "role": "user",
        "content": "Hi, I'm Ana. Our shop runs on Django 5 with PostgreSQL, and I always want answers in Spanish.",
    },
    {"role": "tool", "content": "$ python manage.py runserver\nStarting development server at http://127.0.0.1:8000/"},
    {"role": "user", "content": "The checkout page throws CSRF verification failed behind our nginx proxy."},
    {
        "role": "assistant",
        "content": "Set CSRF_TRUSTED_ORIGINS to your https origin and forward X-Forwarded-Proto "
        "from nginx; then SECURE_PROXY_SSL_HEADER makes Django see https.",
    },
    {"role": "user", "content": "That fixed the CSRF error, thanks!"},
]
FACTS = [
    "User (Ana) runs her shop on Django 5 with PostgreSQL",
    "User wants answers in Spanish",
    "Dev server runs at http://127.0.0.1:8000/",
    "User's dog is called Bruno",
]
SOLUTION = (
    "Django 'CSRF verification failed' behind an nginx proxy -> set CSRF_TRUSTED_ORIGINS to the https "
    "origin, forward X-Forwarded-Proto from nginx and set SECURE_PROXY_SSL_HEADER"
)


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CHAT))
    return path


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch):
    """Route the real UtilityModel's litellm call to a Router (what the CLI uses)."""
    monkeypatch.setenv("MEMCTL_UTILITY_MODEL", "scripted/test")

    def install(router: Router) -> Router:
        monkeypatch.setattr(UtilityModel, "_litellm", lambda self, messages: router(messages))
        return router

    return install


class _DropGate:
    """A gate model that drops the texts holding one of `marks` (the pipeline tests need a known verdict;
    the shipped model is tested in tests/integration/test_quality.py)."""

    def __init__(self, *marks: str) -> None:
        self.marks = marks

    def decide(self, texts, embed):
        from memctl.memorize.gate_model import Decision

        return [Decision("drop" if any(m in t for m in self.marks) else "keep", 0.0) for t in texts]


def drop_gate(monkeypatch, *marks: str) -> None:
    from memctl.memorize import gate_model

    monkeypatch.setattr(gate_model, "model_for", lambda area, name: _DropGate(*marks))


def test_memorize_gates_and_inserts(cli, chat, scripted, monkeypatch):
    drop_gate(monkeypatch, "127.0.0.1")
    router = scripted(Router(fragments=json.dumps(FACTS), solutions=json.dumps([SOLUTION])))
    result = cli("memorize", chat, "--json")
    assert result.code == 0, result.err
    doc = result.json
    assert set(doc) == {"subdir", "dry_run", "summary", "transcripts"}
    [transcript] = doc["transcripts"]
    fates = {c["text"]: (c["fate"], c["reason"]) for c in transcript["candidates"]}
    stored = ("inserted", "kept_separate")  # kept separate: a similar memory was shown to the model first
    assert fates[FACTS[0]][0] == "inserted" and fates[FACTS[1]][0] in stored
    assert fates[FACTS[2]] == ("gated", "noise")
    assert fates[FACTS[3]][0] == "pending"  # not in the chat: a person decides, nothing serves it meanwhile
    assert fates[SOLUTION][0] == "inserted"
    assert doc["summary"]["gated"] == 1 and doc["summary"]["pending"] == 1
    assert doc["summary"]["inserted"] + doc["summary"]["kept_separate"] == 3
    [queued] = cli("review", "list", "--json").json["items"]
    assert queued["text"] == FACTS[3] and "ungrounded" in json.dumps(queued)
    listed = cli("list", "--json").json["items"]
    assert {m["area"] for m in listed} == {"fragments", "solutions"} and len(listed) == 3
    assert all(
        m["metadata"] == {"source": "memorize", "transcript": "chat.json", "importance": m["metadata"]["importance"]}
        for m in listed
    )
    importance = {m["text"]: m["metadata"]["importance"] for m in listed}
    assert importance[FACTS[1]] == 0.8 and importance[FACTS[0]] == 0.5  # "I always want answers in Spanish"
    assert router.count("fragments") == 1 and router.count("solutions") == 1
    table = cli("memorize", chat, "--dry-run")  # into a pipe: the records on stdout, the messages on stderr
    assert "noise" in table.out and "ungrounded" in table.out and "dry run" in table.err


@pytest.mark.parametrize("policy", ["keep", "drop"])
def test_an_ungrounded_candidate_is_never_kept_unseen(cli, chat, scripted, monkeypatch, policy):
    """Without a review queue (memorize_pending keep or drop) a candidate nothing in the chat supports is dropped:
    `keep` stores what the gate was unsure of, never what may be an invention."""
    drop_gate(monkeypatch, "127.0.0.1")
    monkeypatch.setenv("MEMCTL_MEMORIZE_PENDING", policy)
    scripted(Router(fragments=json.dumps(FACTS)))
    doc = cli("memorize", chat, "--no-solutions", "--json").json
    fates = {c["text"]: (c["fate"], c["reason"]) for c in doc["transcripts"][0]["candidates"]}
    assert fates[FACTS[3]] == ("gated", "ungrounded")
    assert FACTS[3] not in {m["text"] for m in cli("list", "--json").json["items"]}
    assert cli("review", "list", "--json").json["items"] == []


def test_dry_run_writes_nothing(cli, chat, scripted):
    scripted(Router(fragments=json.dumps(FACTS[:2])))
    doc = cli("memorize", chat, "--dry-run", "--no-solutions", "--json").json
    assert doc["dry_run"] is True and doc["summary"]["inserted"] + doc["summary"]["kept_separate"] == 2
    assert stored_count(cli) == 0


def test_no_solutions_and_area(cli, chat, scripted):
    router = scripted(Router(fragments=json.dumps(FACTS[:1])))
    doc = cli("memorize", chat, "--no-solutions", "--area", "main", "--json").json
    assert router.count("solutions") == 0 and doc["transcripts"][0]["candidates"][0]["area"] == "main"
    assert cli("list", "--area", "main", "--json").json["total"] == 1


@pytest.mark.parametrize(
    "reply", [LLMError("utility model 'x' failed: Timeout"), "Sure! Here are some facts.", '{"facts": "none"}']
)
def test_failed_extraction_stores_nothing_and_says_why(cli, chat, scripted, reply):
    """A failed extraction is a failure: exit 4, counted in the summary and per transcript, shown in the table."""
    scripted(Router(fragments=reply, solutions=reply))
    result = cli("memorize", chat, "--json")
    assert result.code == 4
    [transcript] = result.json["transcripts"]
    notes = transcript["notes"]
    assert any("fact extraction" in n for n in notes) and any("solution extraction" in n for n in notes)
    assert "extraction" in result.err and stored_count(cli) == 0
    assert transcript["extraction_failed"] == ["fact", "solution"]
    assert result.json["summary"]["failed"] == 1 and result.json["summary"]["extractions_failed"] == 2
    human = cli("memorize", chat)
    assert human.code == 4 and "extraction failed: fact, solution" in human.err
    assert "failed: 1" in human.err and "failed: 0" not in human.err


def test_one_failed_extraction_keeps_the_other(cli, chat, scripted):
    scripted(Router(fragments=json.dumps(FACTS[:1]), solutions="no list here"))
    result = cli("memorize", chat, "--json")
    assert result.code == 4 and result.json["transcripts"][0]["extraction_failed"] == ["solution"]
    assert stored_count(cli) == 1


def test_empty_extraction_is_not_a_failure(cli, chat, scripted):
    scripted(Router(fragments="[]", solutions="```json\n[]\n```"))
    result = cli("memorize", chat, "--json")
    assert result.code == 0 and result.json["summary"]["failed"] == 0
    assert result.json["transcripts"][0]["extraction_failed"] == []


def _echo(prompt: str, part: str = "all"):
    """A reply that echoes the prompt, as Gemma 270M on llama.cpp did: the system text (folded into the user
    turn), the user message, or just the last lines of the instructions."""
    from memctl.llm import load_prompt

    system = load_prompt(prompt)[0]

    def reply(message: str) -> str:
        if part == "message":
            return message
        if part == "tail":
            return system.strip().splitlines()[-1]
        return f"{system}\n\n{message}"

    return reply


@pytest.mark.parametrize("part", ["all", "message", "tail"])
def test_echoed_prompt_is_a_failed_extraction(cli, chat, scripted, part):
    """An echoed prompt is no answer: the `[]` of "answer [] when nothing qualifies" is the prompt's own text,
    not "nothing extracted". Counted as a failed extraction, exit 4, nothing stored."""
    scripted(Router(fragments=_echo("memorize_fragments", part), solutions=_echo("memorize_solutions", part)))
    result = cli("memorize", chat, "--json")
    assert result.code == 4, result.out
    [transcript] = result.json["transcripts"]
    assert transcript["extraction_failed"] == ["fact", "solution"]
    assert sum("echoed the prompt" in n for n in transcript["notes"]) == 2, transcript["notes"]
    assert result.json["summary"]["extractions_failed"] == 2 and stored_count(cli) == 0


def test_answer_quoting_the_conversation_is_not_an_echo(cli, chat, scripted):
    """A fair answer may repeat the user's own words, after prose or in a code fence: it is not an echo."""
    quoted = CHAT[0]["content"]
    scripted(Router(fragments=f"Here you go:\n```json\n{json.dumps([quoted])}\n```", solutions="Nothing: []"))
    result = cli("memorize", chat, "--json")
    assert result.code == 0, result.out
    assert result.json["transcripts"][0]["extraction_failed"] == []
    assert [c["text"] for c in result.json["transcripts"][0]["candidates"]] == [quoted]


def test_consolidation_timeout_inserts_candidate(cli, chat, scripted):
    cli("save", "User (Ana) runs her shop on Django 5 with PostgreSQL 16", "--area", "fragments")
    scripted(Router(fragments=json.dumps(FACTS[:1]), consolidate=LLMError("Timeout after 60 s")))
    doc = cli("memorize", chat, "--no-solutions", "--json").json
    [candidate] = doc["transcripts"][0]["candidates"]
    assert candidate["fate"] == "inserted" and "Timeout" in candidate["reason"]
    assert cli("list", "--json").json["total"] == 2


class _UnsureGate:
    """A gate model unsure of every text holding one of `marks`, sure to keep the others."""

    def __init__(self, *marks: str) -> None:
        self.marks = marks

    def decide(self, texts, embed):
        from memctl.memorize.gate_model import Decision

        return [Decision("pending" if any(m in t for m in self.marks) else "keep", 0.5) for t in texts]


def test_an_unsure_candidate_that_updates_a_stored_fact_is_applied_not_queued(cli, chat, scripted, monkeypatch):
    """The gate is unsure of a new value; the store holds the slot, so it is updated at once (the stale value
    must not stay searchable while the new one waits). An unsure candidate with nothing to act on waits."""
    from memctl.memorize import gate_model

    monkeypatch.setattr(gate_model, "model_for", lambda area, name: _UnsureGate("PostgreSQL 17", "Spanish"))
    cli("save", "User (Ana) runs her shop on Django 5 with PostgreSQL 16", "--area", "fragments")
    new = "User (Ana) runs her shop on Django 5 with PostgreSQL 17"
    old = "User (Ana) runs her shop on Django 5 with PostgreSQL 16"
    scripted(
        Router(
            fragments=json.dumps([new, FACTS[1]]),
            consolidate=decide_from_updates([{"old": old, "new": new}]),
        )
    )
    doc = cli("memorize", chat, "--no-solutions", "--json").json
    fates = {c["text"]: c for c in doc["transcripts"][0]["candidates"]}
    assert fates[new]["fate"] == "updated" and "the gate was unsure" in fates[new]["notes"][0]
    assert fates[FACTS[1]]["fate"] == "pending"
    assert [m["text"] for m in cli("list", "--json").json["items"]] == [new]
    assert cli("review", "list", "--json").json["items"][0]["text"] == FACTS[1]


@pytest.mark.parametrize(
    ("new", "applied"),
    [
        ("Sunrise Dental's hygiene clinic runs on Tuesdays from 10am with Dr Okafor", True),  # the chat says 10am
        ("Sunrise Dental's hygiene clinic runs on Tuesdays from 9am with Dr Mensah", False),  # nobody said Mensah
    ],
)
def test_an_ungrounded_new_value_changes_the_store_only_by_what_the_chat_says(
    cli, tmp_path, scripted, monkeypatch, new, applied
):
    """A new value written out in full takes its slot's context from an earlier conversation, so its words are not in
    this chat; it updates the stored value when the chat gives what it changes, and waits in review when not."""
    drop_gate(monkeypatch)  # the gate keeps everything here: grounding decides
    old = "Sunrise Dental's hygiene clinic runs on Tuesdays from 9am with Dr Okafor"
    cli("save", old, "--area", "fragments")
    chat = tmp_path / "short.json"
    chat.write_text(json.dumps([{"role": "user", "content": "Quick one: hygiene moves to 10am from next week."}]))
    scripted(Router(fragments=json.dumps([new]), consolidate=decide_from_updates([{"old": old, "new": new}])))
    doc = cli("memorize", chat, "--no-solutions", "--json").json
    [outcome] = doc["transcripts"][0]["candidates"]
    stored = [m["text"] for m in cli("list", "--json").json["items"]]
    queued = [i["text"] for i in cli("review", "list", "--json").json["items"]]
    if applied:
        assert outcome["fate"] == "updated" and stored == [new] and queued == []
    else:
        assert outcome["fate"] == "pending" and stored == [old] and queued == [new]


def _two_sessions(tmp_path: Path) -> tuple[Path, Path, str, str]:
    """Two conversations a week apart stating one slot: the database version moved from 16 to 17."""
    paths = []
    for name, version in (("monday.json", "16"), ("next-monday.json", "17")):
        path = tmp_path / name
        say = f"Hi, I'm Ana. Our shop runs on Django 5 with PostgreSQL {version} now (it ran PostgreSQL 16)."
        path.write_text(json.dumps([{"role": "user", "content": say}]))
        paths.append(path)
    old, new = (f"User (Ana) runs her shop on Django 5 with PostgreSQL {v}" for v in ("16", "17"))
    return paths[0], paths[1], old, new


@pytest.mark.parametrize("new_is_unsure", [True, False])
def test_a_newer_value_retires_the_stale_one_from_the_review_queue(cli, tmp_path, scripted, monkeypatch, new_is_unsure):
    """The gate was unsure of last week's value, so it waits for review; this week's value of the same slot
    retires it from the queue (archived, op `outdated`, restorable): a reviewer is never offered both. The new
    value is stored, whether the gate kept it or was unsure of it too (two conversations set the slot: it
    lasts, and queueing it would leave the slot empty in the store); the old value restated in the same
    conversation ("it ran PostgreSQL 16") is not queued again."""
    from memctl.memorize import gate_model

    first, second, old, new = _two_sessions(tmp_path)
    marks = ("PostgreSQL 16", "PostgreSQL 17") if new_is_unsure else ("PostgreSQL 16",)
    monkeypatch.setattr(gate_model, "model_for", lambda area, name: _UnsureGate(*marks))
    scripted(
        Router(
            fragments=[json.dumps([old]), json.dumps([new, old])],  # the old value restated beside the new
            consolidate=decide_from_updates([{"old": old, "new": new}]),
        )
    )
    [queued] = cli("memorize", first, "--no-solutions", "--json").json["transcripts"][0]["candidates"]
    assert queued["fate"] == "pending"
    candidate, restated = cli("memorize", second, "--no-solutions", "--json").json["transcripts"][0]["candidates"]
    assert candidate["fate"] == "inserted"
    assert ("queued an older value" in candidate["notes"][0]) is new_is_unsure
    assert restated["fate"] == "skipped" and "older value" in restated["reason"], restated  # not queued again
    assert candidate["outdated"] == queued["ids"] and "retired 1 queued item" in candidate["notes"][-1]
    assert cli("review", "list", "--json").json["items"] == []
    assert [m["text"] for m in cli("list", "--json").json["items"]] == [new]
    found = cli("load", "PostgreSQL", "--mode", "keyword", "--threshold", "0", "--json").json["results"]
    assert [m["text"] for m in found] == [new]  # searchable now, and the old value is not
    [entry] = [h for h in cli("history", queued["ids"][0], "--json").json["entries"] if h["op"] == "outdated"]
    assert entry["old_text"] == old
    assert cli("restore", queued["ids"][0]).code == 0  # a wrong call of the model is undone as a rejection is


def test_an_unsure_restatement_of_a_queued_item_waits_in_its_place(cli, tmp_path, scripted, monkeypatch):
    """Only a new value settles a queued slot: an unsure candidate the model calls the same fact as a queued one
    (skip) is no evidence the fact lasts (a transient can be said twice), so it waits in the item's place."""
    from memctl.memorize import gate_model

    first, second, old, _ = _two_sessions(tmp_path)
    again = "Ana's shop runs on Django 5 with PostgreSQL 16"  # the same fact, worded anew

    def same_fact(message: str) -> str:
        shown = existing_memories(message)
        if shown:
            return json.dumps({"action": "skip", "targets": [0], "reason": "the same fact"})
        return json.dumps({"action": "keep_separate", "targets": [], "reason": "a different fact"})

    monkeypatch.setattr(gate_model, "model_for", lambda area, name: _UnsureGate("PostgreSQL"))
    scripted(Router(fragments=[json.dumps([old]), json.dumps([again])], consolidate=same_fact))
    [queued] = cli("memorize", first, "--no-solutions", "--json").json["transcripts"][0]["candidates"]
    [restated] = cli("memorize", second, "--no-solutions", "--json").json["transcripts"][0]["candidates"]
    assert restated["fate"] == "pending" and restated["outdated"] == queued["ids"], restated
    assert [i["text"] for i in cli("review", "list", "--json").json["items"]] == [again]
    assert cli("list", "--json").json["items"] == []


@pytest.mark.parametrize("close_enough", [True, False])
def test_an_unsure_new_value_of_a_queued_item_is_stored_by_the_python_api(tmp_path, monkeypatch, close_enough):
    """The same through the library: memorize_messages stores the unsure new value of a queued slot, and the
    store's search returns it while the review queue is empty. Only a queued value at replace_similarity_threshold
    settles the slot (a model calling a looser pair an update would store transient noise): below it, the new
    value waits in the old one's place."""
    import memctl
    from memctl.memorize import gate_model
    from memctl.memorize.pipeline import memorize_messages
    from memctl.memorize.transcripts import Message

    monkeypatch.setattr(gate_model, "model_for", lambda area, name: _UnsureGate("PostgreSQL"))
    _, _, old, new = _two_sessions(tmp_path)
    router = Router(
        fragments=[json.dumps([old]), json.dumps([new])], consolidate=decide_from_updates([{"old": old, "new": new}])
    )
    overrides = {"utility_model": "scripted/test", "replace_similarity_threshold": 0.9 if close_enough else 1.0}
    with memctl.open_store(overrides=overrides) as store:
        llm = UtilityModel(store.config, completion=router)
        for source, version in (("monday.json", "16"), ("next-monday.json", "17")):
            say = [Message("user", f"Our shop runs on Django 5 with PostgreSQL {version}.")]
            memorize_messages(store, say, llm, source=source, solutions=False)
        waiting = [item.text for item in store.pending_items(limit=10, offset=0)]
        if not close_enough:
            assert (waiting, len(store)) == ([new], 0)
            return
        assert [m.text for m, _ in store.iter_all()] == [new] and waiting == []
        assert store.search("PostgreSQL", limit=1, threshold=0.0)[0].text == new


def test_the_queue_is_not_compared_within_one_conversation(cli, tmp_path, scripted, monkeypatch):
    """Two unsure candidates of one conversation both wait: one conversation does not supersede itself (two
    similar facts of one session are more often two facts than an old and a new value)."""
    from memctl.memorize import gate_model

    first, _, old, new = _two_sessions(tmp_path)
    monkeypatch.setattr(gate_model, "model_for", lambda area, name: _UnsureGate("PostgreSQL"))
    first.write_text(json.dumps([{"role": "user", "content": "Django 5 with PostgreSQL 16, and PostgreSQL 17 next."}]))
    scripted(Router(fragments=json.dumps([old, new]), consolidate=decide_from_updates([{"old": old, "new": new}])))
    doc = cli("memorize", first, "--no-solutions", "--json").json
    assert [c["outdated"] for c in doc["transcripts"][0]["candidates"]] == [[], []]
    assert len(cli("review", "list", "--json").json["items"]) == 2


def test_needs_a_utility_model(cli, chat):
    result = cli("memorize", chat, "--json")
    assert result.code == 2 and "utility_model" in result.json["error"]["hint"]


def test_usage_errors(cli, tmp_path, scripted):
    scripted(Router())
    assert cli("memorize").code == 2
    assert cli("memorize", "--batch", tmp_path / "nothing-*.json").code == 2
    bad = tmp_path / "bad.txt"
    bad.write_text("no speakers here at all")
    assert cli("memorize", bad).code == 2


def test_batch_in_name_order_one_store_partial_exit(cli, tmp_path, scripted):
    folder = tmp_path / "logs"
    folder.mkdir()
    for name, fact in (("b.json", "User's team uses Django 5"), ("a.json", "User's team uses PostgreSQL")):
        (folder / name).write_text(
            json.dumps([{"role": "user", "content": f"FYI: {fact.split('uses ')[1]} is what our team uses."}])
        )
    (folder / "c.txt").write_text("not a transcript")
    router = scripted(Router(fragments=['["User\'s team uses PostgreSQL"]', '["User\'s team uses Django 5"]']))
    result = cli("memorize", "--batch", folder, "--no-solutions", "--json")
    assert result.code == 4
    doc = result.json
    assert [Path(t["source"]).name for t in doc["transcripts"]] == ["a.json", "b.json", "c.txt"]
    assert doc["transcripts"][2]["error"] and doc["summary"]["failed"] == 1
    assert doc["summary"]["inserted"] + doc["summary"]["kept_separate"] == 2
    assert "PostgreSQL" in router.calls[0][1]  # a.json first
    assert cli("list", "--json").json["total"] == 2


def test_history_is_cut_from_the_oldest_end(cli, tmp_path, scripted, monkeypatch):
    monkeypatch.setenv("MEMCTL_INTERNAL_MEMORIZE_MAX_HISTORY_CHARS", "60")
    path = tmp_path / "long.json"
    path.write_text(
        json.dumps(
            [{"role": "user", "content": "OLDEST " + "x" * 100}, {"role": "user", "content": "newest: we use Django"}]
        )
    )
    router = scripted(Router())
    doc = cli("memorize", path, "--no-solutions", "--json").json
    assert doc["transcripts"][0]["trimmed"] is True
    sent = router.calls[0][1]
    assert "newest: we use Django" in sent and "OLDEST" not in sent


def test_echo_of_recalled_memories_is_gated(cli, tmp_path, scripted):
    block = "## What you remember about this\n\n- User prefers dark mode in every editor\n"
    path = tmp_path / "echo.json"
    path.write_text(
        json.dumps(
            [
                {"role": "system", "content": block},
                {"role": "user", "content": "Set up my editor. I use Neovim with dark mode."},
            ]
        )
    )
    recalled = tmp_path / "recalled.md"
    recalled.write_text("- User's editor is Neovim\n")
    scripted(
        Router(
            fragments=json.dumps(
                [
                    "User prefers dark mode in every editor",
                    "User's editor is Neovim",
                    "User uses Neovim with dark mode as editor setup",
                ]
            )
        )
    )
    doc = cli("memorize", path, "--no-solutions", "--recalled", recalled, "--json").json
    fates = [(c["fate"], c["reason"]) for c in doc["transcripts"][0]["candidates"]]
    assert fates[:2] == [("gated", "echo"), ("gated", "echo")] and fates[2] == ("inserted", "no similar memory")


def test_consolidate_and_behaviour_commands_need_a_model(cli):
    cli("save", "a memory, so the store exists")
    assert cli("consolidate", "--json").code == 2
    assert cli("behaviour", "adjust", "be brief", "--json").code == 2


def test_consolidate_command(cli, scripted):
    cli("save", "User prefers dark mode in every editor", "--area", "fragments")
    cli("save", "User prefers dark mode in every editor app", "--area", "fragments")
    scripted(Router(consolidate='{"action": "merge", "targets": [0], "text": "User prefers dark mode in editors"}'))
    dry = cli("consolidate", "--dry-run", "--json").json
    assert dry["dry_run"] and dry["summary"]["merged"] == 1 and cli("list", "--json").json["total"] == 2
    human = cli("consolidate", "--dry-run")
    assert "would be merged" in human.out
    doc = cli("consolidate", "--json").json
    assert doc["groups"][0]["fate"] == "merged"
    assert [m["text"] for m in cli("list", "--json").json["items"]] == ["User prefers dark mode in editors"]


@pytest.mark.skipif(not EVAL.is_dir(), reason="eval transcripts not present")
def test_maya_payments_series_replay_keeps_only_current_values(home):
    """t03 -> t09 -> t15 -> t21 into one store: extraction returns each transcript's expected items,
    consolidation updates the value its `updates` name. Superseded values are kept only as superseded versions."""
    import memctl
    from memctl.memorize.pipeline import memorize_files

    cases = [json.loads((EVAL / f"{tid}.json").read_text()) for tid in ("t03", "t09", "t15", "t21")]
    updates = [u for case in cases for u in case.get("updates") or []]
    router = Router(
        fragments=[json.dumps(c["expected_fragments"]) for c in cases],
        solutions=[json.dumps(c["expected_solutions"]) for c in cases],
        consolidate=decide_from_updates(updates),
    )
    final = cases[-1]["series_final_state"]
    with memctl.open_store(home, overrides={"consolidation_threshold": 0.3}) as store:
        llm = UtilityModel(store.config, completion=router)
        report = memorize_files(store, [EVAL / f"{c['id']}.json" for c in cases], llm)
        assert not [c.text for t in report.transcripts for c in t.candidates if c.fate == "gated"]
        fragments = {m.text for m in store.list(area="fragments", limit=100)[0]}
        solutions = {m.text for m in store.list(area="solutions", limit=100)[0]}
        assert fragments == set(final["facts"])
        assert solutions == set(final["solutions"])
        assert not fragments & set(final["superseded"])
        old_texts = {e.old_text for e in store.history() if e.op == "supersede"}
        assert set(final["superseded"]) <= old_texts  # kept as superseded versions, visible in history
        assert report.summary()["updated"] == 4


def test_memory_quality_bench_replays_a_series_into_one_store(tmp_path, monkeypatch):
    """bench/memory_quality.py on a two-transcript series: every label extracted, the old value updated by the
    perfect scripted model, noise gated, and the figures counted from what the store holds."""
    drop_gate(monkeypatch, "Uvicorn")
    from bench.memory_quality import run

    old, new = (
        "ledgerline's HTTP API is built with Flask",
        ("ledgerline's HTTP API is built with FastAPI; the Flask app is being retired"),
    )
    first = {
        "id": "x-01",
        "series": "x",
        "messages": [
            {"role": "user", "content": "Our service ledgerline has an HTTP API built with Flask."},
            {"role": "tool", "content": "Uvicorn running on http://127.0.0.1:8000"},
        ],
        "expected_fragments": [old],
        "must_not_store": ["Uvicorn running on http://127.0.0.1:8000"],
        "recall_probes": [{"query": "Which web framework does ledgerline's HTTP API use?", "should_recall": old}],
    }
    second = {
        "id": "x-02",
        "series": "x",
        "messages": [
            {
                "role": "user",
                "content": "ledgerline's HTTP API is built with FastAPI now; the Flask app is being retired.",
            }
        ],
        "expected_fragments": [new],
        "must_not_store": [old],
        "updates": [{"old": old, "new": new}],
        "recall_probes": [{"query": "What is my cat's name?", "should_recall": None}],
    }
    for case in (second, first):  # written out of order: replayed in id order
        (tmp_path / f"{case['id']}.json").write_text(json.dumps(case))
    misses: list[str] = []
    figures = run(tmp_path, "fake", misses)
    assert figures["series"] == 1 and figures["transcripts"] == 2
    assert (figures["facts"], figures["facts_kept"]) == (1, 1), misses  # the old value is counted under updates
    assert (figures["noise"], figures["noise_out"]) == (1, 1), misses
    assert (figures["updates"], figures["updates_ok"], figures["updates_asked"]) == (1, 1, 1), misses
    assert figures["probes"] == 1 and figures["negatives"] == 1


def test_candidates_are_embedded_in_batches(home, tmp_path):
    """The model runs once per extraction for all its candidates, and once per candidate for the keyword
    searches' queries (bench/memorize_overhead.py): not once per gate check, consolidation and search."""
    import memctl
    from memctl.memorize.pipeline import memorize_files

    facts = [f"User's project number {n} is written in Rust and deployed on Fly.io" for n in range(6)]
    chat = tmp_path / "projects.json"
    chat.write_text(
        json.dumps(
            [
                {"role": "user", "content": f"My project number {n} is written in Rust and deployed on Fly.io."}
                for n in range(6)
            ]
            + CHAT[1:]
        )
    )
    router = Router(
        fragments=json.dumps(facts),
        solutions=json.dumps([SOLUTION]),
        keywords='["Rust", "Fly.io"]',
        consolidate='{"action": "keep_separate", "targets": []}',
    )
    with memctl.open_store(home) as store:
        store.add(["User's other project is written in Go"], area="fragments")
        calls: list[int] = []
        inner = store.embedder.inner
        real = inner.embed
        inner.embed = lambda texts: calls.append(len(texts)) or real(texts)
        llm = UtilityModel(store.config, completion=router)
        report = memorize_files(store, [chat], llm)
        stored = [c for c in report.transcripts[0].candidates if c.fate in ("inserted", "kept_separate")]
        assert len(stored) == 7, [(c.text, c.fate, c.reason) for c in report.transcripts[0].candidates]
        assert max(calls) >= 6  # the six facts in one batch
        assert len(calls) <= 2 + len(stored), calls  # one per extraction + one per candidate's keyword queries
