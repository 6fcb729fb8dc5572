"""Typed answers in the agent loop: an answer that does not fit is sent back with its problems
and retried as an ordinary turn; the last failure ends ``failed: output``; a refusal ends
``failed: refused``; the accepted output is recorded in the log and read back from it."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
import trio
from hypothesis import HealthCheck, given, settings as hsettings

from mnemon.orchestrator.cli import main
from mnemon.orchestrator.cli.commands.results import rows_from_logs
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.orchestrator.typed import OutputError, load_output, vote_fields
from mnemon.orchestrator.synod import normalise
from mnemon.providers.scripted import ScriptedProvider
from mnemon.providers.typed import OUTPUT_TOOL, build_instance, is_valid
from mnemon.session.chain import strip

from tests.providers.typed.schemas import OUTPUT_SCHEMAS

SCHEMA = {"title": "Count", "type": "object",
          "properties": {"word": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
          "required": ["word", "n"], "additionalProperties": False}


def _records(root: Path, agent: str) -> list[dict]:
    # lines end at b"\n" only: str.splitlines would also split inside a string at U+0085;
    # the records without the log's chain key
    return [json.loads(strip(line)) for line in
            (root / "agents" / agent / "record.jsonl").read_bytes().split(b"\n") if line]


def _text(text: str) -> dict:
    return {"blocks": [{"type": "text", "text": text}], "stop_reason": "end_turn"}


async def _ask(tmp_path: Path, script: list[dict], output=SCHEMA, **kw):
    root = tmp_path / "run"
    async with open_supervisor(root, ScriptedProvider(script), Settings()) as sup:
        node = await sup.ask("count the words", output=output, **kw)
    return root, node, sup


async def test_an_answer_that_does_not_fit_is_retried_once_then_decoded(tmp_path):
    root, node, sup = await _ask(tmp_path, [_text('{"word": "cat", "n": 0}'),
                                            _text('{"word": "cat", "n": 2}')])
    assert (node.state, node.reason) == ("ended", "done")
    assert node.output == {"word": "cat", "n": 2}
    recs = _records(root, node.id)
    steering = [r for r in recs if r["t"] == "Steering"]
    assert len(steering) == 1 and steering[0]["by"] == "harness"
    assert "$.n: must be ≥ 1, got 0" in steering[0]["text"]
    assert "2 more tries left" in steering[0]["text"]
    # the retry is an ordinary turn: recorded, priced, counted
    assert sum(r["t"] == "AssistantMessage" for r in recs) == 2
    assert sum(r["t"] == "ProviderCall" for r in recs) == 2
    assert node.turns_taken == 2 and node.usage.output_tokens > 0 and node.cost_usd > 0
    assert recs[-1]["t"] == "SessionEnded" and recs[-1]["output"] == {"word": "cat", "n": 2}
    assert recs[0]["output_type"] == {"name": "Count", "schema": SCHEMA, "retries": 2}
    assert main(["verify", str(root)]) == 0


async def test_three_answers_that_do_not_fit_end_failed_output_with_the_last_error(tmp_path):
    root, node, _ = await _ask(tmp_path, [_text("not json"), _text('{"word": 3, "n": 1}'),
                                          _text('{"word": "cat"}')])
    assert node.state == "failed"
    assert node.reason == "failed: output: $.n: is required but missing"
    assert node.output is None
    recs = _records(root, node.id)
    steering = [r["text"] for r in recs if r["t"] == "Steering"]
    assert len(steering) == 2 and "is not JSON" in steering[0] and "$.word: expected string" \
        in steering[1] and "1 more try left" in steering[1]
    assert recs[-1] == {"t": "SessionEnded", "reason": node.reason, "at": recs[-1]["at"]}


async def test_output_retries_zero_fails_at_the_first_miss(tmp_path):
    root, node, _ = await _ask(tmp_path, [_text("{}")],
                               output=load_output(str(_schema_file(tmp_path)), retries=0))
    assert node.reason.startswith("failed: output: $.word: is required but missing")
    assert node.turns_taken == 1


def _schema_file(tmp_path: Path) -> Path:
    p = tmp_path / "count.json"
    p.write_text(json.dumps(SCHEMA))
    return p


def _final(call_id: str, value) -> dict:
    return {"blocks": [{"type": "tool_use", "id": call_id, "name": OUTPUT_TOOL,
                        "input": value}], "stop_reason": "tool_use"}


async def test_the_final_answer_tool_is_answered_with_the_error_then_accepted(tmp_path):
    root, node, _ = await _ask(tmp_path, [_final("f1", {"word": "cat", "n": "two"}),
                                          _final("f2", {"word": "cat", "n": 2})])
    assert node.reason == "done" and node.output == {"word": "cat", "n": 2}
    results = [r["results"][0] for r in _records(root, node.id) if r["t"] == "ToolResults"]
    assert results[0]["tool_use_id"] == "f1" and results[0]["is_error"] is True
    assert '$.n: expected integer, got string "two"' in results[0]["content"]
    assert results[1]["tool_use_id"] == "f2" and results[1].get("is_error", False) is False
    assert main(["verify", str(root)]) == 0


async def test_a_final_answer_beside_other_calls_is_refused_and_the_others_run(tmp_path):
    mixed = {"blocks": [{"type": "tool_use", "id": "t1", "name": "transcript_index",
                         "input": {}},
                        {"type": "tool_use", "id": "f1", "name": OUTPUT_TOOL,
                         "input": {"word": "a", "n": 1}}], "stop_reason": "tool_use"}
    root, node, _ = await _ask(tmp_path, [mixed, _final("f2", {"word": "a", "n": 1})])
    assert node.reason == "done" and node.output_tries == 0
    answered = {r["tool_use_id"]: r for rec in _records(root, node.id)
                if rec["t"] == "ToolResults" for r in rec["results"]}
    assert answered["f1"]["is_error"] and "alone" in answered["f1"]["content"]
    assert not answered["t1"].get("is_error")


async def test_a_refusal_ends_failed_refused(tmp_path):
    root, node, _ = await _ask(tmp_path, [{"blocks": [{"type": "text",
                                                       "text": "I can't help with that."}],
                                           "stop_reason": "refusal"}])
    assert (node.state, node.reason, node.output) == ("failed", "failed: refused", None)
    assert node.turns_taken == 1


async def test_a_python_type_is_an_output_type(tmp_path):
    class Count(msgspec.Struct):
        word: str
        n: int
        note: str | None = None

    root, node, _ = await _ask(tmp_path, [_text('{"word": "x", "n": 4, "note": null}')],
                               output=Count)
    assert node.output == {"word": "x", "n": 4, "note": None}
    assert _records(root, node.id)[0]["output_type"]["name"] == "Count"


async def test_a_resumed_typed_agent_whose_answer_was_accepted_ends_again(tmp_path):
    root, node, _ = await _ask(tmp_path, [_text('{"word": "w", "n": 1}')])
    async with open_supervisor(root, ScriptedProvider([]), Settings()) as sup:
        again = sup.resume_agent(node.id)
        assert again.output_type is not None and again.output_type.name == "Count"
        await sup.run(again)
    assert again.reason == "done" and again.output == {"word": "w", "n": 1}


# ---------------------------------------------------------------- round trip through the log


@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(OUTPUT_SCHEMAS)
def test_generated_schemas_round_trip_through_the_log(tmp_path_factory, schema):
    """The scripted provider answers a typed request with an instance it builds; the loop
    accepts it; the log records it; the run root gives it back (``mnemon results``)."""
    expected = build_instance(schema)
    root = tmp_path_factory.mktemp("rt") / "run"

    async def go():
        async with open_supervisor(root, ScriptedProvider(), Settings()) as sup:
            return await sup.ask("answer in the type", output=schema)

    node = trio.run(go)
    assert node.reason == "done", node.reason
    assert node.output == expected and is_valid(node.output, schema)
    ended = _records(root, node.id)[-1]
    assert ended["t"] == "SessionEnded" and ended["output"] == expected
    [row] = rows_from_logs(root)
    assert row["output"] == expected and row["status"] == "done"


# ---------------------------------------------------------------- the vote, field by field


def test_a_field_wise_vote_reports_its_tie():
    v = vote_fields([{"capital": "Paris", "continent": "Europe", "rank": 1},
                     {"capital": "paris.", "continent": "Europe", "rank": 2},
                     {"capital": "Lyon", "continent": "Europe", "rank": 2},
                     None,
                     {"capital": "Lyon", "continent": "Asia"}], normalise)
    assert v.voters == 4
    assert v.ties == ["capital"]
    assert v.fields["capital"] == {"winner": None, "tie": True, "tied": ["Paris", "Lyon"],
                                   "counts": {"paris": 2, "lyon": 2}, "voters": 4}
    assert v.fields["continent"]["winner"] == "Europe"
    assert v.fields["rank"] == {"winner": 2, "tie": False, "tied": [], "counts": {"2": 2, "1": 1},
                                "voters": 3}
    assert v.output == {"capital": "Paris", "continent": "Europe", "rank": 2}


async def test_a_typed_synod_votes_field_by_field_and_reports_the_tie(tmp_path):
    schema = {"type": "object", "properties": {"city": {"type": "string"},
                                               "country": {"type": "string"}},
              "required": ["city", "country"]}
    answers = {"a2": '{"city": "Paris", "country": "France"}',  # the children, as minted
               "a3": '{"city": "Lyon", "country": "France"}'}

    def policy(request, state):
        if request.meta["depth"] == 0:
            return [{"type": "text", "text": "ready"}], "end_turn"
        me = request.meta["agent"]
        return [{"type": "text", "text": answers[me]}], "end_turn"

    root = tmp_path / "run"
    async with open_supervisor(root, ScriptedProvider(policy=policy), Settings()) as sup:
        parent = await sup.ask("think")
        result = await sup.synod(parent, "Which city?", n=2, output=schema)
    assert result.output == {"city": "Paris", "country": "France"}
    d = result.as_dict()
    assert d["vote"]["ties"] == ["city"]
    assert d["vote"]["fields"]["city"]["tied"] == ["Paris", "Lyon"]
    assert d["vote"]["fields"]["country"]["winner"] == "France"
    assert [c["output"] for c in d["children"]] == [json.loads(a) for a in answers.values()]


# ---------------------------------------------------------------- bad input, before anything


@pytest.mark.parametrize(("args", "says"), [
    (["--output", "{tmp}/bad.json"], "keyword 'not' is not supported"),
    (["--output", "{tmp}/nope.json"], "No such file"),
    (["--output", "no_such_module_here:Thing"], "cannot import 'no_such_module_here'"),
    (["--output", "json:dumps"], "is not a type"),
    (["--output", "{tmp}/map.json", "--provider", "openai", "--model", "gpt-4o"],
     "strict mode cannot express an object with free keys (a map) at #/properties/tags"),
])
def test_an_output_type_that_cannot_be_used_is_refused_before_anything_runs(
        tmp_path, capsys, args, says):
    (tmp_path / "bad.json").write_text('{"type": "object", "not": {}}')
    (tmp_path / "map.json").write_text(json.dumps(
        {"type": "object", "properties": {"tags": {"type": "object",
                                                   "additionalProperties": True}}}))
    argv = ["ask", "hello", "--run-root", str(tmp_path / "run")] + [
        a.format(tmp=tmp_path) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "Traceback" not in err, err
    assert not (tmp_path / "run").exists()


def test_ask_prints_the_output_as_one_line_of_json(tmp_path, capsys):
    assert main(["ask", "count", "--output", str(_schema_file(tmp_path)), "--run-root",
                 str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and json.loads(out) == {"word": "scripted", "n": 1}


def test_load_output_names_the_file_and_the_reason(tmp_path):
    p = tmp_path / "s.json"
    p.write_text("{not json")
    with pytest.raises(OutputError, match=f"^{p}: not JSON"):
        load_output(str(p))
