"""The quality gate: a deterministic filter between extracted candidates and the store (no LLM).

An extractor, however well prompted, proposes things that do not belong in long-term memory:
what happened in this session (agent actions, command output, a process id), what holds only
now (tonight's plan, a deadline with no date, a passing state), where things are on one machine
(localhost, ports, home folders), and things it made up or merely repeated from what memctl
itself recalled.

The gate keeps by default. A candidate is dropped only by a named rule (`memctl.gate_rules`)
whose precision was measured on the tune half of the labelled corpus at 0.97 or more: the
measurement and the list of rules allowed to drop live in `memctl/data/gate.json`, written by
`scripts/train_gate.py`. A rule that is often wrong is not used, however plausible it looks.
Grounding (is the candidate supported by what the user or a tool actually said?) needs the
transcript and is done by `Grounding` (`memctl.grounding`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from memctl.gate_rules import MAX_FRAGMENT_CHARS, MAX_SOLUTION_CHARS, RULES, Rule, rules_for
from memctl.grounding import (
    EmbedFn,
    Grounding,
    cjk_share,
    content_stems,
    key_entities,
    parse_recalled,
    recall_headings,
    split_recalled,
    stem,
)

__all__ = [
    "MAX_FRAGMENT_CHARS",
    "MAX_SOLUTION_CHARS",
    "REASONS",
    "EmbedFn",
    "Grounding",
    "Verdict",
    "check",
    "cjk_share",
    "content_stems",
    "enabled_rules",
    "gate",
    "key_entities",
    "parse_recalled",
    "recall_headings",
    "learned_gate_embed",
    "rule_reason",
    "split_recalled",
    "stem",
]

GATE_DATA = Path(__file__).with_name("data") / "gate.json"

# reason -> what it means (shown by `memctl memorize` and documented in the README).
REASONS: dict[str, str] = {rule.name: rule.meaning for rule in RULES if "fragments" in rule.areas}
REASONS.update({rule.name: rule.meaning for rule in RULES if rule.name not in REASONS})
REASONS["classifier"] = "the learned gate (memorize_gate: classifier) is confident it is noise"
REASONS["ungrounded"] = "not supported by anything the user or a tool said in the transcript"
REASONS["echo"] = "only restates a memory that memctl recalled into the conversation"


@cache
def gate_data() -> dict[str, Any]:
    """The tune-half measurement shipped with memctl (which rules may drop, per area)."""
    try:
        return json.loads(GATE_DATA.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def enabled_rules(area: str) -> list[Rule]:
    """The rules allowed to drop a candidate of `area`: measured precise enough on the tune half.
    Without the measurement file (a broken install) no form rule drops anything: the gate keeps."""
    allowed = set((gate_data().get("enabled") or {}).get(area) or ())
    return [rule for rule in rules_for(area) if rule.name in allowed]


@dataclass
class Verdict:
    text: str
    area: str
    reason: str | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.reason is None

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "area": self.area, "reason": self.reason, "detail": self.detail}


def _area(area: str) -> str:
    return "solutions" if area == "solutions" else "fragments"


def rule_reason(text: str, area: str = "fragments", rules: Sequence[Rule] | None = None) -> tuple[str, str] | None:
    """(reason, detail) of the first enabled rule `text` breaks, or None (keep)."""
    clean = " ".join(text.split())
    for rule in enabled_rules(_area(area)) if rules is None else rules:
        detail = rule.check(clean)
        if detail:
            return rule.name, detail
    return None


def learned_gate_embed(model: Any, embed: EmbedFn) -> EmbedFn | None:
    """`embed` when the learned gate can use it: a classifier is shipped and `model` (the embedder's
    ModelInfo) is the local model it was trained on; otherwise None (the rules decide)."""
    data = gate_data().get("classifier") or {}
    if not data.get("weights") or getattr(model, "provider", None) != "local":
        return None
    return embed if getattr(model, "model", None) == data.get("embedding_model") else None


def _learned_reason(text: str, embed: EmbedFn) -> tuple[str, str] | None:
    from memctl.gate_classifier import GateClassifier

    found = GateClassifier.load().reason(text, "fragments", embed)
    if found is None:
        return None
    named = rule_reason(text, "fragments")  # name the rule that agrees, when one does
    return (named[0], f"{named[1]}; {found[1]}") if named else found


def check(
    text: str,
    area: str = "fragments",
    grounding: Grounding | None = None,
    embed: EmbedFn | None = None,
    rules_too: bool = False,
) -> Verdict:
    """The verdict on one candidate: form rules first, then grounding and echo (with a transcript).
    With `embed` (see `learned_gate_embed`), the learned gate decides fragment candidates instead of
    the rules (the rules are among its inputs), or beside them with `rules_too` (either one drops);
    solutions always go through the rules."""
    if embed is not None and _area(area) == "fragments":
        found = (rule_reason(text, area) if rules_too else None) or _learned_reason(" ".join(text.split()), embed)
    else:
        found = rule_reason(text, area)
    if found is None and grounding is not None:
        found = grounding.check(text, _area(area))
    return Verdict(text, area, *(found or (None, "")))


def gate(
    texts: Sequence[str], area: str = "fragments", grounding: Grounding | None = None, embed: EmbedFn | None = None
) -> list[Verdict]:
    return [check(t, area, grounding, embed) for t in texts]
