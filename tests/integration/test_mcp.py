"""`memctl mcp` through the SDK's own client: a spawned stdio server and an HTTP server on 127.0.0.1.

Every server here is a separate `python -m memctl mcp` process (the fake embedder, the test's root
or PostgreSQL schema), stopped by its PID at the end of the test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import REPO, run_memctl

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

TOOLS = {
    "doctor_report",
    "memory_save",
    "memory_search",
    "memory_recall",
    "memory_get",
    "memory_list",
    "memory_update",
    "memory_delete",
    "memory_forget",
    "memory_history",
    "memory_restore",
    "memorize",
    "behaviour_get",
    "knowledge_search",
    "stats",
}
READ_ONLY = {
    "doctor_report",
    "memory_search",
    "memory_recall",
    "memory_get",
    "memory_list",
    "memory_history",
    "behaviour_get",
    "knowledge_search",
    "stats",
}
DESTRUCTIVE = {"memory_delete", "memory_forget", "memory_update", "memorize"}
TRANSPORTS = ["stdio", "http"]


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's MEMCTL_* settings (root, fake embedder, MEMCTL_STORE of the backend) for a child process."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


@contextmanager
def http_server(*args: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`memctl mcp --http 127.0.0.1:0 ARGS` in its own process: yields (url, process); stopped by PID."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memctl", "mcp", "--http", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=server_env(env),
    )
    try:
        url = _wait_for_url(proc)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_for_url(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    deadline = time.monotonic() + 120
    seen = ""
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
        found = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", line)
        if found:
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep draining stderr
            return found.group(1)
    proc.kill()
    raise AssertionError(f"the HTTP server did not start: {seen}{proc.stderr.read()}")


@asynccontextmanager
async def connect(
    transport: str,
    *args: str,
    env: dict[str, str] | None = None,
    url: str | None = None,
    headers: dict[str, str] | None = None,
):
    """A connected SDK Client: stdio spawns `memctl mcp ARGS`; http talks to `url`."""
    if transport == "stdio":
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "memctl", "mcp", *args], env=server_env(env), cwd=str(REPO)
        )
        async with Client(params) as client:
            yield client
        return
    assert url is not None
    http = create_mcp_http_client(headers=headers)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


def session(
    transport: str, body: Callable[[Any], Awaitable[None]], *args: str, env: dict[str, str] | None = None
) -> None:
    """Run `body(client)` against a fresh server of `transport`."""
    if transport == "stdio":

        async def run_stdio() -> None:
            async with connect("stdio", *args, env=env) as client:
                await body(client)

        anyio.run(run_stdio)
        return
    with http_server(*args, env=env) as (url, proc):

        async def run_http() -> None:
            async with connect("http", url=url) as client:
                await body(client)

        anyio.run(run_http)
        assert proc.poll() is None, "the HTTP server died"


async def call(client: Any, name: str, **arguments: Any) -> dict[str, Any]:
    """A tool call that must succeed; its structured result."""
    result = await client.call_tool(name, arguments)
    assert not result.is_error, f"{name}: {result.content[0].text if result.content else result}"
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def fails(client: Any, name: str, *words: str, **arguments: Any) -> str:
    """A tool call that must come back as a tool error (not a crash) whose text has `words`."""
    result = await client.call_tool(name, arguments)
    assert result.is_error, f"{name} should have failed: {result.structured_content}"
    text = " ".join(block.text for block in result.content if hasattr(block, "text"))
    for word in words:
        assert word.lower() in text.lower(), f"{word!r} not in {text!r}"
    return text


# --- the tool list ------------------------------------------------------------------------------------------


def test_tools_have_input_schemas_output_schemas_and_hints() -> None:
    async def body(client: Any) -> None:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == TOOLS
        for name, tool in listed.items():
            assert tool.input_schema["type"] == "object", name
            assert tool.output_schema and tool.output_schema["type"] == "object", name
            assert tool.description, name
            hints = tool.annotations
            assert hints.read_only_hint is (name in READ_ONLY), name
            assert hints.destructive_hint is (name in DESTRUCTIVE), name
            assert "subdir" in tool.input_schema["properties"], name
            # Self-contained: some clients resolve no $ref (memctl.mcp.schemas).
            assert "$ref" not in json.dumps([tool.input_schema, tool.output_schema]), name
        hit = listed["memory_search"].output_schema["properties"]["results"]["items"]
        assert hit["type"] == "object" and {"id", "text", "score"} <= set(hit["required"])
        search = listed["memory_search"].input_schema
        assert search["required"] == ["query"]
        assert set(search["properties"]) == {"query", "limit", "threshold", "area", "filter", "mode", "as_of", "subdir"}
        assert search["properties"]["threshold"]["anyOf"][0] == {"maximum": 1.0, "minimum": 0.0, "type": "number"}
        assert {"count", "results"} <= set(listed["memory_search"].output_schema["properties"])
        assert listed["memory_forget"].input_schema["properties"]["confirm"]["default"] is False
        assert listed["memory_delete"].annotations.idempotent_hint is True
        assert listed["memory_save"].annotations.idempotent_hint is False
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert uris == {"memctl://default/behaviour", "memctl://default/stats"}

    session("stdio", body)


# --- a round trip -------------------------------------------------------------------------------------------


@pytest.mark.smoke
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_save_search_recall_update_delete_restore(backend, transport: str) -> None:
    async def body(client: Any) -> None:
        saved = await call(
            client, "memory_save", text="The staging database listens on port 5433", metadata={"tags": ["db"]}
        )
        mid = saved["ids"][0]
        await call(client, "memory_save", text="Deploys go out on Tuesdays", area="fragments")
        found = await call(client, "memory_search", query="staging database port", threshold=0.0)
        assert found["results"][0]["id"] == mid and found["count"] == 2
        assert 0.0 <= found["results"][0]["score"] <= 1.0
        only_db = await call(client, "memory_search", query="port", threshold=0.0, filter="'db' in tags")
        assert [h["id"] for h in only_db["results"]] == [mid]

        recalled = await client.call_tool(
            "memory_recall", {"message": "which port does staging use?", "threshold": 0.0}
        )
        assert not recalled.is_error and "The staging database listens on port 5433" in recalled.content[0].text
        assert recalled.structured_content["prompt"] == recalled.content[0].text
        assert mid in [h["id"] for h in recalled.structured_content["memories"]]

        updated = await call(client, "memory_update", id=mid, text="The staging database listens on port 6543")
        assert updated["changed"] and updated["reembedded"] and updated["memory"]["metadata"] == {"tags": ["db"]}
        same = await call(client, "memory_update", id=mid, metadata={"tags": ["db"]})
        assert not same["changed"] and not same["reembedded"]  # already so: no write, no history entry
        got = await call(client, "memory_get", ids=[mid, "nosuchid"])
        assert got["memories"][0]["text"].endswith("6543") and got["missing"] == ["nosuchid"]
        ops = [e["op"] for e in (await call(client, "memory_history", id=mid))["entries"]]
        assert ops == ["update", "add"]

        preview = await call(client, "memory_delete", ids=[mid], dry_run=True)
        assert preview["deleted"] == [mid] and (await call(client, "memory_get", ids=[mid]))["memories"]
        deleted = await call(client, "memory_delete", ids=[mid])
        assert deleted["deleted"] == [mid] and not deleted["dry_run"]
        after = await call(client, "memory_search", query="staging database port", threshold=0.0)
        assert mid not in [h["id"] for h in after["results"]]

        restored = await call(client, "memory_restore", ids=[mid])
        assert [m["id"] for m in restored["restored"]] == [mid] and restored["sources"] == {mid: "archive"}
        back = await call(client, "memory_search", query="staging database port", threshold=0.0)
        assert back["results"][0]["id"] == mid and back["results"][0]["text"].endswith("6543")
        assert (await call(client, "memory_list"))["total"] == 2
        assert (await call(client, "stats"))["stores"][0]["count"] == 2
        assert (await call(client, "behaviour_get"))["default"] is True
        rules = await client.read_resource("memctl://default/behaviour")
        assert "Behaviour" in rules.contents[0].text
        figures = json.loads((await client.read_resource("memctl://default/stats")).contents[0].text)
        assert figures["count"] == 2 and figures["subdir"] == "default"

    session(transport, body)


def test_forget_is_a_dry_run_unless_confirmed() -> None:
    async def body(client: Any) -> None:
        await call(client, "memory_save", text="temporary note about the coffee machine")
        preview = await call(client, "memory_forget", query="temporary note about the coffee machine")
        assert preview["dry_run"] and preview["count"] == 1
        assert (await call(client, "memory_list"))["total"] == 1
        done = await call(client, "memory_forget", query="temporary note about the coffee machine", confirm=True)
        assert not done["dry_run"] and done["count"] == 1
        assert (await call(client, "memory_list"))["total"] == 0

    session("stdio", body)


def test_knowledge_search_sees_only_knowledge_chunks(tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "deploy.md").write_text("# Deploying\n\nRun the deploy script from the release branch.\n")
    assert run_memctl("import-knowledge", str(folder), env=server_env()).code == 0
    assert run_memctl("save", "deploy script notes from a chat", env=server_env()).code == 0

    async def body(client: Any) -> None:
        hits = await call(client, "knowledge_search", query="deploy script", threshold=0.0)
        assert hits["count"] >= 1 and all(h["metadata"].get("knowledge_source") is True for h in hits["results"])
        both = await call(client, "memory_search", query="deploy script", threshold=0.0)
        assert both["count"] == hits["count"] + 1
        md = await call(client, "knowledge_search", query="deploy", threshold=0.0, filter="file_type == 'md'")
        assert md["count"] == hits["count"] and md["filter"] == "knowledge_source == True and (file_type == 'md')"
        await fails(client, "knowledge_search", "FilterError", "attribute", query="x", filter="a.b == 1")

    session("stdio", body)


# --- errors: each a clear tool error, and the server keeps serving --------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_bad_calls_are_tool_errors_and_the_server_keeps_serving(transport: str) -> None:
    async def body(client: Any) -> None:
        # like the CLI, only tools that add memories create a store; a read names what is missing
        await fails(client, "memory_search", "NotFoundError", "no store", query="build")
        await fails(client, "memory_list", "NotFoundError", "no store")
        await call(client, "memory_save", text="The build server is named hydra")
        for hostile in ("__import__('os').system('id')", "().__class__.__bases__", "x" * 600, "a ==", "lambda: 1"):
            await fails(client, "memory_search", "FilterError", query="build", filter=hostile)
            assert (await call(client, "memory_search", query="build server", threshold=0.0))["count"] == 1
        await fails(
            client,
            "memory_search",
            "ScopeError",
            "outside this server's scope",
            "'default'",
            query="build",
            subdir="other",
        )
        await fails(client, "memory_save", "must not contain '..'", text="x", subdir="../default")
        await fails(client, "memory_save", "must be relative", text="x", subdir="/etc")
        await fails(
            client,
            "memorize",
            "utility_model",
            "NoUtilityModelError",
            messages=[{"role": "user", "content": "I moved the staging database to port 5433."}],
        )
        await fails(client, "memorize", "exactly one of transcript or messages")
        await fails(client, "memory_search", "threshold", "must be at most 1", query="x", threshold=2)
        await fails(client, "memory_search", "mode", query="x", mode="fuzzy")
        await fails(client, "memory_update", "NotFoundError", "nosuchid", id="nosuchid", text="new")
        await fails(client, "memory_update", "nothing to update", id="nosuchid")
        await fails(client, "memory_restore", "NotFoundError", "no restorable version", ids=["nosuchid"])
        await fails(client, "memory_save", "reserved", text="x", metadata={"id": "mine"})
        await fails(client, "memory_delete", "an id is empty", ids=[" "])
        await fails(client, "nosuchtool", "nosuchtool")
        with pytest.raises(Exception, match="outside this server's scope"):
            await client.read_resource("memctl://other/behaviour")
        found = await call(client, "memory_search", query="build server hydra", threshold=0.0)
        assert found["count"] == 1 and (await call(client, "memory_list"))["total"] == 1

    session(transport, body)


def test_allow_subdirs_lets_a_tool_choose_among_allowed_stores_only() -> None:
    async def body(client: Any) -> None:
        assert (await call(client, "memory_save", text="alpha fact"))["subdir"] == "a"  # the first plain name
        assert (await call(client, "memory_save", text="project fact", subdir="projects/x"))["subdir"] == "projects/x"
        await fails(client, "memory_save", "outside this server's scope", "projects/*", text="no", subdir="b")
        await fails(client, "memory_save", "outside this server's scope", text="no", subdir="default")
        await fails(client, "memory_save", "must not contain '..'", text="no", subdir="projects/../b")
        hits = await call(client, "memory_search", query="project fact", threshold=0.0, subdir="projects/x")
        assert [h["text"] for h in hits["results"]] == ["project fact"]
        assert (await call(client, "memory_list", subdir="a"))["total"] == 1
        rules = await client.read_resource("memctl://projects/x/behaviour")
        assert "Behaviour" in rules.contents[0].text
        with pytest.raises(Exception, match="outside this server's scope"):
            await client.read_resource("memctl://b/stats")

    session("stdio", body, "--allow-subdirs", "a,projects/*")
    home = Path(os.environ["MEMCTL_HOME"])
    assert sorted(p.name for p in home.iterdir() if not p.name.startswith(".")) == ["a", "projects"]


# --- sharing the store with the CLI ------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_cli_save_is_found_by_the_next_search(backend, transport: str) -> None:
    async def body(client: Any) -> None:
        await call(client, "memory_save", text="first memory from the agent")
        assert (await call(client, "memory_search", query="invoice numbering scheme"))["count"] == 0
        saved = run_memctl("save", "The invoice numbering scheme is INV-year-sequence", "--json", env=server_env())
        assert saved.code == 0, saved.err
        mid = json.loads(saved.out)["ids"][0]
        found = await call(client, "memory_search", query="invoice numbering scheme")
        assert [h["id"] for h in found["results"]] == [mid]
        assert run_memctl("delete", mid, "--yes", env=server_env()).code == 0
        assert (await call(client, "memory_search", query="invoice numbering scheme"))["count"] == 0
        assert (await call(client, "memory_list"))["total"] == 1

    session(transport, body)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_what_a_search_returns_is_recorded_as_accessed_after_the_answer(backend, transport: str) -> None:
    async def never_accessed(client: Any) -> int:
        return int((await call(client, "stats"))["stores"][0]["never_accessed"])

    async def body(client: Any) -> None:
        await call(client, "memory_save", text="The staging database listens on port 5433")
        await call(client, "memory_save", text="Deploys go out on Tuesdays")
        assert await never_accessed(client) == 2
        found = await call(client, "memory_search", query="staging database port", limit=1, threshold=0.0)
        assert found["count"] == 1
        deadline = time.monotonic() + 10
        while await never_accessed(client) != 1:  # written by the server's access thread, a moment later
            assert time.monotonic() < deadline, "the access time was never written"
            await anyio.sleep(0.05)
        recalled = await call(client, "memory_recall", message="when do deploys go out?", threshold=0.0)
        assert recalled["memories"]
        while await never_accessed(client) != 0:
            assert time.monotonic() < deadline, "recall's access times were never written"
            await anyio.sleep(0.05)

    session(transport, body)


# --- a client that goes away mid-call ------------------------------------------------------------------------


class SlowModel(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint: answers after `delay` seconds (or once `release` is set) with
    `reply(messages)` (default: an empty extraction); `answers` counts the answers sent."""

    delay = 4.0
    calls = 0
    reply: Callable[[list[dict[str, str]]], str] | None = None
    release: threading.Event | None = None
    answers = 0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        type(self).calls += 1
        request = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        if self.release is not None:
            self.release.wait(120)
        else:
            time.sleep(self.delay)
        reply = type(self).reply
        content = reply(request.get("messages", [])) if reply else "[]"
        body = json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "slow",
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        try:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass
        type(self).answers += 1

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def slow_model(
    delay: float = 4.0,
    reply: Callable[[list[dict[str, str]]], str] | None = None,
    release: threading.Event | None = None,
) -> Iterator[dict[str, str]]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), SlowModel)
    SlowModel.calls, SlowModel.delay, SlowModel.reply, SlowModel.release = 0, delay, reply, release
    SlowModel.answers = 0
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield {
            "MEMCTL_UTILITY_MODEL": "openai/slow-model",
            "MEMCTL_UTILITY_API_BASE": f"http://127.0.0.1:{httpd.server_address[1]}/v1",
            "MEMCTL_UTILITY_API_KEY_ENV": "SLOW_MODEL_KEY",
            "SLOW_MODEL_KEY": "not-a-secret",
            "MEMCTL_INTERNAL_UTILITY_RETRIES": "0",
            "MEMCTL_UTILITY_TIMEOUT": "30",
        }
    finally:
        if release is not None:
            release.set()
        httpd.shutdown()
        httpd.server_close()


