"""The command line's options shared by the commands that run agents: provider selection and
run settings, as argparse flags turned into plain values for ``configure`` (which builds the
settings and the provider, for jobs and library callers alike).

Provider selection is the same everywhere: ``--provider scripted|anthropic|openai|openai-responses|
bedrock|vertex``,
``--model``, ``--base-url``, keys from ``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY``, and
``--context-window`` where the model's window is not known; ``--run-root DIR`` names where logs go.
"""

from __future__ import annotations

import datetime as _dt
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError, UserError
from ...session.constants import KEEP_FLOOR_TOKENS

if TYPE_CHECKING:
    from ..settings import Settings

# ``configure`` (the settings, the roles, the tools) is imported where it is used, not here:
# ``mnemon run --engine dask`` builds its parser with ``add_roles_args`` and starts its fork
# server before it imports the job machinery (decision 0470)


def add_provider_args(p, *, default_provider: str = "scripted", run_root: bool = True) -> None:
    """``run_root``: offer ``--run-root`` (a command that names its run root otherwise — ``mnemon
    mcp RUN_ROOT --agents`` — does without it)."""
    g = p.add_argument_group("provider")
    g.add_argument("--provider", default=default_provider,
                   choices=["scripted", "anthropic", "openai", "openai-responses",
                            "bedrock", "vertex",
                            # issue #48: Gemini, Vertex AI, Azure OpenAI (docs/providers.md)
                            "gemini", "azure-openai", "azure-openai-responses"],
                   help="which provider to call")
    g.add_argument("--model", default=None, help="the model name")
    g.add_argument("--base-url", default=None, help="any compatible server")
    g.add_argument("--context-window", type=int, default=None,
                   help="the model's context window in tokens, where it is not known")
    g.add_argument("--max-tokens", type=int, default=8192, help="output tokens per response")
    g.add_argument("--script", default=None, help="scripted provider: a JSONL script")
    g.add_argument("--cache-ttl", default="5m", choices=["5m", "1h"], help="prompt-cache TTL")
    g.add_argument("--store", action="store_true",
                   help="openai-responses: store responses server-side and chain an agent's "
                        "turns with previous_response_id (default: stateless, store false)")
    r = p.add_argument_group("run")
    if run_root:
        r.add_argument("--run-root", default=None,
                       help="where logs go (a new or empty directory)")
    r.add_argument("--keep", default="auto",
                   help="share of history an eviction keeps, or auto (default): the plan chooses "
                        "from the cache arithmetic, at most half, keeping the verbatim floor")
    r.add_argument("--keep-floor", type=int, default=None,
                   help="under --keep auto: tokens of recorded turns a cut keeps "
                        f"(default {KEEP_FLOOR_TOKENS})")
    r.add_argument("--max-turns", type=int, default=250)
    r.add_argument("--system", default=None, help="the system prompt")
    r.add_argument("--budget-usd", type=float, default=None)
    r.add_argument("--budget-tokens", type=int, default=None)
    r.add_argument("--trace-content", action="store_true",
                   help="traces (OTEL_EXPORTER_OTLP_ENDPOINT set): record message content, "
                        "which spans leave out by default (docs/tracing.md)")
    r.add_argument("--mcp", metavar="CONFIG", default=None,
                   help="MCP servers whose tools the agents get: a JSON or TOML file in the "
                        "mcpServers shape of Claude Code and Codex (docs/mcp.md)")
    r.add_argument("--policy", metavar="FILE", default=None,
                   help="which tool calls are allowed, denied or asked about: a TOML file of "
                        "rules (docs/policy.md)")
    add_roles_args(r)


def add_workspace_arg(p, *, serve: bool = False) -> None:
    """``--workspace DIR``: the root agents' files are DIR itself, worked in place (``mnemon
    ask``, ``chat``, ``serve``; docs/cli.md). For ``serve``, the workspace of an agent POSTed
    without one."""
    what = ("the workspace of agents started without one" if serve
            else "the root agent's workspace")
    p.add_argument("--workspace", metavar="DIR", default=None,
                   help=f"{what}: DIR worked in place, its file tools confined to it")
    p.add_argument("--sandbox", metavar="KIND", default=None, choices=["bwrap", "none"],
                   help="how the shell tool runs commands: bwrap (the default: bubblewrap) "
                        "or none (no sandbox: trusting the model with the machine; "
                        "docs/sandbox.md)")


def add_roles_args(group) -> None:
    """``--roles FILE`` and ``--role NAME`` (docs/roles.md)."""
    group.add_argument("--roles", metavar="FILE", default=None,
                       help="named roles the agents may delegate to: a TOML file of "
                            "[roles.NAME] tables (docs/roles.md)")
    group.add_argument("--role", metavar="NAME", default=None,
                       help="the root agent's role (default: the roles file's role)")


