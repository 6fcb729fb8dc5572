"""Claude Code session JSONL: a tree of lines, read as one trajectory with rewinds and children.

Claude Code writes one API response as several lines, branches the uuid graph on parallel calls
and on edits, and keeps subagents in other files; this module rebuilds the conversation as the
model saw it and walks every branch once, the kept one last.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from ...session.records import Block, Opaque, Text, Thinking, ToolResult, ToolUse, Usage
from .builder import Steps, bump, unique_calls
from .content import placeholder
from .lines import read_lines
from .model import (
    NO_RESULT,
    AssistantStep,
    RewindStep,
    SkippedLine,
    Step,
    ToolStep,
    Trajectory,
    TrajectoryFormatError,
    UserStep,
)

KINDS = {"user", "assistant", "system", "summary", "file-history-snapshot", "queue-operation",
         "last-prompt", "progress", "attachment"}


def looks_like(obj: Any) -> bool:
    """Whether one parsed line has the transcript signature: a Claude Code ``type`` and an id field."""
    if not isinstance(obj, dict):
        return False
    kind = obj.get("type")
    return isinstance(kind, str) and kind in KINDS and (
        "uuid" in obj or "parentUuid" in obj or "sessionId" in obj or "leafUuid" in obj or "messageId" in obj)


def _anthropic_usage(u: Any) -> Usage | None:
    if not isinstance(u, dict):
        return None
    return Usage(input_tokens=int(u.get("input_tokens") or 0), output_tokens=int(u.get("output_tokens") or 0),
                 cache_read_tokens=int(u.get("cache_read_input_tokens") or 0),
                 cache_write_tokens=int(u.get("cache_creation_input_tokens") or 0))


def _anthropic_block(block: Any) -> Block:
    if isinstance(block, dict):
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            return Text(text=block["text"])
        if kind == "thinking" and isinstance(block.get("thinking"), str):
            return Thinking(text=block["thinking"], signature=block.get("signature"))
        if kind == "tool_use" and "id" in block:
            return ToolUse(id=str(block["id"]), name=str(block.get("name")), input=block.get("input"))
    return Opaque(provider="anthropic", block=block)


def _result_text(content: Any) -> str:
    """A tool_result's content: a string, or its blocks' texts joined with a newline."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] if isinstance(p, dict) and p.get("type") == "text"
                         and isinstance(p.get("text"), str) else placeholder(p) for p in content)
    return json.dumps(content, ensure_ascii=False)


class _Unit:
    """One node of the conversation as the model saw it: a user prompt, or one response and its results."""

    __slots__ = ("key", "first", "last", "lines", "text", "blocks", "seen", "results", "stop_reason",
                 "model", "usage", "parent", "children")

    def __init__(self, key: tuple[str, str], index: int) -> None:
        self.key = key
        self.first = self.last = index
        self.lines: list[dict[str, Any]] = []  # assistant lines (for parents); empty for a prompt
        self.text: str | None = None
        self.blocks: list[Block] = []
        self.seen: set[Any] = set()
        self.results: dict[str, ToolResult] = {}
        self.stop_reason: str | None = None
        self.model: str | None = None
        self.usage: Usage | None = None
        self.parent: _Unit | None = None
        self.children: list[_Unit] = []


def _block_key(block: Block) -> Any:
    if isinstance(block, ToolUse):
        return ("tool_use", block.id)
    return msgspec.json.encode(block)


