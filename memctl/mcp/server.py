"""`memctl mcp`: the store served to agents over the Model Context Protocol (official SDK, 2.x).

One warm process: the embedding model, the vector index and the store connection stay loaded
between calls. stdio by default (stdout carries protocol messages only; every log goes to
stderr), or streamable HTTP. Tools validate like the CLI; a MemctlError becomes a tool error
naming the problem and the next step, and the server goes on serving.
"""

import hmac
import ipaddress
import json
import logging
import sys
from collections.abc import Callable
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from memctl.errors import MemctlError, UsageError
from memctl.mcp import models, tools
from memctl.mcp.arguments import refusal, strict_tool_arguments
from memctl.mcp.pool import StorePool
from memctl.mcp.schemas import inline_tool_schemas
from memctl.mcp.scope import Scope

log = logging.getLogger("memctl.mcp")

Area = Literal["main", "fragments", "solutions"]
Mode = Literal["hybrid", "dense", "keyword"]
INSTRUCTIONS = """memctl: a curated long-term memory. Search before answering (memory_search, or memory_recall for
the block to put in your prompt); save durable facts with memory_save, or hand a finished conversation to memorize
(quality gate + consolidation). Every change is in memory_history and can be undone with memory_restore.
memory_forget only previews unless confirm is true."""

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def _writes(*, destructive: bool, idempotent: bool, open_world: bool = False) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=False, destructive_hint=destructive, idempotent_hint=idempotent, open_world_hint=open_world
    )


def tool_error(exc: MemctlError) -> ToolError:
    """The message a client (a model) reads: what went wrong, and what to do instead."""
    return ToolError(f"{type(exc).__name__}: {exc.message}" + (f" (hint: {exc.hint})" if exc.hint else ""))


