"""A Messages-API server on loopback that misbehaves at a chosen rate, for the provider-fault
tests and the soak: 429 with and without ``retry-after``, 529, 500, connection resets,
truncated and stalled SSE streams, malformed JSON, answers slower than the client's timeout.

It plays a model that calls ``transcript_index`` until its conversation holds ``turns`` assistant
messages, then answers; it decides from the request alone, so a retried request gets the same
answer. Every request and the fault it got are counted in ``stats``."""

from __future__ import annotations

import json
import random
import socket
from collections import Counter

import trio

FAULTS = ("429", "429-retry-after", "529", "500", "reset", "truncated", "stalled",
          "malformed", "slow")


def _sse(events: list[tuple[str, dict]]) -> bytes:
    return b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)


def answer_events(body: dict, turns: int) -> list[tuple[str, dict]]:
    said = sum(1 for m in body["messages"] if m["role"] == "assistant")
    n_in = len(json.dumps(body)) // 4
    start = ("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
        "content": [], "stop_reason": None,
        "usage": {"input_tokens": n_in, "output_tokens": 1, "cache_read_input_tokens": 0,
                  "cache_creation_input_tokens": 0}}})
    if said + 1 < turns:
        block = [("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "tool_use", "id": f"tu_{said}",
                                                            "name": "transcript_index", "input": {}}}),
                 ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
                 ("content_block_stop", {"type": "content_block_stop", "index": 0})]
        stop = "tool_use"
    else:
        block = [("content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": ""}}),
                 ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": "all done"}}),
                 ("content_block_stop", {"type": "content_block_stop", "index": 0})]
        stop = "end_turn"
    return [start, *block,
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop},
                               "usage": {"output_tokens": 12}}),
            ("message_stop", {"type": "message_stop"})]


class FaultServer:
    def __init__(self, rate: float, seed: int = 0, turns: int = 10, stall_s: float = 5.0):
        self.rate, self.turns, self.stall_s = rate, turns, stall_s
        self.rng = random.Random(seed)
        self.stats: Counter = Counter()
        self.port: int | None = None

    async def serve(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started(self.port)
        await trio.serve_listeners(self.handle, listeners)

    async def handle(self, stream: trio.SocketStream) -> None:
        try:
            await self._handle(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await stream.aclose()

    async def _handle(self, stream) -> None:
        buf = b""
        while b"\r\n\r\n" not in buf:
            data = await stream.receive_some(65536)
            if not data:
                return
            buf += data
        head, rest = buf.split(b"\r\n\r\n", 1)
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v)
        while len(rest) < length:
            rest += await stream.receive_some(65536)
        body = json.loads(rest[:length])
        fault = self.rng.choice(FAULTS) if self.rng.random() < self.rate else "ok"
        self.stats[fault] += 1
        self.stats["requests"] += 1

        async def respond(status: str, headers: dict, payload: bytes) -> None:
            h = "".join(f"{k}: {v}\r\n" for k, v in {**headers, "connection": "close",
                                                       "content-length": str(len(payload))}.items())
            await stream.send_all(f"HTTP/1.1 {status}\r\n{h}\r\n".encode() + payload)

        err = lambda t, m: json.dumps({"type": "error", "error": {"type": t, "message": m}}).encode()  # noqa: E731
        if fault == "429":
            await respond("429 Too Many Requests", {"content-type": "application/json"},
                          err("rate_limit_error", "slow down"))
        elif fault == "429-retry-after":
            await respond("429 Too Many Requests", {"content-type": "application/json",
                                                    "retry-after": "0"},
                          err("rate_limit_error", "slow down"))
        elif fault == "529":
            await respond("529 Overloaded", {"content-type": "application/json"},
                          err("overloaded_error", "overloaded"))
        elif fault == "500":
            await respond("500 Internal Server Error", {"content-type": "application/json"},
                          err("api_error", "boom"))
        elif fault == "reset":
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        elif fault == "slow":
            await trio.sleep(self.stall_s)
        else:
            events = answer_events(body, self.turns)
            payload = _sse(events)
            if fault == "truncated":
                payload = payload[: len(payload) // 2]
            elif fault == "malformed":
                payload = payload.replace(b'"type": "message_delta"', b'"type": message_delta', 1)
            head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
            if fault == "stalled":
                await stream.send_all(head.encode() + payload[: len(payload) // 2])
                await trio.sleep(self.stall_s)
                return
            await stream.send_all(head.encode() + payload)


async def run_agents(root, server: "FaultServer", agents: int, *, concurrency: int = 16):
    """``agents`` root agents through the real Anthropic adapter against ``server`` on loopback
    (short timeout, fast retries); returns their nodes once every one has ended."""
    from mnemon.orchestrator.settings import Settings
    from mnemon.orchestrator.supervisor import open_supervisor
    from mnemon.providers.anthropic import AnthropicProvider
    from mnemon.providers.retry import RetryPolicy

    async with trio.open_nursery() as n:
        port = await n.start(server.serve)
        provider = AnthropicProvider(
            None, "sk-test", "claude-sonnet-4-5", base_url=f"http://127.0.0.1:{port}",
            timeout=0.5, retry=RetryPolicy(max_attempts=8, initial_backoff_s=0.01,
                                           max_backoff_s=0.05))
        settings = Settings(model="claude-sonnet-4-5", concurrency=concurrency,
                            max_agents=agents + 1)
        async with open_supervisor(root, provider, settings) as sup:
            nodes = [sup.new_root(f"task {i}") for i in range(agents)]
            for node in nodes:
                sup.start(node)
        await provider.aclose()
        n.cancel_scope.cancel()
    return nodes
