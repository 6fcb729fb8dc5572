"""Damaged recordings: what a file still holds is imported, and every line left out is named."""

from __future__ import annotations

import json

import msgspec
import pytest

from mnemon.orchestrator.importers import (
    AssistantStep,
    SkippedLine,
    Trajectory,
    TrajectoryFormatError,
    UserStep,
    check_invariants,
    detect_format,
    every_skipped_line,
    load,
    load_claude_code,
    load_neutral,
)
from mnemon.orchestrator.importers.lines import read_lines, split_values
from mnemon.session.records import Text

from .texts import CLAUDE_GLUED, write_jsonl


def kinds(t):
    return [type(s).__name__.removesuffix("Step") for s in t.steps]


# --------------------------------------------------------------------------- the sample


def test_the_glued_sample_imports_both_records_of_its_glued_line():
    """Line 5 holds an assistant line and a ``summary`` record written with no newline between."""
    objects = read_lines(CLAUDE_GLUED).objects
    on_five = [o["type"] for n, o in objects if n == 5]
    assert on_five == ["assistant", "summary"]
    t = load(CLAUDE_GLUED)
    assert t.source_format == "claude-code" and check_invariants(t) == []
    assert kinds(t) == ["User", "Assistant", "Tool", "Assistant", "User", "Assistant"]
    assert t.steps[3].blocks[0].text.startswith("`_BUF` is a module-level list")  # the first object of line 5
    assert t.skipped == {"summary": 1}  # the second object of line 5, read and counted as a summary


def test_the_glued_sample_names_its_torn_middle_line():
    t = load(CLAUDE_GLUED)
    assert t.skipped_lines == [SkippedLine(path=str(CLAUDE_GLUED), line=6, reason="not JSON")]
    assert str(t.skipped_lines[0]) == f"{CLAUDE_GLUED}:6: not JSON"
    assert every_skipped_line(t) == t.skipped_lines
    # the prompt typed again after the torn one is where the conversation goes on
    assert t.steps[4] == UserStep(text="Move it into parse().")


def test_skipped_lines_survive_a_json_round_trip():
    t = load(CLAUDE_GLUED)
    back = msgspec.json.decode(msgspec.json.encode(t), type=Trajectory)
    assert back == t and back.skipped_lines[0].line == 6


# --------------------------------------------------------------------------- one line, several values


@pytest.mark.parametrize(("line", "values", "rest"), [
    (b'{"a": 1}', [{"a": 1}], None),
    (b'{"a": 1}{"b": 2}', [{"a": 1}, {"b": 2}], None),
    (b'{"a": 1}  \t {"b": 2} {"c": [3]}  ', [{"a": 1}, {"b": 2}, {"c": [3]}], None),
    (b'{"a": "}{"}{"b": "{"}', [{"a": "}{"}, {"b": "{"}], None),  # braces inside strings are text
    (b'{"a": 1}{"b": ', [{"a": 1}], "text after 1 JSON value is not JSON"),
    (b'{"a": 1}{"b": 2}garbage', [{"a": 1}, {"b": 2}], "text after 2 JSON values is not JSON"),
    (b'[1]{"a": 1}', [[1], {"a": 1}], None),
    (b'{not json', [], "not JSON"),
    (b'\xff\xfe{"a": 1}', [], "not JSON (not UTF-8 text)"),
    (b'\xef\xbb\xbf{"a": 1}{"b": 2}', [{"a": 1}, {"b": 2}], None),
    ('{"t": "caf\u00e9"}{"u": "\u2014"}'.encode(), [{"t": "caf\u00e9"}, {"u": "\u2014"}], None),
])
def test_split_values(line, values, rest):
    assert split_values(line) == (values, rest)


def test_every_line_format_splits_a_glued_line(tmp_path):
    rows = [{"role": "user", "text": "go"}, {"role": "assistant", "text": "done"}]
    path = tmp_path / "n.jsonl"
    path.write_text(json.dumps(rows[0]) + json.dumps(rows[1]) + "\n")
    t = load_neutral(path)
    assert t.steps == [UserStep(text="go"), AssistantStep(blocks=[Text("done")], stop_reason="end_turn")]
    assert t.skipped_lines == []
    assert detect_format(path) == "neutral"


