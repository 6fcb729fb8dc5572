"""The C trace builder (``native/otlp_build.c``, ``_otlp.Builder``) against the Python one
(``tracing/build.py``, the reference): the same records of several interleaved agents in, the
same protobuf bytes out, span for span and in order — on generated logs (every kind of record
the builders read, times in every format a log may hold, crashes, forks, foreign logs) and on
the recorded run roots of ``tests/data/examples`` and the demo. And ``LiveTracer`` picks the C
builder only where it can serve (a protobuf sink, no content)."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from mnemon.lineage.runroot import agent_source, list_agents, read_run_json
from mnemon.orchestrator.tracing import ids, native_build
from mnemon.orchestrator.tracing.build import TraceBuilder
from mnemon.orchestrator.tracing.protobuf import py_span_bytes
from mnemon.orchestrator.tracing.ship import Shipper
from mnemon.orchestrator.tracing.tap import LiveTracer
from mnemon.session.log import iter_lines
from mnemon.session.records import (ApprovalDecided, ApprovalRequested, AssistantMessage,
                                    Cleared, Evicted, Inherited, Linked, Marked, Opaque,
                                    Pointer, ProviderCall, Residue, Rewound, Row,
                                    SessionEnded, SessionResumed, SessionStarted, Steering,
                                    Swept, Text, Thinking, ToolResult, ToolResults, ToolUse,
                                    TurnStarted, Usage, UserPrompt, decode)
from tests.conftest import EXAMPLES
from tests.tracing.conftest import make_demo

pytestmark = pytest.mark.skipif(not native_build.AVAILABLE,
                                reason="the C trace builder is not built here")

#: the C builder's type (None where it is not built: the module is skipped)
CBuilder = native_build._CBuilder
RUN = ids.run_key({"created_at": "2026-12-02T00:00:00Z", "started_by": "tests"})
AGENTS = ("root", "c1", "c2", "g1")
#: 2026-12-02T00:00:00Z, in microseconds: every generated time is after it (or a little before,
#: as a clock set back would write)
BASE_US = 1_796_169_600 * 1_000_000
MODELS = (None, "", "claude-sonnet-4-5", "claude-haiku-4-5-20251001", "gpt-5", "no-such-model")


# --------------------------------------------------------------------------- the comparison


def compare(steps, *, latest_only: bool, premet=(), takes=None, run: str = RUN) -> int:
    """Feed ``steps`` (``(agent, record, length)``) to both builders, after meeting ``premet``
    (``(agent, SessionStarted or None)``); assert the C builder's spans (every ``take``, then
    ``finish``) are the Python builder's, encoded as each ``feed`` answers them. A record one
    builder refuses, the other refuses too, and the spans up to it agree. Answers the number of
    spans compared."""
    py = TraceBuilder(run, content=False, latest_only=latest_only, hold_agents=False)
    c = native_build.builder(run, latest_only=latest_only)
    for agent, started in premet:
        py.meet(agent, started)
        c.meet(agent, started)
    want: list[bytes] = []
    got: list[bytes] = []
    waiting = 0  # spans the C builder holds for ``take``, from the records before this one
    for i, (agent, rec, length) in enumerate(steps):
        py_error = c_error = None
        try:
            # encoded as soon as it is answered, as a live sink sends it: a later record may
            # still put an event on an agent span already answered (a fork, a mark after the
            # end), which neither the sink nor the C builder, writing bytes, sees any more
            want += [py_span_bytes(s) for s in py.feed(agent, rec, length)]
        except Exception as e:
            py_error = e
        try:
            now_waiting = c.feed(agent, rec, length)
        except Exception as e:
            c_error = e
        assert (py_error is None) == (c_error is None), (
            f"record {i} ({agent}: {rec!r}): Python raised {py_error!r}, C raised {c_error!r}")
        if py_error is not None:  # both refused it: what came before agrees
            got += c.take()[:waiting]
            _same(got, want)
            return len(got)
        waiting = now_waiting
        if takes is None or takes[i % len(takes)]:
            taken = c.take()
            assert len(taken) == waiting
            got += taken
            waiting = 0
        assert got == want[:len(got)], f"after record {i} ({agent}: {rec!r})"
    want += [py_span_bytes(s) for s in py.finish()]
    got += c.finish()
    _same(got, want)
    return len(got)


def _same(got: list[bytes], want: list[bytes]) -> None:
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"span {i} of {len(want)} differs:\n C: {g!r}\n py: {w!r}"
    assert len(got) == len(want)


# --------------------------------------------------------------------------- generated logs


def _utc(us: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=us)


def own_format(us: int) -> str:
    """``now_iso``'s: ``2026-12-02T01:00:00.000123Z``."""
    d = _utc(us)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond:06d}Z"


