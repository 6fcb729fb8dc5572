"""Typed answers, the pure part: an output type (``OutputType``: a name and a JSON Schema of
the supported subset), its check, the validator, OpenAI's strict-mode rewrite, and the value
the scripted provider builds. The providers read a request's ``output`` through this package;
the orchestrator loads output types and judges answers with it (``orchestrator.typed``).
See docs/orchestrator.md, "Typed answers"."""

from __future__ import annotations

import re
from typing import Any

from .instance import NoInstance, build_instance
from .satisfy import check_satisfiable
from .schema import SchemaError, check_schema, root_object
from .strict import StrictError, loosen, strict_schema
from .validate import Problem, is_valid, problems

__all__ = ["OutputType", "OUTPUT_TOOL", "OUTPUT_TOOL_DESCRIPTION", "OUTPUT_RETRIES", "SchemaError", "StrictError",
           "NoInstance", "Problem", "check_schema", "root_object", "problems", "is_valid",
           "strict_schema", "loosen", "build_instance", "tool_schema", "safe_name"]

OUTPUT_TOOL = "final_answer"
"""The tool a provider without a native structured-output request (Anthropic, decision 0281)
offers for the final answer: its input schema is the output type."""

OUTPUT_TOOL_DESCRIPTION = (
    "Give your final answer: call this once, alone, when your work is done; its input is the "
    "answer, in the shape its schema asks for. It ends your work.")

OUTPUT_RETRIES = 2
"""How many more turns a model is given to fix an answer that does not validate."""

_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def safe_name(name: str) -> str:
    """A name as OpenAI's ``json_schema.name`` takes it: ``[A-Za-z0-9_-]{1,64}``."""
    out = _NAME.sub("_", name).strip("_")[:64]
    return out or "output"


class OutputType:
    """What an agent's final answer must be: one JSON object fitting ``schema``.

    Checked when made (``SchemaError``: outside the subset, not an object at the root, a
    pattern that can run away, or a schema no value fits — ``satisfy``), so an agent never
    starts with an output type it cannot validate or that nothing can meet. ``retries`` is how many more
    turns a model gets to fix an answer that does not fit (``OUTPUT_RETRIES``). The strict
    rewrite is made once, when a provider first asks for it.
    """

    __slots__ = ("name", "schema", "retries", "_strict", "patterned")

    def __init__(self, schema: dict[str, Any], *, name: str | None = None,
                 retries: int = OUTPUT_RETRIES):
        check_schema(schema)
        if not isinstance(schema, dict):
            raise SchemaError("the output type's root must be an object schema, not a boolean")
        root_object(schema)
        check_satisfiable(schema)  # no value fits, or validation would never end: refused
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise SchemaError(f"output retries must be a whole number ≥ 0, not {retries!r}")
        self.schema = schema
        self.name = safe_name(name or _title(schema) or "output")
        self.retries = retries
        self._strict: dict[str, Any] | None = None
        self.patterned = _has_pattern(schema)
        """Whether validating an answer may run a ``pattern`` regex: then it is judged in a
        worker thread (``orchestrator.typed.judge``)."""

    def __repr__(self) -> str:
        return f"OutputType({self.name!r})"

    def strict(self) -> dict[str, Any]:
        """The schema in OpenAI strict mode's shape (``strict.strict_schema``), made once."""
        if self._strict is None:
            self._strict = strict_schema(self.schema)
        return self._strict

    def as_record(self) -> dict[str, Any]:
        """What ``SessionStarted.output_type`` records: ``{"name", "schema", "retries"}``."""
        return {"name": self.name, "schema": self.schema, "retries": self.retries}

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> "OutputType":
        return cls(rec["schema"], name=rec.get("name"),
                   retries=rec.get("retries", OUTPUT_RETRIES))


def _has_pattern(node: Any) -> bool:
    if isinstance(node, dict):
        return isinstance(node.get("pattern"), str) or any(map(_has_pattern, node.values()))
    if isinstance(node, list):
        return any(map(_has_pattern, node))
    return False


def _title(schema: dict[str, Any]) -> str | None:
    try:
        node = root_object(schema)
    except SchemaError:
        return None
    title = node.get("title") or schema.get("title")
    return title if isinstance(title, str) else None


def tool_schema(output: OutputType) -> dict[str, Any]:
    """The output type as a tool's ``input_schema``: the root object itself (a root ``$ref``
    followed), with the schema's ``$defs`` beside it."""
    root = root_object(output.schema)
    if root is output.schema:
        return output.schema
    out = dict(root)
    for key in ("$defs", "definitions"):
        if key in output.schema:
            out[key] = output.schema[key]
    return out
