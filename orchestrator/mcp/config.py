"""The MCP configuration: the ``mcpServers`` shape Claude Code and Codex use, JSON or TOML.

``{"mcpServers": {"name": {"command", "args", "env", "cwd"} | {"type": "http", "url",
"headers"}}}`` — Codex's ``[mcp_servers.name]`` tables are read too, so a snippet of either
tool's file works unchanged. ``${VAR}`` and ``${VAR:-default}`` in strings are expanded from
the environment when the file is loaded, as Claude Code does. Pure apart from reading the file:
no SDK is imported here, so ``Settings`` can carry the result.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from msgspec import Struct

from ... import _toml as toml
from ..extras import require
from ...errors import ConfigError

#: a server name becomes the prefix of its tools' names (``<server>__<tool>``), so it keeps to
#: the providers' tool-name alphabet and leaves room for the tool's own name
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
DEFAULT_TOOL_TIMEOUT_S = 60.0
DEFAULT_STARTUP_TIMEOUT_S = 30.0


class McpConfigError(ConfigError):
    """A configuration that cannot be used: one line naming the server and the key."""


class McpServerSpec(Struct, kw_only=True, frozen=True):
    """One configured server: how to reach it, and how long to wait for it."""

    name: str
    transport: Literal["stdio", "http"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = {}
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = {}
    tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S


_KEYS = {"type", "transport", "command", "args", "env", "cwd", "url", "headers",
         "tool_timeout_sec", "startup_timeout_sec", "enabled", "bearer_token_env_var"}
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def load_config(path: str | Path, env: Mapping[str, str] = os.environ) -> tuple[McpServerSpec, ...]:
    """Read a ``.json`` or ``.toml`` file (by its suffix; JSON when it has none). Refused at
    once without the ``mcp`` extra: the servers it names could never be started."""
    require("mcp", "an MCP configuration")
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise McpConfigError(f"cannot read the MCP configuration {p}: {e.strerror or e}") from None
    try:
        if p.suffix.lower() == ".toml":
            data = toml.parse(toml.decode(raw, p), p)
        else:
            import json

            data = json.loads(raw)
    except toml.TomlError as e:  # the one TOML message (decision 0343)
        raise McpConfigError(str(e)) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise McpConfigError(f"{p} is not valid JSON: {e}") from None
    return parse_config(data, env)


def parse_config(data: Any, env: Mapping[str, str] = os.environ) -> tuple[McpServerSpec, ...]:
    """The enabled servers of a parsed configuration, in the order written."""
    if not isinstance(data, dict):
        raise McpConfigError("an MCP configuration is an object with \"mcpServers\"")
    servers = data.get("mcpServers", data.get("mcp_servers"))
    if not isinstance(servers, dict):
        raise McpConfigError("an MCP configuration needs \"mcpServers\" (or Codex's "
                             "\"mcp_servers\"): an object of servers by name")
    out = []
    for name, entry in servers.items():
        spec = _server(str(name), entry, env)
        if spec is not None:
            out.append(spec)
    return tuple(out)


def _server(name: str, entry: Any, env: Mapping[str, str]) -> McpServerSpec | None:
    where = f"MCP server {name!r}"
    if not SERVER_NAME.match(name):
        raise McpConfigError(f"{where}: a name is 1-32 letters, digits, '_' or '-'")
    if not isinstance(entry, dict):
        raise McpConfigError(f"{where}: expected an object")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise McpConfigError(f"{where}: unknown key {unknown[0]!r}")
    if entry.get("enabled", True) is False:
        return None
    kind = entry.get("type", entry.get("transport"))
    if kind is None:
        kind = "http" if "url" in entry else "stdio"
    if kind in ("streamable-http", "streamable_http", "streamableHttp"):
        kind = "http"
    if kind == "sse":
        raise McpConfigError(f"{where}: the SSE transport is deprecated and not supported; use "
                             "the server's streamable HTTP endpoint (\"type\": \"http\")")
    if kind not in ("stdio", "http"):
        raise McpConfigError(f"{where}: type must be \"stdio\" or \"http\", not {kind!r}")

    def text(key: str) -> str | None:
        v = entry.get(key)
        if v is None:
            return None
        if not isinstance(v, str):
            raise McpConfigError(f"{where}: {key!r} must be a string")
        return _expand(v, env, where)

    def strings(key: str) -> dict[str, str]:
        v = entry.get(key) or {}
        if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
            raise McpConfigError(f"{where}: {key!r} must be an object of strings")
        return {str(k): _expand(x, env, where) for k, x in v.items()}

    def seconds(*keys: str, default: float) -> float:
        for key in keys:
            v = entry.get(key)
            if v is not None:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                    raise McpConfigError(f"{where}: {key!r} must be a positive number of seconds")
                return float(v)
        return default

    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise McpConfigError(f"{where}: 'args' must be a list of strings")
    headers = strings("headers")
    if kind == "stdio":
        command = text("command")
        if not command:
            raise McpConfigError(f"{where}: a stdio server needs 'command'")
        url = None
    else:
        command, url = None, text("url")
        if not url or not url.startswith(("http://", "https://")):
            raise McpConfigError(f"{where}: an http server needs 'url' (http:// or https://)")
        token_var = entry.get("bearer_token_env_var")
        if token_var is not None:
            if token_var not in env:
                raise McpConfigError(f"{where}: bearer_token_env_var names {token_var}, which "
                                     "is not set")
            headers.setdefault("Authorization", f"Bearer {env[token_var]}")
    return McpServerSpec(
        name=name, transport=kind, command=command,
        args=tuple(_expand(a, env, where) for a in args), env=strings("env"), cwd=text("cwd"),
        url=url, headers=headers,
        tool_timeout_s=seconds("tool_timeout_sec", default=DEFAULT_TOOL_TIMEOUT_S),
        startup_timeout_s=seconds("startup_timeout_sec", default=DEFAULT_STARTUP_TIMEOUT_S))


def _expand(value: str, env: Mapping[str, str], where: str) -> str:
    def sub(m: re.Match) -> str:
        if m.group(1) in env:
            return env[m.group(1)]
        if m.group(2) is not None:
            return m.group(2)
        raise McpConfigError(f"{where}: ${{{m.group(1)}}} is not set")

    return _VAR.sub(sub, value)
