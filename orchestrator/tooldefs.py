"""What the model is told about its tools: the built-ins' definitions (``BUILTIN``, JSON
Schema) and the list offered to one agent (``tool_defs``).

Apart from ``tools`` (what each call does) because three layers read the definitions and only
one runs them: the loop sends the list with every request, the supervisor records it in each
agent's opening record, and an agent's own MCP servers (``servers``) must not take a built-in's
name. ``mnemon.orchestrator.tools.BUILTIN`` is this list, re-exported there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..providers.base import ToolDef

if TYPE_CHECKING:
    from .env import AgentEnv
    from .node import AgentNode

_TURNS = {"description": "turn ids: a list such as [3, 5] or a string such as \"3,5-9\"",
          "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "string"}]}
_AGENT = {"type": "string", "description": "a descendant's agent id, to read its transcript "
          "in its own id space (default: your own)"}

BUILTIN: list[ToolDef] = [
    ToolDef("context_survey",
            "Survey your context: the frontier (turns and residues in order, with bytes), used "
            "tokens against the eviction line, what a harness eviction would cut, large blocks, "
            "pending marks with the sweep gate's figures, and blocks proposed for marking.",
            {"type": "object", "properties": {}, "additionalProperties": False}),
    ToolDef("context_evict",
            "Evict a contiguous run of your context, turns [from, to], leaving a residue with an "
            "optional one-line note (at most 240 bytes) for yourself. Nothing is lost: evicted "
            "turns stay readable with transcript_read and transcript_grep. The span may not "
            "split a residue or touch the turn in hand.",
            {"type": "object", "properties": {
                "from": {"type": "integer", "description": "first turn id of the span"},
                "to": {"type": "integer", "description": "last turn id of the span"},
                "note": {"type": "string", "description": "one line, at most 240 bytes"}},
             "required": ["from", "to"], "additionalProperties": False}),
    ToolDef("context_mark",
            "Mark one block dead and write, now while it is in front of you, the shorter text "
            "that will replace it when the harness sweeps (cheap: changes nothing sent until "
            "the sweep). Blocks are addressed \"turn.index\" (e.g. \"41.2\").",
            {"type": "object", "properties": {
                "block": {"description": "\"turn.index\" or [turn, index]",
                          "anyOf": [{"type": "string"},
                                    {"type": "array", "items": {"type": "integer"},
                                     "minItems": 2, "maxItems": 2}]},
                "replacement": {"type": "string", "description": "shorter than the block"}},
             "required": ["block", "replacement"], "additionalProperties": False}),
    ToolDef("transcript_index",
            "Every turn of your transcript, oldest first: id, role, label, bytes, held "
            "(resident / evicted / withdrawn / swept), the residue over it, origin and source.",
            {"type": "object", "properties": {"agent": _AGENT}, "additionalProperties": False}),
    ToolDef("transcript_read",
            "Read turns back verbatim — resident, evicted, withdrawn or inherited from an "
            "ancestor — as the records that were written.",
            {"type": "object", "properties": {"turns": _TURNS, "agent": _AGENT},
             "required": ["turns"], "additionalProperties": False}),
    ToolDef("transcript_grep",
            "Search your whole transcript (your lineage included) with a regular expression, "
            "line by line: at most 100 hits, oldest first, and the total count.",
            {"type": "object", "properties": {
                "pattern": {"type": "string", "description": "a regular expression"},
                "turns": _TURNS, "agent": _AGENT},
             "required": ["pattern"], "additionalProperties": False}),
    ToolDef("agents_start",
            "Start a child agent on a task; returns at once with its id. A \"mnemon\" child "
            "inherits your whole context by reference (it can read all of your transcript); a "
            "\"fresh\" child starts empty. The task is its first prompt, verbatim.",
            {"type": "object", "properties": {
                "task": {"type": "string"},
                "kind": {"type": "string", "enum": ["mnemon", "fresh"], "default": "mnemon"}},
             "required": ["task"], "additionalProperties": False}),
    ToolDef("agents_wait",
            "Wait for children (default: all of yours) to end, or until timeout_s; returns each "
            "one's state, final answer and cost. Read a child's transcript with the transcript "
            "tools and its id.",
            {"type": "object", "properties": {
                "agents": {"type": "array", "items": {"type": "string"}},
                "timeout_s": {"type": "number"}}, "additionalProperties": False}),
    ToolDef("agents_cancel",
            "Cancel a child (and its descendants).",
            {"type": "object", "properties": {"agent": {"type": "string"}},
             "required": ["agent"], "additionalProperties": False}),
    ToolDef("agents_synod",
            "Fork n mnemon children from your context at once, each given the question (and "
            "its stance, if you give stances), and wait for all of them. reduce \"vote\" "
            "returns the majority of their normalised answers (a tie is reported, not broken); "
            "\"merge\" returns every answer for you to merge. Either way you get each child's "
            "id, state and answer, and can read any child's transcript with the transcript "
            "tools.",
            {"type": "object", "properties": {
                "question": {"type": "string", "description": "each child's prompt, verbatim"},
                "n": {"type": "integer", "minimum": 1, "maximum": 32,
                      "description": "how many children"},
                "reduce": {"type": "string", "enum": ["vote", "merge"], "default": "vote"},
                "stances": {"type": "array", "items": {"type": "string"},
                            "description": "optional: one stance per child, in order, added "
                                           "after the question"}},
             "required": ["question", "n"], "additionalProperties": False}),
]


_NO_TOOLS: list[ToolDef] = []


def tool_defs(env: "AgentEnv", node: "AgentNode | None" = None,
              table: dict[str, Any] | None = None) -> list[ToolDef]:
    """The tools offered to ``node``: the built-ins (unless its settings turn them off), the
    run's, then its lineage's own MCP servers' (``table``, default ``env.tools_for(node)``).

    The same list object while they are the same tools with the same name, description and
    schema, so what is derived from it per request (its encoded size, the opening record's tool
    list) is derived once. A few tool sets are remembered (agents with servers of their own
    have theirs); tuples compare element identity first, so a check costs no deep comparison
    while nothing changed."""
    builtin = BUILTIN if env.settings_for(node).builtin_tools else _NO_TOOLS
    if env.roles is not None:  # agents_start takes the roles this agent may start
        builtin = env.roles.builtins_for(node, builtin)
    if table is None:
        table = env.tools_for(node)
    key = (builtin, tuple((t, t.name, t.description, t.schema) for t in table.values()))
    slots = env.tool_sets
    for k, defs in slots:
        if k == key:
            return defs
    defs = builtin + [t.definition for t in table.values()]
    slots.insert(0, (key, defs))
    del slots[8:]
    return defs
