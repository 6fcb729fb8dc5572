"""Options shared by the commands that run agents: provider selection and run settings.

Provider selection is the same everywhere: ``--provider scripted|anthropic|openai|openai-responses``,
``--model``, ``--base-url``, keys from ``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY``, and
``--context-window`` where the model's window is not known; ``--run-root DIR`` names where logs go.
"""

from __future__ import annotations

import datetime as _dt
import secrets
from pathlib import Path

from ..lineage.runroot import RunRootError, create_run_root
from ..session.constants import KEEP_FLOOR_TOKENS

from .cli import UserError
from .policy import PolicyError, load_policy
from .roles.book import check_providers
from .roles.load import load_roles
from .roles.spec import RolesError, check_tools
from .settings import Settings

KNOWN_WINDOWS = {"claude": 200_000, "gpt-4.1": 1_047_576, "gpt-4o": 128_000, "gpt-5": 400_000,
                 "o3": 200_000, "o4": 200_000, "scripted": None}


def add_provider_args(p, *, default_provider: str = "scripted") -> None:
    g = p.add_argument_group("provider")
    g.add_argument("--provider", default=default_provider,
                   choices=["scripted", "anthropic", "openai", "openai-responses"],
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
    r.add_argument("--run-root", default=None, help="where logs go (a new or empty directory)")
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


def add_roles_args(group) -> None:
    """``--roles FILE`` and ``--role NAME`` (docs/roles.md)."""
    group.add_argument("--roles", metavar="FILE", default=None,
                       help="named roles the agents may delegate to: a TOML file of "
                            "[roles.NAME] tables (docs/roles.md)")
    group.add_argument("--role", metavar="NAME", default=None,
                       help="the root agent's role (default: the roles file's role)")


def keep_arg(text: str | float) -> float | str:
    """``--keep``: ``auto`` or a share strictly between 0 and 1; anything else is refused."""
    if isinstance(text, str) and text.strip().lower() == "auto":
        return "auto"
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"--keep must be auto or a share between 0 and 1, not {text!r}") from None
    if not 0.0 < value < 1.0:
        raise UserError(f"--keep must be auto or between 0 and 1, not {text}")
    return value


def window_for(model: str | None) -> int | None:
    if not model:
        return None
    m = model.lower()
    for prefix, w in KNOWN_WINDOWS.items():
        if m.startswith(prefix) or f"/{prefix}" in m:
            return w
    return None


def settings_from(args, **over) -> Settings:
    from ..providers.select import DEFAULT_MODELS

    model = args.model or DEFAULT_MODELS.get(args.provider)
    window = args.context_window or window_for(model)
    base = dict(system=args.system, model=model, context_window=window, keep=keep_arg(args.keep),
                max_turns=args.max_turns, max_tokens=args.max_tokens, cache_ttl=args.cache_ttl,
                budget_usd=args.budget_usd, budget_tokens=args.budget_tokens)
    floor = getattr(args, "keep_floor", None)
    if floor is not None:
        if floor < 0:
            raise UserError(f"--keep-floor must be a number of tokens, not {floor}")
        base["keep_floor_tokens"] = floor
    if getattr(args, "mcp", None):
        from .mcp.config import McpConfigError, load_config

        try:
            base["mcp_servers"] = load_config(args.mcp)
        except McpConfigError as e:
            raise UserError(str(e)) from None
    if getattr(args, "policy", None):
        base["tool_policy"] = policy_from(args.policy)
    roles = roles_from_args(args)
    if roles is not None:
        base["roles"] = roles
    base.update(over)
    return Settings(**base)


def policy_from(path: str):
    """``--policy FILE``: the policy, judged whole before anything runs (exit 2 naming the
    file and the rule otherwise)."""
    try:
        return load_policy(path)
    except PolicyError as e:
        raise UserError(str(e)) from None


def roles_from_args(args, tools: "frozenset[str] | None" = frozenset()):
    """``--roles FILE`` (and ``--role NAME``): the roles, judged whole before anything runs —
    exit 2 naming the file and the role otherwise; None without ``--roles``. ``tools``: the
    names of the run's user tools (None: checked later, by the job that knows them)."""
    path, root = getattr(args, "roles", None), getattr(args, "role", None)
    if path is None:
        if root is not None:
            raise UserError(f"--role {root} needs --roles FILE (the roles it names)")
        return None
    try:
        roles = load_roles(path, root=root, provider=getattr(args, "provider", None))
        check_providers(roles, getattr(args, "provider", None))
        if tools is not None:
            check_tools(roles, tools)
    except RolesError as e:
        raise UserError(str(e)) from None
    return roles


def provider_from(args, **kw):
    from ..providers.errors import ProviderConfigError
    from ..providers.select import make_provider

    try:
        return make_provider(args.provider, model=args.model, base_url=args.base_url,
                             script=getattr(args, "script", None), max_tokens=args.max_tokens,
                             cache_ttl=args.cache_ttl, store=getattr(args, "store", False),
                             **kw)
    except ProviderConfigError as e:
        raise UserError(str(e)) from None
    except (OSError, ValueError) as e:
        raise UserError(str(e)) from None


def run_root_from(args, started_by: str) -> Path:
    if args.run_root:
        path = Path(args.run_root)
    else:
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = Path("mnemon-runs") / f"{stamp}-{secrets.token_hex(3)}"
    try:
        return create_run_root(path, started_by)
    except RunRootError as e:
        raise UserError(str(e)) from None


def listen_from(args) -> tuple[str, bool]:
    """``(token, generated)`` for a server's ``--host/--port/--token`` (``mnemon serve``,
    ``mnemon mcp --http``): the port checked, the token resolved, a public address refused
    without a chosen token."""
    from .service.auth import AuthConfigError, check_bind, resolve_token

    if not 0 <= args.port <= 65535:
        raise UserError(f"--port must be 0..65535, not {args.port}")
    try:
        token, generated = resolve_token(args.token)
        check_bind(args.host, not generated)
    except AuthConfigError as e:
        raise UserError(str(e)) from None
    return token, generated
