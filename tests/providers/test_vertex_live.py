"""
Opt-in live smoke test of Claude on Vertex AI: it runs only when ``GOOGLE_CLOUD_PROJECT`` and
credentials (``GOOGLE_OAUTH_ACCESS_TOKEN`` or ``GOOGLE_APPLICATION_CREDENTIALS``) are set, and
skips otherwise. The model may be chosen with ``MNEMON_LIVE_VERTEX_MODEL``; the location is
``GOOGLE_CLOUD_LOCATION`` (default ``global``).
"""

from __future__ import annotations

import os

import pytest

from tests.providers.test_live import _smoke


@pytest.fixture(autouse=True)
def _no_network():
    """Overrides the conftest guard: this test exists to reach the network (opt-in)."""
    yield


@pytest.mark.skipif(not (os.environ.get("GOOGLE_CLOUD_PROJECT")
                         and (os.environ.get("GOOGLE_OAUTH_ACCESS_TOKEN")
                              or os.environ.get("GOOGLE_APPLICATION_CREDENTIALS"))),
                    reason="GOOGLE_CLOUD_PROJECT and Google credentials are not set: live test "
                           "is opt-in")
async def test_vertex_live():
    await _smoke("vertex", os.environ.get("MNEMON_LIVE_VERTEX_MODEL",
                                          "claude-haiku-4-5@20251001"))