def test_memorize_runs_the_gate_and_consolidation_with_the_utility_model() -> None:
    from tests.scripted_llm import Router

    fact = "The user prefers dark mode in every editor"
    router = Router(fragments=json.dumps([fact]), solutions="[]")
    with slow_model(delay=0.0, reply=router) as model_env:

        async def body(client: Any) -> None:
            report = await call(
                client,
                "memorize",
                messages=[
                    {"role": "user", "content": "I prefer dark mode in every editor I use."},
                    {"role": "assistant", "content": "Noted."},
                ],
            )
            assert report["summary"]["transcripts"] == 1 and report["summary"]["inserted"] == 1
            candidate = report["transcripts"][0]["candidates"][0]
            assert candidate["text"] == fact and candidate["fate"] == "inserted"
            found = await call(client, "memory_search", query="dark mode editor")
            assert [h["id"] for h in found["results"]] == candidate["ids"]
            assert found["results"][0]["area"] == "fragments"
            again = await call(client, "memorize", dry_run=True, transcript="User: nothing new here")
            assert again["dry_run"] and (await call(client, "memory_list"))["total"] == 1

        session("stdio", body, env=model_env)
    assert router.count("fragments") == 2 and router.count("solutions") == 2


@pytest.mark.slow
def test_a_client_that_disconnects_mid_call_does_not_stop_the_http_server() -> None:
    """The model answers only when the test releases it: the search is served while that call still runs."""
    release = threading.Event()
    with slow_model(release=release) as model_env, http_server(env=model_env) as (url, proc):

        async def main() -> None:
            async with connect("http", url=url) as setup:
                await call(setup, "memory_save", text="The release train leaves every second Monday")
            async with connect("http", url=url) as leaving, anyio.create_task_group() as group:
                group.start_soon(
                    leaving.call_tool, "memorize", {"transcript": "User: the release train leaves on Mondays"}
                )
                with anyio.fail_after(60):
                    while SlowModel.calls == 0:  # the call is in the utility model now
                        await anyio.sleep(0.05)
                group.cancel_scope.cancel()  # leave mid-call: the connection closes
            async with connect("http", url=url) as other:  # served while that call still waits for the model
                found = await call(other, "memory_search", query="release train", threshold=0.0)
                assert found["count"] == 1 and SlowModel.answers == 0
                release.set()  # the abandoned call gets its answers (facts, then solutions) in the background
                with anyio.fail_after(60):
                    while SlowModel.answers < 2:
                        await anyio.sleep(0.05)
                assert (await call(other, "memory_list"))["total"] == 1

        anyio.run(main)
        assert proc.poll() is None


