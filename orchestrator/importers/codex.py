"""Codex CLI rollout JSONL: ``response_item`` lines are the conversation, ``event_msg`` the metadata.

Codex records most things twice (the model-visible item and a UI event); reading one stream for
content and the other only for usage and response boundaries is what keeps a replay from sending
every message twice.

Two layouts are read. Since CLI 0.40 or so every line is an envelope, ``{"timestamp", "type",
"payload"}``. Before it (the Rust CLI up to about 0.3x, summer 2025) the first line is a bare header
``{"id", "timestamp", "instructions", "git"?}``, the model-visible items follow bare (``{"type":
"message", ...}``, ``{"type": "function_call", ...}``), and ``{"record_type": "state"}`` lines are the
recorder's bookkeeping. An older line is read as the envelope it would have been (:func:`_unwrap`),
so both layouts go through one mapping and give the same steps for the same items; the older one
simply has no model name and no usage, which it never recorded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...session.records import Block, Opaque, Text, Thinking, ToolUse, Usage
from .builder import Linear, bump
from .content import openai_text, parse_arguments
from .lines import read_lines
from .model import Trajectory

KINDS = {"session_meta", "response_item", "turn_context", "event_msg", "compacted"}
CALLS = {"function_call", "custom_tool_call", "local_shell_call"}
OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
ITEMS = {"message", "reasoning", "web_search_call", "image_generation_call"} | CALLS | OUTPUTS


def looks_like(obj: Any) -> bool:
    """Whether one parsed line has a rollout signature, of either layout.

    The envelope: a known ``type`` and an object ``payload``. The older layout: its header (no
    ``type``, a string ``id``, an ``instructions`` key), a ``{"record_type": "state"}`` line, or a
    bare item of a known type (a message with a ``role`` and a ``content`` list).
    """
    if not isinstance(obj, dict):
        return False
    kind = obj.get("type")
    if not isinstance(kind, str):
        return _is_old_header(obj) or obj.get("record_type") == "state"
    if kind in KINDS:
        return isinstance(obj.get("payload"), dict)
    if kind == "message":
        return isinstance(obj.get("role"), str) and isinstance(obj.get("content"), list)
    return kind in ITEMS and "payload" not in obj


def _is_old_header(obj: dict[str, Any]) -> bool:
    return "type" not in obj and isinstance(obj.get("id"), str) and "instructions" in obj


def _unwrap(line: dict[str, Any]) -> tuple[Any, Any]:
    """The line as ``(type, payload)`` of the envelope layout, whichever layout wrote it.

    A ``record_type`` line comes back as the kind ``record_type:<its value>`` with no payload, to
    be skipped and counted; the old header as ``session_meta``; a bare item as ``response_item``.
    """
    if "payload" in line:
        return line.get("type"), line.get("payload")
    if "record_type" in line:
        return f"record_type:{line['record_type']}", None
    if _is_old_header(line):
        return "session_meta", line
    kind = line.get("type")
    if isinstance(kind, str) and kind not in KINDS:
        return "response_item", line
    return kind, None


def _output(output: Any) -> tuple[str, bool]:
    """``output`` as a string, and whether the recording marks it failed."""
    if isinstance(output, str):
        return output, False
    if isinstance(output, list):
        return openai_text(output), False
    if isinstance(output, dict):
        content = output.get("content")
        failed = output.get("success") is False
        if isinstance(content, str):
            return content, failed
        if isinstance(content, list):
            return openai_text(content), failed
    return json.dumps(output, ensure_ascii=False), False


def _usage(info: Any) -> Usage | None:
    if not isinstance(info, dict) or not isinstance(info.get("last_token_usage"), dict):
        return None
    u = info["last_token_usage"]
    cached = int(u.get("cached_input_tokens") or 0)
    return Usage(input_tokens=max(int(u.get("input_tokens") or 0) - cached, 0),
                 output_tokens=int(u.get("output_tokens") or 0), cache_read_tokens=cached,
                 cache_write_tokens=0)


def load_codex(path: str | Path) -> Trajectory:
    """Import a Codex CLI rollout: ``response_item`` lines, with ``event_msg`` only for usage.

    The older layout (a bare header, bare items, ``record_type`` lines) is read as well.

    Raises:
        TrajectoryFormatError: no line of the file holds a JSON object (lines that hold none are
            otherwise skipped and listed in ``skipped_lines``; a line holding several is split).
    """
    path = Path(path)
    b = Linear()
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

    lines = read_lines(path)
    for _number, line in lines.objects:
        kind, payload = _unwrap(line)
        if not isinstance(payload, dict):
            bump(skipped, str(kind))
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
                usage = _usage(payload.get("info"))
                if group_open:
                    close_group(usage)
                elif usage is not None:
                    b.set_usage(usage)
                b.last_assistant = None  # one token count per model response
            else:
                bump(skipped, f"event_msg:{payload.get('type')}")
            continue
        if kind == "compacted":
            close_group()
            if isinstance(payload.get("message"), str):
                b.user(payload["message"])
            continue
        if kind != "response_item":
            bump(skipped, str(kind))
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
            text = openai_text(content)
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
        elif item in CALLS:
            group_open = True
            call_id = str(payload.get("call_id") or payload.get("id"))
            if item == "function_call":
                group.append(ToolUse(id=call_id, name=str(payload.get("name")),
                                     input=parse_arguments(payload.get("arguments"))))
            elif item == "custom_tool_call":
                group.append(ToolUse(id=call_id, name=str(payload.get("name")), input=payload.get("input")))
            else:
                group.append(ToolUse(id=call_id, name="local_shell", input=payload.get("action")))
        elif item in OUTPUTS:
            close_group()
            content, failed = _output(payload.get("output"))
            b.result(str(payload.get("call_id") or payload.get("id")), content, failed)
        elif item in ("web_search_call", "image_generation_call"):
            group_open = True
            group.append(Opaque(provider="openai", block=payload))
        else:
            bump(skipped, f"response_item:{item}")
    close_group()
    return b.finish(system=system, source_format="codex", name=name, skipped=skipped,
                    skipped_lines=lines.skipped)
