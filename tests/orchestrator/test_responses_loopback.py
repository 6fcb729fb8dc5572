"""``--provider openai-responses`` against a real HTTP server on loopback.

The second request carries the first turn's reasoning item byte for byte and in order; a cut
stream is retried; the usage (reasoning tokens apart) lands in the log and in ``mnemon cost``;
with ``--store`` turns are chained with ``previous_response_id`` until a rewind or an eviction
changes the table, after which none is sent; and an imported Codex rollout replays on this
provider with its reasoning items sent back.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import trio

from mnemon import Settings, open_supervisor
from mnemon.orchestrator.chat.session import ChatSession
from mnemon.orchestrator.cli import main
from mnemon.providers.prices import cost_usd
from mnemon.providers.select import make_provider
from mnemon.session.log import iter_lines
from mnemon.session.records import Usage, decode

TESTS = Path(__file__).resolve().parents[1]
FIXTURES = TESTS / "providers" / "fixtures" / "openai_responses"
CODEX = TESTS / "importers" / "samples" / "codex" / (
    "rollout-2026-01-15T14-03-00-0199a5e4-7c1b-7d20-8f3a-5b6c7d8e9f01.jsonl")
KEY = "test-key-not-secret"


class Cut:
    """A body the server starts but never finishes: it promises more bytes, then hangs up."""

    def __init__(self, data: bytes):
        self.data = data


class Server:
    """Answers ``POST /v1/responses`` with the next body of ``bodies`` (or ``answer(n)``),
    keeping every request's raw bytes."""

    def __init__(self, bodies: list[bytes | Cut] | None = None,
                 answer: Callable[[int], bytes] | None = None):
        self.bodies = list(bodies or [])
        self.answer = answer
        self.raw: list[bytes] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802
                data = self.rfile.read(int(self.headers["content-length"]))
                outer.raw.append(data)
                assert self.path == "/v1/responses"
                assert self.headers["authorization"] == f"Bearer {KEY}"
                body = outer.bodies.pop(0) if outer.bodies else outer.answer(len(outer.raw))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                if isinstance(body, Cut):
                    self.send_header("content-length", str(len(body.data) + 1000))
                    self.end_headers()
                    self.wfile.write(body.data)
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def bodies_sent(self) -> list[dict]:
        return [json.loads(r) for r in self.raw]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def reasoning_bytes(name: str) -> list[bytes]:
    """The reasoning items of a recorded stream's ``output_item.done`` events, as the server's
    bytes (compact on the wire, so each is a slice of the fixture)."""
    out = []
    for line in fixture(name).splitlines():
        if line.startswith(b"data: ") and b'"response.output_item.done"' in line:
            item = json.loads(line[6:])["item"]
            if item["type"] == "reasoning":
                text = json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode()
                assert text in line
                out.append(text)
    return out


def stream(rid: str, items: list[dict], usage: dict | None = None) -> bytes:
    """A minimal response stream in the reference's shapes: created, each item done, completed."""
    usage = usage or {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 4},
                      "total_tokens": 110}
    events = [{"type": "response.created", "sequence_number": 0,
               "response": {"id": rid, "object": "response", "status": "in_progress",
                            "model": "gpt-5.1", "output": []}}]
    for i, item in enumerate(items):
        events.append({"type": "response.output_item.done", "output_index": i, "item": item,
                       "sequence_number": i + 1})
    events.append({"type": "response.completed", "sequence_number": len(items) + 1,
                   "response": {"id": rid, "object": "response", "status": "completed",
                                "model": "gpt-5.1", "output": items, "usage": usage}})
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n"
                    .encode() for e in events)


def say(rid: str, text: str) -> bytes:
    return stream(rid, [
        {"id": f"rs_{rid}", "type": "reasoning", "summary": [],
         "encrypted_content": f"gAAAA-{rid}"},
        {"id": f"msg_{rid}", "type": "message", "status": "completed", "role": "assistant",
         "content": [{"type": "output_text", "annotations": [], "text": text}]}])


