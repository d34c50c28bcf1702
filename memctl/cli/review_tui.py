"""`memctl review` on a terminal: the queue worked through with the keyboard (Textual).

One key per action; every action is a call on `ReviewSession` (memctl/review/session.py), which goes through
the store API, so the CLI, MCP and this screen decide the same way. Texts are shown as plain text, never
as markup (a memory may hold square brackets).
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Header, Input, Static

from memctl.errors import MemctlError
from memctl.review.session import ReviewFilter, ReviewSession

DONE = {
    "approve": "approved",
    "edit": "edited",
    "reject": "rejected",
    "merge": "merged",
    "supersede": "superseded the other memory (kept as an older version)",
    "skip": "skipped",
}


class ReviewApp(App[dict[str, int]]):
    """Returns the count of each decision when it quits."""

    TITLE = "memctl review"
    CSS = """
    #progress { height: 1; background: $boost; padding: 0 1; }
    #item { padding: 1 2; border: round $accent; }
    #details, #nearest { padding: 0 2; color: $text-muted; }
    #status { height: 1; padding: 0 1; }
    #editor { display: none; }
    #editor.open { display: block; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "approve", "approve"),
        Binding("e", "edit", "edit+approve"),
        Binding("r", "reject", "reject"),
        Binding("m", "merge", "merge"),
        Binding("x", "supersede", "supersede"),
        Binding("s", "skip", "skip"),
        Binding("u", "undo", "undo"),
        Binding("f", "filter", "filter"),
        Binding("q", "quit_review", "quit"),
        Binding("escape", "cancel", "cancel", show=False),
    ]

    def __init__(self, session: ReviewSession, subdir: str = "default") -> None:
        super().__init__()
        self.session = session
        self.sub_title = subdir
        self.mode_: str | None = None  # edit, merge or filter while the editor is open
        self.merge_target: str | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="progress")
        with VerticalScroll():
            yield Static(id="item")
            yield Static(id="details")
            yield Static(id="nearest")
        yield Input(id="editor")
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.show()

    # -- drawing ------------------------------------------------------------------------------
    def show(self, status: str = "", error: bool = False) -> None:
        number, total = self.session.progress
        item = self.session.current
        where = f"filter: {self.session.filter.describe()}"
        self.query_one("#progress", Static).update(
            Text(f"{min(number, total)} of {total}  ·  {where}" if item else f"{total} of {total}  ·  {where}")
        )
        if item is None:
            counts = ", ".join(f"{verb} {n}" for verb, n in self.session.summary().items() if n)
            self.query_one("#item", Static).update(
                Text(f"Nothing left to review here ({counts or 'no decisions'}). u: undo, f: filter, q: quit.")
            )
            self.query_one("#details", Static).update("")
            self.query_one("#nearest", Static).update("")
        else:
            self.query_one("#item", Static).update(Text(item.text))
            source = ":".join(p for p in (item.source, item.transcript) if p) or "-"
            turn = item.memory.metadata.get("turn")
            score = f"   score {item.score:.2f}" if item.score is not None else ""
            details = [
                f"{item.kind}   id {item.id}   area {item.memory.area}   created {item.memory.created_at[:19]}{score}",
                f"source {source}" + (f" (turn {turn})" if turn is not None else ""),
                f"why it is here: {item.reason or '-'}",
            ]
            self.query_one("#details", Static).update(Text("\n".join(details)))
            other = self._other()
            shown = f"other memory {other.id}: {other.text}" if other is not None else "no other memory to merge into"
            self.query_one("#nearest", Static).update(Text(shown))
        self.query_one("#status", Static).update(Text(status, style="bold red" if error else "green"))

    def _other(self):  # type: ignore[no-untyped-def]
        item = self.session.current
        return self.session.other(item) if item is not None else None

    # -- actions ------------------------------------------------------------------------------
    def _do(self, call, *args) -> None:  # type: ignore[no-untyped-def]
        try:
            verb = call(*args)
        except MemctlError as exc:
            self.show(str(exc), error=True)
            return
        if call == self.session.undo:
            self.show(f"undid {verb}" if verb else "nothing to undo")
        else:
            self.show(DONE[verb])

    def action_approve(self) -> None:
        if self.mode_ is None:
            self._do(self.session.approve)

    def action_reject(self) -> None:
        if self.mode_ is None:
            self._do(self.session.reject)

    def action_skip(self) -> None:
        if self.mode_ is None:
            self._do(self.session.skip)

    def action_undo(self) -> None:
        if self.mode_ is None:
            self._do(self.session.undo)

    def action_edit(self) -> None:
        item = self.session.current
        if self.mode_ is None and item is not None:
            self._open("edit", item.text)

    def action_merge(self) -> None:
        item = self.session.current
        if self.mode_ is not None or item is None:
            return
        other = self._other()
        if other is None:
            self.show("no stored memory to merge into", error=True)
            return
        self.merge_target = other.id
        self._open("merge", f"{other.text} {item.text}")

    def action_supersede(self) -> None:
        if self.mode_ is not None or self.session.current is None:
            return
        other = self._other()
        if other is None:
            self.show("no other memory for this one to supersede", error=True)
            return
        self._do(self.session.supersede, other.id)

    def action_filter(self) -> None:
        if self.mode_ is None:
            self._open("filter", "" if self.session.filter.describe() == "all" else self.session.filter.describe())

    def action_cancel(self) -> None:
        if self.mode_ is not None:
            self._close()
            self.show("cancelled")

    def action_quit_review(self) -> None:
        if self.mode_ is None:
            self.exit(self.session.summary())

    def _open(self, mode: str, value: str) -> None:
        self.mode_ = mode
        editor = self.query_one("#editor", Input)
        editor.placeholder = {"filter": "kind=pending|junk|duplicate|conflict|stale area=main source=mcp"}.get(
            mode, "text; Enter saves, Esc cancels"
        )
        editor.value = value
        editor.add_class("open")
        editor.focus()
        self.query_one("#status", Static).update(Text(f"{mode}: Enter to confirm, Esc to cancel"))

    def _close(self) -> None:
        self.mode_ = None
        editor = self.query_one("#editor", Input)
        editor.remove_class("open")
        self.set_focus(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        mode, value = self.mode_, event.value
        self._close()
        if mode == "edit":
            self._do(self.session.approve, value)
        elif mode == "merge" and self.merge_target is not None:
            self._do(self.session.merge, self.merge_target, value)
        elif mode == "filter":
            try:
                self.session.set_filter(ReviewFilter.parse(value))
            except MemctlError as exc:
                self.show(str(exc), error=True)
                return
            self.show(f"filter: {self.session.filter.describe()}")


def run_review(session: ReviewSession, subdir: str) -> dict[str, int]:
    """Run the screen until the reviewer quits; the count of each decision."""
    return ReviewApp(session, subdir).run() or session.summary()
