"""Gemini (the Gemini API and Vertex AI's Gemini endpoint): encode, decode, streamed chunks,
thought signatures round-tripping through the log, errors and retries, selection."""

from __future__ import annotations

import json
import random

import httpx
import msgspec
import pytest
import trio

from mnemon.providers.base import Request, ToolDef
from mnemon.providers.errors import (AuthError, ContextTooLong, InvalidRequest,
                                     ProviderConfigError, RateLimited, ServerError,
                                     StreamInterrupted)
from mnemon.providers.gemini import (GeminiProvider, VertexGeminiProvider, decode_response,
                                     decode_usage, encode_request, error_from_response,
                                     parse_stream, thinks, vertex_base_url)
from mnemon.providers.prices import cost_usd, price_for
from mnemon.providers.retry import RetryPolicy
from mnemon.providers.select import make_provider
from mnemon.session.records import (AssistantMessage, Opaque, Text, Thinking, ToolUse, Usage,
                                    decode, encode)
from tests.providers.conformance import WEATHER, fixture, user

SIG_CALL = "CtwCAdHtim9+pZsZ3UGBqkU4dRnAcUq9ALo6vYSm0Cj1ZGjObUTnqzVxc9t27VKQvfZl"
SIG_TEXT = "CiQB0e2Kb1JmZ0s0aW5nLXNpZ25hdHVyZS1vZi10aGUtdGV4dA=="


def provider(transport: httpx.MockTransport, **kw) -> GeminiProvider:
    return GeminiProvider(httpx.AsyncClient(transport=transport), "AIza-secret",
                          "gemini-2.5-pro", rng=random.Random(0), **kw)


def neutral(blocks) -> dict:
    """An assistant message as the log gives it back to an adapter (encoded, then decoded)."""
    msg = AssistantMessage(turn=1, blocks=list(blocks), stop_reason="tool_use",
                           usage=Usage(), model="gemini-2.5-pro")
    back = decode(encode(msg))
    return {"role": "assistant", "content": [msgspec.to_builtins(b) for b in back.blocks]}


class TestStream:
    def test_text_with_a_closing_signed_empty_part(self):
        """Unsigned deltas join; the signed empty part that ends the stream is kept whole;
        usage counts cached tokens apart and thinking as output."""
        r = parse_stream(fixture("gemini", "text.sse"))
        assert r.blocks == [Text("The answer is 42."),
                            Opaque("gemini", {"part": {"text": "", "thoughtSignature": SIG_TEXT}})]
        assert r.stop_reason == "end_turn" and r.model == "gemini-2.5-flash"
        assert r.usage == Usage(input_tokens=1037, output_tokens=44, cache_read_tokens=1024,
                                reasoning_tokens=32)
        assert r.id == "5bQuaPjVOo-mz7IPxbvR0Ak"

    def test_thought_then_signed_call(self):
        r = parse_stream(fixture("gemini", "function_call.sse"))
        thought, sig, call = r.blocks
        assert type(thought) is Thinking and thought.signature is None
        assert sig == Opaque("gemini", {"thoughtSignature": SIG_CALL})
        assert call.name == "get_weather" and call.input == {"location": "Paris"}
        assert call.id.startswith("call_") and len(call.id) == 29, "Gemini gave no id: one made"
        assert r.stop_reason == "tool_use", "STOP after a call is recorded as tool_use"
        assert r.usage == Usage(input_tokens=1024, output_tokens=146, cache_read_tokens=4096,
                                reasoning_tokens=128)

    def test_cut_stream_and_midstream_overload_are_retriable(self):
        with pytest.raises(StreamInterrupted, match="finishReason"):
            parse_stream(fixture("gemini", "no_finish.sse"))
        with pytest.raises(StreamInterrupted, match="UNAVAILABLE"):
            parse_stream(fixture("gemini", "midstream_error.sse"))

    def test_max_tokens(self):
        r = parse_stream(fixture("gemini", "max_tokens.sse"))
        assert r.stop_reason == "max_tokens" and r.usage.output_tokens == 64

    def test_a_signed_part_is_never_merged(self):
        chunks = [{"candidates": [{"content": {"parts": [p]}}]} for p in (
            {"text": "a"}, {"text": "b", "thoughtSignature": "S1"}, {"text": "c"})]
        chunks[-1]["candidates"][0]["finishReason"] = "STOP"
        raw = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
        r = parse_stream(raw)
        assert r.blocks == [Text("a"), Opaque("gemini", {"thoughtSignature": "S1"}), Text("b"),
                            Text("c")]