@pytest.mark.slow
def test_a_stdio_client_that_dies_mid_call_ends_the_server_cleanly(tmp_path: Path) -> None:
    """The client writes a call and closes the pipe: the server exits by itself, stdout held only protocol."""
    with slow_model() as model_env:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memctl", "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=server_env(model_env),
        )
        assert proc.stdin is not None
        lines = [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "0"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "memory_save", "arguments": {"text": "kept across the crash"}},
            },
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "memorize", "arguments": {"transcript": "User: I like tea"}},
            },
        ]
        proc.stdin.write("".join(json.dumps(line) + "\n" for line in lines))
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while SlowModel.calls == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert SlowModel.calls >= 1
        proc.stdin.close()  # the client is gone mid-call
        proc.stdin = None
        try:
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    replies = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert all(reply.get("jsonrpc") == "2.0" for reply in replies)
    assert any(reply.get("id") == 2 and not reply["result"].get("isError") for reply in replies)
    assert run_memctl("list", "--json", env=server_env()).json["total"] == 1


# --- HTTP: loopback by default, a token beyond it -------------------------------------------------------------


@pytest.mark.slow
def test_http_needs_a_token_beyond_loopback_and_checks_it_when_set() -> None:
    refused = run_memctl("mcp", "--http", "0.0.0.0:0", env=server_env())
    assert refused.code == 2 and "mcp_token" in refused.err and "Traceback" not in refused.err
    assert run_memctl("mcp", "--http", "localhost:notaport", env=server_env()).code == 2
    with http_server(env={"MEMCTL_MCP_TOKEN": "s3cret-token"}) as (url, proc):
        import httpx2

        anonymous = httpx2.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"accept": "application/json, text/event-stream"},
        )
        assert anonymous.status_code == 401

        async def main() -> None:
            async with connect("http", url=url, headers={"Authorization": "Bearer s3cret-token"}) as client:
                await call(client, "memory_save", text="only with the token")
                assert (await call(client, "memory_list"))["total"] == 1

        anyio.run(main)
        wrong = httpx2.post(url, json={}, headers={"Authorization": "Bearer guess"})
        assert wrong.status_code == 401 and proc.poll() is None