def records(root: Path, agent: str = "a1") -> list:
    return [decode(line) for _, line in iter_lines(root / "agents" / agent / "record.jsonl")]


def test_ask_carries_reasoning_retries_a_cut_stream_and_counts_reasoning(
        tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    call = fixture("composed_reasoning_call.sse")
    cut = Cut(call[:call.index(b"event: response.output_item.done")])
    run = tmp_path / "run"
    with Server([cut, call, fixture("composed_reasoning_text.sse")]) as server:
        rc = main(["ask", "What is the weather in Paris?", "--provider", "openai-responses",
                   "--base-url", server.url, "--system", "Be terse.", "--run-root", str(run),
                   "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["answer"] == "It is 18°C and sunny in Paris."
    assert len(server.raw) == 3 and server.raw[0] == server.raw[1], "the cut attempt is resent"
    first, _, second = server.bodies_sent
    for body in (first, second):
        assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
        assert "previous_response_id" not in body and body["stream"] is True
        assert body["model"] == "gpt-5.1" and body["instructions"] == "Be terse."
    assert first["prompt_cache_key"] == second["prompt_cache_key"]
    assert any(t["name"] == "context_evict" and t["type"] == "function" for t in first["tools"])
    # the first turn's reasoning item, byte for byte, where it stood: before its call
    (item,) = reasoning_bytes("composed_reasoning_call.sse")
    assert item in server.raw[2]
    assert [i["type"] for i in second["input"]] == [
        "message", "reasoning", "function_call", "function_call_output"]
    assert second["input"][2]["call_id"] == "call_6rXqJ2aM0bQ9"
    assert "unknown tool 'get_weather'" in second["input"][3]["output"]

    recs = records(run)
    calls = [r for r in recs if type(r).__name__ == "ProviderCall"]
    assert [c.attempt for c in calls] == [1, 2, 1]
    assert calls[0].usage is None and calls[0].error.startswith("StreamInterrupted")
    assert calls[1].usage == Usage(input_tokens=296, output_tokens=172, cache_read_tokens=1024,
                                   reasoning_tokens=128)
    assert calls[2].usage == Usage(input_tokens=130, output_tokens=75, cache_read_tokens=1280,
                                   reasoning_tokens=64)
    turns = [r for r in recs if type(r).__name__ == "AssistantMessage"]
    assert len(turns) == 2, "a retried request never records half a turn"
    assert turns[0].blocks[1].provider == "openai-responses"
    assert json.dumps(turns[0].blocks[1].block, separators=(",", ":"),
                      ensure_ascii=False).encode() == item
    line = next(bytes(l) for _, l in iter_lines(run / "agents/a1/record.jsonl")
                if b'"ProviderCall"' in bytes(l) and b"reasoning_tokens" in bytes(l))
    assert b'"reasoning_tokens":128' in line
    assert KEY not in (run / "agents/a1/record.jsonl").read_text()

    assert main(["cost", str(run), "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    row = cost["agents"][0]
    assert row == {"agent": "a1", "provider": "openai-responses", "input_tokens": 426,
                   "cache_read_tokens": 2304,
                   "cache_write_tokens": 0, "output_tokens": 247, "reasoning_tokens": 192,
                   "cost_usd": row["cost_usd"]}
    expected = cost_usd(calls[1].usage, "gpt-5.1") + cost_usd(calls[2].usage, "gpt-5.1")
    assert row["cost_usd"] == pytest.approx(expected, abs=1e-6)
    assert cost["total"]["reasoning_tokens"] == 192
    assert main(["cost", str(run)]) == 0
    table = capsys.readouterr().out
    assert "(reasoning)" in table.splitlines()[0] and "192" in table
    assert main(["verify", str(run)]) == 0


async def test_store_chains_until_a_rewind_or_an_eviction(tmp_path):
    """``--store``: each request continues the previous response while the context only grew;
    a fork (another agent) carries its parent's reasoning items but no chain; after ``/rewind``
    and after an eviction the whole input goes, with no ``previous_response_id``."""
    evict = stream("r5", [{"id": "fc_r5", "type": "function_call", "status": "completed",
                           "call_id": "call_evict", "name": "context_evict",
                           "arguments": json.dumps({"from": 1, "to": 3,
                                                    "note": "weather looked up"})}])
    bodies = [fixture("composed_reasoning_call.sse"), fixture("composed_reasoning_text.sse"),
              say("c1", "Forked."), say("r3", "Cloudy tomorrow."), say("r4", "Sunny again."),
              evict, say("r6", "Tidied.")]
    with Server(bodies) as server:
        provider = make_provider("openai-responses", base_url=server.url,
                                 env={"OPENAI_API_KEY": KEY}, store=True)
        with trio.fail_after(60):
            async with open_supervisor(tmp_path / "run", provider,
                                       Settings(model="gpt-5.1", context_window=400_000),
                                       provider_name="openai-responses") as sup:
                async with trio.open_nursery() as forks:
                    chat = ChatSession(sup, forks)
                    node = await chat.send("What is the weather in Paris?")  # requests 1, 2
                    before = [t.id for t in node.ctx.turns]
                    child = chat.fork("Look again.", lambda c: None)  # request 3: a fork
                    await child.done.wait()
                    assert child.answer == "Forked."
                    await chat.send("And tomorrow?")  # request 4
                    chat.rewind(before[-1])
                    await chat.send("Once more?")  # request 5: after the rewind
                    node = await chat.send("Tidy up.")  # 6: the model evicts; 7: after it
        await provider.aclose()
    assert node.reason == "done" and node.answer == "Tidied."
    sent = server.bodies_sent
    assert len(sent) == 7 and all(b["store"] is True for b in sent)
    prev = [b.get("previous_response_id") for b in sent]
    assert prev == [None, "resp_0d6a2f3b9c1e4a50", None, "resp_0d6a2f3b9c1e4a60", None, "r4",
                    None]
    assert [i["type"] for i in sent[1]["input"]] == ["function_call_output"]
    r1, r2 = reasoning_bytes("composed_reasoning_call.sse")[0], \
        reasoning_bytes("composed_reasoning_text.sse")[0]
    # the fork: its parent's closed turns (the turn in hand stays, DESIGN "Forks"), reasoning
    # item verbatim in its place, and no chain
    assert r1 in server.raw[2] and r2 not in server.raw[2]
    kinds = [i["type"] for i in sent[2]["input"]]
    assert kinds[:4] == ["message", "reasoning", "function_call", "function_call_output"]
    assert "Look again." in json.dumps(sent[2]["input"][-1])
    assert sent[3]["input"] == [{"type": "message", "role": "user",
                                 "content": [{"type": "input_text", "text": "And tomorrow?"}]}]
    # after the rewind: everything again, reasoning items verbatim, "And tomorrow?" withdrawn
    texts = json.dumps(sent[4]["input"])
    assert "And tomorrow?" not in texts and "Once more?" in texts
    assert server.raw[4].index(r1) < server.raw[4].index(r2)
    # after the eviction: the residue opens the context, no chain
    assert "previous_response_id" not in sent[6]
    assert r1 not in server.raw[6], "the evicted turn's reasoning left with it"
    assert "weather looked up" in json.dumps(sent[6]["input"][0])
    assert len({b["prompt_cache_key"] for b in sent}) == 1, "a fork shares its lineage's key"


def test_codex_rollout_replays_with_its_reasoning_items(tmp_path, capsys, monkeypatch):
    """``mnemon replay ROLLOUT --provider openai-responses``: every request goes over the wire,
    the rollout's reasoning items are sent back verbatim and in order, and each request is
    priced on the usage the provider reported, as ``--model``."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    rollout = CODEX.read_bytes()
    items = [json.loads(l)["payload"] for l in rollout.splitlines()
             if b'"type":"reasoning"' in l]
    recorded = [json.dumps(i, separators=(",", ":"), ensure_ascii=False).encode()
                for i in items]
    assert len(recorded) == 2 and all(r in rollout for r in recorded), \
        "the rollout's own bytes, compact as Codex wrote them"
    out = tmp_path / "out"
    with Server(answer=lambda n: fixture("reference_stream_text.sse")) as server:
        rc = main(["replay", str(CODEX), "--out", str(out), "--strategy", "none",
                   "--provider", "openai-responses", "--base-url", server.url,
                   "--model", "gpt-5.1", "--no-plot", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert rc == 0
    raw = server.raw
    assert len(raw) == 4, "one request per recorded assistant turn"
    assert all(recorded[0] not in r for r in raw[:1])
    for r in raw[1:]:
        assert recorded[0] in r
        body = json.loads(r)
        kinds = [i.get("type") for i in body["input"]]
        assert kinds[kinds.index("reasoning") + 1] == "function_call", "in its place"
    assert recorded[1] in raw[3] and raw[3].index(recorded[0]) < raw[3].index(recorded[1])
    assert all(json.loads(r)["store"] is False for r in raw)
    assert json.loads(raw[0])["instructions"].startswith("You are Codex")
    figures = summary["strategies"]["none"]
    each = Usage(input_tokens=37, output_tokens=11, reasoning_tokens=0)
    assert figures["input_tokens"] == 4 * 37 and figures["output_tokens"] == 4 * 11
    assert figures["cost_usd"] == pytest.approx(4 * cost_usd(each, "gpt-5.1"), abs=1e-6)
    assert main(["verify", str(out / "none")]) == 0
    assert KEY not in (out / "none" / "agents" / "a1" / "record.jsonl").read_text()


def test_a_job_with_a_synod_shares_the_lineage_key(tmp_path, capsys, monkeypatch):
    """``[provider] name = "openai-responses"`` in a job: each task's synod children are mnemon
    forks (of the task's prompt, decision 0212), so their requests share their parent's
    ``prompt_cache_key`` — another task, another lineage, another key."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with Server(answer=lambda n: say(f"r{n}", "Paris.")) as server:
        job = tmp_path / "job.toml"
        job.write_text(f'''
concurrency = 1
[provider]
name = "openai-responses"
model = "gpt-5.1"
base_url = "{server.url}"
[agent]
system = "Answer in one word."
context_window = 400000
[synod]
n = 2
[[tasks]]
id = "fr"
prompt = "Capital of France?"
[[tasks]]
id = "fr2"
prompt = "And the capital of France, again?"
''', encoding="utf-8")
        root = tmp_path / "run"
        assert main(["run", str(job), "--run-root", str(root), "--json"]) == 0
    capsys.readouterr()
    lines = [json.loads(l) for l in (root / "results.jsonl").read_text().splitlines()]
    assert {(r["task"], r["status"], r["answer"]) for r in lines} == {
        ("fr", "done", "Paris."), ("fr2", "done", "Paris.")}
    sent = server.bodies_sent
    assert len(sent) == 6
    by_task: dict[str, list[tuple[bytes, dict]]] = {}
    for raw, body in zip(server.raw, sent):
        by_task.setdefault(body["input"][0]["content"][0]["text"], []).append((raw, body))
    keys = set()
    for task, requests in by_task.items():
        (root_raw, root_body), *forks = requests
        assert len(root_body["input"]) == 1 and len(forks) == 2
        for raw, body in forks:
            assert body["prompt_cache_key"] == root_body["prompt_cache_key"]
            assert body["input"][0]["content"][0] == root_body["input"][0]["content"][0]
            assert "previous_response_id" not in body
        keys.add(root_body["prompt_cache_key"])
    assert len(keys) == 2
    assert main(["cost", str(root), "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    assert cost["total"]["reasoning_tokens"] == 6 * 4
