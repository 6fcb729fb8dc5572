"""``mnemon replay TRAJ --out DIR`` — replay a recorded trajectory under context strategies."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ....session.constants import KEEP_FLOOR_TOKENS
from .. import COMMANDS
from ....errors import UserError
from ..options import keep_arg


def add_parser(sub) -> None:
    p = sub.add_parser("replay", help=COMMANDS["replay"])
    p.add_argument("trajectory", help="a recorded session (neutral JSONL, Claude Code, Codex, "
                                      "OpenAI messages JSON)")
    p.add_argument("--out", required=True, help="a new or empty directory for the reports")
    p.add_argument("--format", default="auto",
                   choices=["auto", "neutral", "claude-code", "codex", "openai-messages"])
    p.add_argument("--strategy", default="evict,compact",
                   help="comma-separated: evict, sweep, compact, rollover, clear-tool-uses, "
                        "anthropic-compaction, openai-compaction, none (default evict,compact: "
                        "eviction beside the compaction it replaces)")
    p.add_argument("--context-window", type=int, default=200_000)
    p.add_argument("--keep", default="auto",
                   help="auto (default: chosen per eviction from the cache arithmetic) or a share")
    p.add_argument("--keep-floor", type=int, default=None,
                   help="under --keep auto: tokens of recorded turns a cut keeps "
                        f"(default {KEEP_FLOOR_TOKENS})")
    p.add_argument("--cache-ttl", default="5m", choices=["5m", "1h"])
    p.add_argument("--model", default=None,
                   help="the model whose prices apply (default claude-sonnet-4-5, or the "
                        "--provider's default model)")
    p.add_argument("--provider", default=None,
                   choices=["anthropic", "openai", "openai-responses"],
                   help="also send every request to this provider (its wire, its reported "
                        "usage, priced as --model); the recording still plays each turn")
    p.add_argument("--base-url", default=None, help="with --provider: any compatible server")
    p.add_argument("--max-tokens", type=int, default=None,
                   help="with --provider: output tokens per request (default 8192)")
    p.add_argument("--prices", default=None, help="a TOML or JSON price table overriding ours")
    p.add_argument("--summary-tokens", type=int, default=2000)
    p.add_argument("--clear-at-least", type=int, default=0, metavar="TOKENS",
                   help="clear-tool-uses: clear only when at least this many tokens go at once "
                        "(the API's clear_at_least; default none)")
    p.add_argument("--seconds-per-request", type=float, default=15.0)
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--json", action="store_true", help="print summary.json")


def run(args) -> int:
    import json

    from ...importers import every_skipped_line, load
    from ...replay import replay, summary_table, write_reports
    from ...replay.strategies import STRATEGIES, Options

    names = [s.strip() for s in args.strategy.split(",") if s.strip()]
    bad = [s for s in names if s not in STRATEGIES]
    if bad or not names:
        raise UserError(f"unknown strategy {', '.join(bad) or '(none)'}: choose from "
                        f"{', '.join(STRATEGIES)}")
    args.keep = keep_arg(args.keep)
    if args.clear_at_least < 0:
        raise UserError(f"--clear-at-least must be a number of tokens, not {args.clear_at_least}")
    if args.keep_floor is not None and args.keep_floor < 0:
        raise UserError(f"--keep-floor must be a number of tokens, not {args.keep_floor}")
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out} exists and is not an empty directory")
    try:
        traj = load(args.trajectory, args.format)
    except FileNotFoundError:
        raise UserError(f"{args.trajectory}: no such file") from None
    if args.prices:
        from ....providers import prices

        try:
            prices.PRICES.update(prices.load_prices(args.prices))
        except (OSError, ValueError) as e:
            raise UserError(f"{args.prices}: {e}") from None
    wire = None
    if args.provider is not None:
        from ....providers.select import DEFAULT_MODELS, KEY_VARIABLES
        from ...configure import provider_from

        args.model = args.model or DEFAULT_MODELS[args.provider]
        spec = dict(provider=args.provider, model=args.model, base_url=args.base_url,
                    max_tokens=args.max_tokens or 8192, cache_ttl=args.cache_ttl)
        variable = KEY_VARIABLES[args.provider]
        if not os.environ.get(variable) and (args.provider == "anthropic" or args.base_url is None
                                             or "api.openai.com" in args.base_url):
            # refused here, before any run root (make_provider says the same, later)
            raise UserError(f"{variable} is not set (needed by --provider {args.provider})")

        def wire():
            return provider_from(spec)
    elif args.base_url is not None or args.max_tokens is not None:
        raise UserError("--base-url and --max-tokens go with --provider")
    args.model = args.model or "claude-sonnet-4-5"
    from ... import logs

    out.mkdir(parents=True, exist_ok=True)
    results = []
    for name in names:
        results.append(replay(traj, out / name, name, window=args.context_window,
                              model=args.model, ttl=args.cache_ttl, keep=args.keep,
                              seconds_per_request=args.seconds_per_request,
                              opts=Options(keep=args.keep, summary_tokens=args.summary_tokens,
                                           clear_at_least=args.clear_at_least),
                              on_root=lambda root: logs.configure(root, verbose=args.verbose),
                              keep_floor_tokens=args.keep_floor, wire=wire,
                              max_tokens=args.max_tokens))
    logs.shutdown()
    skipped = every_skipped_line(traj)
    summary = write_reports(results, out, plot=not args.no_plot, skipped=skipped)
    plotted = (out / "plot.png").is_file()
    if args.json:
        print(json.dumps(summary))
    else:
        print(summary_table(summary))
        print(f"\nreports: {out / 'summary.json'}, {out / 'per_turn.csv'}"
              + (f", {out / 'plot.png'}" if plotted else ""))
    if skipped:  # one line: how many, the first few; summary.json lists them all
        first = "; ".join(f"{s.path}:{s.line}: {s.reason}" for s in skipped[:3])
        sys.stderr.write(f"mnemon: replayed without {len(skipped)} unreadable line"
                         f"{'s' if len(skipped) > 1 else ''} of the recording ({first}"
                         f"{'; …' if len(skipped) > 3 else ''}; all in summary.json)\n")
    if not args.no_plot and not plotted:
        sys.stderr.write("mnemon: no plot: it needs matplotlib (pip install 'mnemon[plot]')\n")
    return 0
