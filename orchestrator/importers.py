"""Recorded sessions from elsewhere, turned into one provider-neutral :class:`Trajectory`.

A replay driver feeds a Trajectory through the real agent loop; this module only reads files.
It is pure: no Trio, no network, nothing written.

The value
---------

``Trajectory(system, steps, source_format, name, children, parent_call, dropped, unanswered,
skipped)``

* ``system`` -- the system prompt, or ``None``.
* ``steps`` -- a list of :data:`Step`, a tagged union (tag field ``kind``):

  - ``UserStep(text, synthetic=False)`` (``"user"``) opens a user turn. ``synthetic`` is true only
    for the one factual line this module writes itself (:data:`OPENS_WITH_ASSISTANT`).
  - ``AssistantStep(blocks, stop_reason, model, usage)`` (``"assistant"``) is one assistant turn;
    ``blocks`` are ``session.records`` blocks (``Text``, ``Thinking``, ``ToolUse``, ``Opaque``);
    ``usage`` is what the recording reported, if anything (``input_tokens`` uncached only).
  - ``ToolStep(results)`` (``"tool"``) answers the previous assistant turn's calls.
  - ``RewindStep(to_step)`` (``"rewind"``) withdraws every step after index ``to_step`` of
    ``steps``; ``-1`` withdraws everything. Only Claude Code files produce it.

* ``source_format`` -- one of :data:`FORMATS`; ``name`` -- the session id, agent id or file stem.
* ``children`` -- sidechains (Claude Code subagents), each a Trajectory to import as a ``fresh``
  child; ``parent_call`` is the id of the parent's call that started it, when recorded.
* ``dropped`` -- tool results with no call to answer (or a second answer to one call), and repeated
  call ids within one message, left out; ``unanswered`` -- calls given :data:`NO_RESULT`;
  ``skipped`` -- counts of record kinds read past, by kind.

The guarantees, for every importer (:func:`check_invariants` tests them):

* the first step is a ``UserStep``; a recording that opens with an assistant turn gets the
  synthetic line :data:`OPENS_WITH_ASSISTANT` first;
* the ``ToolStep`` (or steps) right after an ``AssistantStep`` answer each of its calls exactly
  once, in a ``ToolResult`` whose ``content`` is a string; a call with no recorded result is
  answered ``NO_RESULT`` with ``is_error`` true; no result answers a call that is not in hand;
* text is kept verbatim: every user text, assistant text, thinking text, tool output and tool
  input of the recording appears unchanged (the documented joins and placeholders aside).

Public API: :func:`load`, :func:`detect_format`, :func:`load_neutral`, :func:`load_claude_code`,
:func:`load_codex`, :func:`load_openai_messages`, :func:`check_invariants`,
:class:`TrajectoryFormatError`. The mapping of each format is in ``docs/importers.md``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Union

import msgspec

from ..session.records import Block, Opaque, Text, Thinking, ToolResult, ToolUse, Usage

__all__ = [
    "FORMATS",
    "NO_RESULT",
    "OPENS_WITH_ASSISTANT",
    "AssistantStep",
    "RewindStep",
    "Step",
    "ToolStep",
    "Trajectory",
    "TrajectoryFormatError",
    "UserStep",
    "check_invariants",
    "detect_format",
    "load",
    "load_claude_code",
    "load_codex",
    "load_neutral",
    "load_openai_messages",
]

FORMATS = ("neutral", "claude-code", "codex", "openai-messages")

NO_RESULT = "no result was recorded for this call"
OPENS_WITH_ASSISTANT = "The recording opens with an assistant turn; no user prompt was recorded before it."

# --------------------------------------------------------------------------- the value


class _Step(msgspec.Struct, tag_field="kind", frozen=True, kw_only=True):
    pass


class UserStep(_Step, tag="user"):
    """Opens a user turn."""

    text: str
    synthetic: bool = False


class AssistantStep(_Step, tag="assistant"):
    """One assistant turn: its blocks in order, and what the recording said about it."""

    blocks: list[Block]
    stop_reason: str | None = None
    model: str | None = None
    usage: Usage | None = None


class ToolStep(_Step, tag="tool"):
    """Results answering the previous assistant turn's calls."""

    results: list[ToolResult]


