"""The page's views in a real headless Chromium: the conversation of an agent (the demo's
codeword answer, eviction notes and their read-back, inherited turns with their ancestor),
Markdown that never becomes HTML, thinking and tool results folded, turns arriving live; the run
as a timeline with a lane per agent; charts with axes; a job's progress, results and failures.
Screenshots go to build/artifacts (and, with MNEMON_DOC_SCREENSHOTS=1, to docs/img for
docs/service.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import trio

from mnemon.providers.scripted import ScriptedProvider

from .test_page import ARTIFACTS, _browser, _wait, pytestmark  # noqa: F401
from .util import TOKEN, live_service

DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
IN_DOCS = {"page-conversation", "page-timeline", "page-charts", "page-jobs"}  # docs/service.md


def _shot(driver, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    if os.environ.get("MNEMON_DOC_SCREENSHOTS") == "1" and name in IN_DOCS:
        shutil.copyfile(path, DOCS_IMG / f"{name}.png")
    return path


def _demo(tmp_path: Path) -> Path:
    run = tmp_path / "demo"
    subprocess.run([sys.executable, "-m", "mnemon", "demo", "--run-root", str(run)],
                   check=True, capture_output=True, timeout=120)
    return run


def _tab(driver, name: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, f'#tabs button[data-tab="{name}"]').click()


def _open(driver, aid: str) -> None:
    from selenium.webdriver.common.by import By

    def click(d) -> bool:
        li = next((a for a in d.find_elements(By.CSS_SELECTOR, "#tree li")
                   if a.get_attribute("data-agent") == aid), None)
        if li is None:
            return False  # the tree is not drawn yet
        li.find_element(By.CSS_SELECTOR, ".agent").click()
        return True

    _wait(driver, click)
    _wait(driver, lambda d: d.find_element(By.ID, "agent-title").text == f"Agent {aid}")


async def test_the_demo_reads_as_a_conversation_a_timeline_and_charts(tmp_path):
    from selenium.webdriver.common.by import By

    run = _demo(tmp_path)
    evictions = sum(line.count('"t":"Evicted"') for a in ("a1", "a2", "a3")
                    for line in (run / "agents" / a / "record.jsonl").read_text().splitlines())
    async with live_service(run, read_only=True) as svc:
        def drive() -> dict:
            driver = _browser()
            got: dict = {}
            try:
                driver.get(f"{svc.base}/#token={TOKEN}")
                _wait(driver, lambda d: d.find_element(By.ID, "live").text == "live")
                _open(driver, "a1")
                conv = lambda d: d.find_element(By.ID, "conv")  # noqa: E731
                # the answer, as a person reads it: an assistant turn, not JSON
                _wait(driver, lambda d: "VESPER-7" in conv(d).text)
                answers = [m.text for m in conv(driver).find_elements(By.CSS_SELECTOR, ".msg.assistant")]
                got["answer"] = answers[-1]
                got["user"] = conv(driver).find_element(By.CSS_SELECTOR, ".msg.user").text
                # each eviction in place, its note as text, one click reads the turns back
                residues = conv(driver).find_elements(By.CSS_SELECTOR, ".event.residue")
                got["residues"] = [(r.get_attribute("data-span"), r.text) for r in residues]
                residues[0].find_element(By.CSS_SELECTOR, "button.readback-btn").click()
                back = _wait(driver, lambda d: residues[0].find_elements(By.CSS_SELECTOR, ".readback .msg"))
                got["read_back"] = [m.text for m in back]
                got["sources"] = [s.text for s in residues[0].find_elements(By.CSS_SELECTOR, ".readback .source")]
                driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", residues[0])
                _shot(driver, "page-conversation")
                # a long tool result is folded, and opens
                fold = conv(driver).find_elements(By.CSS_SELECTOR, "details.result.folded")[0]
                got["fold_closed"] = fold.get_attribute("open") is None
                fold.find_element(By.CSS_SELECTOR, "summary").click()
                got["fold_open"] = "Carrow Point" in fold.find_element(By.CSS_SELECTOR, "pre").text
                got["tool"] = conv(driver).find_elements(By.CSS_SELECTOR, ".tool .call")[0].text
                # a3: inherited turns, each with the ancestor it comes from
                _open(driver, "a3")
                groups = _wait(driver, lambda d: conv(d).find_elements(By.CSS_SELECTOR, ".event.inherited details.from"))
                got["from"] = [g.get_attribute("data-from") for g in groups]
                got["inherited_rows"] = len(conv(driver).find_elements(By.CSS_SELECTOR, ".inherited-turn"))
                # the timeline: a lane per agent; a click on a bar opens that agent at that turn
                _tab(driver, "timeline")
                lanes = _wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#timeline g.lane")) == 3
                              and d.find_elements(By.CSS_SELECTOR, "#timeline g.lane"))
                got["lanes"] = [g.get_attribute("data-agent") for g in lanes]
                got["timeline_evictions"] = len(driver.find_elements(By.CSS_SELECTOR, "#timeline .mark.evict"))
                got["forks"] = len(driver.find_elements(By.CSS_SELECTOR, "#timeline line.fork"))
                got["axis"] = driver.find_element(By.CSS_SELECTOR, "#timeline svg.axis").text
                _shot(driver, "page-timeline")
                bar = [b for b in driver.find_elements(By.CSS_SELECTOR, "#timeline rect.turnbar")
                       if b.get_attribute("data-agent") == "a1" and b.get_attribute("data-turn") == "12"][0]
                # the bar's own click handler: a turn of no length can lie under the next one's
                # bar when the run is fast, and a pointer click would land on that one
                driver.execute_script(
                    "arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", bar)
                _wait(driver, lambda d: d.find_element(By.ID, "agent-title").text == "Agent a1")
                focus = _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#conv .focus"))
                got["focus"] = focus[0].get_attribute("data-turn")
                got["conv_shown"] = driver.find_element(By.ID, "conversation").is_displayed()
                # charts with axes and units, the eviction drops marked
                _tab(driver, "charts")
                _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-context polyline"))
                got["labels"] = [t.text for t in driver.find_elements(By.CSS_SELECTOR, "#charts .axislabel")]
                got["series"] = sorted(p.get_attribute("data-series") for p in
                                       driver.find_elements(By.CSS_SELECTOR, "#chart-context polyline"))
                got["chart_evictions"] = len(driver.find_elements(By.CSS_SELECTOR, "#chart-context .mark.evict"))
                got["ticks"] = len(driver.find_elements(By.CSS_SELECTOR, "#chart-cost .tick"))
                _shot(driver, "page-charts")
                return got
            finally:
                driver.quit()

        got = await trio.to_thread.run_sync(drive)
    assert "VESPER-7" in got["answer"] and got["answer"].startswith("assistant · turn 14")
    assert "[" not in got["answer"].split("\n", 1)[1][:1]  # prose, not a JSON array
    assert got["user"].startswith("user · turn 1") and "station papers" in got["user"]
    spans = [s for s, _ in got["residues"]]
    # the model's cut, then the harness's (where they fall depends on the bytes the demo's turns
    # hold, its context_survey answer among them: decision 0341 made that answer longer)
    assert spans == ["1-3", "1-6", "1-8", "1-10"]
    assert "note: doc-01 (Carrow Point keeper's log) holds the harbour codeword" in got["residues"][0][1]
    assert "by model" in got["residues"][0][1] and "by harness" in got["residues"][1][1]
    assert any("Reading doc-01.md." in m for m in got["read_back"])
    assert got["sources"][0] == "turn 1 · from a1"
    assert got["fold_closed"] and got["fold_open"]
    assert got["tool"].startswith("read_document")
    assert got["from"] == ["a1", "a2"] and got["inherited_rows"] > 10
    assert got["lanes"] == ["a1", "a2", "a3"]
    # 4 before decision 0341 (see above), 6 after it, 5 since the chain (the key on every record
    # moves where the cuts fall)
    assert got["timeline_evictions"] == evictions == 5
    assert got["forks"] == 2 and "time (ms)" in got["axis"]
    assert got["focus"] == "12" and got["conv_shown"]
    assert {"turn", "context sent (k tokens)", "cost (USD)", "cache-read share (%)"} <= set(got["labels"])
    assert got["series"] == ["a1", "a2", "a3"]
    assert got["chart_evictions"] == evictions and got["ticks"] >= 4


NASTY = ("# Findings\n\nThe **codeword** is `VESPER-7`, see [the log](https://example.org/log).\n\n"
         "- <script>window.__pwned = 1</script>\n"
         "- <img src=x onerror=\"window.__pwned = 2\">\n"
         "- [click me](javascript:window.__pwned=3)\n\n"
         "| field | value |\n| --- | --- |\n| ok | <b>yes</b> |\n")


async def test_markdown_is_safe_thinking_and_results_fold_and_turns_arrive_live(tmp_path):
    from selenium.webdriver.common.by import By

    go = threading.Event()  # the page is open: the model may answer

    async def policy(request, state):
        while not go.is_set():
            await trio.sleep(0.05)
        i = state.get("i", 0)
        state["i"] = i + 1
        if i == 0:
            return [{"type": "thinking", "text": "I should survey my context first.", "signature": "s"},
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "tu_1", "name": "context_survey", "input": {}}], "tool_use"
        return [{"type": "text", "text": NASTY}], "end_turn"

    async with live_service(tmp_path / "run", provider=ScriptedProvider(policy=policy)) as svc:
        assert (await svc.client.post("/v1/agents", json={"prompt": "report <i>now</i>"})).status_code == 201

        def drive() -> dict:
            driver = _browser()
            got: dict = {}
            try:
                driver.get(f"{svc.base}/#token={TOKEN}")
                conv = lambda d: d.find_element(By.ID, "conv")  # noqa: E731
                _wait(driver, lambda d: conv(d).find_elements(By.CSS_SELECTOR, ".msg.user"))
                got["before"] = len(conv(driver).find_elements(By.CSS_SELECTOR, ".msg.assistant"))
                got["user"] = conv(driver).find_element(By.CSS_SELECTOR, ".msg.user .body").text
                go.set()  # now the turns come, and the page shows them as they are recorded
                _wait(driver, lambda d: "ended: done" in conv(d).text)
                msgs = conv(driver).find_elements(By.CSS_SELECTOR, ".msg.assistant")
                got["count"] = len(msgs)
                think = msgs[0].find_element(By.CSS_SELECTOR, "details.thinking")
                got["thinking_closed"] = think.get_attribute("open") is None
                got["thinking"] = think.find_element(By.CSS_SELECTOR, "summary").text
                got["survey"] = msgs[0].find_element(By.CSS_SELECTOR, ".tool").text
                last = msgs[-1]
                got["text"] = last.text
                got["h"] = [e.text for e in last.find_elements(By.CSS_SELECTOR, ".md-h")]
                got["strong"] = [e.text for e in last.find_elements(By.CSS_SELECTOR, "strong")]
                got["code"] = [e.text for e in last.find_elements(By.CSS_SELECTOR, "code")]
                got["links"] = [a.get_attribute("href") for a in last.find_elements(By.CSS_SELECTOR, "a")]
                got["cells"] = [c.text for c in last.find_elements(By.CSS_SELECTOR, "td")]
                got["items"] = [li.text for li in last.find_elements(By.CSS_SELECTOR, "li")]
                got["unsafe"] = len(driver.find_elements(By.CSS_SELECTOR, "#conv script, #conv img, #conv iframe, #conv .md b, #conv .md i"))
                got["pwned"] = driver.execute_script("return window.__pwned === undefined ? null : window.__pwned")
                _shot(driver, "page-markdown")
                return got
            finally:
                driver.quit()

        got = await trio.to_thread.run_sync(drive)
    assert got["before"] == 0 and got["count"] == 2
    assert got["user"] == "report <i>now</i>"
    assert got["thinking_closed"] and got["thinking"].startswith("thinking")
    assert got["survey"].startswith("context_survey") and "window" in got["survey"]
    assert got["h"] == ["Findings"] and got["strong"] == ["codeword"] and "VESPER-7" in got["code"]
    assert got["links"] == ["https://example.org/log"]
    assert "<script>window.__pwned = 1</script>" in got["text"]
    assert '<img src=x onerror="window.__pwned = 2">' in got["text"]
    assert "[click me](javascript:window.__pwned=3)" in got["text"]
    assert got["cells"] == ["ok", "<b>yes</b>"] and len(got["items"]) == 3
    assert got["unsafe"] == 0 and got["pwned"] is None


async def test_the_jobs_tab_shows_progress_results_and_failures(tmp_path):
    from selenium.webdriver.common.by import By

    job = tmp_path / "job"
    job.mkdir()
    (job / "verdict.schema.json").write_text(json.dumps({
        "type": "object", "properties": {"city": {"type": "string"}, "score": {"type": "integer"}},
        "required": ["city", "score"]}))
    (job / "pol.py").write_text(textwrap.dedent("""
        import json

        def policy(request, state):
            if "Nowhere" in json.dumps(request.messages):
                return [{"type": "text", "text": "no idea"}], "end_turn"
            return [{"type": "text", "text": json.dumps({"city": "Paris", "score": 3})}], "end_turn"
    """))
    (job / "job.toml").write_text(textwrap.dedent("""
        [provider]
        name = "scripted"
        policy = "pol:policy"
        price_as = "claude-sonnet-4-5"

        [agent]
        output = "verdict.schema.json"
        output_retries = 0

        [[tasks]]
        id = "fr"
        prompt = "The capital of France?"

        [[tasks]]
        id = "xx"
        prompt = "The capital of Nowhere?"
    """))
    async with live_service(tmp_path / "run") as svc:
        def drive() -> dict:
            driver = _browser()
            got: dict = {}
            try:
                driver.get(f"{svc.base}/#token={TOKEN}")
                _wait(driver, lambda d: d.find_element(By.ID, "live").text == "live")
                _tab(driver, "jobs")
                _wait(driver, lambda d: "no job" in d.find_element(By.ID, "joblist").text)
                driver.find_element(By.ID, "jobpath").send_keys(str(job / "job.toml"))
                driver.find_element(By.CSS_SELECTOR, "#jobform button").click()
                section = _wait(driver, lambda d: next(iter(
                    [s for s in d.find_elements(By.CSS_SELECTOR, "#joblist .job")
                     if "ended" in s.find_element(By.CSS_SELECTOR, ".state").text
                     and len(s.find_elements(By.CSS_SELECTOR, "tbody tr")) == 2]), None), timeout=60)
                got["figures"] = section.find_element(By.CSS_SELECTOR, ".figures").text
                got["head"] = [th.text for th in section.find_elements(By.CSS_SELECTOR, "thead th")]
                got["rows"] = [[td.text for td in tr.find_elements(By.CSS_SELECTOR, "td")]
                               for tr in section.find_elements(By.CSS_SELECTOR, "tbody tr")]
                got["failed"] = [li.text for li in section.find_elements(By.CSS_SELECTOR, ".failed li")]
                got["bar"] = [d.get_attribute("style") for d in section.find_elements(By.CSS_SELECTOR, ".progress div")]
                _shot(driver, "page-jobs")
                return got
            finally:
                driver.quit()

        got = await trio.to_thread.run_sync(drive)
    assert got["figures"].startswith("2 of 2 ended · 1 done · 1 failed")
    assert got["head"] == ["task", "status", "agent", "city", "score", "reason", "cost_usd"]
    assert got["rows"][0][:5] == ["fr", "done", "t1", "Paris", "3"]
    assert got["rows"][1][:5] == ["xx", "failed", "t2", "", ""]
    assert len(got["failed"]) == 1 and got["failed"][0].startswith("xx · failed · failed: output")
    assert "width: 50%" in got["bar"][0] and "width: 50%" in got["bar"][1]


def _marked_run(root: Path) -> Path:
    """A log with a long tool result, a rejected approval, a mark and its sweep, and a typed
    output, written through ``AgentLog`` (every record judged as the loop's would be)."""
    from mnemon.lineage.runroot import create_run_root
    from mnemon.session.records import (ApprovalDecided, ApprovalRequested, AssistantMessage,
                                        Marked, SessionEnded, Swept, Text, ToolResult,
                                        ToolResults, ToolUse)

    from ..helpers import answer, new_agent, prompt, tool_turn

    create_run_root(root, "tests")
    log = new_agent(root, "a1")
    prompt(log, "look at two files")
    t1 = tool_turn(log, "first", "cat a.py", "A" * 3000)
    tid = log.next_id()
    log.append(AssistantMessage(turn=tid, blocks=[Text("cleaning"), ToolUse(
        "tu_w", "bash", {"command": "rm -rf build"})], stop_reason="tool_use", model="m", usage=None))
    log.append(ApprovalRequested(call_id="tu_w", tool="bash", input={"command": "rm -rf build"},
                                 rule="bash", reason="deletes files", at="2026-11-30T00:00:01Z"))
    log.append(ApprovalDecided(call_id="tu_w", decision="reject", reason="keep the build",
                               by="page", at="2026-11-30T00:00:02Z"))
    log.append(ToolResults(results=[ToolResult(tool_use_id="tu_w", content="not approved: keep "
                                               "the build", is_error=True)]))
    prompt(log, "go on")
    log.append(Marked(block=(t1, 2), replacement="a.py: 3000 A's, nothing else"))
    log.append(Swept(blocks=[(t1, 2)]))
    answer(log, '{"ok": true}')
    log.append(SessionEnded(reason="done", at="2026-11-30T00:00:03Z", output={"ok": True}))
    return root


async def test_marks_sweeps_approvals_and_a_typed_output_show_where_they_happen(tmp_path):
    from selenium.webdriver.common.by import By

    run = _marked_run(tmp_path / "run")
    async with live_service(run, read_only=True) as svc:
        def drive() -> dict:
            driver = _browser()
            try:
                driver.get(f"{svc.base}/#token={TOKEN}")
                _open(driver, "a1")
                conv = driver.find_element(By.ID, "conv")
                _wait(driver, lambda d: "ended: done" in conv.text)
                kinds = [e.get_attribute("class") for e in conv.find_elements(By.CSS_SELECTOR, ":scope > *")]
                text = lambda sel: conv.find_element(By.CSS_SELECTOR, sel).text  # noqa: E731
                got = {"kinds": kinds, "asked": text(".event.approval.asked"),
                       "rejected": text(".event.approval.rejected"), "marked": text(".event.marked"),
                       "swept": text(".event.swept"), "output": text(".event.ended .output"),
                       "error": text('.tool[data-call="tu_w"] .result.err'),
                       "long": len(conv.find_elements(By.CSS_SELECTOR, "details.result.folded"))}
                _tab(driver, "timeline")
                got["approvals"] = len(_wait(driver, lambda d: d.find_elements(
                    By.CSS_SELECTOR, "#timeline .mark.approval")))
                return got
            finally:
                driver.quit()

        got = await trio.to_thread.run_sync(drive)
    order = [k.split()[1] for k in got["kinds"] if k.startswith("event")]
    assert order == ["started", "approval", "approval", "marked", "swept", "ended"]
    assert "approval asked: bash" in got["asked"] and "deletes files" in got["asked"]
    assert '{"command":"rm -rf build"}' in got["asked"]
    assert got["rejected"].startswith("rejected tu_w by page: keep the build")
    assert got["marked"].startswith("marked turn 2, block 2") and "3000 A's" in got["marked"]
    assert got["swept"].startswith("swept turn 2 block 2")
    assert got["output"].lower().startswith("typed output") and got["output"].endswith('{"ok":true}')
    assert "keep the build" in got["error"] and got["long"] == 1
    assert got["approvals"] == 2


async def test_a_jobs_synods_show_on_the_timeline(tmp_path):
    from selenium.webdriver.common.by import By

    src = Path(__file__).resolve().parents[2] / "docs" / "examples" / "capitals"
    shutil.copytree(src, tmp_path / "job")
    run = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "mnemon", "run", str(tmp_path / "job" / "capitals.toml"),
                    "--run-root", str(run)], check=True, capture_output=True, timeout=120)
    async with live_service(run, read_only=True) as svc:
        def drive() -> dict:
            driver = _browser()
            try:
                driver.get(f"{svc.base}/#token={TOKEN}")
                _wait(driver, lambda d: d.find_element(By.ID, "tree-count").text == "(20)")
                _tab(driver, "timeline")
                _wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#timeline g.lane")) == 20)
                lanes = [g.get_attribute("data-agent")
                         for g in driver.find_elements(By.CSS_SELECTOR, "#timeline g.lane")]
                synods = _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#timeline .mark.synod"))
                return {"lanes": lanes, "synods": [(s.get_attribute("data-agent"),
                                                    s.find_element(By.CSS_SELECTOR, "title")
                                                    .get_attribute("textContent")) for s in synods],
                        "forks": len(driver.find_elements(By.CSS_SELECTOR, "#timeline line.fork.synod"))}
            finally:
                driver.quit()

        got = await trio.to_thread.run_sync(drive)
    # each task's agent, its three synod children under it
    i = got["lanes"].index("t1")
    assert got["lanes"][i:i + 4] == ["t1", "t1.s1", "t1.s2", "t1.s3"]
    assert sorted(a for a, _ in got["synods"]) == ["t1", "t2", "t3", "t4", "t5"]
    assert all(title.startswith("synod: 3 children forked at turn") for _, title in got["synods"])
    assert got["forks"] == 15


