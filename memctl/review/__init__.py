"""The review queue: what waits for a person before it becomes a memory (`memctl review`).

Core only (no typer/rich): the CLI's `review` commands and the MCP tools call these.
"""
