"""Policy patterns that meet a model's arguments: refused at load when they can run away, and
matched off the Trio thread — a slow match stalls no other task (findings 6; decision 0309)."""

from __future__ import annotations

import time

import pytest
import trio

from mnemon.orchestrator.policy import PolicyError, parse_policy
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor

from ..policy.conftest import caller, provider, records
from .ticker import Ticker

RUNAWAY = [r"(ab|abab)+$", r"^(.*?,){11}P", r"(x+x+)+y", r"^(\w+\s?)*$", r"^(a+)+$",
           r"(\s*\w+)+$", r"(?:a|a)*$"]
SANE = [r"^/etc/", r"rm\s+-(rf|fr)", r"^[a-z]+(-[a-z]+)*$", r"^(\d+,)+$", r"(\d+\.){3}\d+",
        r"(\w+\.)+\w+", r"(?i)\b(password|secret)\b", r"^(/[\w.-]+)+$", r"\.env$",
        r"^[A-Z]{2}-\d{4}$", r"^\p{Lu}+$", r"(foo|bar)+", r"(?>x+x+)+y", r"^(\w+\s)*\w+$"]
# loads (no nested repetition, no overlapping rounds), but is polynomial in a long argument:
# the call-time bound is what holds it
SLOW = r"\d+\d+\d+\d+x"


def _policy(pattern: str) -> dict:
    return {"default": "allow", "rule": [
        {"tool": "bash", "when": {"command": pattern}, "action": "allow"}]}


@pytest.mark.parametrize("pattern", RUNAWAY)
def test_a_pattern_whose_rounds_can_split_a_text_many_ways_is_refused_at_load(pattern):
    t = time.perf_counter()
    with pytest.raises(PolicyError, match=r"policy p rule 1: when\.command: .*can run away"):
        parse_policy(_policy(pattern), "p")
    assert time.perf_counter() - t < 1


@pytest.mark.parametrize("pattern", SANE)
def test_the_patterns_policies_are_written_with_still_load(pattern):
    parse_policy(_policy(pattern), "p")


async def test_a_slow_match_fails_closed_off_the_trio_thread(tmp_path):
    """An agent's call whose argument makes a loaded pattern slow: denied by name after the
    bound, while a 10 ms ticker in the same process keeps its period."""
    parse_policy(_policy(SLOW), "p")  # it does load
    arg = "x" + "1" * 30_000 + "!"
    model = caller(("c1", "bash", {"command": arg}))
    settings = Settings(system="t", model="claude-sonnet-4-5",
                        tool_policy=parse_policy(_policy(SLOW), "test-policy"))
    ticker = Ticker()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(ticker.run)
            async with open_supervisor(tmp_path / "run", provider(model), settings) as sup:
                node = await sup.ask("run it")
            ticker.stop = True
    assert node.reason == "done"
    (denied,) = model.seen
    assert denied["is_error"]
    assert "could not judge this call in time" in str(denied["content"])
    assert "test-policy rule 1" in str(denied["content"])
    assert ticker.ran >= 0.2  # the match did run its bound (0.25 s) while the ticker ticked
    assert ticker.worst < 0.1, f"the Trio thread stalled {ticker.worst * 1000:.0f} ms"
    assert any(r["t"] == "ToolResults" for r in records(tmp_path / "run"))
