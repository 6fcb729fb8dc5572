"""The C span encoder (``native/otlp.c``) against the Python one, byte for byte, on generated
spans; the fallback for what the C encoder does not take; the framing; and the ids minted with
the run and agent hashed once against the module's functions."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemon.orchestrator.tracing import ids, protobuf
from mnemon.orchestrator.tracing.spans import Event, Link, Span
from tests.tracing.receiver import decode_protobuf

try:
    from mnemon.orchestrator.tracing import _otlp as C
except ImportError:  # not built here: the fallback's own tests still run
    C = None

native = pytest.mark.skipif(C is None, reason="the _otlp extension is not built")

hexid = st.sampled_from([16, 32]).flatmap(
    lambda n: st.text("0123456789abcdefABCDEF", min_size=n, max_size=n))
text = st.text(max_size=40)
scalar = st.one_of(
    st.booleans(), st.integers(-(2 ** 70), 2 ** 70), st.floats(allow_nan=True),
    text, st.none(), st.just(1.5), st.integers(0, 20000))
value = st.recursive(scalar, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.tuples(inner, inner)), max_leaves=8)
attrs = st.dictionaries(st.text(max_size=20), value, max_size=8)
u64 = st.integers(0, 2 ** 64 - 1)


@st.composite
def spans(draw) -> Span:
    s = Span(draw(hexid), draw(hexid), draw(st.one_of(st.none(), st.just(""), hexid)),
             draw(text), draw(st.integers(0, 5)), draw(u64), draw(attrs))
    s.end_ns = draw(u64)
    for _ in range(draw(st.integers(0, 3))):
        s.events.append(Event(draw(text), draw(u64), draw(attrs)))
    for _ in range(draw(st.integers(0, 2))):
        s.links.append(Link(draw(hexid), draw(hexid), draw(attrs)))
    s.status = draw(st.integers(0, 2))
    s.status_message = draw(text)
    return s


@native
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spans())
def test_the_c_encoder_writes_the_python_encoders_bytes(s):
    try:
        want = protobuf.py_span_bytes(s)
    except Exception:
        want = None
    try:
        got = C.span_bytes(s)
    except Exception:
        got = None  # the wrapper falls back to Python: checked below
    if got is not None:
        assert got == want, "where the C encoder answers, it answers the Python bytes"
    if want is not None:
        assert protobuf.span_bytes(s) == want, "the wrapper answers what Python answers"
    else:
        with pytest.raises(Exception):
            protobuf.span_bytes(s)


@native
def test_what_the_c_encoder_leaves_to_python():
    base = Span("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", None, "chat", 3, 1,
                {})
    odd = [
        ("an int wider than 64 bits", lambda s: s.attributes.update(big=2 ** 64 + 5)),
        ("an int below -2^63", lambda s: s.attributes.update(low=-(2 ** 63) - 1)),
        ("an id with spaces", lambda s: setattr(s, "span_id", "b7ad6b71 69203331")),
        ("a key that is not a str", lambda s: s.attributes.update({1: "x"})),
    ]
    for why, change in odd:
        s = Span(base.trace_id, base.span_id, None, "chat", 3, 1, {})
        change(s)
        with pytest.raises(Exception):
            C.span_bytes(s)
        try:
            want = protobuf.py_span_bytes(s)
        except Exception as e:
            with pytest.raises(type(e)):
                protobuf.span_bytes(s)
        else:
            assert protobuf.span_bytes(s) == want, why
    # 2^63 .. 2^64 - 1 are written as they are, as Python writes them
    s = Span(base.trace_id, base.span_id, None, "chat", 3, 1, {"u": 2 ** 64 - 1, "n": -1})
    assert C.span_bytes(s) == protobuf.py_span_bytes(s)


@native
def test_a_span_larger_than_the_stack_buffer():
    s = Span("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", None, "x" * 5000, 1, 1,
             {f"k{i}": "é" * 300 for i in range(40)})
    s.events.append(Event("e", 2, {"big": ["y" * 20000, 1, 2.5]}))
    got = C.span_bytes(s)
    assert got == protobuf.py_span_bytes(s) and len(got) > 40_000
    decoded = decode_protobuf(protobuf.request_bytes([s], {}))
    span = decoded["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert span["name"] == "x" * 5000 and len(span["attributes"]) == 40


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 15), st.lists(st.binary(max_size=300), max_size=6),
       st.booleans())
def test_framing_many_parts(field, parts, big):
    if big:
        parts = parts + [b"z" * 20000]
    assert protobuf.framed(field, parts) == protobuf.py_framed(field, parts)


@native
def test_the_c_framing_refuses_what_is_not_bytes():
    with pytest.raises(TypeError):
        C.framed(2, [b"a", "b"])
    with pytest.raises(ValueError):
        C.framed(0, [])


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60), st.text(max_size=20), st.integers(0, 10 ** 6),
       st.integers(0, 9), st.one_of(st.none(), st.text(max_size=30)), st.text(max_size=30))
def test_an_agents_ids_are_the_module_functions_ids(run, agent, turn, attempt, at, call):
    mint = ids.AgentIds(run, agent)
    assert mint.chat(turn, attempt, at) == ids.chat_span_id(run, agent, turn, attempt, at)
    assert mint.chat(None, attempt, at) == ids.chat_span_id(run, agent, None, attempt, at)
    assert mint.tool(turn, call) == ids.tool_span_id(run, agent, turn, call)
    assert len(mint.tool(turn, call)) == 16 and int(mint.tool(turn, call), 16) != 0


def test_no_native_env_forces_the_python_encoder():
    code = ("from mnemon.orchestrator.tracing import protobuf as P; "
            "print(P.NATIVE, P._native is None)")
    env = dict(os.environ, MNEMON_NO_NATIVE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "True"]
    if C is not None and os.environ.get("MNEMON_NO_NATIVE") != "1":
        assert protobuf.NATIVE


def test_floats_keep_their_bits():
    s = Span("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", None, "f", 1, 1,
             {"nan": math.nan, "inf": -math.inf, "z": -0.0})
    assert protobuf.span_bytes(s) == protobuf.py_span_bytes(s)
