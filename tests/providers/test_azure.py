"""Azure OpenAI: OpenAI's wires at Azure's URLs with Azure's credentials — deployment URLs
and ``api-version``, the ``api-key`` header or an Entra ID token, Azure's stream (a prompt
filter chunk with no choices first), its errors and throttling, selection and prices."""

from __future__ import annotations

import json
import random

import httpx
import pytest
import trio

from mnemon.providers.azure import API_VERSION, AzureOpenAIProvider, AzureResponsesProvider
from mnemon.providers.base import Request
from mnemon.providers.errors import (ContextTooLong, InvalidRequest, ProviderConfigError,
                                     ProviderHTTPError)
from mnemon.providers.openai import parse_stream
from mnemon.providers.prices import price_for
from mnemon.providers.select import make_provider
from mnemon.session.records import Text, ToolUse, Usage
from tests.providers.conformance import fixture, user

ENDPOINT = "https://contoso.openai.azure.com"


def sse(name: str) -> httpx.Response:
    return httpx.Response(200, content=fixture("azure", name),
                          headers={"content-type": "text/event-stream"})


def chat(serve, **kw) -> AzureOpenAIProvider:
    return AzureOpenAIProvider(httpx.AsyncClient(transport=httpx.MockTransport(serve)),
                               "azure-secret", "gpt4o-prod", endpoint=ENDPOINT,
                               rng=random.Random(0), **kw)


class TestChat:
    def test_azure_stream_decodes(self):
        """The prompt-filter chunk (no choices, empty model) and the usage chunk pass through
        OpenAI's assembler unchanged."""
        r = parse_stream(fixture("azure", "chat_text.sse"))
        assert r.blocks == [Text("It is 18°C and sunny in Paris.")]
        assert r.model == "gpt-4o-2024-11-20" and r.stop_reason == "end_turn"
        assert r.usage == Usage(input_tokens=314, output_tokens=9, cache_read_tokens=1536)
        call = parse_stream(fixture("azure", "chat_tool_call.sse"))
        assert call.blocks == [ToolUse("call_8fXbq2Lr0dWm3PzT6yQvKs1N", "get_weather",
                                       {"location": "Paris"})]

    async def test_deployment_url_key_and_request_model(self):
        seen: list[httpx.Request] = []

        def serve(req):
            seen.append(req)
            return sse("chat_text.sse")

        p = chat(serve)
        await p.complete(Request(system="Be terse.", messages=[user("hi")]))
        await p.complete(Request(system=None, messages=[user("hi")], model="gpt4o-eu"))
        assert str(seen[0].url) == (f"{ENDPOINT}/openai/deployments/gpt4o-prod/chat/completions"
                                    f"?api-version={API_VERSION}")
        assert "/deployments/gpt4o-eu/" in str(seen[1].url)
        assert seen[0].headers["api-key"] == "azure-secret"
        assert "authorization" not in seen[0].headers
        body = json.loads(seen[0].content)
        assert body["max_completion_tokens"] == 8192 and body["stream"] is True
        assert "azure-secret" not in repr(p)

    async def test_entra_token_wins(self):
        seen: list[httpx.Request] = []

        def serve(req):
            seen.append(req)
            return sse("chat_text.sse")

        await chat(serve, ad_token="eyJ0eXAi.token", api_version="2025-04-01-preview").complete(
            Request(system=None, messages=[user("hi")]))
        assert seen[0].headers["authorization"] == "Bearer eyJ0eXAi.token"
        assert "api-key" not in seen[0].headers
        assert seen[0].url.params["api-version"] == "2025-04-01-preview"

    async def test_throttled_then_answered(self, autojump_clock):
        served = iter([httpx.Response(429, content=fixture("azure", "error_429.json"),
                                      headers={"retry-after": "2"}),
                       sse("chat_text.sse")])
        attempts = []
        t0 = trio.current_time()
        r = await chat(lambda req: next(served)).complete(
            Request(system=None, messages=[user("hi")]), on_attempt=lambda *a: attempts.append(a))
        assert r.blocks == [Text("It is 18°C and sunny in Paris.")]
        assert trio.current_time() - t0 == pytest.approx(2.0)
        assert attempts[0][3].startswith("RateLimited: HTTP 429")

    async def test_errors(self):
        def answer(status, name):
            return lambda req: httpx.Response(status, content=fixture("azure", name))

        with pytest.raises(ContextTooLong):
            await chat(answer(400, "error_context.json")).complete(
                Request(system=None, messages=[user("hi")]))
        with pytest.raises(InvalidRequest, match="content management policy"):
            await chat(answer(400, "error_400_content_filter.json")).complete(
                Request(system=None, messages=[user("hi")]))
        with pytest.raises(ProviderHTTPError, match="no deployment named 'gpt4o-prod'"):
            await chat(answer(404, "error_404_deployment.json")).complete(
                Request(system=None, messages=[user("hi")]))


