"""memctl.mcp.schemas: references written out in place, recursion left alone."""

from memctl.mcp.schemas import inline_refs


def test_references_are_replaced_by_their_definitions_with_sibling_keywords_kept() -> None:
    schema = {
        "$defs": {"Hit": {"type": "object", "properties": {"id": {"type": "string"}}, "title": "Hit"}},
        "type": "object",
        "properties": {
            "results": {"type": "array", "items": {"$ref": "#/$defs/Hit"}},
            "best": {"$ref": "#/$defs/Hit", "description": "the top hit"},
        },
    }
    out = inline_refs(schema)
    assert "$defs" not in out
    assert out["properties"]["results"]["items"] == schema["$defs"]["Hit"]
    assert out["properties"]["best"]["description"] == "the top hit"
    assert out["properties"]["best"]["properties"] == {"id": {"type": "string"}}
    assert "$ref" in schema["properties"]["best"]  # the input is not changed


def test_a_recursive_model_keeps_its_definitions_for_the_references_left() -> None:
    schema = {
        "$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}},
        "$ref": "#/$defs/Node",
    }
    out = inline_refs(schema)
    assert out["$defs"] == schema["$defs"]
    assert out["type"] == "object"


def test_a_schema_without_definitions_is_returned_as_is() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.org/x"}}}
    assert inline_refs(schema) is schema
