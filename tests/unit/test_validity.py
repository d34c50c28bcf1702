"""Temporal validity: `update --supersede` keeps the old fact as a superseded version; load, recall and MCP
search answer with current facts by default and as the store stood with --as-of; show prints the chain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memctl
from memctl.embeddings import FakeEmbedder
from memctl.store import validity

pytestmark = pytest.mark.usefixtures("backend")

V1, V2, V3 = (
    "User's deploy target is Heroku",
    "User's deploy target is fly.io",
    "User's deploy target is a Hetzner VPS",
)


def _changed_twice(cli, tmp_path: Path) -> list[str]:
    """A value set in January, changed in March and in June (of 2026): the ids of its three versions."""
    (tmp_path / "first.jsonl").write_text(
        json.dumps({"id": "deploy0001", "text": V1, "area": "main", "created_at": "2026-01-10T08:00:00Z"}) + "\n"
    )
    assert cli("import", tmp_path / "first.jsonl").code == 0
    first = "deploy0001"
    second = cli("update", first, "--supersede", "--text", V2, "--valid-from", "2026-03-01", "--json")
    assert second.code == 0, second.err
    assert second.json["superseded"] == [first] and second.json["memory"]["metadata"]["supersedes"] == [first]
    middle = second.json["memory"]["id"]
    third = cli("update", middle, "--supersede", "--text", V3, "--valid-from", "2026-06-01T09:30:00+02:00", "--json")
    assert third.code == 0, third.err
    return [first, middle, third.json["memory"]["id"]]


def _answer(cli, *args: str, subdir: str | None = None) -> list[str]:
    result = cli(*(["-s", subdir] if subdir else []), "load", "deploy target", "-t", "0", "--json", *args)
    return [h["text"] for h in result.json["results"]] if result.code == 0 else []


def test_a_value_changed_twice_answers_with_each_value_at_its_date(cli, home: Path, tmp_path: Path):
    ids = _changed_twice(cli, tmp_path)
    assert _answer(cli, "--as-of", "2026-01-01") == []  # nothing was known yet
    assert _answer(cli, "--as-of", "2026-02-01") == [V1]
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        version = validity.superseded_version(store, ids[0])
        assert version is not None and version.metadata["valid_to"] == "2026-03-01T00:00:00.000+00:00"
        assert version.metadata["valid_from"] == "2026-01-10T08:00:00.000+00:00"
        assert version.metadata["superseded_by"] == ids[1]

    assert _answer(cli) == [V3]  # current facts only, by default
    assert _answer(cli, "--as-of", "2026-04-15") == [V2]
    assert _answer(cli, "--as-of", "2026-06-01T07:29:59Z") == [V2]  # 09:30+02:00 is 07:30 UTC
    assert _answer(cli, "--as-of", "2026-06-01T07:30:00Z") == [V3]
    assert [m["text"] for m in cli("list", "--json").json["items"]] == [V3]  # superseded versions are not listed
    doc = cli("load", "deploy target", "-t", "0", "--as-of", "2026-04-15", "--json").json
    assert doc["as_of"] == "2026-04-15T00:00:00.000+00:00" and doc["results"][0]["id"] == ids[1]

    recalled = cli("recall", "where does the user deploy", "-t", "0", "--as-of", "2026-04-15", "--format", "json")
    assert [m["text"] for m in recalled.json["memories"]] == [V2]
    assert [m["text"] for m in cli("recall", "deploy", "-t", "0", "--format", "json").json["memories"]] == [V3]


def test_show_and_history_show_the_chain(cli, tmp_path: Path):
    ids = _changed_twice(cli, tmp_path)
    shown = cli("show", ids[2], "--json").json
    assert shown["current"] and [v["id"] for v in shown["versions"]] == [ids[1], ids[0]]
    old = cli("show", ids[0], "--json")
    assert old.code == 0 and not old.json["current"] and old.json["memory"]["text"] == V1
    plain = cli("show", ids[2]).out
    assert f"supersedes: {ids[1]}" in plain and V2 in plain
    assert "status: superseded" in cli("show", ids[1]).out
    ops = [e["op"] for e in cli("history", ids[0], "--json").json["entries"]]
    assert ops[0] == "supersede"
    assert cli("show", "nosuchid").code == 3


def test_supersede_refuses_bad_input_and_changes_nothing(cli, home: Path):
    first = cli("save", V1, "--json").json["ids"][0]
    assert cli("update", first, "--supersede").code == 2  # no --text
    assert cli("update", first, "--supersede", "--text", V2, "--valid-from", "soon").code == 2
    assert cli("update", first, "--supersede", "--text", V2, "--valid-from", "1999-01-01").code == 2  # before it began
    assert cli("update", "nosuchid", "--supersede", "--text", V2).code == 3
    assert cli("load", "deploy", "-t", "0", "--as-of", "yesterday").code == 2
    assert [m["text"] for m in cli("list", "--json").json["items"]] == [V1]


def test_restore_brings_a_superseded_version_back(cli, tmp_path: Path):
    ids = _changed_twice(cli, tmp_path)
    assert cli("restore", ids[0]).code == 0
    assert sorted(m["text"] for m in cli("list", "--json").json["items"]) == sorted([V1, V3])


def test_prune_removes_superseded_versions_older_than_a_duration(cli, tmp_path: Path):
    ids = _changed_twice(cli, tmp_path)  # V1 ended 2026-03-01, V2 ended 2026-06-01 (both long before "now")
    assert cli("prune", "--superseded-for", "1d", "--older-than", "1d", "--yes").code == 2  # one kind at a time
    preview = cli("prune", "--superseded-for", "1d", "--json")  # no terminal and no --yes: a dry run
    assert preview.json["dry_run"] and [m["id"] for m in preview.json["pruned"]] == ids[:2]
    assert cli("prune", "--superseded-for", "100000d", "--yes", "--json").json["count"] == 0
    done = cli("prune", "--superseded-for", "1d", "--yes", "--json")
    assert done.code == 0 and not done.json["dry_run"] and done.json["count"] == 2
    assert cli("show", ids[2], "--json").json["versions"] == []
    assert _answer(cli, "--as-of", "2026-04-15") == []  # the fact as it stood then is gone for good
    assert _answer(cli) == [V3]


def test_mcp_search_and_recall_take_as_of(cli, home: Path, tmp_path: Path):
    import anyio

    from memctl.mcp.pool import StorePool
    from memctl.mcp.scope import Scope
    from memctl.mcp.server import build_server

    _changed_twice(cli, tmp_path)

    def call(name: str, arguments: dict) -> dict:
        pool = StorePool(str(home), None, {})
        try:
            result = anyio.run(build_server(pool, Scope.fixed("default")).call_tool, name, arguments)
        finally:
            pool.close()
        return result[1] if isinstance(result, tuple) else result.structured_content

    then = call("memory_search", {"query": "deploy target", "threshold": 0, "as_of": "2026-04-15"})
    assert [h["text"] for h in then["results"]] == [V2] and then["as_of"].startswith("2026-04-15")
    now = call("memory_search", {"query": "deploy target", "threshold": 0})
    assert [h["text"] for h in now["results"]] == [V3] and now["as_of"] is None
    recalled = call("memory_recall", {"message": "deploy target", "threshold": 0, "as_of": "2026-02-01"})
    assert [m["text"] for m in recalled["memories"]] == [V1]


@pytest.mark.parametrize("vectors", [False, True], ids=["texts", "vectors"])
def test_export_import_round_trip_keeps_validity(cli, tmp_path: Path, vectors: bool):
    ids = _changed_twice(cli, tmp_path)
    out = tmp_path / "e.jsonl"
    assert cli("export", "-o", out, *(["--vectors"] if vectors else [])).code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["memctl_export"] == 2 and lines[0]["superseded"] == 2 and lines[0]["count"] == 3
    assert [r["id"] for r in lines[1:] if r.get("superseded")] == ids[:2]
    moved = cli("-s", "copy", "import", out, "--json")
    assert moved.code == 0 and moved.json["imported"] == 1 and moved.json["superseded"] == 2
    for moment in ("2026-02-01", "2026-04-15", "2026-06-02"):
        assert _answer(cli, "--as-of", moment) == _answer(cli, "--as-of", moment, subdir="copy")
    assert _answer(cli, subdir="copy") == [V3]
    assert cli("-s", "copy", "show", ids[1], "--json").json == {**cli("show", ids[1], "--json").json, "subdir": "copy"}
    again = cli("-s", "copy", "import", out, "--json")  # nothing twice
    assert again.json["imported"] == 0 and again.json["superseded"] == 0
    exported_again = tmp_path / "again.jsonl"
    assert cli("-s", "copy", "export", "-o", exported_again, *(["--vectors"] if vectors else [])).code == 0
    assert exported_again.read_text().splitlines()[1:] == out.read_text().splitlines()[1:]  # the same records


def test_agent_zero_export_writes_current_facts_only(cli, tmp_path: Path):
    _changed_twice(cli, tmp_path)
    target = tmp_path / "a0"
    result = cli("export-agent-zero", target, "--json")
    assert result.code == 0, result.err
    assert result.json["count"] == 1
