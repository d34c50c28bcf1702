"""`memctl demo`: memctl's main job on example data shipped in the package (no LLM, nothing downloaded)."""

from __future__ import annotations

import shlex
import sys
from typing import Annotated, Any

import typer

from memctl.cli.app import app, state
from memctl.cli.render import count, emit
from memctl.errors import UsageError

INDENT = "   "


@app.command()
def demo(
    ctx: typer.Context,
    clean_up: Annotated[
        bool, typer.Option("--clean-up", help="Remove the temporary folder at the end (never a --root).")
    ] = False,
) -> None:
    """Import a knowledge folder, save memories, recall a question, back up and verify: on example data.

    Runs on the embedded store in a new temporary folder, which is kept (its path is printed) so you
    can try other commands on it. With --root, it writes the new store ROOT/SUBDIR and its backup
    ROOT/SUBDIR-backup, and refuses if either exists: it never writes into a store of yours. Uses no
    LLM and downloads nothing. Exit 0 when every step worked.
    """
    from memctl.demo import run_demo

    st = state(ctx)
    if st.store and st.store != "embedded":
        raise UsageError("memctl demo runs on the embedded store", hint="leave out --store")
    if clean_up and st.root is not None:
        raise UsageError("--clean-up removes only the demo's own temporary folder", hint="leave out --root")
    human = not (st.json or st.quiet)
    report = run_demo(
        st.root, st.subdir, overrides=st.overrides, remove=clean_up, on_step=_print_step if human else None
    )
    emit(st, report.to_dict(), lambda c: _print_end(report), essential=[str(report.root)])


def _out(line: str = "") -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _print_step(name: str, report: Any) -> None:
    if name == "store":
        where = "a new temporary folder" if report.temporary else "--root"
        _out(f"memctl demo: the embedded store {report.path} ({where}); no LLM is used")
        _out(f"1. store: opened {report.subdir!r} under {report.root}")
    elif name == "knowledge":
        k = report.knowledge
        areas = ", ".join(f"{area} {n}" for area, n in report.to_dict()["knowledge"]["areas"].items())
        _out(f"2. knowledge: imported {count(len(k.files), 'file')} as {count(k.added, 'chunk')} ({areas})")
        _out(f"{INDENT}from the example folder {report.to_dict()['knowledge']['folder']}")
    elif name == "save":
        _out(f"3. save: saved {count(len(report.saved), 'memory')}")
        for memory in report.saved:
            _out(f"{INDENT}{memory.id}  {memory.area:<9}  {memory.text}")
    elif name == "recall":
        found = f"{count(len(report.recall.memories), 'memory')} and {count(len(report.recall.solutions), 'solution')}"
        _out(f"4. recall: {report.question!r} -> {found}; the block an agent injects into its prompt:")
        for line in report.prompt.rstrip("\n").splitlines():
            _out(f"{INDENT}| {line}" if line else f"{INDENT}|")
    elif name == "backup":
        b, v = report.backup, report.verified
        _out(f"5. backup: wrote {b.path} ({count(b.count, 'memory')}, {b.bytes} bytes)")
        _out(
            f"{INDENT}verified: {count(v.files, 'file')} match the sha256 in backup.json; opened as a store it holds "
            f"{count(v.count, 'memory')} and recalls the same ones"
        )


def _print_end(report: Any) -> None:
    if report.removed:
        _out(f"Done. Removed the temporary folder {report.root}.")
        return
    root = shlex.quote(str(report.root))
    sub = "" if report.subdir == "default" else f" -s {shlex.quote(report.subdir)}"
    _out("Done. Try it yourself:")
    _out(f"{INDENT}memctl --root {root}{sub} load 'payment timeout'")
    _out(f"{INDENT}memctl --root {root}{sub} recall 'who is on call this week?'")
    _out(f"{INDENT}memctl --root {root}{sub} list --area solutions")
    if report.temporary:
        _out(f"{INDENT}rm -rf {root}   # when you are done")
