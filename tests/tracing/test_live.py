"""Live traces: spans made as records are appended — handed to the OpenTelemetry SDK's
in-memory exporter (``live.SdkSink``, the ``otel`` extra), and sent by the commands to a
receiver on loopback that decodes them with ``opentelemetry-proto`` — the same spans, ids and
times as ``mnemon trace`` makes later from the logs; a dead or refusing receiver never fails a
run."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http",
                    reason="the otel extra is not installed")

import trio  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter)

from mnemon.orchestrator import cli  # noqa: E402
from mnemon.orchestrator.tracing.live import SdkSink  # noqa: E402
from mnemon.orchestrator.tracing.tap import LiveTracer  # noqa: E402
from mnemon.orchestrator.tracing.runlogs import read_run  # noqa: E402
from mnemon.orchestrator.tracing.switch import carried, live_tracing, traced_by  # noqa: E402
from mnemon.session.agentlog import AgentLog  # noqa: E402
from tests.tracing.conftest import make_demo, untraced_env  # noqa: E402
from tests.tracing.receiver import Receiver, attrs  # noqa: E402

MNEMON = [sys.executable, "-m", "mnemon"]


def _key(s) -> tuple:
    """What must agree between a live span and one made from the logs."""
    if isinstance(s, dict):
        return (s["traceId"], s["spanId"], s.get("parentSpanId"), s["name"],
                int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"]))
    return (s.trace_id, s.span_id, s.parent_id, s.name, s.start_ns, s.end_ns)


def _sdk_key(s) -> tuple:
    return (f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}",
            f"{s.parent.span_id:016x}" if s.parent is not None else None, s.name,
            s.start_time, s.end_time)


@pytest.fixture
def memory():
    exporter = InMemorySpanExporter()
    tracer = LiveTracer(SdkSink(SimpleSpanProcessor(exporter)), latest_only=False)
    with traced_by(tracer):
        yield tracer, exporter
    assert AgentLog.tap is None


def test_the_in_memory_exporter_gets_the_lineage_the_calls_and_the_tokens(memory, tmp_path,
                                                                          capsys):
    tracer, exporter = memory
    root = make_demo(tmp_path / "run")
    tracer.close()
    spans = exporter.get_finished_spans()
    agents = [s for s in spans if s.attributes["gen_ai.operation.name"] == "invoke_agent"]
    chats = [s for s in spans if s.attributes["gen_ai.operation.name"] == "chat"]
    assert cli.main(["tree", str(root), "--json"]) == 0
    tree = json.loads(capsys.readouterr().out)
    by_agent = {s.attributes["gen_ai.agent.id"]: s for s in agents}
    assert len(agents) == len(tree) == len(by_agent)
    for node in tree:
        span = by_agent[node["agent"]]
        want = by_agent[node["parent"]].context.span_id if node["parent"] else None
        assert (span.parent.span_id if span.parent else None) == want
    calls = {}
    for log in (root / "agents").glob("*/record.jsonl"):
        calls[log.parent.name] = sum(json.loads(x)["t"] == "ProviderCall"
                                     for x in log.read_text().splitlines())
    counted = {}
    for c in chats:
        counted[c.attributes["gen_ai.agent.id"]] = counted.get(c.attributes["gen_ai.agent.id"],
                                                               0) + 1
        assert c.parent.span_id == by_agent[c.attributes["gen_ai.agent.id"]].context.span_id
    assert counted == calls
    assert cli.main(["cost", str(root), "--json"]) == 0
    total = json.loads(capsys.readouterr().out)["total"]
    assert sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats) == \
        total["output_tokens"]
    assert sum(c.attributes["gen_ai.usage.cache_read.input_tokens"] for c in chats) == \
        total["cache_read_tokens"]
    assert sum(c.attributes["gen_ai.usage.cache_creation.input_tokens"] for c in chats) == \
        total["cache_write_tokens"]
    assert sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats) == \
        total["input_tokens"] + total["cache_read_tokens"] + total["cache_write_tokens"]
    # and the logs, read afterwards, give the same spans: ids, parents, names, times
    assert {_sdk_key(s) for s in spans} == {_key(s) for s in read_run(root).spans}
    assert spans[0].instrumentation_scope.name == "mnemon"
    assert spans[0].resource.attributes["service.name"] == "mnemon"


def test_a_resumed_agent_live_links_to_its_first_span(tmp_path):
    """An agent whose process stopped (no ``SessionEnded``) resumed under tracing: its new span
    is the one ``mnemon trace`` names, linked to its first."""
    from mnemon.orchestrator import logs
    from mnemon.orchestrator.settings import Settings
    from mnemon.orchestrator.supervisor import open_supervisor
    from mnemon.providers.scripted import ScriptedProvider

    root = make_demo(tmp_path / "run")
    log = root / "agents" / "a1" / "record.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    assert json.loads(lines[-1])["t"] == "SessionEnded"
    log.write_bytes(b"".join(lines[:-1]))  # as if the process had died before its end
    exporter = InMemorySpanExporter()
    tracer = LiveTracer(SdkSink(SimpleSpanProcessor(exporter)))
    logs.quiet()  # the demo's log file is closed

    async def resume():
        async with open_supervisor(root, ScriptedProvider(), Settings()) as sup:
            for node in sup.resume_run():
                await sup.run(node)

    with traced_by(tracer):
        trio.run(resume)
    tracer.close()
    live = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent a1"]
    assert len(live) == 1 and live[0].attributes["mnemon.agent.resumed"] is True
    logs = {s.span_id: s for s in read_run(root).spans if s.name == "invoke_agent a1"}
    assert len(logs) == 2
    first = next(s for s in logs.values() if not s.links)
    assert f"{live[0].context.span_id:016x}" in logs
    assert [f"{ln.context.span_id:016x}" for ln in live[0].links] == [first.span_id]
    assert first.attributes["mnemon.agent.state"] == "interrupted"


def _mnemon(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(MNEMON + argv, cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**untraced_env(), **env})


@pytest.mark.parametrize("argv", [["demo"], ["ask", "say hello"], ["run", "job.toml"],
                                  ["demo", "--trace-content"]],
                         ids=["demo", "ask", "run", "demo-content"])
def test_a_live_run_arrives_in_a_receiver_as_the_logs_say(argv, tmp_path):
    (tmp_path / "job.toml").write_text('[[tasks]]\nid = "t1"\nprompt = "one"\n'
                                       '[[tasks]]\nid = "t2"\nprompt = "two"\n')
    with Receiver() as r:
        done = _mnemon([*argv, "--run-root", "run"], tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=r.url,
                       OTEL_SERVICE_NAME="archive-bot")
    assert done.returncode == 0, done.stderr
    assert "traces" not in done.stderr
    assert set(r.requests) == {"application/x-protobuf"} and set(r.paths) == {"/v1/traces"}
    assert {res["service.name"] for res in r.resources} == {"archive-bot"}
    exported = _mnemon(["trace", "run", "--json", *argv[1:][-1:]] if "--trace-content" in argv
                       else ["trace", "run", "--json"], tmp_path)
    body = json.loads(exported.stdout)
    logs = [s for rs in body["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert sorted(map(_key, r.spans)) == sorted(map(_key, logs))
    assert {json.dumps(attrs(s["attributes"]), sort_keys=True) for s in r.spans} == \
        {json.dumps(attrs(s["attributes"]), sort_keys=True) for s in logs}
    content = any("gen_ai.input.messages" in attrs(s["attributes"]) for s in r.spans)
    assert content == ("--trace-content" in argv)


@pytest.mark.parametrize("status", [None, 400], ids=["unreachable", "refusing"])
def test_a_dead_receiver_never_fails_the_run(status, tmp_path):
    if status is None:
        with Receiver() as r:
            url = r.url  # closed once the block ends
        r = None
    else:
        r = Receiver(status=status).__enter__()
        url = r.url
    try:
        done = _mnemon(["demo", "--run-root", "run"], tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=url,
                       OTEL_EXPORTER_OTLP_TIMEOUT="2")
    finally:
        if r is not None:
            r.__exit__(None, None, None)
    assert done.returncode == 0
    lines = [ln for ln in done.stderr.splitlines() if "traces" in ln]
    assert len(lines) == 2, done.stderr
    assert "could not send spans" in lines[0] and "the run goes on" in lines[0]
    assert lines[1].startswith("mnemon: traces: ") and "spans dropped" in lines[1]
    assert "Traceback" not in done.stderr
    assert (tmp_path / "run" / "agents" / "a1" / "record.jsonl").is_file()


def test_tracing_off_leaves_the_tap_unset_and_imports_nothing(tmp_path):
    """With no endpoint the switch yields nothing and OpenTelemetry is not imported."""
    script = textwrap.dedent("""
        import os, sys
        for k in [k for k in os.environ if k.startswith("OTEL_")]:
            del os.environ[k]
        from mnemon.orchestrator.tracing.switch import live_tracing
        from mnemon.session.agentlog import AgentLog
        with live_tracing(True) as t:
            assert t is None and AgentLog.tap is None
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
        os.environ["OTEL_SDK_DISABLED"] = "true"
        with live_tracing() as t:
            assert t is None
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_chunk_carries_the_jobs_tracing(monkeypatch):
    """What a Dask chunk is given sets what its worker's environment lacks, and no more."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "job")
    carry = carried(content=True)
    assert carry == {"env": {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
                             "OTEL_SERVICE_NAME": "job"}, "content": True}
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "worker's own")
    with live_tracing(carry=carry) as tracer:
        assert tracer is not None and tracer.content
        assert os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://127.0.0.1:4318"
        assert os.environ["OTEL_SERVICE_NAME"] == "worker's own"
        assert AgentLog.tap == tracer.tap
    assert AgentLog.tap is None


@pytest.mark.skipif(shutil.which("false") is None, reason="needs a POSIX shell")
def test_a_dask_jobs_chunks_export_their_tasks_spans(tmp_path):
    pytest.importorskip("distributed", reason="the dask extra is not installed")
    (tmp_path / "job.toml").write_text(textwrap.dedent("""
        [[tasks]]
        id = "t1"
        prompt = "say one"
        [[tasks]]
        id = "t2"
        prompt = "say two"
    """))
    with Receiver() as r:
        done = _mnemon(["run", "job.toml", "--engine", "dask", "--workers", "1", "--run-root",
                        "run"], tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=r.url)
        assert done.returncode == 0, done.stderr[-2000:]
    body = json.loads(_mnemon(["trace", "run", "--json"], tmp_path).stdout)
    logs = [s for rs in body["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    agents = [s for s in logs if s["name"].startswith("invoke_agent")]
    assert len(agents) == 2 and len({s["traceId"] for s in agents}) == 2  # a trace per task
    assert sorted(map(_key, r.spans)) == sorted(map(_key, logs))


def test_a_protocol_mnemon_cannot_speak_is_one_line_and_no_trace(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), live_tracing() as t:
        assert t is None and AgentLog.tap is None
    assert err.getvalue().count("\n") == 1 and "gRPC is not supported" in err.getvalue()


def test_a_service_traces_its_agents_live(tmp_path):
    """``mnemon serve``: an agent posted to it is traced as it runs; stopped, the service's
    trace is the one its logs give."""
    pytest.importorskip("hypercorn", reason="the serve extra is not installed")
    import signal

    import httpx

    token = "t" * 20
    with Receiver() as r:
        env = {**untraced_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": r.url, "MNEMON_TOKEN": token,
               "OTEL_BSP_SCHEDULE_DELAY": "100"}
        proc = subprocess.Popen(MNEMON + ["serve", "--port", "0", "--run-root", "run"],
                                cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stderr.readline()
            assert "serving" in line, line
            url = line.rsplit(" on ", 1)[1].strip()
            headers = {"Authorization": "Bearer " + token}
            aid = httpx.post(f"{url}/v1/agents", json={"prompt": "say hello"},
                             headers=headers).json()["id"]
            deadline = time.monotonic() + 60
            while httpx.get(f"{url}/v1/agents/{aid}", headers=headers).json()["state"] == \
                    "running" and time.monotonic() < deadline:
                time.sleep(0.1)
            while not any(s["name"] == f"invoke_agent {aid}" for s in r.spans) and \
                    time.monotonic() < deadline:  # sent while the service runs
                time.sleep(0.1)
            assert any(s["name"] == f"invoke_agent {aid}" for s in r.spans)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
        finally:
            proc.kill()
    body = json.loads(_mnemon(["trace", "run", "--json"], tmp_path).stdout)
    logs = [s for rs in body["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert sorted(map(_key, r.spans)) == sorted(map(_key, logs))


def test_a_tracer_that_breaks_never_fails_the_run(tmp_path, capsys):
    """A sink that raises on every span: the run ends as it would untraced, and the fault is
    one line on stderr."""

    class Broken:
        exported = dropped = 0

        def add(self, spans):
            raise RuntimeError("the sink is broken")

        def close(self):
            pass

    tracer = LiveTracer(Broken(), delay_s=0.01)
    with traced_by(tracer):
        root = make_demo(tmp_path / "run")
    tracer.close()
    err = capsys.readouterr().err
    assert err.count("mnemon: traces:") == 1 and "the sink is broken" in err
    assert b'"reason":"done"' in (root / "agents" / "a1" / "record.jsonl").read_bytes()
