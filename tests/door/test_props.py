"""Property tests: the index over random logs, and the grep shortcut against plain decoding."""

from __future__ import annotations

import json

import hypothesis.strategies as st
import msgspec
import pytest
import regex
from hypothesis import HealthCheck, given, settings

from mnemon.lineage.runroot import create_run_root
from mnemon.session.door import Door, _Matcher, required_literal
from mnemon.session.door.literal import required_literals
from mnemon.session.errors import Refusal
from mnemon.session.records import (
    AssistantMessage,
    Cleared,
    Evicted,
    Residue,
    Rewound,
    SessionStarted,
    Steering,
    Text,
    ToolResult,
    ToolResults,
    ToolUse,
    UserPrompt,
    encode,
)
from tests.helpers import answer, door_open, new_agent, prompt, tool_turn

from ._build import evict_prefix

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

OPS = st.lists(st.tuples(st.sampled_from(["prompt", "tool", "answer", "evict", "clear",
                                          "rewind"]), st.integers(0, 6)), max_size=40)


@SETTINGS
@given(ops=OPS)
def test_index_lists_every_turn_once_with_its_held(tmp_path_factory, ops):
    root = create_run_root(tmp_path_factory.mktemp("idx") / "run", "tests")
    log = new_agent(root, "a1")
    held: dict[int, str] = {}
    residue: dict[int, tuple[int, int] | None] = {}
    for op, k in ops:
        ctx = log.ctx
        if op in ("prompt", "tool", "answer"):
            tid = {"prompt": lambda: prompt(log, f"p{k}"),
                   "tool": lambda: tool_turn(log, f"t{k}", "ls", "out\nmore"),
                   "answer": lambda: answer(log, f"a{k}")}[op]()
            held[tid], residue[tid] = "resident", None
        elif ctx.in_hand is None:
            continue
        elif op == "evict":
            span = evict_prefix(log, k + 1)
            if span is not None:
                for tid in held:
                    if span[0] <= tid <= span[1] and held[tid] != "withdrawn":
                        held[tid], residue[tid] = "evicted", span
        elif op == "clear":
            log.append(Cleared())
            for tid in held:
                held[tid] = "withdrawn"
        elif op == "rewind":
            ids = sorted(held)
            to = ids[k % len(ids)]
            try:
                log.append(Rewound(to=to))
            except Refusal:
                assert any(r.first <= to < r.last for r in ctx.outermost_residues())
                continue
            for tid in held:
                if tid > to:
                    held[tid] = "withdrawn"
    rows = Door(root, log.ctx).index()
    assert [r["id"] for r in rows] == sorted(held)
    assert {r["id"]: r["held"] for r in rows} == held
    assert {r["id"]: (tuple(r["residue"]) if r["residue"] else None) for r in rows} == residue
    cold, _ = door_open(root / "agents" / "a1")
    assert cold.index() == rows
    # every turn reads back, resident or departed
    if rows:
        got = cold.read([r["id"] for r in rows])
        assert [g["turn"] for g in got] == [r["id"] for r in rows]


# --------------------------------------------------------------------------- the shortcut

ALPHA = "ab c.x\"\\\n\té—\u2028\x01(|)*+?[]{}^$1/<&="
TEXT = st.text(alphabet=ALPHA, max_size=30)
LIT = st.text(alphabet="abcx. \"\\é1-/<&=", min_size=1, max_size=4)


@st.composite
def patterns(draw):
    a, b = draw(LIT), draw(LIT)
    ea, eb = regex.escape(a), regex.escape(b)
    form = draw(st.sampled_from([
        "{a}", "{ea}", "{ea}.*{eb}", "{ea}+", "[ab]{ea}", "{ea}|{eb}", "^{ea}", "{ea}$",
        "(?i){ea}", "{ea}{{2}}", r"\d{ea}", r"{ea}\b", "(?:{ea})+", "{ea}?{eb}", r"\s{ea}",
        r"{ea}\n", "{ea}(?={eb})", "(?<!{ea}){eb}", "{ea}[^x]*{eb}", r"\u00e9{ea}", "",
        # top-level alternations (each branch's literal a prefilter) and look-alikes
        "{ea}|{eb}|x{ea}", "{ea}+|{eb}?c", "{ea}|", "|{eb}", r"{ea}|\d", "[|]{ea}|{eb}",
        "({ea}|{eb})c", "{ea}.*|{eb}$", r"{ea}\|{eb}", "[[:alpha:]|]{ea}|{eb}", "^{ea}|{eb}",
    ]))
    return form.format(a=a, ea=ea, eb=eb)


@st.composite
def logs(draw):
    """A small valid log as a list of records; texts full of JSON-escaped characters."""
    recs = []
    tid = 0
    for _ in range(draw(st.integers(1, 6))):
        tid += 1
        if draw(st.booleans()):
            recs.append(UserPrompt(turn=tid, text=draw(TEXT)))
        else:
            cid = f"tu_{tid}"
            recs.append(AssistantMessage(turn=tid, blocks=[
                Text(draw(TEXT)), ToolUse(cid, "bash", {"command": draw(TEXT), "n": 1})],
                stop_reason="tool_use", model=None, usage=None))
            recs.append(ToolResults(results=[ToolResult(tool_use_id=cid, content=draw(TEXT))]))
        if draw(st.booleans()):
            recs.append(Steering(text=draw(TEXT)))
    if tid >= 3 and draw(st.booleans()):
        note = draw(st.text(alphabet="ab c.x\"\\é(|", max_size=20))
        recs.append(Evicted(residue=Residue(span=(1, tid - 1), note=note, by="model")))
    return recs


HTML_SAFE = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026", ord("="): "\\u003D"}