class RewindStep(_Step, tag="rewind"):
    """Withdraw every step after index ``to_step`` (``-1``: every step)."""

    to_step: int


Step = Union[UserStep, AssistantStep, ToolStep, RewindStep]


class Trajectory(msgspec.Struct, kw_only=True):
    """One recorded session, provider-neutral; see the module docstring."""

    system: str | None
    steps: list[Step]
    source_format: str
    name: str | None = None
    children: list["Trajectory"] = []
    parent_call: str | None = None
    dropped: int = 0
    unanswered: int = 0
    skipped: dict[str, int] = {}


class TrajectoryFormatError(ValueError):
    """A file that no importer can read, or that breaks its format; the message is one line."""

    def __init__(self, path: str | Path, reason: str, *, line: int | None = None) -> None:
        self.path = str(path)
        self.reason = reason
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")


# --------------------------------------------------------------------------- entry points


def load(path: str | Path, format: str = "auto") -> Trajectory:
    """Import the recording at ``path``; ``format`` is ``"auto"`` or one of :data:`FORMATS`.

    Raises:
        TrajectoryFormatError: the format is unknown, cannot be detected, or the file breaks it.
    """
    path = Path(path)
    if format == "auto":
        format = detect_format(path)
    loader = _LOADERS.get(format)
    if loader is None:
        raise TrajectoryFormatError(path, f"unknown format {format!r} (known: auto, {', '.join(FORMATS)})")
    return loader(path)


