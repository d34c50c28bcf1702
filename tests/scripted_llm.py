"""A scripted utility model for the memorize/consolidate/behaviour tests: replies chosen per prompt."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from memctl.llm import load_prompt

PROMPTS = ("memorize_fragments", "memorize_solutions", "memorize_keywords", "consolidate", "behaviour_merge")

Reply = Any  # a str, an Exception to raise, or a callable(message_text) -> str | Exception


class Router:
    """Completion function: recognises which prompt is asked (by its system text) and replies from a
    per-prompt script (a list consumed in order, or one reply/callable used every time)."""

    def __init__(self, **scripts: Reply) -> None:
        unknown = set(scripts) - {p.split("_", 1)[-1] if p.startswith("memorize_") else p for p in PROMPTS}
        assert not unknown, f"unknown prompt script {unknown}"
        self.scripts = scripts
        self.calls: list[tuple[str, str]] = []
        self.folded: list[bool] = []
        self.systems = {load_prompt(p)[0].strip(): p for p in PROMPTS}

    def split(self, messages: list[dict[str, str]]) -> tuple[str, str, bool]:
        """(prompt name, user message, whether the system text was folded into the user turn)."""
        if messages[0]["role"] == "system":
            system = messages[0]["content"].strip()
            name = self.systems.get(system)
            assert name, f"unexpected prompt: {system[:80]!r}"
            return name, messages[-1]["content"], False
        content = messages[0]["content"]
        for system, name in self.systems.items():
            if content.startswith(system):
                return name, content[len(system) :].lstrip("\n"), True
        raise AssertionError(f"unexpected prompt: {content[:80]!r}")

    def kind(self, messages: list[dict[str, str]]) -> str:
        name = self.split(messages)[0]
        return name.split("_", 1)[-1] if name.startswith("memorize_") else name

    def __call__(self, messages: list[dict[str, str]]) -> str:
        kind = self.kind(messages)
        message = self.split(messages)[1]
        self.folded.append(self.split(messages)[2])
        self.calls.append((kind, message))
        script = self.scripts.get(kind, _DEFAULTS[kind])
        reply = script.pop(0) if isinstance(script, list) else script
        if callable(reply) and not isinstance(reply, Exception):
            reply = reply(message)
        if isinstance(reply, Exception):
            raise reply
        return reply if isinstance(reply, str) else json.dumps(reply)

    def count(self, kind: str) -> int:
        return sum(1 for k, _ in self.calls if k == kind)


_DEFAULTS: dict[str, Reply] = {
    "fragments": "[]",
    "solutions": "[]",
    "keywords": lambda message: json.dumps(message.split(":", 1)[-1].split()[:3]),
    "consolidate": '{"action": "keep_separate", "targets": [], "reason": "different"}',
    "behaviour_merge": "- rule",
}


def existing_memories(message: str) -> list[str]:
    """The numbered stored memories a consolidation prompt shows ("0. [0.93] text")."""
    block = message.split("(index. [score] text):", 1)[-1]
    found = re.findall(r"^(\d+)\. \[[0-9.]+\] (.*)$", block, flags=re.MULTILINE)
    return [text for _, text in sorted(found, key=lambda item: int(item[0]))]


def new_memory(message: str) -> str:
    return message.split(":\n", 1)[1].split("\n\nMost similar", 1)[0].strip()


def decide_from_updates(updates: list[dict[str, str]]) -> Callable[[str], str]:
    """Consolidation replies for a replay: `update` the stored old value when the new memory is its `new`."""

    def reply(message: str) -> str:
        candidate = new_memory(message)
        shown = existing_memories(message)
        for change in updates:
            if candidate in change["new"] and change["old"] in shown:
                return json.dumps(
                    {
                        "action": "update",
                        "targets": [shown.index(change["old"])],
                        "text": candidate,
                        "reason": "the value changed",
                    }
                )
        if candidate in shown:
            return json.dumps({"action": "skip", "targets": [shown.index(candidate)], "reason": "already stored"})
        return json.dumps({"action": "keep_separate", "targets": [], "reason": "a different fact"})

    return reply
