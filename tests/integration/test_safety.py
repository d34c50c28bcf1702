"""Data safety (issue 17): what is acknowledged is kept, whatever runs beside it, and exports re-import.

Tests that apply to both backends take the `backend` fixture (embedded, then PostgreSQL).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import memctl
from memctl.embeddings import FakeEmbedder
from tests.conftest import stored_count


def _raw_metadata_types(store) -> set[str]:
    """The JSON type of every stored metadata value, read by the database itself."""
    if type(store).__name__ == "PostgresStore":
        rows = store._all(
            "SELECT DISTINCT json_typeof(metadata) FROM memctl_memories WHERE subdir = %s", (store.subdir,)
        )
    else:
        rows = store.db.execute("SELECT DISTINCT json_type(metadata) FROM memories").fetchall()
    return {r[0] for r in rows}


# -- 1. metadata of large insert batches -------------------------------------------------------------
@pytest.mark.parametrize("size", [1, 49, 50, 5000])
def test_metadata_is_an_object_for_every_batch_size(home: Path, backend: str, size: int):
    with memctl.open_store(home, f"batch{size}", embedder=FakeEmbedder()) as store:
        metas = [
            {"kind": "probe", "n": i, "knowledge_source": True, "knowledge_folder": "k", "source_path": f"f{i}.md"}
            for i in range(size)
        ]
        ids = store.add([f"fact number {i} about batches" for i in range(size)], metadata=metas)
        assert len(ids) == size
        assert _raw_metadata_types(store) == {"object"}
        assert store.get([ids[-1]])[0].metadata["n"] == size - 1
        hits = store.search("fact number about batches", limit=size, threshold=0.0, filter=f"n == {size - 1}")
        assert [h.id for h in hits] == [ids[-1]]
        assert store.stats()["knowledge"] == size


def test_pg_migration_repairs_metadata_stored_as_strings(home: Path):
    """Rows written by the old COPY path (metadata a JSON string) are objects again after the migration."""
    import psycopg

    from tests.pg import pg_schema

    with pg_schema() as url:
        with memctl.open_store(None, "old", store=url, embedder=FakeEmbedder()) as store:
            ids = store.add(["one stored memory", "another stored memory"], metadata=[{"a": 1}, {"b": [2]}])
            store.delete([ids[1]])
        with psycopg.connect(url, autocommit=True) as conn:  # what the bug left behind
            conn.execute("UPDATE memctl_memories SET metadata = to_json(metadata::text)")
            conn.execute("UPDATE memctl_archive SET metadata = to_json(metadata::text)")
            assert conn.execute("SELECT json_typeof(metadata) FROM memctl_memories").fetchone()[0] == "string"
            conn.execute("DELETE FROM memctl_migrations WHERE name = 'm004_repair_metadata_strings'")
        with memctl.open_store(None, "old", store=url, embedder=FakeEmbedder()) as store:
            assert _raw_metadata_types(store) == {"object"}
            assert store.search("stored memory", threshold=0.0, filter="a == 1")[0].id == ids[0]
            assert store.archived(ids[1]).memory.metadata == {"b": [2]}
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT json_typeof(metadata) FROM memctl_archive").fetchone()[0] == "object"


def test_import_knowledge_twice_adds_nothing_on_both_backends(home: Path, backend: str, cli, tmp_path: Path):
    folder = tmp_path / "knowledge" / "main"
    folder.mkdir(parents=True)
    (folder / "facts.jsonl").write_text(
        "".join(json.dumps({"text": f"knowledge line {i} about owls"}) + "\n" for i in range(60)), encoding="utf-8"
    )
    counts = []
    for _ in range(3):
        result = cli("import-knowledge", str(tmp_path / "knowledge"), "--json")
        assert result.code == 0, result.err
        counts.append(cli("stats", "--json").json["stores"][0]["count"])
    assert counts[0] > 0 and counts == [counts[0]] * 3
    assert cli("stats", "--json").json["stores"][0]["knowledge"] == counts[0]


# -- 2 and 7. restore-backup while another process keeps the store open; kills during restore ---------
WRITER = r"""
import sys, time, memctl
from memctl.embeddings import FakeEmbedder
root, stop = sys.argv[1], sys.argv[2]
import os
with memctl.open_store(root, "default", embedder=FakeEmbedder()) as store:
    n = 0
    while not os.path.exists(stop):
        try:
            [mid] = store.add([f"live writer memory {n}"])
        except memctl.MemctlError as exc:
            print("ERR", exc, flush=True)
            time.sleep(0.05)
            continue
        except FileNotFoundError as exc:  # the known bug test_a_writer_waiting_for_the_lock_... pins
            print("LOCKERR", exc, flush=True)
            time.sleep(0.05)
            continue
        print("ACK", mid, time.time(), flush=True)
        n += 1
        time.sleep(0.01)
