"""Auto-detection: every sample names its format; anything else is refused in one clear line."""

from __future__ import annotations

import json

import pytest

from mnemon.orchestrator.importers import FORMATS, TrajectoryFormatError, detect_format, load

from .texts import CLAUDE, CLAUDE_GLUED, CODEX, CODEX_BARE, CODEX_OLD, DEV, OPENAI, SAMPLES


@pytest.mark.parametrize(("path", "expected"), [
    (CLAUDE, "claude-code"),
    (CLAUDE.with_suffix("") / "subagents" / "agent-a7f3c21.jsonl", "claude-code"),
    (CODEX, "codex"),
    (CODEX_OLD, "codex"),
    (CODEX_BARE, "codex"),
    (CLAUDE_GLUED, "claude-code"),
    (OPENAI, "openai-messages"),
    (DEV / "mini-gemini3pro__sympy__sympy-13091.jsonl", "neutral"),
], ids=lambda v: getattr(v, "name", v))
def test_samples(path, expected):
    assert detect_format(path) == expected
    assert load(path).source_format == expected
    assert load(path, format=expected).source_format == expected


def test_every_sample_is_covered():
    assert len(list(SAMPLES.rglob("*.json*"))) == 7
    assert set(FORMATS) == {"neutral", "claude-code", "codex", "openai-messages"}


def test_an_array_in_a_jsonl_file_is_openai_messages(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    assert detect_format(path) == "openai-messages"


def test_claude_code_detected_past_leading_snapshots(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}) + "\n")
    assert detect_format(path) == "claude-code"


@pytest.mark.parametrize(("content", "name", "message"), [
    ("this is not json\nat all\n", "notes.jsonl", "not JSON lines: no line of the file parses as JSON"),
    ("", "empty.jsonl", "empty file"),
    ("   \n\n", "blank.jsonl", "empty file"),
    ('{"hello": "world"}\n{"n": 1}\n', "other.jsonl", "no line matches a known recording format"),
    ('{"a": 1}', "config.json", "neither a list of chat messages"),
    ("[1, 2, 3]", "numbers.json", "neither a list of chat messages"),
    ("\x00\x01\x02garbage", "blob.bin", "not JSON lines"),
])
def test_garbage_is_refused_naming_the_path(tmp_path, content, name, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(TrajectoryFormatError) as info:
        load(path)
    text = str(info.value)
    assert str(path) in text and message in text and "\n" not in text
    assert info.value.path == str(path)


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(TrajectoryFormatError, match="cannot read"):
        load(tmp_path / "nope.jsonl")
    with pytest.raises(TrajectoryFormatError, match="unknown format 'langchain'"):
        load(OPENAI, format="langchain")


def test_a_forced_format_that_does_not_fit(tmp_path):
    with pytest.raises(TrajectoryFormatError, match=r":1: not a neutral line"):
        load(CODEX, format="neutral")
    with pytest.raises(TrajectoryFormatError, match="not a JSON file"):
        load(CODEX, format="openai-messages")
