"""``mnemon ask PROMPT`` — one root agent on one prompt with the configured provider."""

from __future__ import annotations

import sys

import trio

from ..cli import COMMANDS, Failure
from ..options import add_provider_args, provider_from, run_root_from, settings_from
from ..tracing.switch import live_tracing


def add_parser(sub) -> None:
    p = sub.add_parser("ask", help=COMMANDS["ask"])
    p.add_argument("prompt", help="the task, as the agent's first prompt")
    add_provider_args(p)
    p.add_argument("--json", action="store_true", help="machine output")


def run(args) -> int:
    import json

    from .. import logs
    from ..report import cost_rows
    from ..supervisor import open_supervisor

    settings = settings_from(args)  # bad input is refused before anything is written
    provider = provider_from(args)
    root = run_root_from(args, "mnemon ask")
    logs.configure(root, verbose=args.verbose)

    async def main():
        from ..progress import Progress

        try:
            async with open_supervisor(root, provider, settings, started_by="mnemon ask",
                                       provider_name=args.provider) as sup:
                node = sup.new_root(args.prompt)
                async with trio.open_nursery() as n:
                    n.start_soon(Progress(sup, enabled=sys.stderr.isatty() and
                                          not args.verbose).run)
                    await sup.run(node)
                    n.cancel_scope.cancel()
                return sup, node
        finally:
            await provider.aclose()

    with live_tracing(args.trace_content):
        sup, node = trio.run(main)
    logs.shutdown()
    if args.json:
        print(json.dumps({"agent": node.id, "reason": node.reason, "answer": node.answer,
                          "run_root": str(root), "cost": cost_rows(sup)}))
    if node.reason.startswith("failed"):
        raise Failure(f"the agent ended with {node.reason} (logs in {root})")
    if not args.json:
        print(node.answer or "")
        sys.stderr.write(f"mnemon: {node.reason}; logs in {root}\n")
    return 0
