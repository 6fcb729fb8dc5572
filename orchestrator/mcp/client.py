"""MCP servers' tools offered to agents: one connection per configured server, owned by a task in
the run's nursery, and one ``McpTool`` per tool the server lists.

A tool is named ``<server>__<tool>`` (two underscores; characters outside the providers'
``[a-zA-Z0-9_-]`` become ``_``, and a name longer than 64 is cut and suffixed with a digest) and
keeps the server's own input schema. Nothing a server does reaches the agent loop as an
exception: an error result, a call that does not answer within ``tool_timeout_s``, a server that
crashed or never started — each becomes an error tool result naming the server.

Resource handling: ``open_mcp_tools`` starts every server inside its own nursery and, on the way
out, cancels the connections — the SDK closes each stdio server's pipes and stops its process —
so no server outlives the run (or agent) that opened it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
import trio

from ...providers.base import ToolDef
from ..extras import require
from ..tools.base import ToolBase, ToolError
from .config import McpServerSpec

if TYPE_CHECKING:
    from ..tools.context import ToolContext

log = structlog.get_logger("mnemon.mcp")

SEPARATOR = "__"
_BAD = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, remote: str) -> str:
    """``<server>__<tool>``, within the providers' ``^[a-zA-Z0-9_-]{1,64}$``."""
    name = f"{server}{SEPARATOR}{_BAD.sub('_', remote)}"
    if len(name) > 64:
        digest = hashlib.blake2s(remote.encode(), digest_size=4).hexdigest()
        name = f"{name[:55]}_{digest}"
    return name


class McpTool(ToolBase):
    """One server tool as a ``Tool``: its server's name and schema, ``shared`` (calls to MCP
    servers run side by side, as user tools do), answered by the server."""

    mode = "shared"

    def __init__(self, conn: "McpConnection", remote: str, description: str | None,
                 schema: dict[str, Any]):
        self.conn = conn
        self.remote = remote
        self.name = tool_name(conn.spec.name, remote)
        self.description = description or f"{remote} (MCP server {conn.spec.name})"
        self.schema = schema if schema.get("type") == "object" else \
            {"type": "object", "properties": {}}

        self._definition = ToolDef(self.name, self.description, self.schema)

    @property
    def definition(self) -> ToolDef:
        return self._definition

    async def call(self, ctx: "ToolContext | None", input: Any) -> str:
        return await self.conn.call(self.remote, input if isinstance(input, dict) else {})

    async def __call__(self, args: Any) -> str:
        return await self.call(None, args)


