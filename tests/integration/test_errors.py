"""Issue #16: every hostile input and damaged file gets a message, a documented exit code, valid JSON
under --json, and leaves the store's bytes as they were. One test per row of the issue."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest


def _save(cli, text: str = "User prefers dark mode in every editor", *extra: str) -> str:
    result = cli("save", text, *extra, "--json")
    assert result.code == 0, result.err
    return result.json["ids"][0]


def _fingerprint(folder: Path) -> dict[str, str]:
    """Every file under `folder` and its hash (the WAL and shm are SQLite's own and may move)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.endswith(("-wal", "-shm"))
    }


def _refused(cli, args: list[str], code: int, words: str, *, input: str | None = None) -> None:
    """The command fails cleanly: the exit code, the words in the message, one JSON error document."""
    plain = cli(*args, input=input)
    assert plain.code == code, (args, plain.out, plain.err)
    assert words.lower() in plain.err.lower(), (args, plain.err)
    assert "Traceback" not in plain.err
    as_json = cli("--json", *args, input=input)
    assert as_json.code == code and as_json.json["error"]["exit_code"] == code


def test_a1_binary_input_and_lone_surrogates(cli, home: Path, monkeypatch):
    _save(cli)
    before = _fingerprint(home)
    lone = b"caf\xff".decode("utf-8", "surrogateescape")  # how Python hands a non-UTF-8 argument over
    _refused(cli, ["save", lone], 2, "not valid UTF-8")
    _refused(cli, ["load", lone], 2, "not valid UTF-8")
    assert _fingerprint(home) == before