class MemctlServer(MCPServer):
    """The SDK's server, with arguments that fail a tool's schema refused in memctl's words."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            tool = self._tool_manager.get_tool(name)
            known = list(tool.fn_metadata.arg_model.model_fields) if tool is not None else []
            # `from` the ValidationError: the SDK logs the field names of a refusal, not the values.
            raise ToolError(refusal(name, exc.__cause__, known)) from exc.__cause__


def build_server(pool: StorePool, scope: Scope, *, inline: bool = False) -> MCPServer:
    """An MCPServer whose tools and resources work on `pool`'s stores, within `scope`.

    `inline`: the short read tools (search, recall without the utility model, get, list, behaviour) run on
    the event loop itself when their store is open and free, instead of on a worker thread. For stdio,
    where one client waits for each answer anyway: the hop to a worker thread and back cost a warm
    `memory_search` ~3 ms p50 on this 2-core machine under load (bench/README.md, MCP section). Over HTTP
    every tool keeps its worker thread, so one client's call never holds up another client's requests."""
    from memctl import __version__
    from memctl.config.paths import resolve_root

    server: MCPServer = MemctlServer("memctl", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    root = str(resolve_root(pool.root))

    def run(subdir: str | None, work: Callable[[Any, str], Any], *, create: bool = False) -> Any:
        """`work(store, subdir)` on the warm store; `create` for tools that add memories (as the CLI)."""
        try:
            name = scope.resolve(subdir)
            with pool.use(name, create=create) as store:
                return work(store, name)
        except MemctlError as exc:
            raise tool_error(exc) from exc

    async def run_short(subdir: str | None, work: Callable[[Any, str], Any]) -> Any:
        """`run` for a short read: inline when allowed and the store is warm and free, else on a worker thread
        as the SDK runs a plain tool (a store still to open, or held by a longer call, waits there)."""
        if inline:
            try:
                name = scope.resolve(subdir)
                with pool.use_now(name) as store:
                    if store is not None:
                        return work(store, name)
            except MemctlError as exc:
                raise tool_error(exc) from exc
        return await anyio.to_thread.run_sync(run, subdir, work)

    def noted(subdir: str) -> Callable[[list[str]], None]:
        """Access times of what a call returned, written after its answer (memctl.mcp.access)."""
        return lambda ids: pool.access.record(subdir, ids)

    def run_apart(subdir: str | None, work: Callable[[Any, str], Any]) -> Any:
        """On a store opened for this call alone: long calls do not hold up the warm store."""
        try:
            name = scope.resolve(subdir)
            with pool.open_new(name) as store:
                return work(store, name)
        except MemctlError as exc:
            raise tool_error(exc) from exc

    Subdir = Annotated[
        str | None, Field(description=f"The store (sub-store) to use; this server serves {scope.describe()}.")
    ]
    Threshold = Annotated[
        float | None,
        Field(
            ge=0.0,
            le=1.0,
            description="Minimum relevance, 0-1 [config search_threshold]; unset: the default cut, and for search "
            "nothing when the store seems not to answer the question.",
        ),
    ]
    Limit = Annotated[int | None, Field(ge=1, le=1000, description="Most results [config search_limit, 10].")]
    AreaArg = Annotated[Area | None, Field(description="Only this area.")]
    FilterArg = Annotated[
        str | None,
        Field(
            description="Metadata filter, e.g. \"'db' in tags and priority >= 2\" (comparisons joined by and/or/not)."
        ),
    ]
    ModeArg = Annotated[
        Mode | None, Field(description="hybrid (vector + keyword), dense or keyword [config search_mode].")
    ]
    AsOfArg = Annotated[
        str | None,
        Field(
            max_length=64,
            description="Answer as the store stood then (ISO 8601 date or time): each fact in the version valid "
            "at that moment. Default: current facts only.",
        ),
    ]
    Ids = Annotated[list[str], Field(min_length=1, max_length=1000, description="Memory ids.")]
    Metadata = Annotated[
        dict[str, Any] | None,
        Field(description='JSON metadata (e.g. {"tags": ["db"]}); id, area, created_at, updated_at are reserved.'),
    ]
    ChatMessages = Annotated[
        list[dict[str, str]] | None, Field(description='Chat messages [{"role": "user", "content": "…"}, …].')
    ]

    @server.tool(annotations=_writes(destructive=False, idempotent=False))
    def memory_save(
        text: Annotated[str, Field(min_length=1, description="The memory text.")],
        area: Annotated[Area, Field(description="main, fragments or solutions.")] = "main",
        metadata: Metadata = None,
        subdir: Subdir = None,
    ) -> models.SaveOut:
        """Save one memory (embedded at once, searchable by the next call); returns its id."""
        return run(subdir, lambda s, n: tools.save(s, n, text, area, metadata), create=True)

    @server.tool(annotations=READ)
    async def memory_search(
        query: Annotated[str, Field(min_length=1, description="What to look for.")],
        limit: Limit = None,
        threshold: Threshold = None,
        area: AreaArg = None,
        filter: FilterArg = None,
        mode: ModeArg = None,
        as_of: AsOfArg = None,
        subdir: Subdir = None,
    ) -> models.SearchOut:
        """Search memories, best first (like `memctl load`); count 0 when nothing passes the threshold."""
        return await run_short(
            subdir,
            lambda s, n: tools.search(
                s,
                n,
                query,
                limit=limit,
                threshold=threshold,
                area=area,
                filter=filter,
                mode=mode,
                record=noted(n),
                as_of=as_of,
            ),
        )

    @server.tool(annotations=READ)
    async def memory_recall(
        message: Annotated[str, Field(min_length=1, description="The message the agent is answering.")],
        history: ChatMessages = None,
        threshold: Threshold = None,
        query_prep: Annotated[
            bool, Field(description="Let the utility model write the search query from message and history.")
        ] = False,
        post_filter: Annotated[bool, Field(description="Let the utility model drop results that do not help.")] = False,
        as_of: AsOfArg = None,
        subdir: Subdir = None,
    ) -> Annotated[CallToolResult, models.RecallOut]:
        """Memories and solutions for a message, rendered as the block `memctl recall` prints (the text
        content); the structured result has each hit with its score."""

        def work(store: Any, name: str) -> Any:
            return tools.recall(
                store,
                name,
                message,
                history=history,
                threshold=threshold,
                query_prep=query_prep,
                post_filter=post_filter,
                record=noted(name),
                as_of=as_of,
            )

        if query_prep or post_filter:  # the utility model: seconds, on a worker thread
            doc = await anyio.to_thread.run_sync(run, subdir, work)
        else:
            doc = await run_short(subdir, work)
        text = doc["prompt"] or "nothing recalled for this message\n"
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=doc)

    @server.tool(annotations=READ)
    async def memory_get(ids: Ids, subdir: Subdir = None) -> models.GetOut:
        """Memories by id, with their metadata and the ids derived from them; unknown ids are listed in missing."""
        return await run_short(subdir, lambda s, n: tools.get(s, n, ids))

    @server.tool(annotations=READ)
    async def memory_list(
        area: AreaArg = None,
        filter: FilterArg = None,
        limit: Annotated[int | None, Field(ge=1, le=1000, description="Page size [config list_page_size].")] = None,
        page: Annotated[int, Field(ge=1, description="Page, 1 = newest.")] = 1,
        subdir: Subdir = None,
    ) -> models.ListOut:
        """Memories newest first, a page at a time."""
        return await run_short(subdir, lambda s, n: tools.list_(s, n, area=area, filter=filter, limit=limit, page=page))

    @server.tool(annotations=_writes(destructive=True, idempotent=False))
    def memory_update(
        id: Annotated[str, Field(min_length=1, description="The memory's id.")],
        text: Annotated[str | None, Field(min_length=1, description="New text (re-embedded).")] = None,
        metadata: Metadata = None,
        unset: Annotated[list[str] | None, Field(description="Metadata keys to remove.")] = None,
        replace_metadata: Annotated[bool, Field(description="Replace the metadata instead of merging.")] = False,
        area: AreaArg = None,
        subdir: Subdir = None,
    ) -> models.UpdateOut:
        """Change a memory's text, metadata or area in place; its history keeps the old version."""
        return run(
            subdir,
            lambda s, n: tools.update(
                s, n, id, text=text, metadata=metadata, unset=unset, replace_metadata=replace_metadata, area=area
            ),
        )

    @server.tool(annotations=_writes(destructive=True, idempotent=True))
    def memory_delete(
        ids: Ids,
        cascade: Annotated[bool, Field(description="Also delete memories derived from these (consolidation).")] = True,
        dry_run: Annotated[bool, Field(description="Only say what would be deleted.")] = False,
        subdir: Subdir = None,
    ) -> models.DeleteOut:
        """Delete memories by id (restorable with memory_restore); unknown ids are listed in missing."""
        return run(subdir, lambda s, n: tools.delete(s, n, ids, cascade=cascade, dry_run=dry_run))

    @server.tool(annotations=_writes(destructive=True, idempotent=True))
    def memory_forget(
        query: Annotated[str, Field(min_length=1, description="Delete memories similar to this.")],
        threshold: Annotated[
            float | None,
            Field(
                ge=0.0,
                le=1.0,
                description="Minimum similarity (1 + cosine) / 2 to the query, not the search relevance "
                "[config forget_threshold, 0.99: close restatements only].",
            ),
        ] = None,
        exact: Annotated[bool, Field(description="Only memories whose text is exactly the query.")] = False,
        area: AreaArg = None,
        filter: FilterArg = None,
        confirm: Annotated[
            bool, Field(description="Really delete. Without it this is a dry run that lists what would go.")
        ] = False,
        subdir: Subdir = None,
    ) -> models.ForgetOut:
        """Delete every memory at or above the threshold. A dry run unless confirm is true: look first."""
        return run(
            subdir,
            lambda s, n: tools.forget(
                s, n, query, threshold=threshold, exact=exact, area=area, filter=filter, confirm=confirm
            ),
        )

    @server.tool(annotations=READ)
    def memory_history(
        id: Annotated[str | None, Field(description="One memory's changes (else all).")] = None,
        limit: Annotated[int, Field(ge=1, le=10000, description="Most entries, newest first.")] = 50,
        subdir: Subdir = None,
    ) -> models.HistoryOut:
        """Recorded changes (add, update, merge, replace, delete, prune, restore, import) with old and new text."""
        return run(subdir, lambda s, n: tools.history(s, n, id, limit))

    @server.tool(annotations=_writes(destructive=False, idempotent=False))
    def memory_restore(ids: Ids, subdir: Subdir = None) -> models.RestoreOut:
        """Bring deleted, replaced or pruned memories back (same id, text, area, metadata); all or none."""
        return run(subdir, lambda s, n: tools.restore(s, n, ids))

    @server.tool(annotations=_writes(destructive=True, idempotent=False, open_world=True))
    def memorize(
        transcript: Annotated[
            str | None, Field(description="A conversation as text ('User: …' / 'Assistant: …' lines, or JSON).")
        ] = None,
        messages: ChatMessages = None,
        area: Annotated[
            Area, Field(description="Area for extracted facts (solutions always go to 'solutions').")
        ] = "fragments",
        solutions: Annotated[bool, Field(description="Also extract problem -> solution know-how.")] = True,
        dry_run: Annotated[bool, Field(description="Decide every candidate's fate, write nothing.")] = False,
        recalled: Annotated[
            list[str] | None, Field(description="Memories recalled into this conversation: restating them is not new.")
        ] = None,
        subdir: Subdir = None,
    ) -> models.MemorizeOut:
        """Extract durable facts and solutions from a conversation with the utility model, drop transient ones
        (quality gate) and consolidate the rest with what is stored. Needs config utility_model."""
        return run_apart(
            subdir,
            lambda s, n: tools.memorize(
                s,
                n,
                transcript=transcript,
                messages=messages,
                area=area,
                solutions=solutions,
                dry_run=dry_run,
                recalled=recalled,
            ),
        )

    @server.tool(annotations=READ)
    async def behaviour_get(subdir: Subdir = None) -> models.BehaviourOut:
        """The store's behaviour rules (for the agent's system prompt); the defaults until changed."""
        return await run_short(subdir, tools.behaviour)

    @server.tool(annotations=READ)
    async def knowledge_search(
        query: Annotated[str, Field(min_length=1, description="What to look for.")],
        limit: Limit = None,
        threshold: Threshold = None,
        area: AreaArg = None,
        filter: FilterArg = None,
        mode: ModeArg = None,
        subdir: Subdir = None,
    ) -> models.KnowledgeSearchOut:
        """Search imported knowledge chunks only (memctl import-knowledge), e.g. filter "file_type == 'md'"."""
        return await run_short(
            subdir,
            lambda s, n: tools.knowledge_search(
                s, n, query, limit=limit, threshold=threshold, area=area, filter=filter, mode=mode, record=noted(n)
            ),
        )

    @server.tool(annotations=READ)
    def stats(subdir: Subdir = None) -> models.StatsOut:
        """Counts per area and source, oldest/newest, never accessed, archive, size, model."""
        return run(subdir, lambda s, n: tools.stats(s, n, root))

    @server.tool(annotations=READ)
    def doctor_report(
        last: Annotated[int, Field(ge=1, le=1000, description="How many of the last runs to return.")] = 10,
        subdir: Subdir = None,
    ) -> models.DoctorOut:
        """The store's health as `memctl doctor` last measured it (likely junk, near-duplicates, conflicts, stale
        and never-recalled shares, pending, recall@k) and the last runs; null before the first run."""
        return run(subdir, lambda s, n: tools.doctor_report(s, n, last))

    _add_resources(server, pool, scope, root)
    strict_tool_arguments(server)
    inline_tool_schemas(server)
    return server


