"""Claude on Vertex AI: the rawPredict / streamRawPredict URL of each location, the body Vertex
takes, the token (given, or Application Default Credentials refreshed when due), Google's
errors and RESOURCE_EXHAUSTED retried."""

from __future__ import annotations

import json
import random

import httpx
import pytest

from mnemon.providers.base import Request
from mnemon.providers.errors import AuthError, ProviderConfigError, ProviderHTTPError, RateLimited
from mnemon.providers.retry import RetryPolicy
from mnemon.providers.select import make_provider
from mnemon.providers.vertex import API_VERSION, VertexProvider, endpoint
from mnemon.session.records import Text, ToolUse
from tests.providers.conformance import WEATHER, fixture, user

MODEL = "claude-sonnet-4-5@20250929"


def provider(handler, **kw) -> VertexProvider:
    kw.setdefault("token", "ya29.token-not-secret")
    kw.setdefault("location", "us-east5")
    return VertexProvider(httpx.AsyncClient(transport=httpx.MockTransport(handler)), MODEL,
                          project="my-project", rng=random.Random(0), **kw)


def sse(name: str) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"},
                          content=fixture("anthropic", name))


def recorded_error(name: str) -> httpx.Response:
    rec = json.loads(fixture("vertex", name))
    return httpx.Response(rec["status"], headers=rec["headers"], json=rec["body"])


def request(**kw) -> Request:
    return Request(messages=[user("What is the weather in Paris?")], tools=[WEATHER],
                   system="You are a terse assistant.", **kw)


@pytest.mark.parametrize("location, root", [
    ("global", "https://aiplatform.googleapis.com/v1"),
    ("us", "https://aiplatform.us.rep.googleapis.com/v1"),
    ("eu", "https://aiplatform.eu.rep.googleapis.com/v1"),
    ("us-east5", "https://us-east5-aiplatform.googleapis.com/v1"),
    ("europe-west1", "https://europe-west1-aiplatform.googleapis.com/v1"),
])
def test_each_location_has_its_host(location, root):
    assert endpoint(location) == root


async def test_stream_raw_predict_with_a_tool_call():
    seen: list[httpx.Request] = []
    r = await provider(lambda req: seen.append(req) or sse("tool_use.sse")).complete(request())
    (req,) = seen
    assert str(req.url) == ("https://us-east5-aiplatform.googleapis.com/v1/projects/my-project/"
                            "locations/us-east5/publishers/anthropic/models/"
                            "claude-sonnet-4-5@20250929:streamRawPredict")
    body = json.loads(req.content)
    assert body["anthropic_version"] == API_VERSION == "vertex-2023-10-16"
    assert "model" not in body and body["stream"] is True
    assert any("cache_control" in b for b in [*body["tools"], *body["system"]])
    assert req.headers["authorization"] == "Bearer ya29.token-not-secret"
    assert isinstance(r.blocks[-1], ToolUse) and r.stop_reason == "tool_use"
    assert (r.usage.cache_read_tokens, r.usage.cache_write_tokens) == (2048, 1500)


async def test_raw_predict_without_streaming():
    seen: list[httpx.Request] = []

    def serve(req):
        seen.append(req)
        return httpx.Response(200, headers={"content-type": "application/json"},
                              content=fixture("anthropic", "message.json"))

    p = provider(serve, stream=False, location="global")
    r = await p.complete(request())
    assert str(seen[0].url).startswith("https://aiplatform.googleapis.com/v1/projects/")
    assert str(seen[0].url).endswith(":rawPredict")
    assert "stream" not in json.loads(seen[0].content)
    assert r.usage.input_tokens == 2095


async def test_resource_exhausted_is_retried(autojump_clock):
    answers = iter([recorded_error("error_429.json"), sse("text.sse")])
    attempts: list[str | None] = []
    p = provider(lambda req: next(answers))
    r = await p.complete(request(), on_attempt=lambda n, s, u, e: attempts.append(e))
    assert r.blocks == [Text("Hello! How can I help?")]
    assert "RESOURCE_EXHAUSTED: Quota exceeded" in attempts[0] and attempts[1] is None


async def test_quota_exhausts_attempts(autojump_clock):
    p = provider(lambda req: recorded_error("error_429.json"), retry=RetryPolicy(max_attempts=2))
    with pytest.raises(RateLimited):
        await p.complete(request())


