"""Knowledge folders: import their files as chunks, incrementally, and keep the store in step.

Layout. Files directly in a knowledge folder go to area `main` (not recursive); the subfolders
`main/`, `fragments/` and `solutions/` go to that area, recursively. Other subfolders, hidden
files and folders, symlinked folders and extensions without a reader (see `memctl.knowledge.readers`) are
skipped and reported.

Identity. A file is known by its folder's name and its path relative to the folder
(`source_path`), so moving the folder elsewhere re-imports nothing. Its content checksum
(sha256 of the bytes) decides whether it changed. A run covers the folders it is given: files
gone from those folders lose their chunks; other knowledge folders in the store are untouched.
A new file whose checksum equals a file that disappeared in the same run is a rename: its chunks
are kept (metadata and area updated), nothing is embedded. Chunk texts whose vector is already in
the store (same content hash, same model) reuse it, and identical texts are embedded once per
run, so an edit to one section of a long file embeds only the chunks that changed.

Crash safety (the choice made here): the store's memories are the source of truth and the saved
import state a mirror of them (the embedded store's `knowledge_import.json`, PostgreSQL's
`memctl_knowledge_files` / `memctl_knowledge_folders` rows of the subdir). Every chunk carries
`knowledge_folder`, `source_path` and `source_checksum` in its metadata, and a changed file's old
chunks are deleted and its new chunks inserted in the same transaction. Every run starts by
rebuilding its view from the chunks actually in the store, taking only the chunking settings and
import times from the saved state. A kill at any moment leaves each file with its old chunks or its
new ones, never both and never neither; a kill between a commit and the state write only makes the
state stale, which the next run corrects. The state is written atomically after each transaction.
Two imports into one store never interleave: a run holds the store's knowledge lock from start to
end (`.knowledge.lock` in the folder; a PostgreSQL advisory lock on the subdir). A dry run takes no
lock and writes nothing. Everything store-specific is behind the store interface (StoreBase).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from memctl.errors import ConfigError, UsageError
from memctl.files import file_sha256
from memctl.knowledge.readers import Chunk, UnreadableFile, read_chunks, reader_for
from memctl.store.records import AREAS, now_iso

if TYPE_CHECKING:
    import numpy as np

    from memctl.config import Config
    from memctl.store.base import StoreBase

CHUNKER_VERSION = 1  # bump when readers or splitting change, so files are re-chunked
GROUP_CHUNKS = 512  # chunks embedded and committed together (one transaction, one state write)
ACTOR = "knowledge"
STATUSES = ("new", "changed", "unchanged", "renamed", "removed", "failed")

Progress = Callable[[int, int], None]


# -- configuration -----------------------------------------------------------------------
@dataclass(frozen=True)
class Folder:
    name: str  # what identifies the folder in the store: its own name
    path: Path


@dataclass(frozen=True)
class Chunking:
    size: int
    overlap: int

    @property
    def signature(self) -> str:
        return f"v{CHUNKER_VERSION}:{self.size}:{self.overlap}"

    @classmethod
    def from_config(cls, config: Config) -> Chunking:
        size, overlap = int(config["knowledge_chunk_size"]), int(config["knowledge_chunk_overlap"])
        if size < 50:
            raise ConfigError(f"knowledge_chunk_size must be at least 50 characters, not {size}")
        if not 0 <= overlap <= size // 2:
            raise ConfigError(
                f"knowledge_chunk_overlap must be between 0 and half of knowledge_chunk_size "
                f"({size // 2}), not {overlap}"
            )
        return cls(size, overlap)


def resolve_folders(config: Config, dirs: Sequence[str | os.PathLike[str]] | None = None) -> list[Folder]:
    """The folders to import: `dirs`, else config `knowledge_dirs` (relative to the config file naming them)."""
    if dirs:
        paths = [Path(d).expanduser() for d in dirs]
    else:
        configured = config["knowledge_dirs"] or []
        if not all(isinstance(d, str) and d for d in configured):
            raise ConfigError("knowledge_dirs must be a list of folder paths")
        source = config.sources.get("knowledge_dirs", "default")
        from_file = source not in ("default", "env", "override") and Path(source).is_file()
        base = Path(source).parent if from_file else Path.cwd()
        paths = [base / Path(d).expanduser() for d in configured]
    if not paths:
        raise UsageError("no knowledge folder given", hint="pass DIR, or set knowledge_dirs in the config")
    folders: dict[Path, Folder] = {}
    for path in paths:
        if not path.is_dir():
            raise UsageError(f"knowledge folder {str(path)!r} does not exist or is not a folder")
        resolved = path.resolve()
        folders.setdefault(resolved, Folder(resolved.name or "root", resolved))
    names = [f.name for f in folders.values()]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise UsageError(
            f"two knowledge folders are both named {clash[0]!r}",
            hint="a folder is known by its name in the store; rename one of them",
        )
    return list(folders.values())


# -- scanning ----------------------------------------------------------------------------
@dataclass
class SourceFile:
    folder: Folder
    source_path: str  # relative to the folder, with '/'
    area: str
    file_type: str

    @property
    def path(self) -> Path:
        return self.folder.path / self.source_path


@dataclass
class Skipped:
    path: str
    reason: str


def scan(folder: Folder) -> tuple[list[SourceFile], list[Skipped]]:
    """The files to import from one folder, and what was skipped (with the reason)."""
    files: list[SourceFile] = []
    skipped: list[Skipped] = []
    for entry in sorted(folder.path.iterdir(), key=lambda p: p.name):
        if entry.name.startswith("."):
            skipped.append(Skipped(str(entry), "hidden"))
        elif entry.is_dir():
            if entry.is_symlink():
                skipped.append(Skipped(str(entry), "symbolic link to a folder"))
            elif entry.name in AREAS:
                _walk(folder, entry, entry.name, files, skipped)
            else:
                skipped.append(Skipped(str(entry), f"not an area folder ({', '.join(AREAS)})"))
        else:
            _add_file(folder, entry, "main", files, skipped)
    return files, skipped


def _walk(folder: Folder, top: Path, area: str, files: list[SourceFile], skipped: list[Skipped]) -> None:
    for current, dirnames, filenames in os.walk(top, followlinks=False):
        here = Path(current)
        for name in sorted(dirnames):
            if name.startswith(".") or (here / name).is_symlink():
                why = "hidden" if name.startswith(".") else "symbolic link to a folder"
                skipped.append(Skipped(str(here / name), why))
                dirnames.remove(name)
        dirnames.sort()
        for name in sorted(filenames):
            if name.startswith("."):
                skipped.append(Skipped(str(here / name), "hidden"))
            else:
                _add_file(folder, here / name, area, files, skipped)


def _add_file(folder: Folder, path: Path, area: str, files: list[SourceFile], skipped: list[Skipped]) -> None:
    found = reader_for(path.name)
    if path.is_symlink() and not _inside(path, folder.path):
        skipped.append(Skipped(str(path), "symbolic link leading out of the folder"))
    elif not path.is_file():
        skipped.append(Skipped(str(path), "not a regular file"))
    elif found is None:
        skipped.append(Skipped(str(path), f"no reader for {path.suffix or 'files without an extension'}"))
    else:
        files.append(SourceFile(folder, path.relative_to(folder.path).as_posix(), area, found[0]))


def _inside(path: Path, top: Path) -> bool:
    """Whether a link's final target lies inside the knowledge folder (a link out could import
    /etc/passwd or a private key as a memory)."""
    try:
        return Path(os.path.realpath(path)).is_relative_to(Path(os.path.realpath(top)))
    except OSError:
        return False


# -- state: the store's knowledge chunks, mirrored in the saved import state -------------
@dataclass
class Entry:
    checksum: str | None  # None when the store holds chunks of two versions (never written so)
    area: str
    file_type: str
    ids: list[str]
    chunking: str
    imported_at: str = ""


State = dict[str, dict[str, Entry]]  # folder name -> source_path -> entry


def load_state(store: StoreBase, chunking: Chunking) -> tuple[State, dict[str, str]]:
    """The knowledge files as the store holds them, plus each folder's last seen path (from the saved state)."""
    saved_folders: dict[str, Any] = store.knowledge_state()
    groups: dict[tuple[str, str], list[tuple[int, str, str, str | None, str]]] = {}
    for mid, area, folder, rel, checksum, file_type, chunk in store.knowledge_chunks():
        order = chunk if isinstance(chunk, int) and not isinstance(chunk, bool) else 1 << 30
        groups.setdefault((str(folder), str(rel)), []).append((order, mid, area, checksum, str(file_type or "")))
    state: State = {}
    for (folder, rel), members in groups.items():
        members.sort(key=lambda m: m[0])
        checksums = {m[3] for m in members}
        checksum = checksums.pop() if len(checksums) == 1 else None
        saved_entry = ((saved_folders.get(folder) or {}).get("files") or {}).get(rel) or {}
        same = saved_entry.get("checksum") == checksum
        state.setdefault(folder, {})[rel] = Entry(
            checksum=checksum,
            area=members[0][2],
            file_type=members[0][4],
            ids=[m[1] for m in members],
            chunking=str(saved_entry.get("chunking")) if same else chunking.signature,
            imported_at=str(saved_entry.get("imported_at") or "") if same else "",
        )
    for folder, data in saved_folders.items():  # files that produced no chunks exist only in the saved state
        if not isinstance(data, dict):
            continue
        for rel, saved_entry in (data.get("files") or {}).items():
            if not saved_entry.get("ids") and rel not in state.get(folder, {}):
                state.setdefault(folder, {})[rel] = Entry(
                    saved_entry.get("checksum"),
                    saved_entry.get("area", "main"),
                    saved_entry.get("file_type", ""),
                    [],
                    str(saved_entry.get("chunking")),
                    str(saved_entry.get("imported_at") or ""),
                )
    paths = {name: str(data.get("path", "")) for name, data in saved_folders.items() if isinstance(data, dict)}
    return state, paths