def detect_format(path: str | Path) -> str:
    """Name the format of ``path`` from its extension and the keys of its first lines.

    Raises:
        TrajectoryFormatError: the file is missing, empty, not JSON, or matches no format.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TrajectoryFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    if not raw.strip():
        raise TrajectoryFormatError(path, "empty file")
    if path.suffix.lower() == ".json" or raw.lstrip()[:1] == b"[":
        try:
            whole = json.loads(raw)
        except ValueError:
            whole = None
        if _is_openai_messages(whole):
            return "openai-messages"
        if path.suffix.lower() == ".json":
            raise TrajectoryFormatError(
                path, "a .json file that is neither a list of chat messages nor {\"messages\": [...]}")
    seen = 0
    for number, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            if seen == 0:
                raise TrajectoryFormatError(path, "not JSON lines: the first line does not parse", line=number) from None
            continue  # a torn line further on: the loader will judge it
        seen += 1
        found = _sniff(obj)
        if found:
            return found
        if seen >= 50:
            break
    raise TrajectoryFormatError(
        path, f"no line matches a known recording format ({', '.join(FORMATS)}) in the first {seen} lines")


_CODEX_KINDS = {"session_meta", "response_item", "turn_context", "event_msg", "compacted"}
_CLAUDE_KINDS = {"user", "assistant", "system", "summary", "file-history-snapshot", "queue-operation",
                 "last-prompt", "progress", "attachment"}
_NEUTRAL_ROLES = {"system", "user", "assistant", "tool"}


def _sniff(obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return None
    kind = obj.get("type")
    if not isinstance(kind, str):  # (a list or an object there is no kind: not hashable either)
        kind = None
    if isinstance(obj.get("payload"), dict) and kind in _CODEX_KINDS:
        return "codex"
    if kind in _CLAUDE_KINDS and (
        "uuid" in obj or "parentUuid" in obj or "sessionId" in obj or "leafUuid" in obj or "messageId" in obj
    ):
        return "claude-code"
    if isinstance(obj.get("role"), str) and obj["role"] in _NEUTRAL_ROLES and \
            isinstance(obj.get("text"), str):
        return "neutral"
    return None


def _is_openai_messages(value: Any) -> bool:
    if isinstance(value, dict):
        value = value.get("messages")
    return (isinstance(value, list) and bool(value)
            and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in value))


# --------------------------------------------------------------------------- shared pieces


class _Steps:
    """The step list under construction: writes the opening line when an assistant comes first."""

    def __init__(self) -> None:
        self.steps: list[Step] = []

    def append(self, step: Step) -> int:
        if not self.steps and not isinstance(step, UserStep) and not isinstance(step, RewindStep):
            self.steps.append(UserStep(text=OPENS_WITH_ASSISTANT, synthetic=True))
        self.steps.append(step)
        return len(self.steps) - 1


class _Linear:
    """Builds steps from a recording that is already one line of events (every format but Claude Code).

    A user text that arrives while the turn in hand still has unanswered calls waits until that
    turn's results are written, so results always follow their assistant turn directly.
    """

    def __init__(self) -> None:
        self.out = _Steps()
        self.pending: dict[str, bool] = {}  # call id -> answered, in call order
        self.results: list[ToolResult] = []
        self.waiting_users: list[str] = []
        self.last_assistant: int | None = None
        self.dropped = 0
        self.unanswered = 0

    def user(self, text: str) -> None:
        if self.pending and not all(self.pending.values()):
            self.waiting_users.append(text)
            return
        self._close()
        self.out.append(UserStep(text=text))

    def assistant(self, blocks: list[Block], *, stop_reason: str | None, model: str | None = None,
                  usage: Usage | None = None) -> None:
        self._close()
        blocks, repeated = _unique_calls(blocks)
        self.dropped += repeated
        self.last_assistant = self.out.append(
            AssistantStep(blocks=blocks, stop_reason=stop_reason, model=model, usage=usage))
        self.pending = {b.id: False for b in blocks if isinstance(b, ToolUse)}

    def result(self, call_id: str, content: str, is_error: bool = False) -> None:
        if self.pending.get(call_id) is False:
            self.pending[call_id] = True
            self.results.append(ToolResult(tool_use_id=call_id, content=content, is_error=is_error))
        else:
            self.dropped += 1

    def set_usage(self, usage: Usage) -> None:
        """Attach usage to the latest assistant turn, if it has none yet."""
        i = self.last_assistant
        if i is not None:
            step = self.out.steps[i]
            assert isinstance(step, AssistantStep)
            if step.usage is None:
                self.out.steps[i] = msgspec.structs.replace(step, usage=usage)

    def _close(self) -> None:
        missing = [call for call, answered in self.pending.items() if not answered]
        self.unanswered += len(missing)
        results = self.results + [ToolResult(tool_use_id=c, content=NO_RESULT, is_error=True) for c in missing]
        if results:
            self.out.append(ToolStep(results=results))
        self.pending, self.results = {}, []
        for text in self.waiting_users:
            self.out.append(UserStep(text=text))
        self.waiting_users = []

    def finish(self, *, system: str | None, source_format: str, name: str | None,
               skipped: dict[str, int]) -> Trajectory:
        self._close()
        return Trajectory(system=system, steps=self.out.steps, source_format=source_format, name=name,
                          dropped=self.dropped, unanswered=self.unanswered, skipped=skipped)


def _unique_calls(blocks: list[Block]) -> tuple[list[Block], int]:
    """Drop a second call with an id already used in the message (the fold refuses it)."""
    seen: set[str] = set()
    kept: list[Block] = []
    for b in blocks:
        if isinstance(b, ToolUse):
            if b.id in seen:
                continue
            seen.add(b.id)
        kept.append(b)
    return kept, len(blocks) - len(kept)


def _read_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` of a JSONL file; a torn last line is skipped, others refused."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TrajectoryFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    lines = raw.split(b"\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            if number == len(lines) and not raw.endswith(b"\n"):
                return  # torn tail: the recorder died mid-line
            raise TrajectoryFormatError(path, "line is not JSON", line=number) from None
        if not isinstance(obj, dict):
            raise TrajectoryFormatError(path, f"line is a JSON {type(obj).__name__}, not an object", line=number)
        yield number, obj


def _placeholder(block: Any) -> str:
    """A short factual stand-in for a block with no text (an image, a document)."""
    if not isinstance(block, dict):
        return f"[{type(block).__name__} content not imported]"
    kind = block.get("type", "unknown")
    source = block.get("source")
    if isinstance(source, dict):
        media = source.get("media_type") or source.get("type") or "unknown"
        data = source.get("data")
        size = f", {len(data)} base64 characters" if isinstance(data, str) else ""
        return f"[{kind} ({media}{size}) not imported]"
    return f"[{kind} block not imported]"


def _bump(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


# --------------------------------------------------------------------------- neutral


def load_neutral(path: str | Path) -> Trajectory:
    """Import the neutral JSONL of ``data/trajectories`` (``role``/``text``/``tool_calls``/``tool_call_id``).

    Raises:
        TrajectoryFormatError: a line without a known ``role`` or with a non-string ``text``.
    """
    path = Path(path)
    b = _Linear()
    system: str | None = None
    skipped: dict[str, int] = {}
    for number, obj in _read_lines(path):
        role, text = obj.get("role"), obj.get("text")
        if not isinstance(role, str) or role not in _NEUTRAL_ROLES or not isinstance(text, str):
            raise TrajectoryFormatError(path, "not a neutral line: wants a role and a string text", line=number)
        if role == "system":
            if system is None and not b.out.steps:
                system = text
            else:
                b.user(text)  # a later system line is kept, as a user text
        elif role == "user":
            b.user(text)
        elif role == "assistant":
            blocks: list[Block] = [Text(text=text)] if text else []
            for call in obj.get("tool_calls") or []:
                blocks.append(ToolUse(id=str(call.get("id")), name=str(call.get("name")),
                                      input=call.get("arguments")))
            b.assistant(blocks, stop_reason="tool_use" if obj.get("tool_calls") else "end_turn")
        else:
            b.result(str(obj.get("tool_call_id")), text)
    return b.finish(system=system, source_format="neutral", name=path.stem, skipped=skipped)


# --------------------------------------------------------------------------- OpenAI-style messages


def _openai_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
            else:
                parts.append(_placeholder(part))
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


def _parse_arguments(arguments: Any) -> Any:
    """A JSON-encoded arguments string becomes its object; anything else stays as recorded."""
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            return arguments
        return value if isinstance(value, dict) else arguments
    return arguments


def load_openai_messages(path: str | Path) -> Trajectory:
    """Import a JSON array of chat messages, or ``{"messages": [...]}``.

    Raises:
        TrajectoryFormatError: the file is not such a JSON value.
    """
    path = Path(path)
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise TrajectoryFormatError(path, f"not a JSON file: {exc}") from None
    if not _is_openai_messages(value):
        raise TrajectoryFormatError(path, "not a list of chat messages nor {\"messages\": [...]}")
    messages = value["messages"] if isinstance(value, dict) else value
    default_model = value.get("model") if isinstance(value, dict) else None
    b = _Linear()
    system: str | None = None
    skipped: dict[str, int] = {}
    for m in messages:
        role = m["role"]
        if role in ("system", "developer"):
            text = _openai_text(m.get("content"))
            if system is None and not b.out.steps:
                system = text
            else:
                b.user(text)
        elif role == "user":
            b.user(_openai_text(m.get("content")))
        elif role == "assistant":
            blocks: list[Block] = []
            for key in ("reasoning_content", "reasoning"):
                if isinstance(m.get(key), str) and m[key]:
                    blocks.append(Thinking(text=m[key], signature=None))
            text = _openai_text(m.get("content"))
            if text:
                blocks.append(Text(text=text))
            calls = m.get("tool_calls") or []
            for call in calls:
                fn = call.get("function") or {}
                blocks.append(ToolUse(id=str(call.get("id")), name=str(fn.get("name")),
                                      input=_parse_arguments(fn.get("arguments"))))
            b.assistant(blocks, stop_reason="tool_use" if calls else "end_turn",
                        model=m.get("model") or default_model)
        elif role == "tool":
            b.result(str(m.get("tool_call_id")), _openai_text(m.get("content")))
        else:
            _bump(skipped, f"role:{role}")
    return b.finish(system=system, source_format="openai-messages", name=path.stem, skipped=skipped)


# --------------------------------------------------------------------------- Codex


_CODEX_CALLS = {"function_call", "custom_tool_call", "local_shell_call"}
_CODEX_OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}


def _codex_output(output: Any) -> tuple[str, bool]:
    """``output`` as a string, and whether the recording marks it failed."""
    if isinstance(output, str):
        return output, False
    if isinstance(output, list):
        return _openai_text(output), False
    if isinstance(output, dict):
        content = output.get("content")
        failed = output.get("success") is False
        if isinstance(content, str):
            return content, failed
        if isinstance(content, list):
            return _openai_text(content), failed
    return json.dumps(output, ensure_ascii=False), False


def _codex_usage(info: Any) -> Usage | None:
    if not isinstance(info, dict) or not isinstance(info.get("last_token_usage"), dict):
        return None
    u = info["last_token_usage"]
    cached = int(u.get("cached_input_tokens") or 0)
    return Usage(input_tokens=max(int(u.get("input_tokens") or 0) - cached, 0),
                 output_tokens=int(u.get("output_tokens") or 0), cache_read_tokens=cached,
                 cache_write_tokens=0)


def load_codex(path: str | Path) -> Trajectory:
    """Import a Codex CLI rollout: ``response_item`` lines, with ``event_msg`` only for usage.

    Raises:
        TrajectoryFormatError: a line that is not JSON (a torn last line is skipped).
    """
    path = Path(path)
    b = _Linear()
    system: str | None = None
    name: str | None = None
    model: str | None = None
    skipped: dict[str, int] = {}
    group: list[Block] = []  # the model response in hand
    group_open = False

    def close_group(usage: Usage | None = None) -> None:
        nonlocal group, group_open
        if group_open:
            calls = any(isinstance(x, ToolUse) for x in group)
            b.assistant(group, stop_reason="tool_use" if calls else "end_turn", model=model, usage=usage)
        group, group_open = [], False

    for _number, line in _read_lines(path):
        kind, payload = line.get("type"), line.get("payload")
        if not isinstance(payload, dict):
            _bump(skipped, str(kind))
            continue
        if kind == "session_meta":
            name = payload.get("id") or name
            base = payload.get("base_instructions")
            text = base.get("text") if isinstance(base, dict) else payload.get("instructions")
            if isinstance(text, str) and system is None and not b.out.steps:
                system = text
            continue
        if kind == "turn_context":
            model = payload.get("model") or model
            continue
        if kind == "event_msg":
            if payload.get("type") == "token_count":
                usage = _codex_usage(payload.get("info"))
                if group_open:
                    close_group(usage)
                elif usage is not None:
                    b.set_usage(usage)
                b.last_assistant = None  # one token count per model response
            else:
                _bump(skipped, f"event_msg:{payload.get('type')}")
            continue
        if kind == "compacted":
            close_group()
            if isinstance(payload.get("message"), str):
                b.user(payload["message"])
            continue
        if kind != "response_item":
            _bump(skipped, str(kind))
            continue
        item = payload.get("type")
        if not isinstance(item, str):  # (unhashable, and no kind of item: skipped as unknown)
            item = None
        if item == "message":
            role = payload.get("role")
            content = payload.get("content") or []
            if role == "assistant":
                group_open = True
                for part in content:
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        group.append(Text(text=part["text"]))
                    else:
                        group.append(Opaque(provider="openai", block=part))
                continue
            close_group()
            text = _openai_text(content)
            if role in ("developer", "system") and system is None and not b.out.steps:
                system = text
            else:
                b.user(text)
        elif item == "reasoning":
            group_open = True
            for part in payload.get("summary") or []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    group.append(Thinking(text=part["text"], signature=None))
            for part in payload.get("content") or []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    group.append(Thinking(text=part["text"], signature=None))
            if payload.get("encrypted_content"):
                group.append(Opaque(provider="openai", block=payload))
        elif item in _CODEX_CALLS:
            group_open = True
            call_id = str(payload.get("call_id") or payload.get("id"))
            if item == "function_call":
                group.append(ToolUse(id=call_id, name=str(payload.get("name")),
                                     input=_parse_arguments(payload.get("arguments"))))
            elif item == "custom_tool_call":
                group.append(ToolUse(id=call_id, name=str(payload.get("name")), input=payload.get("input")))
            else:
                group.append(ToolUse(id=call_id, name="local_shell", input=payload.get("action")))
        elif item in _CODEX_OUTPUTS:
            close_group()
            content, failed = _codex_output(payload.get("output"))
            b.result(str(payload.get("call_id") or payload.get("id")), content, failed)
        elif item in ("web_search_call", "image_generation_call"):
            group_open = True
            group.append(Opaque(provider="openai", block=payload))
        else:
            _bump(skipped, f"response_item:{item}")
    close_group()
    return b.finish(system=system, source_format="codex", name=name, skipped=skipped)


# --------------------------------------------------------------------------- Claude Code


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
                         and isinstance(p.get("text"), str) else _placeholder(p) for p in content)
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
                texts.append(_placeholder(block))
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

        out = _Steps()
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

    def _emit(self, unit: _Unit, out: _Steps) -> int:
        if unit.key[0] == "U":
            return out.append(UserStep(text=unit.text or ""))
        blocks, repeated = _unique_calls(unit.blocks)
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
        TrajectoryFormatError: a line that is not a JSON object (a torn last line is skipped).
    """
    path = Path(path)
    skipped: dict[str, int] = {}
    main: list[tuple[int, dict[str, Any]]] = []
    sidechains: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    session: str | None = None
    all_lines = list(_read_lines(path))
    conversation = [o for _n, o in all_lines if o.get("type") in ("user", "assistant")]
    whole_file_is_sidechain = bool(conversation) and all(o.get("isSidechain") for o in conversation)
    for i, (_n, obj) in enumerate(all_lines):
        kind = obj.get("type")
        if kind == "system":
            if obj.get("subtype") != "compact_boundary":
                _bump(skipped, f"system:{obj.get('subtype')}")
        elif kind not in ("user", "assistant"):
            _bump(skipped, str(kind))
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
                            dropped=tree.dropped, unanswered=tree.unanswered, skipped=skipped)
    children: dict[str, Trajectory] = {}
    for agent, lines in sidechains.items():
        sub = _ClaudeTree(lines)
        children[agent] = Trajectory(system=None, steps=sub.steps(), source_format="claude-code", name=agent,
                                     dropped=sub.dropped, unanswered=sub.unanswered)
    if subagents:
        for agent, file in _subagent_files(path, tree.agent_calls):
            if agent not in children:
                children[agent] = load_claude_code(file, subagents=False)
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


