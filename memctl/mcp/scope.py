"""Which stores an MCP server may reach: one fixed subdir, or the ones `--allow-subdirs` names.

The root (or PostgreSQL database) is fixed when the server starts; a tool argument only ever
chooses a subdir, and only among the allowed ones. Names are validated like everywhere else
(`validate_subdir`: no `..`, no absolute paths) before any pattern is matched.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from memctl.config.paths import validate_subdir
from memctl.errors import UsageError

PATTERN_CHARS = "*?["


class ScopeError(UsageError):
    """A tool asked for a subdir this server does not serve."""


@dataclass(frozen=True)
class Scope:
    """`patterns` empty: only `default` is served. Otherwise subdirs matching one of them (fnmatch,
    case-sensitive; `*` also matches `/`, so `projects/*` is every project)."""

    default: str | None
    patterns: tuple[str, ...] = ()

    @classmethod
    def fixed(cls, subdir: str) -> Scope:
        return cls(validate_subdir(subdir))

    @classmethod
    def allowing(cls, spec: str, preferred: str | None = None) -> Scope:
        """From `--allow-subdirs a,b,projects/*`; the default is `preferred` when allowed, else the first
        plain name of the list, else none (tools must then name a subdir)."""
        patterns = tuple(p.strip() for p in spec.split(",") if p.strip())
        if not patterns:
            raise UsageError("--allow-subdirs is empty", hint="e.g. --allow-subdirs 'default,projects/*'")
        for pattern in patterns:
            if not any(ch in pattern for ch in PATTERN_CHARS):
                validate_subdir(pattern)
            elif ".." in pattern or pattern.startswith("/") or "\\" in pattern:
                raise UsageError(
                    f"--allow-subdirs pattern {pattern!r} must stay below the root",
                    hint="patterns look like 'projects/*' or 'agent-*'",
                )
        scope = cls(None, patterns)
        if preferred is not None and scope.allows(preferred):
            return cls(preferred, patterns)
        plain = next((p for p in patterns if not any(ch in p for ch in PATTERN_CHARS)), None)
        return cls(plain, patterns)

    def allows(self, subdir: str) -> bool:
        if not self.patterns:
            return subdir == self.default
        return any(fnmatchcase(subdir, p) for p in self.patterns)

    @property
    def literal(self) -> list[str]:
        """The subdirs named outright (listable as resources)."""
        names = [p for p in self.patterns if not any(ch in p for ch in PATTERN_CHARS)]
        if self.default is not None and self.default not in names:
            names.insert(0, self.default)
        return names

    @property
    def has_patterns(self) -> bool:
        return any(any(ch in p for ch in PATTERN_CHARS) for p in self.patterns)

    def describe(self) -> str:
        if not self.patterns:
            return f"only {self.default!r}"
        return ", ".join(repr(p) for p in self.patterns) + (f" (default {self.default!r})" if self.default else "")

    def resolve(self, subdir: str | None) -> str:
        """The subdir a tool call works on, or ScopeError naming what this server serves."""
        if subdir is None or subdir == "":
            if self.default is None:
                raise ScopeError(
                    "this server serves several stores and has no default: pass `subdir`",
                    hint=f"allowed: {self.describe()}",
                )
            return self.default
        name = validate_subdir(subdir)
        if not self.allows(name):
            raise ScopeError(
                f"subdir {name!r} is outside this server's scope",
                hint=f"this server serves {self.describe()}; start it with --allow-subdirs to serve more",
            )
        return name
