"""The pipeline example's tools and the scripted model that plays every role (offline).

``play`` answers the way each role's model would, from what it is sent; it tells the roles
apart by ``request.meta["role"]`` (an agent of a named role carries it in every request).
"""

from __future__ import annotations

import json
import re

SOURCES = {
    "physics-handbook": "Water boils at 100 °C at sea level (101.325 kPa).",
    "astronomy-notes": "Sunlight takes about 8 minutes 20 seconds to reach the Earth.",
    "survey-2020": "Mount Everest is 8,848.86 m high (the 2020 survey).",
}
TOPICS = {"boil": "physics-handbook", "sunlight": "astronomy-notes", "everest": "survey-2020"}

reports: list[str] = []


def search(query: str) -> str:
    """Search the library; returns the best source's name and its text."""
    q = query.lower()
    for word, name in TOPICS.items():
        if word in q:
            return json.dumps({"source": name, "text": SOURCES[name]})
    return json.dumps({"source": None, "text": "nothing found"})


def read_source(name: str) -> str:
    """Read a source of the library by name."""
    return SOURCES.get(name, f"no source named {name!r}")


def write_report(text: str) -> str:
    """Write a report to the shared folder."""
    reports.append(text)
    return "written"


def _results(request) -> list[str]:
    last = request.messages[-1]
    return [b.get("content") or "" for b in last.get("content") or ()
            if isinstance(b, dict) and b.get("type") == "tool_result"]


def _task(request) -> str:
    first = request.messages[0]
    return " ".join(b.get("text") or "" for b in first.get("content") or ()
                    if isinstance(b, dict) and b.get("type") == "text")


def play(request, state):
    role = request.meta.get("role")
    step = state["step"] = state.get("step", 0) + 1
    said = _results(request)
    if role == "lead":
        if step == 1:
            return [{"type": "tool_use", "id": "r", "name": "ask_researcher",
                     "input": {"task": _task(request)}}], "tool_use"
        if step == 2:
            state["finding"] = said[0]
            return [{"type": "tool_use", "id": "v", "name": "ask_reviewer",
                     "input": {"task": f"Check this finding: {said[0]}"}}], "tool_use"
        verdict = json.loads(said[0])
        mark = "reviewed" if verdict["ok"] else "NOT confirmed"
        return [{"type": "text", "text": f"{state['finding']} [{mark}: {verdict['note']}]"}], \
            "end_turn"
    if role == "researcher":
        if step == 1:
            return [{"type": "tool_use", "id": "s", "name": "search",
                     "input": {"query": _task(request)}}], "tool_use"
        found = json.loads(said[0])
        return [{"type": "text", "text": f"{found['text']} (source: {found['source']})"}], \
            "end_turn"
    if role == "reviewer":
        task = _task(request)
        source = (re.search(r"\(source: ([\w-]+)\)", task) or [None, "unknown"])[1]
        if step == 1:  # it tries to write as well: its policy denies that
            return [{"type": "tool_use", "id": "w", "name": "write_report",
                     "input": {"text": "looks fine"}},
                    {"type": "tool_use", "id": "q", "name": "read_source",
                     "input": {"name": source}}], "tool_use"
        text = said[-1]
        claim = task.removeprefix("Check this finding: ").split(" (source:")[0]
        verdict = {"ok": claim == text, "source": source,
                   "note": "matches its source" if claim == text else "differs from its source"}
        return [{"type": "text", "text": json.dumps(verdict)}], "end_turn"
    return [{"type": "text", "text": "no role"}], "end_turn"
