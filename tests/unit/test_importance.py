"""Importance at write, decay, the optional re-ranking, and provenance in the recall block (#18)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memctl.errors import UsageError
from memctl.memorize import provenance
from memctl.memorize.importance import Rater, Weights
from memctl.search import importance, ranking
from memctl.store.records import Hit

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _ago(days: float, now: datetime | None = None) -> str:
    return ((now or datetime.now(UTC)) - timedelta(days=days)).isoformat(timespec="milliseconds")


def _seed(store, rows: list[dict]) -> list[str]:
    vectors = store.embedder.embed([r["text"] for r in rows])
    ids = store.insert_records(rows, vectors, store.embedder.info)
    for rid, row in zip(ids, rows, strict=True):
        if row.get("accessed_at"):
            assert store.touch([rid], at=row["accessed_at"]) == 1
    return ids


# -- assignment from signals -----------------------------------------------------------------
@pytest.mark.parametrize(
    "said, memory",
    [
        ("From now on, reply in French please.", "User wants replies in French"),
        ("Always run the linter before you commit.", "Run the linter before every commit"),
        ("Remember that my sister Lena is a vegetarian.", "User's sister Lena is a vegetarian"),
        ("I prefer metric units in every answer.", "User wants metric units in answers"),
        ("Never deploy the billing service on Fridays.", "The billing service is not deployed on Fridays"),
        ("以后都用中文回答我。", "以后都用中文回答"),
        ("好。以后回答我都用中文吧。", "用户希望回答用中文"),
        ("I have a severe peanut allergy, so no peanuts.", "User has a severe peanut allergy"),
        ("记住，我的车牌号是沪A12345。", "用户的车牌号是沪A12345"),
        ("我喜欢靠窗的座位。", "用户想要靠窗的座位"),
        ("不要再给我推荐咖啡因饮料了。", "不给用户推荐咖啡因饮料"),
    ],
)
def test_keep_signal_in_the_users_words_raises_importance(said: str, memory: str):
    rating = Rater(["Hello there.", said]).rate(memory)
    assert rating.value == 0.8, rating.reasons
    assert "keep-signal in the user's words" in rating.reasons[-1]


@pytest.mark.parametrize(
    "said, memory",
    [
        ("Today I am working from the Lyon office.", "User works from the Lyon office"),
        ("这次帮我订周五下午的会议室。", "用户订周五下午的会议室"),
        ("For now the staging database is on the old cluster.", "The staging database is on the old cluster"),
    ],
)
def test_one_off_details_are_lowered(said: str, memory: str):
    assert Rater([said]).rate(memory).value == 0.3


def test_plain_fact_keeps_the_base_and_config_weights_apply():
    assert Rater(["Our shop runs on Django 5."]).rate("The shop runs on Django 5").value == 0.5
    weights = Weights(base=0.4, keep=0.5, keep_text=0.1, one_off=0.3)
    assert Rater(["From now on answer in Spanish."], weights).rate("User wants answers in Spanish").value == 0.9


def test_the_signal_belongs_to_its_own_clause_and_a_short_lead_in():
    rater = Rater(
        [
            "Hi, I'm Ana. Our shop runs on Django 5 with PostgreSQL, and I always want answers in Spanish.",
            "From now on, summaries go at the top.",
        ]
    )
    assert rater.rate("Ana's shop runs on Django 5 with PostgreSQL").value == 0.5  # the "always" is about Spanish
    assert rater.rate("User always wants answers in Spanish").value == 0.8
    assert rater.rate("Summaries go at the top of answers").value == 0.8  # "From now on," leads into it
    listed = Rater(
        [
            "I write for a trade magazine. Standing rules for anything you help me with: British spelling, "
            "and sources from 2020 onwards only."
        ]
    )
    assert listed.rate("User wants British spelling").value == 0.8  # the heading before the colon covers the list
    assert listed.rate("Sources must date from 2020 onwards").value == 0.8
    assert listed.rate("User writes for a trade magazine").value == 0.5


def test_questions_and_symptoms_do_not_raise_solutions():
    rater = Rater(["Why does our pip cache never hit?", "Remember this fix: reinstall the GPU driver."])
    solution = "pip cache never hits -> hash the lock file in the cache key"
    assert rater.rate(solution, "solutions").value == 0.5  # "never" in a question describes the symptom
    assert rater.rate("GPU not found -> reinstall the GPU driver", "solutions").value == 0.8  # "remember this"
    assert (
        Rater(["The build must use a temporary folder."])
        .rate("Build fails -> it must use a temporary folder", "solutions")
        .value
        == 0.5
    )


def test_wording_of_the_memory_alone_raises_less():
    rating = Rater(["Something unrelated."]).rate("User prefers dark mode in every editor")
    assert rating.value == 0.7 and "keep-signal in the memory" in rating.reasons[-1]
    assert Rater([]).rate("用户喜欢简短直接的回答").value == 0.7


# -- the value and its flags -------------------------------------------------------------------
@pytest.mark.parametrize("bad", [math.nan, math.inf, -0.01, 1.5, True, "0.5", None])
def test_check_refuses_anything_but_a_finite_number_in_the_unit_interval(bad):
    with pytest.raises(UsageError, match="importance must be a number in"):
        importance.check(bad)


def test_of_falls_back_to_the_default_for_unusable_values():
    assert importance.of({"importance": 0.9}, 0.5) == 0.9
    for value in ("high", True, 7, None, math.nan):
        assert importance.of({"importance": value}, 0.5) == 0.5
    assert importance.of({}, 0.4) == 0.4


def test_save_and_update_importance_flags(cli):
    saved = cli("save", "User prefers tea over coffee", "--importance", "0.9", "--json")
    assert saved.code == 0, saved.err
    [mid] = saved.json["ids"]
    assert cli("show", mid, "--json").json["memory"]["metadata"] == {"importance": 0.9}
    updated = cli("update", mid, "--importance", "0.25", "--json")
    assert updated.code == 0 and updated.json["changed"] is True, updated.err
    assert updated.json["memory"]["metadata"] == {"importance": 0.25}
    assert cli("update", mid, "--importance", "0.25", "--json").json["changed"] is False
    both = cli("save", "x", "--meta", "importance=0.1", "--importance", "0.6", "--json").json["ids"][0]
    assert cli("show", both, "--json").json["memory"]["metadata"]["importance"] == 0.6  # the flag wins
    assert [e["op"] for e in cli("history", mid, "--json").json["entries"]] == ["update", "add"]


@pytest.mark.parametrize(
    "args",
    [
        ["--importance", "nan"],
        ["--importance", "inf"],
        ["--importance", "1.01"],
        ["--importance", "-1"],
        ["--meta", "importance=3"],
        ["--meta", 'importance="high"'],
    ],
)
def test_bad_importance_is_a_usage_error_and_writes_nothing(cli, args: list[str]):
    result = cli("save", "User prefers tea", *args, "--json")
    assert result.code == 2 and "importance" in result.err and "Traceback" not in result.err
    mid = cli("save", "another memory", "--json").json["ids"][0]
    result = cli("update", mid, *args, "--json")
    assert result.code == 2 and "importance" in result.err
    assert cli("list", "--json").json["total"] == 1
    assert cli("show", mid, "--json").json["memory"]["metadata"] == {}


def test_not_a_number_is_refused_by_the_parser(cli):
    result = cli("save", "text", "--importance", "high")
    assert result.code == 2 and "Traceback" not in result.err


def test_filter_reads_importance(cli):
    cli("save", "high one", "--importance", "0.9")
    cli("save", "low one", "--importance", "0.1")
    items = cli("list", "--filter", "importance >= 0.5", "--json").json["items"]
    assert [m["text"] for m in items] == ["high one"]


def test_knowledge_chunks_get_the_configured_importance(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "setup.md").write_text("# Setup\n\nThe VPN needs the corporate certificate installed first.\n")
    assert cli("import-knowledge", kb).code == 0
    [chunk] = cli("list", "--json").json["items"]
    assert chunk["metadata"]["importance"] == 0.6 and chunk["metadata"]["knowledge_source"] is True
    monkeypatch.setenv("MEMCTL_INTERNAL_KNOWLEDGE_IMPORTANCE", "0.35")
    (kb / "more.md").write_text("# More\n\nPrinters are on the third floor.\n")
    assert cli("import-knowledge", kb).code == 0
    found = {m["metadata"]["source_file"]: m["metadata"]["importance"] for m in cli("list", "--json").json["items"]}
    assert found == {"setup.md": 0.6, "more.md": 0.35}


def test_memorize_assigns_importance(store):
    from memctl.llm import UtilityModel
    from memctl.memorize.pipeline import memorize_messages
    from memctl.memorize.transcripts import Message
    from tests.scripted_llm import Router

    messages = [
        Message("user", "Remember that I am allergic to peanuts."),
        Message("user", "Our team uses GitLab for every repository."),
        Message("user", "Today I am in Berlin for the GitLab meetup."),
    ]
    router = Router(
        fragments=json.dumps(
            [
                "User is allergic to peanuts",
                "The team uses GitLab for repositories",
                "User is in Berlin for the GitLab meetup",
            ]
        )
    )
    report = memorize_messages(store, messages, UtilityModel(store.config, completion=router), solutions=False)
    stored = {m.text: m.metadata["importance"] for m in store.list(limit=10)[0]}
    assert stored == {
        "User is allergic to peanuts": 0.8,
        "The team uses GitLab for repositories": 0.5,
        "User is in Berlin for the GitLab meetup": 0.3,
    }
    assert all(any(n.startswith("importance ") for n in c.notes) for c in report.candidates)


# -- decay -------------------------------------------------------------------------------------
def test_decay_arithmetic():
    assert importance.effective(0.8, _ago(90, NOW), NOW, 90) == pytest.approx(0.4)
    assert importance.effective(0.8, _ago(180, NOW), NOW, 90) == pytest.approx(0.2)
    assert importance.effective(0.8, _ago(45, NOW), NOW, 90) == pytest.approx(0.8 / math.sqrt(2))
    assert importance.effective(0.8, _ago(400, NOW), NOW, 0) == 0.8  # half-life 0: no decay
    assert importance.effective(0.8, _ago(-5, NOW), NOW, 90) == 0.8  # a future stamp does not grow it
    assert importance.effective(0.8, "not a time", NOW, 90) is None
    assert importance.effective(0.8, "2026-09-02T12:00:00", NOW, 90) == pytest.approx(0.4)  # naive = UTC


@pytest.fixture
def decaying(backend, store):
    rows = [
        {"text": "important rule from long ago", "created_at": _ago(200), "metadata": {"importance": 0.9}},
        {"text": "plain fact from long ago", "created_at": _ago(200), "metadata": {}},
        {"text": "plain fact used last week", "created_at": _ago(300), "accessed_at": _ago(7), "metadata": {}},
        {"text": "minor detail from yesterday", "created_at": _ago(1), "metadata": {"importance": 0.2}},
        {"text": "minor detail from a month ago", "created_at": _ago(30), "metadata": {"importance": 0.3}},
    ]
    return dict(zip([r["text"] for r in rows], _seed(store, rows), strict=True))


@pytest.mark.parametrize(
    "args, expected",
    [
        # half-life 90 days: 0.9 -> 0.19 after 200 days; 0.5 -> 0.11;
        # used last week: 0.5 -> 0.47; 0.2 -> 0.2; 0.3 -> 0.24
        (
            ["--decayed-below", "0.25"],
            {
                "important rule from long ago",
                "plain fact from long ago",
                "minor detail from yesterday",
                "minor detail from a month ago",
            },
        ),
        (["--decayed-below", "0.15"], {"plain fact from long ago"}),
        (
            ["--decayed-below", "0.25", "--older-than", "10d"],
            {"important rule from long ago", "plain fact from long ago", "minor detail from a month ago"},
        ),
    ],
)
def test_prune_decayed_below_dry_run_equals_prune_and_restores(
    backend, cli, decaying: dict[str, str], args: list[str], expected: set[str]
):
    preview = cli("prune", *args, "--json")
    assert preview.code == 0 and preview.json["dry_run"] is True, preview.err
    assert {m["text"] for m in preview.json["pruned"]} == expected
    assert preview.json["criteria"]["decayed_below"] == float(args[1])
    listed = {m["id"] for m in preview.json["pruned"]}
    real = cli("prune", *args, "--yes", "--json").json
    assert real["dry_run"] is False and {m["id"] for m in real["pruned"]} == listed
    assert {m["id"] for m in cli("list", "--json", "-n", "100").json["items"]} == set(decaying.values()) - listed
    restored = cli("restore", *sorted(listed), "--json").json
    assert {m["id"] for m in restored["restored"]} == listed


def test_prune_decayed_below_follows_the_half_life(backend, cli, decaying, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MEMCTL_IMPORTANCE_HALF_LIFE", "0")  # no decay: only stored values below count
    doc = cli("prune", "--decayed-below", "0.25", "--json").json
    assert {m["text"] for m in doc["pruned"]} == {"minor detail from yesterday"}


@pytest.mark.parametrize("value", ["nan", "1.5", "-0.1"])
def test_prune_decayed_below_refuses_bad_values(cli, value: str):
    result = cli("prune", "--decayed-below", value, "--yes", "--json")
    assert result.code == 2 and "Traceback" not in result.err


def test_library_criteria_check_the_value(store):
    from memctl.lifecycle.prune import PruneCriteria, select_for_prune

    with pytest.raises(UsageError, match="--decayed-below"):
        select_for_prune(store, PruneCriteria(decayed_below=math.inf))


# -- ranking -----------------------------------------------------------------------------------
def _hit(text: str, score: float, imp: float | None, days: float) -> Hit:
    meta = {} if imp is None else {"importance": imp}
    stamp = _ago(days, NOW)
    return Hit(id=text, text=text, area="fragments", created_at=stamp, updated_at=stamp, metadata=meta, score=score)


CONFIG = {"rank_importance_weight": 0.0, "rank_recency_half_life": 0.0, "prune_default_importance": 0.5}


def test_rerank_off_keeps_the_relevance_order():
    hits = [_hit("a", 0.9, 0.1, 300), _hit("b", 0.8, 1.0, 1)]
    assert ranking.rerank(hits, CONFIG, NOW) == hits


def test_rerank_by_importance_and_recency():
    hits = [_hit("relevant minor", 0.82, 0.1, 10), _hit("rule", 0.80, 0.9, 10), _hit("no value", 0.81, None, 10)]
    order = [h.text for h in ranking.rerank(hits, {**CONFIG, "rank_importance_weight": 0.2}, NOW)]
    assert order == ["rule", "no value", "relevant minor"]
    old_new = [_hit("old value", 0.80, 0.5, 400), _hit("new value", 0.79, 0.5, 2)]
    assert [h.text for h in ranking.rerank(old_new, {**CONFIG, "rank_importance_weight": 0.2}, NOW)] == [
        "old value",
        "new value",
    ]  # no recency: relevance and equal importance decide
    with_recency = {**CONFIG, "rank_importance_weight": 0.2, "rank_recency_half_life": 90.0}
    assert [h.text for h in ranking.rerank(old_new, with_recency, NOW)] == ["new value", "old value"]
    assert [h.score for h in ranking.rerank(old_new, with_recency, NOW)] == [0.79, 0.80]  # scores stay relevance


def test_reranking_never_lets_an_irrelevant_memory_in(store, monkeypatch: pytest.MonkeyPatch):
    from memctl.recall import recall

    _seed(
        store,
        [
            {"text": "User prefers dark mode in every editor", "metadata": {"importance": 0.1}},
            {"text": "Quarterly tax return filing deadline", "metadata": {"importance": 1.0}},
        ],
    )
    store.config.values.update(rank_importance_weight=1.0, rank_recency_half_life=30.0)
    got = recall(store, "User prefers dark mode in every editor", threshold=0.9)
    assert [h.text for h in got.memories] == ["User prefers dark mode in every editor"]


# -- provenance in the recall block ------------------------------------------------------------
@pytest.fixture
def sourced(backend, store):
    rows = [
        {
            "text": "User prefers answers in Spanish",
            "created_at": "2026-03-04T10:00:00+00:00",
            "metadata": {"source": "memorize", "transcript": "chat-0304.json", "importance": 0.8},
        },
        {
            "text": "User prefers answers in Portuguese",
            "created_at": "2026-10-20T10:00:00+00:00",
            "metadata": {"source": "memorize", "transcript": "/logs/chat-1020.json", "consolidation_action": "update"},
        },
        {
            "text": "The shop answers support mail within one day",
            "created_at": "2026-06-01T09:00:00+00:00",
            "area": "main",
            "metadata": {"knowledge_source": True, "source_file": "support.md", "source_path": "policies/support.md"},
        },
        {"text": "The shop answers phone calls on weekdays", "created_at": "2026-07-01T09:00:00+00:00", "metadata": {}},
        {
            "text": "Answers in the wrong language -> set the reply language in settings",
            "area": "solutions",
            "created_at": "2026-08-15T09:00:00+00:00",
            "metadata": {"source": "memorize", "transcript": "fix.json"},
        },
    ]
    return _seed(store, rows)


def test_json_carries_date_source_and_group(backend, cli, sourced):
    doc = cli("recall", "answers", "--threshold", "0", "--format", "json").json
    fields = {
        h["text"]: (h["date"], h["source"], h["source_name"], h["group"]) for h in doc["memories"] + doc["solutions"]
    }
    assert fields == {
        "User prefers answers in Spanish": ("2026-03-04", "conversation", "chat-0304.json", "rules"),
        "User prefers answers in Portuguese": ("2026-10-20", "consolidation", "chat-1020.json", "rules"),
        "The shop answers support mail within one day": ("2026-06-01", "knowledge", "support.md", "facts"),
        "The shop answers phone calls on weekdays": ("2026-07-01", "saved", None, "facts"),
        "Answers in the wrong language -> set the reply language in settings": (
            "2026-08-15",
            "conversation",
            "fix.json",
            "solutions",
        ),
    }


def test_block_groups_items_with_dates_and_sources(backend, cli, sourced):
    out = cli("recall", "answers", "--threshold", "0").out
    sections = out.split("\n\n")
    assert sections[0] == "## Standing preferences and rules"
    assert sorted(sections[1].splitlines()) == [
        "- User prefers answers in Portuguese [2026-10-20, consolidation chat-1020.json]",
        "- User prefers answers in Spanish [2026-03-04, conversation chat-0304.json]",
    ]
    assert sections[2] == "## What you remember about this"
    assert sorted(sections[3].splitlines()) == [
        "- The shop answers phone calls on weekdays [2026-07-01, saved]",
        "- The shop answers support mail within one day [2026-06-01, knowledge file support.md]",
    ]
    assert sections[4] == "## Approaches that worked before"
    assert sections[5] == (
        "- Answers in the wrong language -> set the reply language in settings [2026-08-15, conversation fix.json]"
    )
    assert "newer one" in sections[6] and out.endswith("\n")


def test_block_is_empty_when_nothing_is_recalled(store):
    from memctl.recall import RecallResult, render_prompt

    assert render_prompt(RecallResult("m", "m", [], [])) == ""


def test_recall_counts_as_an_access(backend, cli, sourced):
    before = cli("stats", "--json").json["stores"][0]["never_accessed"]
    cli("recall", "answers", "--threshold", "0")
    assert cli("stats", "--json").json["stores"][0]["never_accessed"] < before


def test_recalled_block_is_still_recognised_as_an_echo():
    from memctl.memorize.grounding import split_recalled

    block = (
        "## Standing preferences and rules\n\n- User prefers tea [2026-03-04, conversation a.json]\n\n"
        "## What you remember about this\n\n- The office is in Porto [2026-01-02, knowledge file x.md]\n\n"
        "Each note ends with the day it was last written.\n"
    )
    rest, quoted = split_recalled("Hello\n" + block)
    assert quoted == ["User prefers tea", "The office is in Porto"]
    assert provenance.strip_label("Text [with brackets] stays") == "Text [with brackets] stays"
