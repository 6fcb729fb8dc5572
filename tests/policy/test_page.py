"""The page's pending approvals in a real headless Chromium: a waiting call is listed with its
tool and input; the approve button runs it once (a stdio MCP server counting its calls); the
reject button, with a reason, never runs it and the model reads the reason."""

from __future__ import annotations

import json

import pytest
import trio

from ..service.test_page import ARTIFACTS, _browser, _wait, pytestmark  # noqa: F401
from ..service.util import TOKEN, live_service
from .conftest import caller, provider, verify
from .test_service import served_settings, shouts, wait_listed, wait_state

pytest.importorskip("mcp")


async def test_the_pages_approve_and_reject_buttons(tmp_path):
    from selenium.webdriver.common.by import By

    calls = tmp_path / "calls.jsonl"
    models = {"a1": caller(("c1", "tools__shout", {"text": "from the page"}), answer="one"),
              "a2": caller(("c1", "tools__shout", {"text": "no"}), answer="two")}

    def model(request, state):
        return models[request.meta["agent"]](request, state)

    root = tmp_path / "run"
    async with live_service(root, provider=provider(model),
                            settings=served_settings(calls)) as svc:
        for prompt in ("shout", "shout again"):
            assert (await svc.client.post("/v1/agents", json={"prompt": prompt})).status_code == 201
        await wait_listed(svc, 2)

        def drive() -> list[str]:
            driver = _browser()
            try:
                driver.get(f"{svc.base}/#token={TOKEN}")
                items = lambda d: d.find_elements(By.CSS_SELECTOR, "#approvals li[data-call]")  # noqa: E731
                _wait(driver, lambda d: len(items(d)) == 2)
                texts = [li.text for li in items(driver)]
                first = _wait(driver, lambda d: [li for li in items(d)
                                                 if li.get_attribute("data-agent") == "a1"][0])
                assert json.loads(first.find_element(By.CSS_SELECTOR, "textarea").get_attribute(
                    "value")) == {"text": "from the page"}
                first.find_element(By.CSS_SELECTOR, "button.approve").click()
                _wait(driver, lambda d: len(items(d)) == 1)
                second = items(driver)[0]
                second.find_element(By.CSS_SELECTOR, "input.why").send_keys("too loud")
                second.find_element(By.CSS_SELECTOR, "button.reject").click()
                _wait(driver, lambda d: not items(d))
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                driver.save_screenshot(str(ARTIFACTS / "page-approvals.png"))
                return texts
            finally:
                driver.quit()

        texts = await trio.to_thread.run_sync(drive)
        for aid in ("a1", "a2"):
            await wait_state(svc, aid)
    assert all("tools__shout" in t for t in texts)
    assert [c["arguments"] for c in shouts(calls)] == [{"text": "from the page"}]
    assert "FROM THE PAGE" in str(models["a1"].seen[0]["content"])
    assert models["a2"].seen[0]["is_error"] and "too loud" in models["a2"].seen[0]["content"]
    verify(root)
