"""The spans a run's logs make (``mnemon trace``), without OpenTelemetry installed: the tree is
the lineage tree, one ``chat`` per ``ProviderCall``, tokens and price as ``mnemon cost`` counts
them, ids that do not change, and the faults the command answers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mnemon.orchestrator import cli
from mnemon.orchestrator.tracing import ids, semconv
from mnemon.orchestrator.tracing.build import TraceBuilder, error_type
from mnemon.orchestrator.tracing.otlp import request
from mnemon.orchestrator.tracing.runlogs import read_run
from mnemon.orchestrator.tracing import spans as spans_module
from mnemon.orchestrator.tracing.spans import time_ns
from mnemon.session.records import (ApprovalDecided, ApprovalRequested, AssistantMessage,
                                    Evicted, ProviderCall, Residue,
                                    SessionEnded, SessionResumed, SessionStarted, Text,
                                    ToolResult, ToolResults, ToolUse, TurnStarted, Usage,
                                    UserPrompt)
from tests.conftest import EXAMPLES
from tests.tracing.receiver import Receiver, attrs


def _cli_json(capsys, argv: list[str]):
    assert cli.main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _spans(body: dict) -> list[dict]:
    return [s for rs in body["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def _op(spans: list[dict], name: str) -> list[dict]:
    return [s for s in spans if attrs(s["attributes"])["gen_ai.operation.name"] == name]


def _provider_calls(root: Path) -> dict[str, int]:
    out = {}
    for log in sorted((root / "agents").glob("*/record.jsonl")):
        out[log.parent.name] = sum(1 for line in log.read_text().splitlines()
                                   if json.loads(line)["t"] == "ProviderCall")
    return out


class TestTheDemoRun:
    def test_one_invoke_agent_per_agent_and_the_tree_is_the_lineage(self, demo_root, capsys):
        spans = _spans(_cli_json(capsys, ["trace", str(demo_root), "--json"]))
        tree = _cli_json(capsys, ["tree", str(demo_root), "--json"])
        agents = _op(spans, "invoke_agent")
        by_agent = {attrs(s["attributes"])["gen_ai.agent.id"]: s for s in agents}
        assert sorted(by_agent) == sorted(n["agent"] for n in tree)
        assert len(agents) == len(tree)
        for node in tree:
            span = by_agent[node["agent"]]
            assert span["name"] == f"invoke_agent {node['agent']}"
            assert span["kind"] == 1
            if node["parent"] is None:
                assert "parentSpanId" not in span
            else:
                assert span["parentSpanId"] == by_agent[node["parent"]]["spanId"]
            assert span["traceId"] == by_agent[tree[0]["agent"]]["traceId"]  # one lineage
        assert len(tree) >= 3, "the demo forks a child that forks a grandchild"

    def test_one_chat_per_provider_call_under_its_agent(self, demo_root, capsys):
        spans = _spans(_cli_json(capsys, ["trace", str(demo_root), "--json"]))
        agent_span = {attrs(s["attributes"])["gen_ai.agent.id"]: s["spanId"]
                      for s in _op(spans, "invoke_agent")}
        chats = _op(spans, "chat")
        counted: dict[str, int] = {}
        for c in chats:
            a = attrs(c["attributes"])
            counted[a["gen_ai.agent.id"]] = counted.get(a["gen_ai.agent.id"], 0) + 1
            assert c["parentSpanId"] == agent_span[a["gen_ai.agent.id"]]
            assert c["kind"] == 3 and c["name"] == "chat claude-sonnet-4-5"
            assert a["gen_ai.provider.name"] == "scripted"
            assert a["gen_ai.request.model"] == "claude-sonnet-4-5"
            assert a["gen_ai.response.finish_reasons"] in (["tool_use"], ["end_turn"])
            assert a["mnemon.attempt"] == 1
            assert int(c["endTimeUnixNano"]) >= int(c["startTimeUnixNano"])
        assert counted == _provider_calls(demo_root)

    def test_token_sums_and_price_equal_mnemon_cost(self, demo_root, capsys):
        spans = _spans(_cli_json(capsys, ["trace", str(demo_root), "--json"]))
        cost = _cli_json(capsys, ["cost", str(demo_root), "--json"])
        per: dict[str, dict[str, float]] = {}
        for c in _op(spans, "chat"):
            a = attrs(c["attributes"])
            row = per.setdefault(a["gen_ai.agent.id"], dict.fromkeys(
                ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
                 "cost_usd"), 0))
            # gen_ai.usage.input_tokens counts every input token, cached ones included
            row["input_tokens"] += (a["gen_ai.usage.input_tokens"]
                                    - a["gen_ai.usage.cache_read.input_tokens"]
                                    - a["gen_ai.usage.cache_creation.input_tokens"])
            row["cache_read_tokens"] += a["gen_ai.usage.cache_read.input_tokens"]
            row["cache_write_tokens"] += a["gen_ai.usage.cache_creation.input_tokens"]
            row["output_tokens"] += a["gen_ai.usage.output_tokens"]
            row["cost_usd"] += a["mnemon.cost_usd"]
        for want in cost["agents"]:
            got = per[want["agent"]]
            for f in ("input_tokens", "cache_read_tokens", "cache_write_tokens",
                      "output_tokens"):
                assert got[f] == want[f], (want["agent"], f)
            assert got["cost_usd"] == pytest.approx(want["cost_usd"], abs=1e-6)
        assert sum(r["cache_read_tokens"] for r in per.values()) == \
            cost["total"]["cache_read_tokens"] > 0

    def test_tool_calls_and_the_events_on_the_agent_spans(self, demo_root, capsys):
        spans = _spans(_cli_json(capsys, ["trace", str(demo_root), "--json"]))
        tools = _op(spans, "execute_tool")
        assert tools
        names = {attrs(t["attributes"])["gen_ai.tool.name"] for t in tools}
        assert {"read_document", "agents_start"} <= names
        for t in tools:
            a = attrs(t["attributes"])
            assert t["name"] == f"execute_tool {a['gen_ai.tool.name']}"
            assert a["gen_ai.tool.call.id"]
            assert "gen_ai.tool.call.arguments" not in a and "gen_ai.tool.call.result" not in a
        events = [e for s in _op(spans, "invoke_agent") for e in s.get("events", [])]
        evictions = [attrs(e["attributes"]) for e in events if e["name"] == "mnemon.eviction"]
        assert evictions and all(e["mnemon.residue.bytes"] > 0 for e in evictions)
        forks = [attrs(e["attributes"]) for e in events if e["name"] == "mnemon.fork"]
        assert {f["mnemon.child"] for f in forks} == {"a2", "a3"}

    def test_no_message_content_unless_asked(self, demo_root, capsys):
        plain = json.dumps(_cli_json(capsys, ["trace", str(demo_root), "--json"]))
        assert "gen_ai.input.messages" not in plain and "codeword" not in plain.lower()
        full = _spans(_cli_json(capsys, ["trace", str(demo_root), "--json",
                                         "--trace-content"]))
        a1 = next(s for s in _op(full, "invoke_agent")
                  if attrs(s["attributes"])["gen_ai.agent.id"] == "a1")
        msgs = json.loads(attrs(a1["attributes"])["gen_ai.input.messages"])
        assert msgs[0]["role"] == "user" and "station papers" in msgs[0]["parts"][0]["content"]
        tool = _op(full, "execute_tool")[0]
        assert "gen_ai.tool.call.result" in attrs(tool["attributes"])
        assert any("gen_ai.output.messages" in attrs(c["attributes"]) for c in _op(full, "chat"))

    def test_exporting_twice_or_from_a_copy_gives_the_same_ids(self, demo_root, tmp_path,
                                                               capsys):
        first = _cli_json(capsys, ["trace", str(demo_root), "--json"])
        again = _cli_json(capsys, ["trace", str(demo_root), "--json"])
        assert first == again
        moved = tmp_path / "elsewhere"
        shutil.copytree(demo_root, moved)
        assert _cli_json(capsys, ["trace", str(moved), "--json"]) == first

    def test_the_otlp_json_mapping(self, demo_root, capsys):
        body = _cli_json(capsys, ["trace", str(demo_root), "--json"])
        rs = body["resourceSpans"][0]
        assert attrs(rs["resource"]["attributes"])["service.name"] == "mnemon"
        scope = rs["scopeSpans"][0]
        assert scope["scope"]["name"] == "mnemon"
        assert scope["schemaUrl"] == semconv.SCHEMA_URL
        for s in scope["spans"]:
            assert len(s["traceId"]) == 32 and len(s["spanId"]) == 16
            int(s["traceId"], 16), int(s["spanId"], 16)
            assert isinstance(s["startTimeUnixNano"], str) and s["startTimeUnixNano"].isdigit()
            assert isinstance(s["kind"], int)
            for a in s["attributes"]:
                (kind, v), = a["value"].items()
                assert kind in ("stringValue", "intValue", "doubleValue", "boolValue",
                                "arrayValue")
                if kind == "intValue":
                    assert isinstance(v, str) and int(v) == int(v)
        assert len({s["spanId"] for s in scope["spans"]}) == len(scope["spans"])

    def test_the_old_provider_name_is_left_out_when_latest_is_opted_in(self, demo_root,
                                                                        capsys, monkeypatch):
        default = _spans(_cli_json(capsys, ["trace", str(demo_root), "--json"]))
        assert attrs(default[0]["attributes"])["gen_ai.system"] == "scripted"
        monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http, gen_ai_latest_experimental")
        latest = _spans(_cli_json(capsys, ["trace", str(demo_root), "--json"]))
        assert all("gen_ai.system" not in attrs(s["attributes"]) for s in latest)
        assert all(attrs(s["attributes"]).get("gen_ai.provider.name") in (None, "scripted")
                   for s in latest)


class TestTheCommand:
    def test_not_a_run_root_is_one_line_and_exit_2(self, tmp_path, capsys):
        assert cli.main(["trace", str(tmp_path), "--json"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "not a run root" in err and "Traceback" not in err

    def test_a_line_that_is_not_a_record_is_named(self, tmp_path, capsys):
        root = tmp_path / "run"
        shutil.copytree(EXAMPLES / "plain", root)
        log = next(root.glob("agents/*/record.jsonl"))
        log.write_text(log.read_text() + "{not json}\n")
        assert cli.main(["trace", str(root), "--json"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "record.jsonl:" in err

    def test_a_dead_endpoint_is_one_line_and_exit_1(self, demo_root, capsys):
        with Receiver() as r:
            dead = r.url  # a port that answered once and is closed now
        assert cli.main(["trace", str(demo_root), "--endpoint", dead]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "could not send spans" in err

    def test_a_refusing_endpoint_is_one_line_and_exit_1(self, demo_root, capsys):
        with Receiver(status=400) as r:
            assert cli.main(["trace", str(demo_root), "--endpoint", r.url,
                             "--encoding", "json"]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "HTTP 400" in err

    def test_neither_json_nor_an_endpoint_is_refused(self, demo_root, capsys):
        assert cli.main(["trace", str(demo_root)]) == 2
        assert "--endpoint" in capsys.readouterr().err

    def test_sent_as_json_the_receiver_gets_what_json_prints(self, demo_root, capsys,
                                                             monkeypatch):
        printed = _spans(_cli_json(capsys, ["trace", str(demo_root), "--json"]))
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s%3Dcret")
        with Receiver() as r:
            assert cli.main(["trace", str(demo_root), "--endpoint", r.url + "/",
                             "--encoding", "json"]) == 0
        assert set(r.requests) == {"application/json"} and set(r.paths) == {"/v1/traces"}
        assert r.headers[0].get("x-api-key") == "s=cret"
        assert r.spans == printed

    def test_the_endpoint_from_the_environment(self, demo_root, capsys, monkeypatch):
        with Receiver() as r:
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.url)
            assert cli.main(["trace", str(demo_root), "--encoding", "json"]) == 0
        assert len(r.spans) > 10


class TestTheBuilder:
    """Records the demo does not make: retries, failures, resumes, foreign logs."""

    RUN = ids.run_key({"created_at": "2026-12-02T00:00:00.000000Z", "started_by": "tests"})

    def feed(self, b: TraceBuilder, agent: str, records: list) -> list:
        out = []
        for r in records:
            out += b.feed(agent, r, 100)
        return out

    def test_a_failed_attempt_is_a_chat_span_with_its_error_type(self):
        b = TraceBuilder(self.RUN)
        u = Usage(input_tokens=10, output_tokens=5, cache_read_tokens=100, cache_write_tokens=1)
        out = self.feed(b, "a1", [
            SessionStarted(agent="a1", at="2026-12-02T00:00:01Z", provider="anthropic",
                           model="claude-sonnet-4-5"),
            UserPrompt(turn=1, text="hi"),
            TurnStarted(turn=2, at="2026-12-02T00:00:02Z"),
            ProviderCall(attempt=1, latency_s=0.5, error="RateLimited: 429 slow down",
                         at="2026-12-02T00:00:02.500Z"),
            ProviderCall(attempt=2, latency_s=1.0, usage=u, model="claude-sonnet-4-5",
                         at="2026-12-02T00:00:04Z"),
            AssistantMessage(turn=2, blocks=[Text("hello")], stop_reason="end_turn",
                             model="claude-sonnet-4-5-20250929", usage=u),
            SessionEnded(reason="done", at="2026-12-02T00:00:05Z")])
        failed, ok, agent = out
        assert failed.name == ok.name == "chat claude-sonnet-4-5"
        assert failed.status == 2 and failed.attributes["error.type"] == "RateLimited"
        assert failed.attributes["mnemon.attempt"] == 1 and ok.attributes["mnemon.attempt"] == 2
        assert failed.end_ns - failed.start_ns == 500_000_000
        assert ok.status == 0 and ok.attributes["gen_ai.response.model"] == \
            "claude-sonnet-4-5-20250929"
        assert ok.attributes["gen_ai.provider.name"] == "anthropic"
        assert ok.attributes["gen_ai.usage.input_tokens"] == 111
        assert "gen_ai.usage.reasoning.output_tokens" not in ok.attributes
        assert ok.attributes["mnemon.cost_usd"] > 0
        assert failed.span_id != ok.span_id and failed.parent_id == ok.parent_id == agent.span_id
        assert agent.start_ns == time_ns("2026-12-02T00:00:01Z")
        assert agent.end_ns == time_ns("2026-12-02T00:00:05Z")

    def test_a_failed_agent_and_an_unanswered_call(self):
        b = TraceBuilder(self.RUN)
        out = self.feed(b, "a1", [
            SessionStarted(agent="a1", at="2026-12-02T00:00:01Z"),
            UserPrompt(turn=1, text="hi"),
            TurnStarted(turn=2, at="2026-12-02T00:00:02Z"),
            ProviderCall(attempt=1, latency_s=0.1, usage=Usage(), at="2026-12-02T00:00:03Z"),
            AssistantMessage(turn=2, blocks=[ToolUse("c1", "bash", {"command": "ls"})],
                             stop_reason="tool_use", model=None, usage=Usage()),
            SessionEnded(reason="failed: provider: Overloaded: 529",
                         at="2026-12-02T00:00:09Z")])
        chat, tool, agent = out
        assert tool.status == 2 and tool.attributes["error.type"] == "interrupted"
        assert agent.status == 2 and agent.attributes["error.type"] == "provider"
        assert agent.attributes["mnemon.agent.end_reason"].startswith("failed")

    def test_a_resumed_agent_gets_a_new_span_linked_to_its_first(self):
        b = TraceBuilder(self.RUN)
        first = self.feed(b, "a1", [
            SessionStarted(agent="a1", at="2026-12-02T00:00:01Z"),
            UserPrompt(turn=1, text="hi"),
            TurnStarted(turn=2, at="2026-12-02T00:00:02Z")])  # then the process died
        assert first == []
        out = self.feed(b, "a1", [
            SessionResumed(at="2026-12-02T01:00:00Z"),
            TurnStarted(turn=2, at="2026-12-02T01:00:01Z"),
            ProviderCall(attempt=1, latency_s=0.1, usage=Usage(output_tokens=3),
                         at="2026-12-02T01:00:02Z"),
            AssistantMessage(turn=2, blocks=[Text("done")], stop_reason="end_turn",
                             model=None, usage=Usage(output_tokens=3)),
            SessionEnded(reason="done", at="2026-12-02T01:00:03Z")])
        old, chat, new = out
        assert old.attributes["mnemon.agent.state"] == "interrupted"
        assert old.end_ns == time_ns("2026-12-02T00:00:02Z")  # its last record's time
        assert new.attributes["mnemon.agent.resumed"] is True
        assert [(ln.trace_id, ln.span_id) for ln in new.links] == [(old.trace_id, old.span_id)]
        assert new.span_id != old.span_id and chat.parent_id == new.span_id

    def test_a_child_is_in_its_roots_trace_under_its_parents_span(self):
        b = TraceBuilder(self.RUN, hold_agents=True)
        b.meet("a2", SessionStarted(agent="a2", parent="a1", kind="mnemon", depth=1))
        b.meet("a1", SessionStarted(agent="a1"))
        out = self.feed(b, "a2", [
            SessionStarted(agent="a2", parent="a1", kind="mnemon", depth=1,
                           at="2026-12-02T00:00:03Z"),
            SessionEnded(reason="done", at="2026-12-02T00:00:04Z")])
        out += self.feed(b, "a1", [
            SessionStarted(agent="a1", at="2026-12-02T00:00:01Z"),
            SessionEnded(reason="done", at="2026-12-02T00:00:05Z")])
        assert out == []  # held: a child's log may be read before its parent's
        a1, a2 = sorted(b.finish(), key=lambda s: s.name)
        assert a2.parent_id == a1.span_id and a2.trace_id == a1.trace_id == \
            ids.trace_id(self.RUN, "a1")
        assert a2.attributes["mnemon.agent.kind"] == "mnemon"

    def test_a_log_with_no_provider_call_is_costed_from_its_messages(self, capsys):
        trace = read_run(EXAMPLES / "plain")
        chats = [s for s in trace.spans if s.attributes["gen_ai.operation.name"] == "chat"]
        cost = json.loads(cost_json(capsys, EXAMPLES / "plain"))
        got = sum(s.attributes.get("gen_ai.usage.output_tokens", 0) for s in chats)
        assert chats and got == cost["total"]["output_tokens"]

    @pytest.mark.parametrize("content", [False, True])
    def test_an_eviction_event_weighs_the_turns_it_covers(self, content):
        b = TraceBuilder(self.RUN, content=content)
        self.feed(b, "a1", [SessionStarted(agent="a1", at="2026-12-02T00:00:01Z")])
        b.feed("a1", UserPrompt(turn=1, text="x"), 300)
        b.feed("a1", AssistantMessage(turn=2, blocks=[Text("y")], stop_reason="end_turn",
                                      model=None, usage=None), 200)
        b.feed("a1", ToolResults(results=[ToolResult(tool_use_id="z", content="q")]), 50)
        b.feed("a1", UserPrompt(turn=3, text="x"), 10)
        b.feed("a1", Evicted(residue=Residue(span=(1, 2), note="read", by="model")), 70)
        seg = b.agents["a1"].open
        (ev,) = seg.events
        assert ev.name == "mnemon.eviction"
        assert ev.attributes == {"mnemon.residue.from": 1, "mnemon.residue.to": 2,
                                 "mnemon.residue.bytes": 550, "mnemon.residue.by": "model",
                                 "mnemon.residue.note_bytes": 4,
                                 **({"mnemon.residue.note": "read"} if content else {})}

    @pytest.mark.parametrize("content", [False, True])
    def test_approvals_are_events_on_the_agents_span(self, content):
        b = TraceBuilder(self.RUN, content=content)
        self.feed(b, "a1", [
            SessionStarted(agent="a1", at="2026-12-02T00:00:01Z"),
            UserPrompt(turn=1, text="clean up"),
            TurnStarted(turn=2, at="2026-12-02T00:00:02Z"),
            ProviderCall(attempt=1, latency_s=0.1, usage=Usage(), at="2026-12-02T00:00:03Z"),
            AssistantMessage(turn=2, blocks=[ToolUse("c1", "bash", {"command": "rm -r x"})],
                             stop_reason="tool_use", model=None, usage=Usage()),
            ApprovalRequested(call_id="c1", tool="bash", input={"command": "rm -r x"},
                              rule="bash rm", reason="deletes files",
                              at="2026-12-02T00:00:04Z"),
            ApprovalDecided(call_id="c1", decision="reject", reason="not that one", by="api",
                            at="2026-12-02T00:00:09Z")])
        asked, decided = b.agents["a1"].open.events
        assert asked.name == "mnemon.approval.requested"
        assert asked.time_ns == time_ns("2026-12-02T00:00:04Z")
        assert asked.attributes == {"mnemon.call.id": "c1", "gen_ai.tool.name": "bash",
                                    "mnemon.approval.rule": "bash rm",
                                    "mnemon.approval.reason": "deletes files"}
        assert decided.attributes == {
            "mnemon.call.id": "c1", "mnemon.approval.decision": "reject",
            "mnemon.approval.edited": False, "mnemon.approval.by": "api",
            **({"mnemon.approval.reason": "not that one"} if content else {})}
        assert "rm -r x" not in repr([e.attributes for e in (asked, decided)])

    def test_error_types_stay_low_cardinality(self):
        assert error_type("RateLimited: 429") == "RateLimited"
        assert error_type("the server said no: 500") == "_OTHER"

    def test_times(self):
        assert time_ns("1970-01-01T00:00:01.5Z") == 1_500_000_000
        assert time_ns("1970-01-01T01:00:01+01:00") == 1_000_000_000
        assert time_ns("bad") is None and time_ns(None) is None

    def test_the_request_holds_every_span_once(self):
        b = TraceBuilder(self.RUN)
        spans = self.feed(b, "a1", [SessionStarted(agent="a1", at="2026-12-02T00:00:01Z"),
                                    SessionEnded(reason="done", at="2026-12-02T00:00:02Z")])
        body = request(spans, {"service.name": "x"})
        assert [s["name"] for s in _spans(body)] == ["invoke_agent a1"]


def cost_json(capsys, root: Path) -> str:
    assert cli.main(["cost", str(root), "--json"]) == 0
    return capsys.readouterr().out


def test_reasoning_tokens_where_the_provider_reports_them():
    b = TraceBuilder("run")
    u = Usage(output_tokens=50, reasoning_tokens=30)
    out = []
    for r in [SessionStarted(agent="a1", at="2026-12-02T00:00:01Z", provider="openai-responses"),
              TurnStarted(turn=2, at="2026-12-02T00:00:02Z"),
              ProviderCall(attempt=1, latency_s=0.1, usage=u, at="2026-12-02T00:00:03Z"),
              AssistantMessage(turn=2, blocks=[Text("x")], stop_reason="end_turn", model=None,
                               usage=u)]:
        out += b.feed("a1", r, 10)
    (chat,) = out
    assert chat.attributes["gen_ai.usage.reasoning.output_tokens"] == 30
    assert chat.attributes["gen_ai.provider.name"] == "openai"


@pytest.mark.parametrize("at", ["2026-12-02T01:00:00.-00001Z", "2026-12-02T01:00:00.00²001Z",
                                "2026-12-02T01:00:00.0000 1Z", "2026-12-02T01:00:00.²Z"])
def test_a_record_time_reads_the_same_whether_its_second_was_read_before(at):
    """A time in the log's own shape whose fraction is not digits: the same answer the first
    time and after the same second was read (it was 60 s late the first time, 1 µs early after);
    a digit that is not a decimal one is no time rather than an error."""
    spans_module._seconds.clear()
    first = time_ns(at)
    assert time_ns("2026-12-02T01:00:00.000001Z") == 1_796_173_200_000_001_000
    assert time_ns(at) == first