async def test_googles_errors_one_line_each(autojump_clock):
    with pytest.raises(AuthError, match="UNAUTHENTICATED: Request had invalid"):
        await provider(lambda req: recorded_error("error_401.json")).complete(request())
    with pytest.raises(ProviderHTTPError, match=r"HTTP 404 from .*NOT_FOUND: Publisher Model"):
        await provider(lambda req: recorded_error("error_404.json")).complete(request())


class _Creds:
    """google-auth credentials as the adapter uses them: ``valid``, ``token``, ``refresh``."""

    def __init__(self):
        self.token = None
        self.refreshed = 0

    @property
    def valid(self):
        return self.token is not None

    def refresh(self, request):
        self.refreshed += 1
        self.token = f"ya29.refreshed-{self.refreshed}"


async def test_adc_credentials_refreshed_only_when_due():
    creds = _Creds()
    seen: list[httpx.Request] = []
    p = provider(lambda req: seen.append(req) or sse("text.sse"), token=None, credentials=creds)
    await p.complete(request())
    await p.complete(request())
    assert creds.refreshed == 1
    assert [s.headers["authorization"] for s in seen] == ["Bearer ya29.refreshed-1"] * 2


class TestSelect:
    def test_token_project_location(self):
        p = make_provider("vertex", env={"GOOGLE_OAUTH_ACCESS_TOKEN": "t",
                                         "GOOGLE_CLOUD_PROJECT": "proj",
                                         "GOOGLE_CLOUD_LOCATION": "europe-west1"})
        assert isinstance(p, VertexProvider)
        assert p.url == ("https://europe-west1-aiplatform.googleapis.com/v1/projects/proj/"
                         "locations/europe-west1/publishers/anthropic/models/"
                         "claude-sonnet-4-5@20250929:streamRawPredict")

    def test_location_defaults_to_global_and_base_url_overrides(self):
        p = make_provider("vertex", base_url="http://127.0.0.1:9/v1", env={
            "GOOGLE_OAUTH_ACCESS_TOKEN": "t", "GOOGLE_CLOUD_PROJECT": "proj"})
        assert p.url.startswith("http://127.0.0.1:9/v1/projects/proj/locations/global/")

    def test_no_project_is_one_line(self):
        with pytest.raises(ProviderConfigError, match="GOOGLE_CLOUD_PROJECT is not set"):
            make_provider("vertex", env={"GOOGLE_OAUTH_ACCESS_TOKEN": "t"})

    def test_no_credentials_is_one_line(self, monkeypatch, tmp_path):
        pytest.importorskip("google.auth")
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
        with pytest.raises(ProviderConfigError) as e:
            make_provider("vertex", env={"GOOGLE_CLOUD_PROJECT": "p"})
        assert "\n" not in str(e.value)

    def test_adc_from_a_service_account_file(self, monkeypatch, tmp_path):
        pytest.importorskip("google.auth")
        pytest.importorskip("cryptography")
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
        info = {"type": "service_account", "project_id": "sa-project", "private_key_id": "1",
                "private_key": pem, "client_email": "sa@sa-project.iam.gserviceaccount.com",
                "client_id": "1", "token_uri": "https://oauth2.googleapis.com/token"}
        (tmp_path / "sa.json").write_text(json.dumps(info))
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "sa.json"))
        p = make_provider("vertex", env={})
        assert isinstance(p, VertexProvider) and p.project == "sa-project"
        assert p._credentials is not None and not p._credentials.valid


async def test_a_refused_refresh_is_the_users_and_a_broken_one_retried(autojump_clock):
    exceptions = pytest.importorskip("google.auth.exceptions")

    class Refused(_Creds):
        def __init__(self, error):
            super().__init__()
            self.error = error

        def refresh(self, request):
            self.refreshed += 1
            raise self.error

    refused = Refused(exceptions.RefreshError("invalid_grant: Token has been expired or revoked."))
    with pytest.raises(ProviderConfigError, match="RefreshError: invalid_grant"):
        await provider(lambda req: sse("text.sse"), token=None, credentials=refused).complete(
            request())
    assert refused.refreshed == 1, "a refused refresh is not retried"
    broken = Refused(exceptions.TransportError("connection reset"))
    with pytest.raises(Exception, match="could not refresh the Google access token"):
        await provider(lambda req: sse("text.sse"), token=None, credentials=broken,
                       retry=RetryPolicy(max_attempts=3)).complete(request())
    assert broken.refreshed == 3, "a refresh that could not reach Google is tried again"
