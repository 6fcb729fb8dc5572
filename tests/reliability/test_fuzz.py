"""Fuzzing with hypothesis: the fold, the SSE parser and both stream assemblers, the importers,
the door's ``turns`` argument and the CLI's argument parsing. Each may refuse — by its named
refusal — and must do nothing else: no other exception, no hang."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemon.orchestrator.importers import TrajectoryFormatError, check_invariants, every_skipped_line, load
from mnemon.providers import anthropic, openai
from mnemon.providers.errors import ProviderError
from mnemon.providers.sse import SSEDecoder
from mnemon.session.door import parse_turns
from mnemon.session.errors import LogRefused, Refusal
from mnemon.session.resume import fold_file

SAMPLES = Path(__file__).resolve().parents[1] / "importers" / "samples"
FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=12)

RECORD_LINES = [
    b'{"t":"SessionStarted","agent":"a1"}',
    b'{"t":"UserPrompt","turn":1,"text":"hello"}',
    b'{"t":"AssistantMessage","turn":2,"blocks":[{"type":"tool_use","id":"c1","name":"x","input":{}}],'
    b'"stop_reason":"tool_use","model":null,"usage":null}',
    b'{"t":"ToolResults","results":[{"tool_use_id":"c1","content":"ok"}]}',
    b'{"t":"Steering","text":"nudge"}',
    b'{"t":"Evicted","residue":{"span":[1,2],"note":null,"by":"harness"}}',
    b'{"t":"Rewound","to":1}',
    b'{"t":"Cleared"}',
]


def _mutate(line: bytes, rnd: random.Random) -> bytes:
    b = bytearray(line)
    for _ in range(rnd.randint(0, 3)):
        op = rnd.random()
        i = rnd.randrange(len(b) + 1)
        if op < 0.4 and b:
            b[min(i, len(b) - 1)] = rnd.randrange(256)
        elif op < 0.7:
            b[i:i] = bytes([rnd.randrange(256)])
        elif b:
            del b[min(i, len(b) - 1)]
    return bytes(b).replace(b"\n", b" ")


@FAST
@given(st.lists(st.integers(0, len(RECORD_LINES) - 1), min_size=1, max_size=12),
       st.randoms(use_true_random=False), st.booleans())
def test_the_fold_refuses_by_name_or_folds(tmp_path, picks, rnd, torn):
    lines = [RECORD_LINES[0]] + [_mutate(RECORD_LINES[i], rnd) if rnd.random() < 0.3
                                 else RECORD_LINES[i] for i in picks]
    path = tmp_path / "record.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"" if torn else b"\n"))
    try:
        fold_file(path, "agents/a1/record.jsonl")
    except LogRefused as e:
        assert e.line >= 1 and str(e).startswith("agents/a1/record.jsonl:")


@FAST
@given(st.binary(max_size=400), st.lists(st.integers(1, 50), max_size=10))
def test_the_sse_decoder_takes_any_bytes_in_any_chunks(data, cuts):
    dec, pos, events = SSEDecoder(), 0, []
    for n in cuts:
        events += dec.feed(data[pos:pos + n])
        pos += n
    events += dec.feed(data[pos:])
    events += dec.flush()
    whole = SSEDecoder()
    assert [(e.event, e.data) for e in events] == \
        [(e.event, e.data) for e in whole.feed(data) + whole.flush()]


EVENT_TYPES = ["message_start", "content_block_start", "content_block_delta",
               "content_block_stop", "message_delta", "message_stop", "ping", "error", "weird"]


@FAST
@given(st.lists(st.tuples(st.sampled_from(EVENT_TYPES), JSONISH), max_size=8))
def test_the_anthropic_assembler_refuses_a_bad_stream_as_a_provider_error(events):
    from mnemon.providers.http import _SHAPE_ERRORS

    asm = anthropic.MessageAssembler({})
    try:
        for kind, data in events:
            payload = {"type": kind, **data} if isinstance(data, dict) else data
            anthropic._feed_event(asm, kind, json.dumps(payload))
        asm.finish()
    except ProviderError:
        pass
    except _SHAPE_ERRORS:
        pass  # the adapter turns these into MalformedResponse (test below)


@FAST
@given(st.lists(JSONISH, max_size=8))
def test_the_openai_assembler_refuses_a_bad_stream_as_a_provider_error(chunks):
    from mnemon.providers.http import _SHAPE_ERRORS

    asm = openai.ChunkAssembler({})
    try:
        for c in chunks:
            asm.feed(json.dumps(c))
        asm.finish()
    except ProviderError:
        pass
    except _SHAPE_ERRORS:
        pass


@pytest.mark.parametrize("body", [
    b'event: content_block_delta\ndata: {"type":"content_block_delta"}\n\n',
    b'event: message_start\ndata: {"type":"message_start","message":7}\n\n',
    b'event: message_start\ndata: [1,2]\n\n',
    b"data: " + b"x" * 100 + b"\n\n",
])
async def test_a_malformed_stream_becomes_a_retried_provider_error(body):
    import httpx

    from mnemon.providers.base import Request
    from mnemon.providers.errors import MalformedResponse, StreamInterrupted
    from mnemon.providers.retry import RetryPolicy

    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    p = anthropic.AnthropicProvider(client, "k", "claude-sonnet-4-5",
                                    retry=RetryPolicy(max_attempts=2, initial_backoff_s=0.001))
    req = Request(system=None, messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    with pytest.raises(StreamInterrupted) as info:
        await p.complete(req)
    assert len(calls) == 2, "retried"
    assert isinstance(info.value, (MalformedResponse, StreamInterrupted))
    await client.aclose()


@FAST
@given(st.lists(JSONISH, min_size=1, max_size=6), st.sampled_from(["auto", "neutral",
                                                                    "claude-code", "codex"]))
def test_importers_refuse_by_name_or_load(tmp_path, rows, fmt):
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    try:
        load(path, fmt)
    except TrajectoryFormatError as e:
        assert str(e)


@pytest.mark.parametrize("fmt", ["auto", "neutral", "claude-code", "codex"])
@pytest.mark.parametrize("row", [
    {"type": []}, {"type": {}}, {"role": [], "text": "x"}, {"role": {"a": 1}, "text": "x"},
    {"type": "response_item", "payload": {"type": ["message"]}},
    {"type": "response_item", "payload": {"type": {"k": 1}}, "timestamp": "x"},
])
def test_importers_refuse_kinds_that_are_not_strings(tmp_path, row, fmt):
    """A ``type``, ``role`` or payload ``type`` that is a list or an object is no kind: the
    line is refused by name or skipped, never a ``TypeError`` (found by the fuzz test below)."""
    path = tmp_path / "session.jsonl"
    path.write_text(json.dumps(row) + "\n")
    try:
        load(path, fmt)
    except TrajectoryFormatError as e:
        assert str(e)


LINE_SAMPLES = sorted(p for p in SAMPLES.rglob("*.jsonl") if "subagents" not in p.parts)


@FAST
@given(st.sampled_from(LINE_SAMPLES), st.randoms(use_true_random=False), st.sampled_from(["auto", "claude-code",
                                                                                         "codex", "neutral"]))
def test_importers_recover_from_damaged_lines(tmp_path, sample, rnd, fmt):
    """A sample with lines mutated, glued together or dropped mid-way: it is refused in one named line,
    or imported keeping the guarantees, every skipped line named by a real line number."""
    lines = sample.read_bytes().split(b"\n")
    out = b""
    for line in lines:
        if rnd.random() < 0.2:
            line = _mutate(line, rnd)
        out += line + (b"" if rnd.random() < 0.15 else b"\n")
    path = tmp_path / sample.name
    path.write_bytes(out)
    try:
        t = load(path, fmt)
    except TrajectoryFormatError as e:
        assert str(e) and "\n" not in str(e)
        return
    assert check_invariants(t) == []
    count = out.count(b"\n") + 1
    assert all(1 <= s.line <= count and s.reason for s in every_skipped_line(t))


@FAST
@given(st.one_of(st.text(max_size=30), st.integers(), st.lists(st.one_of(st.integers(),
                                                                          st.text(max_size=8)))))
def test_turns_arguments_parse_or_are_refused(spec):
    try:
        ids, ranges = parse_turns(spec)
    except Refusal as e:
        assert "\n" not in str(e)
    else:
        assert all(isinstance(i, int) for i in ids)
        assert all(a <= b for a, b in ranges)


SUB = ["transcript", "index", "read", "grep", "context", "tree", "verify", "cost", "--turns",
       "--json", "--timeout", "-1", "0", "x", "--port", "99999", "--keep", "2", "--rendered"]


@FAST
@given(st.lists(st.sampled_from(SUB) | st.text(max_size=6), max_size=6))
def test_cli_argument_parsing_is_a_namespace_or_a_one_line_exit_2(argv):
    from mnemon.orchestrator.cli import build_parser

    parser, _ = build_parser(argv)

    def error(message):
        raise SystemExit(2)

    parser.error = error
    for action in parser._subparsers._group_actions:
        for sp in action.choices.values():
            sp.error = error
            for sub in getattr(sp, "_subparsers", None) and sp._subparsers._group_actions or ():
                for ssp in sub.choices.values():
                    ssp.error = error
    try:
        parser.parse_args(argv)
    except SystemExit as e:
        assert e.code in (0, 2)