class TestDecode:
    def test_documented_parallel_calls(self):
        r = decode_response(json.loads(fixture("gemini", "generate_content.json")))
        sig, a, b = r.blocks
        assert sig == Opaque("gemini",
                             {"thoughtSignature": "Ct8BAdHtim/schedule/meeting/signature"})
        assert (a.name, b.name) == ("schedule_meeting", "schedule_meeting")
        assert a.id != b.id, "two calls without ids get distinct ones"
        assert r.usage == Usage(input_tokens=118, output_tokens=42)
        assert r.stop_reason == "tool_use"

    def test_given_ids_kept(self):
        body = {"candidates": [{"content": {"parts": [
            {"functionCall": {"id": "fc-7", "name": "f", "args": {}}}]}, "finishReason": "STOP"}]}
        assert decode_response(body).blocks == [ToolUse("fc-7", "f", {})]

    def test_blocked_prompt_is_a_refusal(self):
        r = decode_response(json.loads(fixture("gemini", "blocked.json")))
        assert r.blocks == [] and r.stop_reason == "refusal"
        assert r.usage.input_tokens == 9

    def test_unknown_parts_kept_whole(self):
        part = {"executableCode": {"language": "PYTHON", "code": "print(1)"}}
        body = {"candidates": [{"content": {"parts": [part]}, "finishReason": "STOP"}]}
        assert decode_response(body).blocks == [Opaque("gemini", {"part": part})]

    def test_usage_tool_prompt_counted_as_input(self):
        assert decode_usage({"promptTokenCount": 10, "toolUsePromptTokenCount": 5,
                             "cachedContentTokenCount": 4, "candidatesTokenCount": 3}) == \
            Usage(input_tokens=11, output_tokens=3, cache_read_tokens=4)


class TestEncode:
    def test_signatures_round_trip_through_the_log(self):
        """The decoded turn, written to the log and read back, goes out with each signature on
        the part that carried it; a generated id is not sent, the result is named."""
        first = parse_stream(fixture("gemini", "function_call.sse"))
        call = first.blocks[2]
        req = Request(system="Be terse.", tools=[WEATHER], model="gemini-2.5-pro", messages=[
            user("Weather in Paris?"), neutral(first.blocks),
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                          "content": "18C sunny", "is_error": False}]}])
        body = encode_request(req)
        assert body["systemInstruction"] == {"parts": [{"text": "Be terse."}]}
        assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
        assert body["contents"][1]["parts"] == [{
            "functionCall": {"name": "get_weather", "args": {"location": "Paris"}},
            "thoughtSignature": SIG_CALL}], "the unsigned thought summary is not sent"
        assert body["contents"][2]["parts"] == [{"functionResponse": {
            "name": "get_weather", "response": {"output": "18C sunny"}}}]
        assert body["tools"] == [{"functionDeclarations": [{
            "name": "get_weather", "description": WEATHER.description,
            "parametersJsonSchema": WEATHER.input_schema}]}]
        assert body["generationConfig"] == {"maxOutputTokens": 8192,
                                            "thinkingConfig": {"includeThoughts": True}}

    def test_whole_parts_and_signed_thoughts_go_back_in_place(self):
        whole = {"text": "", "thoughtSignature": SIG_TEXT}
        msg = neutral([Opaque("gemini", {"thoughtSignature": "T"}), Thinking("plan", None),
                       Text("The answer is 42."), Opaque("gemini", {"part": whole}),
                       Opaque("anthropic", {"type": "redacted_thinking"}),
                       Thinking("other's", "anthropic-sig")])
        body = encode_request(Request(system=None, messages=[user("q"), msg]))
        parts = body["contents"][1]["parts"]
        assert parts == [{"text": "plan", "thought": True, "thoughtSignature": "T"},
                         {"text": "The answer is 42."}, whole]

    def test_given_ids_and_errors(self):
        msg = {"role": "assistant", "content": [
            {"type": "tool_use", "id": "fc-7", "name": "f", "input": '{"cut'}]}
        res = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "fc-7",
                                            "content": "boom", "is_error": True}]}
        body = encode_request(Request(system=None, messages=[user("q"), msg, res]))
        assert body["contents"][1]["parts"] == [
            {"functionCall": {"name": "f", "args": {"arguments": '{"cut'}, "id": "fc-7"}}]
        assert body["contents"][2]["parts"] == [
            {"functionResponse": {"name": "f", "response": {"error": "boom"}, "id": "fc-7"}}]

    def test_tool_choice_and_old_models(self):
        tools = [WEATHER, ToolDef("other", "o", {"type": "object"})]
        for choice, config in [("auto", {"mode": "AUTO"}), ("none", {"mode": "NONE"}),
                               ("required", {"mode": "ANY"}),
                               ("get_weather", {"mode": "ANY",
                                                "allowedFunctionNames": ["get_weather"]})]:
            body = encode_request(Request(system=None, messages=[user("q")], tools=tools,
                                          tool_choice=choice), model="gemini-2.0-flash")
            assert body["toolConfig"] == {"functionCallingConfig": config}
            assert "thinkingConfig" not in body["generationConfig"], "2.0 does not think"
        assert thinks("gemini-2.5-flash-lite") and thinks("gemini-3-pro-preview")
        assert not thinks("gemini-1.5-pro") and not thinks("gemini-2.0-flash")
        assert not thinks("gpt-4.1")