_LOADERS = {
    "neutral": load_neutral,
    "claude-code": load_claude_code,
    "codex": load_codex,
    "openai-messages": load_openai_messages,
}


# --------------------------------------------------------------------------- invariants


def check_invariants(trajectory: Trajectory) -> list[str]:
    """Every way ``trajectory`` (and its children) breaks the guarantees; empty when it keeps them."""
    problems: list[str] = []
    _check(trajectory, trajectory.name or "trajectory", problems)
    return problems


def _check(t: Trajectory, where: str, problems: list[str]) -> None:
    steps = t.steps
    if steps and not isinstance(steps[0], UserStep):
        problems.append(f"{where}: step 0 is {type(steps[0]).__name__}, not a UserStep")
    pending: dict[str, bool] | None = None  # the calls of the assistant step in hand
    for i, step in enumerate(steps):
        if isinstance(step, ToolStep):
            if pending is None:
                problems.append(f"{where}: step {i} is a ToolStep that follows no assistant step")
                continue
            for r in step.results:
                if not isinstance(r.content, str):
                    problems.append(f"{where}: step {i} result {r.tool_use_id} content is not a string")
                if pending.get(r.tool_use_id) is not False:
                    problems.append(f"{where}: step {i} result {r.tool_use_id} answers no call in hand")
                else:
                    pending[r.tool_use_id] = True
            continue
        if pending is not None:
            missing = [c for c, done in pending.items() if not done]
            if missing:
                problems.append(f"{where}: calls {missing} are not answered before step {i}")
        pending = None
        if isinstance(step, AssistantStep):
            ids = [b.id for b in step.blocks if isinstance(b, ToolUse)]
            if len(set(ids)) != len(ids):
                problems.append(f"{where}: step {i} repeats a call id")
            pending = {c: False for c in ids}
        elif isinstance(step, RewindStep):
            k = step.to_step
            if not -1 <= k < i or (k >= 0 and isinstance(steps[k], RewindStep)):
                problems.append(f"{where}: step {i} rewinds to {k}, not an earlier step")
            elif k >= 0 and isinstance(steps[k], AssistantStep) and any(
                    isinstance(b, ToolUse) for b in steps[k].blocks):
                problems.append(f"{where}: step {i} rewinds to {k}, between a call and its result")
    if pending is not None and not all(pending.values()):
        problems.append(f"{where}: calls at the end are not answered")
    for child in t.children:
        _check(child, f"{where}/{child.name}", problems)
