"""The records of `memctl doctor` that a store keeps (migration m010_doctor_runs on both backends).

A run's figures are one JSON document (memctl/review/doctor.py defines its keys, docs/doctor.md documents
them); the store keeps them as they are, so a later memctl adding a figure reads older runs unchanged.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

FINDING_KINDS = ("junk", "duplicate", "conflict", "stale")


@dataclass
class DoctorRun:
    """One kept run of `memctl doctor`: its number (increasing), when, and its figures."""

    run: int
    at: str
    figures: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "at": self.at, **self.figures}


@dataclass
class Finding:
    """One memory the latest doctor run found worth a look, and why."""

    kind: str  # one of FINDING_KINDS
    memory_id: str
    reason: str
    score: float | None = None  # junk: p(noise); duplicate/conflict: similarity; stale: effective importance
    related: list[str] = field(default_factory=list)  # the other memories of its group or pair
    run: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def figures_of(value: Any) -> dict[str, Any]:
    """A stored figures column (JSON text, or already a mapping from PostgreSQL's json) as a dict."""
    data = json.loads(value) if isinstance(value, str | bytes) else value
    return dict(data) if isinstance(data, dict) else {}


def related_of(value: Any) -> list[str]:
    data = json.loads(value) if isinstance(value, str | bytes) else value
    return [str(v) for v in data] if isinstance(data, list) else []
