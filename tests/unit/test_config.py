"""Configuration layers and validation."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from memctl.config import load_config
from memctl.errors import ConfigError
from tests.conftest import REPO


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


@pytest.mark.parametrize(
    "content, words",
    [
        ("search_limit: many\n", "search_limit"),
        ("serch_limit: 3\n", "unknown config key 'serch_limit'"),
        ("embedding_cache: 1\n", "embedding_cache"),
        ("- a list\n", "mapping"),
        ("search_limit: [\n", "cannot read"),
    ],
)
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


def test_documented_non_key_variables_are_not_config_keys():
    environ = {
        name: "/somewhere"
        for name in ("MEMCTL_HOME", "MEMCTL_STORE", "MEMCTL_CONFIG", "MEMCTL_SUBDIR", "MEMCTL_CACHE_DIR")
    }
    assert load_config(None, environ=environ)["search_limit"] == 10


# -- every layer, key by key; and `memctl config` ------------------------------------------------


def test_each_layer_overrides_the_one_below_for_one_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    keys = ("search_limit", "recall_memories_max_result", "recall_solutions_max_result", "recall_history_messages")
    user = tmp_path / "user.yaml"
    user.write_text("".join(f"{key}: {11 + i}\n" for i, key in enumerate(keys)))
    monkeypatch.setenv("MEMCTL_CONFIG", str(user))
    store = tmp_path / "store"
    store.mkdir()
    (store / "config.yaml").write_text("".join(f"{key}: {22 + i}\n" for i, key in enumerate(keys[1:])))
    environ = {"MEMCTL_RECALL_SOLUTIONS_MAX_RESULT": "33", "MEMCTL_RECALL_HISTORY_MESSAGES": "34"}
    config = load_config(store, overrides={"recall_history_messages": 44}, environ=environ)
    got = {key: (config[key], config.sources[key]) for key in ("lock_timeout", *keys)}
    assert got == {
        "lock_timeout": (30, "default"),
        "search_limit": (11, str(user)),
        "recall_memories_max_result": (22, str(store / "config.yaml")),
        "recall_solutions_max_result": (33, "env"),
        "recall_history_messages": (44, "override"),
    }


def test_internal_settings_come_from_programs_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys):
    """Batch sizes and fitted thresholds are not configuration (memctl/config/internal.py): a file or
    MEMCTL_<KEY> naming one is warned about and ignored; overrides and MEMCTL_INTERNAL_<KEY> set them."""
    from memctl.config import INTERNAL, _warned

    _warned.clear()
    user = tmp_path / "user.yaml"
    user.write_text("forget_batch_size: 12\nsearch_limit: 7\n")
    monkeypatch.setenv("MEMCTL_CONFIG", str(user))
    config = load_config(None, environ={"MEMCTL_LIST_PAGE_SIZE": "33"})
    assert config["forget_batch_size"] == INTERNAL["forget_batch_size"] and config["search_limit"] == 7
    assert config["list_page_size"] == INTERNAL["list_page_size"]
    err = capsys.readouterr().err
    assert "'forget_batch_size' is an internal setting now" in err and "'list_page_size'" in err
    config = load_config(None, overrides={"forget_batch_size": 5}, environ={"MEMCTL_INTERNAL_LIST_PAGE_SIZE": "9"})
    assert (config["forget_batch_size"], config["list_page_size"]) == (5, 9)
    with pytest.raises(ConfigError, match="must be in"):
        load_config(None, overrides={"forget_batch_size": 0}, environ={})
    with pytest.raises(ConfigError, match="not an internal setting"):
        load_config(None, environ={"MEMCTL_INTERNAL_SEARCH_LIMIT": "3"})


def test_doctor_limits_take_the_retired_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    user = tmp_path / "user.yaml"
    user.write_text("doctor_limits: {pending: 5}\ndoctor_max_junk_share: 0.2\n")
    monkeypatch.setenv("MEMCTL_CONFIG", str(user))
    config = load_config(None, environ={"MEMCTL_DOCTOR_MIN_RECALL": "0.5"})
    assert config["doctor_limits"] == {"pending": 5, "junk_share": 0.2, "recall_at_k": 0.5}
    with pytest.raises(ConfigError, match="has no figure 'junk'"):
        load_config(None, overrides={"doctor_limits": {"junk": 0.2}}, environ={})
    with pytest.raises(ConfigError, match=r"junk_share must be in \[0, 1\]"):
        load_config(None, overrides={"doctor_limits": {"junk_share": 2}}, environ={})


def test_config_show_json_says_where_each_value_comes_from(
    cli, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    user = tmp_path / "no-user-config.yaml"  # the file conftest points MEMCTL_CONFIG at
    user.write_text("search_limit: 7\n")
    (home / "default").mkdir(parents=True)
    (home / "default" / "config.yaml").write_text("search_threshold: 0.65\n")
    monkeypatch.setenv("MEMCTL_FORGET_THRESHOLD", "0.9")
    doc = cli("config", "show", "--json").json
    assert doc["values"] == {
        "embedding_provider": {"value": "fake", "source": "env MEMCTL_EMBEDDING_PROVIDER"},
        "search_limit": {"value": 7, "source": str(user)},
        "search_threshold": {"value": 0.65, "source": str(home / "default" / "config.yaml")},
        "forget_threshold": {"value": 0.9, "source": "env MEMCTL_FORGET_THRESHOLD"},
    }
    assert doc["effective"] is False and doc["files"]["store"] == str(home / "default" / "config.yaml")
    effective = cli("config", "show", "--effective", "--json").json["values"]
    assert effective["lock_timeout"] == {"value": 30, "source": "default"}
    assert set(effective) == set(yaml.safe_load((REPO / "default_config.yaml").read_text()))
    other = cli("config", "show", "--json", "-s", "other").json["values"]
    assert "search_threshold" not in other and other["search_limit"]["value"] == 7
    assert cli("config", "get", "search_limit", "--json").json == {
        "subdir": "default",
        "key": "search_limit",
        "value": 7,
        "source": str(user),
    }
    assert cli("config", "show").code == 0


def test_config_show_refuses_a_wrong_type_in_the_store_file(cli, home: Path):
    (home / "default").mkdir(parents=True)
    (home / "default" / "config.yaml").write_text("search_limit: 5\nlock_timeout: soon\n")
    result = cli("config", "show", "--json")
    assert result.code == 2
    message = result.json["error"]["message"]
    assert "lock_timeout" in message and str(home / "default" / "config.yaml") in message


def test_config_set_round_trip_keeps_other_keys_and_comments(cli, home: Path, tmp_path: Path):
    user = tmp_path / "no-user-config.yaml"
    user.write_text(
        "# my settings\nsearch_limit: 3  \n# the folders I import\nknowledge_dirs:\n  - ~/notes\nlock_timeout: 12\n"
    )
    doc = cli("config", "set", "search_limit", "25", "--json").json
    assert (doc["scope"], doc["path"], doc["value"], doc["previous"]) == ("user", str(user), 25, 3)
    cli("config", "set", "knowledge_dirs", "[~/notes, ~/docs]")
    cli("config", "set", "search_threshold", "0.8")
    text = user.read_text()
    assert "# my settings" in text and "# the folders I import" in text
    assert yaml.safe_load(text) == {
        "search_limit": 25,
        "knowledge_dirs": ["~/notes", "~/docs"],
        "lock_timeout": 12,
        "search_threshold": 0.8,
    }
    assert cli("config", "get", "search_limit", "--json").json["value"] == 25
    assert cli("config", "get", "search_threshold", "--json").json["source"] == str(user)

    store_doc = cli("config", "set", "search_limit", "4", "--scope", "store", "-s", "agent1", "--json").json
    assert store_doc["path"] == str(home / "agent1" / "config.yaml")
    assert cli("config", "get", "search_limit", "-s", "agent1", "--json").json == {
        "subdir": "agent1",
        "key": "search_limit",
        "value": 4,
        "source": str(home / "agent1" / "config.yaml"),
    }
    assert cli("config", "get", "search_limit", "--json").json["value"] == 25  # other stores keep the user value
    cli("config", "set", "utility_model", "null", "--scope", "store", "-s", "agent1")
    assert yaml.safe_load((home / "agent1" / "config.yaml").read_text()) == {"search_limit": 4, "utility_model": None}


def test_config_set_works_beside_keys_of_earlier_releases(cli, tmp_path: Path):
    """An old file holding an internal or a retired key: warned about, kept, and `config set` still edits it."""
    from memctl.config import _warned

    _warned.clear()  # warned once per process
    user = tmp_path / "no-user-config.yaml"
    user.write_text("forget_batch_size: 3\ndoctor_max_pending: 4\n")
    assert cli("config", "set", "search_limit", "6").code == 0
    assert yaml.safe_load(user.read_text()) == {"forget_batch_size": 3, "doctor_max_pending": 4, "search_limit": 6}
    got = cli("config", "get", "doctor_limits", "--json")
    assert got.json["value"] == {"pending": 4} and "'forget_batch_size' is an internal setting" in got.err
    refused = cli("config", "set", "forget_batch_size", "5", "--json")
    assert refused.code == 2 and "internal setting" in refused.json["error"]["message"]


@pytest.mark.parametrize(
    "args, words",
    [
        (["search_limit", "many"], "search_limit"),
        (["serch_limit", "3"], "unknown config key 'serch_limit'"),
        (["embedding_cache", "1"], "embedding_cache"),
        (["search_limit", "3", "--scope", "system"], "--scope"),
    ],
)
def test_config_set_refuses_bad_values_and_changes_nothing(cli, tmp_path: Path, args: list[str], words: str):
    user = tmp_path / "no-user-config.yaml"
    user.write_text("search_limit: 3\n")
    result = cli("config", "set", *args, "--json")
    assert result.code == 2 and words in result.json["error"]["message"]
    assert user.read_text() == "search_limit: 3\n"


def test_config_path(cli, home: Path, tmp_path: Path):
    doc = cli("config", "path", "--json", "-s", "projects/web").json
    assert doc["user"] == str(tmp_path / "no-user-config.yaml")
    assert doc["store"] == str(home / "projects" / "web" / "config.yaml")
    assert doc["defaults"].endswith("default_config.yaml") and doc["exists"]["defaults"] is True
    assert doc["exists"]["user"] is True  # conftest writes an empty one


def test_defaults_are_cached_as_json_and_a_damaged_cache_falls_back_to_the_yaml(tmp_path, monkeypatch):
    from memctl import config

    monkeypatch.setenv("MEMCTL_CACHE_DIR", str(tmp_path))
    shipped = yaml.safe_load(config.resource_path("default_config.yaml").read_text())
    config.defaults.cache_clear()
    try:
        assert config.defaults() == shipped
        [cached] = (tmp_path / "config").glob("default_config-*.json")
        config.defaults.cache_clear()
        with monkeypatch.context() as patch:
            patch.setattr(config, "_read_yaml", lambda path: pytest.fail("the YAML was parsed again"))
            assert config.defaults() == shipped  # read back from the JSON
        cached.write_text("{not json")
        config.defaults.cache_clear()
        assert config.defaults() == shipped
    finally:
        config.defaults.cache_clear()
