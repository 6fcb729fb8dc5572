"""Every importer sample, continued on either provider, encodes to a body that API accepts.

Each recorded session (Claude Code, Codex, OpenAI messages) is replayed into a run root, folded
and rendered as the next request would be, then encoded by both adapters and checked against the
strict request shapes of ``wire_shapes``: an adapter passes back only what its own wire format
defines (a Codex ``reasoning`` item is no Chat Completions field; an OpenAI opaque block is
nothing to Anthropic)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from mnemon.lineage.view import open_agent
from mnemon.orchestrator.importers import load
from mnemon.orchestrator.replay import replay
from mnemon.providers import anthropic, openai, openai_responses
from mnemon.providers.base import Request, ToolDef
from mnemon.session.records import Opaque, Text, Thinking, ToolUse
from mnemon.session.render import render

from .wire_shapes import check_anthropic, check_openai, check_responses

SAMPLES = sorted(p for p in (Path(__file__).resolve().parents[1] / "importers" / "samples").rglob("*")
                 if p.is_file() and "subagents" not in p.parts)
TOOLS = [ToolDef(name="bash", description="run a command",
                 input_schema={"type": "object", "properties": {"command": {"type": "string"}}})]


def _continued(path: Path, tmp: Path) -> Request:
    traj = load(path)
    replay(traj, tmp / "r", "none", window=None)
    _root, _agent, ctx, _torn = open_agent(tmp / "r" / "agents" / "a1")
    messages = render(ctx) + [{"role": "user", "content": [{"type": "text", "text": "go on"}]}]
    return Request(system=traj.system, messages=_merged(messages), tools=TOOLS,
                   model="some-model", max_tokens=1024)


def _merged(messages: list[dict]) -> list[dict]:
    out: list[dict] = []
    for m in messages:
        if out and out[-1]["role"] == m["role"]:
            out[-1] = {"role": m["role"], "content": list(out[-1]["content"]) + list(m["content"])}
        else:
            out.append(m)
    return out


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.parent.name + "/" + p.name[:24])
@pytest.mark.parametrize("stream", [False, True])
def test_every_sample_continues_on_every_api(tmp_path, path, stream):
    request = _continued(path, tmp_path)
    check_anthropic(anthropic.encode_request(request, stream=stream))
    body = openai.encode_request(request, stream=stream)
    check_openai(body)
    for m in body["messages"]:
        assert not {"type", "summary", "encrypted_content"} & set(m), m
    body = openai_responses.encode_request(request, stream=stream)
    check_responses(body)
    if path.parent.name == "codex":  # the rollout's reasoning items go back, each in its place
        lines = [json.loads(l) for l in path.read_text().splitlines()
                 if '"type":"reasoning"' in l and '"encrypted_content":"' in l]
        recorded = [l.get("payload", l) for l in lines]  # the envelope, or a bare item
        sent = [i for i in body["input"] if i.get("type") == "reasoning"]
        assert sent == [i for i in recorded if i.get("encrypted_content")]


def test_codex_samples_do_carry_reasoning_items(tmp_path):
    """The samples exercise the case: a Codex rollout's encrypted reasoning is kept (for a
    Responses-API continuation one day) as an OpenAI opaque block."""
    codex = [p for p in SAMPLES if p.parent.name == "codex"]
    kept = [b for p in codex for step in load(p).steps for b in getattr(step, "blocks", ())
            if isinstance(b, Opaque) and b.block.get("type") == "reasoning"]
    assert kept and all(b.provider == "openai" for b in kept)


def _request(blocks) -> Request:
    return Request(system=None, messages=[
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [msgspec.to_builtins(b) for b in blocks]},
        {"role": "user", "content": [{"type": "text", "text": "and?"}]}], model="m")


@pytest.mark.parametrize("opaque", [
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB..."},
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    {"type": "output_text", "text": "x", "annotations": []},
    {"type": "refusal", "refusal": "I can't help with that."},
    {"audio": {"id": "audio_1", "data": "AAAA", "transcript": "hello", "expires_at": 1}},
])
def test_openai_passes_back_only_chat_completions_fields(opaque):
    blocks = [Text("answer"), Opaque("openai", opaque)]
    body = openai.encode_request(_request(blocks))
    check_openai(body)
    assistant = body["messages"][1]
    assert assistant["content"] == "answer"
    if "audio" in opaque:
        assert assistant["audio"] == {"id": "audio_1"}
    if opaque.get("type") == "refusal":
        assert assistant["refusal"] == "I can't help with that."
    check_anthropic(anthropic.encode_request(_request(blocks)))


def test_an_assistant_turn_of_only_foreign_opaque_blocks_is_dropped_not_sent_empty():
    blocks = [Opaque("openai", {"type": "reasoning", "encrypted_content": "e"}),
              Thinking("private", None), Opaque("anthropic", {"type": "redacted_thinking", "data": "d"})]
    req = _request(blocks)
    check_openai(openai.encode_request(req))
    body = anthropic.encode_request(req)
    check_anthropic(body)
    assert {"type": "redacted_thinking", "data": "d"} in body["messages"][1]["content"]


def test_the_responses_checker_bites():
    good = openai_responses.encode_request(_request([
        Opaque("openai-responses", {"id": "rs_1", "type": "reasoning", "summary": [],
                                    "encrypted_content": "e"}),
        Text("a"), ToolUse("c1", "bash", {"command": "ls"})]))
    check_responses(good)
    assert [i["type"] for i in good["input"]] == ["message", "reasoning", "message",
                                                  "function_call", "message"]
    for bad in ({**good, "messages": []},
                {**good, "input": [{"type": "reasoning", "summary": []}]},
                {**good, "input": [{"type": "function_call_output", "call_id": "x",
                                    "output": "o"}]}):
        with pytest.raises((msgspec.ValidationError, AssertionError)):
            check_responses(bad)


def test_the_checkers_bite():
    good = openai.encode_request(_request([Text("a"), ToolUse("c1", "bash", {"command": "ls"})]))
    check_openai(good)
    bad = {**good, "messages": [*good["messages"][:1],
                                {**good["messages"][1], "type": "reasoning"}, *good["messages"][2:]]}
    with pytest.raises(msgspec.ValidationError):
        check_openai(bad)
    a = anthropic.encode_request(_request([Text("a")]))
    with pytest.raises(msgspec.ValidationError):
        check_anthropic({**a, "messages": [{"role": "user", "content": [{"type": "text",
                                                                          "text": "x", "x": 1}]}]})