def test_a2_root_that_is_not_a_folder(cli, tmp_path: Path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    _refused(cli, ["--root", str(a_file), "list"], 2, "is not a folder")
    _refused(cli, ["--root", str(a_file), "save", "x"], 2, "is not a folder")
    _refused(cli, ["--root", "/dev/null", "save", "x"], 2, "is not a folder")
    _refused(cli, ["--root", "", "save", "x"], 2, "--root is empty")
    assert not (Path.cwd() / "default").exists()


@pytest.mark.skipif(
    sys.platform == "win32" or __import__("os").geteuid() == 0, reason="root ignores folder permissions"
)
def test_a3_root_not_writable(cli, tmp_path: Path):
    root = tmp_path / "ro"
    root.mkdir(mode=0o500)
    _refused(cli, ["--root", str(root), "save", "x"], 1, "permission denied")


def test_a4_a5_a9_numbers_too_large(cli, home: Path):
    _save(cli)
    before = _fingerprint(home)
    huge = "99999999999999999999"
    _refused(cli, ["list", "--limit", huge], 2, "too large")
    _refused(cli, ["prune", "--older-than", "10000000w"], 2, "")
    _refused(cli, ["purge", "--older-than", f"{huge}d"], 2, "")
    _refused(cli, ["prune", "--not-accessed-for", f"{huge}d"], 2, "")
    _refused(cli, ["config", "set", "search_limit", "10000000000000000000000"], 2, "must be in")
    assert _fingerprint(home) == before


def test_a6_a7_a8_hostile_jsonl_and_nan(cli, home: Path, tmp_path: Path):
    _save(cli)
    before = _fingerprint(home)
    big = tmp_path / "big.jsonl"
    big.write_text('{"text": "big", "metadata": {"n": ' + "9" * 5000 + "}}\n")
    _refused(cli, ["import", str(big)], 2, "big.jsonl:1")
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"text": "deep", "metadata": {"n": ' + "[" * 100_000 + "]" * 100_000 + "}}\n")
    _refused(cli, ["import", str(deep)], 2, "deep.jsonl:1")
    nan = tmp_path / "nan.jsonl"
    nan.write_text('{"text": "nan", "metadata": {"x": NaN}}\n')
    _refused(cli, ["import", str(nan)], 2, "NaN")
    assert _fingerprint(home) == before
    # --meta x=NaN keeps the text "NaN" (NaN is not JSON); stats keeps working for every store
    mid = _save(cli, "a memory with a NaN-looking value", "--meta", "x=NaN")
    assert cli("show", mid, "--json").json["memory"]["metadata"] == {"x": "NaN"}
    assert cli("stats", "--all-subdirs", "--json").code == 0


def test_a10_a11_unwritable_destinations(cli, home: Path, tmp_path: Path):
    _save(cli)
    _refused(cli, ["export", "-o", "/proc/memctl-test.jsonl"], 1, "")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    _refused(cli, ["export", "-o", str(a_file / "x.jsonl")], 1, "not a folder")
    _refused(cli, ["backup", str(a_file / "b")], 1, "where a folder is needed")
    _refused(cli, ["export-agent-zero", str(a_file / "a0")], 1, "where a folder is needed")
    for args in (["list", "--json"], ["list"], ["export"]):
        with open("/dev/full", "w") as full:
            done = subprocess.run(
                [sys.executable, "-m", "memctl", *args], stdout=full, stderr=subprocess.PIPE, text=True, check=False
            )
        assert done.returncode == 1 and "disk is full" in done.stderr and "Traceback" not in done.stderr


def test_b1_read_only_commands_create_nothing(cli, tmp_path: Path):
    typo = tmp_path / "typo"
    for args in (["list"], ["load", "q"], ["stats"], ["show", "someid"], ["history"], ["export"]):
        result = cli("--root", str(typo), *args, "--json")
        assert result.code == 3 and "no store at" in result.json["error"]["message"], args
    assert not typo.exists()
    assert cli("--root", str(typo), "save", "first memory").code == 0
    assert (typo / "default" / "memories.sqlite").is_file()


def test_b2_a_store_that_lost_its_database_is_refused(cli, home: Path):
    _save(cli)
    (home / "default" / "memories.sqlite").unlink()
    for suffix in ("-wal", "-shm"):
        (home / "default" / f"memories.sqlite{suffix}").unlink(missing_ok=True)
    _refused(cli, ["list"], 1, "lost its database")
    _refused(cli, ["save", "x"], 1, "lost its database")
    assert not (home / "default" / "memories.sqlite").exists()


def test_b3_database_path_that_is_a_folder(cli, home: Path):
    (home / "default" / "memories.sqlite").mkdir(parents=True)
    _refused(cli, ["save", "x"], 1, "is not a file")


def test_b5_config_ranges_and_choices(cli, home: Path, monkeypatch, tmp_path: Path):
    for key, value, words in [
        ("search_threshold", "2", "must be in [0, 1]"),
        ("search_threshold", ".nan", "finite"),
        ("search_limit", "0", "must be in"),
        ("search_mode", "bogus", "must be one of"),
        ("forget_threshold", "5", "must be in"),
    ]:
        _refused(cli, ["config", "set", key, "--", value], 2, words)
    _save(cli)
    monkeypatch.setenv("MEMCTL_SEARCH_LIMIT", "-5")
    _refused(cli, ["load", "dark mode"], 2, "MEMCTL_SEARCH_LIMIT")
    monkeypatch.delenv("MEMCTL_SEARCH_LIMIT")
    (home / "default" / "config.yaml").write_text("knowledge_chunk_overlap: 900\nknowledge_chunk_size: 500\n")
    _refused(cli, ["load", "dark mode"], 2, "knowledge_chunk_overlap")
    (home / "default" / "config.yaml").unlink()
    monkeypatch.setenv("MEMCTL_CONFIG", str(tmp_path / "missing.yaml"))
    _refused(cli, ["load", "dark mode"], 2, "MEMCTL_CONFIG")


def test_b6_non_finite_thresholds(cli, home: Path):
    _save(cli)
    before = _fingerprint(home)
    _refused(cli, ["load", "dark", "--threshold", "nan"], 2, "not a number in [0, 1]")
    _refused(cli, ["forget", "dark", "--threshold", "nan", "--yes"], 2, "not a number in [0, 1]")
    _refused(cli, ["prune", "--min-importance", "inf", "--yes"], 2, "not a number in [0, 1]")
    _refused(cli, ["prune", "--min-importance", "nan", "--yes"], 2, "not a number in [0, 1]")
    assert _fingerprint(home) == before


def test_b8_forget_dry_runs_without_a_terminal_like_prune(cli):
    _save(cli)
    doc = cli("forget", "User prefers dark mode in every editor", "--exact", "--json").json
    assert doc["dry_run"] is True and doc["count"] == 1
    assert cli("list", "--json").json["total"] == 1
    assert cli("forget", "User prefers dark mode in every editor", "--exact", "--yes", "--json").json["count"] == 1
    assert cli("list", "--json").json["total"] == 0


def test_b9_piped_output_is_plain_and_whole(cli):
    text = "a long memory " * 40 + "\twith a tab"
    mid = _save(cli, text)
    lines = cli("list").out.splitlines()
    assert lines[0].split("\t") == ["id", "area", "created", "text"]
    cells = lines[1].split("\t")
    assert cells[0] == mid and cells[-1] == " ".join(text.split(" ")).strip().replace("\t", "\\t")
    assert f"text: {text.strip()}" in cli("show", mid).out


def test_b10_behaviour_edit(cli, tmp_path: Path, monkeypatch):
    _save(cli)
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    _refused(cli, ["behaviour", "edit"], 2, "no terminal")
    emptier = tmp_path / "empty.py"
    emptier.write_text("import sys\nopen(sys.argv[-1], 'w').close()\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {emptier}")
    _refused(cli, ["behaviour", "edit"], 1, "empty")
    assert cli("behaviour", "show", "--json").json["default"] is True
    keeper = tmp_path / "keep.py"
    keeper.write_text("pass\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {keeper}")
    assert cli("behaviour", "edit", "--json").json["changed"] is False


def test_b11_small_things(cli):
    assert json.loads(cli("--json", "--version").out) == {"version": __import__("memctl").__version__}
    mid = _save(cli)
    _refused(cli, ["delete", ""], 2, "empty")
    assert cli("update", mid, "--unset", "nokey", "--json").json["changed"] is False
    assert [e["op"] for e in cli("history", mid, "--json").json["entries"]] == ["add"]


def _mount(args: list[str]) -> bool:
    return subprocess.run(["mount", *args], capture_output=True, check=False).returncode == 0


@pytest.fixture
def read_only_copy(tmp_path: Path):
    """A read-only bind mount of a folder (root only): read-only media for the store."""
    source, target = tmp_path / "src", tmp_path / "ro"
    source.mkdir()
    target.mkdir()
    if not (_mount(["--bind", str(source), str(target)])):
        pytest.skip("cannot bind-mount here (needs root)")
    yield source, target
    subprocess.run(["umount", "-l", str(target)], check=False)


def test_a12_damaged_database(cli, home: Path, tmp_path: Path):
    lines = "\n".join(json.dumps({"text": f"memory number {i} about things"}) for i in range(2000))
    (tmp_path / "many.jsonl").write_text(lines)
    assert cli("import", str(tmp_path / "many.jsonl")).code == 0
    database = home / "default" / "memories.sqlite"
    database.write_bytes(database.read_bytes()[: -4 * 4096])  # short by a few pages
    for args in (["stats"], ["save", "x"], ["load", "memory number 5"]):
        _refused(cli, args, 1, "malformed")


def test_a12_b2_b4_damaged_model_record(cli, home: Path):
    import sqlite3

    _save(cli)
    record = home / "default" / "embedding.json"
    # a store made by this memctl keeps the record in its database too: a lost file is rewritten
    record.unlink()
    assert cli("load", "dark mode editor", "--threshold", "0", "--json").json["count"] == 1
    assert json.loads(record.read_text())["dimension"] == 384
    # a store from before that copy: a wrong, garbage or missing file is an error naming `reindex`,
    # and reindex repairs it
    with sqlite3.connect(home / "default" / "memories.sqlite") as db:
        db.execute("DELETE FROM meta WHERE key = 'model'")
    for damage in ('{"provider": "fake", "model": "hash-384", "dimension": 999}', "garbage{", None):
        if damage is None:
            record.unlink()
        else:
            record.write_text(damage)
        _refused(cli, ["load", "dark mode editor"], 1, "reindex" if damage else "lost its model record")
        assert cli("reindex", "--json").json["count"] == 1
        assert cli("load", "dark mode editor", "--threshold", "0", "--json").json["count"] == 1
        with sqlite3.connect(home / "default" / "memories.sqlite") as db:
            db.execute("DELETE FROM meta WHERE key = 'model'")


def test_a13_disk_full_during_save_names_the_disk(cli, tmp_path: Path):
    small = tmp_path / "small"
    small.mkdir()
    if not _mount(["-t", "tmpfs", "-o", "size=600k", "tmpfs", str(small)]):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        assert cli("--root", str(small), "save", "first").code == 0
        before = cli("--root", str(small), "list", "--json").json["total"]
        result = cli("--root", str(small), "save", "x" * 2_000_000)
        assert result.code in (1, 2) and "Traceback" not in result.err
        assert "no transaction is active" not in result.err
        assert cli("--root", str(small), "list", "--json").json["total"] == before
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)


def test_a14_b3_store_on_read_only_media(cli, read_only_copy):
    source, target = read_only_copy
    assert cli("--root", str(source), "save", "User prefers dark mode in every editor").code == 0
    subprocess.run(["mount", "-o", "remount,ro,bind", str(target)], check=False)
    assert cli("--root", str(target), "load", "dark mode editor", "--threshold", "0", "--json").json["count"] == 1
    assert cli("--root", str(target), "list", "--json").json["total"] == 1
    assert cli("--root", str(target), "stats", "--json").code == 0
    assert cli("--root", str(target), "export").code == 0
    _refused(cli, ["--root", str(target), "save", "x"], 1, "read-only")


def test_a15_agent_zero_index_declaring_a_huge_size(cli, tmp_path: Path):
    import struct

    from memctl.integrations.agent_zero.pickle_write import dump_index_pkl

    folder = tmp_path / "a0"
    folder.mkdir()
    (folder / "index.pkl").write_bytes(dump_index_pkl([("k1", "a memory", {"id": "k1", "area": "main"})]))
    header = b"IxFI" + struct.pack("<iq", 384, 10**12) + b"\0" * 300  # declares 1.5 PB in 316 bytes
    (folder / "index.faiss").write_bytes(header)
    doc = cli("import-agent-zero", str(folder), "--json").json
    assert doc["imported"] == 1 and doc["reembedded"] == 1
    assert any("declares more vectors" in note for note in doc["notes"])


def test_b1_read_only_commands_create_nothing_on_postgres(backend, cli):
    if backend != "postgres":
        pytest.skip("the embedded case is test_b1_read_only_commands_create_nothing")
    for args in (["list"], ["load", "q"], ["show", "someid"], ["history"]):
        result = cli("--subdir", "typo-store", *args, "--json")
        assert result.code == 3 and "no store" in result.json["error"]["message"], args
    assert "typo-store" not in [s["name"] for s in cli("subdirs", "--json").json["subdirs"]]
