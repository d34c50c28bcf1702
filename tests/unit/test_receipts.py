"""Removal receipts: `forget`, `delete` and `purge` with `--verify` prove the removed texts cannot be recalled,
on both backends, and a receipt that cannot prove it says where the text still is (exit 4)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

SECRET = "The vault code is 4417 and lives in the blue binder"
OTHER = "User prefers dark mode in every editor"


def _locations(doc: dict) -> dict[str, dict]:
    return doc["receipt"]["locations"]


def _cache_hashes(home: Path) -> set[str]:
    found: set[str] = set()
    for path in (home / ".cache" / "embeddings").glob("*.sqlite"):
        with sqlite3.connect(path) as db:
            found |= {r[0] for r in db.execute("SELECT hash FROM cache")}
    return found


def _recall_count(cli, text: str) -> int:
    hits = 0
    for mode in ("dense", "keyword", "hybrid"):
        result = cli("load", text, "--mode", mode, "--threshold", "0", "--json")
        hits += sum(1 for r in result.json.get("results", []) if r["text"] == text) if result.code == 0 else 0
    return hits


def test_forget_verify_proves_the_text_is_gone_and_names_what_history_keeps(backend, cli, home: Path):
    from memctl.embeddings import content_hash

    assert cli("save", SECRET).code == 0 and cli("save", OTHER).code == 0
    assert content_hash(SECRET) in _cache_hashes(home)
    doc = cli("forget", SECRET, "--exact", "--yes", "--verify", "--json").json
    receipt = doc["receipt"]
    assert receipt["verified"] is True and receipt["operation"] == "forget" and receipt["removed"] == 1
    for where in ("live_rows", "vector_index", "keyword_index", "embedding_cache"):
        assert _locations(doc)[where] == {"clear": True, "checked": True, "required": True, "found": []}, where
    # history and the archive keep it for `restore` until purge: said, not counted against the receipt
    assert _locations(doc)["history"]["found"] == [doc["deleted"][0]["id"]]
    assert _locations(doc)["history"]["required"] is False
    assert content_hash(SECRET) not in _cache_hashes(home)  # the cached vector of the text is dropped
    assert content_hash(OTHER) in _cache_hashes(home)  # and only that one
    assert _recall_count(cli, SECRET) == 0


def test_delete_verify_with_cascade_and_plain_output(backend, cli):
    ids = [cli("save", text, "--json").json["ids"][0] for text in (SECRET, OTHER)]
    result = cli("delete", ids[0], "--verify")
    assert result.code == 0, result.err
    assert "verified: 1 removed texts are in none of: live_rows, vector_index, keyword_index, embedding_cache" in (
        result.err
    )
    assert _recall_count(cli, SECRET) == 0 and _recall_count(cli, OTHER) == 3


def test_delete_verify_fails_when_the_same_text_is_still_stored(backend, cli):
    """A duplicate under another id keeps the text recallable: the receipt says so, exit 4, deletion kept."""
    first = cli("save", SECRET, "--json").json["ids"][0]
    second = cli("save", SECRET, "--json").json["ids"][0]
    result = cli("delete", first, "--verify", "--json")
    assert result.code == 4, result.err
    assert result.json["deleted"] == [first]
    assert result.json["receipt"]["verified"] is False
    assert _locations(result.json)["live_rows"]["found"] == [second]
    assert "NOT verified: a removed text is still in live_rows" in result.err


def test_purge_verify_covers_history_and_archive(backend, cli, home: Path):
    ident = cli("save", SECRET, "--json").json["ids"][0]
    assert cli("update", ident, "--text", "The vault code changed").code == 0
    assert cli("delete", ident).code == 0
    doc = cli("purge", "--all", "--yes", "--verify", "--json").json
    receipt = doc["receipt"]
    assert receipt["verified"] is True and receipt["operation"] == "purge" and receipt["removed"] == 2
    assert all(loc["clear"] and loc["required"] for loc in receipt["locations"].values()), receipt
    assert cli("history", "--json").json["entries"] == []
    assert cli("restore", ident).code != 0


def test_verify_catches_a_stray_vector_in_the_index(cli, home: Path, monkeypatch: pytest.MonkeyPatch):
    """Embedded: an index entry no live row accounts for (a delete the index missed) fails the receipt."""
    from memctl.store.embedded import EmbeddedStore

    ident = cli("save", SECRET, "--json").json["ids"][0]
    cli("save", OTHER)
    real = EmbeddedStore.index_strays

    def missed_delete(self: EmbeddedStore) -> dict[str, int]:
        import numpy as np

        index = self.vector_index()
        index.index.add_with_ids(np.ones((1, index.dimension), dtype=np.float32), np.array([10**6]))
        return real(self)

    monkeypatch.setattr(EmbeddedStore, "index_strays", missed_delete)
    result = cli("delete", ident, "--verify", "--json")
    assert result.code == 4
    assert _locations(result.json)["vector_index"]["found"] == ["2 entries of no live memory"]  # memory and file


def test_verify_catches_a_stale_keyword_index(cli, home: Path):
    """Embedded: FTS rows of a deleted memory left behind (its trigger bypassed) fail the receipt."""
    ident = cli("save", SECRET, "--json").json["ids"][0]
    cli("save", OTHER)
    with sqlite3.connect(home / "default" / "memories.sqlite") as db:
        seq = db.execute("SELECT seq FROM memories WHERE id = ?", (ident,)).fetchone()[0]
        db.execute("INSERT INTO memories_fts(rowid, text) VALUES (?, ?)", (seq + 100, SECRET))
    result = cli("delete", ident, "--verify", "--json")
    assert result.code == 4, result.err
    assert _locations(result.json)["keyword_index"]["found"] == ["1 entries of no live memory"]


def test_dry_run_and_no_match_give_no_receipt(backend, cli):
    cli("save", SECRET)
    assert "receipt" not in cli("forget", SECRET, "--exact", "--dry-run", "--verify", "--json").json
    assert cli("forget", "nothing like it", "--exact", "--yes", "--verify", "--json").code == 3
