"""Shared by the workspace tests: a scripted model that makes given calls, turn by turn, on a
real supervisor and real logs."""

from __future__ import annotations

import json
from pathlib import Path

from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.orchestrator.workspace.spec import WorkspaceSpec
from mnemon.providers.cache import CacheModel
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import Text, ToolUse

from ..helpers import by_task  # noqa: F401  (a model scripted per agent, by its task)


def records(root: Path, agent: str = "a1") -> list[dict]:
    return [json.loads(line) for line in
            (root / "agents" / agent / "record.jsonl").read_text().splitlines()]


def results(root: Path, agent: str = "a1") -> list[dict]:
    return [x for r in records(root, agent) if r["t"] == "ToolResults" for x in r["results"]]


def snapshots(root: Path, agent: str = "a1") -> list[dict]:
    return [r for r in records(root, agent) if r["t"] == "WorkspaceSnapshot"]


def turns(script: list[list[tuple[str, dict]]], final: str = "finished"):
    """A model that makes ``script[i]``'s calls in its i-th response, then answers."""
    def policy(request, state):
        i = state["i"] = state.get("i", 0) + 1
        if i <= len(script):
            return [ToolUse(f"c{i}_{k}", name, args)
                    for k, (name, args) in enumerate(script[i - 1])], "tool_use"
        return [Text(final)], "end_turn"
    return policy


def provider(script, final: str = "finished") -> ScriptedProvider:
    return ScriptedProvider(policy=turns(script, final), cache_model=CacheModel())


async def ask(root: Path, script, *, workspace: WorkspaceSpec | None, task: str = "go",
              **settings):
    async with open_supervisor(root, provider(script),
                               Settings(model="scripted", workspace=workspace,
                                        **settings)) as sup:
        node = await sup.ask(task)
    return sup, node
