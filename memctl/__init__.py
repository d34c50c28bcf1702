"""memctl: curate the long-term memory of AI agents.

    import memctl
    with memctl.open_store(subdir="default") as store:
        ids = store.add(["User prefers dark mode"], area="main")
        hits = store.search("editor theme", limit=5)

Names are imported on first use (PEP 562), so `memctl --help` and light commands do not pay
for the store, numpy or faiss.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Config": "memctl.config",
    "load_config": "memctl.config",
    "ConfigError": "memctl.errors",
    "EmbeddingError": "memctl.errors",
    "FilterError": "memctl.errors",
    "InputFormatError": "memctl.errors",
    "LockTimeoutError": "memctl.errors",
    "MemctlError": "memctl.errors",
    "ModelMismatchError": "memctl.errors",
    "NotFoundError": "memctl.errors",
    "StoreError": "memctl.errors",
    "UsageError": "memctl.errors",
    "AREAS": "memctl.store.records",
    "DeleteResult": "memctl.store.records",
    "EmbeddedStore": "memctl.store.embedded",
    "HistoryEntry": "memctl.store.records",
    "Hit": "memctl.store.records",
    "Memory": "memctl.store.records",
    "open_store": "memctl.store",
    "PostgresStore": "memctl.store.postgres",
}

__all__ = [
    "AREAS",
    "Config",
    "ConfigError",
    "DeleteResult",
    "EmbeddedStore",
    "EmbeddingError",
    "FilterError",
    "HistoryEntry",
    "Hit",
    "InputFormatError",
    "LockTimeoutError",
    "MemctlError",
    "Memory",
    "ModelMismatchError",
    "NotFoundError",
    "PostgresStore",
    "StoreError",
    "UsageError",
    "__version__",
    "load_config",
    "open_store",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'memctl' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from memctl.config import Config, load_config
    from memctl.errors import (
        ConfigError,
        EmbeddingError,
        FilterError,
        InputFormatError,
        LockTimeoutError,
        MemctlError,
        ModelMismatchError,
        NotFoundError,
        StoreError,
        UsageError,
    )
    from memctl.store import open_store
    from memctl.store.records import AREAS, DeleteResult, HistoryEntry, Hit, Memory
