"""Durable file writes and file hashes, shared by the store, the config and the caches."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

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


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Temp file in the same folder, fsync, rename, fsync the folder."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def cache_root() -> Path:
    """memctl's user cache: the ONNX export of the default model, the parsed shipped defaults."""
    if os.environ.get("MEMCTL_CACHE_DIR"):
        return Path(os.environ["MEMCTL_CACHE_DIR"]).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("memctl", appauthor=False))
