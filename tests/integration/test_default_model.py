"""multilingual-e5-small-q4 is the default model of new stores; a store keeps the model it records.

Stores made while all-MiniLM-L6-v2 was the default must open, search and grow with MiniLM with no setting
and no re-embedding; an embedding_model set explicitly still wins (another model means `memctl reindex`).
Tests that take `backend` run on both backends. Real packaged models: marked integration.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import memctl
from memctl.config import load_config
from memctl.embeddings import MINILM_MODEL, MULTILINGUAL_MODEL, RECORDED_SOURCE, with_recorded_model

pytestmark = pytest.mark.integration

DARK = "User prefers dark mode in every editor"
KUBE = "The deploy target is Kubernetes"
QUESTION = "what editor theme does the user prefer"


@pytest.fixture
def real(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMCTL_EMBEDDING_PROVIDER")  # the real local models, as a user has them


def _old_minilm_store(home: Path, monkeypatch: pytest.MonkeyPatch, subdir: str = "old") -> list[str]:
    """A store as the release that had MiniLM as its default made it (no setting then)."""
    monkeypatch.setenv("MEMCTL_EMBEDDING_MODEL", MINILM_MODEL)
    with memctl.open_store(home, subdir) as store:
        ids = store.add([DARK, KUBE])
        assert store.model_info() == {"provider": "local", "model": MINILM_MODEL, "dimension": 384}
    monkeypatch.delenv("MEMCTL_EMBEDDING_MODEL")
    return ids


def test_the_shipped_default_is_multilingual_e5(real):
    config = load_config(None, {})
    assert config["embedding_provider"] == "local" and config["embedding_model"] == MULTILINGUAL_MODEL
    assert config.sources["embedding_model"] == "default"


def test_a_new_store_records_multilingual_e5_with_384_dimensions(backend, real, home: Path, cli):
    with memctl.open_store(home, "new") as store:
        ids = store.add([DARK, KUBE])
        assert store.model_info() == {"provider": "local", "model": MULTILINGUAL_MODEL, "dimension": 384}
        assert [h.id for h in store.search(QUESTION)] == [ids[0]]
    if backend == "embedded":
        recorded = json.loads((home / "new" / "embedding.json").read_text())
        assert recorded == {"provider": "local", "model": MULTILINGUAL_MODEL, "dimension": 384}


def test_an_old_minilm_store_opens_and_searches_with_no_setting(backend, real, home: Path, cli, monkeypatch):
    ids = _old_minilm_store(home, monkeypatch)
    assert "MEMCTL_EMBEDDING_MODEL" not in os.environ
    with memctl.open_store(home, "old") as store:
        hits = store.search(QUESTION)
        assert [h.id for h in hits] == [ids[0]]
        assert store.embedder.info.model == MINILM_MODEL
        assert store.config["embedding_model"] == MINILM_MODEL
        assert store.config.sources["embedding_model"] == RECORDED_SOURCE
        more = store.add(["The staging cluster runs in Frankfurt"])  # grows with the same model
        assert store.model_info() == {"provider": "local", "model": MINILM_MODEL, "dimension": 384}
        assert store.get_one(more[0]).text.startswith("The staging cluster")
    loaded = cli("-s", "old", "load", QUESTION, "--json")  # the CLI, no flag
    assert loaded.code == 0, loaded.err
    assert [r["id"] for r in loaded.json["results"]] == [ids[0]]
    if backend == "embedded":
        recorded = json.loads((home / "old" / "embedding.json").read_text())
        assert recorded == {"provider": "local", "model": MINILM_MODEL, "dimension": 384}


def test_an_explicit_model_wins_and_a_different_one_means_reindex(backend, real, home: Path, cli, monkeypatch):
    ids = _old_minilm_store(home, monkeypatch)
    monkeypatch.setenv("MEMCTL_EMBEDDING_MODEL", MULTILINGUAL_MODEL)  # set explicitly: not the recorded one
    with memctl.open_store(home, "old") as store:
        with pytest.raises(memctl.ModelMismatchError) as refused:
            store.search(QUESTION)
        assert "reindex" in (refused.value.hint or "")
        assert store.reindex() == 2  # the way to move an old store to multilingual-e5
    monkeypatch.delenv("MEMCTL_EMBEDDING_MODEL")
    with memctl.open_store(home, "old") as store:  # no setting: it now records (and keeps) e5
        assert store.model_info() == {"provider": "local", "model": MULTILINGUAL_MODEL, "dimension": 384}
        assert [h.id for h in store.search(QUESTION)] == [ids[0]]
    monkeypatch.setenv("MEMCTL_EMBEDDING_MODEL", MINILM_MODEL)  # and MiniLM set explicitly makes MiniLM stores
    with memctl.open_store(home, "pinned") as store:
        store.add([DARK])
        assert store.model_info() == {"provider": "local", "model": MINILM_MODEL, "dimension": 384}


def test_the_mcp_pool_serves_an_old_minilm_store_with_its_model(real, home: Path, monkeypatch):
    from memctl.mcp.pool import StorePool

    ids = _old_minilm_store(home, monkeypatch)
    pool = StorePool(str(home), None, {})
    try:
        with pool.use("old") as store:
            assert store.embedder.info.model == MINILM_MODEL
            assert [h.id for h in store.search(QUESTION)] == [ids[0]]
        with pool.use("new", create=True) as store:
            store.add([DARK])
            assert store.embedder.info.model == MULTILINGUAL_MODEL
            assert store.model_info()["model"] == MULTILINGUAL_MODEL
    finally:
        pool.close()


def test_with_recorded_model_applies_only_to_a_default_local_model():
    recorded = {"provider": "local", "model": MINILM_MODEL, "dimension": 384}
    default = load_config(None, {"embedding_provider": "local"})
    adopted = with_recorded_model(default, recorded)
    assert adopted["embedding_model"] == MINILM_MODEL and adopted.sources["embedding_model"] == RECORDED_SOURCE
    assert default["embedding_model"] == MULTILINGUAL_MODEL  # the caller's config is not changed
    assert with_recorded_model(default, None) is default  # nothing recorded: the default
    explicit = load_config(None, {"embedding_provider": "local", "embedding_model": MULTILINGUAL_MODEL})
    assert with_recorded_model(explicit, recorded) is explicit  # set explicitly: it wins
    litellm = {"provider": "litellm", "model": "openai/text-embedding-3-small", "dimension": 1536}
    assert with_recorded_model(default, litellm) is default  # another provider: check_model's business
    fake = load_config(None, {})  # MEMCTL_EMBEDDING_PROVIDER=fake in the tests' environment
    assert with_recorded_model(fake, recorded) is fake
