"""The review queue: `memctl review list/approve/reject/resolve` (JSON contract, exit codes), the session
that the keyboard screen drives (undo included), and the screen itself under Textual's pilot."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import memctl
from memctl.embeddings import FakeEmbedder
from memctl.errors import UsageError
from memctl.review.session import ReviewFilter, ReviewSession

TEXTS = [
    "User's deploy target is fly.io",
    "User prefers pnpm over npm",
    "User's cat is called Miso",
    "User is on call the first week of each month",
]


def _queue(home: Path, texts=TEXTS, source: str = "memorize") -> list[str]:
    with memctl.open_store(home, "default", embedder=FakeEmbedder(), create=True) as store:
        return [
            store.add_pending(t, "main", {"source": source, "transcript": "t1.json", "turn": n}, reason="p(noise) 0.5")
            for n, t in enumerate(texts)
        ]


def _texts(cli) -> list[str]:
    return sorted(m["text"] for m in cli("list", "--json").json["items"])


@pytest.mark.usefixtures("backend")
def test_list_approve_reject_in_a_script(cli, home: Path):
    ids = _queue(home)
    listed = cli("review", "list", "--json")
    assert listed.code == 0 and listed.json["total"] == 4
    items = listed.json["items"]
    assert sorted(i["id"] for i in items) == sorted(ids)
    assert [(i["created_at"], i["id"]) for i in items] == sorted(
        (i["created_at"], i["id"]) for i in items
    )  # oldest first
    assert {"id", "text", "area", "created_at", "reason", "source", "transcript"} <= set(listed.json["items"][0])
    assert cli("list", "--json").json["items"] == []  # pending items are not memories

    approved = cli("review", "approve", ids[0], "--json")
    assert approved.code == 0 and approved.json["approved"][0]["id"] == ids[0]
    assert cli("review", "approve", ids[1], "--text", "User prefers pnpm", "--json").code == 0
    rejected = cli("review", "reject", ids[2], "--yes", "--json")
    assert rejected.code == 0 and rejected.json["rejected"][0]["text"] == TEXTS[2]
    assert _texts(cli) == sorted([TEXTS[0], "User prefers pnpm"])
    assert cli("review", "list", "--json").json["total"] == 1

    missing = cli("review", "approve", ids[0], ids[3], "--json")  # all or none: ids[0] is no longer pending
    assert missing.code == 3 and cli("review", "list", "--json").json["total"] == 1
    assert cli("restore", ids[2]).code == 0  # a rejected item comes back as a memory
    assert TEXTS[2] in _texts(cli)
    ops = {(e["memory_id"], e["op"]) for e in cli("history", "--json").json["entries"]}
    assert {(ids[0], "approve"), (ids[1], "approve"), (ids[2], "reject")} <= ops


def test_resolve_by_policy_and_its_dry_run(cli, home: Path):
    ids = _queue(home)
    assert cli("review", "resolve", "--json").code == 2  # no decision given
    preview = cli("review", "resolve", "--approve-all", "--json")  # no terminal and no --yes: a dry run
    assert preview.code == 0 and preview.json["dry_run"] and len(preview.json["approved"]) == 4
    assert cli("review", "list", "--json").json["total"] == 4
    young = cli("review", "resolve", "--older-than", "7d", "--approve-all", "--yes", "--json")
    assert young.json["approved"] == [] and young.json["waiting"] == 4  # nothing waited a week
    done = cli("review", "resolve", "--approve-all", "--yes", "--json")
    assert not done.json["dry_run"] and {i["id"] for i in done.json["approved"]} == set(ids)
    assert _texts(cli) == sorted(TEXTS)


def test_review_without_a_subcommand_needs_a_terminal(cli, home: Path):
    _queue(home)
    result = cli("review")
    assert result.code == 2 and "needs a terminal" in result.err and "review list" in result.err


@pytest.mark.usefixtures("backend")
def test_session_decisions_and_undo_restore_the_queue(home: Path):
    ids = _queue(home)
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        [heroku] = store.add(["User's deploy target is Heroku"], area="main")
        session = ReviewSession(store)
        queue = [i.id for i in session.items]  # oldest first (a tie of one millisecond goes by id)
        assert session.progress == (1, 4) and sorted(queue) == sorted(ids)
        session.approve()
        session.approve("User prefers pnpm")
        near = session.other(session.current)
        assert near is not None
        session.merge(near.id, f"{near.text}; also {TEXTS[2]}")
        session.reject()
        assert store.count_pending() == 0 and session.current is None
        assert session.summary() == {"approve": 1, "edit": 1, "reject": 1, "merge": 1, "supersede": 0, "skip": 0}

        for verb in ("reject", "merge", "edit", "approve"):
            assert session.undo() == verb
        assert session.undo() is None
        assert [i.id for i in store.pending_items()] != [] and store.count_pending() == 4
        assert sorted(i.id for i in store.pending_items()) == sorted(ids)  # the same ids come back
        assert [m.text for m in store.get([heroku])] == ["User's deploy target is Heroku"] and len(store) == 1
        assert session.position == 0  # the merge target (Heroku or an approved item) is as it was, or gone again
        ops = [e.op for e in store.history(queue[2])]
        assert ops[:2] == ["requeue", "reject"]  # newest first: rejected by the merge, then put back


def test_filter_parse_and_check(home: Path):
    assert ReviewFilter.parse("area=main source=mcp") == ReviewFilter(None, "main", "mcp")
    assert ReviewFilter.parse("kind=junk") == ReviewFilter("junk")
    for bad in ("area", "colour=red", "kind=rubbish", "source=web", "area=../x"):
        with pytest.raises(UsageError):
            ReviewFilter.parse(bad)
    _queue(home, TEXTS[:2], source="memorize")
    _queue(home, TEXTS[2:], source="mcp")
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        session = ReviewSession(store, ReviewFilter(source="mcp"))
        assert sorted(i.text for i in session.items) == sorted(TEXTS[2:])
        assert all(i.kind == "pending" for i in session.items)


def test_the_keyboard_screen_works_through_the_queue(home: Path):
    """Textual's pilot: approve, edit then approve, reject, merge, skip, undo, filter, quit; then the store."""
    from memctl.cli.review_tui import ReviewApp

    more = [f"User's note number {n} about the garden" for n in range(6)]
    _queue(home, TEXTS + more)
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        queue = [(i.id, i.text) for i in ReviewSession(store).items]  # oldest first; a tie goes by id
    ids, text_of = [i for i, _ in queue], dict(queue)

    async def drive(store) -> dict[str, int] | None:
        app = ReviewApp(ReviewSession(store), "default")
        async with app.run_test() as pilot:

            async def press(key: str) -> None:  # one key, and the screen settled before the next
                await pilot.press(key)
                await pilot.pause()

            await press("a")  # approve the first item
            await press("e")  # edit the second, then approve
            app.query_one("#editor").value = "User prefers pnpm, always"
            await press("enter")
            await press("r")  # reject the third
            await press("s")  # skip the fourth
            await press("m")  # merge the fifth into the closest memory
            await press("enter")
            await press("r")
            await press("u")  # reject the sixth, then undo it
            assert "undid reject" in str(app.query_one("#status").render())
            await press("x")  # the sixth supersedes the closest memory (kept as an older version)
            assert "superseded" in str(app.query_one("#status").render())
            await press("f")
            app.query_one("#editor").value = "source=web"
            await press("enter")
            assert "unknown source" in str(app.query_one("#status").render())
            await press("q")
        return app.return_value

    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        counts = asyncio.run(drive(store))
        assert counts == {"approve": 1, "edit": 1, "reject": 1, "merge": 1, "supersede": 1, "skip": 1}
        texts = {m.text for m in store.list(limit=100)[0]}
        assert len(texts) == 2 and text_of[ids[5]] in texts  # the sixth, and the memory it did not supersede
        kept = [a.memory for a in store.iter_archive() if a.op == "supersede"]
        assert len(kept) == 1 and kept[0].metadata["superseded_by"] == ids[5]
        versions = texts | {kept[0].text}  # the first (it took the merge) and the edited one, one of them kept
        assert len([t for t in versions if t.startswith("User prefers pnpm, always")]) == 1  # the edit (maybe merged)
        assert len([t for t in versions if t.endswith(f" {text_of[ids[4]]}")]) == 1  # the fifth, merged into one
        waiting = {i.id for i in store.pending_items()}
        assert waiting == {ids[3], *ids[6:]}  # the skipped item and those not reached still wait
        assert store.archived(ids[2]) is not None  # the rejected item: restorable
        assert ("approve", "review") in [(e.op, e.actor) for e in store.history(ids[0])]


