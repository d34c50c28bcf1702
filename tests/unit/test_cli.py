"""The CLI end to end (in-process, fake embedder): arguments, exit codes and the --json contract.

Tests that take `backend` run on both backends (folder stores, and PostgreSQL through MEMCTL_STORE).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.conftest import stored_count

MEMORY_KEYS = {"id", "text", "area", "created_at", "updated_at", "metadata"}


def _save(cli, text: str, *extra: str) -> str:
    result = cli("save", text, *extra, "--json")
    assert result.code == 0, result.err
    return result.json["ids"][0]


def test_save_prints_id_and_load_finds_it(backend, cli):
    result = cli("save", "User prefers dark mode in every editor")
    assert result.code == 0 and len(result.out.strip()) == 10
    loaded = cli("load", "User prefers dark mode in every editor", "--json")
    assert loaded.code == 0
    doc = loaded.json
    assert set(doc) == {"subdir", "query", "mode", "threshold", "limit", "as_of", "count", "results"}
    assert doc["as_of"] is None  # current facts (load --as-of: the moment asked for)
    assert doc["count"] == 1 and doc["results"][0]["id"] == result.out.strip()
    assert set(doc["results"][0]) == MEMORY_KEYS | {"score"}


def test_save_from_stdin_and_file_with_meta(backend, cli, tmp_path: Path):
    note = tmp_path / "note.txt"
    note.write_text("The staging database is called orion\n")
    from_file = _save(
        cli,
        f"@{note}",
        "--meta",
        'tags=["db", "staging"]',
        "--meta",
        "priority=2",
        "--meta",
        "owner=ops",
        "--area",
        "fragments",
    )
    from_stdin = cli("save", "-", "--json", input="Deploys happen on Tuesdays\n").json["ids"][0]
    shown = cli("show", from_file, "--json").json["memory"]
    assert shown["text"] == "The staging database is called orion" and shown["area"] == "fragments"
    assert shown["metadata"] == {"tags": ["db", "staging"], "priority": 2, "owner": "ops"}
    assert cli("show", from_stdin, "--json").json["memory"]["text"] == "Deploys happen on Tuesdays"
    literal = _save(cli, "@@handle is my nickname")
    assert cli("show", literal, "--json").json["memory"]["text"] == "@handle is my nickname"


@pytest.mark.parametrize(
    "args, code, words",
    [
        (["save", "@/no/such/file"], 2, "does not exist"),
        (["save", "  "], 2, "empty"),
        (["save", "x", "--area", "notes"], 2, "unknown area"),
        (["save", "x", "--meta", "novalue"], 2, "key=value"),
        (["save", "x", "--meta", "id=1"], 2, "reserved"),
        (["show", "nosuchid"], 3, "no memory with id"),
        (["update", "nosuchid", "--text", "x"], 3, "no memory with id"),
        (["update", "nosuchid"], 2, "nothing to update"),
        (["load", "x", "--threshold", "1.5"], 2, "threshold"),
        (["--subdir", "../escape", "list"], 2, "subdir"),
        (["frobnicate"], 2, "No such command"),
        (["import", "/no/such.jsonl"], 2, "does not exist"),
    ],
)
def test_errors_have_messages_and_exit_codes(backend, cli, args, code, words):
    _save(cli, "a memory, so the store exists")
    result = cli(*args)
    assert result.code == code, (result.out, result.err)
    assert words.lower() in result.err.lower()
    as_json = cli(*args, "--json")
    assert as_json.code == code
    error = as_json.json["error"]
    assert error["exit_code"] == code and words.lower() in error["message"].lower() + (error["hint"] or "").lower()


def test_load_nothing_matched_is_exit_3_with_empty_results(backend, cli):
    _save(cli, "apples are red")
    result = cli("load", "quantum chromodynamics lattice", "--json")
    assert result.code == 3 and result.json["results"] == [] and result.json["count"] == 0


def test_global_options_anywhere(cli, home: Path):
    _save(cli, "agent one fact", "--subdir", "agent1")
    assert (home / "agent1" / "memories.sqlite").exists()
    assert cli("--subdir", "agent1", "--json", "list").json["total"] == 1
    assert cli("list", "--json", "-s", "agent1").json["total"] == 1
    assert cli("list", "--json").code == 3  # no store "default": said, not created
    # after `--` everything is text, even if it looks like an option
    mid = cli("--json", "save", "--", "--json").json["ids"][0]
    assert cli("show", mid, "--json").json["memory"]["text"] == "--json"


HOSTILE = [
    "__import__('os').system('touch /tmp/pwned')",
    "().__class__.__bases__[0].__subclasses__()",
    "tags.__class__",
    "area.upper() == 'MAIN'",
    "tags[0] == 'x'",
    "open('/etc/passwd')",
    "len(tags) > 1",
    "lambda: 1",
    "[x for x in tags]",
    "(x for x in tags)",
    "{1: 2}",
    "{1, 2}",
    "f'{area}' == 'main'",
    "(y := 1)",
    "1 if area else 2",
    "priority + 1 > 2",
    "2 ** 999999",
    "'a' * 10**9",
    "__builtins__",
    "_private == 1",
    "area == 'main'\n",
    "area == 'main'\x00",
    "area\u200b == 'main'",
    "\uff45\uff56\uff41\uff4c('1')",
    "area == 'main' and __debug__",
    "area is None",
    "*tags",
    "b'x' == area",
    "...",
    "await area",
    "area; area",
    "import os",
    "area = 'main'",
    "'x' * 501",
    "(" * 50 + "area" + ")" * 50,
    "area in [" + ",".join(str(i) for i in range(150)) + "]",
    "globals()",
    "getattr(area, 'x')",
    "area.__dict__",
    "\u202earea == 'main'",
    "",
    "   ",
    "area == 'main' # comment",
    "area\t== 'main'",
    "x" * 600,
]


def test_hostile_filters_exit_2_and_store_unchanged(cli, home: Path):
    assert len(set(HOSTILE)) >= 30
    ids = [_save(cli, f"memory {i}") for i in range(3)]
    db = home / "default" / "memories.sqlite"
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    for expr in HOSTILE:
        for command in (["load", "memory"], ["list"], ["forget", "memory", "--yes"]):
            result = cli(*command, "--filter", expr, "--json")
            assert result.code == 2, (expr, command, result.out)
            assert "filter" in result.json["error"]["message"]
    assert not Path("/tmp/pwned").exists()
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert sorted(m["id"] for m in cli("list", "--json").json["items"]) == sorted(ids)


def test_list_pagination_and_filter(backend, cli):
    ids = [_save(cli, f"memory {i}", "--meta", f"n={i}") for i in range(7)]
    page1 = cli("list", "--limit", "3", "--json").json
    assert page1["total"] == 7 and [m["id"] for m in page1["items"]] == ids[::-1][:3]
    page3 = cli("list", "--limit", "3", "--page", "3", "--json").json
    assert [m["id"] for m in page3["items"]] == [ids[0]]
    filtered = cli("list", "--filter", "n % 2 == 0", "--json")
    assert filtered.code == 2
    odd = cli("list", "--filter", "n in [1, 3, 5]", "--json").json
    assert {m["id"] for m in odd["items"]} == {ids[1], ids[3], ids[5]}


def test_update_text_and_meta_keeps_history(backend, cli):
    mid = _save(cli, "The API runs on port 8080", "--meta", 'tags=["api"]')
    doc = cli("update", mid, "--text", "The API runs on port 9090", "--meta", "owner=ops", "--json").json
    assert doc["reembedded"] is True and doc["memory"]["metadata"] == {"tags": ["api"], "owner": "ops"}
    assert cli("update", mid, "--unset", "tags", "--json").json["memory"]["metadata"] == {"owner": "ops"}
    history = cli("history", mid, "--json").json["entries"]
    assert [e["op"] for e in history] == ["update", "update", "add"]
    assert history[1]["old_text"] == "The API runs on port 8080" and history[1]["new_text"].endswith("9090")


def test_delete_dry_run_cascade_and_missing(backend, cli, store):
    parent = store.add(["parent fact"])[0]
    child = store.add(["child fact"], derived_from={"consolidated_from": [parent]})[0]
    store.close()
    dry = cli("delete", parent, "--dry-run", "--json").json
    assert dry == {"subdir": "default", "dry_run": True, "deleted": [parent], "cascaded": [child], "missing": []}
    assert cli("list", "--json").json["total"] == 2
    real = cli("delete", parent, "ghost", "--json")
    assert real.code == 0 and real.json["deleted"] == [parent] and real.json["cascaded"] == [child]
    assert real.json["missing"] == ["ghost"]
    assert cli("delete", "ghost", "--json").code == 3


def test_forget_deletes_in_batches_until_exhausted(backend, cli, store, monkeypatch):
    store.add([f"the build cache lives in gradle folder {i}" for i in range(250)])
    keep = store.add(["completely unrelated zebra"])[0]
    store.close()
    monkeypatch.setenv("MEMCTL_INTERNAL_FORGET_BATCH_SIZE", "40")
    dry = cli("forget", "the build cache lives in gradle folder", "-t", "0.75", "--dry-run", "--json").json
    assert dry["count"] == 250 and dry["dry_run"] is True
    assert cli("list", "--json").json["total"] == 251
    assert cli("forget", "the build cache lives in gradle folder", "-t", "0.75", "--json").json["dry_run"]  # no TTY
    real = cli("forget", "the build cache lives in gradle folder", "-t", "0.75", "--yes", "--json").json
    assert real["count"] == 250 and {m["id"] for m in real["deleted"]} == {m["id"] for m in dry["deleted"]}
    assert [m["id"] for m in cli("list", "--json").json["items"]] == [keep]
    assert cli("forget", "the build cache lives in gradle folder", "-t", "0.75", "--json").code == 3


def test_forget_exact(backend, cli):
    a = _save(cli, "Temporary marker XYZ")
    _save(cli, "Temporary marker XYZ and more")
    doc = cli("forget", "Temporary marker XYZ", "--exact", "--yes", "--json").json
    assert [m["id"] for m in doc["deleted"]] == [a]


def test_subdirs_lists_projects(backend, cli, home: Path):
    _save(cli, "x", "--subdir", "agent1")
    _save(cli, "y", "--subdir", "projects/alpha")
    _save(cli, "z", "--subdir", "projects/alpha")
    doc = cli("subdirs", "--json").json
    assert (doc["root"] == str(home)) if backend == "embedded" else doc["root"].startswith("postgresql://")
    assert [(s["name"], s["count"]) for s in doc["subdirs"]] == [("agent1", 1), ("projects/alpha", 2)]


@pytest.mark.smoke
@pytest.mark.parametrize("vectors", [False, True])
def test_export_import_round_trip(backend, cli, store, tmp_path: Path, vectors: bool):
    store.add(["alpha fact", "beta fact"], area="fragments", metadata=[{"tags": ["a"], "n": 1}, {"x": None}])
    store.add(["gamma solution"], area="solutions", metadata=[{"nested": {"k": [1, 2]}}])
    store.close()
    out = tmp_path / "export.jsonl"
    flags = ["--vectors"] if vectors else []
    assert cli("export", "-o", out, *flags, "--json").json["count"] == 3
    header = json.loads(out.read_text().splitlines()[0])
    assert header["memctl_export"] == 1 and header["vectors"] is vectors
    result = cli("import", out, "--subdir", "copy", "--json")
    assert result.code == 0, result.err
    assert result.json["imported"] == 3 and result.json["reembedded"] == (0 if vectors else 3)
    original = sorted(cli("list", "--json").json["items"], key=lambda m: m["id"])
    copied = sorted(cli("list", "--json", "--subdir", "copy").json["items"], key=lambda m: m["id"])
    assert copied == original
    again = cli("import", out, "--subdir", "copy", "--json").json
    assert again["imported"] == 0 and again["skipped"] == 3
    hit = cli("load", "gamma solution", "--subdir", "copy", "--json").json["results"][0]
    assert hit["text"] == "gamma solution"


def test_import_rejects_bad_lines_before_writing(backend, cli, tmp_path: Path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": "also fine"}\n{not json\n')
    result = cli("import", bad, "--json")
    assert result.code == 2 and "bad.jsonl:3" in result.json["error"]["message"]
    assert stored_count(cli) == 0
    notext = tmp_path / "notext.jsonl"
    notext.write_text('{"area": "main"}\n')
    assert "no text" in cli("import", notext).err


def test_import_plain_jsonl_from_stdin(backend, cli):
    lines = "\n".join(json.dumps({"text": f"plain record {i}"}) for i in range(5))
    doc = cli("import", "-", "--json", input=lines).json
    assert doc["imported"] == 5 and doc["reembedded"] == 5


def test_import_reembeds_vectors_from_another_model(backend, cli, tmp_path: Path, home: Path):
    import memctl
    from memctl.embeddings import FakeEmbedder

    with memctl.open_store(home, "small", embedder=FakeEmbedder(64)) as other:
        other.add(["vector from a 64-d model"])
    out = tmp_path / "small.jsonl"
    cli("export", "--vectors", "-o", out, "--subdir", "small")
    doc = cli("import", out, "--json").json
    assert doc["imported"] == 1 and doc["reembedded"] == 1
    assert cli("load", "vector from a 64-d model", "--json").json["results"][0]["score"] > 0.99


def test_model_change_refuses_then_reindex(backend, cli, home: Path, monkeypatch):
    import memctl
    from memctl.embeddings import FakeEmbedder

    with memctl.open_store(home, "default", embedder=FakeEmbedder(64)) as store:
        store.add(["first", "second"])
    result = cli("load", "first", "--json")
    assert result.code == 1 and "memctl reindex" in result.json["error"]["hint"]
    assert cli("list", "--json").json["total"] == 2  # no embedding needed: still works
    doc = cli("reindex", "--json").json
    assert doc["reembedded"] == 2 and doc["model"]["dimension"] == 384
    assert cli("load", "first", "--json").json["results"][0]["text"] == "first"
    assert cli("reindex", "--index-only", "--json").json["count"] == 2


@pytest.mark.smoke
def test_json_documents_of_every_command(backend, cli, tmp_path: Path):
    mid = _save(cli, "json contract memory")
    contracts = {
        ("show", mid): {"subdir", "memory", "current", "derived", "versions"},
        ("list",): {"subdir", "total", "page", "page_size", "items"},
        ("history",): {"subdir", "id", "entries"},
        ("subdirs",): {"root", "subdirs"},
        ("update", mid, "--meta", "k=v"): {"subdir", "memory", "changed", "reembedded"},
        ("export", "-o", str(tmp_path / "e.jsonl")): {"subdir", "path", "count", "vectors"},
        ("import", str(tmp_path / "e.jsonl"), "-s", "b"): {
            "subdir",
            "source",
            "imported",
            "skipped",
            "reembedded",
            "batches",
            "duplicates",
            "records",
            "expected",
            "truncated",
            "superseded",
        },
        ("reindex", "--index-only"): {"subdir", "index_only", "reembedded", "count", "model"},
        ("forget", "json contract memory", "--dry-run"): {
            "subdir",
            "query",
            "exact",
            "threshold",
            "dry_run",
            "count",
            "deleted",
        },
        ("delete", mid, "--dry-run"): {"subdir", "dry_run", "deleted", "cascaded", "missing"},
    }
    for args, keys in contracts.items():
        result = cli(*args, "--json")
        assert result.code == 0, (args, result.err)
        assert set(result.json) == keys, args
        assert len(result.out.strip().splitlines()) == 1


def test_help_and_version(cli):
    result = cli("--help")
    assert result.code == 0 and "save" in result.out and "forget" in result.out
    assert cli("--version").out.startswith("memctl ")


def test_the_command_module_map_matches_where_each_command_is_defined():
    from typer.main import get_command

    from memctl.cli.app import COMMAND_MODULES, app, register

    register()
    defined = {
        info.name or info.callback.__name__: info.callback.__module__.rsplit(".", 1)[1]
        for info in app.registered_commands
    }
    defined.update(
        {
            group.name: group.typer_instance.registered_commands[0].callback.__module__.rsplit(".", 1)[1]
            for group in app.registered_groups
        }
    )
    assert defined == COMMAND_MODULES
    assert list(get_command(app).commands) == list(COMMAND_MODULES)  # --help order


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (["load", "q"], "load"),
        (["--json", "load", "q"], "load"),
        (["--root", "/x", "-s", "a", "save", "t"], "save"),
        (["load", "q", "--subdir", "a"], "load"),
        (["--store=embedded", "config", "show"], "config"),
        ([], None),
        (["--help"], None),
        (["--version"], None),
        (["-q", "--", "load"], None),
        (["nosuch"], "nosuch"),
    ],
)
def test_command_name_finds_the_command_among_global_options(args, name):
    from memctl.cli.app import command_name

    assert command_name(args) == name