class TestErrors:
    def test_kinds(self):
        e = error_from_response(429, json.loads(fixture("gemini", "error_429.json")), {})
        assert isinstance(e, RateLimited) and e.headers["retry-after"] == "7"
        assert isinstance(error_from_response(503, json.loads(fixture("gemini", "error_503.json")),
                                              {}), ServerError)
        assert isinstance(error_from_response(
            400, json.loads(fixture("gemini", "error_context.json")), {}), ContextTooLong)
        key = error_from_response(400, json.loads(fixture("gemini", "error_400_key.json")), {})
        assert type(key) is InvalidRequest and "API key not valid" in str(key)
        listed = error_from_response(403, [{"error": {"code": 403, "message": "denied",
                                                      "status": "PERMISSION_DENIED"}}], {})
        assert isinstance(listed, AuthError) and "denied" in str(listed)

    async def test_429_waits_the_retry_info_delay_then_streams(self, autojump_clock):
        seen: list[httpx.Request] = []
        served = iter([httpx.Response(429, content=fixture("gemini", "error_429.json")),
                       httpx.Response(503, content=fixture("gemini", "error_503.json")),
                       httpx.Response(200, content=fixture("gemini", "text.sse"),
                                      headers={"content-type": "text/event-stream"})])

        def serve(req):
            seen.append(req)
            return next(served)

        attempts = []
        p = provider(httpx.MockTransport(serve))
        t0 = trio.current_time()
        r = await p.complete(Request(system=None, messages=[user("hi")]),
                             on_attempt=lambda *a: attempts.append(a))
        assert r.blocks[0] == Text("The answer is 42.")
        assert trio.current_time() - t0 >= 7.0
        assert [a[3].split(":")[0] if a[3] else None for a in attempts] == [
            "RateLimited", "ServerError", None]
        url = seen[0].url
        assert (url.path, url.query) == (
            "/v1beta/models/gemini-2.5-pro:streamGenerateContent", b"alt=sse")
        assert seen[0].headers["x-goog-api-key"] == "AIza-secret"
        assert "AIza-secret" not in repr(p) and "key=" not in str(url)

    async def test_whole_answer_and_the_request_model(self):
        seen: list[httpx.Request] = []

        def serve(req):
            seen.append(req)
            return httpx.Response(200, content=fixture("gemini", "generate_content.json"))

        p = provider(httpx.MockTransport(serve), stream=False)
        r = await p.complete(Request(system=None, messages=[user("hi")], model="gemini-2.5-flash"))
        assert len(r.blocks) == 3
        assert seen[0].url.path == "/v1beta/models/gemini-2.5-flash:generateContent"

    async def test_a_json_array_stream_is_folded(self):
        """``streamGenerateContent`` without ``alt=sse`` (a proxy that dropped it) answers one
        JSON array of the chunks: the same answer."""
        raw = fixture("gemini", "function_call.sse")
        chunks = [json.loads(e[6:]) for e in raw.split(b"\r\n\r\n") if e.startswith(b"data: ")]
        p = provider(httpx.MockTransport(lambda req: httpx.Response(200, json=chunks)))
        r = await p.complete(Request(system=None, messages=[user("hi")]))
        assert r == parse_stream(fixture("gemini", "function_call.sse"))

    async def test_context_too_long_not_retried(self):
        calls = []

        def serve(req):
            calls.append(req)
            return httpx.Response(400, content=fixture("gemini", "error_context.json"))

        with pytest.raises(ContextTooLong):
            await provider(httpx.MockTransport(serve)).complete(
                Request(system=None, messages=[user("hi")]))
        assert len(calls) == 1


