"""
Opt-in live smoke test of Claude on Bedrock: it runs only when AWS credentials are set
(``AWS_ACCESS_KEY_ID``, ``AWS_PROFILE`` or ``AWS_BEARER_TOKEN_BEDROCK``, with ``AWS_REGION``)
and skips otherwise. The model may be chosen with ``MNEMON_LIVE_BEDROCK_MODEL``.
"""

from __future__ import annotations

import os

import pytest

from tests.providers.test_live import _smoke

CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK")


@pytest.fixture(autouse=True)
def _no_network():
    """Overrides the conftest guard: this test exists to reach the network (opt-in)."""
    yield


@pytest.mark.skipif(not (any(os.environ.get(v) for v in CREDENTIALS)
                         and os.environ.get("AWS_REGION")),
                    reason="AWS credentials and AWS_REGION are not set: live test is opt-in")
async def test_bedrock_live():
    await _smoke("bedrock", os.environ.get("MNEMON_LIVE_BEDROCK_MODEL",
                                           "global.anthropic.claude-haiku-4-5-20251001-v1:0"))
