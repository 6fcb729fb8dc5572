"""The list of tool definitions offered to one agent (``tool_defs``): what every request
carries and what each agent's opening record lists.

Apart from the table because three layers read the definitions and only one runs them: the loop
sends the list with every request, the supervisor records it in each agent's opening record, and
an agent's own MCP servers (``servers``) must not take a built-in's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...providers.base import ToolDef
from ..policy import says_ask_parent
from .builtin import APPROVALS_DECIDE, BUILTIN
from .files import FILE_TOOLS

if TYPE_CHECKING:
    from ..env import AgentEnv
    from ..node import AgentNode

__all__ = ["BUILTIN", "tool_defs"]

_NO_TOOLS: list[ToolDef] = []
_FILES: list[ToolDef] = [t.definition for t in FILE_TOOLS]
# ``approvals_decide`` is offered only in a run where some policy can say ``ask_parent``
# (``decides``): every other run's requests are that much shorter
_DECIDING: list[ToolDef] = BUILTIN + [APPROVALS_DECIDE.definition]
_VARIANTS: dict[tuple[bool, bool], list[ToolDef]] = {
    (False, False): BUILTIN, (True, False): _DECIDING,
    (False, True): BUILTIN + _FILES, (True, True): _DECIDING + _FILES}


def decides(env: "AgentEnv", node: "AgentNode | None") -> bool:
    """Whether the run can send a call up to an agent (``ask_parent`` in its policy, a role's,
    the agent's own or its recorded ancestry's): then every agent is offered
    ``approvals_decide`` (docs/policy.md)."""
    if says_ask_parent(env.settings.tool_policy):
        return True
    n = node
    while n is not None:
        if says_ask_parent(env.settings_for(n).tool_policy) or says_ask_parent(n.lineage_policy):
            return True
        n = n.parent
    roles = env.settings.roles
    return roles is not None and any(says_ask_parent(roles[r].policy) for r in roles.names())


def tool_defs(env: "AgentEnv", node: "AgentNode | None" = None,
              table: Mapping[str, Any] | None = None) -> list[ToolDef]:
    """The tools offered to ``node``: the built-ins (unless its settings turn them off), the
    run's, then its lineage's own MCP servers' (``table``, default ``env.tools_for(node)``).

    The same list object while they are the same tools with the same name, description and
    schema, so what is derived from it per request (its encoded size, the opening record's tool
    list) is derived once. A few tool sets are remembered (agents with servers of their own
    have theirs); tuples compare element identity first, so a check costs no deep comparison
    while nothing changed (each tool's ``definition`` is one object for as long as the tool is
    unchanged: a tool that builds a new one per read is compared by value)."""
    files = getattr(node, "workspace", None) is not None  # the file tools (docs/workspace.md)
    builtin = (_VARIANTS[decides(env, node), files] if env.settings_for(node).builtin_tools
               else (_FILES if files else _NO_TOOLS))
    if env.roles is not None:  # agents_start takes the roles this agent may start
        builtin = env.roles.builtins_for(node, builtin)
    if table is None:
        table = env.tools_for(node)
    offered = tuple((t, t.definition) for t in table.values())
    key = (builtin, offered)
    slots = env.tool_sets
    for k, defs in slots:
        if k == key:
            return defs
    defs = builtin + [d for _, d in offered]
    slots.insert(0, (key, defs))
    del slots[8:]
    return defs
