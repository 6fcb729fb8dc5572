"""Helpers for the policy tests: a scripted model that makes given calls and remembers what it
was sent, a counting tool, the records of a log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mnemon.orchestrator import logs
from mnemon.orchestrator.usertools import UserTool
from mnemon.providers.cache import CacheModel
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import Text, ToolUse


@pytest.fixture(autouse=True)
def _quiet_logs():
    """Log lines of an earlier test's run root (a command run in-process) are not ours."""
    logs.quiet()
    yield
    logs.quiet()  # and after: a command the test ran may have left them on a closed file


def caller(*calls: tuple[str, str, dict], answer: str = "finished"):
    """A model (scripted policy) that makes each ``(id, tool, input)`` call in its own turn,
    then answers; ``seen`` holds the tool results it was sent."""
    seen: list[dict] = []

    def policy(request, state):
        msg = request.messages[-1] if request.messages else None
        if msg and msg["role"] == "user" and isinstance(msg["content"], list):
            seen.extend(b for b in msg["content"] if b.get("type") == "tool_result")
        i = state.get("i", 0)
        state["i"] = i + 1
        if i < len(calls):
            cid, tool, inp = calls[i]
            return [ToolUse(cid, tool, inp)], "tool_use"
        return [Text(answer)], "end_turn"

    policy.seen = seen  # type: ignore[attr-defined]
    return policy


def provider(policy) -> ScriptedProvider:
    return ScriptedProvider(policy=policy, cache_model=CacheModel())


class Counter:
    """A user tool ``write(path, text)`` that counts its calls and keeps their inputs."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

        async def write(path: str, text: str = "") -> str:
            """Write a file (pretend)."""
            self.calls.append({"path": path, "text": text})
            return f"wrote {path}"

        self.tool = UserTool(write)


def records(root: Path, agent: str = "a1") -> list[dict]:
    return [json.loads(l) for l in (root / "agents" / agent / "record.jsonl").read_text()
            .splitlines()]


def verify(root: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "mnemon", "verify", str(root)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
