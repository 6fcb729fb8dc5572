"""The batch wire (both providers' shapes, from their references: fixtures/README.md), the split
by a provider's limits, custom ids, the ledger and the batch price."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from mnemon.orchestrator.batch.ids import CUSTOM_ID, custom_id, run_tag
from mnemon.orchestrator.batch.journal import BatchJournal, BatchJournalError
from mnemon.providers.anthropic import AnthropicProvider
from mnemon.providers.base import Request
from mnemon.providers.batches import Limits, split
from mnemon.providers.batches.anthropic import AnthropicBatches, decode_status as a_status
from mnemon.providers.batches.openai import OpenAIBatches, decode_status as o_status
from mnemon.providers.openai import OpenAIProvider
from mnemon.providers.prices import batch_model, cost_usd, is_batch, price_for
from mnemon.session.records import Text, Usage

FIX = Path(__file__).parent / "fixtures"


def _req() -> Request:
    return Request(system="Be brief.", messages=[{"role": "user", "content": [
        {"type": "text", "text": "hello"}]}], max_tokens=100)


def test_anthropic_rows_and_status_from_the_reference():
    api = AnthropicBatches(AnthropicProvider(None, "k", "claude-sonnet-4-5"))
    rows = api.rows((FIX / "anthropic_results.jsonl").read_bytes())
    assert [r.kind for r in rows] == ["succeeded", "errored", "canceled", "expired"]
    assert rows[0].response.blocks == [Text("Hello again! It's nice to see you.")]
    assert rows[0].response.usage.output_tokens == 36
    assert rows[1].error == "invalid_request_error: Validation error" and not rows[1].retryable
    st = a_status(json.loads((FIX / "anthropic_batch.json").read_text()))
    assert st.ended and st.counts["expired"] == 1 and st.raw["results_url"].endswith("/results")


def test_openai_rows_and_status_from_the_reference():
    api = OpenAIBatches(OpenAIProvider(None, "k", "gpt-4.1"))
    raw = (FIX / "openai_output.jsonl").read_bytes() + (FIX / "openai_error.jsonl").read_bytes()
    rows = {r.custom_id: r for r in api.rows(raw)}
    assert rows["request-2"].kind == "succeeded"
    assert rows["request-2"].response.blocks == [Text("Hello.")]
    assert rows["request-2"].response.stop_reason == "end_turn"
    assert rows["request-1"].kind == "expired"
    assert rows["request-3"].kind == "errored" and "Invalid value" in rows["request-3"].error
    assert rows["request-4"].kind == "canceled"
    st = o_status(json.loads((FIX / "openai_batch.json").read_text()))
    assert st.ended and st.failed is None and st.counts["total"] == 100
    failed = o_status({"id": "b", "status": "failed", "errors": {"data": [
        {"code": "invalid_json_line", "message": "line 3"}]}})
    assert failed.ended and failed.failed == "invalid_json_line: line 3"
    assert not o_status({"id": "b", "status": "finalizing"}).ended


def test_a_line_is_the_live_body_without_stream():
    a = AnthropicBatches(AnthropicProvider(None, "k", "claude-sonnet-4-5"))
    line = json.loads(a.line("c-1", _req()))
    assert line["custom_id"] == "c-1" and "stream" not in line["params"]
    assert line["params"]["model"] == "claude-sonnet-4-5"
    assert line["params"]["system"][0]["cache_control"] == {"type": "ephemeral"}
    o = OpenAIBatches(OpenAIProvider(None, "k", "gpt-4.1"))
    line = json.loads(o.line("c-2", _req()))
    assert (line["method"], line["url"]) == ("POST", "/v1/chat/completions")
    assert "stream" not in line["body"] and "stream_options" not in line["body"]


def test_split_by_count_and_bytes():
    lines = [b"x" * 10] * 7
    assert split(lines, Limits(requests=3, bytes=10**6)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert split(lines, Limits(requests=100, bytes=25), overhead=1) == [
        [0, 1], [2, 3], [4, 5], [6]]
    assert split([b"y" * 50], Limits(requests=1, bytes=10)) == [[0]]  # alone, as the API judges


def test_custom_ids_are_valid_and_distinct():
    run = run_tag("2026-12-02T00:00:00Z")
    ids = {custom_id(run, a, t, n) for a in ("t1", "t1.s2", "t1_s2", "a-1", "x" * 120)
           for t in (2, 30) for n in (1, 2)}
    assert len(ids) == 20 and all(CUSTOM_ID.match(c) for c in ids)
    assert custom_id(run, "t12.s2", 5, 1) == f"{run}-t12_ds2-5-1"


def test_ledger_round_trip_and_refusals(tmp_path):
    led = BatchJournal(tmp_path)
    led.submitted("msgbatch_1", "anthropic", 1, [{"custom_id": "c1", "agent": "t1", "turn": 2,
                                                  "attempt": 1}])
    assert BatchJournal(tmp_path).open_batches() == ["msgbatch_1"]
    led.collected("msgbatch_1", b'{"custom_id":"c1"}\n')
    led.cancelled("msgbatch_1")
    again = BatchJournal(tmp_path)
    assert again.owner == {"c1": "msgbatch_1"} and again.open_batches() == []
    assert again.batches["msgbatch_1"]["cancelled_at"] and again.waves() == 1
    with pytest.raises(BatchJournalError):
        led.submitted("../evil", "anthropic", 2, [])
    (tmp_path / "batches" / "bad.json").write_text("{")
    with pytest.raises(BatchJournalError):
        BatchJournal(tmp_path)


def test_the_batch_price_is_half_of_every_price():
    u = Usage(input_tokens=1000, output_tokens=300, cache_read_tokens=7000,
              cache_write_tokens=900)
    for model in ("claude-sonnet-4-5", "claude-opus-4-6", "gpt-4.1", "gpt-5", "scripted"):
        live, batch = cost_usd(u, model), cost_usd(u, batch_model(model))
        assert batch == pytest.approx(live * 0.5)
        for ttl in ("5m", "1h"):
            assert cost_usd(u, batch_model(model), ttl) == pytest.approx(
                cost_usd(u, model, ttl) * 0.5)
    p = price_for("claude-sonnet-4-5@batch")
    assert (p.input, p.output, p.cache_read, p.cache_write_5m) == (1.5, 7.5, 0.15, 1.875)
    assert is_batch(batch_model(None)) and batch_model("x@batch") == "x@batch"


def test_cost_prices_batch_calls_at_the_batch_price_and_sums_them_apart(tmp_path):
    from mnemon.orchestrator.costs import agent_cost, total

    u = {"input_tokens": 1000, "output_tokens": 100, "cache_read_tokens": 4000,
         "cache_write_tokens": 0}
    log = tmp_path / "record.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in [
        {"t": "SessionStarted", "agent": "a1", "at": "2026-12-02T00:00:00Z"},
        {"t": "ProviderCall", "attempt": 1, "latency_s": 0.0, "model": "claude-sonnet-4-5@batch",
         "batch": "msgbatch_1", "custom_id": "x-a1-2-1"},
        {"t": "ProviderCall", "attempt": 1, "latency_s": 9.0, "usage": u,
         "model": "claude-sonnet-4-5@batch", "batch": "msgbatch_1", "custom_id": "x-a1-2-1"},
        {"t": "ProviderCall", "attempt": 1, "latency_s": 1.0, "usage": u,
         "model": "claude-sonnet-4-5"}]) + "\n")
    live = cost_usd(Usage(**u), "claude-sonnet-4-5")
    c = agent_cost(log, "a1")
    assert c.cost_usd == pytest.approx(1.5 * live) and c.batch_cost_usd == pytest.approx(0.5 * live)
    assert c.records == 2  # the submission carries no usage
    t = total([c])
    assert t["batch_cost_usd"] == pytest.approx(0.5 * live, abs=1e-6)
    assert t["live_cost_usd"] == pytest.approx(live, abs=1e-6)
    other = agent_cost(log, "a1", price_as="gpt-4.1")  # the discount kept under --price-as
    g = cost_usd(Usage(**u), "gpt-4.1")
    assert other.cost_usd == pytest.approx(1.5 * g) and other.batch_cost_usd == pytest.approx(0.5 * g)
    again = agent_cost(log, "a1", price_as="gpt-4.1@batch")  # (a batch run's own price_as)
    assert again.cost_usd == pytest.approx(other.cost_usd)


@given(st.lists(st.integers(0, 60), max_size=60), st.integers(1, 8), st.integers(1, 200))
def test_split_keeps_order_and_limits(sizes, max_requests, max_bytes):
    """Every line once, in order; no chunk over either limit, but a line alone over the bytes."""
    lines = [b"x" * n for n in sizes]
    chunks = split(lines, Limits(requests=max_requests, bytes=max_bytes), overhead=1)
    assert [i for c in chunks for i in c] == list(range(len(lines)))
    for c in chunks:
        assert 1 <= len(c) <= max_requests
        assert len(c) == 1 or sum(len(lines[i]) + 1 for i in c) <= max_bytes