@st.composite
def a_time(draw, us: int) -> str | None:
    """``us`` written as a log may hold it: mostly the log's own format; else an offset, fewer
    digits, another zone, a near miss of the own format, garbage, or nothing."""
    style = draw(st.sampled_from(
        ["own"] * 8 + ["plus", "millis", "seconds", "zone", "space", "letter", "comma",
                       "garbage", "short", "empty", "none", "nanos", "badzone"]))
    d = _utc(us)
    own = own_format(us)
    if style == "own":
        return own
    if style == "plus":
        return d.isoformat()  # +00:00, and no fraction at a whole second
    if style == "millis":
        return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"
    if style == "seconds":
        return d.strftime("%Y-%m-%dT%H:%M:%SZ")
    if style == "zone":
        return d.astimezone(dt.timezone(dt.timedelta(hours=2, minutes=30))).isoformat()
    if style == "space":  # 27 characters, not the own format: read the slow way
        return own[:10] + " " + own[11:]
    if style == "letter":  # 27 characters, a letter among the fraction's digits
        return own[:22] + "x" + own[23:]
    if style == "comma":
        return own[:19] + "," + own[20:]
    if style == "nanos":
        return own[:26] + "789Z"
    if style == "badzone":
        return own[:26] + "+0x:00"
    if style == "garbage":
        return draw(st.sampled_from([
            "yesterday", "2026-12-02T01:00:00.0001234", "later today!",
            "abcd-ef-ghTij:kl:mn.opqrstZ",
            # the own format's shape, fields out of range: read as the arithmetic gives them
            own[:11] + "25:61:61" + own[19:], own[:8] + "31" + own[10:],
            # a month or a year no calendar has: unreadable
            own[:5] + "13" + own[7:], "0000" + own[4:]]))
    if style == "short":
        return own[:10]
    if style == "empty":
        return ""
    return None


LENGTH = st.integers(0, 4000)
TEXT = st.sampled_from(["", "hello", "look at the file", "ünïcödé ✓", "x" * 100])


@st.composite
def usages(draw) -> Usage | None:
    if draw(st.integers(0, 5)) == 0:
        return None
    n = st.integers(0, 200_000)
    kw = dict(input_tokens=draw(n), output_tokens=draw(n), cache_read_tokens=draw(n),
              cache_write_tokens=draw(n))
    if draw(st.booleans()):
        kw["reasoning_tokens"] = draw(st.integers(0, 50_000))
    return Usage(**kw)


class Clock:
    """An agent's clock: mostly forwards, sometimes back (a clock set back, records of two
    processes)."""

    def __init__(self, us: int):
        self.us = us

    def tick(self, draw) -> int:
        self.us = max(BASE_US - 10**9, self.us + draw(st.integers(-3_000_000, 40_000_000)))
        return self.us


