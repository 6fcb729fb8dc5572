"""A real OTLP receiver with a UI: the Phoenix server (``arize-phoenix``), on loopback, offline,
on SQLite in a temporary folder. The demo run's trace is sent to it — from the logs with
``mnemon trace --endpoint``, and live from a second run — and read back through its REST API:
the tree, the names and the token attributes as mnemon made them.

Phoenix pins a web stack of its own, so it lives in its own environment, not in mnemon's test
extra: ``MNEMON_PHOENIX`` names its ``phoenix`` program (``.ci/run`` makes one), else ``phoenix``
on the PATH. Without either the test is skipped and says so.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from mnemon.orchestrator import cli
from tests.tracing.conftest import untraced_env

PHOENIX = os.environ.get("MNEMON_PHOENIX") or shutil.which("phoenix")
pytestmark = pytest.mark.skipif(not PHOENIX, reason="Phoenix is not installed (set "
                                "MNEMON_PHOENIX to its phoenix program; docs/tracing.md)")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc = _port(), _port()
    env = {**untraced_env(), "PHOENIX_WORKING_DIR": str(work), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc),
           "PHOENIX_TELEMETRY_ENABLED": "false"}
    out = open(work / "phoenix.log", "wb")
    proc = subprocess.Popen([PHOENIX, "serve"], env=env, stdout=out, stderr=subprocess.STDOUT,
                            cwd=work)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail("Phoenix stopped: " + (work / "phoenix.log").read_text()[-2000:])
            try:
                if httpx.get(url + "/v1/projects", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("Phoenix did not start in 180 s")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        out.close()


def _spans(url: str, project: str, want: int) -> list[dict]:
    """Every span Phoenix holds for ``project``, once it holds ``want`` (ingestion is queued)."""
    deadline = time.monotonic() + 60
    while True:
        got: list[dict] = []
        cursor = None
        while True:
            params = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
            r = httpx.get(f"{url}/v1/projects/{project}/spans", params=params, timeout=10)
            if r.status_code == 404:
                break
            r.raise_for_status()
            body = r.json()
            got += body["data"]
            cursor = body.get("next_cursor")
            if not cursor:
                break
        if len(got) >= want or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def _trace_json(root: Path) -> list[dict]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert cli.main(["trace", str(root), "--json"]) == 0
    body = json.loads(buf.getvalue())
    return [s for rs in body["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def _attr(span: dict, key: str):
    for a in span["attributes"]:
        if a["key"] == key:
            (_, v), = a["value"].items()
            return int(v) if key.startswith("gen_ai.usage") else v
    return None


def _check(stored: list[dict], sent: list[dict]) -> None:
    by_id = {s["context"]["span_id"]: s for s in stored}
    assert len(by_id) == len(sent)
    for s in sent:
        got = by_id[s["spanId"]]
        assert got["name"] == s["name"]
        assert got["context"]["trace_id"] == s["traceId"]
        assert got["parent_id"] == s.get("parentSpanId")
        for key in ("gen_ai.operation.name", "gen_ai.agent.id", "gen_ai.usage.input_tokens",
                    "gen_ai.usage.output_tokens", "gen_ai.usage.cache_read.input_tokens",
                    "gen_ai.usage.cache_creation.input_tokens", "gen_ai.tool.name"):
            assert got["attributes"].get(key) == _attr(s, key), (s["name"], key)
    kinds = {s["name"].split()[0]: s["span_kind"] for s in stored}
    assert kinds == {"invoke_agent": "AGENT", "chat": "LLM", "execute_tool": "TOOL"}
    roots = [s for s in stored if s["parent_id"] is None]
    assert [s["name"] for s in roots] == ["invoke_agent a1"]


def test_the_demo_runs_trace_from_its_logs_in_phoenix(phoenix, demo_root):
    sent = _trace_json(demo_root)
    with contextlib.redirect_stderr(io.StringIO()):
        assert cli.main(["trace", str(demo_root), "--endpoint", phoenix]) == 0
    _check(_spans(phoenix, "default", len(sent)), sent)


def test_a_live_run_arrives_in_phoenix(phoenix, tmp_path):
    env = {**untraced_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix,
           "OTEL_RESOURCE_ATTRIBUTES": "openinference.project.name=live"}
    done = subprocess.run([sys.executable, "-m", "mnemon", "demo", "--run-root", "run"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "traces" not in done.stderr
    sent = _trace_json(tmp_path / "run")
    _check(_spans(phoenix, "live", len(sent)), sent)