async def test_an_answer_being_written_shows_as_a_preview_until_recorded(tmp_path):
    from selenium.webdriver.common.by import By

    opened, release = threading.Event(), threading.Event()

    class Streaming(ScriptedProvider):
        """Streams a first piece of the answer once the page is open (a preview is not
        replayed to a stream that connects later), then holds the rest until the test says."""

        async def complete(self, request, *, on_attempt=None, on_text=None):
            while not opened.is_set():
                await trio.sleep(0.05)
            if on_text is not None:
                on_text("The codeword is ")
            while not release.is_set():
                await trio.sleep(0.05)
            return await super().complete(request, on_attempt=on_attempt)

    async def policy(request, state):
        return [{"type": "text", "text": "The codeword is VESPER-7."}], "end_turn"

    async with live_service(tmp_path / "run", provider=Streaming(policy=policy)) as svc:
        assert (await svc.client.post("/v1/agents", json={"prompt": "which?"})).status_code == 201

        def drive() -> dict:
            driver = _browser()
            try:
                driver.get(f"{svc.base}/#token={TOKEN}")
                _wait(driver, lambda d: d.find_element(By.ID, "live").text == "live"
                      and d.find_elements(By.CSS_SELECTOR, "#conv .msg.user"))
                opened.set()
                preview = _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#conv .msg.preview"))
                got = {"preview": preview[0].text}
                release.set()
                _wait(driver, lambda d: "ended: done" in d.find_element(By.ID, "conv").text)
                got["previews"] = len(driver.find_elements(By.CSS_SELECTOR, "#conv .msg.preview"))
                got["answer"] = driver.find_elements(By.CSS_SELECTOR, "#conv .msg.assistant")[-1].text
                return got
            finally:
                opened.set()
                release.set()
                driver.quit()

        got = await trio.to_thread.run_sync(drive)
    assert got["preview"].rstrip() == "assistant · writing…\nThe codeword is"
    assert got["previews"] == 0 and got["answer"].endswith("The codeword is VESPER-7.")