@st.composite
def agent_log(draw, agent: str, others: tuple[str, ...]) -> tuple[list, SessionStarted | None]:
    """One agent's log: its opening (or none), turns of requests, answers, tool calls and
    results, the protocol's records between them, ends, resumes and crashes."""
    clock = Clock(BASE_US + draw(st.integers(0, 600_000_000)))
    out: list = []

    def at():
        return draw(a_time(clock.tick(draw)))

    def add(rec):
        out.append((agent, rec, draw(LENGTH)))

    started = None
    if draw(st.integers(0, 7)) > 0:
        parent = (None if agent == "root" else
                  draw(st.sampled_from(others + ("ghost", None, agent))))
        started = SessionStarted(
            agent=agent, parent=parent, kind=draw(st.sampled_from([None, "mnemon", "fresh"])),
            at=at(), system=draw(st.sampled_from([None, "be brief"])),
            provider=draw(st.sampled_from([None, "anthropic", "openai", "scripted", "odd one"])),
            model=draw(st.sampled_from(MODELS)),
            depth=draw(st.sampled_from([None, 0, 1, 2, 7])),
            # the tools it was offered: a name outside them is the model's text (``_OTHER``)
            tools=draw(st.sampled_from([None, [], [{"name": "read_document"}, {"name": "bash"}],
                                        [{"name": "agents_start"}, {"name": "agents_synod"},
                                         {"name": "ünï"}, {"nom": "x"}]])))
        add(started)
    foreign = draw(st.integers(0, 5)) == 0  # a log with no ProviderCall at all
    turn = 0
    asked: list[str] = []  # tool calls asked for so far (answered or not)
    serial = 0
    for _ in range(draw(st.integers(0, 24))):
        what = draw(st.sampled_from(["turn"] * 6 + ["results", "end", "resume", "summary",
                                                     "approval"] + ["protocol"] * 4))
        if what == "turn":
            turn = turn + 1 if draw(st.integers(0, 9)) else turn  # a turn seen again, at times
            if draw(st.integers(0, 5)):
                add(TurnStarted(turn=turn, at=at()))
            if draw(st.booleans()):
                add(UserPrompt(turn=turn, text=draw(TEXT)))
            if not foreign:
                attempts = draw(st.integers(0, 3))
                for attempt in range(1, attempts + 1):
                    last = attempt == attempts
                    error = None
                    if not last or draw(st.integers(0, 6)) == 0:
                        error = draw(st.sampled_from([
                            "RateLimited: 429 too many requests", "Overloaded: 529",
                            "timed out", "", "ServerError", "x" * 70 + ": long",
                            "BadRequest: 400 your prompt 'PATIENT Jane Doe' was refused",
                            "2fast: no"]))
                    add(ProviderCall(
                        attempt=attempt,
                        latency_s=draw(st.floats(0, 90, allow_nan=False)),
                        usage=draw(usages()) if error is None else None,
                        error=error, model=draw(st.sampled_from(MODELS)), at=at()))
            if draw(st.integers(0, 9)):
                blocks = []
                for _ in range(draw(st.integers(0, 4))):
                    kind = draw(st.sampled_from(["text", "tool", "tool", "synod", "thinking",
                                                 "opaque", "again"]))
                    if kind == "text":
                        blocks.append(Text(draw(TEXT)))
                    elif kind == "thinking":
                        blocks.append(Thinking("hmm", None))
                    elif kind == "opaque":
                        blocks.append(Opaque("openai", {"k": 1}))
                    elif kind == "again" and asked:  # a call id asked for before
                        blocks.append(ToolUse(draw(st.sampled_from(asked)), "read_document",
                                              {"path": "a"}))
                    elif kind == "synod":
                        serial += 1
                        asked.append(f"call-{agent}-{serial}")
                        inp = draw(st.sampled_from([
                            {"n": 3, "reduce": "vote"}, {"n": 5}, {"reduce": "best"}, {},
                            {"n": "3", "reduce": None}, {"n": True, "reduce": 2}]))
                        if draw(st.integers(0, 5)) == 0:
                            inp = '{"n": 3, "red'  # cut mid-JSON by the provider
                        blocks.append(ToolUse(asked[-1], "agents_synod", inp))
                    else:
                        serial += 1
                        asked.append(f"call-{agent}-{serial}")
                        blocks.append(ToolUse(asked[-1], draw(st.sampled_from(
                            ["read_document", "agents_start", "bash", "ünï",
                             "made up by the model", "PATIENT_Jane_Doe"])), {"a": 1}))
                add(AssistantMessage(
                    turn=turn, blocks=blocks,
                    stop_reason=draw(st.sampled_from([None, "", "end_turn", "tool_use"])),
                    model=draw(st.sampled_from(MODELS)), usage=draw(usages())))
        elif what == "results":
            results = []
            for _ in range(draw(st.integers(0, 4))):
                call = (draw(st.sampled_from(asked)) if asked and draw(st.integers(0, 4))
                        else draw(st.sampled_from(["unknown", "call-nobody-1"])))
                results.append(ToolResult(tool_use_id=call, content=draw(TEXT),
                                          is_error=draw(st.booleans())))
            if results and draw(st.integers(0, 3)) == 0:
                results.append(results[0])  # the same id answered twice
            add(ToolResults(results=results))
        elif what == "protocol":  # a few in a row: a rewind or a clear, then a cut weighed
            kinds = draw(st.lists(st.sampled_from([
                "inherited", "evicted", "marked", "swept", "steering", "cleared", "rewound",
                "prompt"]), min_size=1, max_size=3))
            if draw(st.integers(0, 2)) == 0:
                kinds = [draw(st.sampled_from(["rewound", "cleared"])), "prompt", "evicted"]
            for kind in kinds:
                if kind == "inherited":
                    rows = [Linked(Row(id=draw(st.integers(0, turn + 2)),
                                       role=draw(st.sampled_from(["user", "assistant"])), label="l",
                                       bytes=draw(st.integers(0, 10**6)), held="resident"),
                                   Pointer("agents/root/record.jsonl", [(0, 10, "0" * 16)]))
                            for _ in range(draw(st.integers(0, 3)))]
                    add(Inherited(turns=rows, residues=[]))
                elif kind == "evicted":
                    lo = draw(st.integers(0, turn + 1))  # over the turns seen, mostly
                    add(Evicted(residue=Residue((lo, lo + draw(st.integers(-1, 6))),
                                                draw(st.sampled_from([None, "", "the gist ✓"])),
                                                draw(st.sampled_from(["model", "harness"])))))
                elif kind == "marked":
                    add(Marked(block=(draw(st.integers(0, 9)), draw(st.integers(0, 3))),
                               replacement=draw(TEXT)))
                elif kind == "swept":
                    add(Swept(blocks=draw(st.lists(st.tuples(st.integers(0, 9),
                                                             st.integers(0, 3)), max_size=3))))
                elif kind == "steering":
                    add(Steering(text=draw(TEXT),
                                 by=draw(st.sampled_from([None, "harness", "user"]))))
                elif kind == "cleared":
                    add(Cleared())
                elif kind == "rewound":
                    add(Rewound(to=draw(st.integers(max(0, turn - 3), turn + 1))))
                else:
                    add(UserPrompt(turn=draw(st.integers(max(0, turn - 2), turn + 2)),
                                   text=draw(TEXT)))
        elif what == "approval":
            call = draw(st.sampled_from(asked)) if asked else "call-x"
            if draw(st.booleans()):
                add(ApprovalRequested(call_id=call, input={"cmd": "ls"},
                                      tool=draw(st.sampled_from(["bash", "PATIENT_Jane_Doe"])),
                                      rule=draw(st.sampled_from([None, "ask-bash"])),
                                      reason=draw(st.sampled_from([None, "writes files"])),
                                      at=at()))
            else:
                add(ApprovalDecided(call_id=call,
                                    decision=draw(st.sampled_from(["approve", "reject"])),
                                    reason=draw(st.sampled_from([None, "no"])),
                                    input=draw(st.sampled_from([None, {"cmd": "pwd"}])),
                                    by=draw(st.sampled_from([None, "api", "chat", "Jane Doe"])),
                                    at=at()))
        elif what == "summary":  # a request that opens no turn
            if not foreign:
                add(ProviderCall(attempt=1, latency_s=draw(st.floats(0, 10)),
                                 usage=draw(usages()), model=draw(st.sampled_from(MODELS)),
                                 at=at(), purpose="summary",
                                 error=draw(st.sampled_from([None, None, "Overloaded: 529"]))))
        elif what == "end":
            add(SessionEnded(reason=draw(st.sampled_from([
                "done", "done", "failed: RateLimited: 429 slow down", "failed",
                "failed: bad thing happened", "failed:", "cancelled", "budget",
                'failed: output: $.code: "PATIENT Jane Doe"', "failed: provider: HTTP 400: no",
                "failedPATIENT", "stopped by Jane Doe"])), at=at()))
        else:  # resumed: after an end, or without one (the process stopped: a crash)
            add(SessionResumed(at=draw(st.one_of(st.none(), a_time(clock.tick(draw)))),
                               records=draw(st.sampled_from([None, 12]))))
    return out, started


