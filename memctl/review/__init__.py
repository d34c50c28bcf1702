"""The review queue: what waits for a person before it becomes a memory (`memctl review`).

Core only (no typer/rich): the CLI's `review` commands and the MCP tools call these.
"""

from memctl.review.queue import (
    ResolvePolicy,
    ResolveReport,
    approve,
    list_page,
    propose,
    reject,
    resolve,
)

__all__ = ["ResolvePolicy", "ResolveReport", "approve", "list_page", "propose", "reject", "resolve"]
