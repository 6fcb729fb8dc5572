"""The live sender's HTTP (``tracing.plainpost``): the answer parser on generated answers cut
anywhere, and the non-blocking poster against real servers on loopback — a kept connection, one
the server closed while idle, ``Connection: close``, chunks, interim answers, a server that
never answers, and a port nobody listens on — and the sender (``ship.Shipper``) never blocking
its caller while the receiver stalls."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemon.orchestrator.tracing.plainpost import Poster, ProtocolError, answer
from mnemon.orchestrator.tracing.ship import Shipper

# ----------------------------------------------------------------------------- the parser


@st.composite
def answers(draw) -> tuple[bytes, int, bool, str]:
    """An HTTP/1.1 answer as bytes, its status, whether it keeps the connection, its framing."""
    status = draw(st.sampled_from([200, 202, 204, 400, 404, 429, 500, 503]))
    body = draw(st.binary(max_size=300))
    framing = "none" if status == 204 else draw(st.sampled_from(["length", "chunked", "eof"]))
    close = framing == "eof" or draw(st.booleans())
    interim = draw(st.integers(0, 2))
    head = b"".join(b"HTTP/1.1 100 Continue\r\n\r\n" for _ in range(interim))
    head += f"HTTP/1.1 {status} Whatever\r\nServer: t\r\n".encode()
    if close:
        head += b"Connection: close\r\n"
    if framing == "length":
        head += f"Content-Length: {len(body)}\r\n\r\n".encode() + body
    elif framing == "chunked":
        head += b"Transfer-Encoding: chunked\r\n\r\n"
        cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=4)))
        pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])]
        for piece in pieces:
            if piece:
                head += f"{len(piece):x};ext=1\r\n".encode() + piece + b"\r\n"
        head += b"0\r\n" + (b"X-Trailer: 1\r\n" if draw(st.booleans()) else b"") + b"\r\n"
    elif framing == "eof":
        head += b"\r\n" + body
    else:
        head += b"\r\n"
    return head, status, not close, framing


@settings(max_examples=300, deadline=None)
@given(answers(), st.data())
def test_an_answer_is_read_whole_from_any_cut_and_not_before(a, data):
    raw, status, keep, framing = a
    closed_at_end = framing == "eof"
    got = answer(raw, closed=closed_at_end)
    assert got == (status, keep, len(raw))
    cut = data.draw(st.integers(0, len(raw) - 1))
    assert answer(raw[:cut]) is None, "an answer is not taken before all of it came"
    if framing != "eof":  # the next answer's bytes stay for it
        assert answer(raw + b"HTTP/1.1 200 OK\r\n") == (status, keep, len(raw))


def test_what_is_not_http_is_refused_by_name():
    for raw in [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 abc OK\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nContent-Length: -4\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"]:
        with pytest.raises(ProtocolError):
            answer(raw)
    with pytest.raises(ProtocolError, match="no end of headers"):
        answer(b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 20000)
    with pytest.raises(ProtocolError, match="mid-answer"):
        answer(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", closed=True)


# ----------------------------------------------------------------------------- the poster


class Server:
    """A loopback server that reads each request whole and answers it with ``reply(n)`` (the
    n-th request of the server, from 0) — bytes, or None to close the connection unanswered."""

    def __init__(self, reply: Callable[[int], bytes | None]):
        self.reply = reply
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    more = conn.recv(65536)
                    if not more:
                        return
                    buf += more
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = int(next(ln.split(b":")[1] for ln in head.split(b"\r\n")
                                  if ln.lower().startswith(b"content-length")))
                while len(buf) < length:
                    buf += conn.recv(65536)
                self.requests.append(buf[:length])
                buf = buf[length:]
                out = self.reply(len(self.requests) - 1)
                if out is None:
                    return
                conn.sendall(out)
                if b"Connection: close" in out:
                    return

    def close(self) -> None:
        self._stop = True
        self.sock.close()


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"


def _post(p: Poster, body: bytes, timeout: float = 5.0) -> int:
    p.begin(body, {"Content-Type": "application/x-protobuf"})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = p.step()
        if status is not None:
            return status
        if p.sock is not None:
            select.select([p.sock], [p.sock] if p.sending else [], [], 0.05)
    raise AssertionError("no answer")


def _poster(port: int) -> Poster:
    p = Poster("127.0.0.1", port, "/v1/traces")
    p.resolve()
    return p


def test_requests_share_one_kept_connection():
    srv = Server(lambda n: OK)
    try:
        p = _poster(srv.port)
        bodies = [b"x" * 200_000, b"y", b"z" * 5000]
        assert [_post(p, b) for b in bodies] == [200, 200, 200]
        assert srv.requests == bodies and srv.connections == 1
        p.close()
    finally:
        srv.close()


def test_a_connection_the_server_closed_while_idle_is_opened_again_once():
    # the server answers the first request, then drops the connection unanswered once
    srv = Server(lambda n: OK if n != 1 else None)
    try:
        p = _poster(srv.port)
        assert _post(p, b"a") == 200
        assert _post(p, b"b") == 200, "sent again on a new connection"
        assert srv.requests == [b"a", b"b", b"b"] and srv.connections == 2
    finally:
        srv.close()


def test_a_fresh_connection_closed_unanswered_is_the_receivers_fault():
    srv = Server(lambda n: None)
    try:
        p = _poster(srv.port)
        with pytest.raises(ConnectionResetError):
            _post(p, b"a")
        assert not p.busy and p.sock is None
    finally:
        srv.close()


def test_close_chunks_and_interim_answers():
    replies = [b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
               b"HTTP/1.1 503 Busy\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
               OK]
    srv = Server(lambda n: replies[n])
    try:
        p = _poster(srv.port)
        assert [_post(p, b"1"), _post(p, b"2"), _post(p, b"3")] == [202, 503, 200]
        assert srv.connections == 2, "Connection: close opens a new one"
    finally:
        srv.close()


def test_nobody_listening_is_an_error_not_a_wait():
    s = socket.create_server(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    p = _poster(port)
    t = time.monotonic()
    with pytest.raises(OSError):
        _post(p, b"a")
    assert time.monotonic() - t < 2


# ----------------------------------------------------------------------------- the sender


def test_the_sender_never_blocks_its_caller_on_a_stalled_receiver():
    """A receiver that takes the connection and never reads nor answers: handing spans over
    returns at once, the time-out drops the request with one warning line, and close counts."""
    stalled = socket.create_server(("127.0.0.1", 0))
    lines: list[str] = []
    ship = Shipper(f"http://127.0.0.1:{stalled.getsockname()[1]}/v1/traces", resource={},
                   headers={}, timeout_s=0.5, batch=64, max_queue=100_000, warn=lines.append)
    try:
        deadline = time.monotonic() + 5
        while not ship._poster.ready and time.monotonic() < deadline:  # the thread resolves
            time.sleep(0.01)
        span = b"\n\x10" + b"s" * 300
        worst = 0.0
        for _ in range(200):  # 12 800 spans, ~4 MB: more than the socket buffers hold
            t = time.perf_counter()
            ship.add_encoded([span] * 64)
            worst = max(worst, time.perf_counter() - t)
        assert worst < 0.05, f"a hand-over waited {worst:.3f} s"
        time.sleep(0.8)  # past the time-out
        ship.add_encoded([span])
        assert ship.dropped >= 64 and lines and "could not send spans" in lines[0]
        assert "no answer in 0.5 s" in lines[0]
    finally:
        ship.close()
        stalled.close()
    assert ship.exported == 0 and ship.dropped == 200 * 64 + 1
    assert lines[-1].startswith(f"mnemon: traces: {200 * 64 + 1} of {200 * 64 + 1} spans")


def test_the_sender_sends_what_is_left_at_close_and_a_partial_batch_on_time():
    srv = Server(lambda n: OK)
    try:
        ship = Shipper(f"http://127.0.0.1:{srv.port}/v1/traces", resource={}, headers={},
                       batch=512, delay_s=0.3)
        ship.add_encoded([b"\n\x01a"] * 10)  # under a batch: the thread sends it on time
        deadline = time.monotonic() + 5
        while ship.exported < 10 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ship.exported == 10
        ship.add_encoded([b"\n\x01b"] * 700)
        ship.close()
        assert ship.exported == 710 and ship.dropped == 0
        assert srv.connections == 1
    finally:
        srv.close()
