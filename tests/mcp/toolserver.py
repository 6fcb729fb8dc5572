"""An MCP server of our own for the tests: ``add``, ``shout``, ``fail`` (an error result),
``crash`` (the process dies mid-call) and ``hang`` (never answers).

``python toolserver.py`` serves stdio; the tests serve ``SERVER`` over HTTP in-process. With
``TOOLSERVER_CALLS`` set to a file, every call appends one line to it (``name`` and arguments as
JSON): what a test counts to know a tool ran, and how many times.
"""

from __future__ import annotations

import json
import os
import sys

import mcp.types as types
import trio
from mcp.server import Server

TOOLS = [
    types.Tool(name="add", description="Add two integers.",
               input_schema={"type": "object", "properties": {"a": {"type": "integer"},
                                                               "b": {"type": "integer"}},
                             "required": ["a", "b"]}),
    types.Tool(name="shout", description="Upper-case a text.",
               input_schema={"type": "object", "properties": {"text": {"type": "string"}},
                             "required": ["text"]}),
    types.Tool(name="fail", description="Always an error result.",
               input_schema={"type": "object", "properties": {}}),
    types.Tool(name="crash", description="The server dies mid-call.",
               input_schema={"type": "object", "properties": {}}),
    types.Tool(name="hang", description="Never answers.",
               input_schema={"type": "object", "properties": {}}),
    types.Tool(name="odd.name/v2", description="A name outside the providers' alphabet.",
               input_schema={"type": "object", "properties": {}}),
]


async def list_tools(ctx, params) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    name = params.name
    calls = os.environ.get("TOOLSERVER_CALLS")
    if calls:
        with open(calls, "a") as f:
            f.write(json.dumps({"name": name, "arguments": args}) + "\n")
    if name == "add":
        text = str(int(args["a"]) + int(args["b"]))
    elif name == "shout":
        text = str(args["text"]).upper()
    elif name == "fail":
        return types.CallToolResult(content=[types.TextContent(text="no such thing")],
                                    is_error=True)
    elif name == "crash":
        os._exit(3)
    elif name == "hang":
        await trio.sleep_forever()
        text = ""
    else:
        text = f"called {name}"
    return types.CallToolResult(content=[types.TextContent(text=text)])


SERVER = Server("testtools", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await SERVER.run(read, write, SERVER.create_initialization_options())


if __name__ == "__main__":
    sys.exit(trio.run(main))
