"""
The AWS event-stream framing (``application/vnd.amazon.eventstream``), decoded incrementally (pure).

Bedrock's ``InvokeModelWithResponseStream`` answers with binary frames, not SSE. Each frame is::

    total_length u32 | headers_length u32 | prelude_crc u32 | headers | payload | message_crc u32

big-endian, both CRCs CRC-32 (the prelude's over its first 8 bytes, the message's over every byte
before it). A header is ``name_len u8 | name | type u8 | value``; the ten value types are those
botocore's ``EventStreamHeaderParser`` reads. Frames are checked before anything in them is used:
a bad CRC or a length past the limits AWS documents (16 MiB a frame, 128 KiB of headers) is a
``FrameError``, since a stream that lost its framing cannot be resynchronised.

Written here rather than taken from botocore so that a streamed answer needs no extra install
(credentials from the environment need none either); botocore's own test vectors check it
(tests/providers/test_bedrock_eventstream.py).
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

from msgspec import Struct

__all__ = ["FrameError", "Frame", "EventStreamDecoder", "encode_frame", "MAX_FRAME",
           "MAX_HEADERS"]

MAX_FRAME = 16 * 1024 * 1024
MAX_HEADERS = 128 * 1024
_PRELUDE = 12
_MIN_FRAME = _PRELUDE + 4


class FrameError(ValueError):
    """A frame that is not one: a CRC mismatch, an impossible length, a header of no known type."""


class Frame(Struct, frozen=True):
    headers: dict[str, Any]
    payload: bytes


def _u32(buf: bytes | bytearray, at: int) -> int:
    return int(struct.unpack_from(">I", buf, at)[0])


def _headers(raw: bytes) -> dict[str, Any]:
    """The header block of one frame. A name seen twice is refused (botocore does too)."""
    out: dict[str, Any] = {}
    at, end = 0, len(raw)
    try:
        while at < end:
            n = raw[at]
            name = raw[at + 1:at + 1 + n].decode("utf-8")
            at += 1 + n
            kind = raw[at]
            at += 1
            value: Any
            if kind in (0, 1):
                value = kind == 0
            elif kind in (2, 3, 4, 5, 8):
                fmt = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}[kind]
                value = struct.unpack_from(fmt, raw, at)[0]
                at += struct.calcsize(fmt)
            elif kind in (6, 7):
                size = struct.unpack_from(">H", raw, at)[0]
                value = raw[at + 2:at + 2 + size]
                if len(value) != size:
                    raise FrameError("an event-stream header value runs past its frame")
                value = value.decode("utf-8") if kind == 7 else bytes(value)
                at += 2 + size
            elif kind == 9:
                value = bytes(raw[at:at + 16])
                if len(value) != 16:
                    raise FrameError("an event-stream header value runs past its frame")
                at += 16
            else:
                raise FrameError(f"an event-stream header of unknown type {kind}")
            if name in out:
                raise FrameError(f"an event-stream header given twice: {name[:64]!r}")
            out[name] = value
    except (IndexError, struct.error, UnicodeDecodeError) as e:
        raise FrameError(f"an event-stream header block that does not parse: {e}") from None
    return out


class EventStreamDecoder:
    """Feed byte chunks, get whole frames; chunks may split a frame anywhere. ``flush()`` at the
    end of the body raises when a partial frame is left (the stream was cut)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> list[Frame]:
        """The frames ``chunk`` completes. The buffer is cut once per call, not once per frame
        (a chunk holding many frames costs its length, not its length times their number)."""
        self._buf += chunk
        buf, at, out = self._buf, 0, []
        try:
            while len(buf) - at >= _PRELUDE:
                total, head = _u32(buf, at), _u32(buf, at + 4)
                if zlib.crc32(buf[at:at + 8]) != _u32(buf, at + 8):
                    raise FrameError("event-stream prelude CRC mismatch")
                if total > MAX_FRAME or head > MAX_HEADERS or total < _MIN_FRAME + head:
                    raise FrameError(f"an event-stream frame of impossible size ({total} "
                                     f"bytes, {head} of headers)")
                if len(buf) - at < total:
                    break
                raw = bytes(buf[at:at + total])
                at += total
                if zlib.crc32(raw[:-4]) != _u32(raw, total - 4):
                    raise FrameError("event-stream message CRC mismatch")
                out.append(Frame(_headers(raw[_PRELUDE:_PRELUDE + head]),
                                 raw[_PRELUDE + head:total - 4]))
        finally:
            del buf[:at]
        return out

    def flush(self) -> list[Frame]:
        if self._buf:
            raise FrameError(f"the event stream ended inside a frame ({len(self._buf)} bytes "
                             "left)")
        return []


def encode_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One frame with string headers (what Bedrock sends; the tests' loopback server replays
    frames made with it)."""
    block = b"".join(
        bytes([len(k.encode())]) + k.encode() + b"\x07" + struct.pack(">H", len(v.encode()))
        + v.encode() for k, v in headers.items())
    total = _MIN_FRAME + len(block) + len(payload)
    prelude = struct.pack(">II", total, len(block))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + block + payload
    return body + struct.pack(">I", zlib.crc32(body))
