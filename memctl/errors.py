"""One error base class; the CLI maps each subclass to a documented exit code."""

from __future__ import annotations

from pathlib import Path

EXIT_OK = 0
EXIT_ERROR = 1  # operational error: the message says the next step
EXIT_USAGE = 2  # bad arguments, bad filter, bad subdir name, bad config
EXIT_NO_MATCH = 3  # nothing matched / id not found (for scripts)
EXIT_PARTIAL = 4  # some inputs failed, the rest succeeded


class MemctlError(Exception):
    """Base class of every error memctl raises on purpose."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(MemctlError):
    """The caller asked for something malformed; nothing was changed."""

    exit_code = EXIT_USAGE


class FilterError(UsageError):
    """A metadata filter expression was refused."""


class ConfigError(UsageError):
    """A configuration file or value is invalid."""


class NotFoundError(MemctlError):
    """An id (or anything else looked up by name) does not exist."""

    exit_code = EXIT_NO_MATCH


class StoreError(MemctlError):
    """The store cannot be opened or written safely."""


class ModelMismatchError(StoreError):
    """The store's vectors were made by another embedding model."""


class LockTimeoutError(StoreError):
    """Another process held the store's write lock for too long."""


class UnsafePickleError(StoreError):
    """An Agent Zero index.pkl was refused (a class outside its known shape, truncated, or another shape).

    Raised before anything from the pickle ran and before anything was written.
    """


class EmbeddingError(MemctlError):
    """The embedding model could not be loaded or failed to embed."""


class InputFormatError(UsageError):
    """An input file (JSONL export, transcript, ...) is not in the expected format."""


def sqlite_hint(message: str, where: Path | None = None) -> str:
    """The next step for an SQLite open/write failure, by its cause (not every failure is a lock).

    `where`: the store's folder. SQLite reports a full disk met while it makes its shared-memory file
    as a plain "disk I/O error", so that one is told apart by the space left there."""
    text = message.lower()
    if "disk i/o" in text and where is not None and _no_space_left(where):
        text = "full"
    if "locked" in text or "busy" in text:
        return "another process holds it; retry, or raise lock_timeout"
    if "readonly" in text or "read-only" in text:
        return "the store is on read-only media or in a read-only folder: reading works, writing does not"
    if "full" in text:
        return "the disk is full: free some space and retry; nothing committed was lost"
    if "unable to open" in text:
        return "check that the folder exists, is a folder, and that you may write to it"
    if "disk i/o" in text:
        return "the disk reported an error: check it; restore from a backup if it is failing"
    return "restore it from a backup or export"


def _no_space_left(where: Path) -> bool:
    import shutil

    try:
        return shutil.disk_usage(where).free < (64 << 10)
    except OSError:
        return False
