"""``mnemon cost``: per-agent and total tokens, cache and price, on supervisor runs, hand-written
logs and the shared examples, with figures computed by hand."""

from __future__ import annotations

import json
import shutil

import pytest

from mnemon.lineage.runroot import agent_source
from mnemon.orchestrator.cli import main
from mnemon.orchestrator.costs import agent_cost, as_json, run_cost
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.providers.prices import cost_usd
from mnemon.session.records import AssistantMessage, ProviderCall, Text, Usage
from tests.conftest import EXAMPLES
from tests.helpers import new_agent, prompt

from .conftest import call, fetch_tool, provider, reader_policy, records, say, settings

FIELDS = ["agent", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens",
          "cost_usd"]


def cost_json(capsys, *args: str) -> dict:
    assert main(["cost", *map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# --------------------------------------------------------------------------- the examples


def test_plain_example_sums_assistant_usage_by_hand(capsys):
    # Two AssistantMessages, model "bars-model" (unknown: the default tier, $3 in / $15 out,
    # read $0.30, write $3.75 at 5m and $6 at 1h per 1M), no ProviderCall records:
    #   input 1200 + 60, output 30 + 9, cache read 0 + 1200, cache write 1200 + 0.
    out = cost_json(capsys, EXAMPLES / "plain")
    row = {"agent": "a1", "input_tokens": 1260, "cache_read_tokens": 1200,
           "cache_write_tokens": 1200, "output_tokens": 39,
           "cost_usd": 0.009225}  # (1260·3 + 39·15 + 1200·0.3 + 1200·3.75) / 1e6
    assert out == {"agents": [row], "total": {k: v for k, v in row.items() if k != "agent"}}
    assert list(out["agents"][0]) == FIELDS

    hour = cost_json(capsys, EXAMPLES / "plain", "--cache-ttl", "1h")
    assert hour["total"]["cost_usd"] == 0.011925  # 1200 written at $6 instead of $3.75

    haiku = cost_json(capsys, EXAMPLES / "plain", "--price-as", "claude-haiku-4-5")
    assert haiku["total"]["cost_usd"] == 0.003075  # 1260·1 + 39·5 + 1200·0.1 + 1200·1.25


def test_agent_directory_and_run_root_give_the_same_row(capsys):
    by_root = cost_json(capsys, EXAMPLES / "plain")
    by_dir = cost_json(capsys, EXAMPLES / "plain" / "agents" / "a1")
    assert by_root == by_dir


def test_logs_without_usage_cost_nothing(capsys):
    # child/: usage is null everywhere; both agents listed, in id order, at zero.
    out = cost_json(capsys, EXAMPLES / "child")
    assert [a["agent"] for a in out["agents"]] == ["c1", "p"]
    for row in [*out["agents"], out["total"]]:
        assert all(row[k] == 0 for k in FIELDS[1:])
    rows = run_cost(EXAMPLES / "child")
    assert [r.counted for r in rows] == ["none", "none"]


@pytest.mark.parametrize("name", ["evicted", "nested", "rewind-clear", "child", "plain"])
def test_every_example_is_costed_read_only(capsys, name, tmp_path):
    src = EXAMPLES / name
    before = {p: p.read_bytes() for p in src.rglob("*") if p.is_file()}
    cost_json(capsys, src)
    assert main(["cost", str(src)]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].split() == ["agent", "input", "cache", "read", "cache", "write",
                                            "output", "cost"]
    assert any(line.startswith("total") for line in text.splitlines())
    assert {p: p.read_bytes() for p in src.rglob("*") if p.is_file()} == before


# --------------------------------------------------------------------------- hand-written logs


def test_provider_calls_win_over_assistant_messages_and_extra_calls_count(run_root, capsys):
    log = new_agent(run_root, "a1", model="claude-opus-4-1")  # $15 / $75, read $1.5, write $18.75
    prompt(log, "summarise the repo")
    u1 = Usage(input_tokens=100, output_tokens=20, cache_read_tokens=1000, cache_write_tokens=400)
    log.append(ProviderCall(attempt=1, latency_s=0.5, usage=None, error="overloaded"))
    log.append(ProviderCall(attempt=2, latency_s=0.7, usage=u1))  # model: SessionStarted's
    log.append(AssistantMessage(turn=log.next_id(), blocks=[Text("done")], stop_reason="end_turn",
                                model="claude-opus-4-1", usage=u1))
    # a summarisation request that opens no turn, on another model
    u2 = Usage(input_tokens=1000, output_tokens=2000)
    log.append(ProviderCall(attempt=1, latency_s=1.0, usage=u2, model="claude-haiku-4-5"))
    log.close()

    out = cost_json(capsys, run_root)
    # u1 on opus-4-1: 100·15 + 20·75 + 1000·1.5 + 400·18.75 = 12 000 µ$ → 0.012
    # u2 on haiku-4-5: 1000·1 + 2000·5 = 11 000 µ$ → 0.011
    assert out["agents"] == [{"agent": "a1", "input_tokens": 1100, "cache_read_tokens": 1000,
                              "cache_write_tokens": 400, "output_tokens": 2020,
                              "cost_usd": 0.023}]
    # every usage on haiku: (100 + 100 + 100 + 500) + 11 000 = 11 800 µ$
    assert cost_json(capsys, run_root, "--price-as", "claude-haiku-4-5")["total"]["cost_usd"] \
        == 0.0118
    # 1h TTL: the 400 written cost $30 instead of $18.75 per 1M → + 4 500 µ$
    assert cost_json(capsys, run_root, "--cache-ttl", "1h")["total"]["cost_usd"] == 0.0275


def test_assistant_message_model_then_session_model(run_root, capsys):
    log = new_agent(run_root, "a1", model="claude-opus-4-1")
    prompt(log, "q")
    u = Usage(input_tokens=1_000_000)
    log.append(AssistantMessage(turn=log.next_id(), blocks=[Text("a")], stop_reason="end_turn",
                                model="gpt-4.1", usage=u))  # $2 per 1M
    prompt(log, "q2")
    log.append(AssistantMessage(turn=log.next_id(), blocks=[Text("b")], stop_reason="end_turn",
                                model=None, usage=u))  # SessionStarted's model: $15 per 1M
    log.close()
    assert cost_json(capsys, run_root)["total"]["cost_usd"] == 17.0


def test_torn_tail_is_reported_and_not_counted(tmp_path, capsys):
    root = tmp_path / "plain"
    shutil.copytree(EXAMPLES / "plain", root)
    path = root / agent_source("a1")
    whole = cost_json(capsys, root)
    torn = b'{"t":"ProviderCall","attempt":1,"latency_s":1.0,"usage":{"input_tokens":99'
    with open(path, "ab") as f:
        f.write(torn)
    before = path.read_bytes()
    assert main(["cost", str(root), "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out) == whole
    assert cap.err.count("\n") == 1 and "torn tail of" in cap.err and "agents/a1" in cap.err
    assert path.read_bytes() == before, "a read-only command never modifies a file"


def test_neither_run_root_nor_agent_directory_exits_2_one_line(tmp_path, capsys):
    (tmp_path / "x").mkdir()
    for target in (tmp_path / "x", tmp_path / "missing", EXAMPLES / "plain" / "agents"):
        assert main(["cost", str(target)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("mnemon: ")


def test_a_line_that_is_not_a_record_exits_2_naming_it(tmp_path, capsys):
    root = tmp_path / "plain"
    shutil.copytree(EXAMPLES / "plain", root)
    path = root / agent_source("a1")
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2] + [b"not json\n"] + lines[2:]))
    assert main(["cost", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "agents/a1/record.jsonl:3" in err


def test_unknown_cache_ttl_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["cost", str(EXAMPLES / "plain"), "--cache-ttl", "10m"])
    assert e.value.code == 2


# --------------------------------------------------------------------------- supervisor runs


def _delegating_policy(request, state):
    """The root reads two pages, starts a mnemon child, waits, answers; the child reads one."""
    state["k"] = state.get("k", 0) + 1
    k = state["k"]
    if request.meta["depth"] == 0:
        if k <= 2:
            return call(state, "fetch", i=k)
        if k == 3:
            return call(state, "agents_start", task="read page 3")
        if k == 4:
            agent = json.loads(request.messages[-1]["content"][0]["content"])["agent"]
            return call(state, "agents_wait", agents=[agent])
        return say("done")
    if k == 1:
        return call(state, "fetch", i=3)
    return say("page 3 read")


async def test_supervisor_run_matches_the_live_accounting(tmp_path, capsys):
    root = tmp_path / "run"
    s = settings(model="claude-haiku-4-5", price_model="claude-haiku-4-5")
    async with open_supervisor(root, provider(_delegating_policy), s,
                               user_tools=[fetch_tool()]) as sup:
        node = await sup.ask("go")
    assert node.reason == "done" and len(sup.agents) == 2
    out = cost_json(capsys, root)
    assert [a["agent"] for a in out["agents"]] == ["a1", "a2"]
    for row in out["agents"]:
        live = sup.agents[row["agent"]]
        assert row["input_tokens"] == live.usage.input_tokens
        assert row["cache_read_tokens"] == live.usage.cache_read_tokens
        assert row["cache_write_tokens"] == live.usage.cache_write_tokens
        assert row["output_tokens"] == live.usage.output_tokens
        assert row["cost_usd"] == pytest.approx(live.cost_usd, abs=1e-6)
        # by hand from the file: one ProviderCall per turn, priced on haiku
        calls = [r for r in records(root, row["agent"]) if r["t"] == "ProviderCall"]
        assert len(calls) == live.turns_taken
        assert row["cost_usd"] == pytest.approx(
            sum(cost_usd(Usage(**c["usage"]), "claude-haiku-4-5") for c in calls), abs=1e-6)
    # the child inherited the root's turns by pointer but pays only for its own calls
    child = out["agents"][1]
    assert child["cache_read_tokens"] > 0, "the child's prefix was read from the shared cache"
    total = out["total"]
    for k in FIELDS[1:-1]:
        assert total[k] == sum(a[k] for a in out["agents"])
    assert total["cost_usd"] == pytest.approx(sup.cost_usd, abs=1e-6)
    assert run_cost(root)[0].counted == "provider_calls"


async def test_scripted_model_prices_at_the_default_tier(tmp_path, capsys):
    root = tmp_path / "run"
    s = settings(model="scripted")
    async with open_supervisor(root, provider(reader_policy(2)), s,
                               user_tools=[fetch_tool()]) as sup:
        await sup.ask("go")
    default = cost_json(capsys, root)["total"]
    sonnet = cost_json(capsys, root, "--price-as", "claude-sonnet-4-5")["total"]
    opus = cost_json(capsys, root, "--price-as", "claude-opus-4-1")["total"]
    assert default == sonnet  # the default tier is Sonnet's price
    assert default["cost_usd"] == pytest.approx(sup.cost_usd, abs=1e-6)
    assert opus["cost_usd"] == pytest.approx(5 * default["cost_usd"], rel=1e-3)


def test_agent_cost_is_pure_and_reports_what_it_counted(tmp_path):
    path = EXAMPLES / "plain" / agent_source("a1")
    row = agent_cost(path, "a1")
    assert row.counted == "assistant_messages" and row.records == 2 and row.torn is None
    assert as_json([row])["total"]["cost_usd"] == 0.009225
