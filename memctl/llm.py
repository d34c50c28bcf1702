"""The utility model: litellm (or OpenAI SDK) calls with timeouts and retries, prompt files, tolerant JSON parsing.

Prompts live in `prompts/` as `<name>.sys.md` (system) and `<name>.msg.md` (user message) with
`$placeholders` (string.Template: JSON examples in prompts keep their braces). litellm is imported
on the first call only (~3 s), with its cost map read locally and telemetry off.

Some chat formats have no system role and silently drop the system message (llama.cpp's `gemma`
format does), so the model never sees its instructions: `utility_fold_system` puts the system text at
the top of the first user turn instead (`auto`: for model names known to need it).

`utility_client: auto` sends calls for an `openai/...` model with a `utility_api_base` (a local
OpenAI-compatible server) through the OpenAI SDK, one kept-open connection, without litellm's per-call
work; every other model goes through litellm.

Timeouts: one call waits at most `utility_timeout` seconds and is tried `1 + utility_retries` times in
all. litellm's and the OpenAI client's own retries are turned off (they used to multiply ours: each
attempt took about twice the timeout). While a call is waiting on a terminal, a line on stderr says so.
"""

from __future__ import annotations

import os
import re
import string
import sys
import threading
import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.errors import ConfigError, MemctlError

if TYPE_CHECKING:
    from memctl.config import Config

CompletionFn = Callable[[list[dict[str, str]]], str]
FOLD_CHOICES = ("auto", "always", "never")
CLIENT_CHOICES = ("auto", "litellm", "openai")
# Model names whose usual chat format has no system role (the system message is dropped or refused).
_NO_SYSTEM_ROLE = re.compile(r"gemma", re.IGNORECASE)
_WAIT_LINE_AFTER = 2.0  # seconds before the waiting line appears (fast models never show it)


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


def fold_system(setting: Any, model: str | None) -> bool:
    """Whether the system prompt goes into the first user turn (utility_fold_system)."""
    value = str(setting).strip().lower()
    if value not in FOLD_CHOICES:
        raise ConfigError(
            f"utility_fold_system must be one of {', '.join(FOLD_CHOICES)}, not {setting!r}",
            hint="memctl config set utility_fold_system auto",
        )
    if value == "auto":
        return bool(model and _NO_SYSTEM_ROLE.search(model))
    return value == "always"


def client_for(setting: Any, model: str | None, api_base: str | None) -> str:
    """The client of the utility model calls (utility_client): `auto` takes the OpenAI SDK straight to
    an OpenAI-compatible server (`openai/...` model with utility_api_base: llama.cpp, vLLM, Ollama's
    /v1) and litellm for everything else. litellm costs ~50 ms of its own per call (bench/README.md,
    memorize overhead), and memorize makes two calls per candidate."""
    value = str(setting).strip().lower()
    if value not in CLIENT_CHOICES:
        raise ConfigError(
            f"utility_client must be one of {', '.join(CLIENT_CHOICES)}, not {setting!r}",
            hint="memctl config set utility_client auto",
        )
    if value == "auto":
        return "openai" if model and model.startswith("openai/") and api_base else "litellm"
    return value


def chat_messages(system: str, message: str, *, fold: bool) -> list[dict[str, str]]:
    """The messages of one call: a system turn and a user turn, or one user turn holding both."""
    if not system.strip():
        return [{"role": "user", "content": message}]
    if fold:
        return [{"role": "user", "content": f"{system.rstrip()}\n\n{message}"}]
    return [{"role": "system", "content": system}, {"role": "user", "content": message}]


