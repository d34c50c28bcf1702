"""Layered configuration: defaults < user file < store file < MEMCTL_<KEY> env < explicit overrides.

Every user key and its default live in `default_config.yaml`; the type of a key is the type of its
default (or NULLABLE_TYPES for keys whose default is null). Unknown keys and wrong types are
errors that name the file and the key. Internal settings (memctl/config/internal.py) are read like
keys but only programs set them, through `overrides`; a file or variable naming one is warned about.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from memctl.config.internal import INTERNAL
from memctl.errors import ConfigError

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # memctl/
# Keys whose default is null still need a type.
NULLABLE_TYPES: dict[str, type] = {
    "embedding_api_base": str,
    "embedding_api_key_env": str,
    "utility_model": str,
    "utility_api_base": str,
    "utility_api_key_env": str,
    "store_url": str,
    "mcp_token": str,
    "search_threshold": float,
}
ENV_PREFIX = "MEMCTL_"
# Internal settings by variable, for benchmarks and tests that run the CLI (MEMCTL_INTERNAL_UTILITY_RETRIES=0).
INTERNAL_ENV_PREFIX = "MEMCTL_INTERNAL_"
OVERRIDE = "override"  # the source name of the programmatic layer (`overrides`)
# Environment variables with the prefix that are not configuration keys.
ENV_NOT_KEYS = {"MEMCTL_HOME", "MEMCTL_STORE", "MEMCTL_CONFIG", "MEMCTL_SUBDIR", "MEMCTL_CACHE_DIR"}
ENV_NOT_KEY_PREFIXES = ("MEMCTL_TEST_",)  # test switches, never configuration


def resource_path(name: str) -> Path:
    """A file shipped with memctl: inside the package when installed, at the repo top in a checkout."""
    for candidate in (PACKAGE_DIR / name, PACKAGE_DIR.parent / name):
        if candidate.exists():
            return candidate
    raise ConfigError(f"memctl resource {name!r} is missing", hint="reinstall memctl")


def yaml_load(text: str) -> Any:
    """`yaml.safe_load` through libyaml when PyYAML has it: ~10x faster than the pure-Python parser
    (reading default_config.yaml took 40 ms of every CLI call)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of key: value")
    return data


@lru_cache(maxsize=1)
def defaults() -> dict[str, Any]:
    """The shipped defaults: parsed once per version of the file, then read back as JSON from the
    user cache, so a CLI call with no config file of its own never imports PyYAML (~25 ms)."""
    import json

    path = resource_path("default_config.yaml")
    cached = _defaults_cache(path)
    if cached is not None:
        try:
            return dict(json.loads(cached.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            pass
    data = _read_yaml(path)
    if cached is not None and json.loads(json.dumps(data)) == data:  # plain JSON types only
        from memctl.files import atomic_write_bytes

        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(cached, json.dumps(data).encode())
        except OSError:
            pass  # a read-only cache: parse the YAML every time
    return data


def _defaults_cache(path: Path) -> Path | None:
    import hashlib

    from memctl.files import cache_root

    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        return None
    return cache_root() / "config" / f"default_config-{digest}.json"


# Keys of earlier releases: still read (an old config file loads), warned about once, and carried over to
# the key that replaced them or ignored. Each goes one release after it was retired.
_INTERNAL_SEARCH = "the search pipeline's settings are internal now (memctl/search/tuning.py)"
RETIRED: dict[str, tuple[str | None, str]] = {
    "hybrid_fusion": (None, _INTERNAL_SEARCH),
    "hybrid_candidates": (None, _INTERNAL_SEARCH),
    "hybrid_keyword_share": (None, _INTERNAL_SEARCH),
    "hybrid_drop_common_names": (None, _INTERNAL_SEARCH),
    "hybrid_named_candidates": (None, _INTERNAL_SEARCH),
    "hybrid_common_word_share": (None, _INTERNAL_SEARCH),
    "hybrid_metadata_boost": (None, _INTERNAL_SEARCH),
    "hybrid_neighbour_boost": (None, _INTERNAL_SEARCH),
    "hybrid_neighbour_window": (None, _INTERNAL_SEARCH),
    "hybrid_neighbour_keys": (None, _INTERNAL_SEARCH),
    "hybrid_rrf_k": (None, _INTERNAL_SEARCH),
    "hybrid_dense_weight": (None, _INTERNAL_SEARCH),
    "hybrid_keyword_weight": (None, _INTERNAL_SEARCH),
    "hybrid_keyword_gate": (None, _INTERNAL_SEARCH),
    "search_calibration": (None, _INTERNAL_SEARCH),
    "memorize_replace_threshold": (None, "merged with replace_similarity_threshold, an internal setting now"),
    "doctor_max_junk_share": ("doctor_limits.junk_share", "doctor's limits are one mapping"),
    "doctor_max_duplicate_share": ("doctor_limits.duplicate_share", "doctor's limits are one mapping"),
    "doctor_max_conflict_share": ("doctor_limits.conflict_share", "doctor's limits are one mapping"),
    "doctor_max_stale_share": ("doctor_limits.stale_share", "doctor's limits are one mapping"),
    "doctor_max_never_recalled_share": ("doctor_limits.never_recalled_share", "doctor's limits are one mapping"),
    "doctor_max_pending": ("doctor_limits.pending", "doctor's limits are one mapping"),
    "doctor_min_recall": ("doctor_limits.recall_at_k", "doctor's limits are one mapping"),
    "memorize_gate": (None, "the gate is one learned model now (keep, drop or pending): see memorize_pending"),
}
_warned: set[str] = set()


def retired(key: str, source: str) -> str | None:
    """The key that replaced a retired `key` (None: ignore it), after one warning on stderr."""
    replacement, why = RETIRED[key]
    if key not in _warned:
        _warned.add(key)
        then = f"read as {replacement!r}" if replacement else "ignored"
        print(f"memctl: {source}: config key {key!r} is retired ({why}); {then}", file=sys.stderr)
    return replacement


_INTERNAL_WHY = "an internal setting now, no longer configuration: memctl/config/internal.py"


def internal(key: str, source: str) -> None:
    """Warn once that `source` sets the internal setting `key` (then ignored)."""
    if key not in _warned:
        _warned.add(key)
        print(f"memctl: {source}: config key {key!r} is {_INTERNAL_WHY}; ignored", file=sys.stderr)


def _expected_type(key: str) -> type | None:
    default = defaults()[key] if key in defaults() else INTERNAL[key]
    return NULLABLE_TYPES.get(key) if default is None else type(default)


def check_value(key: str, value: Any, source: str, *, internal_ok: bool = False) -> Any:
    """Return `value` coerced to the key's type, or raise naming `source` and `key`. Internal settings are
    accepted only where `internal_ok` (from `overrides` and MEMCTL_INTERNAL_<KEY>)."""
    if key in RETIRED:
        replacement, why = RETIRED[key]
        raise ConfigError(
            f"{source}: config key {key!r} is retired ({why})",
            hint=f"set {replacement.split('.')[0]!r} instead" if replacement else "remove it from your config",
        )
    if key in INTERNAL and not internal_ok:
        raise ConfigError(f"{source}: config key {key!r} is {_INTERNAL_WHY}", hint="remove it from your config")
    if key not in defaults() and key not in INTERNAL:
        raise ConfigError(f"{source}: unknown config key {key!r}", hint="see `default_config.yaml` for the keys")
    expected = _expected_type(key)
    if value is None or expected is None:
        return value
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, bool) != (expected is bool) or not isinstance(value, expected):
        raise ConfigError(
            f"{source}: config key {key!r} must be {expected.__name__}, got {type(value).__name__} {value!r}"
        )
    from memctl.config.rules import value_problem

    problem = value_problem(key, value)
    if problem is not None:
        raise ConfigError(
            f"{source}: config key {key!r} {problem}, got {value!r}",
            hint=f"fix it there, or `memctl config set {key} VALUE`",
        )
    return value


def user_config_path() -> Path:
    if os.environ.get("MEMCTL_CONFIG"):
        return Path(os.environ["MEMCTL_CONFIG"]).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("memctl", appauthor=False)) / "config.yaml"


