"""`memctl demo`: the README's first command runs memctl's main job on the example data it ships."""

from __future__ import annotations

import subprocess
import tempfile
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO

STAGING = "The staging database listens on port 5433, not the default 5432"


@pytest.fixture
def temp_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the demo's temporary folder is made (tempfile's own default, pointed into the test's folder)."""
    parent = tmp_path / "tmp"
    parent.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(parent))
    return parent


def test_demo_json_runs_every_step_in_a_temporary_root(cli, home: Path, temp_parent: Path):
    result = cli("demo", "--json")
    assert result.code == 0, result.err
    doc = result.json
    assert set(doc) == {
        "root",
        "subdir",
        "path",
        "temporary",
        "removed",
        "model",
        "knowledge",
        "saved",
        "recall",
        "backup",
    }
    root = Path(doc["root"])
    assert root.parent == temp_parent and root.name.startswith("memctl-demo-")
    assert doc["temporary"] is True and doc["removed"] is False and doc["subdir"] == "default"
    assert Path(doc["path"]) == root / "default"
    assert not home.exists()  # MEMCTL_HOME, the user's stores, is never touched
    assert doc["model"]["provider"] == "fake"

    knowledge = doc["knowledge"]
    assert knowledge["files"] == 3 and knowledge["chunks"] == sum(knowledge["areas"].values()) > 3
    assert set(knowledge["areas"]) == {"main", "solutions"}
    assert [m["area"] for m in doc["saved"]] == ["main", "fragments", "solutions"]
    assert all(m["metadata"]["source"] == "memctl demo" for m in doc["saved"])

    recall = doc["recall"]
    assert recall["question"].startswith("When do deploys go out")
    assert STAGING in [m["text"] for m in recall["memories"]]
    assert all(0 <= m["score"] <= 1 and {"date", "source", "group"} <= set(m) for m in recall["memories"])
    assert STAGING in recall["prompt"] and "[20" in recall["prompt"]  # each item dated

    backup = doc["backup"]
    assert Path(backup["path"]) == root / "default-backup"
    assert backup["count"] == knowledge["chunks"] + 3 and backup["bytes"] > 0
    assert "memories.sqlite" in backup["files"] and (Path(backup["path"]) / "backup.json").is_file()
    assert backup["verified"] == {"files": len(backup["files"]), "count": backup["count"], "same_recall": True}

    # The kept root is an ordinary root: the store and its backup answer like any other.
    listed = cli("--root", root, "list", "--json", "--limit", "100")
    assert listed.code == 0 and listed.json["total"] == backup["count"]
    copy = cli("--root", root, "-s", "default-backup", "load", "staging database port", "--json")
    assert copy.code == 0 and copy.json["results"][0]["text"] == STAGING


def test_demo_prints_each_step_for_people(cli, temp_parent: Path):
    result = cli("demo")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    steps = [line.split(":")[0] for line in lines if line[:1].isdigit()]
    assert steps == ["1. store", "2. knowledge", "3. save", "4. recall", "5. backup"]
    assert "imported 3 files as" in result.out and "saved 3 memories" in result.out
    assert f"   | - {STAGING} [" in result.out  # the recall block, as an agent gets it
    assert "verified:" in result.out and "recalls the same ones" in result.out
    root = next(temp_parent.iterdir())
    assert f"memctl --root {root} load" in result.out and f"rm -rf {root}" in result.out


def test_clean_up_removes_the_temporary_root(cli, temp_parent: Path):
    result = cli("demo", "--clean-up", "--json")
    assert result.code == 0, result.err
    assert result.json["removed"] is True and result.json["backup"]["verified"]["same_recall"] is True
    assert list(temp_parent.iterdir()) == []
    human = cli("demo", "--clean-up")
    assert human.code == 0 and "Removed the temporary folder" in human.out and "rm -rf" not in human.out
    assert list(temp_parent.iterdir()) == []


def test_quiet_prints_only_the_root(cli, temp_parent: Path):
    result = cli("demo", "-q")
    assert result.code == 0, result.err
    assert result.out.splitlines() == [str(next(temp_parent.iterdir()))]


