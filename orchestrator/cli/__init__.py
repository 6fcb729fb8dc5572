"""The ``mnemon`` command line: the parser, ``main``, the console entry point and its exit.

Who may import this package: the entry points alone — the ``mnemon`` console script
(``mnemon.orchestrator.cli:console``) and ``python -m mnemon`` — and the package's own modules.
The library below it (the engine, jobs, the service, MCP, the batch engine) never imports it,
nor ``argparse`` (``tests/test_knots.py`` holds both); a program uses ``mnemon`` and
``mnemon.orchestrator`` instead.

Each command lives in ``cli/commands/<name>.py``; the argparse plumbing the commands share
(provider flags, run root, ``--host/--port/--token``) in ``cli/options.py``. Every error of
mnemon is a ``mnemon.MnemonError`` carrying its exit code (``mnemon.errors``): the user's
mistakes and refusals exit 2 with one line on stderr naming the state — never a traceback; a
failure the user did not cause exits 1.
"""

from __future__ import annotations

import os
import sys

from ...errors import Failure, MnemonError, UserError

TYPE_CHECKING = False  # as typing's, without importing typing
if TYPE_CHECKING:
    import argparse

__all__ = ["COMMANDS", "LOG_LEVELS", "Failure", "UserError", "build_parser", "console", "leave",
           "main"]

#: every command and its one-line help, in the order ``--help`` lists them; the module
#: ``cli/commands/<name>.py`` is imported only when its command runs (or its own ``--help``)
COMMANDS = {
    "demo": 'offline end-to-end run on the scripted provider',
    "ask": 'one root agent on one prompt with the configured provider',
    "run": 'a batch job from a TOML job file (re-running resumes)',
    "replay": 'replay a recorded agent trajectory through the harness',
    "transcript": "the transcript door: index, read, grep an agent's whole lineage",
    "context": "the survey of an agent's context",
    "workspace": "an agent's files at a turn: ls, show, diff, export, patch, log",
    "tree": 'the lineage tree of a run',
    "verify": "refold every log and check every pointer's digest",
    "cost": 'tokens, cache reads/writes and price of a run, per agent',
    "results": "a run's results as a table: one row per task, typed output fields as columns",
    "score": "score a job's recorded answers again with its [[score]] tables (judges resume)",
    "compare": "runs (or a job's variants) compared task by task: score differences, cost",
    "trace": "a run's OpenTelemetry spans from its logs: OTLP/JSON, or sent to a receiver",
    "serve": "the HTTP service: JSON API, server-sent events and a page to watch a run",
    "mcp": "the transcript door of a run as an MCP server (stdio, or streamable HTTP)",
    "chat": "an interactive session with one root agent: streaming, history, slash commands",
}


LOG_LEVELS = ("debug", "info", "warning", "error")  # as ``logs.LEVELS``, without importing it


def _chosen(argv: list[str]) -> str | None:
    """The command named on the line: the first word that is not a top-level option."""
    for word in argv:
        if word in COMMANDS:
            return word
        if not word.startswith("-"):
            return None
    return None


