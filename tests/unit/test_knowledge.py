"""Knowledge folders: readers, area rules, incremental import (edit, delete, rename), failures, dry run,
crash safety, and reindex after a kill.

Tests that take `backend` run on both backends: the import state in knowledge_import.json, and in
PostgreSQL's memctl_knowledge_files / memctl_knowledge_folders.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import memctl
from memctl.embeddings import FakeEmbedder
from memctl.errors import ModelMismatchError
from memctl.knowledge import sync as knowledge
from memctl.knowledge.readers import markdown_sections, read_chunks, split_text
from memctl.store.layout import KNOWLEDGE_FILE
from tests.conftest import REPO, run_memctl, stored_count
from tests.pg import query

LONG_P1 = "The release train leaves every second Tuesday. " * 8  # ~390 characters
LONG_P2 = "Hotfixes skip the train and go out after two reviews. " * 7
LONG_P3 = "Rollbacks are automatic when the error budget burns too fast. " * 6
GUIDE = (
    f"# Guide\n\nIntro paragraph about the guide.\n\n## Install\n\nRun the installer with care.\n\n"
    f"## Long section\n\n{LONG_P1}\n\n{LONG_P2}\n\n{LONG_P3}\n"
)


def make_pdf(pages: list[str]) -> bytes:
    """A minimal, valid PDF with one line of Helvetica text per page (built by hand)."""
    objects: list[bytes] = [b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    pages_id = 1 + 2 * len(pages) + 1
    kids = []
    for text in pages:
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1")
        content = b"BT /F1 12 Tf 72 720 Td (" + escaped + b") Tj ET"
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
        objects.append(
            b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 1 0 R >> >>"
            b" /Contents %d 0 R >>" % (pages_id, len(objects))
        )
        kids.append(len(objects))
    objects.append(b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % k for k in kids) + b"] /Count %d >>" % len(kids))
    objects.append(b"<< /Type /Catalog /Pages %d 0 R >>" % pages_id)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, len(objects), xref)
    return bytes(out)


# source_path -> (area, file_type, chunks) for the fixture tree
EXPECTED = {
    "readme.txt": ("main", "txt", 1),
    "guide.md": ("main", "md", 4),
    "faq.json": ("main", "json", 3),
    "events.jsonl": ("main", "jsonl", 2),
    "table.csv": ("main", "csv", 3),
    "page.html": ("main", "html", 1),
    "manual.pdf": ("main", "pdf", 2),
    "main/deep/nested.txt": ("main", "txt", 1),
    "fragments/f.md": ("fragments", "md", 1),
    "solutions/howto/fix.txt": ("solutions", "txt", 1),
}
SKIPPED = {
    ".hidden.txt": "hidden",
    "image.png": "no reader for .png",
    "main/.cache": "hidden",
    "main/.secret.md": "hidden",
    "other": "not an area folder (main, fragments, solutions)",
    "solutions/LICENSE": "no reader for files without an extension",
}


def build_tree(kb: Path) -> Path:
    files = {
        "readme.txt": "memctl knowledge readme: the deploy target is Kubernetes.\n",
        "guide.md": GUIDE,
        "faq.json": json.dumps(
            [
                {"q": "Where are backups?", "a": "In the vault bucket"},
                {"q": "Who is on call?", "a": "The platform team", "tags": ["ops"]},
                "Plain string entry about coffee",
            ]
        ),
        "events.jsonl": '{"event": "deploy", "when": "monday"}\n\n{"event": "freeze", "when": "december"}\n',
        "table.csv": "city,team\nBerlin,platform\nLisbon,data\nOsaka,mobile\n",
        "page.html": (
            "<html><head><title>Runbook  page</title><style>body {color: red}</style>"
            "<script>var secret = 'do not index';</script></head>"
            "<body><h1>Runbook</h1><p>Restart the <b>queue</b> worker first.</p></body></html>"
        ),
        "main/deep/nested.txt": "Nested file in the main area folder.\n",
        "fragments/f.md": "The staging database runs PostgreSQL 16.\n",
        "solutions/howto/fix.txt": "Problem: builds hang. Solution: clear the gradle cache.\n",
        "other/ignored.txt": "not imported\n",
        ".hidden.txt": "not imported\n",
        "main/.secret.md": "not imported\n",
        "main/.cache/x.txt": "not imported\n",
        "solutions/LICENSE": "no extension\n",
    }
    for rel, text in files.items():
        (kb / rel).parent.mkdir(parents=True, exist_ok=True)
        (kb / rel).write_text(text, encoding="utf-8")
    (kb / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (kb / "manual.pdf").write_bytes(
        make_pdf(["Page one explains the deploy pipeline", "Page two covers rollbacks (automatic)"])
    )
    return kb


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    return build_tree(tmp_path / "kb")


def run_import(home: Path, kb: Path, embedder: FakeEmbedder | None = None, *, dry_run: bool = False, **overrides):
    with memctl.open_store(
        home, "default", embedder=embedder or FakeEmbedder(), actor="knowledge", overrides=overrides or None
    ) as store:
        folders = knowledge.resolve_folders(store.config, [kb])
        return knowledge.import_knowledge(store, folders, dry_run=dry_run)


def chunks_by_file(home: Path) -> dict[str, list[memctl.Memory]]:
    """source_path -> chunks (in chunk order) as the store holds them."""
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        memories = [m for m, _ in store.iter_all()]
    files: dict[str, list[memctl.Memory]] = {}
    for m in sorted(memories, key=lambda m: m.metadata.get("chunk", 0)):
        files.setdefault(m.metadata["source_path"], []).append(m)
    return files


def saved_state(home: Path) -> dict:
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        return store.knowledge_state()


def state_ids(home: Path) -> dict[str, list[str]]:
    return {rel: entry["ids"] for rel, entry in saved_state(home)["kb"]["files"].items()}


def state_writes(backend: str, home: Path) -> object:
    """Something that changes whenever the saved state is written: the file's mtime, or the rows' xmin."""
    if backend == "embedded":
        return (home / "default" / KNOWLEDGE_FILE).stat().st_mtime_ns
    return query("SELECT folder, source_path, xmin::text FROM memctl_knowledge_files ORDER BY 1, 2")


def lose_state(backend: str, home: Path) -> None:
    if backend == "embedded":
        (home / "default" / KNOWLEDGE_FILE).unlink()
    else:
        query("DELETE FROM memctl_knowledge_files")
        query("DELETE FROM memctl_knowledge_folders")


# -- readers -----------------------------------------------------------------------------
def test_split_text_respects_size_and_overlaps():
    text = "\n\n".join(f"Paragraph {i}. " + "word " * 40 for i in range(12))
    chunks = split_text(text, 300, 60)
    assert len(chunks) > 5 and all(0 < len(c) <= 300 for c in chunks)
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert after[:20] in before  # each chunk starts with the end of the one before
    assert split_text("short", 300, 60) == ["short"] and split_text("  \n ", 300, 60) == []
    assert all(len(c) <= 100 for c in split_text("x" * 1000, 100, 10))  # no separator: hard cuts


def test_markdown_splits_at_headings_not_inside_code():
    sections = markdown_sections(
        "# Title\n\n## Install\n\nRun it.\n\n```sh\n# not a heading\n```\n\nUsage\n=====\n\nUse it.\n"
    )
    assert [h for h, _ in sections] == ["Install", "Usage"]
    assert sections[0][1].startswith("# Title\n\n## Install")  # an empty title travels with the next section
    assert "# not a heading" in sections[0][1]


def test_every_reader(kb: Path):
    def chunks(name: str):
        return read_chunks(name, (kb / name).read_bytes(), 1000, 100)

    assert [c.meta["heading"] for c in chunks("guide.md")] == ["Guide", "Install", "Long section", "Long section"]
    assert [(c.meta["row"], c.text) for c in chunks("faq.json")][2] == (3, "Plain string entry about coffee")
    assert chunks("faq.json")[1].text == 'q: Who is on call?\na: The platform team\ntags: ["ops"]'
    assert [c.meta["row"] for c in chunks("events.jsonl")] == [1, 3]
    assert [(c.meta["row"], c.text) for c in chunks("table.csv")][1] == (2, "city: Lisbon\nteam: data")
    [page] = chunks("page.html")
    assert page.meta["title"] == "Runbook page" and "Restart the queue worker first." in page.text
    assert "secret" not in page.text and "color" not in page.text
    assert [(c.meta["page"], c.text) for c in chunks("manual.pdf")] == [
        (1, "Page one explains the deploy pipeline"),
        (2, "Page two covers rollbacks (automatic)"),
    ]


# -- import ------------------------------------------------------------------------------
def test_import_applies_area_rules_and_metadata(backend, cli, home: Path, kb: Path):
    result = cli("import-knowledge", kb, "--json")
    assert result.code == 0, result.err
    doc = result.json
    assert doc["summary"] == {
        "new": 10,
        "changed": 0,
        "unchanged": 0,
        "renamed": 0,
        "removed": 0,
        "failed": 0,
        "skipped": 6,
    }
    assert {f["source_path"]: (f["area"], f["file_type"], f["chunks"]) for f in doc["files"]} == EXPECTED
    assert {str(Path(s["path"]).relative_to(kb)): s["reason"] for s in doc["skipped"]} == SKIPPED
    total = sum(n for _, _, n in EXPECTED.values())
    assert doc["chunks"] == {"added": total, "deleted": 0, "kept": 0} and doc["embedded"] == total
    stored = chunks_by_file(home)
    assert {rel: (ms[0].area, ms[0].metadata["file_type"], len(ms)) for rel, ms in stored.items()} == EXPECTED
    pdf = stored["manual.pdf"]
    assert [m.metadata["page"] for m in pdf] == [1, 2] and [m.metadata["chunk"] for m in pdf] == [0, 1]
    meta = stored["solutions/howto/fix.txt"][0].metadata
    assert meta["knowledge_source"] is True and meta["source_file"] == "fix.txt"
    assert meta["source_path"] == "solutions/howto/fix.txt" and meta["knowledge_folder"] == "kb"
    assert state_ids(home) == {rel: [m.id for m in ms] for rel, ms in stored.items()}
    hits = cli("load", "Restart the queue worker first", "--filter", "file_type == 'html'", "--json").json
    assert hits["results"][0]["metadata"]["source_path"] == "page.html"


def test_edit_delete_and_rename(backend, home: Path, kb: Path):
    run_import(home, kb)
    before = chunks_by_file(home)
    ids_before = {rel: [m.id for m in ms] for rel, ms in before.items()}
    (kb / "guide.md").write_text(GUIDE.replace("Run the installer with care.", "Run the new installer twice."))
    (kb / "table.csv").unlink()
    (kb / "readme.txt").rename(kb / "main" / "readme-moved.txt")
    (kb / "solutions" / "f.md").write_bytes((kb / "fragments" / "f.md").read_bytes())
    (kb / "fragments" / "f.md").unlink()

    counting = FakeEmbedder()
    report = run_import(home, kb, counting)
    assert counting.calls == [["## Install\n\nRun the new installer twice."]]  # only the edited chunk
    status = {f.source_path: f.status for f in report.files}
    assert status == {
        **{rel: "unchanged" for rel in EXPECTED if rel not in ("readme.txt", "fragments/f.md")},
        "guide.md": "changed",
        "table.csv": "removed",
        "main/readme-moved.txt": "renamed",
        "solutions/f.md": "renamed",
    }  # a rename is one row
    assert report.added == 4 and report.deleted == 4 + 3 and report.embedded == 1 and report.reused == 3

    after = chunks_by_file(home)
    ids_after = {rel: [m.id for m in ms] for rel, ms in after.items()}
    assert ids_after["main/readme-moved.txt"] == ids_before["readme.txt"]  # renamed: same chunks, not re-embedded
    assert ids_after["solutions/f.md"] == ids_before["fragments/f.md"]
    moved = after["solutions/f.md"][0]
    assert moved.area == "solutions" and moved.metadata["source_file"] == "f.md"
    assert len(ids_after["guide.md"]) == 4 and not set(ids_after["guide.md"]) & set(ids_before["guide.md"])
    assert "table.csv" not in ids_after
    for rel in (
        "faq.json",
        "events.jsonl",
        "page.html",
        "manual.pdf",
        "main/deep/nested.txt",
        "solutions/howto/fix.txt",
    ):
        assert ids_after[rel] == ids_before[rel]
    expected_total = sum(n for _, _, n in EXPECTED.values()) - 3
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        assert len(store) == expected_total
        assert store.vector_count() == expected_total
    assert state_ids(home) == ids_after


def test_unchanged_rerun_embeds_nothing_and_writes_nothing(backend, home: Path, kb: Path):
    run_import(home, kb)
    stamp = state_writes(backend, home)
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        history = len(store.history())
    counting = FakeEmbedder()
    report = run_import(home, kb, counting)
    assert counting.calls == []
    assert report.count("unchanged") == len(EXPECTED) and report.added == report.deleted == 0
    assert state_writes(backend, home) == stamp
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        assert len(store.history()) == history


def test_identical_chunks_are_embedded_once(backend, home: Path, tmp_path: Path):
    kb = tmp_path / "kb"
    kb.mkdir()
    for name in ("a.txt", "b.txt", "main/c.txt"):
        (kb / name).parent.mkdir(exist_ok=True)
        (kb / name).write_text("the same paragraph in three files")
    counting = FakeEmbedder()
    report = run_import(home, kb, counting)
    assert counting.calls == [["the same paragraph in three files"]] and report.added == 3


def test_unreadable_files_exit_4_and_keep_their_chunks(backend, cli, home: Path, kb: Path):
    assert cli("import-knowledge", kb).code == 0
    before = chunks_by_file(home)
    (kb / "faq.json").write_text('[{"q": "broken", }')
    (kb / "readme.txt").write_bytes(b"caf\xe9 latin-1 text")
    (kb / "manual.pdf").write_bytes(make_pdf(["x"])[:150])
    (kb / "brand-new.md").write_text("A new file imported despite the broken ones.")
    result = cli("import-knowledge", kb, "--json")
    assert result.code == 4
    failed = {f["source_path"]: f["error"] for f in result.json["files"] if f["status"] == "failed"}
    assert set(failed) == {"faq.json", "readme.txt", "manual.pdf"}
    assert failed["faq.json"].startswith("invalid JSON") and "not UTF-8" in failed["readme.txt"]
    assert "PDF" in failed["manual.pdf"]
    assert f"cannot read {kb / 'faq.json'}: invalid JSON" in result.err
    after = chunks_by_file(home)
    for rel in failed:
        assert [m.id for m in after[rel]] == [m.id for m in before[rel]]
    assert after["brand-new.md"][0].text == "A new file imported despite the broken ones."
    assert result.json["summary"]["new"] == 1 and result.json["summary"]["failed"] == 3


def test_dry_run_changes_nothing(backend, cli, home: Path, kb: Path):
    fresh = cli("import-knowledge", kb, "--dry-run", "--json")
    assert fresh.code == 0 and fresh.json["dry_run"] and fresh.json["summary"]["new"] == len(EXPECTED)
    assert fresh.json["chunks"]["added"] == sum(n for _, _, n in EXPECTED.values())
    assert stored_count(cli) == 0
    assert saved_state(home) == {}
    cli("import-knowledge", kb)
    snapshot = saved_state(home)
    rows = cli("list", "--json", "-n", "100").json["items"]
    (kb / "table.csv").unlink()
    (kb / "guide.md").write_text("# Replaced\n\nAll new.")
    counting = FakeEmbedder()
    report = run_import(home, kb, counting, dry_run=True)
    assert counting.calls == []
    assert {f.source_path: (f.status, f.chunks) for f in report.files if f.status != "unchanged"} == {
        "guide.md": ("changed", 1),
        "table.csv": ("removed", 3),
    }
    assert report.added == 1 and report.deleted == 4 + 3 and report.embedded == 1
    plan = cli("import-knowledge", kb, "--dry-run")
    assert plan.code == 0 and "dry run" in plan.err and "table.csv" in plan.out  # a pipe: records out, summary err
    assert cli("list", "--json", "-n", "100").json["items"] == rows
    assert saved_state(home) == snapshot


def test_changed_chunk_settings_rechunk_every_file(backend, home: Path, kb: Path):
    run_import(home, kb)
    counting = FakeEmbedder()
    report = run_import(home, kb, counting, knowledge_chunk_size=400, knowledge_chunk_overlap=40)
    assert report.count("changed") == len(EXPECTED)
    assert report.embedded > 0 and report.reused > 0  # short chunks kept their text: vectors reused
    assert len(chunks_by_file(home)["guide.md"]) > 4


# -- crash safety ------------------------------------------------------------------------
def test_stale_or_lost_state_is_rebuilt_from_the_store(backend, home: Path, kb: Path):
    run_import(home, kb)
    stale = saved_state(home)
    (kb / "guide.md").write_text("# Short guide\n\nNow one chunk.")
    run_import(home, kb)
    expected = {rel: [m.id for m in ms] for rel, ms in chunks_by_file(home).items()}
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        store.save_knowledge_state(stale)  # as if killed after the commit, before the state write
    counting = FakeEmbedder()
    report = run_import(home, kb, counting)
    assert counting.calls == [] and report.count("unchanged") == len(EXPECTED)
    assert {rel: [m.id for m in ms] for rel, ms in chunks_by_file(home).items()} == expected
    lose_state(backend, home)
    assert run_import(home, kb, counting).count("unchanged") == len(EXPECTED) and counting.calls == []
    assert state_ids(home) == expected


def test_crash_after_a_commit_loses_and_duplicates_nothing(backend, home: Path, kb: Path, monkeypatch):
    monkeypatch.setattr(knowledge, "GROUP_CHUNKS", 3)
    writes = {"n": 0}
    real_write = knowledge._StateWriter.write

    def dies_on_second_write(self):
        writes["n"] += 1
        if writes["n"] == 2:
            raise KeyboardInterrupt  # the second group committed; its json write never happens
        real_write(self)

    monkeypatch.setattr(knowledge._StateWriter, "write", dies_on_second_write)
    with pytest.raises(KeyboardInterrupt):
        run_import(home, kb)
    partial = chunks_by_file(home)
    assert 0 < len(partial) < len(EXPECTED)
    monkeypatch.setattr(knowledge._StateWriter, "write", real_write)
    counting = FakeEmbedder()
    report = run_import(home, kb, counting)
    assert report.count("unchanged") == len(partial) and report.count("new") == len(EXPECTED) - len(partial)
    stored = chunks_by_file(home)
    assert {rel: len(ms) for rel, ms in stored.items()} == {rel: n for rel, (_, _, n) in EXPECTED.items()}
    assert all(stored[rel] == ms for rel, ms in partial.items())  # committed chunks kept as they were


KILLED_IMPORT = """
import sys, time, memctl
from memctl.knowledge import sync as knowledge
from memctl.embeddings import FakeEmbedder
from memctl.store.layout import KNOWLEDGE_FILE
knowledge.GROUP_CHUNKS = 3
class Slow(FakeEmbedder):
    def embed(self, texts):
        time.sleep(0.2)
        return super().embed(texts)
