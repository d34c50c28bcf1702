"""`memctl mcp`: serve the store to agents over the Model Context Protocol."""

from __future__ import annotations

from typing import Annotated

import typer

from memctl.cli.app import app, state


@app.command()
def mcp(
    ctx: typer.Context,
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="[HOST:]PORT",
            help="Serve streamable HTTP at "
            "http://HOST:PORT/mcp (HOST 127.0.0.1 unless given; another host "
            "needs config mcp_token) instead of stdio.",
            show_default=False,
        ),
    ] = None,
    allow_subdirs: Annotated[
        str | None,
        typer.Option(
            "--allow-subdirs",
            metavar="LIST",
            help="Comma-separated "
            "subdirs or patterns ('default,projects/*') a tool's subdir "
            "argument may choose; default: only --subdir.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve the store to MCP clients (agents): stdio by default, or --http. Runs until stopped."""
    from memctl.config import load_config
    from memctl.mcp.pool import StorePool
    from memctl.mcp.scope import Scope
    from memctl.mcp.server import serve

    st = state(ctx)
    scope = Scope.allowing(allow_subdirs, st.subdir) if allow_subdirs else Scope.fixed(st.subdir)
    token = load_config(None, st.overrides)["mcp_token"] if http is not None else None
    serve(StorePool(st.root, st.store, st.overrides), scope, http=http, token=token, quiet=st.quiet)
