"""Trace and span ids derived from the run, the agent and the turn: exporting a run twice gives
the same ids (a backend keeps one copy), and a live trace and one exported later from the same
logs agree.

A run is named by its ``run.json`` (``created_at`` and ``started_by``: what a copy or a move of
the run root keeps); each root agent's lineage is one trace (decision 0290), so a job's tasks, a
service's agents and an ``ask`` are each their own trace, and a child's spans are in its root's.
"""

from __future__ import annotations

import json
from hashlib import blake2b


def run_key(run_json: dict) -> str:
    """What names a run: its ``run.json`` without the format field, in a fixed encoding."""
    return json.dumps({k: run_json.get(k) for k in ("created_at", "started_by")},
                      sort_keys=True, separators=(",", ":"))


def _hex(h: blake2b) -> str:
    d = h.digest()
    if not any(d):  # an all-zero id is invalid in OTLP (never met: 2^-64)
        d = b"\x01" + d[1:]
    return d.hex()


def _digest(*parts: object, size: int) -> str:
    return _hex(blake2b("\x1f".join([str(p) for p in parts]).encode("utf-8"), digest_size=size))


def trace_id(run: str, root_agent: str) -> str:
    """The trace of one root agent's lineage: 16 bytes, hex."""
    return _digest("mnemon-trace", run, root_agent, size=16)


def agent_span_id(run: str, agent: str, segment: str) -> str:
    """An agent's ``invoke_agent`` span: ``segment`` is ``start`` for the span its log opens
    with, ``resumed@<at>`` for the one a resume (recorded at ``at``) opens."""
    return _digest("mnemon-agent", run, agent, segment, size=8)


def chat_span_id(run: str, agent: str, turn: int | None, attempt: int, at: str | None) -> str:
    """A provider call's ``chat`` span: the turn it opens and its attempt; a call that opens no
    turn (a summarisation request) by the time it was recorded."""
    if turn is None:
        return _digest("mnemon-call", run, agent, at, attempt, size=8)
    return _digest("mnemon-chat", run, agent, turn, attempt, size=8)


def tool_span_id(run: str, agent: str, turn: int, call_id: str) -> str:
    """A tool call's ``execute_tool`` span: its turn and the call's id."""
    return _digest("mnemon-tool", run, agent, turn, call_id, size=8)




class AgentIds:
    """One agent's ``chat`` and ``execute_tool`` span ids, the same as ``chat_span_id`` and
    ``tool_span_id`` give, with the run and the agent hashed once: a live trace makes two
    such ids per turn of every agent, and hashing the ~100 bytes of the run's key every time was
    most of their cost. (BLAKE2b over a prefix, then copied: the digest of the whole string.)"""

    __slots__ = ("_chat", "_call", "_tool")

    def __init__(self, run: str, agent: str):
        def head(kind: str) -> blake2b:
            return blake2b(f"{kind}\x1f{run}\x1f{agent}\x1f".encode("utf-8"), digest_size=8)

        self._chat, self._call, self._tool = head("mnemon-chat"), head("mnemon-call"), \
            head("mnemon-tool")

    def chat(self, turn: int | None, attempt: int, at: str | None) -> str:
        if turn is None:
            h = self._call.copy()
            h.update(f"{at}\x1f{attempt}".encode("utf-8"))
        else:
            h = self._chat.copy()
            h.update(f"{turn}\x1f{attempt}".encode("utf-8"))
        return _hex(h)

    def tool(self, turn: int, call_id: str) -> str:
        h = self._tool.copy()
        h.update(f"{turn}\x1f{call_id}".encode("utf-8"))
        return _hex(h)
