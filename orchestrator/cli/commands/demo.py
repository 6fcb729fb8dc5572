"""``mnemon demo`` — an offline end-to-end run on the scripted provider."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import trio

from .. import COMMANDS
from ....errors import UserError
from ..options import run_root_from
from ...tracing.switch import live_tracing


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help=COMMANDS["demo"])
    p.add_argument("--run-root", default=None, help="where logs go (a new or empty directory)")
    p.add_argument("--context-window", type=int, default=6500,
                   help="a small window, so that evictions happen (tokens)")
    p.add_argument("--latency", type=float, default=0.0, help="simulated provider latency (s)")
    p.add_argument("--trace-content", action="store_true",
                   help="traces (OTEL_EXPORTER_OTLP_ENDPOINT set): record message content")


def run(args) -> int:
    from ....lineage.tree import tree_text
    from ....providers.cache import CacheModel
    from ....providers.scripted import ScriptedProvider

    from ... import demo, logs
    from ...progress import Progress
    from ...report import cost_table, evictions
    from ...settings import Settings
    from ...supervisor import open_supervisor

    if args.context_window < 2000:
        raise UserError("--context-window must be at least 2000 tokens for the demo")
    root = run_root_from(args, "mnemon demo")
    logs.configure(root, verbose=args.verbose)
    settings = Settings(
        system="You are a careful archivist. Read the station papers you are given, keep notes "
               "of what matters, and delegate checks to children that share your history.",
        model="claude-sonnet-4-5", context_window=args.context_window, max_turns=60,
        price_model="claude-sonnet-4-5")
    provider = ScriptedProvider(policy=demo.policy, cache_model=CacheModel(),
                                latency_s=args.latency)
    t0 = time.perf_counter()

    async def main():
        async with open_supervisor(root, provider, settings, user_tools=demo.user_tools(),
                                   started_by="mnemon demo", provider_name="scripted") as sup:
            node = sup.new_root("Read the eight station papers (list_documents, read_document) "
                                "in order; then have a child find the harbour codeword and "
                                "report what it found.")
            async with trio.open_nursery() as n:
                progress = Progress(sup, enabled=sys.stderr.isatty())
                n.start_soon(progress.run)
                await sup.run(node)
                n.cancel_scope.cancel()
            return sup, node

    with live_tracing(args.trace_content):
        sup, node = trio.run(main)
    took = time.perf_counter() - t0
    print(f"answer ({node.id}, {node.reason}): {node.answer}\n")
    print("lineage:")
    print("\n".join(tree_text(root)))
    print("\nevictions:")
    print(evictions(sup))
    print("\ntokens, cache and price (priced as claude-sonnet-4-5):")
    print(cost_table(sup))
    print(f"\nlogs: {root}  ({len(sup.agents)} agents, {took:.2f} s)")
    print(f"read them back: mnemon tree {root}; mnemon transcript grep "
          f"{Path(root) / 'agents' / node.id} 'codeword'")
    logs.shutdown()
    return 0 if node.reason == "done" else 1
