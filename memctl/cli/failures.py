"""Failures from the system rather than from memctl's own checks, told as a person needs them.

Commands check what they can (ranges, formats, store state) and raise MemctlError. What is left
reaches the top level as a bare OSError (disk full, read-only media, a permission, a path that is
a file), an encoding error (bytes that are not text), or a number or nesting too large for the
machine. Each becomes one message naming the cause and the next step, and a documented exit code;
a traceback is never the answer to any of them.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

from memctl.errors import EXIT_ERROR, EXIT_USAGE


@dataclass(frozen=True)
class Failure:
    message: str
    hint: str | None
    exit_code: int
    kind: str


_OS_CAUSES: dict[int, tuple[str, str]] = {
    errno.ENOSPC: ("the disk is full", "free some space and run the command again; nothing committed was lost"),
    errno.EDQUOT: ("the disk quota is exhausted", "free some space and run the command again"),
    errno.EROFS: (
        "the file system is read-only",
        "write to writable storage (another destination, or --root for stores); reading still works",
    ),
    errno.EEXIST: ("a file stands where a folder is needed", "choose a path whose parents are folders"),
    errno.EACCES: ("permission denied", "check the owner and mode of that path, or choose another --root"),
    errno.EPERM: ("operation not permitted", "check the owner and mode of that path, or choose another --root"),
    errno.ENOTDIR: ("a path component is not a folder", "point --root or the destination at a folder"),
    errno.EISDIR: ("a folder stands where a file was expected", "point the option at a file, not a folder"),
    errno.ENOENT: ("no such file or folder", "check the path"),
    errno.ENAMETOOLONG: ("the path is too long", "choose a shorter path"),
    errno.EIO: ("an input/output error from the device", "check the disk; restore from a backup if it is failing"),
}


def describe(exc: BaseException) -> Failure:
    import sqlite3

    if isinstance(exc, sqlite3.Error):
        from memctl.errors import sqlite_hint

        return Failure(f"the store database refused the change: {exc}", sqlite_hint(str(exc)), EXIT_ERROR, "StoreError")
    if isinstance(exc, UnicodeError):
        return Failure(
            "the input is not valid UTF-8 text (binary data or a lone surrogate)",
            "pass text: memories, queries and files must be UTF-8",
            EXIT_USAGE,
            "InputError",
        )
    if isinstance(exc, OverflowError):
        return Failure(f"a number is too large: {exc}", "use a smaller value", EXIT_USAGE, "UsageError")
    if isinstance(exc, RecursionError):
        return Failure("the input is nested too deeply to read", "flatten the data", EXIT_USAGE, "InputError")
    if isinstance(exc, MemoryError):
        return Failure(
            "not enough memory for this input", "split the input into smaller parts", EXIT_ERROR, "ResourceError"
        )
    assert isinstance(exc, OSError)
    cause, hint = _OS_CAUSES.get(exc.errno or -1, (exc.strerror or str(exc), "check the path and try again"))
    where = f": {exc.filename}" if exc.filename else ""
    return Failure(f"{cause}{where}", hint, EXIT_ERROR, "SystemError")
