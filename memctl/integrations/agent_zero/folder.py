"""Agent Zero memory folders: import them without trusting the pickle, export curated stores back.

An Agent Zero store is one folder, `usr/memory/<subdir>/`:

- `index.faiss` — a FAISS `IndexFlatIP`; row r holds the vector of the r-th document (vectors as
  the model returned them: Agent Zero does not L2-normalise). Relevance = clamp((1 + dot) / 2).
- `index.pkl` — LangChain's `FAISS.save_local` pickle (protocol 4). Checked with `pickletools.dis`
  against langchain-community 0.3.19 / langchain-core 0.3 (what Agent Zero pins):

      TUPLE2(
        InMemoryDocstore: STACK_GLOBAL("langchain_community.docstore.in_memory", "InMemoryDocstore"),
                          EMPTY_TUPLE, NEWOBJ, BUILD({"_dict": {doc_id: Document, ...}}),
        {row: doc_id, ...}                      # FAISS row 0..n-1 -> docstore id
      )
      Document: STACK_GLOBAL("langchain_core.documents.base", "Document"), EMPTY_TUPLE, NEWOBJ,
                BUILD({"__dict__": {"id": doc_id, "metadata": {...}, "page_content": text, "type": "Document"},
                       "__pydantic_extra__": None, "__pydantic_fields_set__": {"id", "metadata", "page_content"},
                       "__pydantic_private__": None})

  `metadata["area"]` is sometimes the enum itself: STACK_GLOBAL("python.helpers.memory", "Memory.Area"),
  ("main",), REDUCE.
- `embedding.json` — `{"model_provider": ..., "model_name": ...}` (Agent Zero's memory helper writes
  exactly these two keys; a mismatch with its settings makes it re-embed every document). Read
  leniently: memctl's own `{"provider", "model"}` shape is accepted too.
- `index.faiss.sha256` is *not* an Agent Zero file (no release writes or checks it): memctl neither
  writes nor trusts one; a stale one left beside index.faiss is ignored (never a re-embedding).
- Timestamps are naive `%Y-%m-%d %H:%M:%S` in the zone Agent Zero runs in (its Docker image: UTC):
  `--timezone` (default UTC) says which, both ways, so a round trip is exact.
- `knowledge_import.json` — per knowledge file: checksum and the document ids it produced. Without it
  Agent Zero imports its knowledge folders again (new ids, duplicate chunks).

Reading goes through a restricted unpickler that resolves only the three globals above, each to
a small stand-in that keeps plain data; any other global is refused before it is called. Writing
emits the same opcodes by hand, so LangChain is never imported (it is a dev/bench extra only).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.embeddings import ModelInfo
from memctl.errors import StoreError, UsageError
from memctl.integrations.agent_zero.pickle_read import INDEX_PKL, _DocumentState, load_index_pkl
from memctl.store.records import AREAS, RESERVED_METADATA_KEYS
from memctl.store.validate import IMPORTANCE_KEY, MAX_ID_LENGTH, check_id, check_importance

if TYPE_CHECKING:
    import numpy as np

    from memctl.store.base import StoreBase

INDEX_FAISS = "index.faiss"
EMBEDDING_JSON = "embedding.json"
SHA_SIDECAR = "index.faiss.sha256"
KNOWLEDGE_IMPORT = "knowledge_import.json"
A0_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # Agent Zero's Memory.get_timestamp(): local time, no offset

# The A0 metadata keys that become memctl columns (id, area, created_at/updated_at).
A0_COLUMN_KEYS = ("id", "area", "timestamp")
# What memctl cannot hold as it is, kept under one metadata key and written back exactly on export:
# {"area": an area memctl does not have (e.g. "instruments"), "keys": {name: value}} for metadata
# keys that are memctl columns (created_at, updated_at, ...) or this key itself.
A0_KEY = "a0"
A0_AREA_KEY = "a0_area"  # an older memctl's key for the area; read on export only from that shape (see a0_metadata)
# The embedding providers Agent Zero names for a sentence-transformers model run locally.
_LOCAL_PROVIDERS = {"huggingface", "sentence-transformers", "sentence_transformers", "local"}
_MAX_DEPTH = 12
_MAX_NODES = 20000


# -- reading: the folder ---------------------------------------------------------------------------
class Notes:
    """Notes for the report, with repeats counted instead of listed 10,000 times."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, message: str) -> None:
        self.counts[message] += 1

    def render(self) -> list[str]:
        return [m if n == 1 else f"{m} ({n} documents)" for m, n in self.counts.items()]


