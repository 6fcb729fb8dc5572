"""
An incremental server-sent-events parser over byte chunks (pure).

Follows the WHATWG event-stream rules that matter to LLM APIs: lines end in ``\\n``, ``\\r\\n``
or ``\\r``; ``data`` lines of one event join with ``\\n``; a line starting with ``:`` is a comment;
a blank line dispatches the event. Chunks may split a line, or a UTF-8 character, anywhere.
"""

from __future__ import annotations

from msgspec import Struct

__all__ = ["ServerSentEvent", "SSEDecoder", "events_of"]


class ServerSentEvent(Struct, frozen=True):
    event: str | None
    data: str
    id: str | None = None


class SSEDecoder:
    """Feed byte chunks, get complete events. ``flush()`` returns an event left unterminated
    at end of stream (servers often omit the last blank line)."""

    def __init__(self) -> None:
        self._buf = b""
        self._event: str | None = None
        self._data: list[str] = []
        self._id: str | None = None

    MAX_LINE = 64 << 20  # a "line" longer than this is no event stream

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        self._buf += chunk
        out: list[ServerSentEvent] = []
        while True:
            cut = _line_end(self._buf)
            if cut is None:
                if len(self._buf) > self.MAX_LINE:
                    raise ValueError(f"an event-stream line longer than {self.MAX_LINE} bytes")
                break
            end, nxt = cut
            line = self._buf[:end].decode("utf-8", errors="replace")
            self._buf = self._buf[nxt:]
            ev = self._line(line)
            if ev is not None:
                out.append(ev)
        return out

    def flush(self) -> list[ServerSentEvent]:
        out: list[ServerSentEvent] = []
        if self._buf:
            ev = self._line(self._buf.decode("utf-8", errors="replace"))
            self._buf = b""
            if ev is not None:
                out.append(ev)
        ev = self._line("")
        if ev is not None:
            out.append(ev)
        return out

    def _line(self, line: str) -> ServerSentEvent | None:
        if line == "":
            if not self._data and self._event is None:
                return None
            ev = ServerSentEvent(self._event, "\n".join(self._data), self._id)
            self._event, self._data = None, []
            return ev
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            self._id = value
        return None


def _line_end(buf: bytes) -> tuple[int, int] | None:
    """(end of the line, start of the next) for the first complete line, else None.

    A trailing ``\\r`` is not yet a line end: the next chunk may start with ``\\n``."""
    n = buf.find(b"\n")
    r = buf.find(b"\r")
    if r != -1 and (n == -1 or r < n):
        if r + 1 < len(buf):
            return (r, r + 2) if buf[r + 1:r + 2] == b"\n" else (r, r + 1)
        return None
    if n != -1:
        return (n, n + 1)
    return None


def events_of(raw: bytes) -> list[ServerSentEvent]:
    """Every event of a whole recorded SSE body (a test fixture, a saved stream), the last one
    included even without its closing blank line."""
    decoder = SSEDecoder()
    return [*decoder.feed(raw), *decoder.flush()]
