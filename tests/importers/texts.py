"""What a Trajectory holds, by kind of text, for counting against the raw file."""

from __future__ import annotations

import json
from pathlib import Path

from mnemon.orchestrator.importers import NO_RESULT, AssistantStep, ToolStep, Trajectory, UserStep
from mnemon.session.records import Text, Thinking, ToolUse

SAMPLES = Path(__file__).resolve().parent / "samples"
DEV = Path(__file__).resolve().parents[1] / "data" / "trajectories"

CLAUDE = SAMPLES / "claude" / "7d4c1e52-3b8a-4f0e-9a61-2c5d8e9f0b13.jsonl"
CLAUDE_GLUED = SAMPLES / "claude" / "4e8a0b17-5c2d-4f63-8a9e-1b7c3d5f2e90.jsonl"  # a glued line, a torn one
CODEX = SAMPLES / "codex" / "rollout-2026-01-15T14-03-00-0199a5e4-7c1b-7d20-8f3a-5b6c7d8e9f01.jsonl"
CODEX_OLD = SAMPLES / "codex" / "rollout-2025-09-30T08-00-00-5f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b.jsonl"
CODEX_BARE = SAMPLES / "codex" / "rollout-2025-08-18T10-12-31-3b0c9a52-6f1e-4d2a-9c7b-2e8f4a1d5c60.jsonl"  # before the envelope
OPENAI = SAMPLES / "openai" / "messages.json"


def texts(t: Trajectory) -> dict[str, list[str]]:
    """The trajectory's own texts in step order: user, assistant, thinking, arguments, output."""
    out: dict[str, list[str]] = {"user": [], "assistant": [], "thinking": [], "arguments": [], "output": []}
    for step in t.steps:
        if isinstance(step, UserStep) and not step.synthetic:
            out["user"].append(step.text)
        elif isinstance(step, AssistantStep):
            for b in step.blocks:
                if isinstance(b, Text):
                    out["assistant"].append(b.text)
                elif isinstance(b, Thinking):
                    out["thinking"].append(b.text)
                elif isinstance(b, ToolUse):
                    out["arguments"].append(json.dumps(b.input, ensure_ascii=False))
        elif isinstance(step, ToolStep):
            out["output"].extend(r.content for r in step.results if not (r.is_error and r.content == NO_RESULT))
    return out


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
