"""POST to a plain-HTTP receiver over one kept HTTP/1.1 connection without ever blocking: what
live tracing's sender needs of HTTP, and nothing else.

Why not httpx or ``http.client`` in a thread of its own: that thread shares the interpreter with
the agents, and every blocking call it makes gives the interpreter lock away and must take it
back from a loop that gives it away and takes it back at every log line it writes — measured in
a running swarm, each batch cost the sender ~1-2 ms of CPU, mostly lost rounds of that handoff
(docs/performance.md, "Traces"). Here nothing blocks: the sender (``ship.Shipper``) calls
``step`` whenever it is handed spans, on the caller's own path, and from a thread that wakes a
few times a second; each call writes what the socket takes and reads what has come.

HTTP/1.1 as RFC 9112 asks of a client that sends a body with ``Content-Length``: the answer
(``answer``, pure) is read by its ``Content-Length``, as chunks, or to the end of a closed
connection; 1xx answers are skipped; ``Connection: close`` (or an HTTP/1.0 answer without
keep-alive) closes. A kept connection that the receiver closed while idle is found when the next
request meets its end before any answer, and that request is sent again, once, on a new
connection.
"""

from __future__ import annotations

import errno
import select
import socket
from collections.abc import Mapping

#: the socket's send buffer: a batch of 512 spans (~170 KB) is taken in one call
SEND_BUFFER = 1 << 20
#: the most an answer's status line and headers may take
MAX_HEAD = 64 * 1024


class ProtocolError(OSError):
    """The receiver answered what is not HTTP/1.x."""


def answer(buf: bytes, *, closed: bool = False) -> tuple[int, bool, int] | None:
    """The first final answer in ``buf``, if it is all there: ``(status, keep, length)`` —
    ``keep``: the connection stays open; ``length``: the bytes it took, 1xx answers before it
    included. None while more is needed; ``closed``: the connection has ended (a body without a
    length runs to it). Raises ``ProtocolError`` for what is not an HTTP/1.x answer."""
    at = 0
    while True:
        end = buf.find(b"\r\n\r\n", at)
        if end < 0:
            if len(buf) - at > MAX_HEAD:
                raise ProtocolError("the receiver's answer has no end of headers")
            if closed:
                raise ProtocolError("the receiver closed the connection mid-answer")
            return None
        lines = buf[at:end].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"the receiver answered {lines[0][:80]!r}")
        status = int(parts[1])
        fields: dict[str, str] = {}
        for line in lines[1:]:
            k, sep, v = line.partition(":")
            if sep:
                fields[k.strip().lower()] = v.strip()
        body = end + 4
        if 100 <= status < 200:  # an interim answer: the final one follows
            at = body
            continue
        connection = fields.get("connection", "").lower()
        keep = "close" not in connection and (parts[0] != "HTTP/1.0" or "keep-alive" in connection)
        if status in (204, 304):
            return status, keep, body
        if "chunked" in fields.get("transfer-encoding", "").lower():
            done = _chunked(buf, body)
            if done is None:
                if closed:
                    raise ProtocolError("the receiver closed the connection mid-answer")
                return None
            return status, keep, done
        length = fields.get("content-length")
        if length is not None:
            if not length.isdigit():
                raise ProtocolError(f"a Content-Length of {length[:40]!r}")
            if len(buf) - body < int(length):
                if closed:
                    raise ProtocolError("the receiver closed the connection mid-answer")
                return None
            return status, keep, body + int(length)
        if not closed:  # no length: the body runs to the connection's end
            return None
        return status, False, len(buf)


