"""The run's transcript door as tools: what ``mnemon mcp`` answers, with no MCP in it.

Each tool takes ``agent`` (any agent of the run, validated as a path-safe id and confined to the
run root) plus the arguments and bounds of the model-facing tool of the same name, and answers
exactly what the CLI's ``--json`` prints (``mnemon transcript index|read|grep``, ``mnemon
context``, ``mnemon tree``). Read-only: logs are folded from outside and never written; the
reads are blocking, so callers run them in a worker thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...lineage.runroot import AGENT_ID, RunRootError, agent_dir, find_run_root, list_agents, \
    read_run_json
from ...session.constants import GREP_TIMEOUT_S
from ..tools import BUILTIN
from ...errors import UserError


class DoorError(UserError):
    """A refusal or a bad argument: answered to the caller as an error result, one line."""


_AGENT = {"type": "string", "description": "an agent id of the run, e.g. \"a1\" (see agents_list)"}


def _schema(name: str) -> dict:
    """The model-facing tool's schema with ``agent`` required (from outside there is no self)."""
    base = next(t for t in BUILTIN if t.name == name).input_schema
    props = dict(base.get("properties", {}))
    props["agent"] = _AGENT
    return {**base, "properties": props, "required": ["agent", *base.get("required", [])]}


def _description(name: str) -> str:
    text = next(t for t in BUILTIN if t.name == name).description
    return text.replace("your whole transcript", "an agent's whole transcript") \
        .replace("your transcript", "an agent's transcript").replace("your context", "an agent's context")


#: name → (description, input schema), in the order ``tools/list`` answers them
DOOR_TOOLS: dict[str, tuple[str, dict]] = {
    "agents_list": ("The agents of the run: id, parent, kind, turns and state (open, ended "
                    "or broken).", {"type": "object", "properties": {},
                                    "additionalProperties": False}),
    "tree": ("The lineage tree of the run, parents before children: one row per agent, as "
             "`mnemon tree --json`.", {"type": "object", "properties": {},
                                       "additionalProperties": False}),
    "transcript_index": (_description("transcript_index"), _schema("transcript_index")),
    "transcript_read": (_description("transcript_read"), _schema("transcript_read")),
    "transcript_grep": (_description("transcript_grep"), _schema("transcript_grep")),
    "context_survey": ("Survey an agent's context as it stands in its log: the frontier (turns "
                       "and residues in order, with bytes), history bytes, used tokens, pending "
                       "marks and the context window, as `mnemon context --json`.",
                       _schema("context_survey")),
}


class RunDoor:
    """Read-only tools over one run root."""

    def __init__(self, root: Path, *, grep_timeout_s: float = GREP_TIMEOUT_S):
        try:
            self.root = find_run_root(Path(root))
            read_run_json(self.root)
        except RunRootError as e:
            raise DoorError(str(e)) from None
        self.grep_timeout_s = grep_timeout_s

    def call(self, name: str, args: Any) -> Any:
        """Answer one tool call (blocking: run it in a worker thread)."""
        from ...session.errors import LogRefused, Refusal

        if name not in DOOR_TOOLS:
            raise DoorError(f"unknown tool {name!r}; the known tools are: "
                            f"{', '.join(DOOR_TOOLS)}")
        args = args or {}
        if not isinstance(args, dict):
            raise DoorError(f"{name} takes a JSON object")
        allowed = set(DOOR_TOOLS[name][1].get("properties", {}))
        extra = sorted(set(args) - allowed)
        if extra:
            raise DoorError(f"{name} takes no {', '.join(map(repr, extra))}")
        try:
            return getattr(self, name)(args)
        except (RunRootError, Refusal) as e:
            raise DoorError(str(e)) from None
        except LogRefused as e:
            raise DoorError(f"the log does not fold: {e} (run `mnemon verify` for every "
                            "problem)") from None

    # ------------------------------------------------------------------ the tools

    def tree(self, args: dict) -> list[dict]:
        from ...lineage.tree import build_tree, walk

        return [n.as_json() for n, _ in walk(build_tree(self.root))]

    def agents_list(self, args: dict) -> list[dict]:
        rows = {r["agent"]: r for r in self.tree(args)}
        return [{k: rows[a][k] for k in ("agent", "parent", "kind", "turns", "state")}
                for a in sorted(rows, key=lambda a: (len(a), a))]

    def transcript_index(self, args: dict) -> list[dict]:
        return self._door(args).index()

    def transcript_read(self, args: dict) -> list[dict]:
        return self._door(args).read(_turns(args, required=True))

    def transcript_grep(self, args: dict) -> dict:
        pattern = args.get("pattern")
        if not isinstance(pattern, str):
            raise DoorError("transcript_grep needs 'pattern' (a string)")
        return self._door(args).grep(pattern, _turns(args, required=False),
                                     timeout_s=self.grep_timeout_s)

    def context_survey(self, args: dict) -> dict:
        from ...lineage.view import open_agent
        from ...session.survey import survey

        _root, _agent, ctx, _torn = open_agent(self._agent_dir(args))
        return survey(ctx)

    # ------------------------------------------------------------------ confinement

    def _agent_dir(self, args: dict) -> Path:
        agent = args.get("agent")
        if not isinstance(agent, str) or not AGENT_ID.match(agent):
            raise DoorError(f"'agent' must be an agent id of the run such as \"a1\", "
                            f"not {agent!r}")
        path = agent_dir(self.root, agent)
        if not (path / "record.jsonl").is_file():
            known = ", ".join(list_agents(self.root)) or "none"
            raise DoorError(f"no agent {agent!r} in this run (its agents: {known})")
        return path

    def _door(self, args: dict):
        from ...lineage.view import open_door

        return open_door(self._agent_dir(args))


def _turns(args: dict, *, required: bool) -> Any:
    turns = args.get("turns")
    if turns is None:
        if required:
            raise DoorError("transcript_read needs 'turns' (a list such as [3, 5] or a string "
                            "such as \"3,5-9\")")
        return None
    if isinstance(turns, bool) or not isinstance(turns, (list, str, int)):
        raise DoorError(f"'turns' must be a list of ids or a string such as \"3,5-9\", "
                        f"not {turns!r}")
    return turns
