"""User tools: typed Python callables turned into JSON-Schema tool definitions with msgspec.

A tool's parameters come from its signature (annotations required); its docstring's first
paragraph is the description. Input is validated with ``msgspec.convert`` before the call, and
any exception the tool raises becomes an error result — it never reaches the agent loop.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, get_type_hints

import msgspec
import trio

from ..providers.base import ToolDef


class ToolInputError(Exception):
    pass


class ToolError(Exception):
    """A tool's own failure, answered to the model as an error result with exactly this text
    (an MCP server's error result, a timeout, a server that is gone)."""


class UserTool:
    def __init__(self, fn: Callable[..., Any], *, name: str | None = None,
                 description: str | None = None):
        self.fn = fn
        self.name = name or fn.__name__
        doc = inspect.getdoc(fn) or ""
        self.description = description or doc.split("\n\n")[0].replace("\n", " ") or self.name
        hints = get_type_hints(fn)
        fields: list[Any] = []
        for pname, param in inspect.signature(fn).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {self.name}: *args/**kwargs are not supported")
            if pname not in hints:
                raise TypeError(f"tool {self.name}: parameter {pname!r} needs a type annotation")
            if param.default is inspect.Parameter.empty:
                fields.append((pname, hints[pname]))
            else:
                fields.append((pname, hints[pname], param.default))
        self.params = msgspec.defstruct(f"{self.name}_input", fields, forbid_unknown_fields=True)
        schema = msgspec.json.schema(self.params)
        defs = schema.pop("$defs", {})
        ref = schema.get("$ref", "")
        body = defs.pop(ref.rsplit("/", 1)[-1], schema) if ref else schema
        body.pop("title", None)
        if defs:
            body["$defs"] = defs
        self.schema = body
        self.is_async = inspect.iscoroutinefunction(fn)

    @property
    def definition(self) -> ToolDef:
        return ToolDef(self.name, self.description, self.schema)

    async def __call__(self, args: Any) -> str:
        try:
            parsed = msgspec.convert(args if isinstance(args, dict) else {}, self.params)
        except msgspec.ValidationError as e:
            raise ToolInputError(f"invalid input for {self.name}: {e}") from None
        kwargs = {f: getattr(parsed, f) for f in parsed.__struct_fields__}
        if self.is_async:
            out = await self.fn(**kwargs)
        else:
            out = await trio.to_thread.run_sync(lambda: self.fn(**kwargs))
        if isinstance(out, str):
            return out
        return msgspec.json.encode(out).decode()


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None,
         description: str | None = None):
    """Decorator form: ``@tool`` or ``@tool(name=...)``."""
    if fn is None:
        return lambda f: UserTool(f, name=name, description=description)
    return UserTool(fn, name=name, description=description)
