"""The page's jobs view shows a scored job's summary — per scorer n, mean, its interval and
cost per correct answer — above its results, whose columns end with each scorer's value."""

from __future__ import annotations

import shutil
from pathlib import Path

import trio

from tests.service.test_page import _browser, _wait, pytestmark  # noqa: F401
from tests.service.util import TOKEN, live_service

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "scores"


async def test_the_jobs_view_shows_scores_and_the_summary(tmp_path):
    from selenium.webdriver.common.by import By

    where = tmp_path / "quiz"
    shutil.copytree(EXAMPLE, where, ignore=shutil.ignore_patterns("*.run", "__pycache__"))
    text = (where / "quiz.toml").read_text()
    (where / "single.toml").write_text(text.split("[variants]")[0] + "[[score]]"
                                       + text.split("[[score]]", 1)[1])
    async with live_service(tmp_path / "run") as svc:
        def drive() -> dict:
            driver = _browser()
            try:
                driver.get(f"{svc.base}/#token={TOKEN}")
                _wait(driver, lambda d: d.find_element(By.ID, "live").text == "live")
                driver.find_element(By.CSS_SELECTOR, '#tabs button[data-tab="jobs"]').click()
                _wait(driver, lambda d: "no job" in d.find_element(By.ID, "joblist").text)
                driver.find_element(By.ID, "jobpath").send_keys(str(where / "single.toml"))
                driver.find_element(By.CSS_SELECTOR, "#jobform button").click()
                section = _wait(driver, lambda d: next(iter(
                    [s for s in d.find_elements(By.CSS_SELECTOR, "#joblist .job")
                     if "ended" in s.find_element(By.CSS_SELECTOR, ".state").text
                     and s.find_elements(By.CSS_SELECTOR, ".scores tbody tr")]), None),
                    timeout=60)
                box = section.find_element(By.CSS_SELECTOR, ".scores")
                return {
                    "head": [th.text for th in box.find_elements(By.CSS_SELECTOR, "thead th")],
                    "rows": [[td.text for td in tr.find_elements(By.CSS_SELECTOR, "td")]
                             for tr in box.find_elements(By.CSS_SELECTOR, "tbody tr")],
                    "columns": [th.text for th in section.find_elements(
                        By.CSS_SELECTOR, "table.results:not(.summary) thead th")],
                }
            finally:
                driver.quit()

        got = await trio.to_thread.run_sync(drive)
    assert got["head"] == ["scorer", "n", "mean", "se", "95% CI", "failures", "cost",
                           "cost/correct", "judge"]
    assert [r[0] for r in got["rows"]] == ["correct", "exact", "judge", "brief"]
    assert got["rows"][0][1:5] == ["9", "0.667", "0.167", "[0.354, 0.879]"]
    assert got["rows"][2][8] != "$0.0000"  # the judge's own cost
    assert got["columns"][-6:] == ["score.correct", "score.exact", "score.judge", "score.brief",
                                   "reason", "cost_usd"]