def state_document(state: State, paths: dict[str, str]) -> dict[str, Any]:
    """What the store saves: folder name -> {"path", "files": source_path -> entry}."""
    return {
        name: {"path": paths.get(name, ""), "files": {rel: asdict(entry) for rel, entry in sorted(files.items())}}
        for name, files in sorted(state.items())
        if files
    }


class _StateWriter:
    """Saves the state mirror through the store (atomically; the store writes only what changed)."""

    def __init__(self, store: StoreBase, state: State, paths: dict[str, str]) -> None:
        self.store, self.state, self.paths = store, state, paths

    def write(self) -> None:
        self.store.save_knowledge_state(state_document(self.state, self.paths))


# -- the report --------------------------------------------------------------------------
@dataclass
class FileResult:
    folder: str
    source_path: str
    path: str
    area: str
    file_type: str
    status: str  # new, changed, unchanged, renamed, removed, failed
    chunks: int  # new/changed: chunks written (or that would be); others: chunks kept or removed
    error: str | None = None
    renamed_from: str | None = None


@dataclass
class KnowledgeReport:
    folders: list[Folder]
    dry_run: bool
    files: list[FileResult] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    embedded: int = 0  # distinct chunk texts sent to the embedder (dry run: that would be)
    reused: int = 0  # chunk texts whose vector came from the store instead
    added: int = 0
    deleted: int = 0
    other_folders: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[FileResult]:
        return [f for f in self.files if f.status == "failed"]

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    def chunks(self, status: str) -> int:
        return sum(f.chunks for f in self.files if f.status == status)

    def to_dict(self) -> dict[str, Any]:
        kept = sum(f.chunks for f in self.files if f.status in ("unchanged", "renamed", "failed"))
        return {
            "folders": [{"name": f.name, "path": str(f.path)} for f in self.folders],
            "dry_run": self.dry_run,
            "summary": {**{s: self.count(s) for s in STATUSES}, "skipped": len(self.skipped)},
            "chunks": {"added": self.added, "deleted": self.deleted, "kept": kept},
            "embedded": self.embedded,
            "reused": self.reused,
            "files": [asdict(f) for f in self.files],
            "skipped": [asdict(s) for s in self.skipped],
            "other_folders": self.other_folders,
        }


