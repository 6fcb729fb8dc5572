"""Shared fixtures: no test reaches the network; run roots in the real on-disk format."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

#: the suite's own data, in the repository (``tests/data/README.md`` gives each file's origin)
DATA = Path(__file__).resolve().parent / "data"
EXAMPLES = DATA / "examples"
TRAJECTORIES = DATA / "trajectories"


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    """Refuse any connection that is not to loopback (providers use MockTransport)."""
    real_connect = socket.socket.connect

    def guarded(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and not (host.startswith("127.") or host in ("localhost", "::1")
                                          or self.family == socket.AF_UNIX):
            raise RuntimeError(f"a test tried to reach the network: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture(autouse=True)
def _quiet_logs():
    """Every test starts and ends with logging off: a command a test ran in-process may have
    left it configured on a file or a captured stream that is closed once the test ends."""
    from mnemon.orchestrator import logs

    logs.quiet()
    yield
    logs.quiet()


@pytest.fixture
def run_root(tmp_path) -> Path:
    from mnemon.lineage.runroot import create_run_root

    return create_run_root(tmp_path / "run", "tests")