def _add_resources(server: MCPServer, pool: StorePool, scope: Scope, root: str) -> None:
    def read(subdir: str, work: Callable[[Any, str], str]) -> str:
        try:
            name = scope.resolve(subdir)
            with pool.use(name) as store:
                return work(store, name)
        except MemctlError as exc:
            raise ResourceError(f"{exc.message}" + (f" (hint: {exc.hint})" if exc.hint else "")) from exc

    def rules(store: Any, name: str) -> str:
        return str(tools.behaviour(store, name)["rules"])

    def figures(store: Any, name: str) -> str:
        return json.dumps(tools.stats(store, name, root)["stores"][0], ensure_ascii=False)

    def reader(name: str, work: Callable[[Any, str], str]) -> Callable[[], str]:
        return lambda: read(name, work)

    for name in scope.literal:  # listed by resources/list; the templates below serve patterns too
        server.resource(
            f"memctl://{name}/behaviour",
            name=f"{name} behaviour",
            mime_type="text/markdown",
            description=f"Behaviour rules of store {name!r}",
        )(reader(name, rules))
        server.resource(
            f"memctl://{name}/stats",
            name=f"{name} stats",
            mime_type="application/json",
            description=f"Statistics of store {name!r}",
        )(reader(name, figures))

    @server.resource(
        "memctl://{+subdir}/behaviour",
        name="behaviour",
        mime_type="text/markdown",
        description="Behaviour rules of a store this server serves",
    )
    def behaviour_resource(subdir: str) -> str:
        return read(subdir, rules)

    @server.resource(
        "memctl://{+subdir}/stats",
        name="stats",
        mime_type="application/json",
        description="Statistics of a store this server serves",
    )
    def stats_resource(subdir: str) -> str:
        return read(subdir, figures)


