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

import io
import json
import os
import pickle
import secrets
import shutil
import struct
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.embeddings import ModelInfo
from memctl.errors import StoreError, UnsafePickleError, UsageError
from memctl.files import fsync_dir, fsync_file, swap_folder, write_synced
from memctl.store.records import AREAS, RESERVED_METADATA_KEYS

if TYPE_CHECKING:
    import numpy as np

    from memctl.store.base import StoreBase

INDEX_FAISS = "index.faiss"
INDEX_PKL = "index.pkl"
EMBEDDING_JSON = "embedding.json"
SHA_SIDECAR = "index.faiss.sha256"
KNOWLEDGE_IMPORT = "knowledge_import.json"
A0_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # Agent Zero's Memory.get_timestamp(): local time, no offset

DOCSTORE_GLOBAL = ("langchain_community.docstore.in_memory", "InMemoryDocstore")
DOCUMENT_GLOBAL = ("langchain_core.documents.base", "Document")
AREA_GLOBAL = ("python.helpers.memory", "Memory.Area")
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


# -- reading: the restricted unpickler -------------------------------------------------------------
class _DocstoreState:
    """Stands in for InMemoryDocstore: keeps the `_dict` of its pickled state, runs nothing."""

    docs: Any = None

    def __setstate__(self, state: Any) -> None:
        self.docs = state.get("_dict") if isinstance(state, dict) else None


class _DocumentState:
    """Stands in for a LangChain Document: keeps its fields (pydantic v2 `__dict__`, or a plain dict)."""

    fields: Any = None

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, dict) and isinstance(state.get("__dict__"), dict):
            state = state["__dict__"]
        self.fields = state if isinstance(state, dict) else None


def _area_value(value: Any) -> str:
    """Stands in for `Memory.Area(value)`: the enum's value, a string."""
    if not isinstance(value, str):
        raise pickle.UnpicklingError(f"Memory.Area value must be a string, not {type(value).__name__}")
    return value


_ALLOWED: dict[tuple[str, str], Any] = {
    DOCSTORE_GLOBAL: _DocstoreState,
    DOCUMENT_GLOBAL: _DocumentState,
    AREA_GLOBAL: _area_value,
}


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        allowed = _ALLOWED.get((module, name))
        if allowed is None:
            raise UnsafePickleError(
                f"{INDEX_PKL} refers to {module}.{name}, which is not part of an Agent Zero memory store; "
                "refused before anything in it ran",
                hint="only LangChain's InMemoryDocstore/Document and Agent Zero's Memory.Area are accepted",
            )
        return allowed

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError(f"{INDEX_PKL} uses persistent ids, which an Agent Zero store never does")


def load_index_pkl(data: bytes) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """(docstore dict id -> _DocumentState, row -> id) from index.pkl bytes; refuses anything else."""
    try:
        obj = _RestrictedUnpickler(io.BytesIO(data)).load()
    except UnsafePickleError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError,
            OverflowError, MemoryError, RecursionError, UnicodeDecodeError, struct.error) as exc:
        raise UnsafePickleError(f"{INDEX_PKL} is truncated or not a pickle ({type(exc).__name__}: {exc})",
                                hint="restore the folder from a backup; nothing was imported") from exc
    if not (isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], _DocstoreState)
            and isinstance(obj[0].docs, dict) and isinstance(obj[1], dict)):
        raise UnsafePickleError(f"{INDEX_PKL} is a pickle, but not LangChain's FAISS docstore "
                                "(InMemoryDocstore, row -> id)", hint="is this an Agent Zero memory folder?")
    return obj[0].docs, obj[1]


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
        raise UsageError(f"Agent Zero memory folder {str(folder)!r} does not exist",
                         hint="point PATH at usr/memory/<subdir> of the Agent Zero install")
    missing = [name for name in (INDEX_PKL, INDEX_FAISS) if not (folder / name).is_file()]
    if missing:
        raise UsageError(f"{folder} has no {' or '.join(missing)}; it is not an Agent Zero memory folder",
                         hint="point PATH at usr/memory/<subdir> (the folder holding index.faiss and index.pkl)")
    try:
        data = (folder / INDEX_PKL).read_bytes()
    except OSError as exc:
        raise StoreError(f"cannot read {folder / INDEX_PKL}: {exc}") from exc
    docs, rows = load_index_pkl(data)
    notes = Notes()
    if (folder / KNOWLEDGE_IMPORT).is_file():
        notes.add(f"{KNOWLEDGE_IMPORT} is not imported (its paths belong to the Agent Zero install); "
                  "`export-agent-zero --force` over this folder carries it over")
    documents, skipped = _documents(docs, rows, notes, tz)
    return AgentZeroFolder(path=folder, documents=documents, total=len(docs), skipped=skipped,
                           embedding=_read_embedding(folder, notes), vectors=_read_vectors(folder, len(rows), notes),
                           notes=notes)


