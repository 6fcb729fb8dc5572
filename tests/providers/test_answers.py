"""What each HTTP adapter makes of a server's answer that is not the one it asked for, over a
real socket: a whole JSON message to a streaming request (LiteLLM's mock deployments answer so)
is the answer; JSON of another shape, or a page, is refused once and never retried; every HTTP
error names the URL (without a secret) and what the server said, whatever the body's shape;
a turn with tool calls is ``tool_use`` whatever its finish reason; tool calls without ids get
ids of their own. Bodies are the recorded fixtures (or byte edits of them)."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import trio
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mnemon.providers import anthropic, openai, openai_responses
from mnemon.providers.anthropic import AnthropicProvider
from mnemon.providers.errors import NotAnAnswer, ProviderHTTPError, safe_url
from mnemon.providers.openai import OpenAIProvider
from mnemon.providers.openai_responses import ResponsesProvider
from mnemon.providers.retry import RetryPolicy
from mnemon.session.records import ToolUse

from .conformance import WEATHER, fixture, user
from mnemon.providers.base import Request

KEY = "sk-test-key-not-secret-0123"
FAST = RetryPolicy(initial_backoff_s=0.001)  # real sockets: no autojump clock, short waits


class Server:
    """Answers every POST with one (status, content type, body) and counts the requests."""

    def __init__(self, status: int, ctype: str | None, body: bytes):
        self.requests: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers["content-length"]))
                outer.requests.append(self.path)
                self.send_response(status)
                if ctype is not None:
                    self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


ADAPTERS = {
    # name: (make(base_url), the path under the server, the v1 a base URL takes)
    "anthropic": (lambda base, **kw: AnthropicProvider(None, KEY, "m", base_url=base, **kw), ""),
    "openai": (lambda base, **kw: OpenAIProvider(None, KEY, "m", base_url=base, **kw), "/v1"),
    "openai-responses": (lambda base, **kw: ResponsesProvider(None, KEY, "m", base_url=base, **kw),
                         "/v1"),
}
MESSAGES = {  # a whole, non-streamed message of each API, as recorded
    "anthropic": (fixture("anthropic", "message.json"), anthropic.decode_response),
    "openai": (fixture("openai", "completion.json"), openai.decode_response),
    "openai-responses": (fixture("openai_responses", "reference_function_call.json"),
                         openai_responses.decode_response),
}
REQUEST = Request(system="s", messages=[user("What is the weather in Paris?")], tools=[WEATHER])


async def ask(name: str, server: Server, base: str | None = None, **kw):
    make, v1 = ADAPTERS[name]
    async with make(base or server.base + v1, **kw) as p:
        with trio.fail_after(5):  # six attempts of a retried error take ~15 s
            return await p.complete(REQUEST)


# ------------------------------------------------------------------ a JSON answer to a stream


@pytest.mark.parametrize("name", list(ADAPTERS))
async def test_a_json_message_answering_a_stream_is_the_answer(name):
    raw, decode = MESSAGES[name]
    with Server(200, "application/json", raw) as server:
        got = await ask(name, server)
    assert got == decode(json.loads(raw))
    assert any(isinstance(b, ToolUse) for b in got.blocks) and got.stop_reason == "tool_use"
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", list(ADAPTERS))
@pytest.mark.parametrize("ctype, body, said", [
    ("application/json", b'{"detail": "Model m not found in the mock deployment"}',
     "Model m not found in the mock deployment"),
    ("application/json; charset=utf-8", b'{"ok": true}', 'body: {"ok":true}'),
    ("text/html", b"<html><body>Welcome to nginx!</body></html>", "Welcome to nginx!"),
])
async def test_a_200_that_is_no_answer_is_refused_once(name, ctype, body, said):
    with Server(200, ctype, body) as server:
        t0 = time.monotonic()
        with pytest.raises(NotAnAnswer) as info:
            await ask(name, server)
        elapsed = time.monotonic() - t0
    assert len(server.requests) == 1, "refused at once: it cannot succeed, so no retry"
    assert elapsed < 2
    text = str(info.value)
    assert server.base in text and said in text and ctype.split(";")[0] in text
    assert "message_stop" not in text and "[DONE]" not in text


async def test_a_non_streaming_request_answered_with_a_page_is_refused_once():
    with Server(200, "text/html", b"<html>captive portal</html>") as server:
        with pytest.raises(NotAnAnswer, match="captive portal"):
            await ask("openai", server, stream=False)
    assert len(server.requests) == 1


async def test_a_cut_stream_is_still_retried():
    """The line the refusal draws: a stream labelled as one that ends early is retried."""
    with Server(200, "text/event-stream", fixture("anthropic", "truncated.sse")) as server:
        make, _ = ADAPTERS["anthropic"]
        async with make(server.base, retry=FAST) as p:
            with pytest.raises(Exception, match="message_stop"):
                await p.complete(REQUEST)
    assert len(server.requests) == 6


# ------------------------------------------------------------------ errors name URL and server


@pytest.mark.parametrize("name", list(ADAPTERS))
@pytest.mark.parametrize("body, said", [
    (b"", "empty body"),
    (b'{"detail": "Not Found"}', "Not Found"),
    (b'{"detail": [{"loc": ["body", "model"], "msg": "field required"}]}',
     "body.model: field required"),
    (b'{"unexpected": {"shape": 1}}', 'body: {"unexpected":{"shape":1}}'),
])
async def test_an_http_error_names_the_url_and_what_the_server_said(name, body, said):
    with Server(404, "application/json" if body else None, body) as server:
        with pytest.raises(ProviderHTTPError) as info:
            await ask(name, server)
    text = str(info.value)
    path = server.requests[0]
    assert f"HTTP 404 from {server.base}{path}: {said}" in text
    assert text != "HTTP 404: HTTP 404" and KEY not in text
    assert len(server.requests) == 1


async def test_the_server_message_of_a_known_shape_and_the_url():
    with Server(401, "application/json", fixture("anthropic", "error_401.json")) as server:
        with pytest.raises(ProviderHTTPError) as info:
            await ask("anthropic", server)
    assert str(info.value) == f"HTTP 401 from {server.base}/v1/messages: invalid x-api-key"


async def test_an_anthropic_base_url_ending_in_v1_is_named_as_the_likely_cause():
    with Server(404, None, b"") as server:
        with pytest.raises(ProviderHTTPError) as info:
            await ask("anthropic", server, base=server.base + "/v1")
    text = str(info.value)
    assert server.requests == ["/v1/v1/messages"]
    assert f"{server.base}/v1/v1/messages: empty body" in text
    assert "ends in /v1" in text and "without /v1" in text


async def test_an_openai_base_url_without_v1_is_named_as_the_likely_cause():
    with Server(404, "application/json", b'{"detail":"Not Found"}') as server:
        with pytest.raises(ProviderHTTPError, match=r"bare host.*try http://127\.0\.0\.1:\d+/v1"):
            await ask("openai", server, base=server.base)


async def test_the_url_in_an_error_carries_no_secret_and_the_body_no_escape():
    body = b'{"error": {"message": "bad \\u001b[2J\\u001b]0;pwned\\u0007 ' + b"x" * 5000 + b'"}}'
    with Server(400, "application/json", body) as server:
        host = server.base.removeprefix("http://")
        with pytest.raises(ProviderHTTPError) as info:
            await ask("openai", server, base=f"http://user:hunter2@{host}/v1")
    text = str(info.value)
    assert "hunter2" not in text and "user" not in text.split(" from ")[1].split(":")[0]
    assert "\x1b" not in text and "\x07" not in text and "\\x1b[2J" in text
    assert f"from http://{host}/v1/chat/completions" in text


def test_safe_url_drops_user_password_query_and_fragment():
    assert safe_url("https://u:p@api.example.com:8443/v1/x?key=sekrit#frag") == \
        "https://api.example.com:8443/v1/x?…"
    assert safe_url("http://[::1]:9/v1") == "http://[::1]:9/v1"
    assert "\x1b" not in safe_url("http://h/\x1b[2J")


async def test_a_connection_refused_names_the_url():
    with Server(200, None, b"") as server:
        base = server.base
    make, v1 = ADAPTERS["openai"]
    async with make(base + "/v1", retry=FAST) as p:
        with pytest.raises(Exception) as info:
            await p.complete(REQUEST)
    assert f"{base}/v1/chat/completions" in str(info.value)


# ------------------------------------------------------------------ stop reasons with tool calls


def test_tool_calls_finished_with_stop_are_tool_use():
    sse = fixture("openai", "tool_call.sse").replace(b'"finish_reason":"tool_calls"',
                                                      b'"finish_reason":"stop"')
    assert b'"finish_reason":"stop"' in sse
    assert openai.parse_stream(sse).stop_reason == "tool_use"
    whole = json.loads(fixture("openai", "completion.json"))
    whole["choices"][0]["finish_reason"] = "stop"
    assert openai.decode_response(whole).stop_reason == "tool_use"
    assert openai.parse_stream(fixture("openai", "text.sse")).stop_reason == "end_turn"


def test_anthropic_and_responses_tool_turns_are_tool_use():
    msg = json.loads(fixture("anthropic", "message.json"))
    msg["stop_reason"] = "end_turn"
    assert anthropic.decode_response(msg).stop_reason == "tool_use"
    sse = fixture("anthropic", "tool_use.sse").replace(b'"stop_reason":"tool_use"',
                                                        b'"stop_reason":"end_turn"')
    assert b'"stop_reason":"end_turn"' in sse
    assert anthropic.parse_stream(sse).stop_reason == "tool_use"
    resp = json.loads(fixture("openai_responses", "reference_function_call.json"))
    assert openai_responses.decode_response(resp).stop_reason == "tool_use"


# ------------------------------------------------------------------ tool calls without ids

_ID = re.compile(r"^call_[0-9a-f]{24}$")


def _without_ids(raw: bytes) -> bytes:
    out = re.sub(rb'"id":"call_[A-Za-z0-9]+",', b"", raw)
    out = re.sub(rb'"id": "call_[A-Za-z0-9]+", ', b"", out)
    assert b"call_" not in out
    return out


def test_parallel_calls_without_ids_get_unique_deterministic_ids():
    sse = _without_ids(fixture("openai", "parallel_tool_calls.sse"))
    r = openai.parse_stream(sse)
    ids = [b.id for b in r.blocks if isinstance(b, ToolUse)]
    assert len(ids) == 3 and len(set(ids)) == 3 and all(_ID.match(i) for i in ids)
    assert len(ids[0]) <= 40, "OpenAI takes back ids of at most 40 characters"
    assert [b.id for b in openai.parse_stream(sse).blocks] == [b.id for b in r.blocks]
    whole = json.loads(_without_ids(fixture("openai", "completion.json")))
    ids2 = [b.id for b in openai.decode_response(whole).blocks if isinstance(b, ToolUse)]
    assert len(set(ids2)) == 2 and all(_ID.match(i) for i in ids2)
    whole["id"] = "chatcmpl-other"
    assert [b.id for b in openai.decode_response(whole).blocks] != ids2, "drawn from the answer"


def test_a_repeated_id_in_one_message_is_replaced_and_others_kept():
    whole = json.loads(fixture("openai", "completion.json"))
    calls = whole["choices"][0]["message"]["tool_calls"]
    calls[1]["id"] = calls[0]["id"]
    ids = [b.id for b in openai.decode_response(whole).blocks if isinstance(b, ToolUse)]
    assert ids[0] == "call_Paris0001" and _ID.match(ids[1])


def test_responses_function_calls_without_call_id_or_id():
    resp = json.loads(fixture("openai_responses", "reference_function_call.json"))
    call = next(i for i in resp["output"] if i["type"] == "function_call")
    call.pop("call_id", None)
    call.pop("id", None)
    resp["output"].append(dict(call))
    ids = [b.id for b in openai_responses.decode_response(resp).blocks if isinstance(b, ToolUse)]
    assert len(ids) == 2 and len(set(ids)) == 2 and all(_ID.match(i) for i in ids)


# ------------------------------------------------------------------ the class: every error


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=40),
                     lambda kids: st.lists(kids, max_size=4)
                     | st.dictionaries(st.sampled_from(["error", "message", "detail", "msg",
                                                        "type", "code", "loc", "x"]),
                                       kids, max_size=4),
                     max_leaves=20)
_long = st.builds(lambda c, n: c * n, st.characters(), st.integers(1, 5000))  # a proxy echoing a prompt
_bodies = _json | st.text(max_size=3000) | st.just("") | _long | st.builds(
    lambda m: {"error": {"message": m}}, st.text(max_size=40) | _long) | st.builds(
    lambda m: {"detail": m}, st.text(max_size=40) | _long)
_ERRORS = [anthropic.error_from_response, openai.error_from_response]


@settings(max_examples=300, deadline=None)
@given(status=st.sampled_from([400, 401, 403, 404, 405, 409, 413, 422, 429, 500, 502, 529]),
       body=_bodies, which=st.sampled_from([0, 1]),
       path=st.text(alphabet="abcv1/-_", max_size=20),
       secret=st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ", min_size=12, max_size=20))
def test_every_http_error_is_one_bounded_inert_line_naming_the_url_and_no_secret(
        status, body, which, path, secret):
    assume(secret not in json.dumps(body))  # the server's own words are shown, as they are
    url = f"https://user:{secret}@api.example.com:8443/{path}?key={secret}#{secret}"
    error = _ERRORS[which](status, body, {}).located(url, "a likely cause")
    text = str(error)
    assert text.startswith(f"HTTP {status} from https://api.example.com:8443/")
    assert secret not in text
    assert text.isprintable() and len(text) < 1600
    assert not re.fullmatch(r"HTTP \d+ from \S+: HTTP \d+.*", text)
    said = text.split(": ", 1)[1]
    assert said.strip() and said.startswith(("body: ", "empty body")) or \
        error.message in text


@settings(max_examples=200, deadline=None)
@given(body=_bodies, ctype=st.text(max_size=60))
def test_every_refused_answer_is_one_bounded_inert_line(body, ctype):
    assume("pw-secret" not in json.dumps(body) + ctype)
    text = str(NotAnAnswer("http://u:pw-secret@h:1/v1/messages?k=pw-secret", ctype, body,
                           "a streaming request with JSON that is not a message"))
    assert "pw-secret" not in text and text.isprintable() and len(text) < 1600
    assert text.startswith("http://h:1/v1/messages?… answered ")
