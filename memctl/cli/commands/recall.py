"""`memctl recall`: the memory block an agent injects into its prompt."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from memctl.cli.app import app, state
from memctl.cli.commands.memories import AsOfOpt
from memctl.cli.inputs import read_text, unit_interval
from memctl.cli.render import emit, info, memory_rows, memory_table
from memctl.errors import EXIT_NO_MATCH, UsageError

FORMATS = ("prompt", "json", "table")


@app.command()
def recall(
    ctx: typer.Context,
    message: Annotated[str, typer.Argument(help="The message the agent is answering ('-' stdin, '@FILE').")],
    history: Annotated[
        Path | None, typer.Option("--history", help="Transcript of the conversation so far (used by --query-prep).")
    ] = None,
    output_format: Annotated[
        str, typer.Option("--format", help="prompt (the block to inject), json or table.")
    ] = "prompt",
    query_prep: Annotated[
        bool,
        typer.Option("--query-prep", help="Let the utility model write the search query from the message and history."),
    ] = False,
    post_filter: Annotated[
        bool,
        typer.Option("--post-filter", help="Let the utility model drop results that do not help with the message."),
    ] = False,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            "-t",
            min=0.0,
            max=1.0,
            callback=unit_interval,
            help="Minimum relevance [config search_threshold].",
        ),
    ] = None,
    as_of: AsOfOpt = None,
) -> None:
    """Recall memories and solutions for MESSAGE, rendered for an agent's prompt. Exit 3 if none."""
    from memctl.llm import UtilityModel
    from memctl.memorize.transcripts import read_transcript
    from memctl.recall import recall as run_recall
    from memctl.recall import render_prompt
    from memctl.store.validity import parse_moment

    st = state(ctx)
    if output_format not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, not {output_format!r}")
    text = read_text(message, "message", limit=st.text_limit())
    with st.open_store() as store:
        past = read_transcript(history) if history else None
        llm = UtilityModel(store.config) if (query_prep or post_filter) else None
        result = run_recall(
            store,
            text,
            past,
            llm=llm,
            query_prep=query_prep,
            post_filter=post_filter,
            threshold=threshold,
            as_of=parse_moment(as_of) if as_of is not None else None,
        )
        if not result.empty and store.config["track_access"]:  # a use: the memory's importance stops decaying
            store.touch([h.id for h in [*result.memories, *result.solutions]])
    for note in result.notes:
        info(st, f"memctl: {note}")
    if st.json or output_format == "json":
        st.json = True
        emit(st, {"subdir": st.subdir, **result.to_dict()})
    elif output_format == "prompt":
        sys.stdout.write(render_prompt(result))
    elif not sys.stdout.isatty():  # one tab-separated record set for pipes; the area column tells them apart
        emit(st, {}, lambda c: c.print(memory_rows([*result.memories, *result.solutions], score=True)))
    else:
        emit(
            st,
            {},
            lambda c: [
                c.print(memory_table(hits, score=True, title=title))
                for title, hits in (("memories", result.memories), ("solutions", result.solutions))
                if hits
            ],
        )
    if result.empty:
        raise typer.Exit(EXIT_NO_MATCH)
