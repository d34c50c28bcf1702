"""Issue #35, items 1, 3, 12 and 13: read-only commands write nothing, a damaged store is refused by every
command (backup too), inputs are read with a bound, errors name their real cause, and a store exists only
once something was committed to it."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import REPO, Result


def _save(cli, text: str, *args: str) -> str:
    result = cli("save", text, "--json", *args)
    assert result.code == 0, result.err
    return str(result.json["ids"][0])


def _tree(folder: Path) -> dict[str, str]:
    """Every file under `folder` (hidden ones too) with the sha256 of its content."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _piped(args: list[str], producer: list[str], timeout: float = 120) -> Result:
    """`producer | memctl ARGS` as two processes (an endless producer is stopped once memctl exits)."""
    feed = subprocess.Popen(producer, stdout=subprocess.PIPE)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "memctl", *args],
            stdin=feed.stdout,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
        )
    finally:
        assert feed.stdout is not None
        feed.stdout.close()
        feed.kill()
        feed.wait()
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _no_store(cli, subdir: str = "default") -> None:
    """The store does not exist: `subdirs` does not list it and `stats` says so (exit 3)."""
    listed = cli("subdirs", "--json")
    assert listed.code == 0, listed.err
    assert subdir not in [s["name"] for s in listed.json["subdirs"]]
    stats = cli("stats", "-s", subdir, "--json")
    assert stats.code == 3 and "no store" in stats.json["error"]["message"], stats.out + stats.err


# -- item 1: read-only commands never write; a damaged store is refused, by backup too -------------


READ_ONLY_COMMANDS = [
    ("stats",),
    ("list",),
    ("history",),
    ("subdirs",),
    ("config", "show"),
    ("behaviour", "show"),
]


def test_read_only_commands_leave_the_store_folder_byte_for_byte(cli, home: Path, tmp_path: Path):
    first = _save(cli, "the first memory")
    _save(cli, "the second memory", "--area", "fragments")
    folder = home / "default"
    before = _tree(folder)
    assert before and "memories.sqlite" in before
    commands = [
        *READ_ONLY_COMMANDS,
        ("show", first),
        ("history", first),
        ("export", "-o", str(tmp_path / "out.jsonl")),
        ("export",),
        ("backup", str(tmp_path / "bk")),
        ("export-agent-zero", str(tmp_path / "a0")),
    ]
    for args in commands:
        result = cli(*args)
        assert result.code == 0, (args, result.err)
        assert _tree(folder) == before, f"`memctl {' '.join(args)}` changed the store folder"
    assert cli("backup", tmp_path / "bk2", "--json").json["count"] == 2


def test_read_only_commands_on_both_backends(backend, cli, tmp_path: Path):
    """The same commands on PostgreSQL run in a read-only session: they work and change nothing."""
    first = _save(cli, "a memory read many times")
    exported = cli("export").out.splitlines()[1:]  # the records (the header holds the time of export)
    for args in [*READ_ONLY_COMMANDS, ("show", first), ("export", "-o", str(tmp_path / "x.jsonl"))]:
        assert cli(*args).code == 0, args
    assert cli("backup", tmp_path / "bk").code == 0
    assert cli("export").out.splitlines()[1:] == exported
    assert len(cli("history", "--json").json["entries"]) == 1


def test_a_read_only_open_refuses_writes(backend, home: Path):
    import memctl
    from memctl.errors import MemctlError

    with memctl.open_store(home, "default") as store:
        store.add(["something stored"])
    with memctl.open_store(home, "default", read_only=True) as store:
        assert len(store) == 1
        with pytest.raises((MemctlError, Exception)) as caught:
            store.add(["not written"])
        assert "read" in str(caught.value).lower()
    with memctl.open_store(home, "default") as store:
        assert len(store) == 1


def test_a_read_only_open_never_creates_a_store(backend, home: Path):
    import memctl
    from memctl.errors import NotFoundError

    with pytest.raises(NotFoundError):
        memctl.open_store(home, "nothing-here", read_only=True)
    assert not (home / "nothing-here").exists()


def _empty_database(folder: Path, how: str) -> None:
    for name in ("memories.sqlite-wal", "memories.sqlite-shm"):
        (folder / name).unlink(missing_ok=True)
    db = folder / "memories.sqlite"
    db.write_bytes(b"")
    if how == "header":  # what the old `stats` left: a valid, empty SQLite file in WAL mode
        conn = sqlite3.connect(db)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.close()


@pytest.mark.parametrize("how", ["zero-length", "header"])
def test_an_emptied_database_is_refused_by_every_command_and_never_written(cli, home: Path, tmp_path: Path, how):
    for i in range(3):
        _save(cli, f"memory number {i}")
    folder = home / "default"
    _empty_database(folder, how)
    before = _tree(folder)
    for args in [
        ("stats",),
        ("list",),
        ("history",),
        ("export",),
        ("load", "memory"),
        ("save", "a new memory"),
        ("import", str(tmp_path / "none.jsonl")),
        ("backup", str(tmp_path / "bk")),
    ]:
        if args[0] == "import":
            (tmp_path / "none.jsonl").write_text('{"text": "imported"}\n')
        result = cli(*args, "--json")
        assert result.code == 1, (args, result.out, result.err)
        assert "is empty, but the store held data" in result.json["error"]["message"], args
        assert _tree(folder) == before, f"`memctl {args[0]}` wrote into the damaged store"
    assert not (tmp_path / "bk").exists()


