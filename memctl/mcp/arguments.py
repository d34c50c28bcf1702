"""Tool arguments checked strictly, and refused in memctl's words.

The SDK builds each tool's argument model from its signature and ignores names it does not know;
pydantic reads `NaN` and `Infinity` as floats (and a float range check lets NaN through), and its
error text is written for Python programmers (`[type=..., input_value=...]`, links to its docs).
Here every tool's model forbids unknown names and non-finite numbers, and a refusal reads like
every other memctl tool error: `UsageError: <tool>: <argument>: <what is wrong> (hint: ...)`.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import ConfigDict, ValidationError, model_validator


def _finite(value: Any, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: must be a finite number (not NaN or Infinity)")
    if isinstance(value, dict):
        for key, item in value.items():
            _finite(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _finite(item, f"{where}[{i}]")


def strict_model(model: type[Any]) -> type[Any]:
    """`model` refusing unknown argument names and NaN/Infinity anywhere (also inside metadata)."""

    class Strict(model):  # type: ignore[misc, valid-type]
        model_config = ConfigDict(**{**model.model_config, "extra": "forbid", "allow_inf_nan": False})

        @model_validator(mode="after")
        def _no_non_finite(self) -> Any:
            for name in type(self).model_fields:
                _finite(getattr(self, name), name)
            return self

    Strict.__name__ = Strict.__qualname__ = model.__name__
    return Strict


def strict_tool_arguments(server: Any) -> None:
    """Every registered tool validates with its strict model; the published schema says so too
    (`additionalProperties: false`), so a client learns it before calling."""
    for tool in server._tool_manager.list_tools():
        tool.fn_metadata.arg_model = strict_model(tool.fn_metadata.arg_model)
        tool.parameters["additionalProperties"] = False


_WHAT = {
    "extra_forbidden": "is not an argument of this tool",
    "missing": "is required",
    "string_too_short": "must not be empty",
    "finite_number": "must be a finite number (not NaN or Infinity)",
}


def refusal(tool: str, error: ValidationError, known: list[str]) -> str:
    """One line per bad argument, in memctl's words; no pydantic type names, inputs or links."""
    lines = []
    for item in error.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        kind = item["type"]
        if kind == "value_error":  # raised by _finite: its message names the argument already
            lines.append(str(item["ctx"]["error"]) if "ctx" in item else item["msg"])
            continue
        what = _WHAT.get(kind) or _bound(item) or item["msg"][:1].lower() + item["msg"][1:]
        lines.append(f"{where}: {what}")
    hint = f"the arguments of {tool} are: {', '.join(known)}" if known else None
    return f"UsageError: {tool}: {'; '.join(dict.fromkeys(lines))}" + (f" (hint: {hint})" if hint else "")


def _bound(item: Any) -> str | None:
    ctx = item.get("ctx") or {}
    for key, words in (("ge", "at least"), ("gt", "more than"), ("le", "at most"), ("lt", "less than")):
        if key in ctx:
            return f"must be {words} {ctx[key]}"
    return None
