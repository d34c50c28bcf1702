"""Configuration layers and validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from memctl.config import load_config
from memctl.errors import ConfigError


def test_defaults_and_env_override(monkeypatch: pytest.MonkeyPatch):
    config = load_config(None, environ={"MEMCTL_SEARCH_THRESHOLD": "0.8", "MEMCTL_HOME": "/x"})
    assert config["search_threshold"] == 0.8 and config.sources["search_threshold"] == "env"
    assert config["search_limit"] == 10 and config.sources["search_limit"] == "default"


def test_layers_merge_key_by_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    user = tmp_path / "user.yaml"
    user.write_text("search_limit: 20\nsearch_threshold: 0.6\n")
    monkeypatch.setenv("MEMCTL_CONFIG", str(user))
    store = tmp_path / "store"
    store.mkdir()
    (store / "config.yaml").write_text("search_threshold: 0.65\n")
    config = load_config(store, overrides={"forget_batch_size": 7}, environ={})
    assert config["search_limit"] == 20 and config.sources["search_limit"] == str(user)
    assert config["search_threshold"] == 0.65 and config.sources["search_threshold"] == str(store / "config.yaml")
    assert config["forget_batch_size"] == 7 and config["lock_timeout"] == 30


@pytest.mark.parametrize("content, words", [
    ("search_limit: many\n", "search_limit"),
    ("serch_limit: 3\n", "unknown config key 'serch_limit'"),
    ("embedding_cache: 1\n", "embedding_cache"),
    ("- a list\n", "mapping"),
    ("search_limit: [\n", "cannot read"),
])
def test_bad_store_config_names_file_and_key(cli, home: Path, content: str, words: str):
    (home / "default").mkdir(parents=True)
    (home / "default" / "config.yaml").write_text(content)
    result = cli("list", "--json")
    assert result.code == 2
    message = result.json["error"]["message"]
    assert words in message and str(home / "default" / "config.yaml") in message


def test_bad_env_value(cli, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MEMCTL_SEARCH_LIMIT", "lots")
    result = cli("list")
    assert result.code == 2 and "MEMCTL_SEARCH_LIMIT" in result.err


def test_unknown_env_key_is_an_error():
    with pytest.raises(ConfigError, match="unknown config key"):
        load_config(None, environ={"MEMCTL_SEARCH_LIMT": "3"})