# --- pieces -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("8765", ("127.0.0.1", 8765)),
        ("0.0.0.0:80", ("0.0.0.0", 80)),
        ("[::1]:9", ("::1", 9)),
        ("localhost:0", ("localhost", 0)),
    ],
)
def test_parse_bind(spec: str, expected: tuple[str, int]) -> None:
    from memctl.mcp.server import parse_bind

    assert parse_bind(spec) == expected


@pytest.mark.parametrize("spec", ["", "host:", "70000", "[::1]9", ":80", "a:b"])
def test_parse_bind_refuses(spec: str) -> None:
    from memctl.errors import UsageError
    from memctl.mcp.server import parse_bind

    with pytest.raises(UsageError):
        parse_bind(spec)


def test_scope() -> None:
    from memctl.errors import UsageError
    from memctl.mcp.scope import Scope, ScopeError

    fixed = Scope.fixed("agent1")
    assert fixed.resolve(None) == "agent1" and fixed.resolve("agent1") == "agent1"
    with pytest.raises(ScopeError):
        fixed.resolve("agent2")
    several = Scope.allowing("projects/*,shared", preferred="default")
    assert several.default == "shared" and several.resolve("projects/a") == "projects/a"
    with pytest.raises(ScopeError):
        several.resolve("default")
    assert Scope.allowing("projects/*", preferred="projects/a").resolve(None) == "projects/a"
    with pytest.raises(ScopeError, match="no default"):
        Scope.allowing("projects/*").resolve(None)
    for bad in ("../x", "/abs", "a/b/c"):
        with pytest.raises(UsageError):
            several.resolve(bad)
    for spec in ("", "../*", "/tmp/*", "a/../b"):
        with pytest.raises(UsageError):
            Scope.allowing(spec)


