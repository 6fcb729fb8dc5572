"""The listening socket of ``mnemon serve`` and ``mnemon mcp --http``, bound before anything is
written.

An address in use, one this machine does not have, or a port the user may not take is the
user's own mistake: it is told in one line naming the address before a run root is created or
a supervisor opened (decision 0322). Binding first, not probing and closing, leaves no moment in
which another process could take the port: the bound socket is handed to hypercorn (as an
``fd://`` bind, its public way to serve a socket made elsewhere)."""

from __future__ import annotations

import errno
import os
import socket

from hypercorn.config import Config

from ...errors import UserError


class BindError(UserError):
    """The address cannot be served (the CLI's exit 2)."""


def hypercorn_config(host: str, port: int) -> Config:
    """The service's hypercorn settings: no access or error log (a URL or a header is never
    logged), a short graceful stop."""
    config = Config()
    config.bind = [address(host, port)]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 2.0
    config.keep_alive_timeout = 30.0
    return config


def address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening, or ``BindError`` naming the address
    and what the user can do about it."""
    where = address(host, port)
    try:
        (sock,) = hypercorn_config(host, port).create_sockets().insecure_sockets
    except (OSError, ValueError) as e:  # (ValueError: a host with a NUL in it)
        raise BindError(f"cannot serve on {where}: {_why(e)}") from None
    try:
        sock.listen(Config.backlog)
    except OSError as e:
        sock.close()
        raise BindError(f"cannot serve on {where}: {_why(e)}") from None
    return sock


def _why(e: Exception) -> str:
    if isinstance(e, OSError) and e.errno == errno.EADDRINUSE:
        return ("the address is in use (another process listens there): choose another "
                "--port, or --port 0 for any free one")
    if isinstance(e, OSError) and e.errno == errno.EADDRNOTAVAIL:
        return "this machine has no such address: choose another --host"
    if isinstance(e, OSError) and e.errno in (errno.EACCES, errno.EPERM):
        return "permission denied (a port below 1024 needs privileges): choose another --port"
    if isinstance(e, socket.gaierror):
        return f"the host does not resolve ({e.strerror})"
    return " ".join(str(getattr(e, "strerror", None) or e).split())


def served_config(sock: socket.socket) -> Config:
    """Hypercorn's settings serving ``sock``: hypercorn owns a duplicate of its descriptor, so
    closing ours (``sock.close()`` once serving ends) and hypercorn closing its own never
    close one descriptor twice."""
    config = hypercorn_config("127.0.0.1", 0)
    config.bind = [f"fd://{os.dup(sock.fileno())}"]
    return config


__all__ = ["BindError", "address", "bind", "hypercorn_config", "served_config"]