# -- the import --------------------------------------------------------------------------
@dataclass
class _Work:
    """A new or changed file, read: its chunks and, if it replaces one, the old entry."""

    source: SourceFile
    checksum: str
    chunks: list[Chunk]
    old: Entry | None
    result: FileResult


def import_knowledge(
    store: StoreBase, folders: Sequence[Folder], *, dry_run: bool = False, progress: Progress | None = None
) -> KnowledgeReport:
    """Bring the store's chunks of `folders` in step with their files. Never raises for one bad file:
    unreadable files are reported (status "failed") and keep their previous chunks."""
    chunking = Chunking.from_config(store.config)
    with nullcontext() if dry_run else store.knowledge_lock():
        state, paths = load_state(store, chunking)
        report = KnowledgeReport(list(folders), dry_run)
        plan = _plan(folders, state, chunking, report)
        report.other_folders = sorted(set(state) - {f.name for f in folders})
        if dry_run:
            _dry_run(store, plan, chunking, report)
            return report
        if plan.todo:
            store.check_model()  # a model change stops the run before it changes anything
        for folder in folders:
            paths[folder.name] = str(folder.path)
        writer = _StateWriter(store, state, paths)
        _apply_renames(store, plan.renames, state)
        _apply_removals(store, plan.removed, state, report)
        _apply_new_and_changed(store, plan.todo, state, chunking, report, writer, progress)
        writer.write()
    report.files.sort(key=lambda f: (f.folder, f.source_path))
    return report