@pytest.mark.usefixtures("backend")
def test_doctor_findings_are_reviewed_and_undone(cli, home: Path):
    """Stored memories a doctor run found (here: near-duplicates) are in the queue beside pending items:
    keep, edit, reject, merge and supersede act on the stored memory, and undo puts it back."""
    texts = ["User's favourite tea is oolong", "User's favourite tea is oolong!", "User's favourite tea is sencha"]
    ids = [cli("save", t, "--json").json["ids"][0] for t in texts]
    cli("save", "User's bike is a steel tourer")
    assert cli("doctor", "--json").code in (0, 1)
    with memctl.open_store(home, "default", embedder=FakeEmbedder()) as store:
        session = ReviewSession(store, ReviewFilter(kind="duplicate"))
        found = {i.id for i in session.items}
        assert found and found <= set(ids) and all(i.kind == "duplicate" and i.related for i in session.items)
        first = session.current
        other = session.other(first)
        assert other is not None and other.id in first.related
        session.supersede(other.id)  # the other is kept as a superseded version of the first
        assert store.get([other.id]) == [] and store.get_one(first.id).metadata["supersedes"] == [other.id]
        assert session.undo() == "supersede"
        assert store.get_one(other.id).text == other.text and "supersedes" not in store.get_one(first.id).metadata
        assert "valid_to" not in store.get_one(other.id).metadata
        session.reject()
        assert store.get([first.id]) == [] and store.archived(first.id) is not None
        assert session.undo() == "reject" and store.get_one(first.id).text == first.text
        session.approve("User's favourite tea is oolong (edited)")
        assert store.get_one(first.id).text.endswith("(edited)")
        assert session.undo() == "edit" and store.get_one(first.id).text == first.text
        session.approve()  # keep: nothing written
        assert store.get_one(first.id).text == first.text and session.summary()["approve"] == 1