class TestResponses:
    async def test_v1_surface(self):
        seen: list[httpx.Request] = []

        def serve(req):
            seen.append(req)
            return httpx.Response(200, content=fixture("openai_responses",
                                                       "composed_reasoning_text.sse"),
                                  headers={"content-type": "text/event-stream"})

        p = AzureResponsesProvider(httpx.AsyncClient(transport=httpx.MockTransport(serve)),
                                   "azure-secret", "gpt-5-mini-dep", endpoint=ENDPOINT + "/")
        r = await p.complete(Request(system="Be terse.", messages=[user("hi")]))
        assert str(seen[0].url) == f"{ENDPOINT}/openai/v1/responses"
        assert seen[0].headers["api-key"] == "azure-secret"
        body = json.loads(seen[0].content)
        assert body["model"] == "gpt-5-mini-dep" and body["store"] is False
        assert r.blocks and r.usage.output_tokens > 0


class TestSelection:
    ENV = {"AZURE_OPENAI_ENDPOINT": ENDPOINT, "AZURE_OPENAI_API_KEY": "k"}

    def test_make_provider(self):
        p = make_provider("azure-openai", model="gpt4o-prod", env=self.ENV)
        assert isinstance(p, AzureOpenAIProvider) and p.api_version == API_VERSION
        p = make_provider("azure-openai", model="d",
                          env={**self.ENV, "OPENAI_API_VERSION": "2025-01-01-preview"})
        assert p.api_version == "2025-01-01-preview"
        r = make_provider("azure-openai-responses", model="d", env=self.ENV, store=True)
        assert isinstance(r, AzureResponsesProvider) and r.store is True
        t = make_provider("azure-openai", model="d", env={
            "AZURE_OPENAI_ENDPOINT": ENDPOINT, "AZURE_OPENAI_AD_TOKEN": "tok"})
        assert t._headers()["authorization"] == "Bearer tok"

    @pytest.mark.parametrize("env, model, said", [
        ({"AZURE_OPENAI_API_KEY": "k"}, "d", "AZURE_OPENAI_ENDPOINT is not set"),
        ({"AZURE_OPENAI_ENDPOINT": ENDPOINT}, "d", "AZURE_OPENAI_API_KEY or AZURE_OPENAI_AD_TOKEN"),
        ({"AZURE_OPENAI_ENDPOINT": ENDPOINT, "AZURE_OPENAI_API_KEY": "k"}, None,
         "needs --model: the deployment's name"),
    ])
    def test_refusals(self, env, model, said):
        with pytest.raises(ProviderConfigError, match=said):
            make_provider("azure-openai", model=model, env=env)

    def test_priced_as_the_model_served(self):
        """A deployment is priced by the model Azure says served it (Global deployments list
        OpenAI's prices): gpt-4o $2.50 / $10, cached $1.25."""
        p = price_for("gpt-4o-2024-11-20")
        assert (p.input, p.cache_read, p.output) == (2.5, 1.25, 10.0)


def test_a_schema_strict_mode_cannot_express_is_refused_for_azure(tmp_path, capsys,
                                                                    monkeypatch):
    """Azure's adapters send a typed answer in OpenAI's strict mode, so they refuse what it
    cannot express before anything runs, as ``openai`` does."""
    from mnemon.orchestrator.cli import main

    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", ENDPOINT)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "k")
    (tmp_path / "map.json").write_text(json.dumps(
        {"type": "object", "properties": {"tags": {"type": "object",
                                                   "additionalProperties": True}}}))
    for name in ("azure-openai", "azure-openai-responses"):
        rc = main(["ask", "hello", "--provider", name, "--model", "gpt-4o", "--output",
                   str(tmp_path / "map.json"), "--run-root", str(tmp_path / "run")])
        err = capsys.readouterr().err
        assert rc == 2 and "strict mode cannot express an object with free keys" in err
        assert not (tmp_path / "run").exists()


async def test_azure_conforms():
    """The shared conformance conversation on an Azure deployment: OpenAI's recorded bytes at
    Azure's path, with the ``api-key`` header."""
    from tests.providers.conformance import check_provider, openai_transport

    def azure_only(request: httpx.Request) -> None:
        assert request.url.path == "/openai/deployments/gpt4o-prod/chat/completions"
        assert request.headers["api-key"] == "azure-secret"
        request.url = request.url.copy_with(path="/v1/chat/completions")
        request.headers["authorization"] = "Bearer (checked above)"
        return None

    inner = openai_transport()

    def handler(request: httpx.Request) -> httpx.Response:
        azure_only(request)
        return inner.handle_request(request)

    await check_provider(lambda: AzureOpenAIProvider(
        httpx.AsyncClient(transport=httpx.MockTransport(handler)), "azure-secret", "gpt4o-prod",
        endpoint=ENDPOINT))