def test_what_a_line_holds_besides_objects_is_named(tmp_path):
    path = tmp_path / "n.jsonl"
    path.write_text('{"role": "user", "text": "go"}\n'
                    '[1, 2]\n'
                    '{"role": "assistant", "text": "a"}{"role": "ass\n'
                    '\n'
                    '42 {"role": "user", "text": "again"}\n')
    t = load_neutral(path)
    assert [s.text for s in t.steps if isinstance(s, UserStep)] == ["go", "again"]
    assert [(s.line, s.reason) for s in t.skipped_lines] == [
        (2, "a JSON array, not an object"),
        (3, "text after 1 JSON value is not JSON"),
        (5, "a JSON number, not an object"),
    ]


def test_a_torn_tail_is_named_too(tmp_path):
    path = tmp_path / "n.jsonl"
    path.write_text('{"role": "user", "text": "go"}\n{"role": "assistant", "text": "a"}{"role": "ass')
    t = load_neutral(path)
    assert kinds(t) == ["User", "Assistant"]
    assert [(s.line, s.reason) for s in t.skipped_lines] == [
        (2, "the last line is cut short after 1 JSON value")]


# --------------------------------------------------------------------------- nothing to recover


@pytest.mark.parametrize("fmt", ["auto", "neutral", "claude-code", "codex"])
def test_a_file_of_nothing_but_garbage_is_refused_in_one_line(tmp_path, fmt):
    path = tmp_path / "notes.jsonl"
    path.write_text("this is not json\n{neither is this\n\x00\x01\n")
    with pytest.raises(TrajectoryFormatError) as info:
        load(path, fmt)
    text = str(info.value)
    assert "\n" not in text and text.startswith(f"{path}:")
    assert ("not JSON lines" in text) if fmt == "auto" else (
        text == f"{path}:1: nothing to import: no line holds a JSON object (not JSON; 2 more skipped)")


def test_a_file_of_json_but_no_object_is_refused_in_one_line(tmp_path):
    path = tmp_path / "n.jsonl"
    path.write_text("1\n[2]\n")
    with pytest.raises(TrajectoryFormatError, match=r"n\.jsonl:1: nothing to import: no line holds a JSON object "
                                                    r"\(a JSON number, not an object; 1 more skipped\)$"):
        load_neutral(path)


def test_an_empty_file_forced_to_a_format_is_still_empty_not_refused(tmp_path):
    path = tmp_path / "n.jsonl"
    path.write_text("\n\n")
    t = load_neutral(path)
    assert (t.steps, t.skipped_lines) == ([], [])


def test_detection_reads_past_lines_that_are_not_json(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('garbage first\n{"type": "summary", "summary": "t", "leafUuid": "x"}'
                    '{"type": "user", "uuid": "u1", "parentUuid": null, "sessionId": "s", '
                    '"message": {"role": "user", "content": "hi"}}\n')
    assert detect_format(path) == "claude-code"
    t = load(path)
    assert kinds(t) == ["User"] and [s.line for s in t.skipped_lines] == [1]


def test_a_subagent_file_names_its_own_skipped_lines(tmp_path):
    sid = "s"
    main = tmp_path / "s.jsonl"
    write_jsonl(main, [{"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": sid,
                        "message": {"role": "user", "content": "go"}}])
    folder = tmp_path / "s" / "subagents"
    folder.mkdir(parents=True)
    agent = folder / "agent-x1.jsonl"
    agent.write_text(json.dumps({"type": "user", "uuid": "v1", "parentUuid": None, "sessionId": sid,
                                 "isSidechain": True, "agentId": "x1",
                                 "message": {"role": "user", "content": "look"}}) + "\n%%%\n")
    t = load_claude_code(main)
    assert t.skipped_lines == [] and [c.name for c in t.children] == ["x1"]
    assert every_skipped_line(t) == [SkippedLine(path=str(agent), line=2, reason="not JSON")]


def test_a_subagent_file_with_nothing_to_import_is_left_out_and_named(tmp_path):
    main = write_jsonl(tmp_path / "s.jsonl", [{"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s",
                                              "message": {"role": "user", "content": "go"}}])
    folder = tmp_path / "s" / "subagents"
    folder.mkdir(parents=True)
    (folder / "agent-x1.jsonl").write_text("%%%\n")
    t = load_claude_code(main)
    assert kinds(t) == ["User"] and t.children == []
    assert [str(s) for s in every_skipped_line(t)] == [
        f"{folder / 'agent-x1.jsonl'}:0: subagent file left out: nothing to import: no line holds a JSON object "
        "(not JSON)"]