@dataclass
class _Removed:
    folder: str
    source_path: str
    entry: Entry
    result: FileResult


@dataclass
class _Plan:
    todo: list[tuple[SourceFile, Entry | None, FileResult]] = field(default_factory=list)  # new and changed
    renames: list[tuple[SourceFile, _Removed]] = field(default_factory=list)
    removed: list[_Removed] = field(default_factory=list)


def _plan(folders: Sequence[Folder], state: State, chunking: Chunking, report: KnowledgeReport) -> _Plan:
    """Classify every file by checksum; nothing is read beyond hashing, nothing is written."""
    plan = _Plan()
    new: list[tuple[SourceFile, str, FileResult]] = []
    for folder in folders:
        files, skipped = scan(folder)
        report.skipped += skipped
        known = state.get(folder.name, {})
        for source in files:
            old = known.get(source.source_path)
            result = FileResult(
                folder.name,
                source.source_path,
                str(source.path),
                source.area,
                source.file_type,
                "new" if old is None else "changed",
                0,
            )
            report.files.append(result)
            try:
                checksum = file_sha256(source.path)
            except OSError as exc:
                _fail(result, f"cannot read: {exc.strerror or exc}", old)
                continue
            if old is None:
                new.append((source, checksum, result))
            elif old.checksum == checksum and old.chunking == chunking.signature:
                result.status, result.chunks = "unchanged", len(old.ids)
            else:
                plan.todo.append((source, old, result))
        present = {f.source_path for f in files}
        for rel, entry in known.items():
            if rel not in present:
                result = FileResult(
                    folder.name, rel, str(folder.path / rel), entry.area, entry.file_type, "removed", len(entry.ids)
                )
                plan.removed.append(_Removed(folder.name, rel, entry, result))
    _match_renames(plan, new, chunking, {f.name: f for f in folders})
    report.files += [r.result for r in plan.removed]
    return plan


def _match_renames(
    plan: _Plan, new: list[tuple[SourceFile, str, FileResult]], chunking: Chunking, folders: dict[str, Folder]
) -> None:
    """A new file with the content of a file gone in this run takes over its chunks (nothing is embedded)."""
    gone: dict[tuple[str, str], list[_Removed]] = {}
    for removed in plan.removed:
        if removed.entry.checksum and removed.entry.chunking == chunking.signature:
            gone.setdefault((removed.entry.checksum, removed.entry.file_type), []).append(removed)
    for source, checksum, result in new:
        candidates = gone.get((checksum, source.file_type))
        if not candidates:
            plan.todo.append((source, None, result))
            continue
        removed = candidates.pop(0)
        plan.removed.remove(removed)
        result.status, result.chunks = "renamed", len(removed.entry.ids)
        result.renamed_from = str(folders[removed.folder].path / removed.source_path)
        plan.renames.append((source, removed))


def _fail(result: FileResult, error: str, old: Entry | None) -> None:
    result.status, result.error, result.chunks = "failed", error, len(old.ids) if old else 0


def _read(source: SourceFile, old: Entry | None, result: FileResult, chunking: Chunking) -> _Work | None:
    try:
        data = source.path.read_bytes()
        chunks = read_chunks(source.path.name, data, chunking.size, chunking.overlap)
    except UnreadableFile as exc:
        _fail(result, exc.message, old)
        return None
    except OSError as exc:
        _fail(result, f"cannot read: {exc.strerror or exc}", old)
        return None
    result.chunks = len(chunks)
    return _Work(source, hashlib.sha256(data).hexdigest(), chunks, old, result)


def _apply_renames(store: StoreBase, renames: list[tuple[SourceFile, _Removed]], state: State) -> None:
    if not renames:
        return
    with store.transaction():
        for source, removed in renames:
            meta = {
                "knowledge_folder": source.folder.name,
                "source_path": source.source_path,
                "source_file": PurePosixPath(source.source_path).name,
            }
            for mid in removed.entry.ids:
                store.update(mid, metadata=meta, area=source.area, actor=ACTOR)
    for source, removed in renames:
        entry = state[removed.folder].pop(removed.source_path)
        state.setdefault(source.folder.name, {})[source.source_path] = replace(entry, area=source.area)


