"""
Opt-in live smoke tests of Gemini, Vertex AI's Gemini and Azure OpenAI: each reaches the real
API only when its credentials are set, and skips otherwise — Gemini ``GEMINI_API_KEY`` (or
``GOOGLE_API_KEY``); Vertex ``GOOGLE_CLOUD_PROJECT`` with ``GOOGLE_OAUTH_ACCESS_TOKEN``; Azure
``AZURE_OPENAI_ENDPOINT``, a key or token and ``MNEMON_LIVE_AZURE_DEPLOYMENT`` (a deployment
has no default name). Models: ``MNEMON_LIVE_GEMINI_MODEL``, ``MNEMON_LIVE_VERTEX_MODEL``.
"""

from __future__ import annotations

import os

import pytest
import trio

from mnemon.providers import make_provider
from mnemon.providers.base import Request, ToolDef
from tests.providers.conformance import WEATHER, check_usage, user


@pytest.fixture(autouse=True)
def _no_network():
    """Overrides the conftest guard: these tests exist to reach the network (opt-in)."""
    yield


def live(*variables: str):
    missing = [v for v in variables if not any(os.environ.get(x) for x in v.split("|"))]
    return pytest.mark.skipif(bool(missing), reason=f"{', '.join(missing)} not set: "
                              "live smoke test is opt-in")


async def _smoke(name: str, model: str, tools: list[ToolDef] | None = None) -> None:
    provider = make_provider(name, model=model, max_tokens=1024)
    try:
        with trio.fail_after(120):
            r = await provider.complete(Request(
                system="Answer with one word.", messages=[user("Say: ready")], max_tokens=1024,
                tools=tools or []))
    finally:
        await provider.aclose()
    assert r.stop_reason in ("end_turn", "max_tokens", "tool_use")
    check_usage(r.usage)


@live("GEMINI_API_KEY|GOOGLE_API_KEY")
async def test_gemini_live():
    await _smoke("gemini", os.environ.get("MNEMON_LIVE_GEMINI_MODEL", "gemini-2.5-flash"),
                 [WEATHER])


@live("GOOGLE_CLOUD_PROJECT", "GOOGLE_OAUTH_ACCESS_TOKEN")
async def test_vertex_gemini_live():
    await _smoke("vertex", os.environ.get("MNEMON_LIVE_VERTEX_MODEL", "gemini-2.5-flash"))


@live("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY|AZURE_OPENAI_AD_TOKEN",
      "MNEMON_LIVE_AZURE_DEPLOYMENT")
async def test_azure_openai_live():
    await _smoke("azure-openai", os.environ.get("MNEMON_LIVE_AZURE_DEPLOYMENT", ""))
