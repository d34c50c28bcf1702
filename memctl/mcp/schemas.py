"""Tool schemas with their `$ref`s written out in place.

Pydantic publishes a nested model once under `$defs` and points at it with `$ref`. Some MCP clients
do not resolve references in tool schemas, and the SDK's own client, which validates every
structured result against its tool's output schema, spends about a third of that validation
following them (a 10-hit `memory_search` result: 1.0 ms with references, 0.69 ms inlined). memctl's
models are small and not recursive, so each schema is published self-contained.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 16  # deeper than any memctl model nests; a recursive model keeps its references past it


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with every local `#/$defs/...` reference replaced by a copy of its definition, and
    `$defs` dropped when nothing refers to it any more."""
    defs = schema.get("$defs", {})
    if not defs:
        return schema
    unresolved: list[str] = []
    out = _expand({k: v for k, v in schema.items() if k != "$defs"}, defs, 0, unresolved)
    if unresolved:  # a recursive model: its definitions stay for the references left in place
        out["$defs"] = defs
    return out


def _expand(node: Any, defs: dict[str, Any], depth: int, unresolved: list[str]) -> Any:
    if isinstance(node, list):
        return [_expand(item, defs, depth, unresolved) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs:
        if depth >= MAX_DEPTH:
            unresolved.append(ref)
            return node
        # Keywords beside the reference (a field's description) are kept over the definition's own.
        target = {**defs[ref[8:]], **{k: v for k, v in node.items() if k != "$ref"}}
        return _expand(target, defs, depth + 1, unresolved)
    return {key: _expand(value, defs, depth, unresolved) for key, value in node.items()}


def inline_tool_schemas(server: Any) -> None:
    """Every registered tool's input and output schema, self-contained (see the module docstring)."""
    for tool in server._tool_manager.list_tools():
        tool.parameters = inline_refs(tool.parameters)
        metadata = tool.fn_metadata
        if metadata.output_schema is not None:
            metadata.output_schema = inline_refs(metadata.output_schema)