@st.composite
def runs(draw):
    """Several agents' logs of one run, interleaved as their processes append them, and the
    agents met before their first record (with their opening, or without)."""
    n = draw(st.integers(1, len(AGENTS)))
    names = AGENTS[:n]
    logs, openings = [], {}
    for agent in names:
        log, started = draw(agent_log(agent, tuple(a for a in names if a != agent)))
        logs.append(log)
        openings[agent] = started
    steps = []
    at = [0] * n
    while True:
        left = [i for i in range(n) if at[i] < len(logs[i])]
        if not left:
            break
        i = left[draw(st.integers(0, len(left) - 1))]
        steps.append(logs[i][at[i]])
        at[i] += 1
    premet = [(a, draw(st.sampled_from([openings[a], None])))
              for a in names if draw(st.integers(0, 3)) == 0]
    takes = draw(st.lists(st.booleans(), min_size=1, max_size=5))
    return steps, premet, takes


# derandomized: the same examples on every run; not shrunk (a failure names its record and both
# spans' bytes, and shrinking logs this long takes minutes)
@settings(max_examples=400, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(runs())
def test_generated_runs_give_the_same_bytes(run):
    steps, premet, takes = run
    for latest_only in (False, True):
        compare(steps, latest_only=latest_only, premet=premet, takes=takes)


@pytest.mark.parametrize("latency", [float("nan"), float("inf"), 1e300])
def test_a_record_both_refuse_is_refused_at_the_same_place(latency):
    """A call whose latency no clock holds: both builders refuse that record, and what they
    answered before it agrees."""
    t = [own_format(BASE_US + k * 1_000_000) for k in range(4)]
    steps = [("a", SessionStarted(agent="a", at=t[0], model="gpt-5"), 10),
             ("a", TurnStarted(turn=1, at=t[1]), 5),
             ("a", ProviderCall(attempt=1, latency_s=1.5, error="Overloaded: 529", at=t[2]), 9),
             ("a", ProviderCall(attempt=2, latency_s=latency, at=t[3]), 9),
             ("a", SessionEnded(reason="done", at=t[3]), 9)]
    for latest_only in (False, True):
        assert compare(steps, latest_only=latest_only, takes=[False]) == 1  # the failed attempt


# --------------------------------------------------------------------------- recorded runs


def _logs(root: Path) -> dict[str, list]:
    """Each agent's records as its log holds them, with their lines' lengths."""
    return {agent: [(agent, decode(line), len(line))
                    for _, line in iter_lines(root / agent_source(agent))]
            for agent in list_agents(root)}


def _round_robin(logs: dict[str, list]) -> list:
    """The agents' records taken one from each in turn, as concurrent agents append them."""
    steps, queues = [], [list(log) for log in logs.values()]
    while any(queues):
        for q in queues:
            if q:
                steps.append(q.pop(0))
    return steps


def _recorded_runs(demo: Path) -> list[Path]:
    return sorted(p.parent for p in EXAMPLES.glob("*/run.json")) + [demo]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """The demo's run root (a parent forking a child that forks a grandchild, tools, usage)."""
    return make_demo(tmp_path_factory.mktemp("demo") / "run")


def test_recorded_runs_give_the_same_bytes(demo):
    for root in _recorded_runs(demo):
        run = ids.run_key(read_run_json(root))
        logs = _logs(root)
        assert logs, root
        for latest_only in (False, True):
            # log after log, every agent met first with its opening (as ``mnemon trace`` reads)
            premet = [(agent, log[0][1] if isinstance(log[0][1], SessionStarted) else None)
                      for agent, log in logs.items() if log]
            n = compare([s for log in logs.values() for s in log], latest_only=latest_only,
                        premet=premet, run=run)
            # interleaved, each agent met at its first record (as a live run feeds them)
            m = compare(_round_robin(logs), latest_only=latest_only, run=run, takes=[False])
            assert n == m > 0, root


# --------------------------------------------------------------------------- the live tracer


class Collected:
    """A sink that keeps what it is given: spans (``add``) and, when ``takes_encoded``,
    encoded spans (``add_encoded``)."""

    def __init__(self, takes_encoded: bool):
        if takes_encoded:
            self.takes_encoded = True
        self.exported = self.dropped = 0
        self.spans: list = []
        self.encoded: list[bytes] = []
        self.closed = False

    def add(self, spans):
        self.spans += spans

    def add_encoded(self, spans):
        self.encoded += spans

    def close(self):
        self.closed = True


def _shipper(**kw) -> Shipper:
    return Shipper("http://127.0.0.1:9/v1/traces", resource={}, headers={}, **kw)


def test_the_live_tracer_takes_the_c_builder_for_a_protobuf_shipper_only():
    shipper = _shipper()
    tracer = LiveTracer(shipper, latest_only=False)
    try:
        assert tracer.native and tracer.tap == tracer._tap_native
    finally:
        tracer.close()
    for sink, kw in [(_shipper(), {"content": True}),  # content: Python's alone writes it
                     (_shipper(protocol="http/json"), {}),  # JSON: spans, not bytes
                     (Collected(takes_encoded=False), {}),  # an SDK-like sink: spans
                     (_shipper(), {"native": False})]:
        tracer = LiveTracer(sink, latest_only=False, **kw)
        try:
            assert not tracer.native, (sink, kw)
        finally:
            tracer.close()


@pytest.mark.parametrize("native", [True, False])
def test_the_live_tracer_sends_the_builders_spans(tmp_path, demo, native):
    """Records tapped as a live run appends them reach the sink as the builder makes them: the
    C builder's bytes where it serves, else the Python builder's spans — the same bytes."""
    root = tmp_path / "run"
    shutil.copytree(demo, root)
    logs = _logs(root)
    steps = _round_robin(logs)
    sink = Collected(takes_encoded=True)
    tracer = LiveTracer(sink, latest_only=False, native=None if native else False,
                        delay_s=60)
    assert tracer.native is native
    for agent, rec, length in steps:
        alog = SimpleNamespace(path=str(root / agent_source(agent)),
                               ctx=SimpleNamespace(started=logs[agent][0][1]))
        tracer.tap(alog, rec, (0, length, "0" * 16))
    tracer.close()
    assert sink.closed
    (builder,) = tracer.runs.values()
    assert isinstance(builder, CBuilder if native else TraceBuilder)
    sent = sink.encoded if native else [py_span_bytes(s) for s in sink.spans]
    assert not (sink.spans if native else sink.encoded)
    py = TraceBuilder(ids.run_key(read_run_json(root)), latest_only=False)
    want = [py_span_bytes(s) for agent, rec, length in steps
            for s in py.feed(agent, rec, length)] + [py_span_bytes(s) for s in py.finish()]
    _same(sent, want)
    assert tracer.spans == len(want) > 0 and tracer.faults == 0
