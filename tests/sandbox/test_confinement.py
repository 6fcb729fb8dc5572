"""What a command can reach, under the real bubblewrap: each attack is first shown to work
without the sandbox (``kind = "none"``, or bubblewrap started the naive way) where that is safe,
so each test shows the sandbox is what stops it."""

from __future__ import annotations

import os
import subprocess

import pytest
import trio

from mnemon.orchestrator.sandbox import SandboxSettings, run_command
from mnemon.orchestrator.sandbox.bwrap import bwrap_argv, find_bwrap
from mnemon.orchestrator.sandbox.environ import command_env

from .conftest import marker, needs_bwrap

pytestmark = needs_bwrap


async def sh(layout, command: str, **settings):
    return await run_command(command, layout.ws, SandboxSettings(**settings),
                             run_root=layout.run_root, timeout_s=30)


def attempts(*targets) -> str:
    """A command that tries to write each target and says which writes took."""
    return "".join(f"echo pwned >> '{t}' 2>/dev/null && echo 'WROTE {t}'; " for t in targets)


async def test_writes_outside_the_workspace_are_refused(layout, monkeypatch):
    monkeypatch.setenv("HOME", str(layout.home))
    mine = "mine.txt"
    targets = [layout.sibling / "notes.txt", layout.log, layout.home / ".bashrc"]
    proof = await sh(layout, attempts(*targets) + f"echo ok > {mine}", kind="none")
    assert all(f"WROTE {t}" in proof.output for t in targets)  # the attack works unconfined
    for t in targets:
        t.write_text(t.read_text().replace("pwned\n", ""))

    probe = marker()
    out = await sh(layout, attempts(*targets, f"/etc/{probe}", f"/usr/{probe}", "/root/" + probe)
                   + f"echo ok > {mine}; echo ok > /workspace/also.txt")
    assert "WROTE" not in out.output, out.output
    assert (layout.sibling / "notes.txt").read_text() == "theirs\n"
    assert layout.log.read_text() == '{"t":"Prompt"}\n'
    assert (layout.home / ".bashrc").read_text() == ""  # as the proof left it
    for p in (f"/etc/{probe}", f"/usr/{probe}", f"/root/{probe}"):
        assert not os.path.exists(p)
    assert (layout.ws / mine).read_text() == "ok\n"  # the workspace is writable
    assert (layout.ws / "also.txt").read_text() == "ok\n"  # … at /workspace


async def test_a_read_only_bind_cannot_be_remounted_writable(layout, tmp_path):
    """As root, bubblewrap keeps the capabilities of the sandbox's user namespace unless told
    not to — and CAP_SYS_ADMIN there remounts a read-only bind writable. The sandbox drops them
    all (decision 0365)."""
    shown = tmp_path / "tools"
    shown.mkdir()
    (shown / "f").write_text("orig\n")
    out = await sh(layout, f"mount -o remount,bind,rw '{shown}' 2>&1; mount -o remount,bind,rw "
                   f"/usr 2>&1; echo pwned > '{shown}/f' 2>&1; grep CapEff /proc/self/status",
                   read_only=(str(shown),))
    assert (shown / "f").read_text() == "orig\n"
    assert "CapEff:\t0000000000000000" in out.output
    assert out.output.count("Read-only file system") == 1


async def test_the_users_home_and_another_run_are_absent(layout, monkeypatch):
    monkeypatch.setenv("HOME", str(layout.home))
    key = layout.home / ".ssh" / "id_ed25519"
    other = layout.other_run / "agents" / "a1" / "log.jsonl"
    read = f"cat '{key}' '{other}' ~/.ssh/id_ed25519 2>&1; ls -d /root /home '{layout.tmp}' 2>&1"
    proof = await sh(layout, read, kind="none")
    assert "PRIVATE-KEY-OF-THE-USER" in proof.output and "ANOTHER-RUN'S-LOG" in proof.output
    out = await sh(layout, read)
    assert "PRIVATE-KEY-OF-THE-USER" not in out.output
    assert "ANOTHER-RUN'S-LOG" not in out.output
    assert out.output.count("No such file or directory") == 6, out.output


