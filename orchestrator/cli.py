"""The ``mnemon`` command line.

Each command lives in ``orchestrator/commands/<name>.py``. User errors and refusals exit 2 with
one line on stderr naming the state — never a traceback; a failure the user did not cause
exits 1.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ["demo", "ask", "run", "replay", "transcript", "context", "tree", "verify", "cost",
            "serve"]


class UserError(Exception):
    """Bad input or a refusal: exit 2, one line."""


class Failure(Exception):
    """A failure the user did not cause (a provider failing after retries): exit 1, one line."""


def build_parser() -> tuple[argparse.ArgumentParser, dict]:
    parser = argparse.ArgumentParser(prog="mnemon", description="Multi-agent orchestration for "
                                     "LLM agents: evict, never summarise.")
    parser.add_argument("-v", "--verbose", action="store_true", help="also log to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    handlers = {}
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"orchestrator.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"orchestrator.commands.{name}":
                continue
            raise
        mod.add_parser(sub)
        handlers[name] = mod.run
    return parser, handlers


class _Parser(argparse.ArgumentParser):
    pass


def main(argv: list[str] | None = None) -> int:
    parser, handlers = build_parser()

    def error(message: str) -> None:  # argparse's usage errors: one line, exit 2
        sys.stderr.write(f"mnemon: {message}\n")
        sys.exit(2)

    parser.error = error  # type: ignore[method-assign]
    for action in parser._subparsers._group_actions if parser._subparsers else []:
        for sp in getattr(action, "choices", {}).values():
            sp.error = error  # type: ignore[method-assign]
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    from session.errors import SessionError

    try:
        return int(handlers[args.command](args) or 0)
    except UserError as e:
        sys.stderr.write(f"mnemon: {e}\n")
        return 2
    except Failure as e:
        sys.stderr.write(f"mnemon: {e}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("mnemon: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except (SessionError, OSError) as e:
        sys.stderr.write(f"mnemon: {e}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
