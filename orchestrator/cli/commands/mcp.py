"""``mnemon mcp RUN_ROOT`` — the run's transcript door as an MCP server (stdio, or ``--http``).

Read-only and confined to the run root. Over HTTP it binds loopback by default and needs the
bearer token as ``mnemon serve`` does: ``--token``, ``MNEMON_TOKEN``, or one generated and
printed once; a non-loopback host without a chosen token is refused.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .. import COMMANDS
from ....errors import UserError
from ...extras import require


def add_parser(sub) -> None:
    p = sub.add_parser("mcp", help=COMMANDS["mcp"])
    p.add_argument("run_root", metavar="RUN_ROOT", help="the run root to serve (read-only)")
    p.add_argument("--http", action="store_true",
                   help="serve streamable HTTP at /mcp instead of stdio")
    from ..options import add_listen_args  # options load the settings: only for this command

    add_listen_args(p, port=8766, when="--http: ")


def run(args) -> int:
    require("mcp", "mnemon mcp")
    import trio

    from ...mcp.door import RunDoor

    door = RunDoor(Path(args.run_root))
    from ...._about import __version__
    from ...mcp.server import build_server, serve_http, serve_stdio

    server = build_server(door, version=__version__)
    if not args.http:
        trio.run(_until_signal, lambda task_status: _started(serve_stdio(server), task_status))
        return 0
    from ..options import listen_from
    from ...service.listen import bind

    token, generated = listen_from(args)
    sock = bind(args.host, args.port)

    def ready(binds: list[str]) -> None:
        url = (binds[0] if binds else f"http://{args.host}:{args.port}") + "/mcp"
        sys.stderr.write(f"mnemon: serving {door.root} over MCP at {url}\n")
        if generated:
            sys.stderr.write(f"mnemon: token {token}\n")
        sys.stderr.flush()

    try:
        trio.run(_until_signal, lambda task_status: serve_http(
            server, token=token, host=args.host, port=args.port, sock=sock,
            task_status=task_status),
            ready)
    except OSError as e:
        raise UserError(f"cannot serve on {args.host}:{args.port}: {e.strerror or e}") from None
    sys.stderr.write("mnemon: stopped\n")
    return 0


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
