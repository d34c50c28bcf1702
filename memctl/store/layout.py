"""The embedded store's folder layout: its file names, and the size of a store folder.

Kept apart from `memctl.store.embedded` so domain modules (backup, behaviour, knowledge, lifecycle)
can name the files without importing the SQLite store itself. The FAISS index file names belong
to `memctl.store.vector_index` (INDEX_FILE, SIDECAR_FILE).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3

DB_FILE = "memories.sqlite"
EMBEDDING_FILE = "embedding.json"
LOCK_FILE = ".write.lock"
COMMITS_FILE = ".commits"  # committed write transactions, as last recorded (see EmbeddedStore._check_commits)
BEHAVIOUR_FILE = "behaviour.md"
# Per knowledge file: checksum, area and chunk ids (a mirror of the chunks' metadata; memctl/knowledge/sync.py).
KNOWLEDGE_FILE = "knowledge_import.json"
KNOWLEDGE_FILE_VERSION = 1
KNOWLEDGE_LOCK_FILE = ".knowledge.lock"

__all__ = [
    "BEHAVIOUR_FILE",
    "COMMITS_FILE",
    "DB_FILE",
    "EMBEDDING_FILE",
    "KNOWLEDGE_FILE",
    "KNOWLEDGE_FILE_VERSION",
    "KNOWLEDGE_LOCK_FILE",
    "LOCK_FILE",
    "folder_size",
    "read_only_database",
]


def folder_size(folder: Path) -> int:
    """Bytes of the store's regular files under folder (symbolic links not followed; hidden temp
    files and staging folders a kill left behind are not the store)."""
    total = 0
    for path in folder.rglob("*"):
        if any(part.startswith(".") and part != COMMITS_FILE for part in path.relative_to(folder).parts):
            continue
        try:
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
        except OSError:
            continue
    return total


def read_only_database(source: Path, timeout: float = 5) -> sqlite3.Connection:
    """A connection to the database `source` that writes and creates nothing: query_only where the folder
    is writable (its WAL files are removed again on close), else mode=ro, else immutable (read-only media
    without the WAL's index)."""
    import os
    import sqlite3
    from urllib.parse import quote

    uri = "file:" + quote(str(source.resolve()))
    tries = ["?mode=rw"] if os.access(source.parent, os.W_OK) and os.access(source, os.W_OK) else []
    last: sqlite3.Error | None = None
    for flags in (*tries, "?mode=ro", "?mode=ro&immutable=1"):
        try:
            db = sqlite3.connect(uri + flags, uri=True, timeout=timeout)
            db.execute("PRAGMA query_only=ON")
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.Error as exc:
            last = exc
    from memctl.errors import StoreError, sqlite_hint

    raise StoreError(f"cannot read {source}: {last}", hint=sqlite_hint(str(last)))