async def test_a_read_only_path_shows_but_never_the_run_root(layout):
    """``read_only`` may name a directory that holds the run root: the rest of it is shown
    read-only, the run root (the agents' logs, the other workspaces) an empty directory."""
    (layout.tmp / "data.csv").write_text("a,b\n")
    out = await sh(layout, f"cat '{layout.tmp}/data.csv'; ls -A '{layout.run_root}' | wc -l; "
                   f"cat '{layout.log}' 2>&1; echo x >> '{layout.tmp}/data.csv' 2>&1; "
                   "echo w > /workspace/w && echo WS-OK", read_only=(str(layout.tmp),))
    lines = out.output.splitlines()
    assert lines[0] == "a,b" and lines[1] == "0"
    assert "No such file or directory" in lines[2] and "Read-only file system" in lines[3]
    assert lines[4] == "WS-OK" and (layout.tmp / "data.csv").read_text() == "a,b\n"


async def test_a_server_on_loopback_is_out_of_reach_unless_the_network_is_allowed(layout):
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    heard: list[bytes] = []

    async def serve():
        while True:
            conn, _ = await listener.accept()
            with conn:
                heard.append(await conn.recv(100))

    probe = marker()
    reach = (f"exec 3<>/dev/tcp/127.0.0.1/{port} 2>/dev/null && echo {probe} >&3 && "
             f"echo CONNECTED; true")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        unconfined = await sh(layout, reach, kind="none")
        confined = await sh(layout, reach)
        allowed = await sh(layout, reach, network=True)
        with trio.fail_after(5):
            while len(heard) < 2:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    listener.close()
    assert "CONNECTED" in unconfined.output and "CONNECTED" in allowed.output
    assert "CONNECTED" not in confined.output
    assert heard == [f"{probe}\n".encode()] * 2


async def test_secrets_in_mnemons_environment_are_absent(layout, monkeypatch):
    secret = marker()
    monkeypatch.setenv("ANTHROPIC_API_KEY", f"sk-ant-{secret}")
    monkeypatch.setenv("MNEMON_TOKEN", f"tok-{secret}")
    monkeypatch.setenv("PASSED_ON", "visible")
    look = ("env; echo; for f in /proc/[0-9]*/environ; do cat $f; echo; done; "
            "tr '\\0' '\\n' < /proc/1/environ")
    settings = SandboxSettings(env=("PASSED_ON",))
    # the known leak: bubblewrap started with mnemon's environment keeps it at /proc/1/environ,
    # even with --clearenv — the test sees it, so it would see the sandbox leak it
    naive = bwrap_argv(find_bwrap(), settings, layout.ws, run_root=layout.run_root,
                       env=command_env(settings, os.environ)) + ["bash", "-c", look]
    leaked = subprocess.run(naive, env=dict(os.environ), capture_output=True, text=True)
    assert secret in leaked.stdout
    out = await run_command(look, layout.ws, settings, run_root=layout.run_root)
    assert secret not in out.output and out.exit_code == 0
    assert "PASSED_ON=visible" in out.output
    unconfined = await run_command("env", layout.ws, SandboxSettings(kind="none"),
                                   run_root=layout.run_root)
    assert secret not in unconfined.output  # scrubbed under kind none too (its env, not /proc)


async def test_the_sandbox_sees_only_its_own_processes(layout):
    """A new PID namespace: bubblewrap's init as pid 1, the command's shell, its ``ps``."""
    out = await sh(layout, "ps -e -o pid=,comm=; true")
    assert [line.split() for line in out.output.splitlines()] == [
        ["1", "bwrap"], ["2", "bash"], ["3", "ps"]]


async def test_a_relative_workspace_is_the_same_directory(layout, monkeypatch):
    """bubblewrap starts in ``/``: the workspace is bound by its absolute path, not as
    written."""
    monkeypatch.chdir(layout.ws.parent)
    out = await run_command("echo here > here.txt", layout.ws.relative_to(layout.ws.parent),
                            SandboxSettings(), run_root=layout.run_root)
    assert out.exit_code == 0 and (layout.ws / "here.txt").read_text() == "here\n"
