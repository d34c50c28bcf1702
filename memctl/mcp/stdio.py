"""stdio for `memctl mcp` without a thread hop per message.

The SDK's `stdio_server()` reads stdin and writes stdout through `anyio.wrap_file`: each line read,
each write and each flush is a call handed to a worker thread and back (three hops per tool call,
each a wake-up of a thread and of the event loop, which on a busy 2-core machine costs
milliseconds). Here the event loop itself waits for the pipe to be readable or writable and reads
or writes without blocking; the SDK's own `stdio_server` still parses and frames the messages.

As the SDK does, the process's own fd 0 and fd 1 are moved off the wire while serving (fd 0 reads
/dev/null, fd 1 writes to stderr), so a stray `print` or a child process can neither read protocol
input nor corrupt the protocol output; the wire is served from private duplicates.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

CHUNK = 1 << 16


def pollable(fd: int) -> bool:
    """A pipe or a socket: what the event loop can wait on (a regular file or /dev/null cannot)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class LineReader:
    """`async for line in reader`: UTF-8 lines (with their newline) of a non-blocking descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = bytearray()
        self._eof = False

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                return line.decode("utf-8", errors="replace")
            if self._eof:
                if not self._buffer:
                    raise StopAsyncIteration
                line = bytes(self._buffer)
                self._buffer.clear()
                return line.decode("utf-8", errors="replace")
            try:
                chunk = os.read(self.fd, CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)
                continue
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True


class Writer:
    """`await write(text)` to a non-blocking descriptor: written at once while the pipe has room,
    else as the reader drains it (the event loop goes on meanwhile)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def write(self, text: str) -> None:
        view = memoryview(text.encode("utf-8"))
        while view:
            try:
                written = os.write(self.fd, view)
            except BlockingIOError:
                await anyio.wait_writable(self.fd)
                continue
            view = view[written:]

    async def flush(self) -> None:
        """Nothing is buffered: every write went to the descriptor."""


def _claim(fd: int, replacement: int) -> tuple[int, bool]:
    """A private, non-blocking duplicate of `fd` (close-on-exec), and `fd` pointed at `replacement`."""
    import fcntl

    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    was_blocking = os.get_blocking(private)
    os.set_blocking(private, False)
    os.dup2(replacement, fd)
    return private, was_blocking


def _release(fd: int, private: int, was_blocking: bool) -> None:
    try:
        os.set_blocking(private, was_blocking)  # the descriptor is shared with whoever gave it to us
        os.dup2(private, fd)
    except OSError:
        pass
    finally:
        os.close(private)


def _stderr_or_null() -> int:
    """Where fd 1 points while serving: stderr, or the null device when there is no stderr."""
    try:
        os.fstat(2)
        return 2
    except OSError:
        return os.open(os.devnull, os.O_WRONLY)


@asynccontextmanager
async def event_loop_stdio() -> AsyncIterator[tuple[Any, Any] | None]:
    """(stdin lines, stdout writer) for `stdio_server(stdin=, stdout=)`, or None when stdin or stdout
    is not a pipe or socket (a file, a terminal): then the SDK's threaded streams serve it."""
    if sys.platform == "win32" or not (pollable(0) and pollable(1)):
        yield None
        return
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        stdin, stdin_blocking = _claim(0, devnull)
    finally:
        os.close(devnull)
    target = _stderr_or_null()
    try:
        stdout, stdout_blocking = _claim(1, target)
    except OSError:
        _release(0, stdin, stdin_blocking)
        raise
    finally:
        if target != 2:
            os.close(target)
    try:
        yield LineReader(stdin), Writer(stdout)
    finally:
        _release(1, stdout, stdout_blocking)
        _release(0, stdin, stdin_blocking)


async def serve_stdio(server: Any) -> None:
    """Run an MCPServer on this process's stdin/stdout (what `MCPServer.run("stdio")` does, on the
    event loop's own streams where it can)."""
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async drives
    async with event_loop_stdio() as streams:
        stdin, stdout = streams if streams is not None else (None, None)
        async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