def _documents(docs: dict[Any, Any], rows: dict[Any, Any], notes: Notes,
               tz: tzinfo | None) -> tuple[list[AgentZeroDocument], list[dict[str, str]]]:
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


def _why_unusable(key: Any, doc: Any) -> str | None:
    if not isinstance(key, str) or not key:
        return "docstore id is not a string"
    if not isinstance(doc, _DocumentState) or doc.fields is None:
        return "not a Document"
    text = doc.fields.get("page_content")
    if not isinstance(text, str) or not text.strip():
        return "empty text"
    return None


def _document(doc_id: str, fields: dict[str, Any], row: int | None, notes: Notes,
              times: dict[Any, str | None], tz: tzinfo | None) -> AgentZeroDocument:
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
        else:
            metadata[name] = plain
    if kept:
        metadata[A0_KEY] = kept
    return AgentZeroDocument(id=doc_id, text=fields["page_content"], area=str(area), created_at=created_at,
                             metadata=metadata, row=row)


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
        raise UsageError(f"--timezone {name!r} is not a time zone",
                         hint="an IANA name such as UTC or Europe/Berlin, or 'local'") from exc


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


# -- importing ---------------------------------------------------------------------------------------
@dataclass
class AgentZeroImportReport:
    source: str
    documents: int = 0
    imported: int = 0
    reused_vectors: int = 0
    reembedded: int = 0
    batches: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "documents": self.documents, "imported": self.imported,
                "reused_vectors": self.reused_vectors, "reembedded": self.reembedded, "batches": self.batches,
                "skipped": self.skipped, "notes": self.notes}


def import_agent_zero(store: StoreBase, source: AgentZeroFolder, *, batch_size: int = 500,
                      progress: Callable[[int, int], None] | None = None) -> AgentZeroImportReport:
    """Insert the documents (ids, texts, areas, timestamps, metadata kept); ids the store has are skipped.

    Stored vectors are reused (normalised) when embedding.json names the configured model and the
    index can be trusted; otherwise the texts are embedded with the configured model.
    """
    from memctl.store.embedded import iter_chunks

    info = store.embedder.info
    store.check_model(info)
    report = AgentZeroImportReport(source=str(source.path), documents=source.total, skipped=list(source.skipped))
    vectors = _reusable_vectors(store, source, info)
    done = 0
    for chunk in iter_chunks(source.documents, batch_size):
        existing = {m.id for m in store.get([d.id for d in chunk])}  # not embedded for nothing
        batch = [d for d in chunk if d.id not in existing]
        inserted: set[str] = set()
        if batch:
            matrix = _batch_vectors(store, batch, vectors, report)
            records = [{"id": d.id, "text": d.text, "area": d.area, "created_at": d.created_at,
                        "updated_at": d.created_at, "metadata": d.metadata} for d in batch]
            ids = store.insert_records(records, matrix, info, actor="import-agent-zero", op="import",
                                       on_conflict="skip")  # "skip" also covers a writer racing us
            inserted = set(ids)
            report.imported += len(ids)
            report.ids += ids
            report.batches += 1
        report.skipped += [{"id": d.id, "reason": "id exists in the store"} for d in chunk if d.id not in inserted]
        done += len(chunk)
        if progress:
            progress(done, len(source.documents))
    report.notes = source.notes.render()
    return report


def _reusable_vectors(store: StoreBase, source: AgentZeroFolder, info: ModelInfo) -> np.ndarray | None:
    if source.vectors is None or not any(d.row is not None for d in source.documents):
        return None
    if not model_matches(source.embedding, info):
        if source.embedding:
            named = f"{source.embedding.get('model_provider')}/{source.embedding.get('model_name')}"
            source.notes.add(f"{EMBEDDING_JSON} names {named}, the configured model is {info.label()}: "
                             "texts are re-embedded")
        return None
    dim = store.dimension()
    if dim is not None and len(store) and source.vectors.shape[1] != dim:
        source.notes.add(f"stored vectors have dimension {source.vectors.shape[1]}, the store {dim}: "
                         "texts are re-embedded")
        return None
    return source.vectors


