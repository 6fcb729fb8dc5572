"""User tools: typed Python callables turned into ``Tool``s, their JSON Schema from msgspec.

A tool's parameters come from its signature (annotations required); its docstring's first
paragraph is the description. Input is validated with ``msgspec.convert`` before the call, and
any exception the tool raises becomes an error result — it never reaches the agent loop. A
function runs ``shared`` (beside the response's other calls) unless it says otherwise
(``@tool(mode="serial")`` for one whose side effects must not interleave with another's).

A function that wants its call's context (``ToolContext``: the calling agent's id, settings,
door…) names a parameter ``ctx`` annotated ``ToolContext``; it is handed the context and is not
part of the schema.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, get_type_hints

import msgspec
import trio

from ...providers.base import ToolDef
from .base import MODES, Mode, ToolBase, ToolError, ToolInputError, is_tool
from .context import ToolContext

__all__ = ["ToolError", "ToolInputError", "UserTool", "as_tool", "tool"]


class UserTool(ToolBase):
    """A typed Python function as a ``Tool``."""

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None,
                 description: str | None = None, mode: Mode = "shared"):
        if mode not in MODES:
            raise TypeError(f"tool {name or getattr(fn, '__name__', fn)!r}: mode {mode!r} is "
                            f"not one of {', '.join(MODES)}")
        self.fn = fn
        self.mode = mode
        self.name = name or fn.__name__
        doc = inspect.getdoc(fn) or ""
        self.description = description or doc.split("\n\n")[0].replace("\n", " ") or self.name
        hints = get_type_hints(fn)
        fields: list[Any] = []
        self.ctx_param: str | None = None
        for pname, param in inspect.signature(fn).parameters.items():
            if hints.get(pname) is ToolContext:  # handed the call's context, not in the schema
                self.ctx_param = pname
                continue
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
        self._definition: ToolDef | None = None

    @property
    def definition(self) -> ToolDef:
        """One object while the name, description and schema stay as they are (the tool list
        offered per request is remembered by it)."""
        d = self._definition
        if d is None or d.name != self.name or d.description is not self.description \
                or d.input_schema is not self.schema:
            d = self._definition = ToolDef(self.name, self.description, self.schema)
        return d

    async def call(self, ctx: ToolContext | None, input: Any) -> str:
        return await self._run(input, ctx)

    async def __call__(self, args: Any) -> str:
        """The function on ``args`` alone (no context: a ``ctx`` parameter gets None)."""
        return await self._run(args, None)

    async def _run(self, args: Any, ctx: ToolContext | None) -> str:
        try:
            parsed = msgspec.convert(args if isinstance(args, dict) else {}, self.params)
        except msgspec.ValidationError as e:
            raise ToolInputError(f"invalid input for {self.name}: {e}") from None
        kwargs = {f: getattr(parsed, f) for f in parsed.__struct_fields__}
        if self.ctx_param is not None:
            kwargs[self.ctx_param] = ctx
        if self.is_async:
            out = await self.fn(**kwargs)
        else:
            out = await trio.to_thread.run_sync(lambda: self.fn(**kwargs))
        if isinstance(out, str):
            return out
        return msgspec.json.encode(out).decode()


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None,
         description: str | None = None, mode: Mode = "shared"):
    """Decorator form: ``@tool`` or ``@tool(name=..., description=..., mode=...)``."""
    if fn is None:
        return lambda f: UserTool(f, name=name, description=description, mode=mode)
    return UserTool(fn, name=name, description=description, mode=mode)


def as_tool(obj: Any) -> Any:
    """``obj`` as a ``Tool``: itself when it answers the whole protocol (a ``UserTool``, a
    class of one's own), else a typed function made one (``TypeError`` when it cannot be)."""
    if is_tool(obj):
        return obj
    if isinstance(obj, type) or not callable(obj):
        raise TypeError(f"{obj!r} is neither a Tool nor a function")
    return UserTool(obj)