with memctl.open_store(sys.argv[1], "default", embedder=Slow()) as store:
    folders = knowledge.resolve_folders(store.config, [sys.argv[2]])
    knowledge.import_knowledge(store, folders, progress=lambda done, total: print(done, flush=True))
"""


@pytest.mark.integration
@pytest.mark.slow
def test_kill_9_during_import_then_rerun_gives_each_chunk_once(backend, home: Path, tmp_path: Path):
    kb = tmp_path / "kb"
    kb.mkdir()
    for i in range(60):
        (kb / f"note{i:02}.txt").write_text(f"note number {i} about service {i % 7}")
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_IMPORT, str(home), str(kb)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout is not None
    for _ in range(3):
        assert proc.stdout.readline(), "the import ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    committed = len(chunks_by_file(home))
    assert 9 <= committed < 60
    counting = FakeEmbedder()
    report = run_import(home, kb, counting)
    assert report.count("new") == 60 - committed and sum(len(c) for c in counting.calls) == 60 - committed
    stored = chunks_by_file(home)
    assert sorted(stored) == sorted(f"note{i:02}.txt" for i in range(60))
    assert all(len(ms) == 1 for ms in stored.values())
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        assert len(store) == 60 and store.vector_count() == 60


KILLED_REINDEX = """
import sys, time, memctl
from memctl.embeddings import FakeEmbedder
from memctl.store.layout import KNOWLEDGE_FILE
class Slow(FakeEmbedder):
    def embed(self, texts):
        time.sleep(0.2)
        return super().embed(texts)
