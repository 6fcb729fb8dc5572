"""Trace content stays out unless asked: a secret planted in every place a model or a person
can put text in a run — the prompt, the system prompt, an answer, a tool's input and result, a
tool name the model made up, an eviction note, a mark's replacement, a synod's reduction, a
typed answer that fails its type (and the harness's steering that quotes it), a provider's
error message, an approval's edited input, reason and decider — is found in no byte a trace
sends without ``--trace-content``: live (the C builder and the Python one, to a loopback OTLP
receiver) and from the logs (``mnemon trace --json`` and ``--endpoint``). With
``--trace-content`` it is found, so the search can fail."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import trio

from mnemon.orchestrator import cli, logs
from mnemon.orchestrator.approvals import Decision
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.orchestrator.tracing import native_build
from mnemon.orchestrator.tracing.ship import Shipper
from mnemon.orchestrator.tracing.switch import traced_by
from mnemon.orchestrator.tracing.tap import LiveTracer
from mnemon.orchestrator.policy import parse_policy
from mnemon.orchestrator.usertools import tool
from mnemon.providers.errors import InvalidRequest
from mnemon.providers.retry import call_with_retry
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import Text, ToolUse

from .receiver import Receiver

SECRET = "S3CR3TPLANT7f3a"  # a class name's shape: the hardest text to tell from mnemon's own


@tool
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


def _task(request) -> str:
    for msg in request.messages:
        if msg.get("role") == "user":
            for b in msg.get("content") or ():
                if b.get("type") == "text":
                    return b.get("text", "")
    return ""


def _policy(request, state):
    """Each root agent's part, by the first words of its task."""
    n = state["n"] = state.get("n", 0) + 1
    task = _task(request)
    if task.startswith("TYPED"):  # an answer that is not of its type, each time
        return [Text(json.dumps({"code": f"PATIENT {SECRET}"}))], "end_turn"
    if task.startswith("BROKEN"):  # the provider refuses, quoting the prompt
        raise InvalidRequest(400, {"error": {"message": f"your prompt {SECRET} was refused"}})
    if n == 1:
        return [Text(f"thinking about {SECRET}"),
                ToolUse("c1", "echo", {"text": SECRET}),
                ToolUse("c2", f"made_up_{SECRET}", {"q": SECRET})], "tool_use"
    if n == 2:
        return [ToolUse("c3", "agents_synod", {"question": SECRET, "n": 1, "reduce": SECRET}),
                ToolUse("c4", "context_mark", {"block": "1.0", "replacement": SECRET}),
                ToolUse("c5", "echo", {"text": "again"})], "tool_use"
    if n == 3:
        return [ToolUse("c6", "context_evict", {"from": 1, "to": 1, "note": SECRET})], "tool_use"
    return [Text(f"the answer is {SECRET}")], "end_turn"


class _Retried(ScriptedProvider):
    """The scripted provider behind the retry loop every HTTP adapter runs its requests
    through, so that a refused request is recorded (``ProviderCall.error``) as theirs is."""

    async def complete(self, request, *, on_attempt=None, on_text=None):
        return await call_with_retry(lambda: super(_Retried, self).complete(request),
                                     on_attempt=on_attempt)


def _decider(p):
    if p.request.call_id == "c1":
        return Decision("approve", input={"text": SECRET + " edited"}, by=SECRET)
    return Decision("reject", reason=f"no, because {SECRET}", by="api")


def _run(root: Path, tracer: LiveTracer | None) -> None:
    policy = parse_policy({"rule": [{"tool": "echo", "action": "ask",
                                     "reason": "echo asks a person"}]}, "test")
    settings = Settings(system=f"you guard {SECRET}", tool_policy=policy, max_turns=6)

    async def main() -> None:
        async with open_supervisor(root, _Retried(policy=_policy), settings,
                                   user_tools=[echo]) as sup:
            sup.env.approvals.decider = _decider
            await sup.ask(f"TOOLS look after {SECRET}")
            await sup.ask(f"TYPED give the code of {SECRET}",
                          output={"type": "object", "properties": {"code": {"type": "integer"}},
                                  "required": ["code"]})
            await sup.ask(f"BROKEN ask {SECRET}")

    with traced_by(tracer) if tracer is not None else contextlib.nullcontext():
        trio.run(main)
    logs.quiet()


def _planted(root: Path) -> None:
    """The run holds the secret in every place the test means it to: else the search below
    proves nothing."""
    recs = [json.loads(line) for f in sorted(root.glob("agents/*/record.jsonl"))
            for line in f.read_text().splitlines()]
    kinds = {r["t"] for r in recs if SECRET in json.dumps(r)}
    assert {"SessionStarted", "UserPrompt", "AssistantMessage", "ToolResults", "Evicted",
            "Marked", "Steering", "ProviderCall", "ApprovalRequested", "ApprovalDecided",
            "SessionEnded"} <= kinds, kinds
    ends = [r["reason"] for r in recs if r["t"] == "SessionEnded"]
    assert any(e.startswith("failed: output: ") and SECRET in e for e in ends), ends
    assert any(e.startswith("failed: provider: ") and SECRET in e for e in ends), ends
    assert any(r["t"] == "ApprovalDecided" and r.get("by") == SECRET for r in recs)


def _exported(root: Path, content: bool) -> list[bytes]:
    """Every byte ``mnemon trace`` makes of the run: OTLP/JSON, and the protobuf and JSON it
    sends."""
    flag = ["--trace-content"] if content else []
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["trace", str(root), "--json", *flag]) == 0
    sent: list[bytes] = [out.getvalue().encode()]
    for encoding in ("protobuf", "json"):
        with Receiver() as r:
            assert cli.main(["trace", str(root), "--endpoint", r.url, "--encoding", encoding,
                             *flag]) == 0
        assert r.raw
        sent += r.raw
    return sent


@pytest.mark.parametrize("content, native", [(False, True), (False, False), (True, False)])
def test_no_byte_a_trace_sends_holds_the_secret_without_trace_content(content, native, tmp_path,
                                                                      monkeypatch):
    if native and not native_build.AVAILABLE:
        pytest.skip("the C trace builder is not built here")
    root = tmp_path / "run"
    with Receiver() as r:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.url)
        tracer = LiveTracer(Shipper.from_env(), content=content, native=native)
        assert bool(tracer.native) == native
        _run(root, tracer)
        tracer.close()
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    _planted(root)
    live = r.raw
    assert live and r.spans
    names = {s["name"] for s in r.spans}
    assert "execute_tool echo" in names and "execute_tool _OTHER" in names or content
    sent = live + _exported(root, content)
    found = [i for i, body in enumerate(sent) if SECRET.encode() in body]
    if content:
        assert len(found) == len(sent)  # every export: the search finds what is there
    else:
        assert not found, [sent[i][max(0, sent[i].find(SECRET.encode()) - 200):][:400]
                           for i in found]