@dataclass
class AgentZeroDocument:
    id: str
    text: str
    area: str
    created_at: str | None
    metadata: dict[str, Any]
    row: int | None = None


@dataclass
class AgentZeroFolder:
    """What was read from an Agent Zero folder; no code from it ran."""

    path: Path
    documents: list[AgentZeroDocument]
    total: int  # documents in the docstore, including skipped ones
    skipped: list[dict[str, str]]
    embedding: dict[str, Any] | None
    vectors: np.ndarray | None  # index.faiss rows, when they can be trusted
    notes: Notes


def read_agent_zero(path: str | os.PathLike[str], *, timezone: str | tzinfo | None = "UTC") -> AgentZeroFolder:
    """Read `usr/memory/<subdir>/` (or a project's `usr/projects/<name>/.a0proj/memory/`) safely.

    Naive timestamps are read in `timezone` (Agent Zero's zone; its Docker image runs in UTC).
    Missing folder/files: UsageError; a refused pickle: UnsafePickleError."""
    tz = parse_timezone(timezone)
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise UsageError(
            f"Agent Zero memory folder {str(folder)!r} does not exist",
            hint="point PATH at usr/memory/<subdir> of the Agent Zero install",
        )
    missing = [name for name in (INDEX_PKL, INDEX_FAISS) if not (folder / name).is_file()]
    if missing:
        raise UsageError(
            f"{folder} has no {' or '.join(missing)}; it is not an Agent Zero memory folder",
            hint="point PATH at usr/memory/<subdir> (the folder holding index.faiss and index.pkl)",
        )
    try:
        data = (folder / INDEX_PKL).read_bytes()
    except OSError as exc:
        raise StoreError(f"cannot read {folder / INDEX_PKL}: {exc}") from exc
    docs, rows = load_index_pkl(data)
    notes = Notes()
    if (folder / KNOWLEDGE_IMPORT).is_file():
        notes.add(
            f"{KNOWLEDGE_IMPORT} is not imported (its paths belong to the Agent Zero install); "
            "`export-agent-zero --force` over this folder carries it over"
        )
    documents, skipped = _documents(docs, rows, notes, tz)
    return AgentZeroFolder(
        path=folder,
        documents=documents,
        total=len(docs),
        skipped=skipped,
        embedding=_read_embedding(folder, notes),
        vectors=_read_vectors(folder, len(rows), notes),
        notes=notes,
    )


def _documents(
    docs: dict[Any, Any], rows: dict[Any, Any], notes: Notes, tz: tzinfo | None
) -> tuple[list[AgentZeroDocument], list[dict[str, str]]]:
    row_of: dict[str, int] = {}
    for row, doc_id in sorted(((r, i) for r, i in rows.items() if isinstance(r, int)), key=lambda p: p[0]):
        if not isinstance(doc_id, str) or doc_id not in docs:
            notes.add(f"index row {row} points at no document; ignored")
        elif doc_id in row_of:
            notes.add(f"document {doc_id!r} has more than one index row; the first is used")
        else:
            row_of[doc_id] = row
    documents: list[AgentZeroDocument] = []
    skipped: list[dict[str, str]] = []
    times: dict[Any, str | None] = {}  # Agent Zero stamps a whole batch with one timestamp: many repeats
    for key, doc in docs.items():
        doc_id = key if isinstance(key, str) else repr(key)
        reason = _why_unusable(key, doc)
        if reason:
            skipped.append({"id": doc_id, "reason": reason})
            continue
        documents.append(_document(doc_id, doc.fields, row_of.get(doc_id), notes, times, tz))
    without_row = sum(1 for d in documents if d.row is None)
    if without_row:
        notes.add(f"{without_row} documents have no row in {INDEX_FAISS}; they are re-embedded")
    return documents, skipped


