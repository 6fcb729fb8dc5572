"""Claude on Bedrock: the URL and body InvokeModel takes, SigV4 on every attempt, the streamed
answer in AWS event-stream frames (fixtures/bedrock/*.bin), Bedrock's errors and throttling."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime

import httpx
import pytest
import trio

from mnemon.providers.base import Request
from mnemon.providers.bedrock import API_VERSION, BedrockProvider
from mnemon.providers.errors import AuthError, ContextTooLong, RateLimited
from mnemon.providers.retry import RetryPolicy
from mnemon.providers.select import make_provider
from mnemon.providers.errors import ProviderConfigError
from mnemon.providers.sigv4 import Credentials
from mnemon.session.records import Text, Thinking, ToolUse
from tests.providers.conformance import FIXTURES, WEATHER, fixture, user

CREDS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-tok")
WHEN = datetime(2026, 12, 6, 3, 0, 0, tzinfo=UTC)
MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
STREAM = "application/vnd.amazon.eventstream"


def provider(handler, **kw) -> BedrockProvider:
    kw.setdefault("credentials", CREDS)
    return BedrockProvider(httpx.AsyncClient(transport=httpx.MockTransport(handler)), MODEL,
                           region="us-east-1", rng=random.Random(0), now=lambda: WHEN, **kw)


def frames(name: str) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": STREAM}, content=fixture("bedrock", name))


def recorded_error(name: str) -> httpx.Response:
    rec = json.loads(fixture("bedrock", name))
    return httpx.Response(rec["status"], headers=rec["headers"], json=rec["body"])


def request(**kw) -> Request:
    return Request(messages=[user("What is the weather in Paris?")], tools=[WEATHER],
                   system="You are a terse assistant.", **kw)


async def test_a_streamed_tool_call_through_event_stream_frames():
    seen: list[httpx.Request] = []

    def serve(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return frames("tool_use.bin")

    got: list[str] = []
    r = await provider(serve).complete(request(), on_text=got.append)
    (req,) = seen
    assert str(req.url) == ("https://bedrock-runtime.us-east-1.amazonaws.com/model/"
                            f"{MODEL}/invoke-with-response-stream")
    body = json.loads(req.content)
    assert body["anthropic_version"] == API_VERSION == "bedrock-2023-05-31"
    assert "model" not in body and "stream" not in body
    assert body["tools"][0]["name"] == "get_weather"
    marks = [b for b in [*body["tools"], *body["system"]] if "cache_control" in b]
    assert marks and marks[0]["cache_control"] == {"type": "ephemeral"}
    auth = req.headers["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261206/us-east-1/bedrock/")
    assert "SignedHeaders=accept;content-type;host;x-amz-date;x-amz-security-token" in auth
    assert req.headers["x-amz-security-token"] == "session-tok"
    assert [type(b) for b in r.blocks] == [Thinking, Text, ToolUse]
    assert r.blocks[2].input == {"city": "Paris", "unit": "celsius"}
    assert r.stop_reason == "tool_use"
    assert (r.usage.input_tokens, r.usage.cache_read_tokens, r.usage.cache_write_tokens) == \
        (472, 2048, 1500)
    assert "".join(got) == "Let me check the weather."


async def test_the_signature_is_botocores_for_the_same_request():
    auth = pytest.importorskip("botocore.auth")
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCreds

    seen: list[httpx.Request] = []
    await provider(lambda req: seen.append(req) or frames("text.bin")).complete(request())
    (req,) = seen
    import unittest.mock as mock

    ref = AWSRequest(method="POST", url=str(req.url), data=req.content,
                     headers={"content-type": "application/json", "accept": "application/json"})
    with mock.patch.object(auth, "get_current_datetime", lambda *a, **k: WHEN.replace(tzinfo=None)):
        auth.SigV4Auth(BotoCreds(CREDS.access_key, CREDS.secret_key, CREDS.token), "bedrock",
                       "us-east-1").add_auth(ref)
    assert req.headers["authorization"] == ref.headers["Authorization"]


async def test_an_inference_profile_arn_is_quoted_into_the_path_as_the_sdk_does():
    seen: list[httpx.Request] = []
    p = provider(lambda req: seen.append(req) or frames("text.bin"))
    arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/jf2sje1c0jnb"
    r = await p.complete(request(model=arn))
    assert seen[0].url.raw_path.decode() == (
        "/model/arn:aws:bedrock:us-east-1:123456789012:application-inference-profile%2F"
        "jf2sje1c0jnb/invoke-with-response-stream")
    assert r.blocks == [Text("Hello! How can I help?")]


async def test_invoke_without_streaming_reads_the_message_json():
    seen: list[httpx.Request] = []

    def serve(req):
        seen.append(req)
        return httpx.Response(200, headers={"content-type": "application/json"},
                              content=fixture("anthropic", "message.json"))

    r = await provider(serve, stream=False).complete(request())
    assert seen[0].url.path.endswith("/invoke")
    assert r.stop_reason == "tool_use" and r.usage.cache_write_tokens == 2051


async def test_a_bedrock_api_key_is_a_bearer_token_and_nothing_is_signed():
    seen: list[httpx.Request] = []
    p = provider(lambda req: seen.append(req) or frames("text.bin"), credentials=None,
                 bearer_token="bedrock-api-key-not-secret")
    await p.complete(request())
    assert seen[0].headers["authorization"] == "Bearer bedrock-api-key-not-secret"
    assert "x-amz-date" not in seen[0].headers


async def test_throttling_is_retried_with_a_fresh_signature(autojump_clock):
    answers = iter([recorded_error("error_429.json"), frames("throttled_midstream.bin"),
                    frames("text.bin")])
    seen: list[httpx.Request] = []
    clock = iter([WHEN, WHEN.replace(minute=1), WHEN.replace(minute=2)])
    attempts: list[str | None] = []
    p = provider(lambda req: seen.append(req) or next(answers))
    p._now = lambda: next(clock)
    r = await p.complete(request(), on_attempt=lambda n, s, u, e: attempts.append(e))
    assert r.blocks == [Text("Hello! How can I help?")]
    assert len(seen) == 3
    assert attempts[0].startswith("RateLimited: HTTP 429") and "ThrottlingException" in attempts[0]
    assert "throttlingException" in attempts[1] and attempts[2] is None
    dates = [s.headers["x-amz-date"] for s in seen]
    assert len(set(dates)) == 3, "each attempt signed anew"


async def test_errors_name_bedrocks_exception(autojump_clock):
    p = provider(lambda req: recorded_error("error_400_too_long.json"))
    with pytest.raises(ContextTooLong, match="ValidationException: Input is too long"):
        await p.complete(request())
    p = provider(lambda req: recorded_error("error_403.json"))
    with pytest.raises(AuthError, match="AccessDeniedException: You don't have access"):
        await p.complete(request())


async def test_throttling_exhausts_attempts(autojump_clock):
    calls = []
    p = provider(lambda req: calls.append(1) or recorded_error("error_429.json"),
                 retry=RetryPolicy(max_attempts=3))
    with pytest.raises(RateLimited):
        await p.complete(request())
    assert len(calls) == 3


class TestSelect:
    def test_env_credentials_and_region(self):
        p = make_provider("bedrock", env={"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY":
                                          "s", "AWS_REGION": "eu-central-1"})
        assert isinstance(p, BedrockProvider) and p.region == "eu-central-1"
        assert p.model == "global.anthropic.claude-sonnet-4-5-20250929-v1:0"
        assert p.url.startswith("https://bedrock-runtime.eu-central-1.amazonaws.com/model/")
        assert "AKID" not in repr(p)

    def test_base_url_overrides_the_endpoint(self):
        p = make_provider("bedrock", base_url="http://127.0.0.1:9/", env={
            "AWS_BEARER_TOKEN_BEDROCK": "k", "AWS_REGION": "us-west-2"})
        assert p.url.startswith("http://127.0.0.1:9/model/")

    def test_no_region_is_one_line(self, monkeypatch, tmp_path):
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        for v in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
            monkeypatch.delenv(v, raising=False)
        with pytest.raises(ProviderConfigError, match="AWS_REGION is not set"):
            make_provider("bedrock", env={"AWS_BEARER_TOKEN_BEDROCK": "k"})

    def test_no_credentials_is_one_line(self, monkeypatch, tmp_path):
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE",
                  "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                  "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
            monkeypatch.delenv(v, raising=False)
        with pytest.raises(ProviderConfigError, match="no AWS credentials found") as e:
            make_provider("bedrock", env={"AWS_REGION": "us-east-1"})
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("name, model", [("bedrock", "amazon.nova-pro-v1:0"),
                                         ("bedrock", "us.meta.llama3-3-70b-instruct-v1:0"),
                                         ("vertex", "llama-3.3-70b-instruct-maas")])
def test_a_model_other_than_claude_is_refused_in_one_line(name, model):
    env = {"AWS_BEARER_TOKEN_BEDROCK": "k", "AWS_REGION": "us-east-1",
           "GOOGLE_OAUTH_ACCESS_TOKEN": "t", "GOOGLE_CLOUD_PROJECT": "p"}
    with pytest.raises(ProviderConfigError, match="serves Claude models only") as e:
        make_provider(name, model=model, env=env)
    assert "\n" not in str(e.value) and "not supported" in str(e.value)


async def test_the_one_hour_cache_ttl_goes_in_the_body_as_bedrock_takes_it():
    seen: list[httpx.Request] = []
    await provider(lambda req: seen.append(req) or frames("text.bin"),
                   cache_ttl="1h").complete(request())
    body = json.loads(seen[0].content)
    marks = [b["cache_control"] for b in [*body["tools"], *body["system"]]
             if "cache_control" in b]
    assert marks and all(m == {"type": "ephemeral", "ttl": "1h"} for m in marks)