def _batch_vectors(store: StoreBase, batch: list[AgentZeroDocument], vectors: np.ndarray | None,
                   report: AgentZeroImportReport) -> np.ndarray:
    import numpy as np

    rows: list[Any] = []
    for doc in batch:
        if vectors is None or doc.row is None or not 0 <= doc.row < len(vectors):
            rows.append(None)
            continue
        vector = vectors[doc.row]
        norm = float(np.linalg.norm(vector))
        rows.append(vector / norm if norm > 0 and np.isfinite(norm) else None)  # memctl keeps unit vectors
    todo = [i for i, row in enumerate(rows) if row is None]
    report.reused_vectors += len(batch) - len(todo)
    report.reembedded += len(todo)
    if todo:
        fresh = store.embed([batch[i].text for i in todo])
        for i, vector in zip(todo, fresh, strict=True):
            rows[i] = vector
    return np.ascontiguousarray(np.stack(rows), dtype=np.float32)


# -- exporting: the pickle, written by hand ---------------------------------------------------------
class _PickleWriter:
    """Protocol-4 opcodes for plain data plus the two LangChain classes (no framing: it is optional)."""

    def __init__(self) -> None:
        self.out = io.BytesIO()
        self.memo: dict[Any, int] = {}
        self.write(pickle.PROTO + bytes([4]))

    def write(self, data: bytes) -> None:
        self.out.write(data)

    def _memoize(self, key: Any) -> None:
        self.memo[key] = len(self.memo)
        self.write(pickle.MEMOIZE)

    def _get(self, key: Any) -> bool:
        index = self.memo.get(key)
        if index is None:
            return False
        self.write(pickle.BINGET + bytes([index]) if index < 256 else pickle.LONG_BINGET + struct.pack("<I", index))
        return True

    def global_(self, module: str, name: str) -> None:
        if self._get(("global", module, name)):
            return
        self.value(module)
        self.value(name)
        self.write(pickle.STACK_GLOBAL)
        self._memoize(("global", module, name))

    def value(self, obj: Any) -> None:
        if obj is None:
            self.write(pickle.NONE)
        elif obj is True or obj is False:
            self.write(pickle.NEWTRUE if obj else pickle.NEWFALSE)
        elif isinstance(obj, int):
            self._int(obj)
        elif isinstance(obj, float):
            self.write(pickle.BINFLOAT + struct.pack(">d", obj))
        elif isinstance(obj, str):
            self._str(obj)
        elif isinstance(obj, dict):
            self.write(pickle.EMPTY_DICT)
            self._batched(list(obj.items()), pickle.SETITEMS, pair=True)
        elif isinstance(obj, list | tuple):
            self.write(pickle.EMPTY_LIST)
            self._batched(list(obj), pickle.APPENDS)
        elif isinstance(obj, set | frozenset):
            self.write(pickle.EMPTY_SET)
            self._batched(sorted(obj), pickle.ADDITEMS)
        else:
            raise TypeError(f"cannot write {type(obj).__name__} into an Agent Zero index.pkl")

    def _int(self, number: int) -> None:
        if 0 <= number < 256:
            self.write(pickle.BININT1 + bytes([number]))
        elif 0 <= number < 65536:
            self.write(pickle.BININT2 + struct.pack("<H", number))
        elif -(2**31) <= number < 2**31:
            self.write(pickle.BININT + struct.pack("<i", number))
        else:
            encoded = number.to_bytes((number.bit_length() + 8) // 8, "little", signed=True)
            head = pickle.LONG1 + bytes([len(encoded)]) if len(encoded) < 256 else \
                pickle.LONG4 + struct.pack("<i", len(encoded))
            self.write(head + encoded)

    def _str(self, text: str) -> None:
        if self._get(("str", text)):
            return
        encoded = text.encode("utf-8", "surrogatepass")
        if len(encoded) < 256:
            self.write(pickle.SHORT_BINUNICODE + bytes([len(encoded)]) + encoded)
        elif len(encoded) < 2**32:
            self.write(pickle.BINUNICODE + struct.pack("<I", len(encoded)) + encoded)
        else:
            self.write(pickle.BINUNICODE8 + struct.pack("<Q", len(encoded)) + encoded)
        self._memoize(("str", text))

    def _batched(self, items: list[Any], opcode: bytes, pair: bool = False) -> None:
        for start in range(0, len(items), 1000):  # pickle's own batch size
            self.write(pickle.MARK)
            for item in items[start : start + 1000]:
                if pair:
                    self.value(item[0])
                    self.value(item[1])
                else:
                    self.value(item)
            self.write(opcode)

    def document(self, doc_id: str, text: str, metadata: dict[str, Any]) -> None:
        fields = {"id": doc_id, "metadata": metadata, "page_content": text, "type": "Document"}
        self.global_(*DOCUMENT_GLOBAL)
        self.write(pickle.EMPTY_TUPLE + pickle.NEWOBJ)
        self.write(pickle.EMPTY_DICT + pickle.MARK)
        self.value("__dict__")
        self.value(fields)
        self.value("__pydantic_extra__")
        self.value(None)
        self.value("__pydantic_fields_set__")
        self.value({"id", "metadata", "page_content"})
        self.value("__pydantic_private__")
        self.value(None)
        self.write(pickle.SETITEMS + pickle.BUILD)

    def getvalue(self) -> bytes:
        return self.out.getvalue() + pickle.STOP


def dump_index_pkl(documents: Iterable[tuple[str, str, dict[str, Any]]]) -> bytes:
    """index.pkl for (id, text, A0 metadata) in row order, exactly the shape FAISS.save_local writes."""
    writer = _PickleWriter()
    ids: list[str] = []
    writer.global_(*DOCSTORE_GLOBAL)
    writer.write(pickle.EMPTY_TUPLE + pickle.NEWOBJ)
    writer.write(pickle.EMPTY_DICT + pickle.MARK)
    writer.value("_dict")
    writer.write(pickle.EMPTY_DICT)
    batch = 0
    writer.write(pickle.MARK)
    for doc_id, text, metadata in documents:
        if batch == 1000:
            writer.write(pickle.SETITEMS + pickle.MARK)
            batch = 0
        writer.value(doc_id)
        writer.document(doc_id, text, metadata)
        ids.append(doc_id)
        batch += 1
    writer.write(pickle.SETITEMS)  # the _dict items
    writer.write(pickle.SETITEMS + pickle.BUILD)  # {"_dict": ...} into the docstore
    writer.value(dict(enumerate(ids)))
    writer.write(pickle.TUPLE2)
    return writer.getvalue()


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
        return {"path": self.path, "count": self.count, "dimension": self.dimension, "embedding": self.embedding,
                "replaced": self.replaced, "knowledge_import": self.knowledge_import, "notes": self.notes}


def check_destination(dest: Path, force: bool) -> None:
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"{dest} exists and is not a folder")
    if (dest / "memories.sqlite").exists():
        raise UsageError(f"{dest} is a memctl store, not an Agent Zero memory folder; refusing to replace it")
    if dest.is_dir() and any(dest.iterdir()) and not force:
        raise UsageError(f"{dest} is not empty", hint="pass --force to replace it (stop Agent Zero first)")


