"""A run root of 1 000 agents (a job's, served read-only) in the page and over the API: the
agent listing is paged and no longer quadratic, and the lineage and the timeline paint within
2 s in headless Chromium, drawing only the rows in view."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import trio

from .test_page import _browser, _wait, pytestmark  # noqa: F401
from .test_page_views import _shot
from .util import TOKEN, live_service

N = 1000


def _big_run(tmp_path: Path) -> Path:
    """``N`` one-agent tasks run as a job on the scripted provider: ``N`` agents, ``N`` logs."""
    job = tmp_path / "job"
    job.mkdir()
    with open(job / "rows.jsonl", "w") as f:
        for i in range(N):
            f.write(json.dumps({"id": f"r{i}", "q": f"question {i}"}) + "\n")
    (job / "big.toml").write_text(textwrap.dedent("""
        concurrency = 64
        [provider]
        name = "scripted"
        price_as = "claude-sonnet-4-5"
        [input]
        path = "rows.jsonl"
        id = "id"
        prompt = "Answer {q}."
    """))
    subprocess.run([sys.executable, "-m", "mnemon", "run", str(job / "big.toml"), "--run-root",
                    str(tmp_path / "big")], check=True, capture_output=True, timeout=300)
    return tmp_path / "big"


async def test_a_thousand_agents_list_in_pages_and_paint_within_two_seconds(tmp_path):
    from selenium.webdriver.common.by import By

    run = _big_run(tmp_path)
    async with live_service(run, read_only=True) as svc:
        t = time.monotonic()
        whole = (await svc.client.get("/v1/agents")).json()
        first_listing = time.monotonic() - t
        t = time.monotonic()
        again = (await svc.client.get("/v1/agents")).json()
        listing = time.monotonic() - t
        pages, after = [], None
        while True:
            params = {"limit": 300} | ({"after": after} if after else {})
            body = (await svc.client.get("/v1/agents", params=params)).json()
            pages.append(body["agents"])
            after = body["next"]
            if after is None:
                break
        bad = await svc.client.get("/v1/agents", params={"limit": 0})

        def drive() -> dict:
            driver = _browser()
            try:
                driver.get(f"{svc.base}/#token={TOKEN}")
                painted = _wait(driver, lambda d: d.execute_script("return window.__treePaint || null"))
                _wait(driver, lambda d: d.find_element(By.ID, "tree-count").text == f"({N})")
                rows = len(driver.find_elements(By.CSS_SELECTOR, "#tree li"))
                clicked = driver.execute_script(
                    "const t = performance.now();"
                    "document.querySelector('#tabs button[data-tab=\"timeline\"]').click(); return t;")
                done = _wait(driver, lambda d: d.execute_script("return window.__timelinePaint || null"))
                # (both are drawn again as events arrive: a read of a replaced row is made again)
                first = _wait(driver, lambda d: {g.get_attribute("data-agent") for g in
                                                 d.find_elements(By.CSS_SELECTOR, "#timeline g.lane")})
                tree = _wait(driver, lambda d: [li.get_attribute("data-agent") for li in
                                                d.find_elements(By.CSS_SELECTOR, "#tree li")])
                # scrolled to the end, the last lanes are drawn instead
                driver.execute_script("const b = document.getElementById('timeline'); b.scrollTop = b.scrollHeight;")
                last = _wait(driver, lambda d: (lambda ids: ids if ids and not ids & first else None)(
                    {g.get_attribute("data-agent") for g in d.find_elements(By.CSS_SELECTOR, "#timeline g.lane")}))
                _shot(driver, "page-timeline-1000")
                return {"tree_ms": painted, "rows": rows, "timeline_ms": done - clicked,
                        "lanes": len(first), "first": len(first), "last": len(last),
                        "tree": tree[:3]}
            finally:
                driver.quit()

        got = await trio.to_thread.run_sync(drive)
    print(f"GET /v1/agents at {N}: {first_listing:.3f} s cold, {listing:.3f} s warm; page: {got}")
    assert len(whole["agents"]) == N and whole["next"] is None
    assert again == whole
    assert [a["id"] for p in pages for a in p] == [a["id"] for a in whole["agents"]]
    assert [len(p) for p in pages] == [300, 300, 300, 100]
    assert bad.status_code == 400
    assert first_listing < 5 and listing < 2, (first_listing, listing)  # was 35 s (quadratic)
    assert got["tree_ms"] <= 2000, got  # from navigation to the lineage's first paint
    assert got["timeline_ms"] <= 2000, got
    assert 0 < got["rows"] < 200 and 0 < got["lanes"] < 200, got  # only the rows in view
    assert got["first"] and got["last"]
    assert got["tree"] == ["t1", "t2", "t3"]  # in natural order