def test_backup_refuses_a_store_that_lost_commits(cli, home: Path, tmp_path: Path):
    _save(cli, "kept memory")
    folder = home / "default"
    (folder / ".commits").write_text(f"{99:020d}\n")
    before = _tree(folder)
    result = cli("backup", tmp_path / "bk", "--json")
    assert result.code == 1 and "lost its last" in result.json["error"]["message"]
    assert not (tmp_path / "bk").exists()
    assert _tree(folder) == before


# -- item 3: bounded reading -------------------------------------------------------------------


@pytest.mark.parametrize("source", ["@/dev/zero", "-"])
def test_save_of_an_endless_input_stops_at_max_text_bytes(backend, source: str):
    producer = ["yes"] if source == "-" else ["true"]
    result = _piped(["save", source, "--json"], producer)
    assert result.code == 2, result.err
    doc = json.loads(result.out)
    assert "over the limit of 1,048,576 bytes" in doc["error"]["message"]
    assert "Traceback" not in result.err


def test_a_text_file_of_exactly_max_text_bytes_is_read_and_one_more_byte_is_refused(
    backend, cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setenv("MEMCTL_MAX_TEXT_BYTES", "100")
    exact, over = tmp_path / "exact.txt", tmp_path / "over.txt"
    exact.write_text("é" * 50)  # 100 bytes of UTF-8
    over.write_text("é" * 50 + "x")
    assert cli("save", f"@{exact}").code == 0
    refused = cli("save", f"@{over}", "--json")
    assert refused.code == 2 and "over the limit of 100 bytes" in refused.json["error"]["message"]
    stdin = cli("save", "-", "--json", input="y" * 101)
    assert stdin.code == 2 and "from stdin" in stdin.json["error"]["message"]
    assert cli("list", "--json").json["total"] == 1


def test_import_of_a_file_without_line_breaks_stops_early(backend, cli, tmp_path: Path):
    result = cli("import", "/dev/zero", "--json")  # cannot be a record: refused after 64 KiB
    assert result.code == 2, result.err
    assert "/dev/zero:1: not a JSON object, and no line end in its first 64 KiB" in result.json["error"]["message"]
    _no_store(cli)
    endless_object = tmp_path / "brace.jsonl"  # starts like a record: read up to the line cap, no further
    endless_object.write_bytes(b'{"text": "' + b"x" * (16 << 20))
    result = cli("import", endless_object, "--json")
    assert result.code == 2 and ":1: the line is longer than" in result.json["error"]["message"]
    _no_store(cli)


def test_import_line_cap_follows_max_text_bytes(backend, cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    from memctl.lifecycle.jsonl import max_line_bytes

    monkeypatch.setenv("MEMCTL_MAX_TEXT_BYTES", "100")
    cap = max_line_bytes(100)
    assert cap is not None
    path = tmp_path / "long.jsonl"
    path.write_bytes(b'{"text": "fine"}\n{"text": "' + b"x" * cap + b'"}\n')
    result = cli("import", path, "--json")
    assert result.code == 2 and f"{path}:2: the line is longer than" in result.json["error"]["message"]
    _no_store(cli)  # every line is checked before anything is written


def test_import_of_endless_stdin_is_refused_at_its_first_bad_line(backend):
    result = _piped(["import", "-", "--json"], ["yes"])
    assert result.code == 2, result.err
    assert "<stdin>:1: not valid JSON" in json.loads(result.out)["error"]["message"]


def test_import_from_stdin_still_imports_every_line(backend, cli):
    lines = "".join(json.dumps({"text": f"line {i} from stdin"}) + "\n" for i in range(5))
    result = cli("import", "-", "--json", input=lines)
    assert result.code == 0, result.err
    assert result.json["imported"] == 5
    assert cli("list", "--json").json["total"] == 5


# -- item 13: a failing first command leaves no store -------------------------------------------


def test_a_failing_first_save_leaves_no_store(backend, cli, home: Path, monkeypatch: pytest.MonkeyPatch):
    from memctl.embeddings import FakeEmbedder

    def broken(self, texts):
        raise RuntimeError("the model could not be loaded")

    monkeypatch.setattr(FakeEmbedder, "embed", broken)
    with pytest.raises(RuntimeError):
        cli("save", "never stored")
    assert not (home / "default").exists()
    monkeypatch.undo()
    _no_store(cli)


def test_memorize_without_a_utility_model_leaves_no_store(backend, cli, home: Path, tmp_path: Path):
    transcript = tmp_path / "chat.json"
    transcript.write_text(json.dumps([{"role": "user", "content": "I live in Lisbon."}]))
    result = cli("memorize", transcript, "--json")
    assert result.code == 2 and "utility_model" in result.out + result.err
    assert not (home / "default").exists()
    _no_store(cli)


def test_a_failed_first_transaction_removes_the_store_it_created(home: Path, monkeypatch: pytest.MonkeyPatch):
    import memctl
    from memctl.store.embedded import EmbeddedStore

    def failing(self, rows, history):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(EmbeddedStore, "_insert_prepared", failing)
    with memctl.open_store(home, "fresh") as store:
        with pytest.raises(sqlite3.OperationalError):
            store.add(["not kept"])
        assert not (home / "fresh").exists()
    monkeypatch.undo()
    with memctl.open_store(home, "fresh") as store:  # and the next write starts it cleanly
        store.add(["kept"])
    with memctl.open_store(home, "fresh", read_only=True) as store:
        assert [m.text for m in store.list()[0]] == ["kept"]


def test_opening_a_store_and_writing_nothing_creates_nothing(backend, cli, home: Path):
    import memctl

    with memctl.open_store(home, "projects/idle") as store:
        assert len(store) == 0 and store.search("anything") == []
    assert not (home / "projects").exists()
    _no_store(cli, "projects/idle")


def test_behaviour_rules_written_first_create_the_store(cli, home: Path, tmp_path: Path, monkeypatch):
    # `behaviour reset` of the default rules writes nothing (#35 item 14): edit them instead.
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\necho "- Answer in one sentence." >> "$1"\n', encoding="utf-8")
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    monkeypatch.setenv("VISUAL", str(editor))
    result = cli("behaviour", "edit", "-s", "rules-only")
    assert result.code == 0, result.err
    assert (home / "rules-only" / "memories.sqlite").is_file()
    assert "rules-only" in [s["name"] for s in cli("subdirs", "--json").json["subdirs"]]


# -- item 12: messages that name the real cause -------------------------------------------------


@contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    path.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_disk_full_while_a_store_is_created_says_so_and_leaves_nothing(cli, tmp_path: Path):
    with _tmpfs(tmp_path / "small", "2m") as disk:
        root = disk / "root"
        assert cli("--root", root, "config", "show").code == 0
        filler = disk / "fill"
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        filler.write_bytes(b"\0" * (free - 60 * 1024))
        result = cli("--root", root, "save", "hello", "--json")
        assert result.code == 1, result.err
        message = result.json["error"]["message"] + (result.json["error"].get("hint") or "")
        assert "full" in message and "rollback" not in message and "restore it from a backup" not in message
        assert not (root / "default").exists()
        filler.unlink()
        assert cli("--root", root, "save", "hello").code == 0  # later commands are not poisoned
        assert cli("--root", root, "list", "--json").json["total"] == 1


def test_a_migration_that_fails_after_sqlite_rolled_back_reports_the_real_error():
    from memctl.store.schema import apply_migrations

    class FullDisk:
        """A connection whose first CREATE TABLE of memories fails as a full disk does: SQLite has
        already rolled the transaction back when the error arrives."""

        def __init__(self) -> None:
            self.db = sqlite3.connect(":memory:", isolation_level=None)

        @property
        def in_transaction(self) -> bool:
            return self.db.in_transaction

        def execute(self, sql: str, *args):
            if sql.lstrip().startswith("CREATE TABLE memories"):
                self.db.execute("ROLLBACK")
                raise sqlite3.OperationalError("database or disk is full")
            return self.db.execute(sql, *args)

    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        apply_migrations(FullDisk())  # type: ignore[arg-type]


def test_backup_into_a_folder_that_cannot_be_written_names_that(backend, cli):
    _save(cli, "something to back up")
    result = cli("backup", "/proc/x", "--json")
    assert result.code == 1, result.err
    error = result.json["error"]
    assert "cannot create files in /proc" in error["message"]
    assert "another restore or backup" not in error["message"]
    assert "memctl stats" not in (error.get("hint") or "")


def test_backup_from_a_read_only_mount_works_and_changes_nothing(cli, tmp_path: Path):
    with _tmpfs(tmp_path / "ro", "8m") as disk:
        root = disk / "root"
        assert cli("--root", root, "save", "on a disk soon read-only").code == 0
        before = _tree(root / "default")
        assert subprocess.run(["mount", "-o", "remount,ro", str(disk)]).returncode == 0
        try:
            result = cli("--root", root, "backup", tmp_path / "bk", "--json")
            assert result.code == 0, result.out + result.err
            assert result.json["count"] == 1
            assert cli("--root", root, "stats").code == 0
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=False)
        assert _tree(root / "default") == before
    assert cli("restore-backup", tmp_path / "bk", "-s", "copy").code == 0
    assert cli("list", "-s", "copy", "--json").json["total"] == 1


def test_restore_backup_of_a_folder_without_a_manifest_is_refused(backend, cli, tmp_path: Path):
    _save(cli, "in the backup")
    assert cli("backup", tmp_path / "bk").code == 0
    (tmp_path / "bk" / "backup.json").unlink()
    result = cli("restore-backup", tmp_path / "bk", "-s", "target", "--json")
    assert result.code == 2, result.err
    assert "has no backup.json" in result.json["error"]["message"]
    assert "nothing was restored" in result.json["error"]["message"]
    _no_store(cli, "target")
