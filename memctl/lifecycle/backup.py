"""Consistent store backups while writers keep writing, and restoring them by an atomic folder swap.

The database is copied with SQLite's online backup API in one step: one read snapshot, so the copy
holds exactly the transactions committed before it (WAL readers never block writers, and writers
never wait for a backup). The vector index is derived: `index.faiss` is copied *before* the
snapshot and kept only if its checkpoint is recorded in the snapshot (opening then replays the
journal after it); otherwise it is left out and the restored store rebuilds it from the stored
vectors — never a re-embedding. `embedding.json` is copied *after* the snapshot: it is written
before the first vector commits, so a snapshot with vectors always has it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memctl.embeddings import ModelInfo
from memctl.errors import LockTimeoutError, NotFoundError, StoreError, UsageError, sqlite_hint
from memctl.files import (
    SWAP_LOCK,
    clean_stale_staging,
    file_sha256,
    fsync_dir,
    fsync_file,
    recover_swap,
    staging_folder,
    swap_in,
    swap_lock,
)
from memctl.store.base import StoreBase
from memctl.store.interface import iter_chunks
from memctl.store.layout import BEHAVIOUR_FILE, DB_FILE, EMBEDDING_FILE, KNOWLEDGE_FILE, LOCK_FILE, read_only_database
from memctl.store.records import now_iso
from memctl.store.vector_index import INDEX_FILE, SIDECAR_FILE

MANIFEST = "backup.json"
BACKUP_FORMAT = 1
# Plain files of a store, copied as they are (the database and the index have their own rules).
SIDE_FILES = (EMBEDDING_FILE, KNOWLEDGE_FILE, BEHAVIOUR_FILE, "config.yaml")


@dataclass
class BackupReport:
    path: str
    count: int
    bytes: int
    index: str  # "copied" (consistent with the snapshot) or "rebuild" (the restored store rebuilds it)
    files: list[str] = field(default_factory=list)
    replaced: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def backup_store(
    folder: Path, dest: Path, *, subdir: str = "", force: bool = False, lock_timeout: float = 30
) -> BackupReport:
    """Write a consistent snapshot of the store in `folder` to the new folder `dest` (atomically)."""
    if not (folder / DB_FILE).is_file():
        raise NotFoundError(f"no store at {folder}", hint="`memctl subdirs` lists the stores")
    dest = Path(os.path.abspath(dest.expanduser()))
    if dest == folder.resolve() or folder.resolve() in dest.parents:
        raise UsageError(f"backup destination {dest} is inside the store", hint="choose a folder outside it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _replacing(dest, lock_timeout):
        _check_target(dest, force, "backup destination")
        stage = staging_folder(dest.parent, dest.name, "backup")
        return _backup_into(folder, stage, dest, subdir)


def _backup_into(folder: Path, stage: Path, dest: Path, subdir: str) -> BackupReport:
    try:
        index_sha = _copy_index(folder, stage)  # before the snapshot: see the module docstring
        count = _snapshot(folder / DB_FILE, stage / DB_FILE)
        files = [DB_FILE]
        for name in SIDE_FILES:
            if (folder / name).is_file():
                shutil.copy2(folder / name, stage / name)
                files.append(name)
        index = "rebuild"
        if index_sha and _checkpoint_known(stage / DB_FILE, index_sha):
            index = "copied"
            files += [INDEX_FILE, SIDECAR_FILE]
        else:
            for name in (INDEX_FILE, SIDECAR_FILE):
                (stage / name).unlink(missing_ok=True)
        manifest = {
            "memctl_backup": BACKUP_FORMAT,
            "subdir": subdir,
            "source": str(folder),
            "created_at": now_iso(),
            "count": count,
            "index": index,
            "files": {name: file_sha256(stage / name) for name in files},
        }
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        _fsync_tree(stage)
        replaced = _swap_in(stage, dest)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    size = sum(p.stat().st_size for p in dest.iterdir() if p.is_file())
    return BackupReport(path=str(dest), count=count, bytes=size, index=index, files=files, replaced=replaced)


def _check_target(dest: Path, force: bool, what: str) -> None:
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"{what} {dest} is a file", hint="name a folder")
    if dest.is_dir() and any(dest.iterdir()) and not force:
        raise UsageError(f"{what} {dest} is not empty", hint="choose a new folder, or pass --force to replace it")


def _copy_index(folder: Path, stage: Path) -> str | None:
    """Copy index.faiss and its sidecar; return the sha256 when the copies belong together."""
    for _ in range(3):  # a checkpoint renames the index before it rewrites the sidecar: retry that gap
        try:
            shutil.copyfile(folder / INDEX_FILE, stage / INDEX_FILE)
            shutil.copyfile(folder / SIDECAR_FILE, stage / SIDECAR_FILE)
            expected = (stage / SIDECAR_FILE).read_text(encoding="ascii").split()[0]
        except (OSError, UnicodeDecodeError, IndexError):
            return None
        if file_sha256(stage / INDEX_FILE) == expected:
            return expected
    return None


def _snapshot(source: Path, target: Path) -> int:
    """One-step online backup (a single read snapshot); the copy is a standalone file. The source is
    only read: its connection cannot write, and never creates a database that is not there."""
    src = read_only_database(source, timeout=30)
    try:
        dst = sqlite3.connect(target)
    except sqlite3.Error as exc:
        src.close()
        raise StoreError(f"cannot create {target}: {exc}", hint=sqlite_hint(str(exc))) from exc
    try:
        try:
            src.backup(dst)  # pages=-1: every page in one step, under one read transaction
        except sqlite3.Error as exc:
            raise StoreError(f"copying {source} to {target} failed: {exc}", hint=sqlite_hint(str(exc))) from exc
        try:
            dst.execute("PRAGMA journal_mode=DELETE")  # a backup is one self-contained file
            check = dst.execute("PRAGMA integrity_check").fetchone()[0]
            count = int(dst.execute("SELECT COUNT(*) FROM memories").fetchone()[0])
        except sqlite3.Error as exc:
            raise StoreError(f"the copy of {source} at {target} failed: {exc}", hint=sqlite_hint(str(exc))) from exc
        if check != "ok":
            raise StoreError(
                f"the snapshot of {source} failed its integrity check: {check}",
                hint="the database is damaged: restore it from an older backup or an export",
            )
        return count
    finally:
        dst.close()
        src.close()


def _checkpoint_known(db_path: Path, sha: str) -> bool:
    db = sqlite3.connect(db_path)
    try:
        return db.execute("SELECT 1 FROM index_checkpoints WHERE sha256 = ?", (sha,)).fetchone() is not None
    finally:
        db.close()


def _fsync_tree(folder: Path) -> None:
    """Every file private (a backup holds every text) and on disk, then the folder entry."""
    os.chmod(folder, 0o700)
    for path in folder.iterdir():
        if path.is_file():
            os.chmod(path, 0o600)
            fsync_file(path)
    fsync_dir(folder)


def _swap_in(stage: Path, dest: Path) -> bool:
    """Rename the finished stage to dest (journaled: see memctl.files.swap_in); a previous dest is
    moved aside first and removed after. Returns whether a non-empty dest was replaced."""
    replaced = dest.is_dir() and any(dest.iterdir())
    swap_in(stage, dest, dest.parent / f".{dest.name}.old-{secrets.token_hex(4)}", marker=DB_FILE, keep_aside=False)
    return replaced


@contextmanager
def _replacing(target: Path, timeout: float) -> Iterator[None]:
    """Hold the swap lock of `target` while a replacement is built and swapped in; first finish a swap
    a kill interrupted and remove the staging folders killed runs left."""
    import filelock

    _check_lock_place(target)
    try:
        with swap_lock(target, timeout):
            recover_swap(target, locked=True)
            clean_stale_staging(target)
            yield
    except filelock.Timeout as exc:
        raise LockTimeoutError(f"another restore or backup of {target} is running", hint="retry later") from exc


def _check_lock_place(target: Path) -> None:
    """The swap lock's file can be made beside `target` (filelock reports a folder it may not write as a
    lock held by someone else: "another backup is running" for a read-only or special folder)."""
    path = target.parent / SWAP_LOCK.format(target.name)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreError(
            f"cannot create files in {target.parent} ({os.strerror(exc.errno or 0) or exc}), where the backup is built",
            hint="choose a destination in a folder you may write to, on writable storage",
        ) from exc
    os.close(fd)


# -- restore-backup ----------------------------------------------------------------------
@dataclass
class RestoreBackupReport:
    source: str
    path: str
    count: int
    replaced: bool
    kept_old: str | None  # where the replaced store was moved (hidden, next to it)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verify_backup(source: Path) -> dict[str, Any]:
    """The backup's manifest after checking every file it lists against its sha256 (none: {})."""
    if not (source / DB_FILE).is_file():
        raise UsageError(f"{source} is not a memctl backup (no {DB_FILE})", hint="pass a folder `memctl backup` wrote")
    path = source / MANIFEST
    if not path.is_file():
        raise UsageError(
            f"{source} has no {MANIFEST}: it is not a backup `memctl backup` wrote, or its manifest was lost "
            "(without it nothing can be checked); nothing was restored",
            hint=f"pass a folder `memctl backup` wrote; a plain store folder is read with "
            f"`memctl --root {source.parent} -s {source.name} export` and brought in with `memctl import`",
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        files = dict(manifest["files"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"backup manifest {path} is unreadable: {exc}") from exc
    for name, sha in files.items():
        if Path(name).name != name or not (source / name).is_file() or file_sha256(source / name) != sha:
            raise StoreError(
                f"backup file {source / name} is missing or damaged (sha256 mismatch)", hint="use another backup"
            )
    return manifest


def store_has_content(folder: Path) -> bool:
    """True when the store holds memories, history, archive or pending rows, behaviour rules or knowledge state."""
    if any((folder / name).is_file() for name in (BEHAVIOUR_FILE, KNOWLEDGE_FILE)):
        return True
    if not (folder / DB_FILE).is_file():
        return False
    try:
        db = read_only_database(folder / DB_FILE)
        try:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            return any(
                db.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() is not None
                for t in ("memories", "history", "archive", "pending")
                if t in tables
            )
        finally:
            db.close()
    except (sqlite3.Error, StoreError):
        return True  # unreadable: treat as precious


def restore_backup(source: Path, folder: Path, *, force: bool = False, lock_timeout: float = 30) -> RestoreBackupReport:
    """Replace the store in `folder` with the backup in `source` by renaming a finished copy into place."""
    source = Path(os.path.abspath(source.expanduser()))
    verify_backup(source)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _replacing(folder, lock_timeout):
        if store_has_content(folder) and not force:
            raise UsageError(
                f"store {folder} is not empty",
                hint="restore into another --subdir, or pass --force (the replaced store is kept "
                "in a hidden folder beside it)",
            )
        stage = staging_folder(folder.parent, folder.name, "restore")
        try:
            count = _snapshot(source / DB_FILE, stage / DB_FILE)
            for name in (*SIDE_FILES, INDEX_FILE, SIDECAR_FILE):
                if (source / name).is_file():
                    shutil.copy2(source / name, stage / name)
            _fsync_tree(stage)
            kept_old = _swap_store(stage, folder, lock_timeout)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
    if kept_old and not store_has_content(Path(kept_old)):
        shutil.rmtree(kept_old, ignore_errors=True)
        kept_old = None
    return RestoreBackupReport(
        source=str(source), path=str(folder), count=count, replaced=kept_old is not None, kept_old=kept_old
    )


def _swap_store(stage: Path, folder: Path, lock_timeout: float) -> str | None:
    """Swap the finished stage in under the store's write lock: no memctl writer is inside the old
    store while it moves. A process that keeps the old store open notices on its next write (the
    database at the path is no longer the one it opened) and reopens the new one."""
    import filelock

    if not (folder / DB_FILE).is_file():
        _remove_empty(folder)
        aside = swap_in(stage, folder, _aside_name(folder), marker=DB_FILE, keep_aside=True)
        return None if aside is None else str(aside)
    try:
        with filelock.FileLock(str(folder / LOCK_FILE), timeout=lock_timeout):
            aside = swap_in(stage, folder, _aside_name(folder), marker=DB_FILE, keep_aside=True)
    except filelock.Timeout as exc:
        raise LockTimeoutError(f"another process is writing to {folder}", hint="retry later") from exc
    return None if aside is None else str(aside)


def _remove_empty(folder: Path) -> None:
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def _new_folder(parent: Path, prefix: str) -> Path:
    """A fresh hidden folder beside the target (same file system, so the final rename is atomic)."""
    for _ in range(100):
        path = parent / f"{prefix}{secrets.token_hex(4)}"
        try:
            path.mkdir(mode=0o700)  # it holds every text of a store
        except FileExistsError:
            continue
        return path
    raise StoreError(f"cannot create a temporary folder in {parent}")


def _aside_name(folder: Path) -> Path:
    aside = aside_path(folder)
    return aside.with_name(f"{aside.name}-{secrets.token_hex(3)}")


# -- any backend: a backup folder written from the store's rows (a store that is no folder) -------
COPY_BATCH = 2000


def copy_store(source: StoreBase, dest: StoreBase) -> int:
    """Everything `source` holds — memories with their vectors and access times, history, links,
    archive, the review queue, behaviour rules, knowledge state, doctor runs — into the empty `dest` as it is,
    in one transaction at `dest`. Wrap it in `source.snapshot()` for a consistent read. Returns the memories copied."""
    stored = source.model_info()
    info = ModelInfo(stored["provider"], stored["model"]) if stored else None
    dimension = int(stored["dimension"]) if stored else 0
    count = 0
    with dest.transaction():
        for batch in iter_chunks(source.iter_rows(), COPY_BATCH):
            if info is None:
                raise StoreError(
                    f"store {source.name!r} has memories but no recorded embedding model",
                    hint="run `memctl reindex` on it first",
                )
            dest.put_rows(batch, info, dimension)
            count += len(batch)
        dest.append_history(list(reversed(source.history())))
        dest.put_links(source.links())
        for archived in iter_chunks(source.iter_archive(), COPY_BATCH):
            dest.put_archive(archived)
        dest.put_pending(source.pending_items())
        rules = source.read_behaviour()
        if rules is not None:
            dest.write_behaviour(rules)
        knowledge = source.knowledge_state()
        if knowledge:
            dest.save_knowledge_state(knowledge)
        runs = source.doctor_runs()  # `memctl doctor`'s kept runs (renumbered in order) and the last one's findings
        for i, run in enumerate(runs, 1):
            dest.record_doctor_run(run.at, run.figures, source.doctor_findings() if i == len(runs) else [])
    return count


def _write_folder_store(store: StoreBase, folder: Path) -> int:
    """`store` as a folder store in the empty `folder` (read in one snapshot); returns its memory count."""
    from memctl.store import open_folder

    with open_folder(folder, store.config) as copy:
        with store.snapshot():
            count = copy_store(store, copy)
        if count:
            copy.rebuild_index()  # the index of exactly these rows, its checkpoint recorded in the database
    (folder / LOCK_FILE).unlink(missing_ok=True)
    db = sqlite3.connect(folder / DB_FILE)
    try:
        db.execute("PRAGMA journal_mode=DELETE")  # a backup is one self-contained file
    finally:
        db.close()
    return count


def _write_manifest(folder: Path, *, subdir: str, source: str, count: int) -> list[str]:
    files = [name for name in (DB_FILE, *SIDE_FILES, INDEX_FILE, SIDECAR_FILE) if (folder / name).is_file()]
    manifest = {
        "memctl_backup": BACKUP_FORMAT,
        "subdir": subdir,
        "source": source,
        "created_at": now_iso(),
        "count": count,
        "index": "copied" if INDEX_FILE in files else "rebuild",
        "files": {name: file_sha256(folder / name) for name in files},
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    _fsync_tree(folder)
    return files


def backup_rows(store: StoreBase, dest: Path, *, force: bool = False) -> BackupReport:
    """Back up a store that is not a folder (PostgreSQL) into the new folder `dest`: a folder store
    holding one consistent snapshot of it (see copy_store) and a backup.json manifest, built in a
    hidden folder beside DEST and renamed into place. It opens as a store and restores into either backend."""
    if store.model_info() is None and not store.has_content():
        raise NotFoundError(f"there is no store {store.location}", hint="`memctl subdirs` lists the stores")
    dest = Path(os.path.abspath(dest.expanduser()))
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _replacing(dest, float(store.config["lock_timeout"])):
        _check_target(dest, force, "backup destination")
        stage = staging_folder(dest.parent, dest.name, "backup")
        try:
            count = _write_folder_store(store, stage)
            files = _write_manifest(stage, subdir=store.name, source=store.location, count=count)
            replaced = _swap_in(stage, dest)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
    size = sum(p.stat().st_size for p in dest.iterdir() if p.is_file())
    index = "copied" if INDEX_FILE in files else "rebuild"
    return BackupReport(path=str(dest), count=count, bytes=size, index=index, files=files, replaced=replaced)


def restore_backup_rows(source: Path, store: StoreBase, *, aside: Path, force: bool = False) -> RestoreBackupReport:
    """Replace the rows of a store that is not a folder (PostgreSQL) with a backup folder, in one
    transaction during which other writers wait. A replaced store that held anything is first
    written as a backup folder at `aside` (a hidden folder; `restore-backup` brings it back)."""
    from memctl.store import open_folder

    source = Path(os.path.abspath(source.expanduser()))
    verify_backup(source)
    if store.has_content() and not force:
        raise UsageError(f"store {store.name!r} is not empty", hint=_NOT_EMPTY_HINT)
    kept: Path | None = None
    with tempfile.TemporaryDirectory(prefix="memctl-restore-") as tmp:
        stage = Path(tmp)  # a private copy: opening a store writes beside its database
        _snapshot(source / DB_FILE, stage / DB_FILE)
        for name in SIDE_FILES:
            if (source / name).is_file():
                shutil.copy2(source / name, stage / name)
        try:
            with open_folder(stage, store.config) as backup, store.transaction():
                store.lock_writers()
                if store.has_content():
                    if not force:
                        raise UsageError(f"store {store.name!r} is not empty", hint=_NOT_EMPTY_HINT)
                    kept = _keep_replaced(store, aside)
                    store.clear()
                count = copy_store(backup, store)
        except BaseException:
            if kept is not None:
                shutil.rmtree(kept, ignore_errors=True)  # nothing was replaced
            raise
    store.rebuild_index()
    return RestoreBackupReport(
        source=str(source),
        path=store.location,
        count=count,
        replaced=kept is not None,
        kept_old=None if kept is None else str(kept),
    )


_NOT_EMPTY_HINT = "restore into another --subdir, or pass --force (the replaced store is kept as a backup folder)"


def _keep_replaced(store: StoreBase, aside: Path) -> Path:
    aside.parent.mkdir(parents=True, exist_ok=True)
    folder = _new_folder(aside.parent, aside.name + "-")
    try:
        count = _write_folder_store(store, folder)
        _write_manifest(folder, subdir=store.name, source=store.location, count=count)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def aside_path(folder: Path) -> Path:
    """Where the store that `folder` names is kept when a restore replaces it: a hidden sibling."""
    stamp = now_iso().replace(":", "").replace("-", "")[:15]
    return folder.parent / f".{folder.name}.replaced-{stamp}"


def backup_subdir(
    root: str | os.PathLike[str] | None,
    subdir: str,
    dest: Path,
    *,
    store: str | None = None,
    overrides: dict[str, Any] | None = None,
    force: bool = False,
) -> BackupReport:
    """`memctl backup`: the store `subdir` of either backend (`store`, else env MEMCTL_STORE, else config
    store_url) written to the folder `dest`: a folder store is copied file by file, a PostgreSQL store
    row by row (from one snapshot)."""
    from memctl.store import open_store, store_folder

    folder = store_folder(root, subdir, store=store, overrides=overrides)
    # Opened read-only first, as every command does: a damaged store (lost commits, an emptied database)
    # is refused here, not copied as an empty backup; nothing of the source is written.
    with open_store(root, subdir, store=store, overrides=overrides, actor="backup", read_only=True) as opened:
        if folder is None:
            return backup_rows(opened, dest, force=force)
        lock_timeout = float(opened.config["lock_timeout"])
    return backup_store(folder, dest, subdir=subdir, force=force, lock_timeout=lock_timeout)


def restore_subdir(
    source: Path,
    root: str | os.PathLike[str] | None,
    subdir: str,
    *,
    store: str | None = None,
    overrides: dict[str, Any] | None = None,
    force: bool = False,
) -> RestoreBackupReport:
    """`memctl restore-backup`: replace the store `subdir` of either backend with the backup `source`.
    A folder store is swapped for a checked copy; a PostgreSQL store is replaced in one transaction,
    the replaced one kept as a backup folder under the root."""
    from memctl.config import load_config
    from memctl.config.paths import resolve_root, store_dir
    from memctl.store import open_store, store_folder

    folder = store_folder(root, subdir, store=store, overrides=overrides)
    if folder is not None:
        timeout = float(load_config(folder if folder.is_dir() else None, overrides)["lock_timeout"])
        return restore_backup(source, folder, force=force, lock_timeout=timeout)
    aside = aside_path(store_dir(resolve_root(root), subdir))  # under the root, where a folder store would be
    with open_store(root, subdir, store=store, overrides=overrides, actor="restore-backup", create=True) as opened:
        return restore_backup_rows(source, opened, aside=aside, force=force)