# -- running -----------------------------------------------------------------------------
def parse_bind(spec: str) -> tuple[str, int]:
    """`[HOST:]PORT` -> (host, port); host 127.0.0.1 unless given (IPv6 in brackets: [::1]:8765)."""
    text = spec.strip()
    host = "127.0.0.1"
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or text[end + 1 : end + 2] != ":":
            raise UsageError(f"--http {spec!r}: write an IPv6 host as [ADDRESS]:PORT", hint="e.g. --http [::1]:8765")
        host, text = text[1:end], text[end + 2 :]
    elif ":" in text:
        host, text = text.rsplit(":", 1)
    if not text.isdigit() or not 0 <= int(text) <= 65535 or not host:
        raise UsageError(f"--http {spec!r} is not [HOST:]PORT", hint="e.g. --http 8765 or --http 0.0.0.0:8765")
    return host, int(text)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class BearerAuth:
    """ASGI middleware: every HTTP request needs `Authorization: Bearer <token>` (constant-time check)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = json.dumps({"error": "unauthorized: send Authorization: Bearer <mcp_token>"}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="memctl"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def serve(
    pool: StorePool, scope: Scope, *, http: str | None = None, token: str | None = None, quiet: bool = False
) -> None:
    """Run until the client closes stdin (stdio) or the process is stopped (HTTP: SIGINT/SIGTERM)."""
    bind = parse_bind(http) if http is not None else None
    if bind is not None and not is_loopback(bind[0]) and not token:
        raise UsageError(
            f"--http {http} listens beyond this machine and no token is set",
            hint="set mcp_token (env MEMCTL_MCP_TOKEN, or the user config file): clients then send "
            "Authorization: Bearer <token>",
        )
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    server = build_server(pool, scope, inline=bind is None)
    pool.warm(scope.default)
    try:
        if bind is None:
            from memctl.mcp.stdio import serve_stdio

            _say(quiet, f"memctl mcp: serving {scope.describe()} of {_where(pool)} on stdio")
            anyio.run(serve_stdio, server)
        else:
            _serve_http(server, pool, scope, bind, token, quiet)
    finally:
        pool.close()


def _serve_http(
    server: MCPServer, pool: StorePool, scope: Scope, bind: tuple[str, int], token: str | None, quiet: bool
) -> None:
    import socket

    import anyio
    import uvicorn

    host, port = bind
    app: Any = server.streamable_http_app(host=host)
    if token:
        app = BearerAuth(app, token)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on sockets that say so, and without it each
    # response waited ~40 ms for the client's delayed ACK (Nagle) before its body left.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)  # connections queue from now on, while uvicorn starts
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"--http {host}:{port}: cannot listen there: {exc.strerror or exc}",
            hint="choose another port, or stop what uses it",
        ) from exc
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock.getsockname()[1]}/mcp"
    _say(
        quiet,
        f"memctl mcp: serving {scope.describe()} of {_where(pool)} at {url}"
        + (" (bearer token required)" if token else ""),
    )
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


def _where(pool: StorePool) -> str:
    from memctl.store import store_place

    return store_place(pool.root, store=pool.store_option, overrides=pool.overrides)


def _say(quiet: bool, line: str) -> None:
    if not quiet:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