#: how the command line spells each setting in a refusal (``configure.settings_from``)
FLAGS = {"keep": "--keep", "keep_floor_tokens": "--keep-floor", "role": "--role",
         "roles_file": "--roles", "mcp_file": "--mcp", "policy_file": "--policy",
         "workspace": "--workspace", "sandbox": "--sandbox"}


def keep_arg(text: str | float) -> float | str:
    """``--keep``: ``auto`` or a share strictly between 0 and 1; anything else is refused."""
    from ..configure import keep_value

    return keep_value(text, name=FLAGS["keep"])


def values_from(args) -> dict[str, Any]:
    """The run's settings as plain values (``configure.settings_from``'s keys) from the flags
    of ``add_provider_args``: the command line's only part in building ``Settings``."""
    return dict(provider=args.provider, system=args.system, model=args.model,
                context_window=args.context_window, keep=args.keep,
                keep_floor_tokens=getattr(args, "keep_floor", None),
                max_turns=args.max_turns, max_tokens=args.max_tokens, cache_ttl=args.cache_ttl,
                budget_usd=args.budget_usd, budget_tokens=args.budget_tokens,
                mcp_file=getattr(args, "mcp", None), policy_file=getattr(args, "policy", None),
                roles_file=getattr(args, "roles", None), role=getattr(args, "role", None),
                workspace=getattr(args, "workspace", None),
                sandbox=getattr(args, "sandbox", None))


def settings_from_args(args, **over) -> Settings:
    """``Settings`` from the command line (``over``: settings the command fixes itself)."""
    from ..configure import settings_from

    return settings_from({**values_from(args), **over}, names=FLAGS)


def unsandboxed_note(settings: Settings) -> str | None:
    """The line ``ask``, ``chat`` and ``serve`` write to stderr as they start when the shell
    runs commands without a sandbox (``--sandbox none``): a shell trusted with the machine is
    said every time, never the quiet case (docs/sandbox.md)."""
    sb = settings.sandbox
    if sb is None or sb.kind != "none":
        return None
    return ('mnemon: ⚠ unsandboxed shell (--sandbox none): commands run directly on this '
            "machine, trusting the model with it (docs/sandbox.md)\n")


def policy_from(path: str):
    """``--policy FILE``: the policy, judged whole before anything runs (exit 2 naming the
    file and the rule otherwise)."""
    from ..configure import policy_file

    return policy_file(path)


def roles_from_args(args, tools: "frozenset[str] | None" = frozenset()):
    """``--roles FILE`` (and ``--role NAME``): the roles, judged whole before anything runs —
    exit 2 naming the file and the role otherwise; None without ``--roles``. ``tools``: the
    names of the run's user tools (None: checked later, by the job that knows them)."""
    path, root = getattr(args, "roles", None), getattr(args, "role", None)
    if path is None:
        if root is not None:
            raise ConfigError(f"--role {root} needs --roles FILE (the roles it names)",
                              key="role")
        return None
    from ..configure import roles_file

    return roles_file(path, role=root, provider=getattr(args, "provider", None), tools=tools)


def provider_from_args(args, **kw):
    """The provider the flags name (``--provider/--model/--base-url/--script/...``)."""
    from ..configure import provider_from

    return provider_from(dict(provider=args.provider, model=args.model, base_url=args.base_url,
                              script=getattr(args, "script", None), max_tokens=args.max_tokens,
                              cache_ttl=args.cache_ttl, store=getattr(args, "store", False)),
                         **kw)


def run_root_from(args, started_by: str) -> Path:
    if args.run_root:
        path = Path(args.run_root)
    else:
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = Path("mnemon-runs") / f"{stamp}-{secrets.token_hex(3)}"
    from ...lineage.runroot import create_run_root

    return create_run_root(path, started_by)


def add_listen_args(p, *, port: int, when: str = "") -> None:
    """A server's ``--host``, ``--port`` and ``--token`` (``mnemon serve``; ``mnemon mcp``
    with ``when="--http: "``), read back by ``listen_from``."""
    p.add_argument("--host", default="127.0.0.1",
                   help=f"{when}address to bind (default loopback)")
    p.add_argument("--port", type=int, default=port, help=f"{when}port (0: any free port)")
    p.add_argument("--token", default=None,
                   help=f"{when}the bearer token, at least 16 characters (default: "
                        "$MNEMON_TOKEN, else one is generated and printed once)")


def listen_from(args) -> tuple[str, bool]:
    """``(token, generated)`` for a server's ``--host/--port/--token`` (``mnemon serve``,
    ``mnemon mcp --http``): the port checked, the token resolved, a public address refused
    without a chosen token."""
    from ..service.auth import check_bind, resolve_token

    if not 0 <= args.port <= 65535:
        raise UserError(f"--port must be 0..65535, not {args.port}")
    token, generated = resolve_token(args.token)
    check_bind(args.host, not generated)
    return token, generated
