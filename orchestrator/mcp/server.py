"""``mnemon mcp RUN_ROOT``: the run's transcript door served over MCP, stdio or streamable HTTP.

Built on the SDK's low-level ``Server`` so every tool carries exactly the schema we write (the
model-facing tool's, with ``agent`` added) and answers exactly the CLI's ``--json`` value, as
compact JSON text. Blocking reads run in a worker thread, so one long grep stalls no other
request. Over HTTP every request needs the bearer token, compared as the service compares it
(``service/auth.py``).
"""

from __future__ import annotations

from typing import Any

import mcp.types as types
import trio
from mcp.server import Server

from ...session.records import compact
from .door import DOOR_TOOLS, DoorError, RunDoor


def build_server(door: RunDoor, *, version: str = "0") -> Server:
    """An MCP server answering the door's tools; nothing in it writes."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=name, description=desc, input_schema=schema,
                       annotations=types.ToolAnnotations(read_only_hint=True,
                                                         idempotent_hint=True))
            for name, (desc, schema) in DOOR_TOOLS.items()])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            value = await trio.to_thread.run_sync(door.call, params.name, params.arguments)
        except DoorError as e:
            return _text(str(e), error=True)
        return _text(compact(value).decode("utf-8"))

    return Server("mnemon", version=version,
                  instructions="Read-only access to the transcripts of one mnemon run: list its "
                               "agents, then index, read or grep any agent's whole lineage.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


async def serve_stdio(server: Server) -> None:
    """Serve one client over this process's stdin and stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def require_bearer(app: Any, token: str) -> Any:
    """An ASGI wrapper answering 401 to any HTTP request without the token."""
    from ..service.auth import authorized

    async def guarded(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            header = dict(scope.get("headers") or ()).get(b"authorization")
            if not authorized(header.decode("latin-1") if header else None, token):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body",
                            "body": b'{"error":"a bearer token is required"}'})
                return
        await app(scope, receive, send)

    return guarded


async def serve_http(server: Server, *, token: str, host: str = "127.0.0.1", port: int = 0,
                     task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve streamable HTTP at ``/mcp`` until cancelled; ``task_status.started(binds)``."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    app = require_bearer(server.streamable_http_app(host=host), token)
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None  # a URL or a header is never logged
    config.errorlog = None
    config.graceful_timeout = 2.0
    await serve(app, config, task_status=task_status)  # type: ignore[arg-type]