def a0_metadata(memory_id: str, area: str, created_at: str, metadata: dict[str, Any],
                tz: tzinfo | None = UTC) -> dict[str, Any]:
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
    return (isinstance(value, dict) and bool(value) and set(value) <= {"area", "keys"}
            and isinstance(value.get("area", ""), str) and isinstance(value.get("keys", {}), dict))


def export_agent_zero(store: StoreBase, dest: str | os.PathLike[str], *, force: bool = False,
                      progress: Callable[[int, int], None] | None = None,
                      timezone: str | tzinfo = "UTC") -> AgentZeroExportReport:
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
        docs.append((memory.id, memory.text,
                     a0_metadata(memory.id, memory.area, memory.created_at, memory.metadata, tz)))
        if progress and len(ids) % 1000 == 0:
            progress(len(ids), total)
    try:
        matrix = np.ascontiguousarray(np.stack(rows), dtype=np.float32)
    except ValueError as exc:
        raise StoreError(f"stored vectors of store {store.name!r} are inconsistent: {exc}",
                         hint="run `memctl reindex`") from exc
    total = len(ids)
    embedding = a0_embedding(model)
    notes = Notes()
    target.parent.mkdir(parents=True, exist_ok=True)
    knowledge = _carried_knowledge_import(target, set(ids), notes)
    if knowledge is None and any(meta.get("knowledge_source") for _, _, meta in docs):
        notes.add(f"no {KNOWLEDGE_IMPORT} to carry over: Agent Zero will import its knowledge folders again "
                  "on start (duplicating the knowledge chunks exported here)")
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
    return AgentZeroExportReport(path=str(target), count=total, dimension=dimension, embedding=embedding,
                                 replaced=replaced, knowledge_import=knowledge is not None, notes=notes.render())


