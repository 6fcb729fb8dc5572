"""A command's output as the model reads it: all of it under the cap; head and tail with the
omitted middle said above it; control characters escaped."""

from __future__ import annotations

from hypothesis import given, strategies as st

from mnemon.orchestrator.sandbox.capture import Capture, printable


def fed(cap: int, chunks: list[bytes]) -> Capture:
    c = Capture(cap)
    for chunk in chunks:
        c.feed(chunk)
    return c


def test_under_the_cap_everything_is_kept():
    c = fed(16, [b"hello ", b"world\n"])
    assert (c.text(), c.total, c.truncated) == ("hello world\n", 12, False)
    assert fed(16, [b"x" * 16]).text() == "x" * 16


def test_over_the_cap_head_and_tail_and_the_total():
    data = b"".join(b"%05d\n" % i for i in range(10_000))  # 60 000 bytes
    c = fed(1000, [data[i:i + 4096] for i in range(0, len(data), 4096)])
    text = c.text()
    assert c.truncated and c.total == 60_000
    assert text.startswith("00000\n00001\n") and text.endswith("09998\n09999\n")
    assert "\n[… 59000 bytes omitted of 60000 …]\n" in text
    assert len(text.encode()) < 1000 + 60


@given(st.lists(st.binary(max_size=300), max_size=30), st.integers(min_value=2, max_value=200))
def test_head_and_tail_are_the_streams_own(chunks, cap):
    """Whatever the chunking, the kept bytes are the stream's first ``cap//2`` and its last."""
    data = b"".join(chunks)
    c = fed(cap, chunks)
    assert c.total == len(data)
    if len(data) <= cap:
        assert c.text() == printable(data.decode("utf-8", "replace"))
    else:
        keep = cap - cap // 2
        assert bytes(c._head) == data[:cap // 2]
        assert bytes(c._tail[-keep:]) == data[-keep:]
        assert len(c._tail) <= 2 * keep + 300


def test_control_characters_are_escaped_and_bad_bytes_replaced():
    c = fed(1024, [b"\x1b[31mred\x1b[0m\r\nnext\ttab\x07\xff\n"])
    assert c.text() == "\\x1b[31mred\\x1b[0m\nnext\ttab\\x07\ufffd\n"
    assert printable("a\rb\x9bc\x7f") == "a\\x0db\\x9bc\\x7f"
