"""Schema patterns that meet a model's answer: refused at load when they can run away, and
matched off the Trio thread — a slow match fails closed, naming the schema path, and stalls no
other task (finding 5; decision 0309)."""

from __future__ import annotations

import json

import pytest
import trio

from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.orchestrator.typed import OutputError, from_python
from mnemon.providers.scripted import ScriptedProvider
from mnemon.providers.typed import OutputType, SchemaError

from .test_policy_runaway import RUNAWAY, SLOW
from .ticker import Ticker


def _schema(pattern: str) -> dict:
    return {"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}},
            "required": ["code"]}


@pytest.mark.parametrize("pattern", RUNAWAY)
def test_a_runaway_schema_pattern_is_refused_at_load_naming_its_path(pattern):
    with pytest.raises(SchemaError, match=r"^#/properties/code/pattern: .*can run away"):
        OutputType(_schema(pattern))
    with pytest.raises(OutputError, match=r"#/properties/code/pattern: .*can run away"):
        from_python(_schema(pattern))


def _text(text: str) -> dict:
    return {"blocks": [{"type": "text", "text": text}], "stop_reason": "end_turn"}


async def test_a_slow_pattern_match_fails_closed_off_the_trio_thread(tmp_path):
    """The answer makes a loaded pattern slow: the agent is told which path could not be
    checked (and ends failed with no retries left), while a 10 ms ticker keeps its period."""
    answer = json.dumps({"code": "x" + "1" * 30_000 + "!"})
    ticker = Ticker()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(ticker.run)
            async with open_supervisor(tmp_path / "run", ScriptedProvider([_text(answer)]),
                                       Settings()) as sup:
                node = await sup.ask("a code", output=OutputType(_schema(SLOW), retries=0))
            ticker.stop = True
    assert node.reason.startswith("failed: output: $.code: ")
    assert "could not be checked against the pattern" in node.reason
    assert ticker.ran >= 0.2
    assert ticker.worst < 0.1, f"the Trio thread stalled {ticker.worst * 1000:.0f} ms"