async def test_the_markdown_renderer_on_hostile_text_makes_only_its_own_elements(tmp_path):
    """Many random strings of Markdown's and HTML's special characters, rendered in the page:
    every one finishes, makes only the renderer's own elements, no attribute but its own, no
    link but http(s) and mailto — and no word of it is lost (it is text, or a link's address)."""
    import random

    from selenium.webdriver.common.by import By

    rng = random.Random(36)
    alphabet = ["*", "**", "_", "`", "```", "~~", "#", "# ", "> ", "- ", "1. ", "|", "---", "\n",
                "\n\n", "[", "]", "(", ")", "<", ">", "<script>", "<img src=x onerror=alert(1)>",
                "javascript:", "https://a.b/c", "mailto:x@y", "data:text/html,", " ", "word", "7",
                '"', "'", "\\", "&amp;", "    "]
    samples = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(400)]
    run = _demo(tmp_path)
    async with live_service(run, read_only=True) as svc:
        def drive() -> list:
            driver = _browser()
            try:
                driver.get(f"{svc.base}/#token={TOKEN}")
                _wait(driver, lambda d: d.find_element(By.ID, "live").text == "live")
                return driver.execute_script("""
                    const ok = new Set(["P","BR","H3","H4","H5","H6","PRE","CODE","HR","BLOCKQUOTE",
                      "UL","OL","LI","TABLE","THEAD","TBODY","TR","TH","TD","STRONG","EM","DEL","A"]);
                    const attrs = new Set(["href","rel","target","start","data-lang","class"]);
                    return arguments[0].map((text) => {
                      const box = document.createElement("div");
                      box.append(MD.render(text));
                      const bad = [];
                      for (const e of box.querySelectorAll("*")) {
                        if (!ok.has(e.tagName)) bad.push(e.tagName);
                        for (const a of e.attributes) if (!attrs.has(a.name)) bad.push(a.name);
                        if (e.tagName === "A" && !/^(https?:\\/\\/|mailto:)/i.test(e.getAttribute("href"))) bad.push(e.getAttribute("href"));
                      }
                      const hrefs = [...box.querySelectorAll("a")].map((a) => a.getAttribute("href")).join(" ");
                      return [bad, box.textContent, hrefs];
                    });""", samples)
            finally:
                driver.quit()

        out = await trio.to_thread.run_sync(drive)
    assert len(out) == len(samples)
    for text, (bad, shown, hrefs) in zip(samples, out):
        assert bad == [], (text, bad)
        for word in ("word", "script", "onerror", "javascript"):  # text is never dropped
            assert text.count(word) <= shown.count(word) + hrefs.count(word), (text, shown)
