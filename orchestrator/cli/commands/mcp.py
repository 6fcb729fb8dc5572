"""``mnemon mcp RUN_ROOT`` — the run's transcript door as an MCP server (stdio, or ``--http``).

Read-only and confined to the run root. Over HTTP it binds loopback by default and needs the
bearer token as ``mnemon serve`` does: ``--token``, ``MNEMON_TOKEN``, or one generated and
printed once; a non-loopback host without a chosen token is refused.

``--agents``: the server also starts, follows, steers, waits for and cancels agents
(``mcp/agents.py``), with a supervisor living in this process for the server's life, on the
provider, policy, roles and budgets the command line gives (the flags of ``mnemon serve`` and
``ask``). RUN_ROOT is then made if it is new or empty. Without ``--agents`` those flags are
refused: read-only stays the default, and a flag that does nothing is a mistake said.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .. import COMMANDS
from ....errors import UserError
from ...extras import require


def add_parser(sub) -> None:
    p = sub.add_parser("mcp", help=COMMANDS["mcp"])
    p.add_argument("run_root", metavar="RUN_ROOT",
                   help="the run root to serve (read-only; with --agents, made if new)")
    p.add_argument("--http", action="store_true",
                   help="serve streamable HTTP at /mcp instead of stdio")
    p.add_argument("--agents", action="store_true",
                   help="also serve tools that start, follow, steer, wait for and cancel "
                        "agents, with the provider and run options below (docs/mcp.md)")
    from ..options import add_listen_args, add_provider_args  # options load the settings

    add_listen_args(p, port=8766, when="--http: ")
    add_provider_args(p, run_root=False)


#: the run options that mean something only with ``--agents`` (dest → flag), and their defaults
_AGENT_FLAGS = {"provider": ("--provider", "scripted"), "model": ("--model", None),
                "base_url": ("--base-url", None), "context_window": ("--context-window", None),
                "max_tokens": ("--max-tokens", 8192), "script": ("--script", None),
                "cache_ttl": ("--cache-ttl", "5m"), "store": ("--store", False),
                "keep": ("--keep", "auto"), "keep_floor": ("--keep-floor", None),
                "max_turns": ("--max-turns", 250), "system": ("--system", None),
                "budget_usd": ("--budget-usd", None), "budget_tokens": ("--budget-tokens", None),
                "trace_content": ("--trace-content", False), "mcp": ("--mcp", None),
                "policy": ("--policy", None), "roles": ("--roles", None),
                "role": ("--role", None)}


def run(args) -> int:
    require("mcp", "mnemon mcp")
    import contextlib

    import trio

    from ...mcp.door import RunDoor

    if not args.agents:
        given = [flag for dest, (flag, default) in _AGENT_FLAGS.items()
                 if getattr(args, dest, default) != default]
        if given:
            raise UserError(f"{', '.join(given)}: only with --agents (without it the run is "
                            "served read-only and runs no agent)")
    token, generated, sock = "", False, None
    if args.http:  # bound before anything is written: an address in use leaves no run root
        from ..options import listen_from
        from ...service.listen import bind

        token, generated = listen_from(args)
        sock = bind(args.host, args.port)
    serving = _agents(args) if args.agents else None
    door = RunDoor(Path(args.run_root)) if serving is None else serving[0]
    from ...._about import __version__
    from ...mcp.server import build_server, serve_http, serve_stdio

    def served(serve_on):
        """How the server is served (stdio or HTTP), around the agents' supervisor when
        ``--agents`` (it lives as long as the server)."""
        if serving is None:
            server = build_server(door, version=__version__)
            return lambda task_status: serve_on(server, task_status)
        return lambda task_status: _with_agents(serving, __version__, serve_on, task_status)

    if serving is not None:
        from ...tracing.switch import live_tracing

        traced: Any = live_tracing(args.trace_content)
    else:
        traced = contextlib.nullcontext()
    if not args.http:
        with traced:
            trio.run(_until_signal, served(lambda server, task_status: _started(
                serve_stdio(server), task_status)))
        return 0

    def ready(binds: list[str]) -> None:
        url = (binds[0] if binds else f"http://{args.host}:{args.port}") + "/mcp"
        mode = " (agents: provider " + args.provider + ")" if serving is not None else ""
        sys.stderr.write(f"mnemon: serving {door.root} over MCP at {url}{mode}\n")
        if generated:
            sys.stderr.write(f"mnemon: token {token}\n")
        sys.stderr.flush()

    try:
        with traced:
            trio.run(_until_signal, served(lambda server, task_status: serve_http(
                server, token=token, host=args.host, port=args.port, sock=sock,
                task_status=task_status)), ready)
    except OSError as e:
        raise UserError(f"cannot serve on {args.host}:{args.port}: {e.strerror or e}") from None
    sys.stderr.write("mnemon: stopped\n")
    return 0


def _agents(args):
    """``--agents``: the run root (made if new), its door, and the supervisor's makings —
    provider, settings — judged whole before anything is served (exit 2 naming the flag)."""
    from ....lineage.runroot import create_run_root
    from ... import logs
    from ...mcp.door import RunDoor
    from ..options import provider_from_args, settings_from_args, unsandboxed_note

    settings = settings_from_args(args)
    provider = provider_from_args(args)
    root = create_run_root(Path(args.run_root), "mnemon mcp --agents")
    logs.configure(root, verbose=getattr(args, "verbose", False))  # never stdout: the protocol's
    note = unsandboxed_note(settings)
    if note is not None:
        sys.stderr.write(note)
    return RunDoor(root), provider, settings, args.provider


async def _with_agents(serving, version: str, serve_on, task_status) -> None:
    """The supervisor open for the server's life; at its end every agent still running is
    cancelled and records its end before the process exits."""
    import trio

    from ...mcp.agents import AgentDesk
    from ...mcp.server import build_server
    from ...supervisor import open_supervisor

    door, provider, settings, provider_name = serving
    async with open_supervisor(door.root, provider, settings, started_by="mnemon mcp --agents",
                               provider_name=provider_name) as sup:
        desk = AgentDesk(sup)
        try:
            await serve_on(build_server(door, version=version, desk=desk), task_status)
        finally:
            with trio.CancelScope(shield=True):
                await desk.close()


async def _started(serving, task_status) -> None:
    task_status.started([])
    await serving


async def _until_signal(serve, ready=None) -> None:
    """Serve until the server ends (stdio: the client closed the pipe) or SIGINT/SIGTERM."""
    import signal

    import trio

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            async def watch() -> None:
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    return

            async def serving(task_status=trio.TASK_STATUS_IGNORED) -> None:
                await serve(task_status)
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            binds = await nursery.start(serving)
            if ready is not None:
                ready(binds)