def test_a_lost_postgresql_connection_is_reopened(backend) -> None:
    if backend != "postgres":
        pytest.skip("PostgreSQL only")
    from psycopg.conninfo import conninfo_to_dict

    from tests.pg import query

    mine = conninfo_to_dict(os.environ["MEMCTL_STORE"])["application_name"]  # this test's schema (tests/pg.py)

    async def body(client: Any) -> None:
        await call(client, "memory_save", text="The payroll job runs on the 25th")
        query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s "
            "AND pid <> pg_backend_pid()",
            (mine,),
        )
        # the store reconnects once per call (issue 17.10): the call that meets the dead connection succeeds
        found = await call(client, "memory_search", query="payroll job")
        assert found["count"] == 1
        again = await call(client, "memory_search", query="payroll job")
        assert again["count"] == 1

    session("stdio", body)


# --- the server's own parts -----------------------------------------------------------------------------------

STDIO_PROBE = """
import anyio, os, sys
from memctl.mcp.stdio import event_loop_stdio

async def main():
    async with event_loop_stdio() as streams:
        assert streams is not None, "pipes on both sides: the event loop's streams"
        reader, writer = streams
        print("stray print", flush=True)  # a library writing to sys.stdout: must not reach the wire
        os.write(1, b"stray write\\n")
        assert sys.stdin.read() == ""  # the wire's input is not readable through fd 0
        lines = [line async for line in reader]
        for line in lines:
            await writer.write("echo " + line)
        await writer.write("x" * 1_000_000 + "\\n")  # past the pipe's buffer: written as the reader drains it
        await writer.flush()

anyio.run(main)
"""


