"""The page's delegation view in a real headless Chromium: a capped child shows its caps
beside its tree's spend (and its share of the cap in the tree), the messages sent to it — by
its parent (``agents_send``) and by a person from the page's own box (``POST
/v1/agents/{id}/steer``) — and the box only while it runs."""

from __future__ import annotations

import trio

from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import Text, ToolUse

from .test_page import _browser, _wait, pytestmark  # noqa: F401
from .test_page_views import _open, _shot
from .util import TOKEN, live_service


async def test_a_capped_childs_budget_spend_and_messages_show_and_a_person_can_steer_it(
        tmp_path):
    from selenium.webdriver.common.by import By

    release = trio.Event()
    seen: list[str] = []

    async def policy(request, state):
        agent = request.meta["agent"]
        i = state["i"] = state.get("i", 0) + 1
        if agent == "a1":
            steps = [("agents_start", {"task": "kid: look around", "kind": "fresh",
                                       "budget_usd": 0.5, "max_turns": 4}),
                     ("agents_send", {"agent": "a2", "text": "check the <b>cellar</b> first"}),
                     ("agents_wait", {})]
            if i <= len(steps):
                return [ToolUse(f"p{i}", *steps[i - 1])], "tool_use"
            return [Text("parent done")], "end_turn"
        seen.append(repr(request.messages))
        if i == 1:
            return [ToolUse("k1", "context_survey", {})], "tool_use"
        if i == 2:
            await release.wait()  # running while the page is looked at
            return [ToolUse("k2", "context_survey", {})], "tool_use"
        return [Text("kid done")], "end_turn"

    async with live_service(tmp_path / "run", provider=ScriptedProvider(policy=policy)) as svc:
        r = await svc.client.post("/v1/agents", json={"prompt": "delegate"})
        assert r.status_code == 201
        for _ in range(1000):
            if len(seen) >= 2:
                break
            await trio.sleep(0.02)

        def drive() -> dict:
            driver = _browser()
            got: dict = {}
            try:
                driver.get(f"{svc.base}/#token={TOKEN}")
                _wait(driver, lambda d: d.find_element(By.ID, "live").text == "live")
                _open(driver, "a2")
                _wait(driver, lambda d: d.find_element(By.ID, "agent-budget").is_displayed())
                got["budget"] = driver.find_element(By.ID, "agent-budget").text
                # read inside a wait: the page redraws the tree on every event, so an item
                # found a moment ago may be gone (stale) by the time it is read
                got["tree"] = _wait(driver, lambda d: next(
                    (li.text for li in d.find_elements(By.CSS_SELECTOR, "#tree li")
                     if li.get_attribute("data-agent") == "a2"), None))
                _wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#messages li")) == 1)
                box = driver.find_element(By.ID, "steer-text")
                assert driver.find_element(By.ID, "steer").is_displayed()
                box.send_keys("now try the attic")
                driver.find_element(By.CSS_SELECTOR, "#steer button").click()
                _wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#messages li")) == 2)
                got["messages"] = _wait(driver, lambda d: [
                    li.text for li in d.find_elements(By.CSS_SELECTOR, "#messages li")])
                got["bold"] = driver.find_elements(By.CSS_SELECTOR, "#messages b")
                _wait(driver, lambda d: "2 messages received" in
                      d.find_element(By.ID, "agent-meta").text)
                _shot(driver, "page-delegation")
                trio.from_thread.run_sync(release.set)
                _wait(driver, lambda d: not d.find_element(By.ID, "steer").is_displayed()
                      and "ended" in d.find_element(By.ID, "agent-meta").text, timeout=30)
            finally:
                driver.quit()
            return got

        got = await trio.to_thread.run_sync(drive)
    assert got["budget"].startswith("cap: $0.") and "of $0.5000" in got["budget"]
    assert "turn " in got["budget"] and "of 4" in got["budget"]
    assert "% of cap" in got["tree"]
    assert got["messages"] == ["from its parent: check the <b>cellar</b> first",
                               "from a person: now try the attic"]
    assert got["bold"] == []  # a model's text is text, never markup
    assert any("now try the attic" in s for s in seen[2:])
