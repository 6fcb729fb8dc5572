"""The limits, under the real sandbox: a fork bomb, a memory hog, a CPU spinner, a flood of
output and a command that ignores SIGTERM are each stopped, every process of them is gone after
(``ps``), and the next command runs as if nothing happened."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from mnemon.orchestrator.sandbox import SandboxSettings, run_command

from .conftest import alive, kill_all, marker, needs_bwrap

pytestmark = needs_bwrap
KINDS = ["bwrap", "none"]


def cgroups_left() -> list[str]:
    """This process's command cgroups still on the machine (each is removed as its command
    ends)."""
    mine = f"mnemon-{os.getpid()}-"
    return [str(p) for p in Path("/sys/fs/cgroup").rglob(f"{mine}*")]


async def still_works(ws: Path, kind: str) -> None:
    """The agent goes on: the next command runs and answers."""
    nxt = await run_command("echo next", ws, SandboxSettings(kind=kind), run_root=None)
    assert (nxt.exit_code, nxt.output, nxt.limits) == (0, "next\n", ())


@pytest.mark.parametrize("kind", KINDS)
async def test_a_fork_bomb_is_stopped_by_the_process_limit(tmp_path, kind):
    mark = marker()
    started = time.monotonic()
    out = await run_command(f": {mark}; b() {{ b | b & }}; b; sleep 30", tmp_path,
                            SandboxSettings(kind=kind, processes=64, timeout_s=2),
                            run_root=None)
    assert time.monotonic() - started < 10
    assert "processes" in out.limits and "timeout" in out.limits and out.timed_out
    assert "fork: retry: Resource temporarily unavailable" in out.output
    assert alive(mark) == [] and cgroups_left() == []
    await still_works(tmp_path, kind)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_memory_hog_is_stopped_by_the_memory_limit(tmp_path, kind):
    """``tail -n 1`` keeps a line in memory until it ends, and /dev/zero has no newline."""
    hog = "head -c {n}M /dev/zero | tail -n 1 > /dev/null; echo tail=$?"
    roomy = await run_command(hog.format(n=96), tmp_path,
                              SandboxSettings(kind=kind, memory_mb=1024), run_root=None)
    assert roomy.output == "tail=0\n" and roomy.limits == ()  # the hog itself works
    out = await run_command(hog.format(n=400), tmp_path,
                            SandboxSettings(kind=kind, memory_mb=64), run_root=None)
    assert out.output.endswith("tail=137\n")  # SIGKILLed by the kernel for memory
    assert out.limits == ("memory",) and out.exit_code == 0 and cgroups_left() == []
    await still_works(tmp_path, kind)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_cpu_spinner_is_stopped_by_the_cpu_limit(tmp_path, kind):
    out = await run_command("while :; do :; done", tmp_path,
                            SandboxSettings(kind=kind, cpu_s=1, timeout_s=30), run_root=None)
    assert out.limits == ("cpu",) and 0.9 < out.seconds < 25  # stopped by the CPU, not the clock
    # SIGXCPU: bash reports it as 128 + 24 under bubblewrap; unconfined, bash was exec'd away
    assert (out.exit_code, out.signal) in ((152, None), (None, signal.SIGXCPU))


@pytest.mark.parametrize("kind", KINDS)
async def test_a_flood_of_output_is_capped_and_counted(tmp_path, kind):
    total = 100_000_000
    out = await run_command(f"head -c {total} /dev/zero | tr '\\0' a; echo; echo THE-END",
                            tmp_path, SandboxSettings(kind=kind, output_bytes=8192),
                            run_root=None)
    assert out.exit_code == 0 and out.total_bytes == total + 1 + 8
    assert out.truncated and out.limits == ("output",)
    assert out.output.startswith("a" * 4096) and out.output.endswith("aaaa\nTHE-END\n")
    assert f"bytes omitted of {total + 9} …]" in out.output
    assert len(out.output) < 8192 + 100
    await still_works(tmp_path, kind)


TREE = ("trap '' TERM; for i in 1 2 3; do (trap '' TERM; exec -a {mark} sleep 300) & done; "
        "exec -a {mark}-main sleep 300")


def test_the_ps_check_sees_a_tree_left_behind(tmp_path):
    """Without the runner, ending a command's main process leaves its children running: what
    the next test checks with ``ps`` would be seen."""
    mark = marker()
    p = subprocess.Popen(["bash", "-c", TREE.format(mark=mark)], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while len(alive(mark)) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        p.kill()
        p.wait()
        time.sleep(0.2)
        assert len(alive(mark)) == 3
    finally:
        kill_all(mark)


@pytest.mark.parametrize("kind", KINDS)
async def test_at_the_timeout_every_process_is_gone(tmp_path, kind):
    mark = marker()
    started = time.monotonic()
    out = await run_command(TREE.format(mark=mark), tmp_path,
                            SandboxSettings(kind=kind, timeout_s=1), run_root=None)
    assert out.timed_out and out.limits == ("timeout",) and out.signal == signal.SIGKILL
    assert time.monotonic() - started < 3
    assert alive(mark) == [] and cgroups_left() == []


@pytest.mark.parametrize("kind", KINDS)
async def test_what_a_command_leaves_running_ends_with_it(tmp_path, kind):
    """A background process outlives nothing: when the command's shell exits, its children end
    too, and its output has been read to the end."""
    mark = marker()
    out = await run_command(f"(exec -a {mark} sleep 300) & echo started", tmp_path,
                            SandboxSettings(kind=kind), run_root=None)
    assert (out.exit_code, out.output, out.timed_out) == (0, "started\n", False)
    assert out.seconds < 2.5 and alive(mark) == []
