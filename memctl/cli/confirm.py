"""How destructive commands decide between asking, changing and only showing what they would do."""

from __future__ import annotations

import typer

from memctl.cli.app import state
from memctl.cli.render import info


def decide(ctx: typer.Context, dry_run: bool, yes: bool, question: str | None) -> bool:
    """Commands that delete by similarity or criteria (forget, prune, purge) share one rule:
    scripts (no TTY) get a dry run unless --yes; a terminal is asked (when there is something to
    change: `question`) unless --yes. Returns whether this is a dry run."""
    st = state(ctx)
    if dry_run or yes:
        return dry_run
    if not st.interactive:
        info(st, "no terminal: dry run only; pass --yes to make the change")
        return True
    if question:
        typer.confirm(question, abort=True, err=True)
    return False