Layer = tuple[str, dict[str, Any], bool]  # (source, key: value, whether it may set internal settings)


def _env_layers(environ: Mapping[str, str]) -> list[Layer]:
    """One layer per MEMCTL_<KEY> variable, named after it (so an error names the variable)."""
    layers: list[Layer] = []
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name in ENV_NOT_KEYS or name.startswith(ENV_NOT_KEY_PREFIXES):
            continue
        import yaml  # only when a variable sets a key

        internal_ok = name.startswith(INTERNAL_ENV_PREFIX)
        key = name[len(INTERNAL_ENV_PREFIX if internal_ok else ENV_PREFIX) :].lower()
        if internal_ok and key not in INTERNAL:
            raise ConfigError(f"environment variable {name}: {key!r} is not an internal setting")
        try:
            value = yaml_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            value = raw
        if key in defaults() and _expected_type(key) is str and value is not None:
            value = raw  # a string key keeps the raw text ("123" stays a string)
        layers.append((f"environment variable {name}", {key: value}, internal_ok))
    return layers


@dataclass
class Config:
    """Effective settings plus where each value came from."""

    values: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


def load_config(
    store_dir: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    values = dict(defaults())
    sources = {key: "default" for key in values}
    layers: list[Layer] = []
    user_path = user_config_path()
    if user_path.is_file():
        layers.append((str(user_path), _read_yaml(user_path), False))
    elif os.environ.get("MEMCTL_CONFIG") and (environ is None or "MEMCTL_CONFIG" in environ):
        raise ConfigError(
            f"MEMCTL_CONFIG names {str(user_path)!r}, which is not a file",
            hint="create it (`memctl config set KEY VALUE` writes there), or unset MEMCTL_CONFIG",
        )
    if store_dir is not None and (store_dir / "config.yaml").is_file():
        layers.append((str(store_dir / "config.yaml"), _read_yaml(store_dir / "config.yaml"), False))
    layers += _env_layers(os.environ if environ is None else environ)
    layers.append((OVERRIDE, dict(overrides or {}), True))
    values.update(INTERNAL)
    sources.update({key: "internal" for key in INTERNAL})
    for source, layer, internal_ok in layers:
        for key, value in layer.items():
            _set(values, sources, key, value, source, internal_ok)
    _check_together(values, sources)
    return Config(values, sources)


def _set(values: dict[str, Any], sources: dict[str, str], key: str, value: Any, source: str, internal_ok: bool) -> None:
    """Set one key from one layer: a retired key as the key that replaced it (a dotted name: one entry of a
    mapping key); an internal setting only from a layer allowed to (else warned about and ignored)."""
    if key in RETIRED and (key := retired(key, source) or "") == "":
        return
    if key in INTERNAL and not internal_ok:
        internal(key, source)
        return
    if "." in key:
        parent, entry = key.split(".", 1)
        key, value = parent, {**values[parent], entry: value}
    values[key] = check_value(key, value, source, internal_ok=internal_ok)
    sources[key] = "env" if source.startswith("environment variable") else source


def _check_together(values: dict[str, Any], sources: dict[str, str]) -> None:
    from memctl.config.rules import cross_problems

    for key, problem in cross_problems(values):
        raise ConfigError(
            f"{sources.get(key, 'config')}: config key {key!r} {problem}", hint=f"`memctl config set {key} VALUE`"
        )