def test_stdio_streams_keep_stdout_for_the_protocol_and_read_every_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", STDIO_PROBE],
        input="first\nsecond ünïcode\nlast without newline",
        capture_output=True,
        text=True,
        cwd=REPO,
        env=server_env(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("\n")
    assert lines[:3] == ["echo first", "echo second ünïcode", "echo last without newline" + "x" * 1_000_000]
    assert "stray print" in proc.stderr and "stray write" in proc.stderr
    assert "stray" not in proc.stdout


def test_shared_embedder_embeds_queries_on_the_query_side() -> None:
    """An embedder with a query side (E5's "query: " prefix) keeps it behind the server's shared embedder,
    so `memory_search` ranks as `memctl load` does."""
    import numpy as np

    from memctl.embeddings import FakeEmbedder, embed_queries
    from memctl.mcp.pool import SharedEmbedder

    class TwoSided(FakeEmbedder):
        def embed_queries(self, texts: list[str]) -> np.ndarray:
            return self.embed(["query: " + t for t in texts])

    inner = TwoSided(8)
    shared = SharedEmbedder(inner)
    assert np.array_equal(embed_queries(shared, ["tea"]), inner.embed(["query: tea"]))
    assert np.array_equal(shared.embed(["tea"]), inner.embed(["tea"]))


@pytest.mark.integration
def test_the_servers_model_gives_the_cli_s_vectors() -> None:
    """The server's model runs with onnxruntime's threads not spinning (pool.SERVER_SPIN); its vectors are the
    ones the CLI's default session computes, for a query, a batch and a long text (stores need no reindex)."""
    import numpy as np

    pytest.importorskip("onnxruntime")
    from memctl.embeddings import LocalEmbedder
    from memctl.mcp.pool import SERVER_SPIN

    texts = ["what does the deploy pipeline use?", "数据库使用 PostgreSQL 16", "ok", "the cache lives here " * 60]
    default = LocalEmbedder().embed(texts)
    server = LocalEmbedder(spin=SERVER_SPIN)
    batch = server.embed(texts)
    query = server.embed(texts[:1])
    assert float(np.min(np.sum(default * batch, axis=1))) >= 1 - 1e-6
    assert float(np.sum(default[0] * query[0])) >= 1 - 1e-6
