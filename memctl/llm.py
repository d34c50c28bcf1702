"""The utility model: litellm calls with timeouts and retries, prompt files, tolerant JSON parsing.

Prompts live in `prompts/` as `<name>.sys.md` (system) and `<name>.msg.md` (user message) with
`$placeholders` (string.Template: JSON examples in prompts keep their braces). litellm is imported
on the first call only (~3 s), with its cost map read locally and telemetry off.
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.errors import ConfigError, MemctlError

if TYPE_CHECKING:
    from memctl.config import Config

CompletionFn = Callable[[list[dict[str, str]]], str]


class LLMError(MemctlError):
    """The utility model failed, timed out or answered with nothing usable."""


class NoUtilityModelError(ConfigError):
    """A command needs the utility model and none is configured."""


def prompts_dir() -> Path:
    from memctl.config import resource_path

    return resource_path("prompts")


@lru_cache(maxsize=64)
def load_prompt(name: str) -> tuple[str, str]:
    """(system, message) templates of prompt `name`; a missing file is an empty template."""
    if not re.fullmatch(r"[a-z0-9_.-]+", name):
        raise ConfigError(f"bad prompt name {name!r}")
    folder = prompts_dir()
    parts = []
    for suffix in ("sys", "msg"):
        path = folder / f"{name}.{suffix}.md"
        parts.append(path.read_text(encoding="utf-8") if path.is_file() else "")
    if not any(parts):
        raise ConfigError(f"prompt {name!r} not found in {folder}")
    return parts[0], parts[1]


@lru_cache(maxsize=64)
def load_template(name: str) -> str:
    """A rendering template `prompts/<name>.md` (output formats, not model prompts)."""
    if not re.fullmatch(r"[a-z0-9_.-]+", name):
        raise ConfigError(f"bad template name {name!r}")
    path = prompts_dir() / f"{name}.md"
    if not path.is_file():
        raise ConfigError(f"template {name!r} not found in {prompts_dir()}")
    return path.read_text(encoding="utf-8")


def render(template: str, **values: Any) -> str:
    return string.Template(template).safe_substitute({k: str(v) for k, v in values.items()})


def parse_json(text: str) -> Any:
    """JSON from a model reply: code fences, trailing commas, prose around it are tolerated.

    Returns None when nothing JSON-like can be recovered.
    """
    if text is None:
        return None
    import json

    stripped = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", stripped, flags=re.DOTALL)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    start = min((i for i in (stripped.find("{"), stripped.find("[")) if i >= 0), default=-1)
    if start < 0:
        return None
    import json_repair

    try:
        value = json_repair.loads(stripped[start:])
    except Exception:  # noqa: BLE001 - the repairer can raise on hopeless input
        return None
    return value if value not in ("", None) else None


class UtilityModel:
    """Chat completions against the configured utility model (or an injected function, for tests)."""

    def __init__(self, config: Config, completion: CompletionFn | None = None) -> None:
        self.config = config
        self._completion = completion
        if completion is None and not config["utility_model"]:
            raise NoUtilityModelError(
                "this command needs a utility model and none is configured",
                hint="set utility_model (e.g. `MEMCTL_UTILITY_MODEL=openai/gpt-4o-mini`, or in config.yaml)",
            )

    @property
    def name(self) -> str:
        return str(self.config["utility_model"] or "injected")

    def chat(self, system: str, message: str) -> str:
        messages = ([{"role": "system", "content": system}] if system.strip() else []) + [
            {"role": "user", "content": message}]
        if self._completion is not None:
            try:
                return self._completion(messages)
            except MemctlError:
                raise
            except Exception as exc:  # noqa: BLE001 - an injected function may fail any way
                raise LLMError(f"utility model call failed: {exc}") from exc
        return self._litellm(messages)

    def _litellm(self, messages: list[dict[str, str]]) -> str:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.telemetry = False
        litellm.suppress_debug_info = True
        key_env = self.config["utility_api_key_env"]
        api_key = os.environ.get(key_env) if key_env else None
        if key_env and not api_key:
            raise LLMError(f"environment variable {key_env} (utility_api_key_env) is not set",
                           hint=f"export {key_env}=<your key>")
        try:
            response = litellm.completion(
                model=self.config["utility_model"], messages=messages, api_base=self.config["utility_api_base"],
                api_key=api_key, timeout=float(self.config["utility_timeout"]),
                num_retries=int(self.config["utility_retries"]),
                temperature=float(self.config["utility_temperature"]),
                max_tokens=int(self.config["utility_max_tokens"]),
            )
        except Exception as exc:  # noqa: BLE001 - litellm raises many provider-specific types
            raise LLMError(f"utility model {self.name!r} failed: {type(exc).__name__}: {exc}") from exc
        content = response.choices[0].message.content if response.choices else None
        if not content:
            raise LLMError(f"utility model {self.name!r} returned an empty reply")
        return str(content)

    def ask(self, prompt: str, **values: Any) -> str:
        """Render prompt files `prompt` with values and return the reply text."""
        system, message = load_prompt(prompt)
        return self.chat(render(system, **values), render(message, **values))

    def ask_json(self, prompt: str, **values: Any) -> Any:
        """Like ask, parsed tolerantly; raises LLMError when the reply holds no JSON."""
        reply = self.ask(prompt, **values)
        parsed = parse_json(reply)
        if parsed is None:
            raise LLMError(f"utility model reply is not JSON: {reply[:200]!r}")
        return parsed


def numbered(items: Sequence[str]) -> str:
    """Items as a numbered list for prompts ("0. first", "1. second", ...)."""
    return "\n".join(f"{i}. {' '.join(text.split())}" for i, text in enumerate(items))
