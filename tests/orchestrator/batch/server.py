"""A loopback server for both providers' batch APIs (and their live routes), answering with a
deterministic model: ``batch_policy.model``, the policy the scripted provider plays in the
``--engine local`` runs the batch runs are compared with.

Shapes follow the providers' API references and official SDKs (``fixtures/README.md``):

* Anthropic: ``POST /v1/messages`` (JSON or SSE), ``POST /v1/messages/batches``,
  ``GET /v1/messages/batches/{id}``, ``GET /v1/messages/batches/{id}/results`` (the batch's
  ``results_url``), ``POST /v1/messages/batches/{id}/cancel``, ``GET /v1/messages/batches``
  (newest first; ``limit``, ``after_id``; ``data``, ``has_more``, ``first_id``, ``last_id``).
* OpenAI: ``POST /v1/chat/completions``, ``POST /v1/files`` (multipart, ``purpose=batch``),
  ``POST /v1/batches`` (endpoint ``/v1/chat/completions`` or ``/v1/responses``, ``metadata``),
  ``GET /v1/batches/{id}``, ``GET /v1/files/{id}/content``, ``POST /v1/batches/{id}/cancel``,
  ``GET /v1/batches`` and ``GET /v1/files`` (newest first; ``limit``, ``after``, files also
  ``purpose``), ``DELETE /v1/files/{id}``.

Controls (``Control``): how long a batch stays in progress, custom ids whose rows expire or
error, batches that fail whole, routes answered 404, creates (and uploads) whose answer is lost
after they were accepted, a hook run between accepting a create and answering it. Every request
is logged (``log``) and every submitted custom id kept in submission order (``submitted``).

Usage is deterministic and the same for a request sent live or in a batch: input tokens are the
request body's compact JSON bytes ÷ 4 (without ``stream`` fields); when the body carries a cache
breakpoint (Anthropic) or always (OpenAI), half of them are reported as cache reads.
"""

from __future__ import annotations

import email.parser
import itertools
import json
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs

from mnemon.providers.base import Request

from . import batch_policy

MODEL_A = "claude-sonnet-4-5"
MODEL_O = "gpt-4.1"


@dataclass
class Control:
    delay_s: float = 0.0
    """A batch is ``in_progress`` for this long after it is created."""
    expire: Callable[[str], bool] = lambda cid: False
    """Custom ids whose rows come back ``expired`` (Anthropic) / ``batch_expired`` (OpenAI)."""
    error: Callable[[str], bool] = lambda cid: False
    """Custom ids whose rows come back errored (overloaded: a retryable error)."""
    fail_batches: int = 0
    """The next N OpenAI batches end ``failed`` (their input refused), nothing of them run."""
    no_batch_routes: bool = False
    """Every batch route answers 404 (a server with the live API only)."""
    policy: str = "model"
    """Which function of ``batch_policy`` plays the model."""
    drop: str | None = None
    """``"reset"`` or ``"502"``: the first answer to each create (and each OpenAI upload) is
    lost after the server accepted it — the connection reset, or a proxy's 502 — once per
    create: its retry is answered."""
    no_list: bool = False
    """The list routes (``GET /v1/messages/batches``, ``/v1/batches``, ``/v1/files``) answer
    404, as on a server that serves batches but does not list them."""
    after_create: Callable[[str], None] | None = None
    """Called with the id of a batch (or an OpenAI input file) once it is accepted, before the
    answer is sent (a test blocks here to kill its client in that window)."""


@dataclass
class Batch:
    id: str
    provider: str
    requests: list[dict[str, Any]]
    created: float
    cancelled: bool = False
    failed: bool = False
    wall: float = field(default_factory=time.time)
    metadata: dict[str, str] | None = None
    rows: list[dict[str, Any]] | None = None
    output_file: str | None = None
    error_file: str | None = None


@dataclass
class State:
    control: Control = field(default_factory=Control)
    log: list[tuple[str, str]] = field(default_factory=list)
    submitted: list[str] = field(default_factory=list)
    batches: dict[str, Batch] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    file_meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each file's ``file`` object, in upload order (deleted ones removed)."""
    uploads: int = 0
    dropped: list[str] = field(default_factory=list)
    """What had its answer lost: the ids of batches and files made."""
    dropped_keys: set[bytes] = field(default_factory=set)
    live_requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    ids: Any = field(default_factory=lambda: itertools.count(1))


