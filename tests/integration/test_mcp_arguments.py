"""MCP tool arguments: unknown names, NaN/Infinity and schema violations are refused in memctl's words.

The server is spoken to in raw JSON-RPC lines over stdio: the SDK's own client turns NaN into null
before sending, but other clients (and JSON5-ish encoders) put `NaN` on the wire.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.conftest import REPO

pytest.importorskip("mcp")


class RawClient:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc, self.next_id = proc, 1

    def send(self, line: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def call(self, tool: str, arguments: str) -> dict[str, Any]:
        """tools/call with `arguments` written as raw JSON text (so NaN can be sent as it is)."""
        self.next_id += 1
        head = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call"})[:-1]
        return self.send(f'{head}, "params": {{"name": "{tool}", "arguments": {arguments}}}}}')["result"]


@contextmanager
def raw_server() -> Iterator[RawClient]:
    import os

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "memctl", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
        env=env,
    )
    client = RawClient(proc)
    try:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        client.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        yield client
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _refused(result: dict[str, Any]) -> str:
    assert result["isError"] is True, result
    text = result["content"][0]["text"]
    # memctl's words: no pydantic type tags, echoed inputs or documentation links.
    for raw in ("pydantic", "https://", "[type=", "input_value", "validation error for"):
        assert raw not in text, text
    return str(text)


def test_unknown_arguments_non_finite_numbers_and_bad_values_are_refused_clearly() -> None:
    with raw_server() as client:
        saved = client.call("memory_save", '{"text": "User prefers dark mode"}')
        assert saved["isError"] is False
        text = _refused(client.call("memory_search", '{"query": "dark mode", "treshold": 0.9}'))
        assert text.startswith("UsageError: memory_search: treshold: is not an argument of this tool")
        assert "threshold" in text.split("hint:")[1]  # the hint lists the real names
        for value in ("NaN", '"NaN"', "Infinity", "-Infinity"):
            text = _refused(client.call("memory_search", f'{{"query": "dark mode", "threshold": {value}}}'))
            assert "threshold: must be a finite number" in text, value
        text = _refused(client.call("memory_forget", '{"query": "dark mode", "threshold": 1.5}'))
        assert "threshold: must be at most 1.0" in text
        text = _refused(client.call("memory_save", '{"text": "x", "metadata": {"importance": NaN}}'))
        assert "metadata.importance: must be a finite number" in text
        text = _refused(client.call("memory_search", '{"query": ""}'))
        assert "query: must not be empty" in text
        # Nothing refused was written; the good call still works (the server keeps serving).
        listed = client.call("memory_list", "{}")
        assert listed["structuredContent"]["total"] == 1


def test_the_published_schemas_forbid_unknown_arguments() -> None:
    with raw_server() as client:
        tools = client.send('{"jsonrpc":"2.0","id":9,"method":"tools/list"}')["result"]["tools"]
        assert tools and all(t["inputSchema"].get("additionalProperties") is False for t in tools)