def _chunked(buf: bytes, at: int) -> int | None:
    """Where a chunked body that starts at ``at`` ends (its trailer included); None if it is not
    all there."""
    while True:
        eol = buf.find(b"\r\n", at)
        if eol < 0:
            return None
        try:
            size = int(buf[at:eol].split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ProtocolError(f"a chunk size of {buf[at:eol][:40]!r}") from None
        at = eol + 2
        if size == 0:
            while True:  # the trailer: lines up to an empty one
                eol = buf.find(b"\r\n", at)
                if eol < 0:
                    return None
                if eol == at:
                    return eol + 2
                at = eol + 2
        if len(buf) < at + size + 2:
            return None
        at += size + 2


class Poster:
    """One request at a time over one kept connection, without blocking: ``begin`` a request,
    then ``step`` until it answers the status."""

    def __init__(self, host: str, port: int, path: str):
        self.host, self.port, self.path = host, port, path or "/"
        self._addr: tuple | None = None  # the receiver's address, once resolved
        self.sock: socket.socket | None = None
        self._connecting = False
        self._used = False  # an answer came over the connection now open
        self._request: bytes = b""
        self._out: list[memoryview] = []
        self._in = b""
        self._retried = False
        self._host_header = host if port == 80 else f"{host}:{port}"
        if ":" in host and not host.startswith("["):  # an IPv6 address
            self._host_header = f"[{host}]" if port == 80 else f"[{host}]:{port}"

    def resolve(self) -> None:
        """Find the receiver's address (the system's resolver may block: the sender calls this
        from its own thread, never from the agents' path)."""
        info = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        self._addr = info[0][0], info[0][1], info[0][2], info[0][4]

    @property
    def ready(self) -> bool:
        """The address is known: requests can begin."""
        return self._addr is not None

    @property
    def sending(self) -> bool:
        """Connecting, or the request not all written yet."""
        return self._connecting or bool(self._out)

    @property
    def busy(self) -> bool:
        """A request is under way."""
        return bool(self._request)

    def begin(self, body: bytes, headers: Mapping[str, str]) -> None:
        head = [f"POST {self.path} HTTP/1.1\r\nHost: {self._host_header}\r\n"
                f"Content-Length: {len(body)}\r\n"]
        head += [f"{k}: {v}\r\n" for k, v in headers.items()
                 if k.lower() not in ("host", "content-length")]
        head.append("\r\n")
        self._request = "".join(head).encode("latin-1") + body
        self._retried = False
        self._start()

    def _start(self) -> None:
        if self.sock is None:
            self._connect()
        self._out = [memoryview(self._request)]
        self._in = b""

    def _connect(self) -> None:
        assert self._addr is not None, "connect before resolve"
        family, kind, proto, addr = self._addr
        s = socket.socket(family, kind, proto)
        s.setblocking(False)
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        except OSError:  # the system's own settings then
            pass
        err = s.connect_ex(addr)
        if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
            s.close()
            raise OSError(err, f"could not connect: {errno.errorcode.get(err, err)}")
        self.sock, self._connecting, self._used = s, err != 0, False

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock, self._connecting, self._used = None, False, False

    def abandon(self) -> None:
        """Give the request under way up (its time is out): the connection goes with it."""
        self._request, self._out, self._in = b"", [], b""
        self.close()

    def step(self) -> int | None:
        """Do what can be done now; the status once the answer is all there, else None. Raises
        OSError (``ProtocolError`` for an answer that is not HTTP); the connection is closed
        then, and the request given up."""
        try:
            return self._step()
        except BaseException:
            self.abandon()
            raise

    def _step(self) -> int | None:
        s = self.sock
        assert s is not None and self._request, "step without a request"
        if self._connecting:
            if not select.select([], [s], [], 0)[1]:
                return None
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                raise OSError(err, f"could not connect: {errno.errorcode.get(err, err)}")
            self._connecting = False
        while self._out:
            try:
                sent = s.sendmsg(self._out)
            except (BlockingIOError, InterruptedError):
                return None
            except (BrokenPipeError, ConnectionResetError):
                return self._stale()
            while self._out and sent >= len(self._out[0]):
                sent -= len(self._out[0])
                self._out.pop(0)
            if self._out and sent:
                self._out[0] = self._out[0][sent:]
        while True:
            try:
                more = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                got = answer(self._in)
                break
            except ConnectionResetError:
                return self._stale()
            if not more:
                if not self._in:
                    return self._stale()
                got = answer(self._in, closed=True)
                break
            self._in += more
        if got is None:
            return None
        status, keep, _ = got
        self._request, self._in = b"", b""
        if keep:
            self._used = True
        else:
            self.close()
        return status

    def _stale(self) -> int | None:
        """The connection ended before any answer: a kept one the receiver closed while idle
        is opened again and the request sent again, once; else the receiver's fault."""
        if not self._used or self._retried or self._in:
            raise ConnectionResetError("the receiver closed the connection")
        self._retried = True
        self.close()
        self._start()
        return None
