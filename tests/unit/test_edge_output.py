"""Issue 35, items 9, 11 and 14: pipes get tab-separated records or nothing (messages on stderr),
destructive commands show what goes before asking, and the small promises the help and README make."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.integration.test_tty import _run_on_tty

BOX = set("│┃─━┏┓┗┛┡┩╇╭╮╰╯┌┐└┘├┤┼")
LONG = "The staging database moved to port 5433 " + "and this sentence goes on " * 8 + "END"


def _records(out: str, columns: list[str]) -> list[list[str]]:
    """stdout of a piped command: a header line, then records of the same width; no box drawing."""
    assert not BOX & set(out), out
    lines = out.splitlines()
    assert lines and lines[0].split("\t") == columns, out
    rows = [line.split("\t") for line in lines[1:]]
    assert all(len(row) == len(columns) for row in rows), out
    return rows


# --- 9: piped output -------------------------------------------------------------------------------------------


def test_load_without_hits_writes_nothing_on_stdout(backend, cli):
    cli("save", "The deploy target is Kubernetes")
    result = cli("load", "zebra quantum violin", "--threshold", "1")
    assert result.code == 3 and result.out == "" and "no memories matched" in result.err


def test_history_stats_subdirs_and_config_show_are_records_in_a_pipe(backend, cli, monkeypatch):
    mid = cli("save", LONG, "--json").json["ids"][0]
    cli("update", mid, "--text", LONG + " (updated)")
    rows = _records(cli("history").out, ["at", "id", "op", "actor", "old text", "new text"])
    assert [r[2] for r in rows] == ["update", "add"] and rows[0][4] == LONG and rows[0][5] == LONG + " (updated)"
    rows = _records(cli("stats").out, ["subdir", "what", "value"])
    table = {what: value for _, what, value in rows}
    assert table["memories"].startswith("1 (") and table["last access"] == "-"
    assert cli("load", LONG, "--threshold", "0").code == 0  # an access: stats now has a last access time
    table = {what: value for _, what, value in _records(cli("stats").out, ["subdir", "what", "value"])}
    assert table["last access"][:4].isdigit()
    rows = _records(cli("subdirs").out, ["subdir", "memories", "path"])
    assert [r[:2] for r in rows] == [["default", "1"]]
    monkeypatch.setenv("MEMCTL_SEARCH_LIMIT", "7")
    rows = _records(cli("config", "show").out, ["key", "value", "source"])
    assert ["search_limit", "7", "env MEMCTL_SEARCH_LIMIT"] in rows


def test_config_show_with_nothing_set_says_so_on_stderr(cli, monkeypatch):
    monkeypatch.delenv("MEMCTL_EMBEDDING_PROVIDER")
    result = cli("config", "show")
    assert result.code == 0 and result.out == "" and "every key has its default" in result.err


def test_config_get_names_the_source_on_stderr(cli, monkeypatch):
    monkeypatch.setenv("MEMCTL_SEARCH_LIMIT", "7")
    result = cli("config", "get", "search_limit")
    assert result.out == "7\n" and "search_limit from env MEMCTL_SEARCH_LIMIT" in result.err
    assert cli("config", "get", "search_mode").err.strip() == "search_mode from default"


def test_import_knowledge_into_a_pipe_lists_files_and_tells_the_summary_on_stderr(cli, tmp_path: Path):
    kb = tmp_path / "kb"
    (kb / "solutions").mkdir(parents=True)
    (kb / "notes.md").write_text("# Notes\n\n" + LONG + "\n")
    (kb / "solutions" / "fix.txt").write_text("Restart the worker when the queue stalls.\n")
    (kb / "picture.bin").write_bytes(b"\x00\x01")
    result = cli("import-knowledge", str(kb))
    assert result.code == 0, result.err
    rows = _records(result.out, ["status", "area", "type", "chunks", "file", "note"])
    by_file = {Path(r[4]).name: r for r in rows}
    assert by_file["notes.md"][:2] == ["new", "main"] and by_file["fix.txt"][:2] == ["new", "solutions"]
    assert by_file["picture.bin"][0] == "skipped"
    assert "files: new 2" in result.err and "embedded" in result.err
    again = cli("import-knowledge", str(kb))
    assert [r[0] for r in _records(again.out, ["status", "area", "type", "chunks", "file", "note"])] == ["skipped"]


def test_a_terminal_still_gets_tables(cli, home: Path):
    cli("save", "The deploy target is Kubernetes [bold]not markup[/bold]")
    code, out = _run_on_tty(["stats"], None, home)
    assert code == 0 and "last access" in out and BOX & set(out)
    code, out = _run_on_tty(["history"], None, home)
    assert code == 0 and "[bold]not markup" in out and BOX & set(out)  # shown as written, not as markup


# --- 11: forget and prune show what goes; the forget default keeps opposite values -----------------------------


def test_forget_on_a_terminal_lists_the_memories_before_asking(cli, home: Path):
    ids = [cli("save", "User prefers light mode", "--json").json["ids"][0] for _ in range(2)]
    other = cli("save", "The deploy target is Kubernetes", "--json").json["ids"][0]
    code, out = _run_on_tty(["forget", "User prefers light mode"], "n", home)
    question = out.index("Delete these 2 memories?")
    assert code == 1 and all(0 <= out.index(i) < question for i in ids) and other not in out
    assert cli("list", "--json").json["total"] == 3
    code, out = _run_on_tty(["forget", "User prefers light mode"], "y", home)
    assert code == 0 and "deleted 2 memories" in out
    assert [m["id"] for m in cli("list", "--json").json["items"]] == [other]


def test_prune_on_a_terminal_lists_the_memories_before_asking(cli, home: Path):
    old = cli("save", "A fragment about the cache", "--area", "fragments", "--json").json["ids"][0]
    keep = cli("save", "The deploy target is Kubernetes", "--json").json["ids"][0]
    code, out = _run_on_tty(["prune", "--filter", "area == 'fragments'"], "n", home)
    assert code == 1 and 0 <= out.index(old) < out.index("Prune this memory?") and keep not in out
    assert cli("list", "--json").json["total"] == 2


@pytest.mark.integration
def test_forget_help_names_plain_similarity_and_the_default():
    from memctl.config import load_config

    assert load_config(None, {}).values["forget_threshold"] == 0.99
    out = subprocess.run(
        [sys.executable, "-m", "memctl", "forget", "--help"], capture_output=True, text=True, cwd=REPO, timeout=120
    ).stdout
    flat = " ".join(out.split())
    assert "Minimum similarity (1 + cosine) / 2" in flat and "0.99" in flat and "Minimum relevance" not in flat


@pytest.mark.integration
def test_forget_default_keeps_opposite_values_with_the_packaged_model(home: Path, monkeypatch):
    """The pairs of scripts/forget_threshold.py: at the default, no opposite value goes."""
    import importlib.util

    monkeypatch.delenv("MEMCTL_EMBEDDING_PROVIDER")
    spec = importlib.util.spec_from_file_location("forget_threshold", REPO / "scripts" / "forget_threshold.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from memctl.config import load_config
    from memctl.embeddings import MINILM_MODEL

    default = load_config(None, {}).values["forget_threshold"]
    assert max(module.similarities(module.OPPOSITES)) < default  # the default model (multilingual-e5)
    assert max(module.similarities(module.OPPOSITES, MINILM_MODEL)) < default  # stores made with MiniLM
    env = {**os.environ, "MEMCTL_HOME": str(home), "PYTHONPATH": str(REPO)}
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "memctl", *a], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
    )
    dark = run("save", "User prefers dark mode").stdout.strip()
    run("save", "User prefers light mode")
    done = json.loads(run("forget", "User prefers light mode", "--yes", "--json").stdout)
    assert [m["text"] for m in done["deleted"]] == ["User prefers light mode"]
    assert json.loads(run("show", dark, "--json").stdout)["memory"]["text"] == "User prefers dark mode"


# --- 14: the small ones --------------------------------------------------------------------------------------


def test_dry_runs_name_the_ids_also_when_quiet(backend, cli):
    a = cli("save", "first memory", "--json").json["ids"][0]
    b = cli("save", "second memory", "--area", "fragments", "--json").json["ids"][0]
    dry = cli("delete", a, "ghost", "--dry-run")
    assert dry.code == 0 and dry.out.strip() == f"would delete 1 memory: {a}; not found: ghost"
    assert cli("delete", a, "--dry-run", "-q").out == f"{a}\n"
    assert cli("prune", "--filter", "area == 'fragments'", "--dry-run", "-q").out == f"{b}\n"
    assert cli("forget", "second memory", "--dry-run", "-q").out == f"{b}\n"
    assert cli("list", "--json").json["total"] == 2
    assert cli("prune", "--filter", "area == 'fragments'", "--yes", "-q").out == ""  # a real run stays quiet


def test_counts_agree_with_their_nouns(backend, cli, tmp_path: Path):
    cli("save", "only memory")
    assert cli("backup", str(tmp_path / "b")).out.startswith("backed up 1 memory to ")
    assert "exported 1 memory" in cli("export", "-o", str(tmp_path / "x.jsonl")).out
    purge = cli("purge", "--all", "--dry-run").out.strip()
    assert purge == "would purge 1 history entry and 0 archived memories"


def test_behaviour_reset_of_default_rules_changes_nothing(backend, cli):
    cli("save", "x")
    first = cli("behaviour", "reset", "--json").json
    assert first["changed"] is False and first["default"] is True
    assert cli("behaviour", "show", "--json").json["default"] is True


def test_show_keeps_a_multi_line_text_inside_its_field(cli):
    mid = cli("save", "-", input='first line\nmetadata: {"fake": true}\nlast line').out.strip()
    lines = cli("show", mid).out.splitlines()
    start = lines.index("text: first line")
    assert lines[start + 1 : start + 3] == ['  metadata: {"fake": true}', "  last line"]
    assert sum(line.startswith("metadata: ") for line in lines) == 1


@pytest.mark.parametrize("name", [".hidden", "-rf", "_x"])
def test_subdir_errors_state_the_rule_the_name_breaks(cli, name: str):
    result = cli("--subdir", name, "list", "--json")
    assert result.code == 2
    assert "starts with a letter or digit" in result.json["error"]["message"]


def test_save_says_so_when_a_memory_is_identical_and_unique_keeps_one(backend, cli):
    first = cli("save", "The office is on floor three", "--json").json
    again = cli("save", "The office is on floor three")
    assert again.code == 0 and first["ids"][0] in again.err and "--unique" in again.err
    unique = cli("save", "The office is on floor three", "--unique", "--json").json
    assert unique["ids"] == [first["ids"][0]] and unique["created"] is False
    assert cli("list", "--json").json["total"] == 2
    other_area = cli("save", "The office is on floor three", "--area", "fragments", "--unique", "--json").json
    assert other_area["created"] is True and other_area["identical"] == []


def test_export_of_an_area_counts_that_area_and_draws_no_bar_over_records(cli, monkeypatch, tmp_path: Path):
    import memctl.cli.commands.stores as stores

    for i in range(3):
        cli("save", f"main memory {i}")
    cli("save", "a fragment", "--area", "fragments")
    seen: list[tuple[int | None, bool]] = []
    real = stores.progress
    monkeypatch.setattr(
        stores, "progress", lambda st, total, what, show=True: seen.append((total, show)) or real(st, total, what, show)
    )
    assert cli("export", "--area", "fragments", "-o", str(tmp_path / "f.jsonl")).code == 0
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert cli("export", "--area", "main").code == 0
    assert seen == [(1, True), (3, False)]


def test_ctrl_c_during_reindex_says_what_happened_and_how_to_go_on(cli, monkeypatch):
    from memctl.store.base import StoreBase

    cli("save", "something to re-embed")

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(StoreBase, "reindex", interrupted)
    result = cli("reindex")
    assert result.code == 130 and "interrupted" in result.err and "memctl reindex` again" in result.err
    doc = cli("reindex", "--json")
    assert doc.code == 130 and doc.json["error"]["type"] == "Interrupted"


@pytest.mark.postgres
def test_save_unique_and_forget_exact_of_a_nul_text_on_postgres_refuse_cleanly(cli):
    from tests.pg import pg_schema

    with pg_schema() as url:
        assert cli("--store", url, "save", "a stored memory").code == 0
        saved = cli("--store", url, "save", "nul \x00 inside", "--unique")
        gone = cli("--store", url, "forget", "nul \x00 inside", "--exact", "--yes")
    assert saved.code == 2 and "NUL" in saved.err and "Traceback" not in saved.err
    assert gone.code == 3 and "no memories matched" in gone.err