class WaitingLine:
    """A line on stderr (a terminal only) while a call waits: "memctl: waiting for MODEL (12 s, try 1/2)"."""

    def __init__(self, model: str, label: str, stream: Any = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.model, self.label = model, label
        self.done = threading.Event()
        self.shown = False
        self.thread: threading.Thread | None = None

    def __enter__(self) -> WaitingLine:
        if _is_terminal(self.stream):
            self.thread = threading.Thread(target=self._run, daemon=True)
            self.thread.start()
        return self

    def _run(self) -> None:
        started = time.monotonic()
        while not self.done.wait(_WAIT_LINE_AFTER if not self.shown else 1.0):
            self.shown = True
            self.stream.write(
                f"\rmemctl: waiting for the utility model {self.model} "
                f"({time.monotonic() - started:.0f} s{self.label})\x1b[K"
            )
            self.stream.flush()

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join()
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


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
        self._openai: Any = None
        if completion is None and not config["utility_model"]:
            raise NoUtilityModelError(
                "this command needs a utility model and none is configured",
                hint="set utility_model (e.g. `MEMCTL_UTILITY_MODEL=openai/gpt-4o-mini`, or in config.yaml)",
            )

    @property
    def name(self) -> str:
        return str(self.config["utility_model"] or "injected")

    @property
    def folds_system(self) -> bool:
        return fold_system(self.config.get("utility_fold_system", "auto"), self.config["utility_model"])

    def chat(self, system: str, message: str) -> str:
        messages = chat_messages(system, message, fold=self.folds_system)
        if self._completion is not None:
            try:
                return self._completion(messages)
            except MemctlError:
                raise
            except Exception as exc:  # noqa: BLE001 - an injected function may fail any way
                raise LLMError(f"utility model call failed: {exc}") from exc
        return self._litellm(messages)

    @property
    def client(self) -> str:
        """`openai` (the OpenAI SDK, straight to an OpenAI-compatible server) or `litellm` (utility_client)."""
        return client_for(
            self.config.get("utility_client", "auto"), self.config["utility_model"], self.config["utility_api_base"]
        )

    def _api_key(self) -> str | None:
        key_env = self.config["utility_api_key_env"]
        api_key = os.environ.get(key_env) if key_env else None
        if key_env and not api_key:
            raise LLMError(
                f"environment variable {key_env} (utility_api_key_env) is not set", hint=f"export {key_env}=<your key>"
            )
        return api_key

    def _litellm(self, messages: list[dict[str, str]]) -> str:
        api_key = self._api_key()
        send = self._openai_sender(api_key) if self.client == "openai" else self._litellm_sender(api_key)
        attempts = 1 + max(0, int(self.config["utility_retries"]))
        for attempt in range(1, attempts + 1):
            label = f", try {attempt}/{attempts}" if attempts > 1 else ""
            try:
                with WaitingLine(self.name, label):
                    response = send(messages)
                break
            except Exception as exc:  # noqa: BLE001 - litellm raises many provider-specific types
                if attempt == attempts or _not_worth_retrying(exc):
                    tries = f" (after {attempt} tries)" if attempt > 1 else ""
                    raise LLMError(
                        f"utility model {self.name!r} failed{tries}: {type(exc).__name__}: {_first_line(exc)}"
                    ) from exc
        content = response.choices[0].message.content if response.choices else None
        if not content:
            raise LLMError(f"utility model {self.name!r} returned an empty reply")
        return str(content)

    def _litellm_sender(self, api_key: str | None) -> Callable[[list[dict[str, str]]], Any]:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.telemetry = False
        litellm.suppress_debug_info = True
        return lambda messages: litellm.completion(
            model=self.config["utility_model"],
            messages=messages,
            api_base=self.config["utility_api_base"],
            api_key=api_key,
            timeout=float(self.config["utility_timeout"]),
            num_retries=0,
            max_retries=0,  # ours only: theirs multiplied the wait
            temperature=float(self.config["utility_temperature"]),
            max_tokens=int(self.config["utility_max_tokens"]),
        )

    def _openai_sender(self, api_key: str | None) -> Callable[[list[dict[str, str]]], Any]:
        """One OpenAI SDK client per model object: its connection is kept open between calls."""
        if self._openai is None:
            import openai

            base = self.config["utility_api_base"]
            # A local OpenAI-compatible server usually wants no key, but the SDK insists on one.
            key = api_key or os.environ.get("OPENAI_API_KEY") or ("unused" if base else None)
            try:
                self._openai = openai.OpenAI(
                    base_url=base,
                    api_key=key,
                    max_retries=0,  # ours only
                    timeout=float(self.config["utility_timeout"]),
                )
            except openai.OpenAIError as exc:
                raise LLMError(
                    f"utility model {self.name!r}: {_first_line(exc)}",
                    hint="set utility_api_key_env, or utility_client: litellm",
                ) from exc
        client = self._openai
        model = str(self.config["utility_model"]).removeprefix("openai/")
        return lambda messages: client.chat.completions.create(
            model=model,
            messages=messages,  # type: ignore[arg-type]
            temperature=float(self.config["utility_temperature"]),
            max_tokens=int(self.config["utility_max_tokens"]),
        )

    def ask(self, prompt: str, **values: Any) -> str:
        """Render prompt files `prompt` with values and return the reply text."""
        system, message = load_prompt(prompt)
        return self.chat(render(system, **values), render(message, **values))

    def ask_json(self, prompt: str, **values: Any) -> Any:
        """Like ask, parsed tolerantly; raises LLMError when the reply holds no JSON, or when it echoes the
        prompt (a small local model repeating its instructions: the `[]` of "answer [] when nothing
        qualifies" is no answer)."""
        system, message = load_prompt(prompt)
        system, message = render(system, **values), render(message, **values)
        reply = self.chat(system, message)
        echo = echoed_prompt(reply, (system, message), _template_lines(prompt))
        if echo:
            raise LLMError(
                f"utility model {self.name!r} echoed the prompt instead of answering ({echo})",
                hint="use a larger utility model, or check its chat template (utility_fold_system)",
            )
        parsed = parse_json(reply)
        if parsed is None:
            raise LLMError(f"utility model reply is not JSON: {reply[:200]!r}")
        return parsed


# A line of a prompt template counts for the echo test when it has this many characters of its own.
_ECHO_LINE_CHARS = 24
_ECHO_CONTEXT = 30  # characters of reply text before a JSON bracket that, found in the prompt, make it quoted


def _squeeze(text: str) -> str:
    return " ".join(text.split()).casefold()


@lru_cache(maxsize=64)
def _template_lines(name: str) -> tuple[str, ...]:
    """The instruction lines of prompt `name`: its own text, not the values put in (a transcript may be quoted
    back in a fair answer, the instructions never are)."""
    lines = []
    for part in load_prompt(name):
        for line in part.splitlines():
            text = _squeeze(line)
            if "$" not in text and len(text) >= _ECHO_LINE_CHARS:
                lines.append(text)
    return tuple(dict.fromkeys(lines))


def echoed_prompt(reply: str, prompt: Sequence[str], instructions: Sequence[str]) -> str | None:
    """Why `reply` is an echo of the prompt rather than an answer, or None.

    An echo repeats at least two of the prompt's instruction lines (or its only one), or the JSON a tolerant
    parse would take from it sits in text the prompt holds (the `[]` of "answer [] when nothing qualifies")."""
    text = _squeeze(reply or "")
    found = sum(1 for line in instructions if line in text)
    if instructions and found >= min(2, len(instructions)):
        return f"it repeats {found} of the prompt's {len(instructions)} instruction lines"
    whole = _squeeze("\n".join(prompt))
    stripped = (reply or "").strip()
    for match in re.finditer(r"[\[{]", stripped):
        if match.start() == 0:
            return None  # the reply starts with its JSON: an answer, whatever it says
        before = stripped[max(0, match.start() - _ECHO_CONTEXT) : match.start()]
        quoted = _squeeze(before + stripped[match.start() : match.start() + 2])
        if len(quoted) >= 12 and quoted in whole:
            return f"its JSON {stripped[match.start() : match.start() + 2]!r} is the prompt's own text"
        return None  # only the first bracket is where parse_json starts
    return None


def _not_worth_retrying(exc: Exception) -> bool:
    """Errors a second try cannot fix: a wrong key, model name or request."""
    return type(exc).__name__ in (
        "AuthenticationError",
        "NotFoundError",
        "BadRequestError",
        "PermissionDeniedError",
        "UnsupportedParamsError",
        "ContextWindowExceededError",
    )


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def numbered(items: Sequence[str]) -> str:
    """Items as a numbered list for prompts ("0. first", "1. second", ...)."""
    return "\n".join(f"{i}. {' '.join(text.split())}" for i, text in enumerate(items))
