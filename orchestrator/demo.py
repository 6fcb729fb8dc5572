"""``mnemon demo``: the whole mission, offline, on the scripted provider.

A root agent reads the bundled station papers with a small context window, so harness
evictions happen; it leaves a note of its own with ``context_evict``; it forks a mnemon child
that greps the transcript for a codeword recorded only in the root's file, and the child forks
a grandchild that finds it too — through pointers into its grandparent's log. The policy below
plays the model: it reads only what a model would see (the rendered request).
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

from ..providers.base import Request
from ..session.records import Text, ToolUse

from .tools.function import UserTool

CODEWORD = re.compile(r"codeword: [A-Z]+-\d+")
DOCS = [f"doc-{i:02d}.md" for i in range(1, 9)]


def _corpus() -> Any:
    return resources.files(__package__) / "corpus"


def list_documents() -> list[str]:
    """The names of the bundled station papers, in order."""
    return sorted(p.name for p in _corpus().iterdir() if p.name.endswith(".md"))


def read_document(name: str) -> str:
    """Read one of the bundled station papers by name (see list_documents)."""
    if name not in list_documents():
        raise ValueError(f"no document named {name!r}; there are {', '.join(list_documents())}")
    return (_corpus() / name).read_text(encoding="utf-8")


def user_tools() -> list[UserTool]:
    return [UserTool(list_documents), UserTool(read_document)]


def _last_results(request: Request) -> list[dict[str, Any]]:
    for msg in reversed(request.messages):
        if msg["role"] == "user":
            return [b for b in msg["content"] if b.get("type") == "tool_result"]
        break
    return []


def _call(state: dict, tool: str, /, **inp: Any) -> tuple[list, str]:
    state["n"] = state.get("n", 0) + 1
    return [ToolUse(f"call_{state['n']}", tool, inp)], "tool_use"


def _say(text: str) -> tuple[list, str]:
    return [Text(text)], "end_turn"


def policy(request: Request, state: dict) -> tuple[list, str]:
    depth = request.meta.get("depth", 0)
    if depth == 0:
        return _root(request, state)
    if depth == 1:
        return _child(request, state)
    return _grandchild(request, state)


def _root(request: Request, state: dict) -> tuple[list, str]:
    phase = state.setdefault("phase", "read")
    results = _last_results(request)
    if phase == "read":
        i = state.setdefault("doc", 0)
        if i == 2 and not state.get("noted"):
            state["noted"] = True
            state["phase"] = "survey"
            return _call(state, "context_survey")
        if i < len(DOCS):
            state["doc"] = i + 1
            out = _call(state, "read_document", name=DOCS[i])
            out[0].insert(0, Text(f"Reading {DOCS[i]}."))
            return out
        state["phase"] = "delegate"
        return _call(state, "agents_start", kind="mnemon", task=(
            "Find the harbour codeword that the station papers recorded (it may have left my "
            "context; search the transcript), have a child of yours confirm it independently, "
            "and report both findings."))
    if phase == "survey":
        survey = json.loads(results[0]["content"])
        frontier = survey["frontier"]
        first = frontier[0]["id"] if frontier[0]["kind"] == "turn" else frontier[0]["span"][0]
        last = frontier[-2]["id"] if frontier[-2]["kind"] == "turn" else frontier[-2]["span"][1]
        state["phase"] = "read"
        return _call(state, "context_evict", **{
            "from": first, "to": last,
            "note": "doc-01 (Carrow Point keeper's log) holds the harbour codeword; "
                    "doc-02 is provisioning"})
    if phase == "delegate":
        child = json.loads(results[0]["content"])["agent"]
        state["phase"] = "wait"
        return _call(state, "agents_wait", agents=[child])
    if phase == "wait":
        outcome = json.loads(results[0]["content"])[0]
        state["phase"] = "done"
        return _say(f"Read all {len(DOCS)} station papers. My child {outcome['agent']} "
                    f"reports: {outcome['answer']}")
    return _say("Done.")


def _child(request: Request, state: dict) -> tuple[list, str]:
    phase = state.setdefault("phase", "grep")
    results = _last_results(request)
    if phase == "grep":
        state["phase"] = "delegate"
        return _call(state, "transcript_grep", pattern=CODEWORD.pattern)
    if phase == "delegate":
        hits = json.loads(results[0]["content"])["hits"]
        state["found"] = hits
        state["phase"] = "wait"
        return _call(state, "agents_start", kind="mnemon", task=(
            "Confirm the harbour codeword by searching the transcript yourself; answer with "
            "the codeword and the turn that recorded it."))
    if phase == "wait_start":
        pass
    if phase == "wait":
        child = json.loads(results[0]["content"])["agent"]
        state["phase"] = "answer"
        return _call(state, "agents_wait", agents=[child])
    if phase == "answer":
        outcome = json.loads(results[0]["content"])[0]
        hits = state.get("found") or []
        if hits:
            word = CODEWORD.search(hits[0]["line"]).group(0)  # type: ignore[union-attr]
            mine = f"the {word} line is in turn {hits[0]['turn']}"
        else:
            mine = "I found no codeword"
        state["phase"] = "done"
        return _say(f"{mine}; my child {outcome['agent']} confirms: {outcome['answer']}")
    return _say("Done.")


def _grandchild(request: Request, state: dict) -> tuple[list, str]:
    phase = state.setdefault("phase", "grep")
    results = _last_results(request)
    if phase == "grep":
        state["phase"] = "read"
        return _call(state, "transcript_grep", pattern=CODEWORD.pattern)
    if phase == "read":
        hits = json.loads(results[0]["content"])["hits"]
        if not hits:
            state["phase"] = "done"
            return _say("No codeword is recorded in my transcript.")
        state["hit"] = hits[0]
        state["phase"] = "answer"
        return _call(state, "transcript_read", turns=[hits[0]["turn"]])
    if phase == "answer":
        records = json.loads(results[0]["content"])
        source = records[0]["source"]
        hit = state["hit"]
        word = CODEWORD.search(hit["line"]).group(0)  # type: ignore[union-attr]
        state["phase"] = "done"
        return _say(f"{word}, recorded in turn {hit['turn']} of {source}")
    return _say("Done.")
