"""The service's one line on stderr when a log it would resume does not fold quotes the damage:
a model's (or anyone's) terminal controls in it are escaped."""

from __future__ import annotations

import json

import trio

from mnemon import ScriptedProvider, Settings, open_supervisor
from mnemon.orchestrator import cli, logs
from mnemon.orchestrator.service.control import resume_crashed
from mnemon.orchestrator.service.runs import Run
from tests.helpers import rechain

HOSTILE = "before\x1b[2J\x1b]0;pwned\x07\rover\x9b31mend\u202eevil"


def test_not_resuming_names_the_damage_escaped(tmp_path, capsys):
    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"blocks": [{"type": "text", "text": "hi"}]}) + "\n")
    root = tmp_path / "run"
    assert cli.main(["ask", "hi", "--script", str(script), "--run-root", str(root)]) == 0
    logs.quiet()
    log = root / "agents" / "a1" / "record.jsonl"
    lines = [x for x in log.read_text().splitlines() if '"SessionEnded"' not in x]
    rechain(log, [*lines, json.dumps({"t": HOSTILE})])  # died, then damaged (its chain kept)
    capsys.readouterr()
    run = Run(root, read_only=False)

    async def start() -> list[str]:  # what ``serve`` does first over a run root
        with trio.fail_after(60):
            async with open_supervisor(root, ScriptedProvider(), Settings()) as sup:
                run.sup = sup
                return resume_crashed(run)

    assert trio.run(start) == []
    logs.quiet()
    err = capsys.readouterr().err
    assert "mnemon: not resuming: " in err and "\\x1b]0;pwned" in err and "\\u202eevil" in err
    for ch in ("\x1b", "\x07", "\r", "\x9b", "\u202e"):
        assert ch not in err