def _importance_ok(value: Any) -> bool:
    try:
        check_importance(value)
    except UsageError:
        return False
    return True


def _why_unusable(key: Any, doc: Any) -> str | None:
    if not isinstance(key, str) or not key:
        return "docstore id is not a string"
    try:
        check_id(key)
    except UsageError:  # the rule every import applies: not a path, an option or 10,000 characters
        return f"docstore id is not a valid memory id (1 to {MAX_ID_LENGTH} letters, digits and _ . : -)"
    if not isinstance(doc, _DocumentState) or doc.fields is None:
        return "not a Document"
    text = doc.fields.get("page_content")
    if not isinstance(text, str) or not text.strip():
        return "empty text"
    return None


def _document(
    doc_id: str, fields: dict[str, Any], row: int | None, notes: Notes, times: dict[Any, str | None], tz: tzinfo | None
) -> AgentZeroDocument:
    raw = fields.get("metadata")
    if not isinstance(raw, dict):
        notes.add("a document without a metadata dict was imported with empty metadata")
        raw = {}
    meta_id = raw.get("id")
    if meta_id is not None and meta_id != doc_id:
        notes.add(f"metadata id {meta_id!r} differs from docstore id {doc_id!r}; the docstore id is kept")
    area = raw.get("area")
    metadata: dict[str, Any] = {}
    kept: dict[str, Any] = {}  # metadata[A0_KEY]
    if area in AREAS:
        pass
    elif area in (None, ""):
        area = "main"
    else:
        notes.add(f"area {area!r} is not a memctl area: imported as main, kept in metadata {A0_KEY}.area")
        kept["area"] = area if isinstance(area, str) else repr(area)
        area = "main"
    stamp = raw.get("timestamp")
    key = stamp if isinstance(stamp, str) else None
    if key is None or key not in times:
        created_at = a0_time_to_iso(stamp, tz)
        if key is not None:
            times[key] = created_at
    else:
        created_at = times[key]
    if raw.get("timestamp") is not None and created_at is None:
        notes.add(f"unreadable timestamp {raw.get('timestamp')!r}: import time used")
    for key, value in raw.items():
        name = key if isinstance(key, str) else str(key)
        if name in A0_COLUMN_KEYS:
            continue
        try:
            plain = _plain(value, [0])
        except ValueError as exc:
            notes.add(f"metadata key {name!r} dropped: {exc}")
            continue
        if name in RESERVED_METADATA_KEYS or name == A0_KEY:
            notes.add(f"metadata key {name!r} is a memctl column: kept in metadata {A0_KEY}.keys")
            kept.setdefault("keys", {})[name] = plain
        elif name == IMPORTANCE_KEY and not _importance_ok(plain):
            notes.add(f"metadata {name!r} is not a number in [0, 1]: kept in metadata {A0_KEY}.keys")
            kept.setdefault("keys", {})[name] = plain
        else:
            metadata[name] = plain
    if kept:
        metadata[A0_KEY] = kept
    return AgentZeroDocument(
        id=doc_id, text=fields["page_content"], area=str(area), created_at=created_at, metadata=metadata, row=row
    )