class _ClaudeTree:
    """The conversation tree of one Claude Code conversation (the main one, or one sidechain)."""

    def __init__(self, lines: list[tuple[int, dict[str, Any]]]) -> None:
        self.units: dict[tuple[str, str], _Unit] = {}
        self.line_unit: dict[str, tuple[str, str]] = {}  # line uuid -> unit it belongs to
        self.alias: dict[str, str | None] = {}  # line uuid with no unit -> the uuid it continues
        self.dropped = 0
        self.unanswered = 0
        self.agent_calls: dict[str, str] = {}  # agentId -> the Task call that started it
        self.leaf: str | None = None
        self._build(lines)

    # ---- reading

    def _unit(self, key: tuple[str, str], index: int) -> _Unit:
        unit = self.units.get(key)
        if unit is None:
            unit = self.units[key] = _Unit(key, index)
        unit.last = max(unit.last, index)
        return unit

    def _build(self, lines: list[tuple[int, dict[str, Any]]]) -> None:
        calls: dict[str, tuple[str, str]] = {}  # tool_use id -> its response's key
        for _i, obj in lines:
            message = obj.get("message")
            if obj.get("type") == "assistant" and isinstance(message, dict):
                key = ("A", str(message.get("id") or obj.get("uuid")))
                for block in message.get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "tool_use" and "id" in block:
                        calls.setdefault(str(block["id"]), key)
        for i, obj in lines:
            uuid, kind, message = obj.get("uuid"), obj.get("type"), obj.get("message")
            if kind == "assistant" and isinstance(message, dict):
                unit = self._unit(("A", str(message.get("id") or uuid)), i)
                unit.lines.append(obj)
                content = message.get("content")
                if isinstance(content, str):
                    content = [{"type": "text", "text": content}] if content else []
                for raw in content if isinstance(content, list) else []:
                    block = _anthropic_block(raw)
                    key = _block_key(block)
                    if key in unit.seen:
                        continue
                    unit.seen.add(key)
                    unit.blocks.append(block)
                if message.get("stop_reason") is not None:
                    unit.stop_reason = message["stop_reason"]
                unit.model = message.get("model") or unit.model
                unit.usage = _anthropic_usage(message.get("usage")) or unit.usage
                if uuid:
                    self.line_unit[uuid] = unit.key
                    self.leaf = uuid
            elif kind == "user" and isinstance(message, dict):
                self._user_line(i, obj, message.get("content"), calls)
            elif uuid:
                parent = obj.get("parentUuid")
                if kind == "system" and obj.get("subtype") == "compact_boundary" and obj.get("logicalParentUuid"):
                    parent = obj["logicalParentUuid"]  # the summary continues the pre-compaction leaf
                self.alias[uuid] = parent
        for unit in self.units.values():
            unit.parent = self._parent_of(unit)

    def _user_line(self, i: int, obj: dict[str, Any], content: Any, calls: dict[str, tuple[str, str]]) -> None:
        uuid = obj.get("uuid")
        answered: tuple[str, str] | None = None
        texts: list[str] = []
        if isinstance(content, str):
            texts.append(content)
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                call = str(block.get("tool_use_id"))
                key = calls.get(call)
                if key is None or call in self._unit(key, i).results:
                    self.dropped += 1
                    continue
                target = self.units[key]
                target.results[call] = ToolResult(tool_use_id=call, content=_result_text(block.get("content")),
                                                  is_error=bool(block.get("is_error")))
                target.last = max(target.last, i)
                answered = key
                agent = obj.get("toolUseResult")
                if isinstance(agent, dict) and isinstance(agent.get("agentId"), str):
                    self.agent_calls.setdefault(agent["agentId"], call)
            elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            else:
                texts.append(placeholder(block))
        if texts:
            unit = self._unit(("U", str(uuid or i)), i)
            unit.text = "\n".join(texts)
            unit.lines.append(obj)
            key = unit.key
        elif answered is not None:
            key = answered
        else:
            key = None
        if uuid:
            if key is None:
                self.alias[uuid] = obj.get("parentUuid")
            else:
                self.line_unit[uuid] = key
                self.leaf = uuid

    def _resolve(self, uuid: str | None) -> _Unit | None:
        seen: set[str] = set()
        while uuid is not None and uuid not in seen:
            seen.add(uuid)
            if uuid in self.line_unit:
                return self.units[self.line_unit[uuid]]
            uuid = self.alias.get(uuid)
        return None

    def _parent_of(self, unit: _Unit) -> _Unit | None:
        for obj in unit.lines:
            parent = self._resolve(obj.get("parentUuid"))
            if parent is not None and parent is not unit:
                return parent
        return None

    # ---- writing

    def steps(self) -> list[Step]:
        ordered = sorted(self.units.values(), key=lambda u: u.first)
        roots: list[_Unit] = []
        state: dict[int, int] = {}  # id(unit) -> 1 on the walk in hand, 2 known to reach a root
        for unit in ordered:
            walk, p = [], unit
            while p is not None and state.get(id(p)) is None:
                state[id(p)] = 1
                walk.append(p)
                if p.parent is not None and state.get(id(p.parent)) == 1:
                    p.parent = None  # a parent chain that loops back (a broken file) is cut here
                p = p.parent
            for w in walk:
                state[id(w)] = 2
        for unit in ordered:
            (unit.parent.children if unit.parent is not None else roots).append(unit)
        latest: dict[int, int] = {}  # id(unit) -> latest line index in its subtree
        stack = [(u, False) for u in roots]
        while stack:  # post-order, iterative: long sessions outrun the recursion limit
            unit, done = stack.pop()
            if done:
                latest[id(unit)] = max([unit.last] + [latest[id(c)] for c in unit.children])
            else:
                stack.append((unit, True))
                stack.extend((c, False) for c in unit.children)
        active: set[int] = set()
        leaf = self._resolve(self.leaf)
        while leaf is not None and id(leaf) not in active:
            active.add(id(leaf))
            leaf = leaf.parent

        def main_of(units: list[_Unit]) -> _Unit | None:
            if not units:
                return None
            on_path = [u for u in units if id(u) in active]
            return on_path[0] if on_path else max(units, key=lambda u: latest[id(u)])

        out = Steps()
        work: list[tuple[str, Any]] = []
        main = main_of(roots)
        if main is not None:
            work.append(("unit", main))
        for other in reversed([r for r in roots if r is not main]):
            work.append(("rewind", -1))
            work.append(("unit", other))
        while work:
            op, arg = work.pop()
            if op == "rewind":
                out.append(RewindStep(to_step=arg))
                continue
            mark = self._emit(arg, out)
            main = main_of(arg.children)
            if main is not None:
                work.append(("unit", main))
            for other in reversed([c for c in arg.children if c is not main]):
                work.append(("rewind", mark))
                work.append(("unit", other))
        return out.steps

    def _emit(self, unit: _Unit, out: Steps) -> int:
        if unit.key[0] == "U":
            return out.append(UserStep(text=unit.text or ""))
        blocks, repeated = unique_calls(unit.blocks)
        self.dropped += repeated
        calls = [b.id for b in blocks if isinstance(b, ToolUse)]
        stop = unit.stop_reason if unit.stop_reason is not None else ("tool_use" if calls else None)
        mark = out.append(AssistantStep(blocks=blocks, stop_reason=stop, model=unit.model, usage=unit.usage))
        if calls:
            results = []
            for call in calls:
                result = unit.results.get(call)
                if result is None:
                    self.unanswered += 1
                    result = ToolResult(tool_use_id=call, content=NO_RESULT, is_error=True)
                results.append(result)
            mark = out.append(ToolStep(results=results))
        # results recorded for calls this message does not hold (a repeated id) are not sent
        self.dropped += sum(1 for call in unit.results if call not in calls)
        return mark


