"""Named roles: what a roles table may say, and the check that it can run (docs/roles.md).

A role is a specialist an agent may delegate to by name::

    [roles.researcher]
    description = "finds and reads sources"     # what the model is told the role is for
    system = "You research one question."       # its system prompt
    provider = "openai"                          # its own provider, model and base URL
    model = "gpt-4.1-mini"
    tools = ["search", "fs__read_*"]             # the run's tools it is offered (names, globs)
    policy = { default = "allow", rule = [...] } # its tool policy (inline, or a file): it only
                                                 # narrows its parent's
    output = "finding.json"                      # its answer's output type
    budget = { tokens = 200000, usd = 0.5 }      # per agent of the role, its children included
    kind = "fresh"                               # fresh (default) | mnemon
    may_start = ["reviewer"]                     # the roles it may delegate to (default none)
    max_depth = 3                                # the deepest an agent of it may run (root: 0)

Pure: ``parse_roles`` judges a table already read (a TOML document's ``[roles]``, a job's, or
a dict from Python) and never touches a file itself — what a reference names (an output type, a
policy file, a user tool's import path, an MCP config) is resolved through the ``Resolvers``
the caller hands it (``roles.load`` hands the real ones). Every refusal is one ``RolesError``
line naming the source and the role, raised before anything runs.

A cycle of handoffs among ``may_start`` (a role that may start itself, or start a role that may
start it back) is refused at load, as an unknown name is (decision 0270): delegation runs one
way, and depth — each role's ``max_depth``, and the run's — bounds how far.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ...providers.typed import OutputType
from ..policy import PolicyError, ToolPolicy, parse_policy
from ..sandbox.spec import parse_sandbox
from ..tools.base import is_tool
from ..typed.load import OutputError, as_output_type
from ...errors import ConfigError

__all__ = ["KINDS", "PROVIDERS", "ROLE_KEYS", "Resolvers", "Role", "Roles", "RolesError",
           "check_tools", "parse_roles"]

KINDS = ("fresh", "mnemon")
PROVIDERS = ("scripted", "anthropic", "openai", "openai-responses", "bedrock", "vertex",
             "gemini", "azure-openai", "azure-openai-responses")
ROLE_KEYS = ("description", "system", "provider", "model", "base_url", "tools", "policy",
             "output", "budget", "kind", "may_start", "max_depth", "context_window", "keep",
             "max_turns", "mcp", "sandbox", "child_budget_usd", "child_budget_tokens",
             "child_max_turns")
# what a mnemon role may not set: its context begins byte-identical to its caller's, so its
# system prompt, tools, provider and model are its caller's (lineage.fork.PREFIX_FIELDS)
PREFIX_KEYS = ("system", "provider", "model", "base_url", "tools", "mcp")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,47}$")  # ``ask_<name>`` is a tool name


class RolesError(ConfigError, ValueError):
    """A roles table that cannot run: one line naming its source and the role."""


@dataclass(frozen=True)
class Role:
    """One role, judged. ``tools``: None offers the run's whole table (as an agent without a
    role has); a tuple offers only the run's tools those names or globs match, plus
    ``user_tools`` (the role's own, from import paths). ``policy`` is the role's own rules; an
    agent of the role runs under them narrowed by every ancestor's (``policy.combine``)."""

    name: str
    description: str | None = None
    system: str | None = None
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    tools: tuple[str, ...] | None = None
    user_tools: tuple[Any, ...] = ()
    policy: ToolPolicy | None = None
    output: OutputType | None = None
    budget_tokens: int | None = None
    budget_usd: float | None = None
    kind: str = "fresh"
    may_start: tuple[str, ...] = ()
    # the role's ``[sandbox]`` (docs/sandbox.md): it only narrows what its caller runs under
    sandbox: Any = None
    max_depth: int | None = None
    context_window: int | None = None
    keep: float | str | None = None
    max_turns: int | None = None
    mcp: tuple[Any, ...] = ()
    # the caps of a child an agent of the role starts without giving its own (docs/roles.md;
    # ``agents_start``'s ``budget_usd``, ``budget_tokens``, ``max_turns``)
    child_budget_usd: float | None = None
    child_budget_tokens: int | None = None
    child_max_turns: int | None = None

    def blurb(self) -> str:
        """What a caller's model is told of the role: its description, or its name."""
        return self.description or f"the {self.name} role"


@dataclass(frozen=True)
class Roles:
    """The roles of a run, by name, and ``root``: the role of its root agents (None: the root
    agents have no role — they may start none, and run as without roles)."""

    roles: Mapping[str, Role]
    root: str | None = None
    source: str = "roles"

    def __post_init__(self) -> None:
        check(self)

    def __getitem__(self, name: str) -> Role:
        return self.roles[name]

    def __contains__(self, name: object) -> bool:
        return name in self.roles

    def names(self) -> list[str]:
        return sorted(self.roles)

    def with_root(self, root: str | None) -> "Roles":
        """The same roles with another root role (``--role NAME``), checked."""
        if root is not None and root not in self.roles:
            raise RolesError(f"{self.source}: the root's role {root!r} is not a role (roles: "
                             f"{', '.join(self.names()) or 'none'})")
        return Roles(self.roles, root, self.source)


def check(roles: Roles) -> None:
    """What no single role can say of itself: every ``may_start`` names a role, the root's role
    is one."""
    for name, role in roles.roles.items():
        if role.name != name:
            raise RolesError(f"{roles.source}: role {name!r} is named {role.name!r}")
        for other in role.may_start:
            if other not in roles.roles:
                raise RolesError(f"{roles.source}: role {name}: may_start names {other!r}, "
                                 f"which is not a role (roles: {', '.join(sorted(roles.roles))})")
    cycle = _cycle(roles)
    if cycle:
        raise RolesError(f"{roles.source}: role {cycle[0]}: may_start makes a cycle of handoffs "
                         f"({' → '.join(cycle)}); delegation runs one way")
    if roles.root is not None and roles.root not in roles.roles:
        raise RolesError(f"{roles.source}: the root's role {roles.root!r} is not a role (roles: "
                         f"{', '.join(sorted(roles.roles)) or 'none'})")


def _cycle(roles: Roles) -> list[str]:
    """The first cycle of ``may_start`` handoffs, as the roles along it (the first repeated at
    the end), or ``[]``; roles in name order, so the answer is the same every time."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str]:
        state[name] = 1
        path.append(name)
        for other in roles.roles[name].may_start:
            if state.get(other) == 1:
                return path[path.index(other):] + [other]
            if other not in state:
                found = visit(other)
                if found:
                    return found
        path.pop()
        state[name] = 2
        return []

    for name in sorted(roles.roles):
        if name not in state:
            found = visit(name)
            if found:
                return found
    return []


def check_tools(roles: Roles, known: "set[str] | frozenset[str]") -> None:
    """Refuse a role naming a tool the run does not have: a plain name (no glob character) that
    is neither one of ``known`` (the run's user tools) nor a user tool of the role's own. An MCP
    server's tools (``server__tool``) are listed only once the server has started, so a name
    with ``__`` is left to match what the servers list, as a glob is."""
    for role in roles.roles.values():
        own = {t.name for t in role.user_tools}
        for name in role.tools or ():
            if any(c in name for c in "*?[") or "__" in name or name in known or name in own:
                continue
            have = sorted(known | own)
            raise RolesError(f"{roles.source}: role {role.name}: tools names {name!r}, which is "
                             f"not a tool of the run (tools: {', '.join(have) or 'none'})")


# --------------------------------------------------------------------------- parsing


def _refuse(ref: str, where: str) -> Any:
    raise RolesError(f"{where}: {ref!r} cannot be resolved here")


@dataclass(frozen=True)
class Resolvers:
    """How references are resolved, each ``(ref, where) -> object``, raising ``RolesError``:
    ``output`` (a JSON Schema file or ``module:Type``), ``policy`` (a policy file), ``tool``
    (a user tool's ``module:callable``), ``mcp`` (an MCP config file → server specs)."""

    output: Callable[[str, str], OutputType] = _refuse
    policy: Callable[[str, str], ToolPolicy] = _refuse
    tool: Callable[[str, str], Any] = _refuse
    mcp: Callable[[str, str], tuple[Any, ...]] = _refuse


def parse_roles(data: Any, source: str = "roles", *, root: str | None = None,
                resolve: Resolvers = Resolvers()) -> Roles:
    """Judge a roles table: ``{name: {key: value}}`` (a TOML document's ``[roles]`` table, or
    a whole document holding ``[roles.NAME]`` tables and an optional top-level ``role``, the
    root's). ``source`` names it in every message (``team.toml``, ``job.toml [roles]``)."""
    if not isinstance(data, dict):
        raise RolesError(f"{source}: roles are a table of [roles.NAME] tables")
    if "roles" in data:  # a whole roles file: [roles.NAME] …, role = "lead"
        extra = sorted(set(data) - {"roles", "role"})
        if extra:
            raise RolesError(f"{source}: unknown key {extra[0]!r} (a roles file holds "
                             "[roles.NAME] tables and role, the root's)")
        top = data.get("role")
        if top is not None and not isinstance(top, str):
            raise RolesError(f"{source}: role (the root's) must be a role's name")
        root = root if root is not None else top
        data = data["roles"]
        if not isinstance(data, dict):
            raise RolesError(f"{source}: roles are a table of [roles.NAME] tables")
    roles = {name: parse_role(name, body, source, resolve) for name, body in data.items()}
    return Roles(roles, root, source)


def parse_role(name: Any, body: Any, source: str, resolve: Resolvers = Resolvers()) -> Role:
    """One ``[roles.NAME]`` table (or a ``Role``, returned as it is once its name is checked)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise RolesError(f"{source}: role {name!r}: a role's name is a letter then at most 47 "
                         "letters, digits, _ or - (it names the tool ask_<role>)")
    where = f"{source}: role {name}"
    if isinstance(body, Role):
        return body
    if not isinstance(body, dict):
        raise RolesError(f"{where}: a role is a table of keys ({', '.join(ROLE_KEYS)})")
    unknown = sorted(set(body) - set(ROLE_KEYS))
    if unknown:
        raise RolesError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(ROLE_KEYS)})")
    kw: dict[str, Any] = {"name": name}
    for key in ("description", "system", "model", "base_url"):
        if key in body:
            kw[key] = _text(body[key], key, where)
    if "provider" in body:
        p = body["provider"]
        if p not in PROVIDERS:
            raise RolesError(f"{where}: provider must be one of {', '.join(PROVIDERS)}, not "
                             f"{p!r}")
        kw["provider"] = p
    kind = body.get("kind", "fresh")
    if kind not in KINDS:
        raise RolesError(f"{where}: kind must be fresh or mnemon, not {kind!r}")
    kw["kind"] = kind
    if kind == "mnemon":
        set_ = [k for k in PREFIX_KEYS if k in body]
        if set_:
            raise RolesError(f"{where}: a mnemon role begins with its caller's context, so its "
                             f"system prompt, tools, provider and model are its caller's: it may "
                             f"not set {set_[0]} (make the role fresh to give it its own)")
    if "tools" in body:
        kw["tools"], kw["user_tools"] = _tools(body["tools"], where, resolve)
    if "policy" in body:
        kw["policy"] = _policy(body["policy"], where, resolve)
    if "sandbox" in body:
        try:
            kw["sandbox"] = parse_sandbox(body["sandbox"], where=f"{where}: sandbox")
        except ConfigError as e:
            raise RolesError(str(e)) from None
    if "output" in body:
        out = body["output"]
        if isinstance(out, OutputType):
            kw["output"] = out
        elif isinstance(out, str):
            kw["output"] = resolve.output(out, f"{where}: output")
        elif isinstance(out, (dict, type)):  # from Python: a schema, or a Struct, dataclass…
            try:
                kw["output"] = as_output_type(out)
            except OutputError as e:
                raise RolesError(f"{where}: output: {e}") from None
        else:
            raise RolesError(f"{where}: output is a JSON Schema file or 'module:Type'")
    if "budget" in body:
        kw["budget_tokens"], kw["budget_usd"] = _budget(body["budget"], where)
    if "may_start" in body:
        ms = body["may_start"]
        if not isinstance(ms, list) or not all(isinstance(x, str) for x in ms):
            raise RolesError(f"{where}: may_start is a list of role names")
        kw["may_start"] = tuple(dict.fromkeys(ms))
    if "child_budget_usd" in body:
        v = body["child_budget_usd"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
            raise RolesError(f"{where}: child_budget_usd must be a number of dollars > 0, "
                             f"not {v!r}")
        kw["child_budget_usd"] = float(v)
    for key in ("max_depth", "context_window", "max_turns", "child_budget_tokens",
                "child_max_turns"):
        if key in body:
            v = body[key]
            least = 0 if key == "max_depth" else 1
            if isinstance(v, bool) or not isinstance(v, int) or v < least:
                raise RolesError(f"{where}: {key} must be a whole number ≥ {least}, not {v!r}")
            kw[key] = v
    if "keep" in body:
        k = body["keep"]
        if k != "auto" and (isinstance(k, bool) or not isinstance(k, (int, float))
                            or not 0 < k < 1):
            raise RolesError(f"{where}: keep must be 'auto' or a share between 0 and 1, not "
                             f"{k!r}")
        kw["keep"] = k
    if "mcp" in body:
        m = body["mcp"]
        if isinstance(m, (list, tuple)) and all(hasattr(x, "transport") for x in m):
            kw["mcp"] = tuple(m)  # from Python: server specs (``mcp.config.McpServerSpec``)
        elif isinstance(m, str):
            kw["mcp"] = tuple(resolve.mcp(m, f"{where}: mcp"))
        else:
            raise RolesError(f"{where}: mcp is an MCP config file (the mcpServers shape)")
    return Role(**kw)


def _text(v: Any, key: str, where: str) -> str:
    if not isinstance(v, str):
        raise RolesError(f"{where}: {key} must be a string")
    return v


def _tools(v: Any, where: str, resolve: Resolvers) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """Names and globs of the run's tools (``search``, ``fs__read_*``) stay names; an import
    path (``module:callable``) is a user tool of the role's own."""
    if not isinstance(v, list):
        raise RolesError(f"{where}: tools is a list of tool names, globs or 'module:callable'")
    names: list[str] = []
    own: list[Any] = []
    for item in v:
        if is_tool(item):  # a Tool (``@tool`` function, a class of one's own), from Python
            own.append(item)
            names.append(item.name)
        elif isinstance(item, str) and item:
            if ":" in item:
                t = resolve.tool(item, f"{where}: tools")
                own.append(t)
                names.append(t.name)
            else:
                names.append(item)
        else:
            raise RolesError(f"{where}: tools is a list of tool names, globs or "
                             "'module:callable'")
    mine = [t.name for t in own]
    if len(set(mine)) != len(mine):
        raise RolesError(f"{where}: two of its tools have the same name")
    for n in mine:
        if n.startswith("ask_"):
            raise RolesError(f"{where}: tool {n!r}: ask_<role> names are the roles' own")
    return tuple(names), tuple(own)


def _policy(v: Any, where: str, resolve: Resolvers) -> ToolPolicy:
    if isinstance(v, ToolPolicy):
        return v
    if isinstance(v, str):
        return resolve.policy(v, f"{where}: policy")
    if isinstance(v, dict):
        try:
            return parse_policy(v, f"{where} policy")
        except PolicyError as e:
            raise RolesError(str(e).removeprefix("policy ")) from None
    raise RolesError(f"{where}: policy is a policy file or an inline table (default, [[rule]])")


def _budget(v: Any, where: str) -> tuple[int | None, float | None]:
    if not isinstance(v, dict) or not v or set(v) - {"tokens", "usd"}:
        raise RolesError(f"{where}: budget is a table of tokens and/or usd")
    t, u = v.get("tokens"), v.get("usd")
    if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 1):
        raise RolesError(f"{where}: budget.tokens must be a whole number ≥ 1, not {t!r}")
    if u is not None and (isinstance(u, bool) or not isinstance(u, (int, float)) or not u > 0):
        raise RolesError(f"{where}: budget.usd must be a positive number, not {u!r}")
    return t, (float(u) if u is not None else None)