class McpConnection:
    """One configured server: its client session, its tools, and what went wrong, if anything."""

    def __init__(self, spec: McpServerSpec, *, log_dir: Path | None = None):
        self.spec = spec
        self.log_dir = log_dir
        self.client: Any = None
        self.tools: list[McpTool] = []
        self.error: str | None = None
        self.ready = trio.Event()

    def _transport(self, stack: Any) -> Any:
        spec = self.spec
        if spec.transport == "stdio":
            import sys

            from mcp.client.stdio import StdioServerParameters, stdio_client

            errlog: Any = sys.stderr
            if self.log_dir is not None:  # the server's stderr, kept off the terminal
                self.log_dir.mkdir(parents=True, exist_ok=True)
                errlog = stack.enter_context(open(self.log_dir / f"{spec.name}.stderr", "a"))
            params = StdioServerParameters(command=spec.command or "", args=list(spec.args),
                                           env=dict(spec.env) or None, cwd=spec.cwd)
            return stdio_client(params, errlog=errlog)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(headers=dict(spec.headers),
                                  timeout=httpx2.Timeout(30.0, read=max(300.0, spec.tool_timeout_s)))
        return streamable_http_client(spec.url or "", http_client=http, terminate_on_close=True), http

    async def run(self) -> None:
        """Connect, list the tools, then hold the session open until cancelled. Any failure is
        recorded in ``error`` (the tools then answer with it), never raised."""
        import math
        from contextlib import AsyncExitStack, ExitStack

        require("mcp", "an agent's MCP servers")  # never recorded as a server's error
        from mcp import Client

        # the start has a deadline, lifted once the tools are listed (one scope around it all:
        # a scope may not interleave with the client's own task groups)
        startup = trio.CancelScope(deadline=trio.current_time() + self.spec.startup_timeout_s)
        try:
            with startup, ExitStack() as files:
                async with AsyncExitStack() as stack:
                    transport = self._transport(files)
                    if isinstance(transport, tuple):
                        transport, http = transport
                        await stack.enter_async_context(http)
                    client = await stack.enter_async_context(Client(transport))
                    listed = await _list_all(client)
                    startup.deadline = math.inf
                    self.tools = [McpTool(self, t.name, t.description, dict(t.input_schema))
                                  for t in listed]
                    self.client = client
                    self.ready.set()
                    log.info("mcp server ready", server=self.spec.name, tools=len(self.tools))
                    await trio.sleep_forever()
            if startup.cancelled_caught:
                self._failed(f"did not start within {self.spec.startup_timeout_s:g} s")
        except Exception as e:  # noqa: BLE001 — a server's failure is its tools' error result
            self._failed(_describe(e))
        finally:
            self.client = None
            self.ready.set()

    def _failed(self, why: str) -> None:
        self.error = why
        log.warning("mcp server failed", server=self.spec.name, error=why)

    async def call(self, remote: str, args: dict) -> str:
        name = self.spec.name
        if self.client is None:
            raise ToolError(f"MCP server {name} is not running ({self.error or 'closed'}); "
                            f"{remote} was not called")
        timeout = self.spec.tool_timeout_s
        try:
            with trio.move_on_after(timeout) as scope:
                result = await self.client.call_tool(remote, args)
        except Exception as e:  # noqa: BLE001 — a protocol error or a server gone mid-call
            why = _describe(e)
            if "Connection closed" in why:  # the server is gone: later calls say so at once
                self.client, self.error = None, f"it stopped during {remote}: {why}"
            raise ToolError(f"MCP server {name} failed during {remote}: {why}") from None
        if scope.cancelled_caught:
            raise ToolError(f"MCP server {name} did not answer {remote} within {timeout:g} s")
        text = result_text(result)
        if result.is_error:
            raise ToolError(text or f"{remote} failed (MCP server {name} gave no reason)")
        return text


def result_text(result: Any) -> str:
    """A ``CallToolResult`` as the one string a tool result carries: text blocks joined by
    newlines; other blocks named by their kind; structured content when there is no text."""
    parts: list[str] = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif kind == "resource":
            res = block.resource
            parts.append(getattr(res, "text", None) or f"[resource {res.uri}]")
        else:
            parts.append(f"[{kind or 'content'}]")
    if not parts and result.structured_content is not None:
        from ...session.records import compact

        return compact(result.structured_content).decode("utf-8")
    return "\n".join(parts)


def _describe(e: BaseException) -> str:
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    text = str(e) or type(e).__name__
    return text if type(e).__name__ in text else f"{type(e).__name__}: {text}"


async def _list_all(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    for _ in range(100):  # a paginator that never ends cannot hang the start
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


class McpTools:
    """The connections of one run (or agent) and their tools, by the names the model sees."""

    def __init__(self, connections: Sequence[McpConnection]):
        self.connections = list(connections)
        self.tools: list[McpTool] = []
        seen: set[str] = set()
        for conn in self.connections:
            for t in conn.tools:
                if t.name in seen:
                    log.warning("mcp tool name taken", tool=t.name, server=conn.spec.name)
                    continue
                seen.add(t.name)
                self.tools.append(t)

    @property
    def failed(self) -> dict[str, str]:
        return {c.spec.name: c.error for c in self.connections if c.error is not None}


@asynccontextmanager
async def open_mcp_tools(specs: Sequence[McpServerSpec], *,
                         log_dir: Path | None = None) -> AsyncIterator[McpTools]:
    """Start every server (concurrently), wait until each has listed its tools or failed, and
    yield them; leaving the block stops every server."""
    conns = [McpConnection(s, log_dir=log_dir) for s in specs]
    async with trio.open_nursery() as nursery:
        for c in conns:
            nursery.start_soon(c.run, name=f"mcp server {c.spec.name}")
        for c in conns:
            await c.ready.wait()
        try:
            yield McpTools(conns)
        finally:
            nursery.cancel_scope.cancel()
