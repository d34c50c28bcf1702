"""The MCP server: memctl's stores served to agents over the Model Context Protocol.

A second face over the same services as the CLI (no typer/rich here). `memctl mcp` runs it;
`build_server(pool, scope)` gives the MCPServer for embedding or in-process tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Scope", "ScopeError", "StorePool", "build_server", "parse_bind", "serve"]

if TYPE_CHECKING:
    from memctl.mcp.pool import StorePool
    from memctl.mcp.scope import Scope, ScopeError
    from memctl.mcp.server import build_server, parse_bind, serve


def __getattr__(name: str) -> Any:
    from importlib import import_module

    where = {
        "Scope": "scope",
        "ScopeError": "scope",
        "StorePool": "pool",
        "build_server": "server",
        "parse_bind": "server",
        "serve": "server",
    }
    if name in where:
        return getattr(import_module(f"memctl.mcp.{where[name]}"), name)
    raise AttributeError(f"module 'memctl.mcp' has no attribute {name!r}")
