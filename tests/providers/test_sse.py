"""The incremental SSE decoder."""

from __future__ import annotations

from mnemon.providers.sse import ServerSentEvent, SSEDecoder


def test_events_split_across_chunks_and_line_endings():
    raw = b"event: a\r\ndata: 1\r\n\r\n: comment\n\nevent: b\rdata: x\rdata: y\r\r"
    dec = SSEDecoder()
    out = []
    for i in range(len(raw)):
        out += dec.feed(raw[i:i + 1])
    out += dec.flush()
    assert out == [ServerSentEvent("a", "1"), ServerSentEvent("b", "x\ny")]


def test_unterminated_last_event_flushed():
    dec = SSEDecoder()
    assert dec.feed(b"data: [DONE]") == []
    assert dec.flush() == [ServerSentEvent(None, "[DONE]")]


def test_utf8_split_inside_a_character():
    raw = "data: 18°C\n\n".encode()
    dec = SSEDecoder()
    cut = raw.index("°".encode()) + 1
    assert dec.feed(raw[:cut]) == []
    assert dec.feed(raw[cut:]) == [ServerSentEvent(None, "18°C")]
