"""What a model-callable tool is: the ``Tool`` protocol, how a tool may run beside others
(``Mode``), and the errors a tool raises to answer the model with an error result.

Every tool an agent can call answers the same four questions — its ``name``, its ``definition``
(the JSON Schema the model sees, held beside the handler that reads it), its ``mode`` (how it may
run beside the other calls of one response) and ``call(ctx, input)``; and one more, ``starts``,
that lets the gate judge a tool that starts agents as the ``agents_start`` call it amounts to
(decision 0307). Built-ins, ``@tool`` functions, MCP servers' tools, ``ask_<role>`` and the tools
to come (the workspace's, the shell) all answer them, so the loop dispatches once, through one
table per agent (``table.ToolTable``), and asks the tool — never a name list — how it may run.

The modes (decision 0328), in the words the loop schedules by:

- ``shared``: runs beside any other call of the response — the door's reads, the survey,
  ``agents_wait``, ``@tool`` functions and MCP tools (as DESIGN.md has it: user tools may run
  concurrently);
- ``serial``: one at a time among the response's serial calls, in call order, beside shared ones
  — a tool whose side effects must not interleave with another's (a file write);
- ``exclusive``: no later call of the response starts until it has ended, and it starts only
  after the serial calls before it — the context's edits and the agents tools (``context_evict``,
  ``context_mark``, ``agents_start``, ``agents_cancel``, ``agents_synod``), and ``shell``, which
  may change anything in the workspace.

Results are recorded in call order whatever the modes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ...providers.base import ToolDef

if TYPE_CHECKING:
    from .context import ToolContext

__all__ = ["MODES", "Mode", "Tool", "ToolBase", "ToolError", "ToolInputError", "is_tool"]

Mode = Literal["shared", "serial", "exclusive"]
MODES: tuple[str, ...] = ("shared", "serial", "exclusive")


class ToolInputError(Exception):
    """The call's input does not fit the tool: answered to the model as an error result naming
    what is wrong, never run."""


class ToolError(Exception):
    """A tool's own failure, answered to the model as an error result with exactly this text
    (an MCP server's error result, a timeout, a server that is gone)."""


@runtime_checkable
class Tool(Protocol):
    """A tool a model can call. Implement it directly, or subclass ``ToolBase`` for the
    defaults, or decorate a typed function with ``mnemon.tool``.

    ``call`` answers with the text of the tool result (a string; compact JSON for structured
    answers). It raises ``ToolInputError`` for input that does not fit and ``ToolError`` for its
    own failure, each answered to the model with exactly its text; any other exception is
    isolated into an error result naming it — a tool never fails its agent."""

    name: str
    mode: Mode

    @property
    def definition(self) -> ToolDef: ...

    async def call(self, ctx: "ToolContext", input: dict[str, Any]) -> str: ...

    def starts(self, input: dict[str, Any]) -> dict[str, Any] | None:
        """The ``agents_start`` input this call amounts to when the tool starts agents (the
        gate judges it as that call too: a rule on ``agents_start`` governs every way a model
        starts a child), else None."""
        ...


class ToolBase(ABC):
    """Defaults for a ``Tool``: shared, starts no agent; ``definition`` from ``name``,
    ``description`` and ``schema``. ``call`` is the one method a subclass must write (a class
    without it cannot be made)."""

    name: str = ""
    description: str = ""
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    mode: Mode = "shared"

    @property
    def definition(self) -> ToolDef:
        """Built from ``name``, ``description`` and ``schema`` (once, when a subclass sets
        ``_definition``)."""
        d: ToolDef | None = self.__dict__.get("_definition")
        return d if d is not None else ToolDef(self.name, self.description, self.schema)

    @abstractmethod
    async def call(self, ctx: "ToolContext", input: dict[str, Any]) -> str:
        """Answer one call (``Tool.call``)."""

    def starts(self, input: dict[str, Any]) -> dict[str, Any] | None:
        return None


def is_tool(obj: Any) -> bool:
    """Whether ``obj`` answers the whole ``Tool`` protocol (a plain function does not: wrap it
    with ``mnemon.tool``). Its mode must be one of ``MODES``."""
    return (isinstance(obj, Tool) and not isinstance(obj, type)
            and getattr(obj, "mode", None) in MODES)
