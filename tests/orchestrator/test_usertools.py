"""User tools: typed callables become JSON-Schema tool definitions; input is validated."""

from __future__ import annotations

import pytest

from mnemon.orchestrator.usertools import ToolInputError, UserTool, tool


def search_docs(query: str, limit: int = 5, tags: list[str] | None = None) -> list[str]:
    """Search the documentation.

    Longer text that is not part of the description.
    """
    return [f"{query}:{limit}:{','.join(tags or [])}"]


async def test_schema_from_the_signature_and_a_validated_call():
    t = UserTool(search_docs)
    d = t.definition
    assert d.name == "search_docs" and d.description == "Search the documentation."
    schema = d.input_schema
    assert schema["type"] == "object" and schema["required"] == ["query"]
    assert schema["properties"]["query"] == {"type": "string"}
    assert schema["properties"]["limit"]["type"] == "integer"
    assert schema["properties"]["limit"]["default"] == 5
    assert schema["additionalProperties"] is False
    assert await t({"query": "evict", "tags": ["a", "b"]}) == '["evict:5:a,b"]'
    with pytest.raises(ToolInputError, match="invalid input for search_docs"):
        await t({"query": 3})
    with pytest.raises(ToolInputError):
        await t({"query": "x", "unknown": 1})


async def test_async_tools_and_the_decorator():
    @tool(name="shout")
    async def loud(text: str) -> str:
        """Upper-case it."""
        return text.upper()

    assert loud.name == "shout" and await loud({"text": "hi"}) == "HI"


def test_untyped_parameters_are_refused():
    def bad(x) -> str:  # type: ignore[no-untyped-def]
        return ""

    with pytest.raises(TypeError, match="needs a type annotation"):
        UserTool(bad)