def load_claude_code(path: str | Path, *, subagents: bool = True) -> Trajectory:
    """Import a Claude Code session JSONL, its sidechains becoming ``children``.

    With ``subagents``, the sidechain files of 2.1.x (``<stem>/subagents/agent-*.jsonl``) and of
    older versions (``agent-<id>.jsonl`` beside the session, when a Task result names the id) are
    imported too.

    Raises:
        TrajectoryFormatError: no line of the file holds a JSON object (lines that hold none are
            otherwise skipped and listed in ``skipped_lines``; a line holding several is split).
    """
    path = Path(path)
    skipped: dict[str, int] = {}
    main: list[tuple[int, dict[str, Any]]] = []
    sidechains: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    session: str | None = None
    read = read_lines(path)
    all_lines = read.objects
    conversation = [o for _n, o in all_lines if o.get("type") in ("user", "assistant")]
    whole_file_is_sidechain = bool(conversation) and all(o.get("isSidechain") for o in conversation)
    for i, (_n, obj) in enumerate(all_lines):
        kind = obj.get("type")
        if kind == "system":
            if obj.get("subtype") != "compact_boundary":
                bump(skipped, f"system:{obj.get('subtype')}")
        elif kind not in ("user", "assistant"):
            bump(skipped, str(kind))
        if kind not in ("user", "assistant") and not obj.get("uuid"):
            continue  # no place in the tree
        session = session or obj.get("sessionId")
        if obj.get("isSidechain") and not whole_file_is_sidechain:
            sidechains.setdefault(str(obj.get("agentId") or "sidechain"), []).append((i, obj))
        else:
            main.append((i, obj))
    tree = _ClaudeTree(main)
    steps = tree.steps()
    name = session
    if whole_file_is_sidechain:
        name = next((o.get("agentId") for o in conversation if o.get("agentId")), session)
    trajectory = Trajectory(system=None, steps=steps, source_format="claude-code", name=name,
                            dropped=tree.dropped, unanswered=tree.unanswered, skipped=skipped,
                            skipped_lines=list(read.skipped))
    children: dict[str, Trajectory] = {}
    for agent, lines in sidechains.items():
        sub = _ClaudeTree(lines)
        children[agent] = Trajectory(system=None, steps=sub.steps(), source_format="claude-code", name=agent,
                                     dropped=sub.dropped, unanswered=sub.unanswered)
    if subagents:
        for agent, file in _subagent_files(path, tree.agent_calls):
            if agent not in children:
                try:
                    children[agent] = load_claude_code(file, subagents=False)
                except TrajectoryFormatError as err:  # one unreadable subagent file does not cost the session
                    trajectory.skipped_lines.append(
                        SkippedLine(path=err.path, line=0, reason=f"subagent file left out: {err.reason}"))
                    continue
                children[agent].name = agent
    for agent, child in children.items():
        child.parent_call = tree.agent_calls.get(agent)
    trajectory.children = list(children.values())
    return trajectory


def _subagent_files(path: Path, named: dict[str, str]) -> Iterable[tuple[str, Path]]:
    found: dict[str, Path] = {}
    for agent in named:
        for candidate in (path.parent / path.stem / "subagents" / f"agent-{agent}.jsonl",
                          path.parent / f"agent-{agent}.jsonl"):
            if candidate.is_file() and candidate != path:
                found.setdefault(agent, candidate)
    folder = path.parent / path.stem / "subagents"
    if folder.is_dir():
        for file in sorted(folder.glob("agent-*.jsonl")):
            found.setdefault(file.stem.removeprefix("agent-"), file)
    return found.items()