def test_root_names_where_it_writes_and_an_existing_store_is_refused(cli, tmp_path: Path, temp_parent: Path):
    root = tmp_path / "mine"
    first = cli("--root", root, "-s", "projects/shop", "demo", "--json")
    assert first.code == 0, first.err
    assert first.json["temporary"] is False and Path(first.json["path"]) == root / "projects" / "shop"
    assert Path(first.json["backup"]["path"]) == root / "projects" / "shop-backup"
    assert list(temp_parent.iterdir()) == []  # no temporary folder when a root is given
    count = first.json["backup"]["count"]

    again = cli("--root", root, "-s", "projects/shop", "demo", "--json")
    assert again.code == 2 and again.json["error"]["type"] == "UsageError"
    assert "already exists" in again.json["error"]["message"] and "--root" in again.json["error"]["hint"]
    assert cli("--root", root, "-s", "projects/shop", "list", "--json").json["total"] == count  # nothing added

    cli("--root", root, "-s", "taken", "save", "a memory of mine")
    taken = cli("--root", root, "-s", "taken", "demo")
    assert taken.code == 2 and "already exists" in taken.err and "Traceback" not in taken.err
    assert cli("--root", root, "-s", "taken", "list", "--json").json["total"] == 1

    (root / "other-backup").mkdir()  # the backup's place is taken: refused before anything is written
    blocked = cli("--root", root, "-s", "other", "demo")
    assert blocked.code == 2 and "backup folder" in blocked.err and not (root / "other").exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--store", "postgresql://u:p@127.0.0.1:1/db", "demo"], "embedded store"),
        (["--root", "somewhere", "demo", "--clean-up"], "--clean-up"),
        (["demo", "--nosuch"], "No such option"),
    ],
)
def test_bad_invocations_are_usage_errors(cli, tmp_path: Path, temp_parent: Path, args: list[str], words: str):
    result = cli(*args, "--json")
    assert result.code == 2, result.err
    assert words in result.json["error"]["message"] and "Traceback" not in result.err
    assert list(temp_parent.iterdir()) == [] and not (tmp_path / "somewhere").exists()


def test_a_missing_example_folder_is_a_clear_error(cli, temp_parent: Path, monkeypatch: pytest.MonkeyPatch):
    import memctl.demo

    monkeypatch.setattr(memctl.demo, "KNOWLEDGE_DIR", temp_parent / "gone")
    result = cli("demo", "--clean-up", "--json")
    assert result.code == 1 and result.json["error"]["type"] == "StoreError"
    assert "example data is missing" in result.json["error"]["message"]
    assert list(temp_parent.iterdir()) == []


def test_the_example_data_ships_in_the_wheel():
    from memctl.demo import KNOWLEDGE_DIR

    package = REPO / "memctl"
    assert KNOWLEDGE_DIR.is_relative_to(package)
    wheel = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["hatch"]["build"]
    assert "memctl" in wheel["targets"]["wheel"]["packages"]  # hatch ships every file under memctl/ ...
    files = sorted(p for p in KNOWLEDGE_DIR.rglob("*") if p.is_file())
    assert len(files) == 3 and all(p.suffix == ".md" for p in files)
    rel = [str(p.relative_to(REPO)) for p in files]
    ignored = subprocess.run(["git", "check-ignore", *rel], cwd=REPO, capture_output=True, text=True)
    assert ignored.stdout == ""  # ... that git does not ignore


def test_a_backup_that_does_not_verify_fails_the_demo(cli, temp_parent: Path, monkeypatch: pytest.MonkeyPatch):
    import memctl.lifecycle.backup

    real = memctl.lifecycle.backup.backup_store

    def damaged(folder: Path, dest: Path, **kwargs: object) -> memctl.lifecycle.backup.BackupReport:
        made = real(folder, dest, **kwargs)  # type: ignore[arg-type]
        with (dest / "embedding.json").open("a", encoding="utf-8") as f:
            f.write(" ")  # one byte after the manifest was written
        return made

    monkeypatch.setattr(memctl.lifecycle.backup, "backup_store", damaged)
    result = cli("demo", "--json")
    assert result.code == 1 and result.json["error"]["type"] == "StoreError"
    assert "embedding.json is missing or damaged" in result.json["error"]["message"]
