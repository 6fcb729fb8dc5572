"""``kind = "none"`` on the page, in a real headless Chromium (as tests/service/test_page.py): a
service run with ``--sandbox none`` says so in its header; the agent whose shell is unsandboxed
is marked in the lineage and warned about when opened; an agent that narrowed to bubblewrap
is shown its sandbox quietly, and a command of each ran as shown."""

from __future__ import annotations

import pytest
import trio

from mnemon.orchestrator.sandbox import SandboxSettings
from mnemon.orchestrator.settings import Settings

from ..service.test_page import ARTIFACTS, _browser, _wait
from ..service.test_page import pytestmark as needs_chromium
from ..service.util import TOKEN, live_service
from .conftest import needs_bwrap
from .test_service import by_agent, ended, provider, text_of

pytestmark = [pytest.mark.trio, needs_bwrap, needs_chromium]


async def test_an_unsandboxed_shell_is_a_visible_warning_on_the_page(tmp_path):
    from selenium.webdriver.common.by import By

    loose, tight = tmp_path / "loose", tmp_path / "tight"
    loose.mkdir()
    tight.mkdir()
    model = by_agent({"a1": [("c1", "pwd")], "a2": [("d1", "pwd")]})
    settings = Settings(model="scripted", sandbox=SandboxSettings(kind="none"))
    async with live_service(tmp_path / "run", provider=provider(model),
                            settings=settings) as svc:
        r = await svc.client.post("/v1/agents", json={"prompt": "go", "workspace": str(loose)})
        assert r.status_code == 201, r.text
        r = await svc.client.post("/v1/agents", json={"prompt": "go", "workspace": str(tight),
                                                      "sandbox": {"kind": "bwrap"}})
        assert r.status_code == 201, r.text
        await ended(svc, "a1")
        await ended(svc, "a2")

        def drive() -> dict:
            driver = _browser()
            got: dict = {}
            try:
                driver.get(f"{svc.base}/#token={TOKEN}")
                head = _wait(driver, lambda d: d.find_element(By.ID, "run-sandbox")
                             if d.find_element(By.ID, "run-sandbox").is_displayed() else None)
                got["header"] = head.text
                def marked(d) -> dict | None:  # read whole in one try: a re-render retries
                    rows = d.find_elements(By.CSS_SELECTOR, "#tree li[data-agent]")
                    if len(rows) != 2:
                        return None
                    return {li.get_attribute("data-agent"): [
                        w.text for w in li.find_elements(By.CSS_SELECTOR, ".warn.unsandboxed")
                        if w.is_displayed()] for li in rows}

                got["marked"] = _wait(driver, marked)
                _wait(driver, lambda d: d.find_element(
                    By.CSS_SELECTOR, '#tree li[data-agent="a1"] .agent').click() or True)
                _wait(driver, lambda d: d.find_element(By.ID, "agent-sandbox")
                             if d.find_element(By.ID, "agent-title").text == "Agent a1"
                             and d.find_element(By.ID, "agent-sandbox").is_displayed() else None)
                got["a1"] = _wait(driver, lambda d: (
                    (w := d.find_element(By.ID, "agent-sandbox")).text,
                    w.get_attribute("class"), w.value_of_css_property("background-color")))
                driver.save_screenshot(str(_artifact("page-sandbox-none")))
                _wait(driver, lambda d: d.find_element(
                    By.CSS_SELECTOR, '#tree li[data-agent="a2"] .agent').click() or True)
                _wait(driver, lambda d: d.find_element(By.ID, "agent-sandbox")
                              if d.find_element(By.ID, "agent-title").text == "Agent a2"
                              and d.find_element(By.ID, "agent-sandbox").text.startswith(
                                  "shell:") else None)
                got["a2"] = _wait(driver, lambda d: (
                    (w := d.find_element(By.ID, "agent-sandbox")).text, w.get_attribute("class")))
                return got
            finally:
                driver.quit()

        got = await trio.to_thread.run_sync(drive)
    assert got["header"].startswith("⚠ unsandboxed shell: new agents' commands run on the "
                                    "machine"), got
    assert got["marked"] == {"a1": ["⚠ unsandboxed shell"], "a2": []}
    text, cls, colour = got["a1"]
    assert cls == "warn" and text.startswith('⚠ unsandboxed shell (sandbox kind = "none")')
    assert colour == "rgba(255, 240, 230, 1)"  # styled as the warning, not muted text
    assert got["a2"] == ("shell: bwrap · no network · 120 s a command (at most 3600 s) · "
                         "2 GiB · 256 processes · 64 KiB of output kept", "shell")
    assert "unsandboxed (kind none)" in text_of(model.seen["a1"][0])
    assert text_of(model.seen["a2"][0]).splitlines()[1] == "/workspace"


def _artifact(name: str):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / f"{name}.png"
