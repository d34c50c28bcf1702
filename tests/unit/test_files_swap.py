"""memctl.files.swap_folder: the one folder swap (agent_zero export, backups and restores use it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memctl.files import swap_folder


def _folder(path: Path, **files: str) -> Path:
    path.mkdir()
    for name, text in files.items():
        (path / name).write_text(text)
    return path


def test_onto_nothing_and_onto_an_empty_folder_nothing_is_moved_aside(tmp_path: Path):
    stage = _folder(tmp_path / "stage", a="new")
    assert swap_folder(stage, tmp_path / "target", tmp_path / "aside") is False
    assert (tmp_path / "target" / "a").read_text() == "new" and not stage.exists()
    empty = _folder(tmp_path / "empty")
    stage = _folder(tmp_path / "stage2", b="new")
    assert swap_folder(stage, empty, tmp_path / "aside") is False
    assert (empty / "b").read_text() == "new" and not (tmp_path / "aside").exists()


def test_a_non_empty_target_goes_aside(tmp_path: Path):
    target = _folder(tmp_path / "target", a="old")
    stage = _folder(tmp_path / "stage", a="new")
    assert swap_folder(stage, target, tmp_path / "aside") is True
    assert (target / "a").read_text() == "new" and (tmp_path / "aside" / "a").read_text() == "old"


def test_a_failed_rename_puts_the_old_folder_back(tmp_path: Path):
    target = _folder(tmp_path / "target", a="old")
    with pytest.raises(OSError):
        swap_folder(tmp_path / "no-such-stage", target, tmp_path / "aside")
    assert (target / "a").read_text() == "old" and not (tmp_path / "aside").exists()