def _plain(value: Any, budget: list[int], depth: int = 0) -> Any:
    """JSON-ready data (tuples and sets become lists); anything else is refused."""
    budget[0] += 1
    if depth > _MAX_DEPTH or budget[0] > _MAX_NODES:
        raise ValueError("value nested too deeply or too large")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str | int | float | bool) and k is not None:
                raise ValueError(f"{type(k).__name__} dict key")
            out[k if isinstance(k, str) else json.dumps(k)] = _plain(v, budget, depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_plain(v, budget, depth + 1) for v in value]
    if isinstance(value, set | frozenset):
        items = [_plain(v, budget, depth + 1) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    raise ValueError(f"{type(value).__name__} value is not plain data")


def parse_timezone(value: str | tzinfo | None) -> tzinfo | None:
    """An IANA zone name ("UTC", "Europe/Berlin") or a tzinfo; "local" (this machine's zone, the offset
    in force at each date) is None."""
    if isinstance(value, tzinfo):
        return value
    name = (value or "UTC").strip()
    if name.upper() == "UTC":
        return UTC
    if name.lower() == "local":
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise UsageError(
            f"--timezone {name!r} is not a time zone", hint="an IANA name such as UTC or Europe/Berlin, or 'local'"
        ) from exc


def a0_time_to_iso(value: Any, tz: tzinfo | None = UTC) -> str | None:
    """Agent Zero's timestamp as memctl's ISO 8601 (UTC); naive times are read in `tz`."""
    if isinstance(value, str):
        return _a0_text_time_to_iso(value.strip(), tz)
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            moment = datetime.fromtimestamp(value, UTC)
        else:
            return None
        return _to_utc_iso(moment, tz)
    except (ValueError, OverflowError, OSError):
        return None


def _a0_text_time_to_iso(text: str, tz: tzinfo | None) -> str | None:
    try:  # fromisoformat (3.11) reads A0_TIME_FORMAT too, ~20x faster than strptime
        return _to_utc_iso(datetime.fromisoformat(text), tz)
    except (ValueError, OverflowError, OSError):
        return None


def _to_utc_iso(moment: datetime, tz: tzinfo | None) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz) if tz is not None else moment.astimezone()  # local: DST-aware
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")