"""


class _Writer:
    """The WRITER process, and every line it printed (read as they come, so none is lost)."""

    def __init__(self, home: Path, tmp_path: Path) -> None:
        import subprocess
        import sys

        self.stop = tmp_path / "stop-writer"
        self.stop.unlink(missing_ok=True)
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(home), str(self.stop)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )

    def wait_for_acks(self, count: int, after: float = 0.0) -> None:
        """Read until `count` memories acknowledged after time `after` (the writer's clock is ours)."""
        assert self.proc.stdout is not None
        while len([at for _, at in self.acked() if at > after]) < count:
            line = self.proc.stdout.readline()
            assert line, (
                f"the writer ended: {self.proc.wait(timeout=60)} {self.proc.stderr and self.proc.stderr.read()}"
            )
            self.lines.append(line.rstrip("\n"))

    def acked(self) -> list[tuple[str, float]]:
        return [(line.split()[1], float(line.split()[2])) for line in self.lines if line.startswith("ACK")]

    def finish(self) -> tuple[list[tuple[str, float]], str]:
        """Stop the writer: (every acknowledged (id, time), everything it printed)."""
        self.stop.write_text("stop")
        out, err = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, err
        self.lines += out.splitlines()
        return self.acked(), "\n".join(self.lines)


def _ids_in(folder: Path) -> set[str]:
    import sqlite3

    with sqlite3.connect(f"file:{folder / 'memories.sqlite'}?mode=ro", uri=True) as db:
        return {r[0] for r in db.execute("SELECT id FROM memories")}


REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())  # tests/ or a folder of it


def test_restore_backup_with_a_writer_keeping_the_store_open(cli, home: Path, tmp_path: Path):
    import time

    cli("save", "memory in the backup")
    assert cli("backup", tmp_path / "bk").code == 0
    writer = _Writer(home, tmp_path)
    writer.wait_for_acks(20)  # these land in the old store (kept aside by --force)
    result = cli("restore-backup", tmp_path / "bk", "--force", "--json")
    assert result.code == 0, result.err
    restored_at = time.time()
    writer.wait_for_acks(11, after=restored_at)
    acked, _ = writer.finish()
    final = _ids_in(home / "default")
    aside = _ids_in(Path(result.json["kept_old"]))
    after = [mid for mid, at in acked if at > restored_at]
    assert len(after) > 10 and set(after) <= final  # written after the restore: in the restored store
    assert not [mid for mid, _ in acked if mid not in final | aside]  # nothing acknowledged is lost
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        assert "memory in the backup" in {m.text for m, _ in store.iter_all()}


# Runs `memctl ARGS` and stops it for good just before its PAUSE_AT-th rename, replace, unlink or rmtree
# (printing PAUSED and the call), so a kill -9 lands at a chosen step; a run with fewer steps just ends.
PAUSING_MEMCTL = r"""
import os, shutil, sys
pause_at, steps = int(sys.argv[1]), 0

def pausing(name, real):
    def step(*args, **kwargs):
        global steps
        steps += 1
        if steps == pause_at:
            print("PAUSED", name, *args, flush=True)
            sys.stdin.read()  # nothing ever comes: the test kills this process here
        return real(*args, **kwargs)
    return step

os.rename, os.replace = pausing("rename", os.rename), pausing("replace", os.replace)
os.unlink, shutil.rmtree = pausing("unlink", os.unlink), pausing("rmtree", shutil.rmtree)
from memctl.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def test_kill_during_restore_with_a_live_writer_loses_nothing(cli, home: Path, tmp_path: Path):
    """kill -9 restore-backup before each of its file-system steps in turn (the swap journal written, the old
    store renamed aside, the new one renamed into place, the journal removed) while another process writes,
    each kill followed by a restore that recovers the swap and finishes: afterwards the store opens (never
    empty, never missing), and every acknowledged memory is in it or in a kept-aside store."""
    import subprocess
    import sys
    import time

    for i in range(30):
        cli("save", f"backed up memory {i}")
    assert cli("backup", tmp_path / "bk").code == 0
    writer = _Writer(home, tmp_path)
    writer.wait_for_acks(5)
    paused: list[str] = []
    for pause_at in range(1, 40):
        restorer = subprocess.Popen(
            [sys.executable, "-c", PAUSING_MEMCTL, str(pause_at), "restore-backup", str(tmp_path / "bk"), "--force"],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert restorer.stdout is not None
        line = restorer.stdout.readline()
        if not line.startswith("PAUSED"):
            _, err = restorer.communicate(timeout=120)
            assert restorer.returncode == 0, err  # fewer steps than pause_at: it ran to the end
            break
        restorer.kill()
        restorer.communicate(timeout=60)
        paused.append(line.split(" ", 2)[1])
        done = cli("restore-backup", tmp_path / "bk", "--force")  # recovers the killed swap, then restores
        assert done.code == 0, done.err
    else:
        pytest.fail(f"restore-backup never ran to the end: {paused}")
    assert paused == ["replace", "rename", "rename", "unlink"]  # journal, old aside, new in place, journal gone
    restored_at = time.time()
    writer.wait_for_acks(1, after=restored_at)
    acked, out = writer.finish()
    assert not [line for line in out.splitlines() if line.startswith("ERR")], out
    after = {mid for mid, at in acked if at > restored_at}
    assert after and after <= _ids_in(home / "default")
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        assert len(store) >= 30
    everywhere = _ids_in(home / "default")
    for aside in home.glob(".default.replaced-*"):
        everywhere |= _ids_in(aside)
    lost = [mid for mid, _ in acked if mid not in everywhere]
    crashes = len([line for line in out.splitlines() if line.startswith("LOCKERR")])
    print(f"restore killed before: {paused}; acknowledged: {len(acked)}, lost: {len(lost)}, lock errors: {crashes}")
    assert not lost
    assert not list(home.glob(".default.swap.json"))


def test_a_writer_waiting_for_the_lock_survives_a_restore_killed_between_its_renames(cli, home: Path, tmp_path: Path):
    import fcntl
    import json
    import threading
    import time

    from memctl.files import SWAP_JOURNAL

    cli("save", "the store before the restore")
    folder = home / "default"
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as writer:
        held = os.open(folder / ".write.lock", os.O_RDWR)
        fcntl.flock(held, fcntl.LOCK_EX)  # the restore's hold on the store's write lock
        outcome: list[BaseException | list[str]] = []

        def write() -> None:
            try:
                outcome.append(writer.add(["written while the restore ran"]))
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                outcome.append(exc)

        thread = threading.Thread(target=write)
        thread.start()
        while writer._lock is None:  # past its check for a replaced store: it waits for the lock now
            time.sleep(0.01)
        # what swap_in leaves when killed between its renames: the journal, the old folder aside, no stage
        aside = home / ".default.replaced-killed"
        journal = home / SWAP_JOURNAL.format("default")
        payload = {"stage": ".default.restore-gone", "aside": aside.name, "marker": "memories.sqlite"}
        journal.write_text(json.dumps({**payload, "keep_aside": True}))
        os.rename(folder, aside)
        os.close(held)  # the kill releases the lock
        thread.join(120)
        assert not thread.is_alive()
        [result] = outcome
        if isinstance(result, BaseException):
            raise result
    assert not journal.exists() and "written while the restore ran" in {m.text for m, _ in _memories(home)}


def _memories(home: Path) -> list:
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        return list(store.iter_all())


KILL_BETWEEN_RENAMES = r"""
import os, sys
from pathlib import Path
import memctl.files as files
calls = []
real = os.rename
def rename(src, dst):
    calls.append(src)
    if len(calls) == int(sys.argv[3]):
        os._exit(9)  # killed right here
    real(src, dst)
