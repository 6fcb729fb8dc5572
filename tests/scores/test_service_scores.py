"""``GET /v1/jobs/{id}/scores``: a job the service runs is scored as `mnemon run` scores it,
and its summary and each task's scores are served; a job with [variants] is refused (422)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio

pytest.importorskip("starlette")

from tests.service.util import live_service  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "scores"


async def test_a_served_job_serves_its_scores(tmp_path):
    where = tmp_path / "quiz"
    shutil.copytree(EXAMPLE, where, ignore=shutil.ignore_patterns("*.run", "__pycache__"))
    text = (where / "quiz.toml").read_text()
    single = text.split("[variants]")[0] + "[[score]]" + text.split("[[score]]", 1)[1]
    (where / "single.toml").write_text(single)
    async with live_service(tmp_path / "run") as svc:
        r = await svc.client.post("/v1/jobs", json={"path": str(where / "quiz.toml")})
        assert r.status_code == 422 and "[variants]" in r.json()["error"]
        r = await svc.client.post("/v1/jobs", json={"path": str(where / "single.toml")})
        assert r.status_code == 202, r.text
        jid = r.json()["id"]
        for _ in range(1500):
            got = (await svc.client.get(f"/v1/jobs/{jid}")).json()
            if got["state"] != "running":
                break
            await trio.sleep(0.02)
        assert got["state"] == "ended", got
        sc = (await svc.client.get(f"/v1/jobs/{jid}/scores")).json()
        results = (await svc.client.get(f"/v1/jobs/{jid}/results")).json()
        assert (await svc.client.get("/v1/jobs/j9/scores")).status_code == 404
    assert sc["job"] == jid
    by = {s["scorer"]: s for s in sc["summary"]}
    assert list(by) == ["correct", "exact", "judge", "brief"]
    assert by["correct"]["n"] == 9 and by["correct"]["mean"] == pytest.approx(6 / 9)
    assert by["correct"]["method"] == "wilson" and by["correct"]["lo"] < 6 / 9 < by["correct"]["hi"]
    assert by["judge"]["judge_usd"] > 0 and by["correct"]["judge_usd"] == 0
    assert by["correct"]["cost_per_correct"] == pytest.approx(by["correct"]["cost_usd"] / 6,
                                                              rel=1e-3)
    assert len(sc["tasks"]) == 9 and sc["tasks"][0]["scores"]["correct"]["value"] in (0.0, 1.0)
    assert "score.correct" in results["columns"]