def _refuse_unimported_changes(target: Path, store: StoreBase, tz: tzinfo | None) -> None:
    """An export over a folder Agent Zero changed since this store last synced with it would silently
    undo those changes (bring deleted memories back, revert edits): refused."""
    base = sync_base(target, store) if target.is_dir() else None
    if base is None or not (target / INDEX_PKL).is_file():
        return
    state = folder_state(read_agent_zero(target, timezone=tz))
    changed = sum(1 for i, h in state.items() if base.get(i) != h) + sum(1 for i in base if i not in state)
    if changed:
        raise UsageError(f"Agent Zero changed {changed} memories in {target} since store {store.name!r} last "
                         "imported it; exporting now would undo those changes",
                         hint=f"run `memctl import-agent-zero {target} --sync` first (or delete {SYNC_FILE} there "
                              "to overwrite them)")


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


def _write_folder(folder: Path, matrix: np.ndarray, pkl: bytes, embedding: dict[str, str],
                  knowledge: dict[str, Any] | None) -> None:
    import faiss

    index = faiss.IndexFlatIP(matrix.shape[1])
    index.add(matrix)
    faiss.write_index(index, str(folder / INDEX_FAISS))
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
        raise StoreError(f"cannot move the exported folder into {dest}: {exc}",
                         hint="export to a new folder beside it, then move the files yourself") from exc
    if moved:
        shutil.rmtree(old, ignore_errors=True)
    return moved


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
    atomic_write_bytes((into or folder) / SYNC_FILE,
                       json.dumps({"version": SYNC_VERSION, "stores": stores}).encode("utf-8"), mode=0o644)


def _store_key(store: StoreBase) -> str:
    return str(getattr(store, "location", store.name))


@dataclass
class AgentZeroSyncReport:
    source: str
    documents: int = 0
    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    reembedded: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sync_agent_zero(store: StoreBase, source: AgentZeroFolder, *, batch_size: int = 500) -> AgentZeroSyncReport:
    """Apply what Agent Zero added, edited and deleted since this store last imported or exported the
    folder: new documents are inserted, edited ones updated (text, area, metadata), deleted ones
    deleted (archived: `memctl restore` brings them back). Memories memctl changed that Agent Zero did
    not touch are kept as memctl has them."""
    base = sync_base(source.path, store)
    if base is None:
        raise UsageError(f"store {store.name!r} has not imported or exported {source.path} before",
                         hint="run import-agent-zero without --sync first")
    state = folder_state(source)
    report = AgentZeroSyncReport(source=str(source.path), documents=len(state))
    added = [d for d in source.documents if d.id not in base]
    edited = [d for d in source.documents if d.id in base and base[d.id] != state[d.id]]
    gone = [doc_id for doc_id in base if doc_id not in state]
    report.unchanged = len(state) - len(added) - len(edited)
    if added:
        sub = AgentZeroFolder(path=source.path, documents=added, total=len(added), skipped=[],
                              embedding=source.embedding, vectors=source.vectors, notes=source.notes)
        inserted = import_agent_zero(store, sub, batch_size=batch_size)
        report.added, report.reembedded = inserted.imported, inserted.reembedded
    present = {m.id: m for m in store.get([d.id for d in edited])}
    for doc in edited:
        if doc.id not in present:  # deleted in memctl meanwhile: Agent Zero's edit brings it back
            sub = AgentZeroFolder(path=source.path, documents=[doc], total=1, skipped=[], embedding=source.embedding,
                                  vectors=source.vectors, notes=source.notes)
            report.updated += import_agent_zero(store, sub).imported
            continue
        memory = present[doc.id]
        store.update(doc.id, text=doc.text if doc.text != memory.text else None, metadata=doc.metadata,
                     replace_metadata=True, area=doc.area, actor="import-agent-zero", op="update")
        report.updated += 1
    if gone:
        report.deleted = len(store.delete(gone, cascade=False, actor="import-agent-zero").deleted)
    write_sync_base(source.path, store, state)
    report.notes = source.notes.render()
    return report


__all__ = [
    "AgentZeroDocument",
    "AgentZeroExportReport",
    "AgentZeroFolder",
    "AgentZeroImportReport",
    "AgentZeroSyncReport",
    "a0_embedding",
    "a0_time_to_iso",
    "dump_index_pkl",
    "export_agent_zero",
    "import_agent_zero",
    "iso_to_a0_time",
    "load_index_pkl",
    "model_matches",
    "parse_timezone",
    "read_agent_zero",
    "sync_agent_zero",
]