class TestVertexAndSelection:
    async def test_vertex_url_and_bearer(self):
        seen: list[httpx.Request] = []

        def serve(req):
            seen.append(req)
            return httpx.Response(200, content=fixture("gemini", "text.sse"),
                                  headers={"content-type": "text/event-stream"})

        tokens = iter(["ya29.one", "ya29.two"])
        p = VertexGeminiProvider(httpx.AsyncClient(transport=httpx.MockTransport(serve)),
                                 lambda: next(tokens), "gemini-2.5-flash",
                                 base_url=vertex_base_url("proj-1", "us-central1"))
        await p.complete(Request(system=None, messages=[user("hi")]))
        await p.complete(Request(system=None, messages=[user("hi")]))
        assert str(seen[0].url) == (
            "https://us-central1-aiplatform.googleapis.com/v1/projects/proj-1/locations/"
            "us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
        assert [s.headers["authorization"] for s in seen] == ["Bearer ya29.one", "Bearer ya29.two"]
        assert "x-goog-api-key" not in seen[0].headers
        assert vertex_base_url("p", "global").startswith("https://aiplatform.googleapis.com/v1/")

    def test_make_provider(self):
        p = make_provider("gemini", env={"GOOGLE_API_KEY": "k"})
        assert isinstance(p, GeminiProvider) and p.model == "gemini-2.5-pro"
        assert make_provider("gemini", env={"GEMINI_API_KEY": "g", "GOOGLE_API_KEY": "k"}
                             )._api_key == "g"
        with pytest.raises(ProviderConfigError, match="GEMINI_API_KEY"):
            make_provider("gemini", env={})
        v = make_provider("vertex", model="gemini-2.5-flash",
                          env={"GOOGLE_CLOUD_PROJECT": "p", "GOOGLE_CLOUD_LOCATION": "europe-west4",
                               "GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.x"})
        assert isinstance(v, VertexGeminiProvider) and v.name == "vertex"
        assert v.url.startswith("https://europe-west4-aiplatform.googleapis.com/v1/projects/p/")
        with pytest.raises(ProviderConfigError, match="GOOGLE_CLOUD_PROJECT"):
            make_provider("vertex", model="gemini-2.5-flash", env={})

    def test_adc_refreshes_a_stale_token(self, monkeypatch):
        """Without a ready token, Application Default Credentials (google-auth) are used, the
        token refreshed when it has under five minutes left — faked here: no network."""
        import datetime
        import sys
        import types

        class Creds:
            token, expiry, refreshed = None, None, 0

            def refresh(self, _request):
                self.refreshed += 1
                self.token = f"ya29.{self.refreshed}"
                self.expiry = (datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
                               + datetime.timedelta(seconds=3600 if self.refreshed == 1 else 60))

        creds = Creds()
        google = types.ModuleType("google")
        auth = types.ModuleType("google.auth")
        transport = types.ModuleType("google.auth.transport")
        requests = types.ModuleType("google.auth.transport.requests")
        auth.default = lambda scopes: (creds, "proj")
        requests.Request = object
        google.auth, auth.transport, transport.requests = auth, transport, requests
        for name, mod in [("google", google), ("google.auth", auth),
                          ("google.auth.transport", transport),
                          ("google.auth.transport.requests", requests)]:
            monkeypatch.setitem(sys.modules, name, mod)
        v = make_provider("vertex", model="gemini-2.5-pro", env={"GOOGLE_CLOUD_PROJECT": "p"})
        assert v._headers()["authorization"] == "Bearer ya29.1"
        assert v._headers()["authorization"] == "Bearer ya29.1", "still fresh: not refreshed"
        creds.expiry = creds.expiry - datetime.timedelta(seconds=3500)
        assert v._headers()["authorization"] == "Bearer ya29.2"

    def test_prices(self):
        """Published Gemini API prices (≤ 200k prompts): 2.5 Pro $1.25 / $10, cached $0.125;
        2.5 Flash $0.30 / $2.50, cached $0.03; no write surcharge; batch half."""
        p = price_for("gemini-2.5-pro")
        assert (p.input, p.cache_read, p.output, p.cache_write_5m) == (1.25, 0.125, 10.0, 1.25)
        f = price_for("gemini-2.5-flash-preview-09-2025")
        assert (f.input, f.cache_read, f.output) == (0.3, 0.03, 2.5)
        assert price_for("gemini-2.5-flash-lite").input == 0.1
        assert price_for("publishers/google/models/gemini-3-pro-preview").output == 12.0
        usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000,
                      cache_read_tokens=1_000_000)
        assert cost_usd(usage, "gemini-2.5-pro") == pytest.approx(11.375)
        assert cost_usd(usage, "gemini-2.5-pro@batch") == pytest.approx(11.375 / 2)


