"""``mnemon chat`` — an interactive session with one root agent (``--resume DIR`` continues an
agent's log). The scripted provider answers offline by default, as for ``mnemon ask``."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import COMMANDS
from ....errors import UserError
from ...extras import require
from ..options import (add_provider_args, add_workspace_arg, provider_from_args, run_root_from,
                       settings_from_args, unsandboxed_note)
from ...tracing.switch import live_tracing


def add_parser(sub) -> None:
    p = sub.add_parser("chat", help=COMMANDS["chat"])
    p.add_argument("--resume", metavar="DIR", default=None,
                   help="continue this agent's log (an agent directory of a run root)")
    p.add_argument("--latency", type=float, default=0.0,
                   help="scripted provider: simulated seconds per request")
    p.add_argument("--plain", action="store_true",
                   help="print answers as written, not rendered as Markdown (the default "
                        "when the output is not a terminal)")
    add_provider_args(p)
    add_workspace_arg(p)


def run(args) -> int:
    require("chat", "mnemon chat")
    import trio

    from ... import logs
    from ...chat.terminal import run_terminal
    from ...supervisor import open_supervisor

    settings = settings_from_args(args)
    provider = provider_from_args(args)
    note = unsandboxed_note(settings)
    if note is not None:
        sys.stderr.write(note)
    if args.latency:
        if args.provider != "scripted":
            raise UserError("--latency is for the scripted provider")
        provider.latency_s = args.latency  # type: ignore[attr-defined]
    agent = None
    if args.resume:
        from ....lineage.runroot import agent_of
        from ....lineage.view import open_agent

        root, agent = agent_of(Path(args.resume))
        open_agent(Path(args.resume))  # refuse a log that does not fold before writing
    else:
        root = run_root_from(args, "mnemon chat")
    logs.configure(root, verbose=False)

    async def main() -> None:
        try:
            async with open_supervisor(root, provider, settings, started_by="mnemon chat",
                                       provider_name=args.provider) as sup:
                node = sup.resume_agent(agent) if agent else None
                await run_terminal(sup, node, history=root / "chat-history",
                                   markdown=False if args.plain else None)
        finally:
            await provider.aclose()

    with live_tracing(args.trace_content):
        trio.run(main)
    logs.shutdown()
    sys.stderr.write(f"mnemon: logs in {root}\n")
    return 0
