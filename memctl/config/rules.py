"""Ranges and choices of configuration values, checked wherever a value enters (file, env, `config set`).

A type check alone let `search_threshold: 2` or `search_limit: -5` through, and every later
command then failed far from the cause. Each rule names the accepted values so the error can
say what to write instead. Keys without a rule accept any value of their type.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# SQLite stores integers in 64 bits: a limit or page size above this overflows in the driver.
MAX_INT = 2**31 - 1


@dataclass(frozen=True)
class Range:
    low: float
    high: float
    low_open: bool = False

    def problem(self, value: Any) -> str | None:
        if isinstance(value, float) and math.isnan(value):
            return "is not a number"
        too_low = value <= self.low if self.low_open else value < self.low
        if too_low or value > self.high:
            opening = "(" if self.low_open else "["
            return f"must be in {opening}{_num(self.low)}, {_num(self.high)}]"
        return None


@dataclass(frozen=True)
class Choice:
    options: tuple[str, ...]

    def problem(self, value: Any) -> str | None:
        return None if value in self.options else f"must be one of {', '.join(self.options)}"


@dataclass(frozen=True)
class Limits:
    """A mapping of names to numbers, each within its own range (doctor's limits)."""

    entries: dict[str, Range]

    def problem(self, value: Any) -> str | None:
        for name, limit in value.items():
            if name not in self.entries:
                return f"has no figure {name!r} (figures: {', '.join(self.entries)})"
            if isinstance(limit, bool) or not isinstance(limit, int | float):
                return f"needs a number for {name!r}"
            problem = self.entries[name].problem(limit)
            if problem is not None:
                return f"{name} {problem}"
        return None


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


UNIT = Range(0.0, 1.0)
COUNT = Range(1, MAX_INT)
SECONDS = Range(0.0, 86_400.0, low_open=True)

# The figures `memctl doctor` can hold to a limit (memctl.review.doctor.LIMITS says which side).
DOCTOR_LIMITS = Limits(
    {
        "junk_share": UNIT,
        "duplicate_share": UNIT,
        "conflict_share": UNIT,
        "stale_share": UNIT,
        "never_recalled_share": UNIT,
        "pending": Range(0, MAX_INT),
        "recall_at_k": UNIT,
    }
)

RULES: dict[str, Range | Choice | Limits] = {
    "embedding_provider": Choice(("local", "litellm", "fake")),
    "embedding_backend": Choice(("auto", "onnx", "torch")),
    "embedding_batch_size": Range(1, 65_536),
    "memorize_pending": Choice(("review", "keep", "drop")),
    "search_threshold": UNIT,
    "search_limit": Range(1, 100_000),
    "search_mode": Choice(("hybrid", "dense", "keyword")),
    "recall_memories_max_search": Range(1, 10_000),
    "recall_memories_max_result": Range(1, 10_000),
    "recall_solutions_max_search": Range(1, 10_000),
    "recall_solutions_max_result": Range(1, 10_000),
    "recall_max_result": Range(1, 10_000),
    "recall_history_messages": Range(0, 100_000),
    "forget_threshold": UNIT,
    "forget_batch_size": Range(1, 1_000_000),
    "lock_timeout": Range(0.0, 86_400.0),
    "index_type": Choice(("auto", "flat", "ivf")),
    "index_ivf_min_size": COUNT,
    "index_nprobe": Range(1, 65_536),
    "index_checkpoint_every": COUNT,
    "import_batch_size": Range(1, 1_000_000),
    "list_page_size": Range(1, 1_000_000),
    "filter_max_length": Range(1, 1_000_000),
    "knowledge_chunk_size": Range(50, 10_000_000),
    "knowledge_chunk_overlap": Range(0, 10_000_000),
    "utility_timeout": SECONDS,
    "utility_retries": Range(0, 100),
    "utility_temperature": Range(0.0, 2.0),
    "utility_max_tokens": Range(1, 10_000_000),
    "utility_fold_system": Choice(("auto", "always", "never")),
    "utility_client": Choice(("auto", "litellm", "openai")),
    "prune_default_importance": UNIT,
    "importance_base": UNIT,
    "importance_keep_boost": UNIT,
    "importance_one_off_penalty": UNIT,
    "importance_half_life": Range(0.0, 1_000_000.0),
    "knowledge_importance": UNIT,
    "rank_importance_weight": UNIT,
    "rank_recency_half_life": Range(0.0, 1_000_000.0),
    "memorize_max_history_chars": COUNT,
    "replace_similarity_threshold": UNIT,
    "consolidation_threshold": UNIT,
    "consolidation_keyword_overlap": Range(0.0, 2.0),
    "consolidation_search_limit": Range(1, 10_000),
    "memorize_grounding_overlap": UNIT,
    "memorize_grounding_similarity": UNIT,
    "memorize_echo_similarity": UNIT,
    "doctor_duplicate_similarity": UNIT,
    "doctor_conflict_similarity": UNIT,
    "doctor_stale_below": UNIT,
    "doctor_never_recalled_days": Range(0.0, 1_000_000.0),
    "doctor_recall_k": Range(1, 10_000),
    "doctor_limits": DOCTOR_LIMITS,
}


def value_problem(key: str, value: Any) -> str | None:
    """What is wrong with `value` for `key` (already of the right type), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    rule = RULES.get(key)
    if rule is None or value is None:
        return None
    return rule.problem(value)


def cross_problems(values: dict[str, Any]) -> list[tuple[str, str]]:
    """Problems between keys: (key, message)."""
    problems = []
    size, overlap = values.get("knowledge_chunk_size"), values.get("knowledge_chunk_overlap")
    if isinstance(size, int) and isinstance(overlap, int) and overlap >= size:
        problems.append(
            ("knowledge_chunk_overlap", f"must be smaller than knowledge_chunk_size ({size}), got {overlap}")
        )
    return problems