# ----------------------------------------------------------------------------- the model


def _neutral_anthropic(params: dict[str, Any]) -> Request:
    messages = []
    for m in params.get("messages", []):
        content = m["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
        messages.append({"role": m["role"], "content": blocks})
    system = params.get("system")
    if isinstance(system, list):
        system = "".join(b["text"] for b in system)
    return Request(system=system, messages=messages, meta={})


def _neutral_openai(body: dict[str, Any]) -> Request:
    messages: list[dict[str, Any]] = []
    system = None

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    for m in body.get("messages", []):
        if m["role"] == "system":
            system = m["content"]
        elif m["role"] == "user":
            c = m["content"]
            add("user", [{"type": "text", "text": c}] if isinstance(c, str) else list(c))
        elif m["role"] == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": m["tool_call_id"],
                          "content": m["content"]}])
        else:
            blocks = [{"type": "text", "text": m["content"]}] if m.get("content") else []
            blocks += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                        "input": json.loads(c["function"]["arguments"])}
                       for c in m.get("tool_calls") or []]
            add("assistant", blocks)
    return Request(system=system, messages=messages, meta={})


def _neutral_responses(body: dict[str, Any]) -> Request:
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    for item in body.get("input", []):
        kind = item.get("type")
        if kind == "message":
            add(item["role"], [{"type": "text", "text": p["text"]} for p in item["content"]])
        elif kind == "function_call":
            add("assistant", [{"type": "tool_use", "id": item["call_id"], "name": item["name"],
                               "input": json.loads(item["arguments"])}])
        elif kind == "function_call_output":
            add("user", [{"type": "tool_result", "tool_use_id": item["call_id"],
                          "content": item["output"]}])
    return Request(system=body.get("instructions"), messages=messages, meta={})


def _tokens(body: dict[str, Any]) -> int:
    body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    return len(json.dumps(body, separators=(",", ":")).encode()) // 4


