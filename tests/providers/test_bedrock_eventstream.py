"""The AWS event-stream decoder against botocore's own test vectors (fixtures/bedrock/
eventstream_vectors.json, provenance in fixtures/README.md), split anywhere, and Bedrock's
frames turned into Anthropic events."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path

import pytest

from mnemon.providers.bedrock import BedrockFrames, event_of
from mnemon.providers.errors import MalformedResponse, RateLimited, StreamInterrupted
from mnemon.providers.eventstream import (EventStreamDecoder, Frame, FrameError, encode_frame,
                                          MAX_FRAME)

VECTORS = json.loads((Path(__file__).parent / "fixtures" / "bedrock"
                      / "eventstream_vectors.json").read_text())


def _value(v):
    return bytes.fromhex(v["bytes_hex"]) if isinstance(v, dict) else v


@pytest.mark.parametrize("name", sorted(VECTORS["positive"]))
def test_botocore_positive_vectors_decode(name):
    case = VECTORS["positive"][name]
    raw = bytes.fromhex(case["frame_hex"])
    want = {k: _value(v) for k, v in case["headers"].items()}
    (frame,) = EventStreamDecoder().feed(raw)
    assert frame.headers == want
    assert frame.payload == bytes.fromhex(case["payload_hex"])


@pytest.mark.parametrize("name", sorted(VECTORS["negative"]))
def test_botocore_negative_vectors_refused(name):
    raw = bytes.fromhex(VECTORS["negative"][name]["frame_hex"])
    with pytest.raises(FrameError):
        d = EventStreamDecoder()
        d.feed(raw)
        d.flush()


def test_every_positive_vector_in_one_stream_split_at_every_byte():
    stream = b"".join(bytes.fromhex(c["frame_hex"]) for c in VECTORS["positive"].values())
    whole = EventStreamDecoder().feed(stream)
    assert len(whole) == len(VECTORS["positive"])
    for cut in range(1, len(stream)):
        d = EventStreamDecoder()
        got = d.feed(stream[:cut]) + d.feed(stream[cut:]) + d.flush()
        assert got == whole


def test_a_frame_past_the_limit_is_refused_from_its_prelude():
    prelude = struct.pack(">II", MAX_FRAME + 1, 0)
    with pytest.raises(FrameError, match="impossible size"):
        EventStreamDecoder().feed(prelude + struct.pack(">I", zlib.crc32(prelude)))


def test_a_stream_cut_inside_a_frame_is_an_error_at_flush():
    raw = encode_frame({":message-type": "event"}, b"{}")
    d = EventStreamDecoder()
    assert d.feed(raw[:-3]) == []
    with pytest.raises(FrameError, match="ended inside a frame"):
        d.flush()


def test_encode_frame_is_read_back_by_botocore_too():
    eventstream = pytest.importorskip("botocore.eventstream")
    raw = encode_frame({":event-type": "chunk", ":message-type": "event"}, b'{"bytes":"e30="}')
    buf = eventstream.EventStreamBuffer()
    buf.add_data(raw)
    (msg,) = list(buf)
    assert msg.headers == {":event-type": "chunk", ":message-type": "event"}
    assert EventStreamDecoder().feed(raw)[0].payload == msg.payload


def _chunk(event: dict) -> Frame:
    b64 = base64.b64encode(json.dumps(event).encode()).decode()
    return Frame({":event-type": "chunk", ":content-type": "application/json",
                  ":message-type": "event"}, json.dumps({"bytes": b64}).encode())


def test_a_chunk_is_the_anthropic_event_it_carries():
    ev = event_of(_chunk({"type": "message_stop"}))
    assert ev is not None and ev.event == "message_stop"
    assert json.loads(ev.data) == {"type": "message_stop"}


def test_a_chunk_that_is_not_base64_json_is_malformed():
    bad = Frame({":event-type": "chunk", ":message-type": "event"}, b'{"bytes":"%%%"}')
    with pytest.raises(MalformedResponse):
        event_of(bad)


def test_exception_frames_raise_what_they_name():
    throttled = Frame({":message-type": "exception", ":exception-type": "throttlingException"},
                      b'{"message":"Too many requests, please wait before trying again."}')
    with pytest.raises(RateLimited, match="throttlingException: Too many requests"):
        event_of(throttled)
    broke = Frame({":message-type": "exception", ":exception-type": "modelStreamErrorException"},
                  b'{"message":"the model stream broke","originalStatusCode":500}')
    with pytest.raises(StreamInterrupted, match="modelStreamErrorException"):
        event_of(broke)


def test_bedrock_frames_feed_across_chunks():
    raw = b"".join(encode_frame(f.headers, f.payload) for f in
                   (_chunk({"type": "ping"}), _chunk({"type": "message_stop"})))
    frames = BedrockFrames()
    got = frames.feed(raw[:7]) + frames.feed(raw[7:]) + frames.flush()
    assert [e.event for e in got] == ["ping", "message_stop"]
