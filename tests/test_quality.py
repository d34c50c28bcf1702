"""The quality gate: each rule by example (not the eval strings), grounding, echo, and the eval figures."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from memctl.quality import REASONS, Grounding, check, parse_recalled, split_recalled
from memctl.transcripts import Message
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
    ("FileNotFoundError: config.yaml not found", "command_output"),
    ("100 USD is about 92 EUR", "calculation"),
    ("User's laptop stores the project at /Users/kim/code/shop", "local_coordinate"),
    ("API server listening on http://localhost:3000", "local_coordinate"),
    ("Postgres container exposed on port 5433", "local_coordinate"),
    ("The staging database has 3 stuck jobs", "local_coordinate"),
    ("Commit a3f9c21 fixed the login bug", "ephemeral_id"),
    ("Order ORD-99812 is on its way to the user", "ephemeral_id"),
    ("User has a dentist appointment tomorrow at 10am", "temporary"),
    ("User is tired today", "temporary"),
    ("User's flight lands at 14:35", "temporary"),
    ("User asked the assistant to summarise the meeting notes", "one_off_request"),
    ("User wants to know how to reverse a list in Python", "one_off_request"),
    ("User will send the report to the client soon", "one_off_request"),
    ("Container web-1 restarted", "past_event"),
    ("Quarterly revenue figures table", "bare_topic"),
    ("3 files changed, 45 insertions(+)", "command_output"),
    ("pytest collected 214 items", "command_output"),
    ("The build is currently failing", "temporary"),
    ("Weather in Paris is 18 °C and sunny", "temporary"),
    ("The conversation was about Docker volumes", "one_off_request"),
    ("User is looking for a birthday present for her sister", "one_off_request"),
    ("Dev DB contains 40 test users", "local_coordinate"),
]


@pytest.mark.parametrize("text", DURABLE)
def test_durable_facts_pass(text):
    verdict = check(text)
    assert verdict.ok, (verdict.reason, verdict.detail)


@pytest.mark.parametrize("text, reason", TRANSIENT)
def test_transient_items_are_gated_with_their_reason(text, reason):
    verdict = check(text)
    assert verdict.reason == reason, (verdict.reason, verdict.detail)
    assert verdict.reason in REASONS


def test_solutions_keep_errors_commands_and_config_paths():
    text = ("pip install times out with ReadTimeoutError behind the corporate proxy -> set proxy and "
            "index-url in /etc/pip.conf, timeout = 60")
    assert check(text, "solutions").ok
    assert check("pip fails -> fix it", "solutions").reason == "too_short"
    assert check("Build breaks on the laptop -> delete /home/kim/.cache/pip and rerun the build",
                 "solutions").reason == "local_coordinate"


def _grounding(*messages: tuple[str, str], **options):
    return Grounding.from_messages([Message(role, text) for role, text in messages], **options)


def test_ungrounded_inventions_are_gated():
    grounding = _grounding(("user", "I deploy my blog with Hugo to Netlify, and I have a dog."),
                           ("assistant", "Your dog Rex must love walks. You prefer tabs, I assume."))
    assert check("User's blog is built with Hugo and deployed to Netlify", grounding=grounding).ok
    invented_name = check("User's dog is named Rex", grounding=grounding)
    assert invented_name.reason == "ungrounded" and "Rex" in invented_name.detail
    assert check("User prefers tabs over spaces", grounding=grounding).reason == "ungrounded"


def test_grounding_uses_the_embedding_when_words_differ():
    from memctl.embeddings import FakeEmbedder

    grounding = _grounding(("user", "the frontend is vue with pinia stores"), min_overlap=0.9, similarity=0.6,
                           embed=FakeEmbedder().embed)
    assert check("the frontend uses vue with pinia stores", grounding=grounding).ok


def test_grounding_across_languages_checks_names_and_numbers_only():
    grounding = _grounding(("user", "以后回答我都用中文吧。我们的服务都部署在阿里云 ACK 上。"))
    assert check("User prefers replies in Chinese", grounding=grounding).ok
    assert check("User's team deploys on GKE in region EU9", grounding=grounding).reason == "ungrounded"
    assert check("User's team deploys on ACK (Kubernetes)", grounding=grounding).ok


RECALL_BLOCK = ("## What you remember about this\n\n- User prefers dark mode in every editor\n"
                "- The deploy target is Kubernetes\n\n## Approaches that worked before\n\n"
                "- Editor shows light mode after update -> set theme dark in settings.json\n")


def test_recalled_block_is_split_out_and_echoes_are_gated():
    rest, quoted = split_recalled("Context for you:\n" + RECALL_BLOCK + "\nNow answer.")
    assert quoted[:2] == ["User prefers dark mode in every editor", "The deploy target is Kubernetes"]
    assert "dark mode" not in rest and "Now answer." in rest
    grounding = _grounding(("system", RECALL_BLOCK), ("user", "what theme do I like? also my cat is called Miso"))
    echo = check("User prefers dark mode in every editor", grounding=grounding)
    assert echo.reason == "echo"
    # recalled text is not evidence: restating it with other words is not grounded either
    assert check("User likes dark mode in all editors", grounding=grounding).reason in ("echo", "ungrounded")
    assert check("User's cat is called Miso", grounding=grounding).ok


def test_recalled_file_formats():
    assert parse_recalled(RECALL_BLOCK)[0] == "User prefers dark mode in every editor"
    doc = {"memories": [{"text": "a fact here"}], "solutions": [{"text": "x -> y"}]}
    assert parse_recalled(json.dumps(doc)) == ["a fact here", "x -> y"]
    assert parse_recalled("one memory\n- another memory\n") == ["one memory", "another memory"]


@pytest.mark.skipif(not (REPO.parent / "shared/eval/transcripts").is_dir(), reason="eval transcripts not present")
def test_eval_transcripts_meet_the_targets():
    """bench/quality_gate.py with grounding (fake embedder fallback): >= 95 % facts kept, >= 90 % noise dropped."""
    proc = subprocess.run([sys.executable, "bench/quality_gate.py", "--embedder", "fake", "--json"],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert figures["facts"] >= 30 and figures["noise"] >= 40
    assert figures["facts_kept_pct"] >= 95.0 and figures["noise_dropped_pct"] >= 90.0
