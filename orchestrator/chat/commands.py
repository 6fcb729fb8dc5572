"""The chat's slash commands, parsed (pure): ``/clear``, ``/rewind N``, ``/context``,
``/transcript index|read TURNS|grep PATTERN [TURNS]``, ``/fork TASK``, ``/steer ID TEXT``,
``/cost``, ``/help``, ``/quit``. Anything else is a prompt for the agent."""

from __future__ import annotations

import re
import shlex

from msgspec import Struct

from ...errors import UserError

HELP = [
    ("/clear", "withdraw every turn from the agent's context (they stay readable); cancels forks"),
    ("/rewind N", "withdraw every turn after turn N"),
    ("/context", "the survey of the agent's context, as a table"),
    ("/transcript grep PATTERN [TURNS]", "search the whole transcript (lineage included)"),
    ("/transcript index", "every turn of the transcript"),
    ("/transcript read TURNS", "turns back verbatim, e.g. 3 or 3,5-9"),
    ("/fork TASK", "a mnemon child on TASK (it inherits the context); its answer shows when it ends"),
    ("/steer ID TEXT", "a message to a running agent (a fork): its next request carries it"),
    ("/cost", "tokens, cache and price of the session so far"),
    ("/help", "this list"),
    ("/quit", "end the session (also Ctrl-D); Ctrl-C cancels the turn in flight"),
]


#: what an agent id may be made of (the run root's ``a<n>``, a job's own ids), bounded
_AGENT_ID = re.compile(r"[A-Za-z0-9._-]{1,100}")


class ChatInputError(UserError):
    """A slash command that cannot be run as typed: one line, the session goes on."""


class SlashCommand(Struct, frozen=True):
    name: str  # clear | rewind | context | transcript | fork | steer | cost | help | quit | prompt
    args: tuple[str, ...] = ()
    text: str = ""  # a prompt's, a fork task's or a message's text, verbatim


def parse_line(line: str) -> SlashCommand | None:
    """None for an empty line; a ``prompt`` for anything not starting with ``/``."""
    stripped = line.strip()
    if not stripped:
        return None
    if not stripped.startswith("/") or stripped.startswith("//"):
        return SlashCommand("prompt", text=line[1:] if stripped.startswith("//") else line)
    head, _, rest = stripped[1:].partition(" ")
    rest = rest.strip()
    name = head.lower()
    if name in ("quit", "exit", "q"):
        return SlashCommand("quit")
    if name in ("clear", "context", "cost", "help"):
        if rest:
            raise ChatInputError(f"/{name} takes no arguments")
        return SlashCommand(name)
    if name == "rewind":
        if not rest.isdigit():
            raise ChatInputError("/rewind takes a turn id: /rewind N keeps turns up to N")
        return SlashCommand("rewind", (rest,))
    if name == "fork":
        if not rest:
            raise ChatInputError("/fork needs a task: /fork TASK")
        return SlashCommand("fork", text=rest)
    if name == "steer":
        aid, _, text = rest.partition(" ")
        if not aid or not text.strip():
            raise ChatInputError("/steer needs an agent and a message: /steer ID TEXT")
        if not _AGENT_ID.fullmatch(aid):
            raise ChatInputError("/steer ID TEXT: an agent id is letters, digits, dots and dashes, like a2")
        return SlashCommand("steer", (aid,), text=text.strip())
    if name == "transcript":
        try:
            words = tuple(shlex.split(rest))
        except ValueError as e:
            raise ChatInputError(f"/transcript: {e}") from None
        sub = words[0] if words else ""
        if sub == "index" and len(words) == 1:
            return SlashCommand("transcript", words)
        if sub == "read" and len(words) == 2:
            return SlashCommand("transcript", words)
        if sub == "grep" and len(words) in (2, 3):
            return SlashCommand("transcript", words)
        raise ChatInputError("/transcript index | read TURNS | grep PATTERN [TURNS]")
    raise ChatInputError(f"unknown command /{head}; /help lists them (start with // to send "
                         "a line beginning with /)")
