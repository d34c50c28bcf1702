"""memctl: curate the long-term memory of AI agents.

    import memctl
    with memctl.open_store(subdir="default") as store:
        ids = store.add(["User prefers dark mode"], area="main")
        hits = store.search("editor theme", limit=5)
"""

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
from memctl.store import AREAS, DeleteResult, EmbeddedStore, HistoryEntry, Hit, Memory, open_store

__version__ = "0.1.0"

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
    "StoreError",
    "UsageError",
    "__version__",
    "load_config",
    "open_store",
]
