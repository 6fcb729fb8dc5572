"""What the sandbox's tests share: the real bubblewrap (or a skip saying why it cannot start),
a run root laid out as a run's, and ``ps`` to see which processes are still alive."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from mnemon.orchestrator.sandbox.bwrap import SandboxUnavailable, find_bwrap, probe


def bwrap_reason() -> str | None:
    """None when the real bubblewrap starts here, else why the real-sandbox tests are skipped."""
    try:
        why = probe(find_bwrap())
    except SandboxUnavailable as e:
        return str(e)
    return why


needs_bwrap = pytest.mark.skipif(bwrap_reason() is not None,
                                 reason=f"bubblewrap cannot start here: {bwrap_reason()}")


def marker() -> str:
    """A name no other process on the machine has: put in a command, found again by ``ps``."""
    return f"mnemon-probe-{uuid.uuid4().hex[:12]}"


def alive(mark: str) -> list[tuple[int, str]]:
    """``(pid, args)`` of every live process whose command line holds ``mark`` (zombies, which
    hold nothing, left out)."""
    out = subprocess.run(["ps", "-eo", "pid=,stat=,args="], capture_output=True, text=True,
                         check=True).stdout
    found = []
    for line in out.splitlines():
        pid, stat, args = (line.strip().split(None, 2) + ["", ""])[:3]
        if mark in args and not stat.startswith("Z") and int(pid) != os.getpid():
            found.append((int(pid), args))
    return found


def kill_all(mark: str) -> None:
    """End what a test proved survives (its own processes, by pid)."""
    import signal

    for pid, _ in alive(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Layout:
    """A run root with two agents' workspaces and a log, a user's home, and another run."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.run_root = tmp / "run"
        self.ws = self.run_root / "agents" / "a1" / "workspace"
        self.sibling = self.run_root / "agents" / "a2" / "workspace"
        self.log = self.run_root / "agents" / "a1" / "log.jsonl"
        self.home = tmp / "home"
        self.other_run = tmp / "other-run"
        for d in (self.ws, self.sibling, self.home / ".ssh", self.other_run / "agents" / "a1"):
            d.mkdir(parents=True)
        self.log.write_text('{"t":"Prompt"}\n')
        (self.sibling / "notes.txt").write_text("theirs\n")
        (self.home / ".ssh" / "id_ed25519").write_text("PRIVATE-KEY-OF-THE-USER\n")
        (self.other_run / "agents" / "a1" / "log.jsonl").write_text("ANOTHER-RUN'S-LOG\n")


@pytest.fixture
def layout(tmp_path) -> Layout:
    return Layout(tmp_path)