def anthropic_message(params: dict[str, Any], n: int, policy: str = "model") -> dict[str, Any]:
    blocks, stop = getattr(batch_policy, policy)(_neutral_anthropic(params), {})
    tokens = _tokens(params)
    cached = tokens // 2 if "cache_control" in json.dumps(params) else 0
    return {"id": f"msg_{n:06d}", "type": "message", "role": "assistant",
            "model": params.get("model") or MODEL_A, "content": blocks, "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": tokens - cached, "output_tokens":
                      len(json.dumps(blocks)) // 4, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": cached}}


def openai_completion(body: dict[str, Any], n: int, policy: str = "model") -> dict[str, Any]:
    blocks, stop = getattr(batch_policy, policy)(_neutral_openai(body), {})
    texts = [b["text"] for b in blocks if b["type"] == "text"]
    calls = [{"id": b["id"], "type": "function",
              "function": {"name": b["name"], "arguments": json.dumps(b["input"])}}
             for b in blocks if b["type"] == "tool_use"]
    msg: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) or None,
                           "refusal": None}
    if calls:
        msg["tool_calls"] = calls
    tokens = _tokens(body)
    return {"id": f"chatcmpl-{n:06d}", "object": "chat.completion", "created": 1764633600,
            "model": body.get("model") or MODEL_O,
            "choices": [{"index": 0, "message": msg, "logprobs": None,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": tokens, "completion_tokens": len(json.dumps(blocks)) // 4,
                      "total_tokens": tokens + len(json.dumps(blocks)) // 4,
                      "prompt_tokens_details": {"cached_tokens": tokens // 2}}}


def responses_body(body: dict[str, Any], n: int, policy: str = "model") -> dict[str, Any]:
    """A Responses API ``response`` object (``status: completed``)."""
    blocks, _stop = getattr(batch_policy, policy)(_neutral_responses(body), {})
    output: list[dict[str, Any]] = []
    texts = [b["text"] for b in blocks if b["type"] == "text"]
    if texts:
        output.append({"type": "message", "id": f"msg_{n:06d}", "role": "assistant",
                       "status": "completed", "content": [
                           {"type": "output_text", "text": t, "annotations": []}
                           for t in texts]})
    output += [{"type": "function_call", "id": f"fc_{n:06d}_{i}", "call_id": b["id"],
                "name": b["name"], "arguments": json.dumps(b["input"]), "status": "completed"}
               for i, b in enumerate(blocks) if b["type"] == "tool_use"]
    tokens = _tokens(body)
    out_tokens = len(json.dumps(blocks)) // 4
    return {"id": f"resp_{n:06d}", "object": "response", "created_at": 1764633600,
            "status": "completed", "model": body.get("model") or MODEL_O, "output": output,
            "usage": {"input_tokens": tokens, "input_tokens_details": {"cached_tokens":
                                                                       tokens // 2},
                      "output_tokens": out_tokens,
                      "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": tokens + out_tokens}}


# ----------------------------------------------------------------------------- the routes


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + "Z"


class Handler(BaseHTTPRequestHandler):
    state: State  # set on the subclass made per server
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    # -- plumbing

    def _body(self) -> bytes:
        n = int(self.headers.get("content-length") or 0)
        return self.rfile.read(n) if n else b""

    def _send(self, status: int, body: Any, ctype: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _missing(self) -> None:
        self._send(404, {"type": "error", "error": {"type": "not_found_error",
                                                     "message": "Not found"}})

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_DELETE(self) -> None:
        self._route("DELETE")

    def _query(self) -> dict[str, str]:
        q = self.path.split("?", 1)[1] if "?" in self.path else ""
        return {k: v[-1] for k, v in parse_qs(q).items()}

    def _answer_made(self, made: str, body: Any, key: bytes) -> None:
        """Answer a create or an upload the server accepted (``made``, the id of what it made)
        — or lose that answer, the first time a request of this ``key`` (its content: the same
        on a retry) comes, as ``control.drop`` says."""
        st = self.state
        if st.control.after_create is not None:
            st.control.after_create(made)
        with st.lock:
            lose = st.control.drop is not None and key not in st.dropped_keys
            if lose:
                st.dropped_keys.add(key)
                st.dropped.append(made)
        if not lose:
            return self._send(200, body)
        if st.control.drop == "502":  # a proxy's answer after the provider accepted it
            return self._send(502, b"<html><body>502 Bad Gateway</body></html>", "text/html")
        # the connection reset (RST) instead of an answer
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True

    def _route(self, method: str) -> None:
        st = self.state
        path = self.path.split("?", 1)[0]
        body = self._body() if method == "POST" else b""
        with st.lock:
            st.log.append((method, path))
        batch_route = "/batches" in path or path.startswith("/v1/files")
        if batch_route and st.control.no_batch_routes:
            return self._missing()
        if method == "GET" and st.control.no_list and path in (
                "/v1/messages/batches", "/v1/batches", "/v1/files"):
            return self._missing()
        routes = [
            ("POST", r"/v1/messages", self.a_live),
            ("POST", r"/v1/messages/batches", self.a_create),
            ("GET", r"/v1/messages/batches", self.a_list),
            ("GET", r"/v1/messages/batches/([^/]+)", self.a_get),
            ("GET", r"/v1/messages/batches/([^/]+)/results", self.a_results),
            ("POST", r"/v1/messages/batches/([^/]+)/cancel", self.a_cancel),
            ("POST", r"/v1/chat/completions", self.o_live),
            ("POST", r"/v1/files", self.o_upload),
            ("POST", r"/v1/batches", self.o_create),
            ("GET", r"/v1/batches", self.o_list),
            ("GET", r"/v1/files", self.o_files),
            ("DELETE", r"/v1/files/([^/]+)", self.o_delete),
            ("GET", r"/v1/batches/([^/]+)", self.o_get),
            ("POST", r"/v1/batches/([^/]+)/cancel", self.o_cancel),
            ("GET", r"/v1/files/([^/]+)/content", self.o_content),
        ]
        for m, pattern, fn in routes:
            hit = re.fullmatch(pattern, path)
            if m == method and hit:
                return fn(body, *hit.groups())
        self._missing()

    def _n(self) -> int:
        with self.state.lock:
            return next(self.state.ids)

    # -- Anthropic

    def a_live(self, body: bytes) -> None:
        params = json.loads(body)
        self.state.live_requests += 1
        msg = anthropic_message(params, self._n(), self.state.control.policy)
        if not params.get("stream"):
            return self._send(200, msg)
        events = [("message_start", {"type": "message_start", "message": {
            **msg, "content": [], "stop_reason": None,
            "usage": {**msg["usage"], "output_tokens": 1}}})]
        for i, b in enumerate(msg["content"]):
            if b["type"] == "text":
                events += [("content_block_start", {"type": "content_block_start", "index": i,
                                                    "content_block": {"type": "text", "text": ""}}),
                           ("content_block_delta", {"type": "content_block_delta", "index": i,
                                                    "delta": {"type": "text_delta",
                                                              "text": b["text"]}})]
            else:
                events += [("content_block_start", {"type": "content_block_start", "index": i,
                                                    "content_block": {**b, "input": {}}}),
                           ("content_block_delta", {"type": "content_block_delta", "index": i,
                                                    "delta": {"type": "input_json_delta",
                                                              "partial_json":
                                                              json.dumps(b["input"])}})]
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events += [("message_delta", {"type": "message_delta", "delta": {
            "stop_reason": msg["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": msg["usage"]["output_tokens"]}}),
            ("message_stop", {"type": "message_stop"})]
        data = "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events).encode()
        self._send(200, data, "text/event-stream")

    def _a_batch(self, b: Batch) -> dict[str, Any]:
        ended = self._ended(b)
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if ended:
            for r in self._rows(b):
                counts[r["result"]["type"]] += 1
        else:
            counts["processing"] = len(b.requests)
        host = self.headers.get("host")
        return {"id": b.id, "type": "message_batch",
                "processing_status": "ended" if ended else
                ("canceling" if b.cancelled else "in_progress"),
                "request_counts": counts, "ended_at": _iso(time.time()) if ended else None,
                "created_at": _iso(b.wall), "expires_at": _iso(b.wall + 86400),
                "archived_at": None, "cancel_initiated_at": _iso(b.wall) if b.cancelled
                else None,
                "results_url": f"http://{host}/v1/messages/batches/{b.id}/results" if ended
                else None}

    def _ended(self, b: Batch) -> bool:
        return b.cancelled or time.monotonic() - b.created >= self.state.control.delay_s

    def _rows(self, b: Batch) -> list[dict[str, Any]]:
        """The batch's rows, decided once: expired, errored, canceled or run by the model."""
        if b.rows is not None:
            return b.rows
        c = self.state.control
        rows = []
        for r in b.requests:
            cid = r["custom_id"]
            if b.provider == "anthropic":
                if b.cancelled:
                    result: dict[str, Any] = {"type": "canceled"}
                elif c.expire(cid):
                    result = {"type": "expired"}
                elif c.error(cid):
                    result = {"type": "errored", "error": {"type": "error", "error": {
                        "type": "overloaded_error", "message": "Overloaded"}}}
                else:
                    result = {"type": "succeeded",
                              "message": anthropic_message(r["params"], self._n(), c.policy)}
                rows.append({"custom_id": cid, "result": result})
            else:
                n = self._n()
                if b.cancelled or c.expire(cid):
                    code = "batch_cancelled" if b.cancelled else "batch_expired"
                    rows.append({"id": f"batch_req_{n:06d}", "custom_id": cid, "response": None,
                                 "error": {"code": code, "message": "not executed"}})
                elif c.error(cid):
                    rows.append({"id": f"batch_req_{n:06d}", "custom_id": cid, "response": {
                        "status_code": 503, "request_id": f"req_{n}", "body": {"error": {
                            "message": "overloaded", "type": "server_error"}}}, "error": None})
                else:
                    make = responses_body if r["url"] == "/v1/responses" else openai_completion
                    rows.append({"id": f"batch_req_{n:06d}", "custom_id": cid, "response": {
                        "status_code": 200, "request_id": f"req_{n}",
                        "body": make(r["body"], n, c.policy)}, "error": None})
        b.rows = rows
        return rows

    def _new_batch(self, provider: str, requests: list[dict[str, Any]], prefix: str) -> Batch:
        st = self.state
        with st.lock:
            b = Batch(id=f"{prefix}{next(st.ids):06d}", provider=provider, requests=requests,
                      created=time.monotonic())
            st.batches[b.id] = b
            st.submitted += [r["custom_id"] for r in requests]
        return b

    def a_create(self, body: bytes) -> None:
        reqs = json.loads(body)["requests"]
        for r in reqs:
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", r["custom_id"]) or "stream" in r["params"]:
                return self._send(400, {"type": "error", "error": {
                    "type": "invalid_request_error", "message": f"bad request {r['custom_id']}"}})
        b = self._new_batch("anthropic", reqs, "msgbatch_")
        self._answer_made(b.id, self._a_batch(b), body)

    def a_list(self, body: bytes) -> None:
        """``GET /v1/messages/batches``: newest first, ``limit`` (≤ 1000) from ``after_id``."""
        q = self._query()
        self._send(200, self._page([self._a_batch(b) for b in self._newest()],
                                   int(q.get("limit", 20)), q.get("after_id")))

    def _newest(self) -> list[Batch]:
        with self.state.lock:
            return sorted(self.state.batches.values(), key=lambda b: b.id, reverse=True)

    @staticmethod
    def _page(items: list[dict[str, Any]], limit: int, after: str | None) -> dict[str, Any]:
        if after is not None:
            ids = [x["id"] for x in items]
            items = items[ids.index(after) + 1:] if after in ids else []
        page = items[:limit]
        return {"object": "list", "data": page, "has_more": len(items) > limit,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None}

    def a_get(self, body: bytes, bid: str) -> None:
        b = self.state.batches.get(bid)
        self._send(200, self._a_batch(b)) if b else self._missing()

    def a_results(self, body: bytes, bid: str) -> None:
        b = self.state.batches.get(bid)
        if b is None or not self._ended(b):
            return self._missing()
        data = b"".join(json.dumps(r).encode() + b"\n" for r in self._rows(b))
        self._send(200, data, "application/binary")

    def a_cancel(self, body: bytes, bid: str) -> None:
        b = self.state.batches.get(bid)
        if b is None:
            return self._missing()
        if not self._ended(b):
            b.cancelled = True
        self._send(200, self._a_batch(b))

    # -- OpenAI

    def o_live(self, body: bytes) -> None:
        req = json.loads(body)
        self.state.live_requests += 1
        done = openai_completion(req, self._n(), self.state.control.policy)
        if not req.get("stream"):
            return self._send(200, done)
        msg = done["choices"][0]["message"]
        delta: dict[str, Any] = {"role": "assistant", "content": msg["content"]}
        if msg.get("tool_calls"):
            delta["tool_calls"] = [{**c, "index": i} for i, c in enumerate(msg["tool_calls"])]
        chunks = [{"id": done["id"], "object": "chat.completion.chunk", "model": done["model"],
                   "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                  {"id": done["id"], "object": "chat.completion.chunk", "model": done["model"],
                   "choices": [{"index": 0, "delta": {}, "finish_reason":
                                done["choices"][0]["finish_reason"]}]},
                  {"id": done["id"], "object": "chat.completion.chunk", "model": done["model"],
                   "choices": [], "usage": done["usage"]}]
        data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        self._send(200, data.encode(), "text/event-stream")

    def o_upload(self, body: bytes) -> None:
        ctype = self.headers.get("content-type", "")
        msg = email.parser.BytesParser().parsebytes(
            b"content-type: " + ctype.encode() + b"\r\n\r\n" + body)
        parts = {p.get_param("name", header="content-disposition"): p for p in msg.get_payload()}
        if parts["purpose"].get_payload(decode=True) != b"batch":
            return self._send(400, {"error": {"message": "purpose must be batch"}})
        content = parts["file"].get_payload(decode=True)
        name = parts["file"].get_filename()
        st = self.state
        fid = f"file-{self._n():06d}"
        meta = {"id": fid, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                "filename": name, "purpose": "batch"}
        with st.lock:
            st.files[fid] = content
            st.file_meta[fid] = meta
            st.uploads += 1
        self._answer_made(fid, meta, name.encode() + b"\0" + content)

    def o_files(self, body: bytes) -> None:
        """``GET /v1/files``: ``purpose``, ``order`` (desc), ``limit`` from ``after``."""
        q = self._query()
        with self.state.lock:
            items = [m for m in self.state.file_meta.values()
                     if q.get("purpose") in (None, m["purpose"])]
        items.sort(key=lambda m: m["id"], reverse=q.get("order", "desc") == "desc")
        self._send(200, self._page(items, int(q.get("limit", 10000)), q.get("after")))

    def o_delete(self, body: bytes, fid: str) -> None:
        with self.state.lock:
            gone = self.state.file_meta.pop(fid, None)
        if gone is None:
            return self._missing()
        self._send(200, {"id": fid, "object": "file", "deleted": True})

    def _o_batch(self, b: Batch) -> dict[str, Any]:
        ended = self._ended(b)
        st = self.state
        status = ("failed" if b.failed else "cancelled" if b.cancelled and ended else
                  "cancelling" if b.cancelled else "completed" if ended else "in_progress")
        out: dict[str, Any] = {"id": b.id, "object": "batch", "endpoint": "/v1/chat/completions",
                               "errors": None, "input_file_id": f"file-in-{b.id}",
                               "completion_window": "24h", "status": status,
                               "output_file_id": None, "error_file_id": None,
                               "created_at": int(b.wall), "in_progress_at": None,
                               "expires_at": None, "finalizing_at": None, "completed_at": None,
                               "failed_at": None, "expired_at": None, "cancelling_at": None,
                               "cancelled_at": None,
                               "request_counts": {"total": len(b.requests), "completed": 0,
                                                  "failed": 0}, "metadata": b.metadata}
        if b.failed:
            out["errors"] = {"object": "list", "data": [
                {"code": "invalid_request", "message": "the input was refused", "param": None,
                 "line": 1}]}
            return out
        if ended:
            rows = self._rows(b)
            ok = [r for r in rows if r["error"] is None and r["response"]["status_code"] == 200]
            bad = [r for r in rows if r not in ok]
            with st.lock:
                if b.output_file is None and ok:
                    b.output_file = f"file-out-{b.id}"
                    st.files[b.output_file] = b"".join(json.dumps(r).encode() + b"\n"
                                                       for r in ok)
                if b.error_file is None and bad:
                    b.error_file = f"file-err-{b.id}"
                    st.files[b.error_file] = b"".join(json.dumps(r).encode() + b"\n"
                                                      for r in bad)
            out.update(output_file_id=b.output_file, error_file_id=b.error_file,
                       request_counts={"total": len(rows), "completed": len(ok),
                                       "failed": len(bad)})
        return out

    def o_create(self, body: bytes) -> None:
        req = json.loads(body)
        content = self.state.files.get(req["input_file_id"])
        endpoint = req.get("endpoint")
        if content is None or endpoint not in ("/v1/chat/completions", "/v1/responses") or \
                req.get("completion_window") != "24h":
            return self._send(400, {"error": {"message": "bad batch"}})
        lines = [json.loads(x) for x in content.splitlines() if x.strip()]
        for r in lines:
            if r.get("method") != "POST" or r.get("url") != endpoint or "stream" in r["body"]:
                return self._send(400, {"error": {"message": f"bad line {r['custom_id']}"}})
        b = self._new_batch("openai", lines, "batch_")
        b.metadata = req.get("metadata")
        c = self.state.control
        if c.fail_batches:
            c.fail_batches -= 1
            b.failed = True
        self._answer_made(b.id, self._o_batch(b), body)

    def o_list(self, body: bytes) -> None:
        """``GET /v1/batches``: newest first, ``limit`` (≤ 100) from ``after``."""
        q = self._query()
        self._send(200, self._page([self._o_batch(b) for b in self._newest()],
                                   int(q.get("limit", 20)), q.get("after")))

    def o_get(self, body: bytes, bid: str) -> None:
        b = self.state.batches.get(bid)
        self._send(200, self._o_batch(b)) if b else self._missing()

    def o_cancel(self, body: bytes, bid: str) -> None:
        b = self.state.batches.get(bid)
        if b is None:
            return self._missing()
        if not self._ended(b):
            b.cancelled = True
        self._send(200, self._o_batch(b))

    def o_content(self, body: bytes, fid: str) -> None:
        data = self.state.files.get(fid)
        self._send(200, data, "application/octet-stream") if data is not None else \
            self._missing()


class Server:
    """``with Server() as s:`` — ``s.url`` (Anthropic's base URL; OpenAI's is ``s.url + "/v1"``),
    ``s.state`` (controls and logs)."""

    def __init__(self) -> None:
        self.state = State()
        handler = type("H", (Handler,), {"state": self.state})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "Server":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
