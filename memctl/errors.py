"""One error base class; the CLI maps each subclass to a documented exit code."""

from __future__ import annotations

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
