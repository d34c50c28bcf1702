"""The command line: a Typer app that parses, opens the store, makes one core call and renders."""