with memctl.open_store(sys.argv[1], "default", embedder=Slow(64)) as store:
    store.reindex(batch_size=10, progress=lambda done, total: print(done, flush=True))
"""


@pytest.mark.integration
@pytest.mark.slow
def test_kill_9_during_reindex_then_rerun_finishes_it(backend, home: Path, kb: Path):
    run_import(home, kb, FakeEmbedder(384))
    with memctl.open_store(home, "default", embedder=FakeEmbedder(384)) as store:
        store.add([f"memory {i} about topic {i % 9}" for i in range(80)])
        total = len(store)
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_REINDEX, str(home)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout is not None
    done = [int(proc.stdout.readline()) for _ in range(3)][-1]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    with memctl.open_store(home, "default", embedder=FakeEmbedder(64)) as store:
        with pytest.raises(ModelMismatchError, match="interrupted"):
            store.search("memory 3", threshold=0.0)
        remaining = store.reindex(batch_size=10)
        assert done <= total - remaining < total  # resumed after the last committed batch
        assert store.model_info() == {"provider": "fake", "model": "hash-64", "dimension": 64}
        assert store.vector_count() == total
        assert {len(blob) for _, blob in store.iter_all(with_vectors=True)} == {64 * 4}
        assert store.search("memory 33 about topic 6", threshold=0.0)[0].text == "memory 33 about topic 6"
    counting = FakeEmbedder(64)
    report = run_import(home, kb, counting)  # the knowledge mirror survives a reindex
    assert report.count("unchanged") == len(EXPECTED) and counting.calls == []


# -- configuration and CLI ---------------------------------------------------------------
def test_configured_folders_relative_to_the_config_file(cli, home: Path, kb: Path):
    assert cli("import-knowledge").code == 2  # nothing given, nothing configured
    (home / "default").mkdir(parents=True, exist_ok=True)
    relative = os.path.relpath(kb, home / "default")
    (home / "default" / "config.yaml").write_text(f"knowledge_dirs: [{json.dumps(relative)}]\n")
    doc = cli("import-knowledge", "--json").json
    assert doc["folders"] == [{"name": "kb", "path": str(kb.resolve())}] and doc["summary"]["new"] == len(EXPECTED)


def test_usage_errors(backend, cli, tmp_path: Path, monkeypatch):
    assert cli("import-knowledge", tmp_path / "missing").code == 2
    (tmp_path / "a" / "kb").mkdir(parents=True)
    (tmp_path / "b" / "kb").mkdir(parents=True)
    clash = cli("import-knowledge", tmp_path / "a" / "kb", tmp_path / "b" / "kb", "--json")
    assert clash.code == 2 and "both named 'kb'" in clash.json["error"]["message"]
    assert cli("import-knowledge", tmp_path / "a" / "kb").code == 0  # an empty folder is fine
    monkeypatch.setenv("MEMCTL_KNOWLEDGE_CHUNK_OVERLAP", "900")
    assert "knowledge_chunk_overlap" in cli("import-knowledge", tmp_path / "a" / "kb").err


def test_json_document_and_other_folders(backend, cli, tmp_path: Path, kb: Path):
    other = tmp_path / "faq"
    other.mkdir()
    (other / "q.txt").write_text("A question and its answer")
    assert cli("import-knowledge", other).code == 0
    doc = cli("import-knowledge", kb, "--json").json
    assert set(doc) == {
        "subdir",
        "folders",
        "dry_run",
        "summary",
        "chunks",
        "embedded",
        "reused",
        "files",
        "skipped",
        "other_folders",
    }
    assert doc["other_folders"] == ["faq"]
    assert set(doc["files"][0]) == {
        "folder",
        "source_path",
        "path",
        "area",
        "file_type",
        "status",
        "chunks",
        "error",
        "renamed_from",
    }
    assert cli("list", "--filter", "knowledge_folder == 'faq'", "--json").json["total"] == 1


# -- the real model ----------------------------------------------------------------------
@pytest.mark.integration
def test_knowledge_after_switching_fake_to_real_model(home: Path, kb: Path, monkeypatch):
    monkeypatch.delenv("MEMCTL_EMBEDDING_PROVIDER")  # run_memctl merges os.environ into env
    fake = {**os.environ, "MEMCTL_HOME": str(home), "MEMCTL_EMBEDDING_PROVIDER": "fake"}
    real = {k: v for k, v in fake.items() if k != "MEMCTL_EMBEDDING_PROVIDER"}
    assert run_memctl("import-knowledge", str(kb), env=fake).code == 0
    refused = run_memctl("load", "how do rollbacks work", "--json", env=real)
    assert refused.code == 1 and "reindex" in refused.json["error"]["hint"]
    (kb / "new.md").write_text("Rollbacks happen automatically when the error budget burns too fast.")
    blocked = run_memctl("import-knowledge", str(kb), "--json", env=real)
    assert blocked.code == 1 and "reindex" in blocked.json["error"]["hint"]
    fixed = run_memctl("reindex", "--json", env=real)
    assert fixed.code == 0 and fixed.json["count"] == sum(n for _, _, n in EXPECTED.values())
    doc = run_memctl("import-knowledge", str(kb), "--json", env=real).json
    assert doc["summary"]["new"] == 1 and doc["summary"]["unchanged"] == len(EXPECTED) and doc["embedded"] == 1
    found = run_memctl("load", "what happens when the error budget burns", "--json", env=real).json
    assert found["results"][0]["metadata"]["source_path"] in {"new.md", "guide.md"}
    assert found["results"][0]["score"] >= 0.7