files.os.rename = rename
from memctl.lifecycle.backup import backup_store, restore_backup
if sys.argv[1] == "restore":
    restore_backup(Path(sys.argv[2]), Path(sys.argv[4]), force=True)
else:
    backup_store(Path(sys.argv[4]), Path(sys.argv[2]), force=True)
"""


@pytest.mark.parametrize("kind", ["restore", "backup"])
@pytest.mark.parametrize("at", [1, 2])
def test_kill_between_the_renames_of_a_swap(cli, home: Path, tmp_path: Path, kind: str, at: int):
    """A kill after the first or second rename of restore-backup / backup --force: the store (or the
    backup) is found whole on the next use, never missing, never silently empty."""
    import subprocess
    import sys

    cli("save", "kept memory one")
    assert cli("backup", tmp_path / "bk").code == 0
    cli("save", "kept memory two")
    store, backup = home / "default", tmp_path / "bk"
    proc = subprocess.run(
        [sys.executable, "-c", KILL_BETWEEN_RENAMES, kind, str(backup), str(at), str(store)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 9, proc.stderr
    if kind == "restore":
        with memctl.open_store(home, "default", embedder=FakeEmbedder()) as opened:
            texts = {m.text for m, _ in opened.iter_all()}
        # first rename done: the swap is undone (old store back) or finished (the backup's content)
        assert texts in ({"kept memory one", "kept memory two"}, {"kept memory one"})
    else:
        assert cli("backup", backup, "--force").code == 0  # the next backup recovers, then replaces
        assert sorted(p.name for p in tmp_path.glob(".bk.*") if p.is_dir()) == []
        assert cli("restore-backup", backup, "-s", "copy").code == 0
        assert cli("stats", "-s", "copy", "--json").json["stores"][0]["count"] == 2
    assert not (store.parent / ".default.swap.json").exists()


# -- 3. JSONL lines end at \n only: every line separator and control character round-trips ---------
ODD_CHARACTERS = (
    "".join(chr(c) for c in range(0x20))
    + "\x7f\x85\u2028\u2029\x1c\x1d\x1e\x0b\x0c\r\r\n"
    + "\ufeff\u200b\ud7ff\ue000\U0001f600 end"
)


def test_every_line_separator_and_control_character_round_trips(backend: str, cli, tmp_path: Path):
    odd = ODD_CHARACTERS if backend == "embedded" else ODD_CHARACTERS.replace("\x00", "")  # PostgreSQL: no NUL
    text = "odd " + odd
    metadata = {"note": odd, odd[1:9]: "key"}
    with memctl.open_store(None, "default", embedder=FakeEmbedder()) as store:
        [mid] = store.add([text], metadata=[metadata])
    exported = cli("export", "-o", tmp_path / "out.jsonl")
    assert exported.code == 0, exported.err
    raw = (tmp_path / "out.jsonl").read_bytes()
    assert raw.count(b"\n") == 2 and "\u2028".encode() not in raw and "\x85".encode() not in raw
    assert len(raw.decode("utf-8").splitlines()) == 2  # any line-splitting reader sees two lines
    stdout = cli("export").out  # stdout carries the same bytes
    assert stdout.encode("utf-8").count(b"\n") == 2
    result = cli("import", tmp_path / "out.jsonl", "-s", "copy", "--json")
    assert result.code == 0, result.err
    with memctl.open_store(None, "copy", embedder=FakeEmbedder()) as copy:
        memory = copy.get_one(mid)
    assert memory.text.encode("utf-8") == text.encode("utf-8")
    assert memory.metadata == metadata


def test_an_old_export_with_raw_line_separators_imports(cli, tmp_path: Path):
    """Files written before the export escaped U+2028 (raw inside the JSON string) import too."""
    record = json.dumps({"text": "a\u2028b\u2029c\x85d"}, ensure_ascii=False)
    (tmp_path / "old.jsonl").write_bytes(record.encode("utf-8") + b"\n")
    assert cli("import", tmp_path / "old.jsonl").code == 0
    assert cli("list", "--json").json["items"][0]["text"] == "a\u2028b\u2029c\x85d"


def test_postgres_refuses_nul_characters_clearly(cli):
    from tests.pg import pg_schema

    with pg_schema() as url:
        result = cli("--store", url, "save", "nul \x00 inside")
    assert result.code == 2 and "NUL" in result.err


# -- 4. re-running an import adds nothing twice -------------------------------------------------------
def _plain_jsonl(path: Path, count: int) -> Path:
    path.write_text(
        "".join(
            json.dumps({"text": f"plain memory number {i}", "metadata": {"i": i % 3}}) + "\n" for i in range(count)
        ),
        encoding="utf-8",
    )
    return path


def test_reimporting_plain_jsonl_skips_identical_memories(backend: str, cli, tmp_path: Path):
    source = _plain_jsonl(tmp_path / "plain.jsonl", 120)
    counts = []
    for _ in range(3):
        result = cli("import", source, "--batch-size", "50", "--json")
        assert result.code == 0, result.err
        counts.append(
            (result.json["imported"], result.json["duplicates"], cli("stats", "--json").json["stores"][0]["count"])
        )
    assert counts == [(120, 0, 120), (0, 120, 120), (0, 120, 120)]
    again = cli("import", source, "--allow-duplicates", "--json").json
    assert again["imported"] == 120 and cli("stats", "--json").json["stores"][0]["count"] == 240


def test_identity_is_text_area_and_metadata(cli, tmp_path: Path):
    lines = [
        {"text": "same text"},
        {"text": "same text"},
        {"text": "same text", "area": "solutions"},
        {"text": "same text", "metadata": {"k": 1}},
        {"text": "same text", "metadata": {"k": 2}},
    ]
    (tmp_path / "f.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    doc = cli("import", tmp_path / "f.jsonl", "--json").json
    assert (doc["imported"], doc["duplicates"]) == (4, 1)


def test_reimport_after_a_kill_mid_import_completes_without_duplicates(cli, home: Path, tmp_path: Path):
    import signal
    import subprocess
    import sys
    import time

    source = _plain_jsonl(tmp_path / "big.jsonl", 3000)
    proc = subprocess.Popen(
        [sys.executable, "-m", "memctl", "import", str(source), "--batch-size", "100"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if (home / "default" / "memories.sqlite").exists():
            with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
                if len(store) >= 300:
                    break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    result = cli("import", source, "--json")
    assert result.code == 0, result.err
    assert result.json["duplicates"] >= 300
    assert cli("stats", "--json").json["stores"][0]["count"] == 3000


def test_ctrl_c_during_import_says_how_many_were_imported(
    cli, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from memctl.store.embedded import EmbeddedStore

    source = _plain_jsonl(tmp_path / "plain.jsonl", 500)
    real = EmbeddedStore.insert_records
    calls = []

    def interrupted(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(EmbeddedStore, "insert_records", interrupted)
    result = cli("import", source, "--batch-size", "100")
    assert result.code == 130
    assert "200 memories" in result.err and "were imported" in result.err
    monkeypatch.setattr(EmbeddedStore, "insert_records", real)
    assert cli("import", source, "--json").json["imported"] == 300


# -- 5. import/export integrity ----------------------------------------------------------------------
def _export(cli, tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "export.jsonl"
    assert cli("export", "-o", out, *args).code == 0
    return out


@pytest.mark.parametrize("stamp", ["yesterday", "2025-13-01T00:00:00+00:00", "", "12:00"])
def test_import_refuses_unreadable_timestamps(cli, tmp_path: Path, stamp: str):
    (tmp_path / "f.jsonl").write_text(
        json.dumps({"text": "ok"}) + "\n" + json.dumps({"text": "when?", "created_at": stamp}) + "\n", encoding="utf-8"
    )
    result = cli("import", tmp_path / "f.jsonl")
    assert result.code == 2 and "f.jsonl:2" in result.err and "created_at" in result.err
    assert stored_count(cli) == 0  # nothing imported (and no empty store made)


def test_naive_timestamps_are_read_as_utc(cli, tmp_path: Path):
    (tmp_path / "f.jsonl").write_text(
        json.dumps({"text": "naive", "created_at": "2024-05-01T10:00:00"}) + "\n", encoding="utf-8"
    )
    assert cli("import", tmp_path / "f.jsonl").code == 0
    assert (
        cli("list", "--json").json["items"][0]["created_at"] == "2024-05-01T10:00:00.000+00:00"
    )  # the stored UTC form (validate.utc_iso)


def test_import_refuses_an_unknown_format_version(cli, tmp_path: Path):
    cli("save", "a memory")
    out = _export(cli, tmp_path)
    lines = out.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header["memctl_export"] = 3  # 1 and 2 (an export holding superseded versions) are read
    out.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    result = cli("import", out, "-s", "copy")
    assert result.code == 2 and "format 3" in result.err


@pytest.mark.parametrize("cut", ["lines", "mid-line"])
def test_a_truncated_export_exits_4_with_a_message(backend: str, cli, tmp_path: Path, cut: str):
    for i in range(10):
        cli("save", f"memory {i} to export")
    out = _export(cli, tmp_path)
    data = out.read_bytes()
    if cut == "lines":
        out.write_bytes(b"".join(data.splitlines(keepends=True)[:7]))  # header + 6 records
    else:
        out.write_bytes(data[: len(data) - 20])  # the last record cut off mid-line
    result = cli("import", out, "-s", "copy", "--json")
    assert result.code == 4
    assert "truncated" in result.err and "10" in result.err
    doc = result.json
    assert doc["truncated"] and doc["expected"] == 10 and doc["imported"] == (6 if cut == "lines" else 9)


def test_export_area_header_counts_that_area(backend: str, cli, tmp_path: Path):
    cli("save", "a main memory")
    cli("save", "a solution", "--area", "solutions")
    cli("save", "another solution", "--area", "solutions")
    out = _export(cli, tmp_path, "--area", "solutions")
    lines = out.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["count"] == 2 and len(lines) == 3
    assert cli("import", out, "-s", "copy", "--json").json["truncated"] is False


def test_export_of_a_bogus_area_writes_nothing_to_stdout(cli):
    cli("save", "a memory")
    result = cli("export", "--area", "bogus")
    assert result.code == 2 and result.out == ""


def test_export_failing_half_way_writes_nothing_to_stdout(cli, monkeypatch: pytest.MonkeyPatch):
    from memctl.errors import StoreError
    from memctl.store.embedded import EmbeddedStore

    for i in range(3):
        cli("save", f"memory {i}")
    real = EmbeddedStore.iter_all

    def failing(self, **kwargs):
        yield next(real(self, **kwargs))
        raise StoreError("disk read failed")

    monkeypatch.setattr(EmbeddedStore, "iter_all", failing)
    result = cli("export")
    assert result.code == 1 and result.out == ""


# -- 11. cron jobs carry on past a damaged store -----------------------------------------------------
def test_all_subdirs_export_and_stats_carry_on_past_a_corrupt_store(cli, home: Path, tmp_path: Path):
    for name in ("alpha", "broken", "zulu"):
        cli("save", f"memory of {name}", "-s", name)
    (home / "broken" / "memories.sqlite").write_bytes(b"this is not a database" * 100)
    for name in ("memories.sqlite-wal", "memories.sqlite-shm"):
        (home / "broken" / name).unlink(missing_ok=True)
    result = cli("export", "--all-subdirs", "-o", tmp_path / "out", "--json")
    assert result.code == 4 and "broken" in result.err
    assert [s["subdir"] for s in result.json["subdirs"]] == ["alpha", "zulu"]
    assert [f["subdir"] for f in result.json["failed"]] == ["broken"]
    assert (tmp_path / "out" / "zulu.jsonl").is_file()
    stats = cli("stats", "--all-subdirs", "--json")
    assert stats.code == 4 and "broken" in stats.err
    assert [s["subdir"] for s in stats.json["stores"]] == ["alpha", "zulu"]


# -- 6. writes through links -------------------------------------------------------------------------
def test_export_through_a_symlink_writes_its_target(cli, tmp_path: Path):
    cli("save", "a memory to export")
    real = tmp_path / "dotfiles" / "memories.jsonl"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    chain = tmp_path / "chain.jsonl"
    chain.symlink_to(link)
    assert cli("export", "-o", chain).code == 0
    assert link.is_symlink() and chain.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text(encoding="utf-8").splitlines()[1])["text"] == "a memory to export"
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "new-target.jsonl")
    assert cli("export", "-o", dangling).code == 0
    assert dangling.is_symlink() and (tmp_path / "new-target.jsonl").is_file()


def test_config_set_through_a_symlinked_config_keeps_the_link(cli, tmp_path: Path):
    real = tmp_path / "dotfiles" / "memctl.yaml"
    real.parent.mkdir()
    real.write_text("search_limit: 3\n")
    user = tmp_path / "no-user-config.yaml"  # the user config file the tests point MEMCTL_CONFIG at
    user.unlink()  # conftest writes an empty one
    user.symlink_to(real)
    assert cli("config", "set", "search_limit", "7").code == 0
    assert user.is_symlink() and "search_limit: 7" in real.read_text()


@pytest.mark.parametrize("target", ["/dev/null", "fifo", "folder"])
def test_export_refuses_devices_fifos_and_folders(cli, tmp_path: Path, target: str):
    cli("save", "a memory")
    if target == "fifo":
        path = tmp_path / "pipe"
        os.mkfifo(path)
    elif target == "folder":
        path = tmp_path / "folder"
        path.mkdir()
    else:
        path = Path(target)
    link = tmp_path / "to-target"
    link.symlink_to(path)
    for name in (path, link):
        result = cli("export", "-o", name)
        assert result.code == 2 and "regular file" in result.err
    assert link.is_symlink()
    if target == "/dev/null":
        assert Path("/dev/null").is_char_device()
    elif target == "fifo":
        assert path.is_fifo()


# -- 12. permissions ---------------------------------------------------------------------------------
def test_stores_exports_and_backups_are_private(cli, home: Path, tmp_path: Path):
    import stat

    os.umask(0o022)
    cli("save", "a private memory")
    assert cli("backup", tmp_path / "bk").code == 0
    assert cli("export", "-o", tmp_path / "e.jsonl").code == 0

    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    assert mode(home / "default") == 0o700
    assert mode(home / "default" / "memories.sqlite") == 0o600
    assert mode(tmp_path / "bk") == 0o700
    assert {mode(p) for p in (tmp_path / "bk").iterdir()} == {0o600}
    assert mode(tmp_path / "e.jsonl") == 0o600


def test_import_knowledge_skips_and_lists_file_links_out_of_the_folder(cli, tmp_path: Path):
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:the password file\n")
    folder = tmp_path / "knowledge"
    (folder / "main").mkdir(parents=True)
    (folder / "main" / "notes.md").write_text("# Notes\nowls hunt at night\n")
    (folder / "main" / "passwd.txt").symlink_to(secret)
    (folder / "main" / "alias.md").symlink_to(folder / "main" / "notes.md")  # inside: fine
    doc = cli("import-knowledge", folder, "--json").json
    reasons = {Path(s["path"]).name: s["reason"] for s in doc["skipped"]}
    assert reasons.get("passwd.txt") == "symbolic link leading out of the folder"
    texts = " ".join(m["text"] for m in cli("list", "--json").json["items"])
    assert "password" not in texts and "owls" in texts


# -- 8. the write-ahead log removed or damaged -------------------------------------------------------
SAVE_AND_DIE = r"""
import os, sys, memctl
from memctl.embeddings import FakeEmbedder
store = memctl.open_store(sys.argv[1], "default", embedder=FakeEmbedder())
for i in range(int(sys.argv[2])):
    store.add([f"acknowledged save {i}"])