def _apply_removals(store: StoreBase, removed: list[_Removed], state: State, report: KnowledgeReport) -> None:
    ids = [mid for r in removed for mid in r.entry.ids]
    if ids:
        with store.transaction():
            report.deleted += len(store.delete(ids, cascade=False, actor=ACTOR).deleted)
    for r in removed:
        state[r.folder].pop(r.source_path, None)


def _apply_new_and_changed(
    store: StoreBase,
    todo: list[tuple[SourceFile, Entry | None, FileResult]],
    state: State,
    chunking: Chunking,
    report: KnowledgeReport,
    writer: _StateWriter,
    progress: Progress | None,
) -> None:
    group: list[_Work] = []
    pending = 0  # chunks read but not yet committed
    for done, (source, old, result) in enumerate(todo, start=1):
        work = _read(source, old, result, chunking)
        if work is not None:
            group.append(work)
            pending += len(work.chunks)
        if pending >= GROUP_CHUNKS or done == len(todo):
            _commit(store, group, state, chunking, report)
            writer.write()
            group, pending = [], 0
            if progress:
                progress(done, len(todo))


def _commit(store: StoreBase, group: list[_Work], state: State, chunking: Chunking, report: KnowledgeReport) -> None:
    """Embed the group's chunks first, then swap every file's old chunks for new ones in one transaction."""
    records: list[dict[str, Any]] = [
        {"text": chunk.text, "area": w.source.area, "metadata": _metadata(w, i, chunk)}
        for w in group
        for i, chunk in enumerate(w.chunks)
    ]
    for record in records:  # a file's own front-matter `importance` wins over the configured default
        record["metadata"].setdefault("importance", float(store.config["knowledge_importance"]))
    vectors = _vectors(store, [r["text"] for r in records], report) if records else None
    old_ids = [mid for w in group if w.old for mid in w.old.ids]
    ids: list[str] = []
    if records or old_ids:
        with store.transaction():
            if old_ids:
                report.deleted += len(store.delete(old_ids, cascade=False, actor=ACTOR).deleted)
            if vectors is not None:
                ids = store.insert_records(records, vectors, store.embedder.info, actor=ACTOR, op="import")
    report.added += len(ids)
    stamp, start = now_iso(), 0
    for w in group:
        mine = ids[start : start + len(w.chunks)]
        start += len(w.chunks)
        state.setdefault(w.source.folder.name, {})[w.source.source_path] = Entry(
            w.checksum, w.source.area, w.source.file_type, mine, chunking.signature, stamp
        )


def _metadata(work: _Work, index: int, chunk: Chunk) -> dict[str, Any]:
    return {
        "knowledge_source": True,
        "knowledge_folder": work.source.folder.name,
        "source_file": PurePosixPath(work.source.source_path).name,
        "source_path": work.source.source_path,
        "file_type": work.source.file_type,
        "source_checksum": work.checksum,
        "chunk": index,
        **chunk.meta,
    }


def _vectors(store: StoreBase, texts: list[str], report: KnowledgeReport) -> np.ndarray:
    """One vector per text: from the store when the same text is there already, else embedded once."""
    import numpy as np

    from memctl.embeddings import content_hash

    store.check_model()
    hashes = [content_hash(t) for t in texts]
    unique = dict(zip(hashes, texts, strict=True))
    known = store.vectors_for_hashes(list(unique))
    missing = [h for h in unique if h not in known]
    if missing:
        known.update(zip(missing, store.embed([unique[h] for h in missing]), strict=True))
    report.embedded += len(missing)
    report.reused += len(unique) - len(missing)
    return np.stack([known[h] for h in hashes]).astype(np.float32)


def _dry_run(store: StoreBase, plan: _Plan, chunking: Chunking, report: KnowledgeReport) -> None:
    """Read what would be imported (chunk counts, embeddings needed); write nothing."""
    from memctl.embeddings import content_hash

    texts: dict[str, str] = {}
    for source, old, result in plan.todo:
        work = _read(source, old, result, chunking)
        if work is None:
            continue
        report.added += len(work.chunks)
        report.deleted += len(old.ids) if old else 0
        texts.update((content_hash(c.text), c.text) for c in work.chunks)
    report.deleted += sum(len(r.entry.ids) for r in plan.removed)
    known = store.known_hashes(list(texts))
    report.embedded = len(texts) - len(known)
    report.reused = len(known)
    report.files.sort(key=lambda f: (f.folder, f.source_path))
