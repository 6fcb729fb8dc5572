"""``mnemon serve [RUN_ROOT]`` — the HTTP service over one run root.

With RUN_ROOT the run is served read-only (a finished run, or one another process writes);
without it (or with ``--run-root``) the service owns a supervisor and starts agents on request.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .. import COMMANDS
from ....errors import UserError
from ...extras import require
from ...tracing.switch import live_tracing
from ..options import (add_listen_args, add_provider_args, add_workspace_arg, listen_from,
                       provider_from_args, run_root_from, settings_from_args,
                       unsandboxed_note)


def add_parser(sub) -> None:
    p = sub.add_parser("serve", help=COMMANDS["serve"])
    p.add_argument("run_root_ro", nargs="?", metavar="RUN_ROOT",
                   help="serve this existing run root read-only")
    add_listen_args(p, port=8765)
    p.add_argument("--no-resume", action="store_true",
                   help="over an existing run root, do not resume the agents a crash left "
                        "running (POST /v1/agents/{id}/resume resumes one)")
    p.add_argument("--max-agents", type=int, default=None, metavar="N",
                   help="agents running at once, roots and children together (default 64); "
                        "a new one past it is refused until one ends")
    add_provider_args(p)
    add_workspace_arg(p, serve=True)


def run(args) -> int:
    require("serve", "mnemon serve")
    import trio

    from ...._about import __version__
    from ...service.listen import bind
    from ...service.runs import Run
    from ...service.server import serve

    token, generated = listen_from(args)
    if args.max_agents is not None and args.max_agents < 1:
        raise UserError(f"--max-agents must be at least 1, not {args.max_agents}")
    settings = settings_from_args(args, **({"max_agents": args.max_agents}
                                      if args.max_agents is not None else {}))
    # bound before anything is written: an address in use leaves no run root behind
    sock = bind(args.host, args.port)
    if args.run_root_ro:
        from ....lineage.runroot import find_run_root, read_run_json

        path = Path(args.run_root_ro)
        root = find_run_root(path)
        read_run_json(root)
        run_ = Run(root, read_only=True, settings=settings)
        provider, provider_name = None, None
    else:
        root = run_root_from(args, "mnemon serve")
        provider = provider_from_args(args)
        provider_name = args.provider
        run_ = Run(root, read_only=False, settings=settings, provider_name=provider_name)
        from ... import logs

        logs.configure(root, verbose=args.verbose)
        note = unsandboxed_note(settings)
        if note is not None:
            sys.stderr.write(note)

    def ready(binds: list[str]) -> None:
        url = binds[0] if binds else f"http://{args.host}:{args.port}"
        mode = "read-only" if run_.read_only else f"provider {provider_name}"
        sys.stderr.write(f"mnemon: serving {root} ({mode}) on {url}\n")
        if generated:
            sys.stderr.write(f"mnemon: token {token}  (page: {url}/#token={token})\n")
        else:
            sys.stderr.write(f"mnemon: page: {url}/ (the token from --token or MNEMON_TOKEN)\n")
        sys.stderr.flush()

    try:
        with live_tracing(args.trace_content):
            trio.run(lambda: serve(run_, token=token, host=args.host, port=args.port,
                                   provider=provider, provider_name=provider_name,
                                   version=__version__, on_ready=ready,
                                   resume=not args.no_resume, sock=sock))
    except OSError as e:
        raise UserError(f"cannot serve on {args.host}:{args.port}: {e.strerror or e}") from None
    sys.stderr.write("mnemon: stopped\n")
    return 0
