"""Entry point: run the app and map every failure to a message and a documented exit code."""

from __future__ import annotations

import json
import sys

import click

from memctl.errors import EXIT_ERROR, EXIT_USAGE, MemctlError


def _report(message: str, kind: str, code: int, hint: str | None, as_json: bool) -> int:
    sys.stderr.write(f"memctl: error: {message}" + (f"\n  hint: {hint}" if hint else "") + "\n")
    if as_json:
        doc = {"error": {"type": kind, "message": message, "hint": hint, "exit_code": code}}
        sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
    return code


def main(argv: list[str] | None = None) -> int:
    from typer.main import get_command

    from memctl.cli.app import app

    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args[: _dashdash(args)]
    command = get_command(app)
    try:
        result = command.main(args=args, prog_name="memctl", standalone_mode=False)
    except MemctlError as exc:
        return _exit(_report(exc.message, type(exc).__name__, exc.exit_code, exc.hint, as_json))
    except click.exceptions.Abort:
        return _exit(_report("aborted, nothing was changed", "Aborted", EXIT_ERROR, None, as_json))
    except click.UsageError as exc:
        hint = exc.ctx.get_usage() if exc.ctx else None
        return _exit(_report(exc.format_message(), "UsageError", EXIT_USAGE, hint, as_json))
    except click.ClickException as exc:
        return _exit(_report(exc.format_message(), "Error", exc.exit_code, None, as_json))
    except KeyboardInterrupt:
        return _exit(_report("interrupted; committed changes are kept", "Interrupted", 130, None, as_json))
    except BrokenPipeError:
        return _exit(0)
    return _exit(result if isinstance(result, int) else 0)


def _dashdash(args: list[str]) -> int:
    return args.index("--") if "--" in args else len(args)


def _exit(code: int) -> int:
    sys.stdout.flush()
    return code


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
