"""Durable file writes and file hashes, shared by the store, the config and the caches."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Flush a file written by someone else (a library) to disk."""
    with path.open("rb") as handle:
        os.fsync(handle.fileno())


def write_synced(path: Path, data: bytes) -> None:
    """Write a new file in a folder being built (not yet in place: no temp file needed) and flush it to disk."""
    with path.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def swap_folder(stage: Path, target: Path, aside: Path) -> bool:
    """Rename the finished folder `stage` to `target`, atomically as the file system allows.

    A non-empty `target` is renamed to `aside` first (and back if the second rename fails): at every
    instant `target` is the old folder, the new one, or briefly absent with the old one at `aside`. An
    empty `target` is replaced in one rename. Returns whether the old folder is now at `aside` (the
    caller keeps or removes it). Journaled swaps that a kill can interrupt: `swap_in`."""
    moved = False
    if target.exists() and not (target.is_dir() and not target.is_symlink() and not any(target.iterdir())):
        os.rename(target, aside)
        moved = True
    try:
        os.rename(stage, target)  # onto nothing or onto an empty folder (POSIX rename replaces one)
    except BaseException:
        if moved and not target.exists():
            os.rename(aside, target)
        raise
    fsync_dir(target.parent)
    return moved


def write_target(path: Path) -> Path:
    """The file a write to `path` must replace: a symbolic link's final target (so the link stays a
    link); refused when that is anything but a regular file or a new name (a device, a fifo, a folder)."""
    from memctl.errors import UsageError

    target = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        return target
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise UsageError(
            f"{path} is {kind}; memctl writes regular files only",
            hint="name a regular file (a new one, or one to replace)",
        )
    return target


@contextmanager
def atomic_writer(path: Path, *, mode: int | None = None) -> Iterator[IO[bytes]]:
    """A binary handle on a temp file beside the target; on success fsync, rename onto the target
    (a link's target: see write_target), fsync the folder. The file keeps the mode of the one it
    replaces; a new one gets `mode` (default 0600: exports and store files hold every text)."""
    target = write_target(path)
    keep: int | None
    try:
        keep = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        keep = mode
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, keep if keep is not None else 0o600)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Temp file in the same folder, fsync, rename, fsync the folder (see atomic_writer)."""
    with atomic_writer(path, mode=mode) as handle:
        handle.write(data)


def cache_root() -> Path:
    """memctl's user cache: the ONNX export of the default model, the parsed shipped defaults."""
    if os.environ.get("MEMCTL_CACHE_DIR"):
        return Path(os.environ["MEMCTL_CACHE_DIR"]).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("memctl", appauthor=False))


# -- replacing a folder by a finished copy, surviving a kill at any point -------------------------
# A swap renames the old folder aside, then the new one into place: two renames. A journal written
# beside the folder before the first one says how to finish or undo the swap, so a kill between
# them never leaves the folder missing (the next opener would otherwise start an empty store).
# The swap lock beside the folder is held by whoever builds a replacement (a restore, a backup),
# so stale staging folders are those found while holding it.
SWAP_JOURNAL = ".{}.swap.json"
SWAP_LOCK = ".{}.swap.lock"
STAGING_KINDS = ("restore", "backup")


def swap_lock(target: Path, timeout: float) -> Any:
    """The lock of everything that replaces `target` (a FileLock; `with` it)."""
    import filelock

    return filelock.FileLock(str(target.parent / SWAP_LOCK.format(target.name)), timeout=timeout)


def swap_in(stage: Path, target: Path, aside: Path, *, marker: str, keep_aside: bool) -> Path | None:
    """Rename the finished `stage` to `target`, the old `target` (if any) to `aside` first.

    Call with the swap lock held. Returns `aside` when the old folder is kept there (keep_aside and it
    existed), else None (an old folder not kept is removed after the swap)."""
    import json
    import shutil

    journal = target.parent / SWAP_JOURNAL.format(target.name)
    atomic_write_bytes(
        journal,
        json.dumps({"stage": stage.name, "aside": aside.name, "marker": marker, "keep_aside": keep_aside}).encode(),
    )
    try:
        moved = swap_folder(stage, target, aside)
    except OSError:
        journal.unlink(missing_ok=True)
        raise
    journal.unlink(missing_ok=True)
    fsync_dir(target.parent)
    if moved and not keep_aside:
        shutil.rmtree(aside, ignore_errors=True)
    return aside if moved and keep_aside else None


def recover_swap(target: Path, timeout: float = 30, *, locked: bool = False) -> str | None:
    """Finish or undo a swap of `target` that a kill interrupted; None when there was none.

    "finished": the new folder was renamed into place; "undone": the old one was put back;
    "not-started": the old folder was still in place (the unused copy is removed)."""
    journal = target.parent / SWAP_JOURNAL.format(target.name)
    if not journal.exists():
        return None
    if not locked:
        with swap_lock(target, timeout):
            return recover_swap(target, timeout, locked=True)
    import json
    import shutil

    try:
        data = json.loads(journal.read_text(encoding="utf-8"))
        stage, aside = target.parent / str(data["stage"]), target.parent / str(data["aside"])
        marker, keep_aside = str(data["marker"]), bool(data.get("keep_aside"))
    except (OSError, ValueError, KeyError, TypeError):
        journal.unlink(missing_ok=True)  # written atomically: unreadable means it never was ours
        return None
    if (target / marker).is_file():
        action = "not-started" if stage.is_dir() else "finished"
        if stage.is_dir():
            shutil.rmtree(stage, ignore_errors=True)
        elif aside.is_dir() and not keep_aside:
            shutil.rmtree(aside, ignore_errors=True)
    else:
        remove_lock_only_folder(target)
        if stage.is_dir() and (stage / marker).is_file():
            os.rename(stage, target)
            action = "finished"
            if aside.is_dir() and not keep_aside:
                shutil.rmtree(aside, ignore_errors=True)
        elif aside.is_dir():
            os.rename(aside, target)
            action = "undone"
        else:
            action = "lost"
    fsync_dir(target.parent)
    journal.unlink(missing_ok=True)
    fsync_dir(target.parent)
    return action


def remove_lock_only_folder(folder: Path) -> None:
    """A folder a lock acquisition re-created (only lock files in it) is in the way of a rename."""
    if not folder.is_dir():
        return
    names = {p.name for p in folder.iterdir()}
    if names <= {".write.lock", ".knowledge.lock"}:
        for name in names:
            (folder / name).unlink(missing_ok=True)
        folder.rmdir()


def staging_folder(parent: Path, target_name: str, kind: str) -> Path:
    """A fresh hidden folder beside the target (same file system, so the final rename is atomic)."""
    import secrets

    from memctl.errors import StoreError

    for _ in range(100):
        path = parent / f".{target_name}.{kind}-{secrets.token_hex(4)}"
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        return path
    raise StoreError(f"cannot create a temporary folder in {parent}")


def clean_stale_staging(target: Path) -> list[str]:
    """Remove staging folders of `target` left by killed restores and backups. Call with the swap lock
    held (whoever stages holds it, so none of them is in use)."""
    import shutil

    removed: list[str] = []
    if not target.parent.is_dir():
        return removed
    for kind in STAGING_KINDS:
        for path in target.parent.glob(f".{target.name}.{kind}-*"):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
                removed.append(str(path))
    return removed