def iso_to_a0_time(value: str, tz: tzinfo | None = UTC) -> str:
    """memctl's ISO timestamp as Agent Zero writes it: naive `%Y-%m-%d %H:%M:%S` in `tz`."""
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        moment = datetime.now(UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(tz).strftime(A0_TIME_FORMAT)


def _read_embedding(folder: Path, notes: Notes) -> dict[str, Any] | None:
    path = folder / EMBEDDING_JSON
    if not path.is_file():
        notes.add(f"no {EMBEDDING_JSON}: the embedding model is unknown, texts are re-embedded")
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        notes.add(f"{EMBEDDING_JSON} is unreadable ({exc}): texts are re-embedded")
        return None
    if not isinstance(data, dict):
        notes.add(f"{EMBEDDING_JSON} is not a JSON object: texts are re-embedded")
        return None
    return data


def _declared_bytes(path: Path) -> int | None:
    """Bytes of vectors a flat FAISS index file says it holds (d x ntotal x 4), read from its header
    before FAISS allocates them: a few hundred bytes declaring a terabyte must not be read."""
    import struct

    try:
        with path.open("rb") as handle:
            head = handle.read(16)
    except OSError:
        return None
    if len(head) < 16 or head[:4] not in (b"IxFI", b"IxF2", b"IxFl"):  # not a flat index: FAISS judges it
        return None
    dimension, total = struct.unpack("<iq", head[4:16])  # after the 4-byte type tag: int32 d, int64 ntotal
    if dimension <= 0 or total < 0:
        return None
    return dimension * total * 4


def _read_vectors(folder: Path, rows: int, notes: Notes) -> np.ndarray | None:
    """index.faiss as an (n, d) array, or None when its vectors cannot be trusted."""
    import faiss
    import numpy as np

    path = folder / INDEX_FAISS  # an index.faiss.sha256 beside it is no Agent Zero file: not consulted
    declared = _declared_bytes(path)
    if declared is not None and declared > path.stat().st_size:
        notes.add(f"{INDEX_FAISS}'s header declares more vectors than the file holds: texts are re-embedded")
        return None
    try:
        index = faiss.read_index(str(path))
        vectors = index.reconstruct_n(0, index.ntotal) if index.ntotal else np.zeros((0, index.d), np.float32)
    except RuntimeError as exc:
        notes.add(f"{INDEX_FAISS} is unreadable ({str(exc).splitlines()[0]}): texts are re-embedded")
        return None
    if index.ntotal != rows:
        notes.add(f"{INDEX_FAISS} holds {index.ntotal} vectors for {rows} rows: texts are re-embedded")
        return None
    return np.asarray(vectors, dtype=np.float32)


def model_matches(embedding: dict[str, Any] | None, info: ModelInfo) -> bool:
    """Does Agent Zero's embedding.json name the configured model? (lenient about the provider's spelling)"""
    if not embedding:
        return False
    provider = str(embedding.get("model_provider") or embedding.get("provider") or "").strip().lower()
    name = str(embedding.get("model_name") or embedding.get("model") or "").strip()
    if not name:
        return False
    if (provider, name) == (info.provider, info.model):
        return True
    if info.provider == "local":
        return provider in _LOCAL_PROVIDERS and name.removeprefix("huggingface/") == info.model
    if info.provider == "litellm":
        return info.model in (name, f"{provider}/{name}")
    return False


def a0_embedding(model: dict[str, Any]) -> dict[str, str]:
    """memctl's embedding.json as Agent Zero's (`model_provider`, `model_name`)."""
    provider, name = str(model.get("provider") or ""), str(model.get("model") or "")
    if provider == "local":
        return {"model_provider": "huggingface", "model_name": name}
    if provider == "litellm":
        head, sep, tail = name.partition("/")
        return {"model_provider": head, "model_name": tail} if sep else {"model_provider": "openai", "model_name": name}
    return {"model_provider": provider, "model_name": name}


# -- keeping both sides in step: import-agent-zero --sync -------------------------------------------
# The folder as memctl last saw it (after an import or an export), per memctl store: {id: hash of
# text, area, timestamp, metadata}. Agent Zero leaves unknown files in its memory folder alone.
SYNC_FILE = "memctl_sync.json"
SYNC_VERSION = 1


def document_hash(doc: AgentZeroDocument) -> str:
    import hashlib

    blob = json.dumps([doc.text, doc.area, doc.created_at, doc.metadata], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def folder_state(source: AgentZeroFolder) -> dict[str, str]:
    return {doc.id: document_hash(doc) for doc in source.documents}


def _read_sync(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / SYNC_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != SYNC_VERSION or not isinstance(data.get("stores"), dict):
        return {}
    return data["stores"]


def sync_base(folder: Path, store: StoreBase) -> dict[str, str] | None:
    """The folder's documents as memctl last saw them for this store (None: never imported or exported)."""
    entry = _read_sync(folder).get(_store_key(store))
    return dict(entry["documents"]) if isinstance(entry, dict) and isinstance(entry.get("documents"), dict) else None


def write_sync_base(folder: Path, store: StoreBase, state: dict[str, str], *, into: Path | None = None) -> None:
    """Record `state` as what this store last saw of `folder` (written to `into` when given: a folder
    about to replace it). Other stores' entries are kept."""
    from memctl.files import atomic_write_bytes
    from memctl.store.records import now_iso

    stores = _read_sync(folder)
    stores[_store_key(store)] = {"synced_at": now_iso(), "documents": state}
    atomic_write_bytes(
        (into or folder) / SYNC_FILE,
        json.dumps({"version": SYNC_VERSION, "stores": stores}).encode("utf-8"),
        mode=0o644,
    )


def _store_key(store: StoreBase) -> str:
    return str(getattr(store, "location", store.name))
