"""Agents on the scripted provider, with policies that play the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnemon.lineage.runroot import agent_source, make_loader
from mnemon.orchestrator import logs
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.usertools import UserTool
from mnemon.providers.cache import CacheModel
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import Text, ToolUse
from mnemon.session.resume import fold_file


@pytest.fixture(autouse=True)
def _quiet_logs():
    logs.quiet()
    yield
    logs.quiet()  # and after: a command the test ran may have left them on a closed file


def page(i: int) -> str:
    """A 2 KiB page whose first line names it; only page 3 holds the marker."""
    body = "".join(f"line {k} of page {i}: the quick brown fox jumps over the lazy dog\n"
                   for k in range(30))
    if i == 3:
        body += "MARKER-ONLY-ON-PAGE-3\n"
    return f"page {i}\n" + body


async def fetch(i: int) -> str:
    """Fetch page i (async: autojump-clock tests must not wait on worker threads)."""
    return page(i)


def fetch_tool() -> UserTool:
    return UserTool(fetch)


def last_results(request) -> list[dict]:
    msg = request.messages[-1]
    if msg["role"] != "user":
        return []
    return [b for b in msg["content"] if b.get("type") == "tool_result"]


def call(state: dict, tool: str, /, **inp):
    state["n"] = state.get("n", 0) + 1
    return [ToolUse(f"c{state['n']}", tool, inp)], "tool_use"


def say(text: str):
    return [Text(text)], "end_turn"


def reader_policy(pages: int):
    """Fetch pages 1..n one per turn, then answer."""

    def policy(request, state):
        i = state.get("i", 0) + 1
        state["i"] = i
        if i <= pages:
            return call(state, "fetch", i=i)
        return say(f"read {pages} pages")

    return policy


def settings(**kw) -> Settings:
    base = dict(system="test agent", model="claude-sonnet-4-5", context_window=None)
    base.update(kw)
    return Settings(**base)


def provider(policy, **kw) -> ScriptedProvider:
    return ScriptedProvider(policy=policy, cache_model=CacheModel(), **kw)


def refold(root: Path, agent: str):
    src = agent_source(agent)
    ctx, _ = fold_file(root / src, src, loader=make_loader(root))
    return ctx


def records(root: Path, agent: str) -> list[dict]:
    return [json.loads(l) for l in (root / agent_source(agent)).read_text().splitlines()]
