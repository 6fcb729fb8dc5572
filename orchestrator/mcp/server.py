"""``mnemon mcp RUN_ROOT``: the run's transcript door served over MCP, stdio or streamable HTTP
(with ``--agents``, the agents tools too: ``mcp/agents.py``).

Built on the SDK's low-level ``Server`` so every tool carries exactly the schema we write (the
model-facing tool's, with ``agent`` added) and answers exactly the CLI's ``--json`` value, as
compact JSON text. Blocking reads run in a worker thread, so one long grep stalls no other
request. Over HTTP every request needs the bearer token, compared as the service compares it
(``service/auth.py``, the same guard: OAuth discovery answers 404).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp.types as types
import trio
from mcp.server import Server

from ...session.records import compact
from .door import DOOR_TOOLS, DoorError, RunDoor

if TYPE_CHECKING:
    from .agents import AgentDesk


def build_server(door: RunDoor, *, version: str = "0", desk: "AgentDesk | None" = None) -> Server:
    """An MCP server answering the door's tools; nothing in it writes — unless ``desk`` is
    given (``mnemon mcp --agents``): then it also serves the agents tools
    (``mcp.agents.AGENT_TOOLS``), run on the event loop that drives the agents."""
    from .agents import AGENT_TOOLS

    read = types.ToolAnnotations(read_only_hint=True, idempotent_hint=True)
    tools = [types.Tool(name=name, description=desc, input_schema=schema, annotations=read)
             for name, (desc, schema) in DOOR_TOOLS.items()]
    if desk is not None:
        tools += [types.Tool(name=name, description=desc, input_schema=schema,
                             annotations=types.ToolAnnotations(
                                 read_only_hint=name == "agents_status",
                                 destructive_hint=name == "agents_cancel",
                                 idempotent_hint=name in ("agents_status", "agents_wait"),
                                 open_world_hint=name == "agents_start"))
                  for name, (desc, schema) in AGENT_TOOLS.items()]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            if desk is not None and params.name in AGENT_TOOLS:
                value = await desk.call(params.name, params.arguments)
            else:
                value = await trio.to_thread.run_sync(door.call, params.name, params.arguments)
        except DoorError as e:
            return _text(str(e), error=True)
        return _text(compact(value).decode("utf-8"))

    what = ("Delegate to mnemon agents and read their transcripts: start an agent on a task "
            "(agents_start), follow it (agents_status), steer it (agents_send), wait for its "
            "answer (agents_wait) or cancel it; then index, read or grep any agent's whole "
            "lineage." if desk is not None else
            "Read-only access to the transcripts of one mnemon run: list its agents, then "
            "index, read or grep any agent's whole lineage.")
    return Server("mnemon", version=version, instructions=what,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


async def serve_stdio(server: Server) -> None:
    """Serve one client over this process's stdin and stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def require_bearer(app: Any, token: str) -> Any:
    """An ASGI wrapper answering 401 to any HTTP request without the token (naming the mistake:
    none, or a wrong one), and 404 under ``/.well-known/`` (no OAuth here: an MCP host then says
    a token is needed instead of trying to register as an OAuth client)."""
    from ..service.auth import guard

    return guard(app, token)


async def serve_http(server: Server, *, token: str, host: str = "127.0.0.1", port: int = 0,
                     sock: Any = None, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve streamable HTTP at ``/mcp`` until cancelled; ``task_status.started(binds)``.
    ``sock``: the listening socket, bound by the caller (``service.listen.bind``); else
    ``host:port`` is bound here, first."""
    from hypercorn.trio import serve

    from ..service.listen import bind, served_config

    app = require_bearer(server.streamable_http_app(host=host), token)
    sock = bind(host, port) if sock is None else sock
    try:
        await serve(app, served_config(sock), task_status=task_status)  # type: ignore[arg-type]
    finally:
        sock.close()
