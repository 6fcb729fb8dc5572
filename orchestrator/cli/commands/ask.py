"""``mnemon ask PROMPT`` — one root agent on one prompt with the configured provider."""

from __future__ import annotations

import sys

import trio

from ...approvals import reject_every_ask
from .. import COMMANDS
from ....errors import Failure, UserError
from ..options import (add_provider_args, add_workspace_arg, provider_from_args, run_root_from,
                       settings_from_args, unsandboxed_note)
from ...terminal import for_stream, shown
from ...tracing.switch import live_tracing
from ...typed.load import check_for, load_output


def add_parser(sub) -> None:
    p = sub.add_parser("ask", help=COMMANDS["ask"])
    p.add_argument("prompt", help="the task, as the agent's first prompt")
    add_provider_args(p)
    add_workspace_arg(p)
    p.add_argument("--json", action="store_true", help="machine output")
    p.add_argument("--output", default=None, metavar="SCHEMA",
                   help="a typed answer: a JSON Schema file (or module:Type) the answer must "
                        "fit; stdout is the output as one line of JSON")
    p.add_argument("--output-retries", type=int, default=2, metavar="N",
                   help="turns the model gets to fix an answer that does not fit (default 2)")


_nobody_to_ask = reject_every_ask("nobody to ask: mnemon ask is not interactive (mnemon chat "
                                  "and mnemon serve ask a person)")


def run(args) -> int:
    import json

    from ... import logs
    from ...report import cost_rows
    from ...supervisor import open_supervisor

    settings = settings_from_args(args)  # bad input is refused before anything is written
    output = _output(args)
    provider = provider_from_args(args)
    root = run_root_from(args, "mnemon ask")
    note = unsandboxed_note(settings)
    if note is not None:
        sys.stderr.write(note)
    logs.configure(root, verbose=args.verbose)

    async def main():
        from ...progress import Progress

        try:
            async with open_supervisor(root, provider, settings, started_by="mnemon ask",
                                       provider_name=args.provider) as sup:
                # nobody to ask at a one-shot command: a call the policy asks about is
                # rejected at once, saying so (docs/policy.md); chat and serve ask a person
                sup.approvals.decider = _nobody_to_ask
                node = sup.new_root(args.prompt, output=output)
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
        line = {"agent": node.id, "reason": node.reason, "answer": node.answer,
                "run_root": str(root), "cost": cost_rows(sup)}
        if output is not None:
            line["output"] = node.output
        print(json.dumps(line))
    if node.reason.startswith("failed"):  # the reason may quote the model: escaped
        raise Failure(f"the agent ended with {shown(node.reason)} (logs in {root})")
    if output is not None and node.output is None:  # ended (max_turns, budget, …) untyped
        raise Failure(f"the agent ended with {shown(node.reason)} before giving an answer of the "
                      f"output type {output.name} (logs in {root})")
    if not args.json:
        if output is not None:  # one line of JSON: the output
            print(for_stream(json.dumps(node.output, ensure_ascii=False, separators=(",", ":")),
                             sys.stdout))
        else:  # the model's text: escaped on a terminal, as it came into a pipe
            print(for_stream(node.answer or "", sys.stdout))
        sys.stderr.write(f"mnemon: {shown(node.reason)}; logs in {root}\n")
    return 0


def _output(args):
    """The answer's output type (``--output``), checked against the provider: a schema that
    cannot be used is refused in one line, exit 2, before anything is written."""
    if args.output is None:
        return None
    if args.output_retries < 0:
        raise UserError(f"--output-retries must be ≥ 0, not {args.output_retries}")
    output = load_output(args.output, retries=args.output_retries)
    check_for(output, args.provider, where=args.output)
    return output
