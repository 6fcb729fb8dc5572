"""An agent's files on the page, in a real headless Chromium (as tests/service/test_page.py):
each turn's change in the conversation as a diff view — the added lines of a file the agent
wrote, styled; a long file's diff folded; a `<script>` the model wrote shown as text — and the
Files tab: the files at a turn, a click showing one file's content at that turn."""

from __future__ import annotations

import trio

from ..service.test_page import ARTIFACTS, _browser, _wait, pytestmark  # noqa: F401
from ..service.util import TOKEN, live_service
from .helpers import provider

LONG = "".join(f"line {i}\n" for i in range(1, 101))
SCRIPT = [
    [("fs_write", {"path": "notes/plan.md", "content": "# plan\nstep one\n"})],
    [("fs_edit", {"path": "notes/plan.md", "old": "step one", "new": "step one\nstep two"}),
     ("fs_write", {"path": "evil.html", "content": "<script>window.pwned=1</script>\n"}),
     ("fs_write", {"path": "long.txt", "content": LONG})],
]


async def test_the_conversation_shows_each_turns_diff_and_the_files_tab_reads_a_file(tmp_path):
    from selenium.webdriver.common.by import By

    src = tmp_path / "src"
    src.mkdir()
    (src / "README").write_text("hello\n")
    async with live_service(tmp_path / "run", provider=provider(SCRIPT)) as svc:
        r = await svc.client.post("/v1/agents", json={"prompt": "plan it",
                                                      "workspace": {"source": str(src)}})
        aid = r.json()["id"]
        for _ in range(1000):
            if (await svc.client.get(f"/v1/agents/{aid}")).json()["state"] != "running":
                break
            await trio.sleep(0.02)

        def drive() -> dict:
            driver = _browser()
            got: dict = {}
            try:
                driver.get(f"{svc.base}/#token={TOKEN}")
                _wait(driver, lambda d: d.find_element(By.ID, "agent-title").text == f"Agent {aid}")
                conv = lambda d: d.find_element(By.ID, "conv")  # noqa: E731
                changes = _wait(driver, lambda d: len(conv(d).find_elements(
                    By.CSS_SELECTOR, ".event.workspace.change .diff")) == 2
                    and conv(d).find_elements(By.CSS_SELECTOR, ".event.workspace.change"))
                got["start"] = conv(driver).find_element(By.CSS_SELECTOR, ".event.workspace.start").text
                got["heads"] = [c.find_element(By.CSS_SELECTOR, "b").text for c in changes]
                first = changes[0].find_elements(By.CSS_SELECTOR, "details.wsfile")
                got["first_files"] = [f.get_attribute("data-path") for f in first]
                got["first_added"] = [s.text for s in first[0].find_elements(By.CSS_SELECTOR, "pre .add")]
                got["first_open"] = first[0].get_attribute("open") is not None
                second = {f.get_attribute("data-path"): f for f in
                          changes[1].find_elements(By.CSS_SELECTOR, "details.wsfile")}
                plan = second["notes/plan.md"]
                got["plan_summary"] = plan.find_element(By.CSS_SELECTOR, "summary").text
                got["plan_added"] = [s.text for s in plan.find_elements(By.CSS_SELECTOR, "pre .add")]
                got["plan_context"] = [s.text for s in plan.find_elements(By.CSS_SELECTOR, "pre .ctx")]
                got["plan_hunk"] = [s.text for s in plan.find_elements(By.CSS_SELECTOR, "pre .hunk")]
                got["add_colour"] = plan.find_elements(By.CSS_SELECTOR, "pre .add")[0].value_of_css_property("background-color")
                got["long_open"] = second["long.txt"].get_attribute("open") is not None
                got["evil"] = [s.get_attribute("textContent") for s in
                               second["evil.html"].find_elements(By.CSS_SELECTOR, "pre .add")]
                got["scripts"] = driver.execute_script(
                    "return [document.querySelectorAll('#conv script').length, window.pwned || 0]")
                driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", changes[1])
                driver.save_screenshot(str(_artifact("page-workspace-diff")))
                # the files after the first change's turn: a click reads plan.md as it was then
                changes[0].find_element(By.CSS_SELECTOR, "button.files-btn").click()
                items = _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#files-list li[data-path]"))
                got["files_at_first"] = [li.get_attribute("data-path") for li in items]
                got["turn_picked"] = driver.find_element(By.ID, "files-turn").get_attribute("value")
                [li for li in items if li.get_attribute("data-path") == "notes/plan.md"][0] \
                    .find_element(By.CSS_SELECTOR, "a").click()
                got["content_then"] = _wait(driver, lambda d: d.find_elements(
                    By.CSS_SELECTOR, "#file-view pre.filecontent")[0].text)
                # the latest files: evil.html's content is text, not a page
                from selenium.webdriver.support.ui import Select

                Select(driver.find_element(By.ID, "files-turn")).select_by_value("")
                _wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#files-list li[data-path]")) == 4)
                [li for li in driver.find_elements(By.CSS_SELECTOR, "#files-list li[data-path]")
                 if li.get_attribute("data-path") == "evil.html"][0].find_element(By.CSS_SELECTOR, "a").click()
                got["evil_content"] = _wait(driver, lambda d: d.find_elements(
                    By.CSS_SELECTOR, "#file-view pre.filecontent")[0].text)
                got["scripts_after"] = driver.execute_script(
                    "return [document.querySelectorAll('#files script').length, window.pwned || 0]")
                driver.save_screenshot(str(_artifact("page-workspace-files")))
                return got
            finally:
                driver.quit()

        got = await trio.to_thread.run_sync(drive)
    assert got["start"].startswith("workspace · copy:") and "the files" in got["start"]
    assert got["heads"][0].startswith("files changed by turn ")
    assert got["first_files"] == ["notes/plan.md"] and got["first_open"]
    assert got["first_added"] == ["+# plan", "+step one"]
    assert got["plan_summary"] == "notes/plan.md +1 −0"
    assert got["plan_added"] == ["+step two"] and "step one" in " ".join(got["plan_context"])
    assert got["plan_hunk"] and got["plan_hunk"][0].startswith("@@")
    assert got["add_colour"] == "rgba(230, 255, 236, 1)"  # styled as an added line
    assert not got["long_open"]  # 100 added lines: folded
    assert got["evil"] == ["+<script>window.pwned=1</script>\n"]
    assert got["scripts"] == [0, 0] and got["scripts_after"] == [0, 0]
    assert sorted(got["files_at_first"]) == ["README", "notes/plan.md"]
    assert got["turn_picked"] != ""
    assert got["content_then"] == "# plan\nstep one"
    assert got["evil_content"] == "<script>window.pwned=1</script>"


def _artifact(name: str):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / f"{name}.png"
