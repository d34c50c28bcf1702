"""Behaviour rules of a sub-store, which an agent adds to its system prompt.

The store keeps them (an embedded store as `behaviour.md` in its folder, PostgreSQL as the subdir's
row of `memctl_behaviour`). A store without rules has the defaults (prompts/behaviour_default.md). `adjust` lets the
utility model merge one adjustment into the current rules; the result is normalised (no code
fences, no duplicate lines, no runs of blank lines) and written atomically. `edit` opens $EDITOR on
a copy and writes it back the same way. A failed or unusable model reply changes nothing.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.errors import MemctlError, UsageError
from memctl.llm import LLMError, UtilityModel, load_template

if TYPE_CHECKING:
    from memctl.store.base import StoreBase

MAX_RULES_CHARS = 20_000


@dataclass
class BehaviourResult:
    path: str  # where the rules are kept: the behaviour.md file, or the PostgreSQL store
    action: str
    rules: str
    changed: bool
    default: bool  # the store has no rules of its own: these are the default rules

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "action": self.action,
            "rules": self.rules,
            "changed": self.changed,
            "default": self.default,
        }


def default_rules() -> str:
    return normalise(load_template("behaviour_default"))


def read_rules(store: StoreBase) -> tuple[str, bool]:
    """(rules, whether they are the defaults because the store has none of its own)."""
    rules = store.read_behaviour()
    return (default_rules(), True) if rules is None else (rules, False)


def normalise(text: str) -> str:
    """No code fences, trailing spaces, repeated lines or runs of blank lines; one final newline."""
    lines: list[str] = []
    seen: set[str] = set()
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = raw.rstrip()
        if line.lstrip().startswith("```"):
            continue
        key = " ".join(line.split()).casefold()
        if key:
            if key in seen:
                continue
            seen.add(key)
        elif not lines or not lines[-1]:
            continue
        lines.append(line)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def show(store: StoreBase) -> BehaviourResult:
    rules, is_default = read_rules(store)
    return BehaviourResult(store.behaviour_location, "show", rules, False, is_default)


def _write(store: StoreBase, rules: str, action: str) -> BehaviourResult:
    """`changed` compares with the rules in effect (the defaults when the store has none of its own),
    so resetting default rules, or adjusting them to what they are, reports no change."""
    before, is_default = read_rules(store)
    if rules == before:  # nothing to write: the store keeps what it has (its own rules, or none)
        return BehaviourResult(store.behaviour_location, action, rules, False, is_default)
    store.write_behaviour(rules)
    return BehaviourResult(store.behaviour_location, action, rules, rules != before, False)


def adjust(store: StoreBase, adjustment: str, llm: UtilityModel) -> BehaviourResult:
    """Merge `adjustment` into the rules with the utility model; LLMError (nothing written) on failure."""
    adjustment = adjustment.strip()
    if not adjustment:
        raise UsageError(
            "the adjustment is empty", hint='say what to change, e.g. memctl behaviour adjust "Answer in German"'
        )
    current, _ = read_rules(store)
    reply = llm.ask("behaviour_merge", current=current.strip(), adjustment=adjustment)
    rules = normalise(reply)
    if not any(line.lstrip().startswith(("-", "*", "#")) or line.strip() for line in rules.splitlines()):
        raise LLMError("the utility model returned no rules; the behaviour rules were not changed")
    if len(rules) > MAX_RULES_CHARS:
        raise LLMError(
            f"the utility model returned {len(rules)} characters of rules; the behaviour rules were not changed"
        )
    return _write(store, rules, "adjust")


def reset(store: StoreBase) -> BehaviourResult:
    return _write(store, default_rules(), "reset")


def editor_command() -> list[str]:
    """$VISUAL or $EDITOR split into an argument list (never run through a shell); vi otherwise."""
    value = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if value is None:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):  # vi would draw into a pipe and wait forever
            raise UsageError(
                "no terminal and no editor set: `behaviour edit` needs one",
                hint="set EDITOR (e.g. EDITOR=nano), or use `memctl behaviour adjust TEXT`",
            )
        value = "vi"
    try:
        command = shlex.split(value)
    except ValueError as exc:
        raise UsageError(f"cannot parse the editor command {value!r}: {exc}", hint="set EDITOR to e.g. 'nano'") from exc
    if not command:
        raise UsageError("EDITOR is empty", hint="set EDITOR to e.g. 'nano'")
    return command


def edit(store: StoreBase) -> BehaviourResult:
    """Open the rules in the editor on a temporary copy; normalise and write back atomically."""
    current, is_default = read_rules(store)
    fd, name = tempfile.mkstemp(prefix="behaviour-", suffix=".md")  # private (0600), removed below
    temp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(current)
        command = editor_command()
        try:
            status = subprocess.run([*command, str(temp)], check=False).returncode  # noqa: S603 - list, no shell
        except OSError as exc:
            raise MemctlError(
                f"cannot start the editor {command[0]!r}: {exc}", hint="set EDITOR to an installed editor"
            ) from exc
        if status != 0:
            raise MemctlError(f"the editor exited with status {status}; the behaviour rules were not changed")
        edited = normalise(temp.read_text(encoding="utf-8"))
        if not edited.strip():
            raise MemctlError(
                "the edited rules are empty; the behaviour rules were not changed",
                hint="`memctl behaviour reset` restores the default rules",
            )
        if edited == normalise(current):
            return BehaviourResult(store.behaviour_location, "edit", current, False, is_default)
        return _write(store, edited, "edit")
    finally:
        temp.unlink(missing_ok=True)