print("saved", flush=True)
os._exit(0)  # killed: no close, so the WAL keeps the last commits (SQLite checkpoints on a clean close)
"""


def _save_and_die(home: Path, count: int) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", SAVE_AND_DIE, str(home), str(count)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout.strip() == "saved", proc.stderr


@pytest.mark.parametrize("damage", ["remove", "zero", "flip"])
def test_a_removed_or_damaged_wal_is_reported_not_answered_from(cli, home: Path, damage: str):
    cli("save", "an early memory")  # checkpointed into the database when the CLI closed it
    _save_and_die(home, 50)
    wal = home / "default" / "memories.sqlite-wal"
    assert wal.stat().st_size > 0
    if damage == "remove":
        wal.unlink()
    elif damage == "zero":
        wal.write_bytes(b"")
    else:  # one flipped byte in the first frame's header: SQLite drops that frame and every later one
        data = bytearray(wal.read_bytes())
        data[40] ^= 0xFF
        wal.write_bytes(bytes(data))
    (home / "default" / "memories.sqlite-shm").unlink(missing_ok=True)
    result = cli("stats", "--json")
    assert result.code == 1
    message = result.json["error"]["message"]
    assert "lost its last" in message and "memories.sqlite-wal" in message
    assert ".commits" in result.json["error"]["hint"]
    assert cli("list", "--json").code == 1  # every command, not just stats
    (home / "default" / ".commits").unlink()  # the user accepts what is left
    assert cli("stats", "--json").json["stores"][0]["count"] < 51


def test_no_false_alarm_across_normal_use(cli, home: Path, tmp_path: Path):
    _save_and_die(home, 5)  # a killed writer: its WAL is still there, intact
    for i in range(3):
        cli("save", f"memory {i}")
    assert cli("backup", tmp_path / "bk").code == 0
    cli("save", "after the backup")
    assert cli("restore-backup", tmp_path / "bk", "--force").code == 0  # an older store, on purpose
    assert cli("stats", "--json").json["stores"][0]["count"] == 8
    cli("save", "after the restore")
    assert cli("purge", "--all", "--yes").code == 0
    assert cli("stats", "--json").json["stores"][0]["count"] == 9


# -- 7. kill windows: index rewrite after commit, stale temp files, purge and the shared cache -------
def _cache_hashes(home: Path) -> set[str]:
    import sqlite3

    found: set[str] = set()
    for path in (home / ".cache" / "embeddings").glob("*.sqlite"):
        with sqlite3.connect(path) as db:
            found |= {r[0] for r in db.execute("SELECT hash FROM cache")}
    return found


def test_disk_full_while_the_index_is_rewritten_does_not_fail_a_committed_save(
    home: Path, monkeypatch: pytest.MonkeyPatch
):
    import faiss

    def full(index, path):
        Path(path).write_bytes(b"partial")
        raise RuntimeError("Error: 'ret == (n)' failed: write error: No space left on device")

    real = faiss.write_index
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        monkeypatch.setattr(faiss, "write_index", full)
        [mid] = store.add(["saved while the disk was full"])  # no exception: the memory is committed
        assert len(store) == 1
        assert [h.id for h in store.search("disk was full", threshold=0.0)] == [mid]
        assert not list((home / "default").glob(".index.faiss.*"))
        monkeypatch.setattr(faiss, "write_index", real)
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        assert len(store) == 1 and store.search("disk was full", threshold=0.0)[0].id == mid


def test_stale_temp_files_are_not_counted_and_are_cleaned(cli, home: Path):
    cli("save", "a memory")
    before = cli("stats", "--json").json["stores"][0]["bytes"]
    stale = home / "default" / ".index.faiss.k1ll3d"
    stale.write_bytes(b"x" * 1_000_000)
    staging = home / ".default.restore-deadbeef"
    staging.mkdir()
    (staging / "memories.sqlite").write_bytes(b"y" * 1000)
    assert cli("stats", "--json").json["stores"][0]["bytes"] == before
    assert cli("reindex", "--index-only").code == 0
    assert not stale.exists()
    assert cli("backup", home.parent / "bk").code == 0
    assert cli("restore-backup", home.parent / "bk", "--force").code == 0
    assert not staging.exists()


def test_purge_keeps_cache_entries_other_stores_use(cli, home: Path):
    from memctl.embeddings import content_hash

    shared, own = "a text both stores hold", "a text only store one held"
    ids = {}
    for name in ("one", "two"):
        ids[name] = json.loads(cli("save", shared, "-s", name, "--json").out)["ids"][0]
    own_id = json.loads(cli("save", own, "-s", "one", "--json").out)["ids"][0]
    assert {content_hash(shared), content_hash(own)} <= _cache_hashes(home)
    cli("delete", ids["one"], own_id, "-s", "one", "--yes")
    assert cli("purge", "--all", "--yes", "-s", "one").code == 0
    cache = _cache_hashes(home)
    assert content_hash(shared) in cache  # store two still uses it
    assert content_hash(own) not in cache


def test_an_interrupted_purge_scrubs_its_cache_entries_next_time(cli, home: Path, monkeypatch: pytest.MonkeyPatch):
    from memctl.embeddings import content_hash
    from memctl.store.embedded import EmbeddedStore

    text = "a secret text to purge for good"
    mid = json.loads(cli("save", text, "--json").out)["ids"][0]
    cli("delete", mid, "--yes")
    assert content_hash(text) in _cache_hashes(home)

    def killed(self):
        raise KeyboardInterrupt  # the rows are gone (committed); the scrub never ran

    real = EmbeddedStore.compact
    monkeypatch.setattr(EmbeddedStore, "compact", killed)
    assert cli("purge", "--all", "--yes").code == 130
    monkeypatch.setattr(EmbeddedStore, "compact", real)
    assert content_hash(text) in _cache_hashes(home)
    assert cli("history", "--json").json["entries"] == []
    doc = cli("purge", "--all", "--yes", "--json").json  # nothing left to purge, but the scrub is owed
    assert doc["cache_entries"] == 1 and content_hash(text) not in _cache_hashes(home)
    assert not list((home / ".cache" / "embeddings").glob(".purge-pending-*"))


# -- 10. PostgreSQL: reconnect once per call ---------------------------------------------------------
def _kill_backend(url: str, store) -> None:
    """What a server restart does to an open connection: the server ends it."""
    import psycopg

    pid = store.conn.info.backend_pid
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_long_lived_postgres_store_reconnects_after_its_connection_is_closed():
    from tests.pg import pg_schema

    with pg_schema() as url, memctl.open_store(None, "default", store=url, embedder=FakeEmbedder()) as store:
        [first] = store.add(["before the restart"])
        _kill_backend(url, store)
        assert len(store) == 1  # a read: retried on a new connection
        _kill_backend(url, store)
        [second] = store.add(["after the restart"])  # a write: its transaction begins on a new connection
        _kill_backend(url, store)
        assert {h.id for h in store.search("restart", threshold=0.0)} == {first, second}
        _kill_backend(url, store)
        with store.snapshot():
            assert len(list(store.iter_rows())) == 2


def test_a_failed_reconnect_is_a_clear_error(monkeypatch: pytest.MonkeyPatch):
    import socket

    from tests.pg import pg_schema

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"postgresql://nobody@127.0.0.1:{sock.getsockname()[1]}/none"
    with pg_schema() as url, memctl.open_store(None, "default", store=url, embedder=FakeEmbedder()) as store:
        store.add(["a memory"])
        _kill_backend(url, store)
        monkeypatch.setattr(store, "url", dead)  # the server does not come back
        with pytest.raises(memctl.StoreError, match="lost the connection to PostgreSQL.*could not reconnect"):
            len(store)


# -- 9. limits: a maximum text size, streamed export and import --------------------------------------
def test_a_text_over_the_limit_is_a_clear_error(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MEMCTL_MAX_TEXT_BYTES", "1000")
    result = cli("save", "x" * 1001, "--json")
    assert result.code == 2 and "over the limit of 1,000 bytes" in result.json["error"]["message"]
    assert "max_text_bytes" in result.json["error"]["hint"]
    assert cli("save", "é" * 500).code == 0  # 1,000 bytes: at the limit
    assert cli("save", "é" * 501).code == 2  # 1,002 bytes: characters are not bytes
    (tmp_path / "big.jsonl").write_text(
        json.dumps({"text": "ok"}) + "\n" + json.dumps({"text": "y" * 2000}) + "\n", encoding="utf-8"
    )
    result = cli("import", tmp_path / "big.jsonl")
    assert result.code == 2 and "big.jsonl:2" in result.err and "over the limit" in result.err
    mid = cli("list", "--json").json["items"][0]["id"]
    assert cli("update", mid, "--text", "z" * 1001).code == 2
    monkeypatch.setenv("MEMCTL_MAX_TEXT_BYTES", "0")  # no limit
    assert cli("save", "x" * 5000).code == 0


def test_the_default_limit_refuses_twenty_megabytes_before_embedding(home: Path):
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        store._embedder = None  # embedding would fail loudly: the limit must come first
        with pytest.raises(memctl.UsageError, match="over the limit"):
            store.add(["m" * 20_000_000])


class LeanEmbedder(FakeEmbedder):
    """The fake model without its bookkeeping (FakeEmbedder keeps every text it saw, for other tests)."""

    def embed(self, texts: list[str]):
        import hashlib

        import numpy as np

        from memctl.embeddings import normalise

        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            out[row] = np.random.default_rng(seed).standard_normal(self.dimension)
        return normalise(out)


def _export_import_peaks(home: Path, tmp_path: Path, count: int, chars: int) -> tuple[int, int, int]:
    import tracemalloc

    from memctl.lifecycle.jsonl import export_to_file, import_jsonl

    text = "s" * chars
    path = tmp_path / f"big{count}-{chars}.jsonl"
    with memctl.open_store(home, f"src{count}-{chars}", embedder=LeanEmbedder()) as store:
        for start in range(0, count, 500):
            store.add([f"{i} {text}" for i in range(start, start + 500)])
        tracemalloc.start()
        export_to_file(store, path)
        _, export_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    with memctl.open_store(home, f"copy{count}-{chars}", embedder=LeanEmbedder()) as copy, open(path, "rb") as f:
        tracemalloc.start()
        report = import_jsonl(copy, path, f, batch_size=200)
        _, import_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert report.imported == count
    return path.stat().st_size, export_peak, import_peak


def test_export_and_import_stream(home: Path, tmp_path: Path):
    """Peak memory does not grow with the file. Export: rows are read 1,000 at a time, so from 2,000
    memories on the peak stays. Import: it grows only by the vector index the store holds in memory
    anyway (1.5 kB a memory), not by the 12 kB texts."""
    small = _export_import_peaks(home, tmp_path, 2000, 3000)
    large = _export_import_peaks(home, tmp_path, 4000, 3000)
    print(
        f"3 kB texts: files {small[0] / 1e6:.1f} / {large[0] / 1e6:.1f} MB; peak Python memory of the export "
        f"{small[1] / 1e6:.1f} / {large[1] / 1e6:.1f} MB"
    )
    assert large[1] - small[1] < (large[0] - small[0]) / 4
    small = _export_import_peaks(home, tmp_path, 1000, 12000)
    large = _export_import_peaks(home, tmp_path, 2000, 12000)
    print(
        f"12 kB texts: files {small[0] / 1e6:.1f} / {large[0] / 1e6:.1f} MB; peak Python memory of the import "
        f"{small[2] / 1e6:.1f} / {large[2] / 1e6:.1f} MB"
    )
    assert large[2] - small[2] < (large[0] - small[0]) / 4 and large[2] < large[0] / 2


def test_postgres_restore_backup_with_a_writer_keeping_its_store_open(
    cli, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """On PostgreSQL the restore is one transaction during which writers wait: what a live writer
    saves after it lands in the restored store; what it saved before is in the kept backup folder."""
    import sqlite3
    import time

    from tests.pg import pg_schema

    with pg_schema() as url:
        monkeypatch.setenv("MEMCTL_STORE", url)
        cli("save", "memory in the backup")
        assert cli("backup", tmp_path / "bk").code == 0
        writer = _Writer(home, tmp_path)
        writer.wait_for_acks(20)
        result = cli("restore-backup", tmp_path / "bk", "--force", "--json")
        assert result.code == 0, result.err
        restored_at = time.time()
        writer.wait_for_acks(1, after=restored_at)
        acked, out = writer.finish()
        assert not [line for line in out.splitlines() if line.startswith(("ERR", "LOCKERR"))], out
        with memctl.open_store(None, "default", embedder=FakeEmbedder()) as store:
            final = {m.id for m, _ in store.iter_all()}
        with sqlite3.connect(Path(result.json["kept_old"]) / "memories.sqlite") as db:
            kept = {r[0] for r in db.execute("SELECT id FROM memories")}
        after = {mid for mid, at in acked if at > restored_at}
        assert after and after <= final
        assert not [mid for mid, _ in acked if mid not in final | kept]
