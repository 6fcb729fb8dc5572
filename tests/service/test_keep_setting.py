"""The service takes keep as the CLI does: "auto" (decision 0220) or a share in (0, 1)."""

from __future__ import annotations

from .util import live_service


async def test_post_agents_takes_keep_auto_or_a_share(tmp_path):
    async with live_service(tmp_path / "run") as svc:
        for keep, status in (("auto", 201), (0.3, 201), ("most", 422), (0, 422), (1.5, 422)):
            r = await svc.client.post("/v1/agents", json={"prompt": "hello", "keep": keep})
            assert r.status_code == status, (keep, r.text)
