"""The MCP server: memctl's stores served to agents over the Model Context Protocol.

A second face over the same services as the CLI (no typer/rich here). `memctl mcp` runs it;
`memctl.mcp.server.build_server(pool, scope)` gives the MCPServer for embedding or in-process tests.
"""
