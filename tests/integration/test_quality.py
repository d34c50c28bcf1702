"""The quality gate: the learned model's inputs and outcomes, the length veto, grounding, echo, and the figures
on the shared transcripts (a regression check, not a measure)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from memctl.memorize import gate_model, quality
from memctl.memorize.grounding import Grounding, parse_recalled, split_recalled
from memctl.memorize.quality import REASONS, check
from memctl.memorize.transcripts import Message
from tests.conftest import REPO

DURABLE = [
    "User's name is Jonas and he works as a data engineer at a logistics startup",
    "User prefers tabs over spaces in Go code",
    "The team's main branch is protected; every change needs one approving review",
    "User is allergic to shellfish",
    "User speaks German and English; answers should be in German",
    "User's blog is built with Hugo and hosted on Netlify",
    "User has two kids, aged 5 and 8",
    "User runs every Saturday morning with a local club",
    "User works Monday to Thursday; Fridays are off",
    "User wants all commit messages in Conventional Commits format",
    "Team uses Python 3.12 and uv for dependency management",
    "User's birthday is 3 March",
    "The product's public API is versioned under /v2",
    "Acme's workspace signs in with Azure AD SAML SSO",
    "User's standup is every weekday at 9:30",
    "User's gym classes are Tuesdays at 18:00",
    "Staging environment is deployed from the develop branch",
    "The Flask app is being retired",
    "User currently lives in Lisbon",
]

TRANSIENT = [
    ("Hi", "too_short"),
    ("User said good morning and thanked the assistant", "greeting"),
    ("Today is Tuesday, 4 March", "date_only"),
    ("I ran the migrations and they succeeded", "agent_action"),
    ("The assistant created a new branch feature/login", "agent_action"),
    ("Created a virtualenv for the project", "agent_action"),
    ("All 42 tests passed in 3.1s", "command_output"),
    ("Build failed with exit code 2", "command_output"),
    ("FileNotFoundError: config.yaml not found", "raw_error"),
    ("100 USD is about 92 EUR", "calculation"),
    ("User's laptop stores the project at /Users/kim/code/shop", "local_coordinate"),
    ("API server listening on http://localhost:3000", "local_coordinate"),
    ("Postgres container exposed on port 5433", "local_coordinate"),
    ("The staging database has 3 stuck jobs", "local_coordinate"),
    ("Commit a3f9c21 fixed the login bug", "ephemeral_id"),
    ("Order ORD-99812 is on its way to the user", "ephemeral_id"),
    ("User has a dentist appointment tomorrow at 10am", "relative_time"),
    ("User is tired today", "relative_time"),
    ("User's flight lands at 14:35", "one_off_event"),
    ("User asked the assistant to summarise the meeting notes", "one_off_request"),
    ("User wants to know how to reverse a list in Python", "one_off_request"),
    ("User will send the report to the client soon", "relative_time"),
    ("Container web-1 restarted", "tool_status"),
    ("Quarterly revenue figures table", "bare_topic"),
    ("3 files changed, 45 insertions(+)", "command_output"),
    ("pytest collected 214 items", "command_output"),
    ("The build is currently failing", "passing_state"),
    ("Weather in Paris is 18 °C and sunny today", "relative_time"),
    ("The conversation was about Docker volumes", "session_topic"),
    ("User is looking for a birthday present for her sister", "one_off_request"),
    ("Dev DB contains 40 test users", "local_coordinate"),
]


def test_length_veto_on_both_paths():
    assert check("Hi").reason == "too_short"
    assert check("x" * (quality.MAX_FRAGMENT_CHARS + 1)).reason == "too_long"
    assert check("pip fails -> fix it", "solutions").reason == "too_short"
    assert check("用户住在杭州").reason != "too_short"  # Chinese has no spaces: counted by characters
    assert all(v.reason in REASONS for v in (check("Hi"), check("pip fails -> fix it", "solutions")))


FORM_CASES = [
    # feature, (texts that carry it, EN and ZH), (lookalikes that do not)
    ("identifier", ["Commit a3f9c21 fixed the login bug", "退款单号 RF20251203004512"], ["User's dog is called Rex"]),
    ("path_or_port", ["API server listening on http://localhost:3000", "Logs are in /var/log/app"], ["User likes tea"]),
    ("log_shape", ["Build failed with exit code 2", "上传报错了"], ["User's build runs on GitHub Actions"]),
    ("absolute_date", ["User's birthday is 3 March", "婚礼定在2026年5月"], ["User's birthday is in spring"]),
    ("recurrence", ["User runs every Saturday morning", "每周六带狗去公园"], ["User ran on Saturday"]),
    ("relative_time", ["User is tired today", "今天好累"], ["User is a night owl"]),
    ("agent_subject", ["The assistant created a new branch", "助手已经帮用户改好了"], ["User created the repo"]),
    ("request", ["Can you draft the email", "帮我写个文案"], ["User drafts emails in English"]),
    ("intention", ["User might try Rust next", "也许下次换个牌子"], ["User writes Rust"]),
    ("number_with_unit", ["The disk has 91 GB left", "这个月花了300元"], ["User has two kids"]),
    ("standing_rule", ["From now on reply in German", "以后都用中文回答"], ["User replied in German"]),
]


@pytest.mark.parametrize("feature, carries, lookalikes", FORM_CASES, ids=[c[0] for c in FORM_CASES])
def test_form_features_mark_their_class(feature, carries, lookalikes):
    """The features are inputs of the model (it weighs them): each marks its class, not the lookalike."""
    index = gate_model.FEATURES.index(feature)
    assert all(gate_model.form_features(t)[index] == 1.0 for t in carries), feature
    assert all(gate_model.form_features(t)[index] == 0.0 for t in lookalikes), feature


@pytest.mark.real_gate
def test_shipped_models_match_the_features_and_order_their_thresholds():
    for area in ("fragments", "solutions"):
        forms = gate_model.model_for(area, None)
        assert forms is not None and len(forms.weights) == len(gate_model.FEATURES)
        dense = gate_model.model_for(area, quality.GATE_MODEL)
        assert dense is not None
        inputs = dense.hidden.weights.shape[0] if dense.hidden is not None else len(dense.weights)
        assert inputs == 384 + len(gate_model.FEATURES)
        for model in (forms, dense):
            assert 0.0 <= model.keep_below <= model.drop_from <= 1.0
    data = gate_model.shipped()["models"]["fragments"]["embedding"]
    assert data["statements"]["domains"] >= 40  # fitted on the tune side, leave-one-domain-out
    assert data["cv"]["facts_dropped"] <= 0.011


def test_outcomes_follow_the_two_thresholds():
    model = gate_model.GateModel(
        np.zeros(len(gate_model.FEATURES)), 0.0, keep_below=0.3, drop_from=0.8, embedding_model=None
    )
    assert [model.outcome(p) for p in (0.1, 0.3, 0.79, 0.8, 0.99)] == ["keep", "pending", "pending", "drop", "drop"]
    assert model.decide(["User has two kids"], None)[0].outcome == "pending"  # p = 0.5 with zero weights


def test_a_hidden_layer_reads_standardised_inputs_through_relu_units():
    """With a hidden layer the output weights read ReLU((x - mean) / scale @ W + b): one unit that copies the
    `question` feature, with a strong output weight, sends a question to drop and a statement to keep. The
    parameters round-trip through the shipped JSON shape; mismatched shapes are refused."""
    n = len(gate_model.FEATURES)
    w = np.zeros((n, 1))
    w[gate_model.FEATURES.index("question"), 0] = 1.0
    doc = {
        "features": list(gate_model.FEATURES),
        "hidden": {"mean": [0.0] * n, "scale": [1.0] * n, "weights": w.tolist(), "bias": [0.0]},
        "weights": [20.0],
        "bias": -10.0,
        "keep_below": 0.3,
        "drop_from": 0.8,
    }
    model = gate_model.GateModel.from_dict(doc)
    assert [d.outcome for d in model.decide(["Is the door blue?", "The door is blue"], None)] == ["drop", "keep"]
    with pytest.raises(ValueError, match="shapes"):
        gate_model.GateModel.from_dict({**doc, "hidden": {**doc["hidden"], "bias": [0.0, 0.0]}})


def test_pending_candidate_still_gets_the_grounding_check(monkeypatch):
    model = gate_model.GateModel(
        np.zeros(len(gate_model.FEATURES)), 0.0, keep_below=0.3, drop_from=0.8, embedding_model=None
    )
    monkeypatch.setattr(gate_model, "model_for", lambda area, name: model)
    assert check("User's dog is called Rex").pending
    grounding = _grounding(("user", "I have a cat."))
    assert check("User's dog is called Rex", grounding=grounding).reason == "ungrounded"


@pytest.mark.real_gate
def test_without_a_shipped_model_the_gate_keeps(monkeypatch):
    monkeypatch.setattr(gate_model, "shipped", lambda: {})
    assert check("User's flight lands at 14:35 tomorrow").ok


@pytest.mark.real_gate
@pytest.mark.integration
def test_learned_gate_keeps_durable_facts_and_keeps_most_noise_out():
    """With the gate's embedder (the model it was fitted on): none of our durable examples dropped, and
    most transient ones kept out (dropped or pending). Our own examples, of no corpus domain."""
    embed, name = quality.gate_embedding()
    assert name == quality.GATE_MODEL
    dropped = [t for t in DURABLE if check(t, embed=embed, embedding_model=name).dropped]
    assert len(dropped) <= 1, dropped  # measured: "User currently lives in Lisbon" (see the closing note)
    kept = [t for t, _ in TRANSIENT if check(t, embed=embed, embedding_model=name).ok]
    assert len(kept) <= 0.2 * len(TRANSIENT), kept


def test_memorize_pending_setting_is_checked_and_the_old_gate_key_is_retired(tmp_path, capsys):
    from memctl.config import load_config
    from memctl.errors import ConfigError

    with pytest.raises(ConfigError, match="memorize_pending"):
        load_config(overrides={"memorize_pending": "maybe"})
    (tmp_path / "config.yaml").write_text("memorize_gate: both\n", encoding="utf-8")
    config = load_config(store_dir=tmp_path)
    assert config["memorize_pending"] == "review"
    assert "retired" in capsys.readouterr().err


@pytest.mark.real_gate
@pytest.mark.skipif(not (REPO.parent / "shared/eval/transcripts").is_dir(), reason="eval transcripts not present")
def test_shared_transcripts_do_not_regress():
    """bench/quality_gate.py on the shared transcripts (fake embedder: the form-features model decides)."""
    proc = subprocess.run(
        [sys.executable, "bench/quality_gate.py", "--embedder", "fake", "--before", "none", "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(proc.stdout.strip().splitlines()[-1])["gates"]["memctl"]
    assert figures["facts"] >= 30 and figures["noise"] >= 40
    assert figures["facts_dropped_pct"] <= 3.0  # measured 2.5 with the form-features model (fake embedder)
    assert figures["noise_kept_out_pct"] >= 80.0


def _grounding(*messages: tuple[str, str], **options):
    return Grounding.from_messages([Message(role, text) for role, text in messages], **options)


def test_ungrounded_inventions_are_gated():
    grounding = _grounding(
        ("user", "I deploy my blog with Hugo to Netlify, and I have a dog."),
        ("assistant", "Your dog Rex must love walks. You prefer tabs, I assume."),
    )
    assert check("User's blog is built with Hugo and deployed to Netlify", grounding=grounding).ok
    invented_name = check("User's dog is named Rex", grounding=grounding)
    assert invented_name.reason == "ungrounded" and "Rex" in invented_name.detail
    assert check("User prefers tabs over spaces", grounding=grounding).reason == "ungrounded"


def test_grounding_uses_the_embedding_when_words_differ():
    from memctl.embeddings import FakeEmbedder

    grounding = _grounding(
        ("user", "the frontend is vue with pinia stores"), min_overlap=0.9, similarity=0.6, embed=FakeEmbedder().embed
    )
    assert check("the frontend uses vue with pinia stores", grounding=grounding).ok


def test_grounding_across_languages_checks_names_and_numbers_only():
    grounding = _grounding(("user", "以后回答我都用中文吧。我们的服务都部署在阿里云 ACK 上。"))
    assert check("User prefers replies in Chinese", grounding=grounding).ok
    assert check("User's team deploys on GKE in region EU9", grounding=grounding).reason == "ungrounded"
    assert check("User's team deploys on ACK (Kubernetes)", grounding=grounding).ok


RECALL_BLOCK = (
    "## What you remember about this\n\n- User prefers dark mode in every editor\n"
    "- The deploy target is Kubernetes\n\n## Approaches that worked before\n\n"
    "- Editor shows light mode after update -> set theme dark in settings.json\n"
)


def test_recalled_block_is_split_out_and_echoes_are_gated():
    rest, quoted = split_recalled("Context for you:\n" + RECALL_BLOCK + "\nNow answer.")
    assert quoted[:2] == ["User prefers dark mode in every editor", "The deploy target is Kubernetes"]
    assert "dark mode" not in rest and "Now answer." in rest
    grounding = _grounding(("system", RECALL_BLOCK), ("user", "what theme do I like? also my cat is called Miso"))
    echo = check("User prefers dark mode in every editor", grounding=grounding)
    assert echo.reason == "echo"
    # recalled text is not evidence: restating it with other words is not grounded either
    assert check("User likes dark mode in all editors", grounding=grounding).reason == "echo"
    assert check("User's cat is called Miso", grounding=grounding).ok


def test_recalled_file_formats():
    assert parse_recalled(RECALL_BLOCK)[0] == "User prefers dark mode in every editor"
    doc = {"memories": [{"text": "a fact here"}], "solutions": [{"text": "x -> y"}]}
    assert parse_recalled(json.dumps(doc)) == ["a fact here", "x -> y"]
    assert parse_recalled("one memory\n- another memory\n") == ["one memory", "another memory"]


def test_grounding_matches_chinese_by_characters():
    grounding = _grounding(("user", "我的论文是用 LaTeX 写的，参考文献放在 Zotero 里。"))
    assert check("用户的论文用 LaTeX 写", grounding=grounding).ok
    assert check("用户的参考文献用 Zotero 管理", grounding=grounding).ok
    invented = check("用户养了一只叫咪咪的猫", grounding=grounding)
    assert invented.reason == "ungrounded", invented
    # an English summary of a Chinese conversation: only numbers and ALLCAPS names can be compared
    assert check("User writes the thesis in LaTeX", grounding=grounding).ok
    assert check("User's thesis is written in Word 2019", grounding=grounding).reason == "ungrounded"


def test_content_stems_split_chinese_into_bigrams():
    from memctl.memorize.grounding import content_stems

    units = content_stems("用户喜欢深色主题 in every editor")
    assert "深色" in units and "主题" in units and "editor" in units
    assert "用户" not in units  # the frame ("user") carries no content


def test_calendar_words_written_out_are_grounded_and_invented_ones_are_not():
    """An extractor writes "Tue-Sat 11:00-19:00" as weekdays and a 12-hour clock, and "next January" with its year:
    the same names and numbers, so not inventions; a weekday, time or year the chat never gives still is one."""
    grounding = _grounding(
        ("user", "Black Lantern hours are Tue-Sat 11:00-19:00. From next January the deposit goes up to 60."),
        ("tool", "booking.export 2026-12-02 rows=14"),
    )
    assert check("Black Lantern is open Tuesday to Saturday, 11am to 7pm.", grounding=grounding).ok
    assert check("Black Lantern's deposit goes up to 60 in January 2027.", grounding=grounding).ok
    assert check("Black Lantern is open Monday to Friday, 9am to 5pm.", grounding=grounding).reason == "ungrounded"
    assert grounding.support("Black Lantern's deposit went up to 60 in March 2019.")[1] == ["March", "2019"]
