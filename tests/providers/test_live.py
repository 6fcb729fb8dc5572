"""
Opt-in live smoke tests: they reach the real APIs only when ANTHROPIC_API_KEY /
OPENAI_API_KEY are set, and skip otherwise. Models may be chosen with MNEMON_LIVE_ANTHROPIC_MODEL
/ MNEMON_LIVE_OPENAI_MODEL.
"""

from __future__ import annotations

import os

import pytest
import trio

from mnemon.providers import make_provider
from tests.providers.conformance import check_usage, user
from mnemon.providers.base import Request


@pytest.fixture(autouse=True)
def _no_network():
    """Overrides the conftest guard: these tests exist to reach the network (opt-in)."""
    yield


def live(variable: str):
    return pytest.mark.skipif(not os.environ.get(variable),
                              reason=f"{variable} is not set: live smoke test is opt-in")


async def _smoke(name: str, model: str) -> None:
    provider = make_provider(name, model=model, max_tokens=64)
    try:
        with trio.fail_after(120):
            r = await provider.complete(Request(
                system="Answer with one word.", messages=[user("Say: ready")], max_tokens=64))
    finally:
        await provider.aclose()
    assert r.stop_reason in ("end_turn", "max_tokens")
    check_usage(r.usage)


@live("ANTHROPIC_API_KEY")
async def test_anthropic_live():
    await _smoke("anthropic",
                 os.environ.get("MNEMON_LIVE_ANTHROPIC_MODEL", "claude-haiku-4-5"))


@live("OPENAI_API_KEY")
async def test_openai_live():
    await _smoke("openai",
                 os.environ.get("MNEMON_LIVE_OPENAI_MODEL", "gpt-4.1-mini"))
