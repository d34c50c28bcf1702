"""Issue #35 items 4 and 5: `reindex --index-only` on a full disk, and `migrate` to PostgreSQL of texts and
history holding U+0000 — each a clean error and a documented exit code, nothing stored lost or half-written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_fuzz_inputs import disk_left, tmpfs


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "plain"])
def test_reindex_index_only_on_a_full_disk(cli, home: Path, tmp_path: Path, as_json: bool):
    with tmpfs(home, "6m"):
        lines = "\n".join(json.dumps({"text": f"memory {i} that makes the vector index large"}) for i in range(400))
        (tmp_path / "many.jsonl").write_text(lines)
        assert cli("import", str(tmp_path / "many.jsonl")).code == 0
        with disk_left(home, 300_000):  # room to open the database, not to write a 600 KB index
            result = cli(*(["--json"] if as_json else []), "reindex", "--index-only")
        assert result.code == 1, result.err
        assert "Traceback" not in result.err and "RuntimeError" not in result.err
        assert "the disk is full" in result.err and "free some space" in result.err
        if as_json:
            assert result.json["error"]["type"] == "SystemError"
            assert "the disk is full" in result.json["error"]["message"]
        else:
            assert result.out == ""
        assert not list((home / "default").glob(".index.faiss.*"))  # the partial temp file is gone
        # with the space back: the same command succeeds and every memory is still found
        assert cli("reindex", "--index-only", "--json").json["count"] == 400
        assert cli("list", "--json").json["total"] == 400


def test_migrate_to_postgres_names_the_rows_holding_nul(cli, home: Path):
    import memctl
    from tests.pg import pg_schema

    keep = cli("save", "an ordinary memory", "--json").json["ids"][0]
    bad = cli("save", "a text with a \x00 inside", "--json").json["ids"][0]
    edited = cli("save", "edited later", "--json").json["ids"][0]
    assert cli("update", edited, "--text", "now clean", "--meta", "note=a\x00b").code == 0
    with pg_schema() as url:
        result = cli("--json", "migrate", "--to", url, "--to-subdir", "moved")
        assert result.code == 2, result.err
        message = result.json["error"]["message"]
        assert "Traceback" not in result.err and "DataError" not in result.err
        assert "NUL character (U+0000)" in message and "nothing was copied" in message
        assert f"memory {bad!r}" in message and f"memory {edited!r}" in message and keep not in message
        assert f"(add of {bad!r}" in message  # the history entry that holds it, named too
        assert "memctl update ID --text" in result.json["error"]["hint"]
        with memctl.open_store(None, "moved", store=url) as dest:
            assert len(dest) == 0 and dest.history() == []
        # once the texts are clean and the history that held them purged, the same migrate copies everything
        assert cli("update", bad, "--text", "a text without it").code == 0
        assert cli("update", edited, "--unset", "note").code == 0
        assert cli("purge", "--all", "--yes").code == 0
        assert cli("--json", "migrate", "--to", url, "--to-subdir", "moved").json["count"] == 3
