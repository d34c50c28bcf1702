"""Reading back and editing the configuration layers (`memctl config show/get/set/path`).

`set_value` edits one key of a YAML file in place: the key's line (and its block continuation)
is replaced or appended, so other keys and comment lines stay as they were. The result is
parsed and validated before it is written atomically; a file memctl cannot edit line by line
(flow mappings, odd layouts) is rewritten from its parsed content — every key kept, comments lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memctl.config import (
    ENV_PREFIX,
    INTERNAL,
    RETIRED,
    Config,
    _read_yaml,
    check_value,
    defaults,
    resource_path,
    user_config_path,
    yaml_load,
)
from memctl.errors import ConfigError, UsageError

SCOPES = ("user", "store")
STORE_CONFIG = "config.yaml"


def scope_path(scope: str, store_folder: Path) -> Path:
    if scope not in SCOPES:
        raise UsageError(f"--scope must be user or store, not {scope!r}")
    return user_config_path() if scope == "user" else store_folder / STORE_CONFIG


def config_paths(store_folder: Path) -> dict[str, str]:
    return {
        "defaults": str(resource_path("default_config.yaml")),
        "user": str(user_config_path()),
        "store": str(store_folder / STORE_CONFIG),
    }


@dataclass
class Setting:
    key: str
    value: Any
    source: str  # default, a file path, env MEMCTL_<KEY>, override

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source}


def settings(config: Config, effective: bool = True) -> list[Setting]:
    """Every key (effective) or only those some layer above the defaults sets, with where each value came from."""
    rows = []
    for key in defaults():
        source = config.sources.get(key, "default")
        if source == "env":
            source = f"env {ENV_PREFIX}{key.upper()}"
        if effective or source != "default":
            rows.append(Setting(key, config.values.get(key), source))
    return rows


def parse_value(key: str, raw: str) -> Any:
    """A command-line value read as YAML (so 5, 0.8, true, null, [a, b] keep their types), then checked."""
    import yaml

    if key in defaults() and isinstance(defaults()[key], str):
        value: Any = raw  # a string key keeps the raw text ("123" stays a string)
    else:
        try:
            value = yaml_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            value = raw
    return check_value(key, value, f"config set {key}")


def set_value(path: Path, key: str, value: Any) -> Any:
    """Set `key` in the YAML file at `path` (created if missing); return the previous value (None if unset)."""
    import yaml

    from memctl.files import atomic_write_bytes

    value = check_value(key, value, f"config set {key}")
    old_text = path.read_text(encoding="utf-8") if path.is_file() else ""
    old = _read_yaml(path) if path.is_file() else {}
    wanted = {**old, key: value}
    line = yaml.safe_dump(
        {key: value}, default_flow_style=False, allow_unicode=True, sort_keys=False, width=1 << 30
    ).rstrip("\n")
    new_text = _replace_key(old_text, key, line)
    try:
        parsed = yaml_load(new_text) or {}
    except yaml.YAMLError:
        parsed = None
    if parsed != wanted:
        new_text = yaml.safe_dump(wanted, allow_unicode=True, sort_keys=False)
    for name, item in wanted.items():
        if name not in RETIRED and name not in INTERNAL:  # those are warned about and skipped when read
            check_value(name, item, str(path))  # never write a file memctl would then refuse to read
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, new_text.encode("utf-8"))
    return old.get(key)


def _replace_key(text: str, key: str, line: str) -> str:
    """Swap the top-level `key:` line and its indented or '- ' continuation lines for `line`."""
    lines = text.splitlines()
    pattern = re.compile(rf"{re.escape(key)}\s*:(\s|$)")
    for i, current in enumerate(lines):
        if pattern.match(current):
            end = i + 1
            while end < len(lines) and lines[end][:1] in (" ", "\t", "-") and not lines[end].startswith("---"):
                end += 1
            lines[i:end] = [line]
            return "\n".join(lines) + "\n"
    if lines and lines[-1].strip() == "" and len(lines) > 1:
        lines.pop()
    return "\n".join([*lines, line]) + "\n"


def check_key(key: str) -> None:
    if key not in defaults():
        raise ConfigError(f"unknown config key {key!r}", hint="`memctl config show --effective` lists the keys")
