"""Entry point: run the app and map every failure to a message and a documented exit code."""

from __future__ import annotations

import json
import sqlite3
import sys

from memctl.errors import EXIT_ERROR, EXIT_USAGE, MemctlError


def _report(message: str, kind: str, code: int, hint: str | None, as_json: bool) -> int:
    try:
        sys.stderr.write(f"memctl: error: {message}" + (f"\n  hint: {hint}" if hint else "") + "\n")
        if as_json:
            doc = {"error": {"type": kind, "message": message, "hint": hint, "exit_code": code}}
            sys.stdout.write(json.dumps(doc) + "\n")  # ASCII: one line whatever the message holds
            sys.stdout.flush()
    except (OSError, ValueError):  # stdout is the full disk or a closed pipe: the exit code still tells
        pass
    return code


def main(argv: list[str] | None = None) -> int:
    import typer
    from typer.main import get_command

    from memctl.cli.app import app, command_name, empty_root, register

    args = list(sys.argv[1:] if argv is None else argv)
    register(command_name(args))
    as_json = "--json" in args[: _dashdash(args)]
    import memctl.cli.app as app_module

    app_module.JSON_REQUESTED = as_json
    command = get_command(app)
    if empty_root(args):
        return _exit(
            _report(
                "--root is empty",
                "UsageError",
                EXIT_USAGE,
                "name a folder, or leave --root out for the default",
                as_json,
            )
        )
    try:
        result = command.main(args=args, prog_name="memctl", standalone_mode=False)
    except MemctlError as exc:
        return _exit(_report(exc.message, type(exc).__name__, exc.exit_code, exc.hint, as_json))
    except typer.Abort:
        return _exit(_report("aborted, nothing was changed", "Aborted", EXIT_ERROR, None, as_json))
    except typer.Exit as exc:
        return _exit(exc.exit_code)
    except typer.TyperException as exc:  # typer's (vendored click) usage errors: bad option, missing argument
        code = getattr(exc, "exit_code", EXIT_USAGE)
        ctx = getattr(exc, "ctx", None)
        hint = ctx.get_usage() if ctx is not None and code == EXIT_USAGE else None
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        return _exit(_report(message, "UsageError" if code == EXIT_USAGE else "Error", code, hint, as_json))
    except KeyboardInterrupt:
        return _exit(_interrupted(args, as_json))
    except BrokenPipeError:
        return _exit(0)
    except (OSError, UnicodeError, OverflowError, RecursionError, MemoryError, sqlite3.Error) as exc:
        from memctl.cli.failures import describe

        failure = describe(exc)
        return _exit(_report(failure.message, failure.kind, failure.exit_code, failure.hint, as_json))
    if result == INTERRUPTED:  # typer turns Ctrl-C into a bare 130 (no command returns it): say so
        return _exit(_interrupted(args, as_json))
    return _exit(result if isinstance(result, int) else 0)


INTERRUPTED = 130  # 128 + SIGINT, as shells report it

# What to do after Ctrl-C, for commands whose work can be picked up again.
_RESUME = {
    "reindex": "run `memctl reindex` again: it continues after the last committed batch",
}


def _interrupted(args: list[str], as_json: bool) -> int:
    from memctl.cli.app import command_name

    hint = _RESUME.get(command_name(args) or "")
    return _report("interrupted; committed changes are kept", "Interrupted", INTERRUPTED, hint, as_json)


def _dashdash(args: list[str]) -> int:
    return args.index("--") if "--" in args else len(args)


def _exit(code: int) -> int:
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        return code or 1
    return code


def run() -> None:
    _exit_now(main())


def _exit_now(code: int) -> None:
    """Exit without the interpreter's teardown of every module (~90 ms after a search: the ONNX
    session, the vector index, numpy...). Everything memctl writes is committed and closed before
    main() returns; atexit handlers (libraries' flushes, thread joins) still run first."""
    import atexit
    import os

    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_handlers is None:  # not CPython: the ordinary exit
        sys.exit(code)
    run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`memctl list | head`) or a closed stream
            pass
    os._exit(code)


if __name__ == "__main__":
    run()
