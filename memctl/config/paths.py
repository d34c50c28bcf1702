"""Where stores live: the root folder and validated subdir names."""

from __future__ import annotations

import os
import re
from pathlib import Path

from memctl.errors import UsageError

DEFAULT_SUBDIR = "default"
STORE_MARKER = "memories.sqlite"
# One path segment: starts with a letter or digit, then letters, digits, '.', '_' or '-'.
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def default_root() -> Path:
    """--root beats MEMCTL_HOME beats the platform data dir."""
    if os.environ.get("MEMCTL_HOME"):
        return Path(os.environ["MEMCTL_HOME"]).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("memctl", appauthor=False))


def resolve_root(root: str | os.PathLike[str] | None) -> Path:
    return Path(root).expanduser() if root is not None else default_root()


def validate_subdir(name: str) -> str:
    """Return the normalised subdir name or raise UsageError.

    Allowed: one segment (`default`, `agent-7`) or `projects/<segment>`. Refused: empty names,
    `..`, absolute paths, backslashes, and any other separator.
    """
    hint = "use a name like 'default', 'agent1' or 'projects/<name>'"
    if not isinstance(name, str) or not name:
        raise UsageError("subdir name is empty", hint=hint)
    if "\\" in name or name.startswith("/") or Path(name).is_absolute():
        raise UsageError(f"subdir name {name!r} must be relative", hint=hint)
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise UsageError(f"subdir name {name!r} must not contain '..', '.' or empty segments", hint=hint)
    if len(parts) == 2 and parts[0] == "projects":
        segments = parts[1:]
    elif len(parts) == 1:
        segments = parts
    else:
        raise UsageError(f"subdir name {name!r} has a separator outside 'projects/<name>'", hint=hint)
    for segment in segments:
        if not _SEGMENT.fullmatch(segment) or segment == "projects" and len(parts) == 1:
            raise UsageError(
                f"subdir name {name!r} is invalid: "
                + (
                    "'projects' alone is reserved (use 'projects/<name>')"
                    if segment == "projects"
                    else "a name starts with a letter or digit, then up to 63 letters, digits, '.', '_' or '-'"
                ),
                hint=hint,
            )
    return name


def store_dir(root: Path, subdir: str) -> Path:
    return root / validate_subdir(subdir)


def list_subdirs(root: Path) -> list[str]:
    """Existing stores under root, including projects/<name>, sorted."""
    found: list[str] = []
    if not root.is_dir():
        return found
    for child in sorted(root.iterdir()):
        if child.name.startswith(".") or not child.is_dir():
            continue
        if child.name == "projects":
            found += [f"projects/{p.name}" for p in sorted(child.iterdir()) if (p / STORE_MARKER).is_file()]
        elif (child / STORE_MARKER).is_file():
            found.append(child.name)
    return found
