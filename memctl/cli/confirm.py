"""How destructive commands decide between asking, changing and only showing what they would do."""

from __future__ import annotations

from typing import Any

import typer

from memctl.cli.app import state
from memctl.cli.render import console, info


def decide(ctx: typer.Context, dry_run: bool, yes: bool, question: str | None, preview: Any = None) -> bool:
    """Commands that delete by similarity or criteria (forget, prune, purge) share one rule:
    scripts (no TTY) get a dry run unless --yes; a terminal is asked (when there is something to
    change: `question`) unless --yes, after `preview` (what would go: a table) is shown on stderr,
    so nobody answers yes to a count. Returns whether this is a dry run."""
    st = state(ctx)
    if dry_run or yes:
        return dry_run
    if not st.interactive:
        info(st, "no terminal: dry run only; pass --yes to make the change")
        return True
    if question:
        if preview is not None:
            console(stderr=True).print(preview)
        typer.confirm(question, abort=True, err=True)
    return False


def asked(ctx: typer.Context, dry_run: bool, yes: bool) -> bool:
    """Whether `decide` (or `confirm`) put the question, i.e. the list was already shown."""
    st = state(ctx)
    return not dry_run and not yes and st.interactive