def build_parser(argv: list[str] | None = None) -> tuple[argparse.ArgumentParser, dict]:
    """The parser; only the chosen command's module is imported (all of them when ``argv`` is
    None), so ``mnemon --help`` and the door commands load no provider or HTTP code."""
    import argparse
    import importlib

    parser = argparse.ArgumentParser(prog="mnemon", description="Multi-agent orchestration for "
                                     "LLM agents: evict, never summarise.")
    parser.add_argument("-V", "--version", action="store_true", help="print the version and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="also log to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _chosen(argv) if argv is not None else None
    handlers = {}
    for name, summary in COMMANDS.items():
        if argv is not None and name != chosen:
            sub.add_parser(name, help=summary)
            continue
        mod = importlib.import_module(f"{__package__}.commands.{name}")
        mod.add_parser(sub)
        handlers[name] = mod.run
    return parser, handlers


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser, handlers = build_parser(argv)

    def error(message: str) -> None:  # argparse's usage errors: one line, exit 2
        sys.stderr.write(f"mnemon: {message}\n")
        sys.exit(2)

    parser.error = error  # type: ignore[method-assign]
    for action in parser._subparsers._group_actions if parser._subparsers else []:
        for sp in getattr(action, "choices", {}).values():
            sp.error = error  # type: ignore[method-assign]
    args = parser.parse_args(argv)
    from ..terminal import shown

    if args.version:
        from ..._about import __version__

        print(f"mnemon {__version__}")
        return 0
    if not args.command:
        parser.print_help()
        return 2
    level = os.environ.get("MNEMON_LOG_LEVEL")
    if level is not None and level.strip().lower() not in LOG_LEVELS:
        sys.stderr.write(f"mnemon: MNEMON_LOG_LEVEL={level!r} is not one of "
                         f"{', '.join(LOG_LEVELS)}\n")
        return 2
    try:
        return int(handlers[args.command](args) or 0)
    except MnemonError as e:  # a diagnostic may quote a log or a model: escaped
        sys.stderr.write(f"mnemon: {shown(str(e))}\n")
        return e.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("mnemon: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:
        sys.stderr.write(f"mnemon: {shown(str(e))}\n")
        return 2


def console() -> None:
    """The ``mnemon`` command (and ``python -m mnemon``): its own process, so the collector is
    set for many agents first (``gctune``, decision 0261), and left without the interpreter's
    teardown once the command is done (``leave``).

    The commands typed most that need no parser — ``--version``, a read of named turns and a
    grep with no hit, answered from the fold checkpoint — are answered first by ``quick``,
    which imports neither argparse nor a decoder; whatever it does not answer, exactly as this
    parser and the door would, goes on to ``main`` (decision 0460)."""
    from .quick import answered

    try:
        code = answered(sys.argv[1:])
    except KeyboardInterrupt:  # as ``main`` ends these
        sys.stderr.write("mnemon: interrupted\n")
        code = 130
    except BrokenPipeError:
        code = 0
    if code is not None:
        leave_quick(code)
    from ..gctune import for_process

    for_process()
    leave(main())


def leave_quick(code: int) -> None:
    """End a process ``quick`` answered as ``leave`` does — ``atexit`` functions run, standard
    streams flushed, no teardown — without importing ``threading`` to join threads: nothing
    here started one (where something imported it, ``leave`` itself)."""
    import atexit

    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if run_exitfuncs is None or "threading" in sys.modules:
        return leave(code)
    run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a reader gone: what an ordinary exit does
        sys.exit(code)
    os._exit(code)


def leave(code: int) -> None:
    """End the process with ``code`` once what every normal exit does is done — threads joined,
    ``atexit`` functions run, standard streams flushed — but without the interpreter's
    teardown, which frees every module's objects one by one only for the process to end:
    0.1–0.2 s after a ``--engine dask`` run, with Dask and NumPy loaded (decision 0264).
    Where that cannot be done as it is here, the ordinary exit."""
    import atexit
    import threading

    shutdown = getattr(threading, "_shutdown", None)  # what the interpreter calls first
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or run_exitfuncs is None or threading.current_thread() \
            is not threading.main_thread():
        sys.exit(code)
    shutdown()  # non-daemon threads joined; executors shut down
    run_exitfuncs()  # logging's handlers flushed, Dask's and multiprocessing's exits
    _flush_files()  # what teardown would have written for files still open (a tool's, say)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a reader gone, a stream closed: what an ordinary exit does
        sys.exit(code)
    os._exit(code)


def _flush_files() -> None:
    """Flush every file object still open for writing: the interpreter's teardown would have
    closed (so flushed) each one, a user tool's module-level log file, say. ~1 ms: the
    collector tracks only what the command made after its imports were frozen."""
    import gc
    import io

    writers = (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom)
    for obj in gc.get_objects():
        if isinstance(obj, writers):
            try:
                if not obj.closed:
                    obj.flush()
            except Exception:  # as teardown would: one file's error is not the command's
                pass


if __name__ == "__main__":
    console()