def test_retry_policy_passed_through():
    p = make_provider("gemini", env={"GEMINI_API_KEY": "k"}, retry=RetryPolicy(max_attempts=2))
    assert p.retry.max_attempts == 2


@pytest.mark.parametrize("name, model, write", [
    ("gemini", "gemini-2.5-pro", 1.0), ("vertex", "gemini-2.5-flash", 1.0),
    ("azure-openai", "gpt-4o", 1.0), ("azure-openai-responses", "gpt-5", 1.0),
    ("vertex", "claude-sonnet-4-5", 1.25), ("anthropic", "claude-sonnet-4-5", 1.25)])
def test_the_eviction_plan_weighs_no_write_surcharge_on_implicit_caches(name, model, write):
    """Gemini's implicit caching and Azure's automatic one charge nothing to write; Claude on
    Vertex bills Anthropic's surcharge."""
    from types import SimpleNamespace

    from mnemon.orchestrator.weighing import cache_mults

    env = SimpleNamespace(provider_name_for=lambda node: name,
                          settings_for=lambda node: SimpleNamespace(model=model, cache_ttl="5m"))
    assert cache_mults(env, None)[0] == write


def _gemini_transport() -> httpx.MockTransport:
    """The conformance conversation in Gemini's stream shapes (a model that does not think,
    so its blocks are the neutral three kinds the suite expects)."""
    from tests.providers.conformance import FINAL, HELLO

    usage = {"promptTokenCount": 40, "candidatesTokenCount": 6, "totalTokenCount": 46}

    def stream(*parts_then_finish: dict) -> bytes:
        chunks = [{"candidates": [{"content": {"role": "model", "parts": [p]}}],
                   "usageMetadata": usage, "modelVersion": "gemini-2.0-flash"}
                  for p in parts_then_finish]
        chunks[-1]["candidates"][0]["finishReason"] = "STOP"
        return b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith(":streamGenerateContent")
        assert request.headers["x-goog-api-key"]
        body = json.loads(request.content)
        last = body["contents"][-1]["parts"]
        if any("functionResponse" in p for p in last):
            content = stream({"text": FINAL[:5]}, {"text": FINAL[5:]})
        elif body.get("tools"):
            content = stream({"text": "Let me check the weather."}, {"functionCall": {
                "name": "get_weather", "args": {"city": "Paris", "unit": "celsius"}}})
        else:
            content = stream({"text": HELLO})
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=content)

    return httpx.MockTransport(handler)


async def test_gemini_conforms():
    """The shared conformance conversation (tests/providers/conformance.py) on Gemini."""
    from tests.providers.conformance import check_provider

    await check_provider(lambda: GeminiProvider(
        httpx.AsyncClient(transport=_gemini_transport()), "AIza-test", "gemini-2.0-flash"))