def write_log(path, recs, escape: list[int]):
    lines = [encode(SessionStarted(agent="a1"))]
    for rec, esc in zip(recs, escape):
        if esc == 1:  # another writer: every non-ASCII character \\u-escaped
            lines.append(json.dumps(msgspec.json.decode(encode(rec)), ensure_ascii=True,
                                    separators=(",", ":")).encode())
        elif esc == 2:  # a PHP-like writer: every "/" escaped
            lines.append(encode(rec).replace(b"/", b"\\/"))
        elif esc == 3:  # an HTML-safe writer (Go, Gson): <>&= as \\u escapes
            lines.append(encode(rec).decode().translate(HTML_SAFE).encode())
        else:
            lines.append(encode(rec))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(x + b"\n" for x in lines))


def _grep(door, pattern, shortcut):
    try:
        return door.grep(pattern, shortcut=shortcut)
    except Refusal as e:
        return ("refused", str(e))


def _reference(recs, pattern):
    """Count matching lines the slow way, straight from the record structs."""
    rx = regex.compile(pattern)
    n = 0
    for r in recs:
        texts = []
        if isinstance(r, UserPrompt) or isinstance(r, Steering):
            texts = [r.text]
        elif isinstance(r, AssistantMessage):
            texts = [r.blocks[0].text, json.dumps(r.blocks[1].input, separators=(",", ":"),
                                                  ensure_ascii=False)]
        elif isinstance(r, ToolResults):
            texts = [r.results[0].content]
        elif isinstance(r, Evicted):
            texts = [r.residue.note]
        n += sum(1 for t in texts for line in t.split("\n") if rx.search(line))
    return n


@SETTINGS
@given(recs=logs(), data=st.data())
def test_shortcut_gives_the_same_answer(tmp_path_factory, recs, data):
    root = create_run_root(tmp_path_factory.mktemp("sc") / "run", "tests")
    escape = data.draw(st.lists(st.integers(0, 3), min_size=len(recs), max_size=len(recs)))
    write_log(root / "agents" / "a1" / "record.jsonl", recs, escape)
    door, _ = door_open(root / "agents" / "a1")
    for _ in range(8):
        pattern = data.draw(patterns())
        fast, slow = _grep(door, pattern, True), _grep(door, pattern, False)
        assert fast == slow, pattern
        if not isinstance(fast, tuple):
            assert fast["total"] == _reference(recs, pattern), pattern


def test_required_literal():
    assert required_literal("attrs==23.1") == ("attrs==23", False)
    assert required_literal(r"attrs==23\.1") == ("attrs==23.1", True)
    assert required_literal("spaces only") == ("spaces only", True)
    assert required_literal(r"s\.split\(\)") == ("s.split()", True)
    assert required_literal("foo|bar") == ("", False)
    assert required_literal("(?i)foo") == ("", False)
    assert required_literal("abc*def") == ("def", False)
    assert required_literal("abcd+e") == ("abcd", False)
    assert required_literal(r"ab\dcde") == ("ab", False)
    assert required_literal("x{2}yyy") == ("yyy", False)
    assert required_literal("[ab]c") == ("", False)
    assert required_literals("Error|FAILED") == ("Error", "FAILED")
    assert required_literals("attrs==23.1") == ("attrs==23",)
    assert required_literals("a.*b|cde") == ("a", "cde")
    assert required_literals("foo|") == ()  # an empty branch matches every line
    assert required_literals(r"foo|\d") == ()  # a branch without a literal
    assert required_literals("x(a|b)y|z") == ()  # the first branch has none (conservative)
    assert required_literals("(?i)foo|bar") == ()  # flags apply to every branch
    assert required_literals("[|]ab|cd") == ()  # '|' in a class splits nothing
    assert required_literals("[[:alpha:]|]ab|cd") == ()
    assert required_literals(r"ab\|cd") == ()
    m = _Matcher("Error|FAILED", 5, True)
    assert (m.raw, m.lits, m.raw_forms) == (None, ("Error", "FAILED"), [b"Error", b"FAILED"])
    assert m.lines("no match\nan Error\nFAILED here") == ["an Error", "FAILED here"]
    assert m.lines("nothing of either") == ()
    assert _Matcher('say "hi"|x', 5, True).raw_forms is None  # a branch JSON escapes
    assert _Matcher("Error|FAILED", 5, False).raw_forms is None  # no shortcut asked
    assert _Matcher("needle", 5, True).raw == b"needle"
    assert _Matcher('say "hi"', 5, True).raw is None  # JSON escapes the quote: decode instead
    assert _Matcher("café", 5, True).raw is None  # a writer may \\u-escape it: decode instead


@pytest.mark.parametrize("esc", [0, 1, 2, 3])
def test_escape_prone_characters_are_found_in_every_writers_form(tmp_path, esc):
    """``/`` written as ``\\/`` (PHP) and ``<>&=`` as ``\\u`` escapes (Go, Gson) still match."""
    root = create_run_root(tmp_path / "run", "tests")
    recs = [UserPrompt(turn=1, text="see src/a.py\nif x<y && z=1 then"),
            Steering(text="path a/b/c"),
            UserPrompt(turn=2, text="q='it' & <b>x</b>")]
    write_log(root / "agents" / "a1" / "record.jsonl", recs, [esc] * len(recs))
    door, _ = door_open(root / "agents" / "a1")
    for pattern in ["/", "src/a", "a/b/c", "<", "x<y", "&&", "z=1", "<b>", "'it'", "& <", "</b>"]:
        fast, slow = _grep(door, pattern, True), _grep(door, pattern, False)
        assert fast == slow, (pattern, esc)
        assert fast["total"] == _reference(recs, pattern) >= 1, (pattern, esc)
