"""POST to a plain-HTTP receiver over one kept HTTP/1.1 connection: what live tracing's sender
needs of HTTP, and nothing else.

Why not httpx or ``http.client`` here: the sender's thread shares the interpreter with the
agents, and every blocking call it makes gives the interpreter lock away and waits to take it
back — beside a loop that writes a log line per record, each such return costs a round of lock
handoffs between the two threads. httpx makes a dozen such calls a request (~0.4 ms of CPU a
batch alone, ~1-2 ms beside a busy loop); ``http.client`` with a timeout polls before each read
and write (~0.1-0.3 ms). Here a request is one ``sendmsg`` (headers and body together, the
socket's buffer large enough for a batch) and, most often, one ``recv`` for the answer, the
timeout kept by the socket itself (``SO_SNDTIMEO``/``SO_RCVTIMEO``) rather than a poll
(docs/performance.md, "Traces").

HTTP/1.1 as RFC 9112 asks of a client that sends a body with ``Content-Length``: the answer's
body is read by its ``Content-Length``, as chunks, or to the end of a closed connection; 1xx
answers are skipped; ``Connection: close`` (or an HTTP/1.0 answer without keep-alive) closes.
A kept connection that the receiver closed while idle is found at the next request, which is
sent again, once, on a new connection.
"""

from __future__ import annotations

import socket
import struct
import sys
from collections.abc import Mapping

#: the socket's send buffer: a batch of 512 spans is ~170 KB, written in one call
SEND_BUFFER = 1 << 20
#: the most an answer's status line and headers may take
MAX_HEAD = 64 * 1024


class ProtocolError(OSError):
    """The receiver answered what is not HTTP/1.x."""


class _Stale(Exception):
    """A kept connection found closed before any of the answer came."""


class Poster:
    def __init__(self, host: str, port: int, path: str, timeout_s: float):
        self.host, self.port, self.path = host, port, path or "/"
        self.timeout_s = timeout_s
        self.sock: socket.socket | None = None
        self.used = False  # a request went over the connection now open
        self._host_header = host if port == 80 else f"{host}:{port}"
        if ":" in host and not host.startswith("["):  # an IPv6 address
            self._host_header = f"[{host}]" if port == 80 else f"[{host}]:{port}"

    # ------------------------------------------------------------------ the connection

    def _connect(self) -> socket.socket:
        s = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        except OSError:  # the system's own settings then
            pass
        if sys.platform.startswith("linux") or sys.platform == "darwin":
            sec = int(self.timeout_s)
            tv = struct.pack("ll", sec, int((self.timeout_s - sec) * 1e6))
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
                s.settimeout(None)  # the kernel keeps the timeout: no poll before each call
            except OSError:
                s.settimeout(self.timeout_s)
        self.sock = s
        self.used = False
        return s

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None
                self.used = False

    # ------------------------------------------------------------------ a request

    def post(self, body: bytes, headers: Mapping[str, str]) -> int:
        """Send ``body``; answer the status of the receiver's answer. Raises OSError
        (``TimeoutError`` when the receiver does not answer in time, ``ProtocolError`` for an
        answer that is not HTTP)."""
        head = [f"POST {self.path} HTTP/1.1\r\nHost: {self._host_header}\r\n"
                f"Content-Length: {len(body)}\r\n"]
        head += [f"{k}: {v}\r\n" for k, v in headers.items()
                 if k.lower() not in ("host", "content-length")]
        head.append("\r\n")
        request = "".join(head).encode("latin-1")
        for again in (False, True):
            reused = self.sock is not None and self.used
            sock = self.sock if self.sock is not None else self._connect()
            try:
                try:
                    self._send(sock, request, body)
                except (BrokenPipeError, ConnectionResetError):
                    if not reused:
                        raise
                    raise _Stale() from None
                status, keep = self._answer(sock, fresh=not reused)
            except _Stale:
                self.close()
                if again:
                    raise ConnectionResetError("the receiver closed the connection") from None
                continue
            except BaseException:
                self.close()
                raise
            if keep:
                self.used = True
            else:
                self.close()
            return status
        raise AssertionError("unreachable")

    @staticmethod
    def _send(sock: socket.socket, head: bytes, body: bytes) -> None:
        views = [memoryview(head), memoryview(body)]
        try:
            while views:
                sent = sock.sendmsg(views)
                while views and sent >= len(views[0]):
                    sent -= len(views[0])
                    views.pop(0)
                if views and sent:
                    views[0] = views[0][sent:]
        except BlockingIOError:
            raise TimeoutError("the receiver did not take the request in time") from None

    def _recv(self, sock: socket.socket) -> bytes:
        try:
            return sock.recv(65536)
        except BlockingIOError:
            raise TimeoutError("the receiver did not answer in time") from None

    def _answer(self, sock: socket.socket, *, fresh: bool) -> tuple[int, bool]:
        """Read one answer (past any 1xx): its status and whether the connection stays."""
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                try:
                    more = self._recv(sock)
                except (ConnectionResetError, BrokenPipeError):
                    if buf or fresh:
                        raise
                    raise _Stale() from None
                if not more:
                    if buf or fresh:
                        raise ProtocolError("the receiver closed the connection mid-answer")
                    raise _Stale()
                buf += more
                if len(buf) > MAX_HEAD and b"\r\n\r\n" not in buf:
                    raise ProtocolError("the receiver's answer has no end of headers")
            head, _, buf = buf.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
                raise ProtocolError(f"the receiver answered {lines[0][:80]!r}")
            status = int(parts[1])
            fields: dict[str, str] = {}
            for line in lines[1:]:
                k, sep, v = line.partition(":")
                if sep:
                    fields[k.strip().lower()] = v.strip()
            if 100 <= status < 200:  # an interim answer: the real one follows
                continue
            keep = not ("close" in fields.get("connection", "").lower()
                        or parts[0] == "HTTP/1.0"
                        and "keep-alive" not in fields.get("connection", "").lower())
            if status in (204, 304):
                return status, keep
            if "chunked" in fields.get("transfer-encoding", "").lower():
                self._chunks(sock, buf)
                return status, keep
            length = fields.get("content-length")
            if length is not None:
                if not length.isdigit():
                    raise ProtocolError(f"a Content-Length of {length[:40]!r}")
                need = int(length) - len(buf)
                while need > 0:
                    more = self._recv(sock)
                    if not more:
                        raise ProtocolError("the receiver closed the connection mid-answer")
                    need -= len(more)
                return status, keep
            while self._recv(sock):  # no length: the body runs to the connection's end
                pass
            return status, False

    def _chunks(self, sock: socket.socket, buf: bytes) -> None:
        """Read a chunked body to its end (its trailer included)."""
        while True:
            while b"\r\n" not in buf:
                more = self._recv(sock)
                if not more:
                    raise ProtocolError("the receiver closed the connection mid-answer")
                buf += more
            line, _, buf = buf.partition(b"\r\n")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ProtocolError(f"a chunk size of {line[:40]!r}") from None
            if size == 0:
                while True:  # the trailer: lines up to an empty one
                    while b"\r\n" not in buf:
                        more = self._recv(sock)
                        if not more:
                            return
                        buf += more
                    line, _, buf = buf.partition(b"\r\n")
                    if not line:
                        return
            while len(buf) < size + 2:
                more = self._recv(sock)
                if not more:
                    raise ProtocolError("the receiver closed the connection mid-answer")
                buf += more
            buf = buf[size + 2:]
