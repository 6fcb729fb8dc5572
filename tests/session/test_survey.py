"""The one survey of a context (``session/survey.py``): every surface — the model's tool, ``mnemon
context``, the service, the MCP server, chat — shows this table, one spelling for a frontier
item (decision 0341)."""

from __future__ import annotations

from mnemon.session.records import Evicted, Marked, Residue
from mnemon.session.render import residue_message
from mnemon.session.survey import survey
from tests.helpers import answer, new_agent, prompt, tool_turn


def test_a_turn_and_a_residue_each_have_one_shape(tmp_path):
    log = new_agent(tmp_path, "a1", context_window=8000)
    prompt(log, "read the lexer")
    tool_turn(log, "reading", "cat lex.py", "x" * 3000)
    answer(log, "read it")
    log.append(Evicted(residue=Residue(span=(1, 2), note="read the lexer", by="model")))
    prompt(log, "fix the parser")
    tid = tool_turn(log, "reading", "cat parse.py", "y" * 3000)
    answer(log, "fixed")
    log.append(Marked(block=(tid, 1), replacement="parse.py, 3000 bytes of y"))
    ctx = log.ctx
    s = survey(ctx)
    residue, *turns = s["frontier"]
    assert residue == {"kind": "residue", "span": [1, 2], "note": "read the lexer", "by": "model",
                       "bytes": len(residue_message(ctx, ctx.frontier()[0]).encode())}
    assert [(t["kind"], t["id"], t["role"]) for t in turns] == [
        ("turn", 3, "assistant"), ("turn", 4, "user"), ("turn", 5, "assistant"),
        ("turn", 6, "assistant")]
    assert set(turns[1]) == {"kind", "id", "role", "bytes", "label"}
    assert turns[1]["label"] == ctx.turn(4).label
    assert s["history_bytes"] == ctx.history_bytes() == sum(i["bytes"] for i in s["frontier"])
    assert s["used_tokens"] == ctx.used_tokens()
    assert survey(ctx, 0.5)["used_tokens"] == ctx.used_tokens(0.5)
    assert s["marks"] == [{"block": f"{tid}.1", "replacement_bytes": 25}]
    assert s["context_window"] == 8000
