"""The guarantees every importer gives, on generated recordings, and check_invariants itself."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import msgspec

from hypothesis import given, settings
from hypothesis import strategies as st

from mnemon.orchestrator.importers import (
    NO_RESULT,
    AssistantStep,
    RewindStep,
    ToolStep,
    Trajectory,
    UserStep,
    check_invariants,
    load_claude_code,
    load_codex,
    load_neutral,
)
from mnemon.session.records import Text, ToolResult, ToolUse

from .texts import texts

IDS = st.sampled_from(["c1", "c2", "c3", "c4"])
EVENT = st.one_of(
    st.tuples(st.just("user"), st.text(max_size=5)),
    st.tuples(st.just("assistant"), st.lists(IDS, max_size=3)),
    st.tuples(st.just("tool"), IDS),
    st.tuples(st.just("system"), st.text(max_size=5)),
)


def _write(rows, glue=()) -> Path:
    """Rows as JSON lines; ``glue[i]``, when given and not ``None``, replaces the newline after row ``i``
    (``""`` glues two rows onto one line, as a record appended without its newline does)."""
    handle = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8")
    with handle:
        for i, r in enumerate(rows):
            end = glue[i] if i < len(glue) and glue[i] is not None and i < len(rows) - 1 else "\n"
            handle.write(json.dumps(r) + end)
    return Path(handle.name)


def _loaded(load, rows, glue=()) -> Trajectory:
    path = _write(rows, glue)
    try:
        return load(path)
    finally:
        path.unlink()


GLUE = st.lists(st.one_of(st.none(), st.sampled_from(["", " ", "\t ", "  "])), max_size=40)


def _same(a: Trajectory, b: Trajectory) -> None:
    a.name = b.name = None  # the file stem of two temporary files
    assert msgspec.json.encode(a) == msgspec.json.encode(b)


@settings(max_examples=150, deadline=None)
@given(st.lists(EVENT, max_size=25))
def test_neutral_event_soup_keeps_the_guarantees(events):
    """Any order of lines, orphans and repeats included: the invariants hold and nothing is silently lost."""
    rows, n = [], 0
    for kind, arg in events:
        if kind == "assistant":
            n += 1
            rows.append({"role": "assistant", "text": f"a{n}",
                         "tool_calls": [{"id": i, "name": "bash", "arguments": {"n": n}} for i in arg]})
        elif kind == "tool":
            n += 1
            rows.append({"role": "tool", "text": f"out{n}", "tool_call_id": arg})
        else:
            rows.append({"role": kind, "text": arg})
    path = _write(rows)
    try:
        t = load_neutral(path)
    finally:
        path.unlink()
    assert check_invariants(t) == []
    tool_lines = sum(r["role"] == "tool" for r in rows)
    kept = len(texts(t)["output"])
    assert kept + t.dropped >= tool_lines  # every tool line is kept or counted (repeated call ids count too)
    assert texts(t)["assistant"] == [r["text"] for r in rows if r["role"] == "assistant"]
    users = [r["text"] for r in rows if r["role"] in ("user", "system")]
    assert sorted(texts(t)["user"] + ([t.system] if t.system is not None else [])) == sorted(users)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.booleans(), st.booleans()), min_size=1, max_size=30))
def test_claude_code_random_trees(nodes):
    """A random conversation tree (each prompt hangs off any earlier response): every turn appears exactly once."""
    rows, responses = [], []
    for k, (pick, with_call, answered) in enumerate(nodes):
        parent = responses[pick % len(responses)] if responses and pick % 4 else None
        rows.append({"type": "user", "uuid": f"u{k}", "parentUuid": parent, "sessionId": "s",
                     "message": {"role": "user", "content": f"prompt {k}"}})
        content = [{"type": "text", "text": f"reply {k}"}]
        if with_call:
            content.append({"type": "tool_use", "id": f"t{k}", "name": "Bash", "input": {"k": k}})
        rows.append({"type": "assistant", "uuid": f"a{k}", "parentUuid": f"u{k}", "sessionId": "s",
                     "message": {"id": f"m{k}", "role": "assistant", "content": content, "stop_reason": None}})
        last = f"a{k}"
        if with_call and answered:
            rows.append({"type": "user", "uuid": f"r{k}", "parentUuid": f"a{k}", "sessionId": "s",
                         "message": {"role": "user", "content": [
                             {"type": "tool_result", "tool_use_id": f"t{k}", "content": f"result {k}"}]}})
            last = f"r{k}"
        responses.append(last)
    path = _write(rows)
    try:
        t = load_claude_code(path, subagents=False)
    finally:
        path.unlink()
    assert check_invariants(t) == []
    got = texts(t)
    assert sorted(got["user"]) == sorted(f"prompt {k}" for k in range(len(nodes)))
    assert sorted(got["assistant"]) == sorted(f"reply {k}" for k in range(len(nodes)))
    answered = [f"result {k}" for k, (_p, c, a) in enumerate(nodes) if c and a]
    assert sorted(got["output"]) == sorted(answered)
    assert t.unanswered == sum(1 for _p, c, a in nodes if c and not a)
    # the last prompt's branch is the one left standing: it is emitted last, with no rewind after it
    tail = [s for s in t.steps if isinstance(s, UserStep)][-1]
    assert not any(isinstance(s, RewindStep) for s in t.steps[t.steps.index(tail):])


@settings(max_examples=100, deadline=None)
@given(st.lists(EVENT, min_size=1, max_size=20), GLUE)
def test_gluing_neutral_lines_together_changes_nothing(events, glue):
    """Lines written with no newline between them (or only spaces) import as the unglued file does."""
    rows = [{"role": kind, "text": str(arg)} if kind != "tool" else {"role": "tool", "text": "out", "tool_call_id": arg}
            for kind, arg in events]
    glued = _loaded(load_neutral, rows, glue)
    assert glued.skipped_lines == []
    _same(glued, _loaded(load_neutral, rows))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.booleans()), min_size=1, max_size=12), GLUE)
def test_gluing_claude_code_lines_together_changes_nothing(nodes, glue):
    rows, parent = [{"type": "summary", "summary": "title", "leafUuid": "a0"}], None
    for k, (pick, with_call) in enumerate(nodes):
        rows.append({"type": "user", "uuid": f"u{k}", "parentUuid": parent if pick % 3 else None, "sessionId": "s",
                     "message": {"role": "user", "content": f"prompt {k}"}})
        content = [{"type": "text", "text": f"reply {k}"}]
        if with_call:
            content.append({"type": "tool_use", "id": f"t{k}", "name": "Bash", "input": {"k": k}})
        rows.append({"type": "assistant", "uuid": f"a{k}", "parentUuid": f"u{k}", "sessionId": "s",
                     "message": {"id": f"m{k}", "role": "assistant", "content": content, "stop_reason": None}})
        parent = f"a{k}"
    def load(path):
        return load_claude_code(path, subagents=False)
    glued = _loaded(load, rows, glue)
    assert glued.skipped_lines == []
    _same(glued, _loaded(load, rows))


ITEM = st.one_of(
    st.tuples(st.just("user"), st.text(max_size=5)),
    st.tuples(st.just("assistant"), st.text(max_size=5)),
    st.tuples(st.just("reasoning"), st.text(max_size=5)),
    st.tuples(st.just("call"), IDS),
    st.tuples(st.just("output"), IDS),
    st.tuples(st.just("state"), st.none()),
)


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.none(), st.text(max_size=5)), st.lists(ITEM, max_size=25))
def test_a_codex_rollout_before_the_envelope_imports_as_its_enveloped_equivalent(instructions, items):
    """The older layout (bare header, bare items, state lines) and the envelope give the same steps."""
    header = {"id": "sess", "timestamp": "2025-08-18T10:12:31.406Z", "instructions": instructions}
    bare, wrapped = [header], [{"timestamp": "t", "type": "session_meta", "payload": header}]
    for n, (kind, arg) in enumerate(items):
        if kind == "state":
            bare.append({"record_type": "state"})
            continue
        if kind in ("user", "assistant"):
            part = "output_text" if kind == "assistant" else "input_text"
            item = {"type": "message", "role": kind, "content": [{"type": part, "text": arg}]}
        elif kind == "reasoning":
            item = {"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text", "text": arg}],
                    "encrypted_content": "gAAAA"}
        elif kind == "call":
            item = {"type": "function_call", "name": "shell", "arguments": json.dumps({"n": n}), "call_id": arg}
        else:
            item = {"type": "function_call_output", "call_id": arg, "output": f"out {n}"}
        bare.append(item)
        wrapped.append({"timestamp": "t", "type": "response_item", "payload": item})
    old, new = _loaded(load_codex, bare), _loaded(load_codex, wrapped)
    assert (old.system, old.name, old.steps, old.dropped, old.unanswered) == \
        (new.system, new.name, new.steps, new.dropped, new.unanswered)
    assert check_invariants(old) == []


def _t(*steps):
    return Trajectory(system=None, steps=list(steps), source_format="neutral", name="x")


def test_check_invariants_names_each_breach():
    call = AssistantStep(blocks=[ToolUse("c1", "bash", {})], stop_reason="tool_use")
    answer = ToolStep(results=[ToolResult(tool_use_id="c1", content="ok")])
    assert check_invariants(_t(UserStep(text="u"), call, answer)) == []
    assert check_invariants(_t(call, answer)) == ["x: step 0 is AssistantStep, not a UserStep"]
    assert check_invariants(_t(UserStep(text="u"), call, UserStep(text="v"))) == [
        "x: calls ['c1'] are not answered before step 2"]
    assert check_invariants(_t(UserStep(text="u"), answer)) == [
        "x: step 1 is a ToolStep that follows no assistant step"]
    assert check_invariants(_t(UserStep(text="u"), call, answer, answer)) == [
        "x: step 3 result c1 answers no call in hand"]
    assert check_invariants(_t(UserStep(text="u"), call, answer, RewindStep(to_step=1))) == [
        "x: step 3 rewinds to 1, between a call and its result"]
    assert check_invariants(_t(UserStep(text="u"), RewindStep(to_step=4))) == [
        "x: step 1 rewinds to 4, not an earlier step"]
    twice = AssistantStep(blocks=[Text("t"), ToolUse("c1", "a", {}), ToolUse("c1", "b", {})])
    assert "x: step 1 repeats a call id" in check_invariants(_t(UserStep(text="u"), twice, answer))
    missing = ToolStep(results=[ToolResult(tool_use_id="c1", content=NO_RESULT, is_error=True)])
    assert check_invariants(_t(UserStep(text="u"), call, missing)) == []
