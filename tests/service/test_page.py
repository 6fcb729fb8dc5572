"""The page in a real headless Chromium (Selenium + Debian's chromium/chromium-driver, which
`.ci/run` installs): the demo's tree of three agents, a grep run from the page and the turn it
names read as a conversation, a screenshot."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from .util import TOKEN, live_service

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
ARTIFACTS = Path(os.environ.get("MNEMON_ARTIFACTS", Path(__file__).resolve().parents[2] / "build" / "artifacts"))

pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER) and not os.environ.get("CI"),
                                reason="needs chromium and chromedriver (.ci/run installs them)")


def _browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 "--window-size=1280,900"):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(DRIVER), options=opts)


def _wait(driver, predicate, timeout=20.0):
    """Wait for ``predicate``; the page re-renders the tree on every event, so an element found
    a moment ago may be gone, or not drawn yet (an empty list indexed): such a try is simply
    made again."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, ignored_exceptions=(StaleElementReferenceException,
                                                                  IndexError)
                         ).until(lambda d: predicate(d))


async def test_the_page_shows_the_tree_and_greps(tmp_path):
    from selenium.webdriver.common.by import By

    run = tmp_path / "demo"
    subprocess.run([sys.executable, "-m", "mnemon", "demo", "--run-root", str(run)],
                   check=True, capture_output=True, timeout=120)
    async with live_service(run, read_only=True) as svc:
        def drive() -> tuple[list[str], list[str], str]:
            driver = _browser()
            try:
                driver.get(f"{svc.base}/#token={TOKEN}")
                _wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#tree li")) == 3)
                agents = _wait(driver, lambda d: [
                    li.get_attribute("data-agent")
                    for li in d.find_elements(By.CSS_SELECTOR, "#tree li")])
                _wait(driver, lambda d: d.find_element(By.ID, "live").text == "live")
                _wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#bar div")) > 0)
                _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#tree .agent")[2].click()
                      or True)  # a3
                _wait(driver, lambda d: d.find_element(By.ID, "agent-title").text == "Agent a3")
                driver.find_element(By.CSS_SELECTOR, '#tabs button[data-tab="door"]').click()
                box = driver.find_element(By.ID, "pattern")
                box.send_keys("codeword")
                driver.find_element(By.CSS_SELECTOR, "#grep button").click()
                _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#hits li"))
                hits = _wait(driver, lambda d: [li.text for li in
                                                d.find_elements(By.CSS_SELECTOR, "#hits li")])
                _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#hits li")[0].click()
                      or True)
                _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#turn .msg"))
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                driver.save_screenshot(str(ARTIFACTS / "page-demo.png"))
                assert _wait(driver, lambda d: "$" in d.find_element(By.ID, "totals").text)
                return agents, hits, driver.find_element(By.ID, "turn").text
            finally:
                driver.quit()

        agents, hits, turn = await trio.to_thread.run_sync(drive)
    assert agents == ["a1", "a2", "a3"]
    assert hits and all(h.startswith("turn ") for h in hits)
    assert any("codeword" in h.lower() for h in hits)
    # the turn read is shown as a conversation (the records as JSON folded under it)
    assert turn.startswith(f"turn {hits[0].split()[1].rstrip(':')} · from a1")
    assert "user · turn 1" in turn and "the records as JSON" in turn and "[" not in turn
    assert "codeword" in turn.lower()
    assert (ARTIFACTS / "page-demo.png").read_bytes()[:4] == b"\x89PNG"


async def test_the_page_shows_a_typed_agents_output(tmp_path):
    from selenium.webdriver.common.by import By

    schema = tmp_path / "verdict.json"
    schema.write_text('{"type": "object", "properties": {"ok": {"type": "boolean"}, '
                      '"score": {"type": "integer", "minimum": 3}}, "required": ["ok", "score"]}')
    run = tmp_path / "typed"
    subprocess.run([sys.executable, "-m", "mnemon", "ask", "judge it", "--output", str(schema),
                    "--run-root", str(run)], check=True, capture_output=True, timeout=120)
    async with live_service(run, read_only=True) as svc:
        def drive() -> str:
            driver = _browser()
            try:
                driver.get(f"{svc.base}/#token={TOKEN}")
                _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#tree .agent")[0].click()
                      or True)
                _wait(driver, lambda d: d.find_element(By.ID, "agent-title").text == "Agent a1")
                shown = _wait(driver, lambda d: d.find_element(By.ID, "agent-output").text)
                # and in the conversation, where the agent ended with it
                in_place = _wait(driver, lambda d: d.find_element(
                    By.CSS_SELECTOR, "#conv .event.ended .output").text)
                return shown, in_place
            finally:
                driver.quit()

        shown, in_place = await trio.to_thread.run_sync(drive)
    assert shown.startswith("output {") and '"score": 3' in shown and '"ok": false' in shown
    assert '"score":3' in in_place and '"ok":false' in in_place
