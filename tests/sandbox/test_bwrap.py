"""Finding bubblewrap, refusing the shell where it cannot start (never a silent downgrade), and
the command line it is given."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mnemon.orchestrator.sandbox import SandboxSettings, SandboxUnavailable, run_command
from mnemon.orchestrator.sandbox.bwrap import bwrap_argv, find_bwrap, probe
from mnemon.orchestrator.sandbox.spec import SandboxError


def pairs(argv: list[str], flag: str, n: int = 2) -> list[tuple[str, ...]]:
    """Every ``flag a b`` (n arguments) in ``argv``."""
    return [tuple(argv[i + 1:i + 1 + n]) for i, a in enumerate(argv) if a == flag]


def test_mnemon_bwrap_names_the_binary(tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert find_bwrap({"MNEMON_BWRAP": str(fake), "PATH": "/nowhere"}) == str(fake)
    assert find_bwrap({"PATH": str(tmp_path)}) == str(fake)


def test_no_bwrap_is_one_line_saying_what_to_install(tmp_path):
    with pytest.raises(SandboxUnavailable) as e:
        find_bwrap({"PATH": str(tmp_path)})
    msg = str(e.value)
    assert "apt-get install bubblewrap" in msg and "MNEMON_BWRAP" in msg and "\n" not in msg
    assert isinstance(e.value, SandboxError)  # the shell answers the model with it
    with pytest.raises(SandboxUnavailable, match=r"^MNEMON_BWRAP='/no/such' is not an executable"):
        find_bwrap({"MNEMON_BWRAP": "/no/such"})


async def test_a_bwrap_that_cannot_start_refuses_and_runs_nothing(tmp_path):
    """A bubblewrap whose namespaces are refused (a container, a sysctl): the probe says why,
    the shell is refused in one line, and the command never runs — not even unconfined."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\n"
                    "exit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    ws = tmp_path / "ws"
    ws.mkdir()
    with pytest.raises(SandboxUnavailable) as e:
        await run_command("touch ran", ws, SandboxSettings(), run_root=None,
                          environ={"MNEMON_BWRAP": str(fake), "PATH": os.defpath})
    msg = str(e.value)
    assert "\n" not in msg and "setting up uid map: Permission denied" in msg
    assert "user namespaces" in msg
    assert not (ws / "ran").exists()
    assert probe(str(fake)) == probe(str(fake))  # asked once: cached


def test_the_command_line(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {"PATH": "/usr/bin", "HOME": "/tmp/home", "LANG": "C.UTF-8", "TERM": "dumb"}
    argv = bwrap_argv("/usr/bin/bwrap", SandboxSettings(), ws, run_root=tmp_path, env=env)
    assert argv[0] == "/usr/bin/bwrap" and argv[-1] == "--"
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in argv
    assert pairs(argv, "--cap-drop", 1) == [("ALL",)]
    assert "--share-net" not in argv
    assert ("--ro-bind", "/usr", "/usr") == ("--ro-bind", *pairs(argv, "--ro-bind")[0])
    assert pairs(argv, "--bind") == [(str(ws), "/workspace")]
    assert pairs(argv, "--chdir", 1) == [("/workspace",)]
    assert pairs(argv, "--setenv") == list(env.items())
    shown = {dst for _, dst in pairs(argv, "--ro-bind")}
    assert not any(p == d or p.startswith(d + "/") for d in ("/root", "/home", str(tmp_path))
                   for p in shown)
    assert "/etc/shadow" not in shown and "/etc" not in shown
    assert "/etc/passwd" in shown
    assert pairs(argv, "--tmpfs", 1) == [("/tmp",)]
    net = bwrap_argv("/usr/bin/bwrap", SandboxSettings(network=True), ws, run_root=None, env=env)
    assert "--share-net" in net


def test_a_read_only_path_holding_the_run_root_shows_it_empty(tmp_path):
    run_root = tmp_path / "projects" / "run"
    ws = run_root / "agents" / "a1" / "workspace"
    ws.mkdir(parents=True)
    s = SandboxSettings(read_only=(str(tmp_path / "projects"),))
    argv = bwrap_argv("bwrap", s, ws, run_root=run_root, env={})
    ro, masks = pairs(argv, "--ro-bind"), pairs(argv, "--tmpfs", 1)
    assert (str(tmp_path / "projects"),) * 2 in ro
    assert (str(run_root),) in masks
    assert argv.index("--tmpfs", argv.index(str(run_root)) - 1) < argv.index("--bind")
    linked = tmp_path / "link"
    linked.symlink_to(tmp_path / "projects")
    argv = bwrap_argv("bwrap", SandboxSettings(read_only=(str(linked),)), ws, run_root=run_root,
                      env={})
    assert (str(linked / "run"),) in pairs(argv, "--tmpfs", 1)


def test_a_read_only_path_that_is_not_there_is_refused(tmp_path):
    with pytest.raises(SandboxUnavailable, match="sandbox.read_only names '/no/such/dir'"):
        bwrap_argv("bwrap", SandboxSettings(read_only=("/no/such/dir",)), tmp_path,
                   run_root=None, env={})


def test_system_symlinks_stay_symlinks(tmp_path):
    argv = bwrap_argv("bwrap", SandboxSettings(), tmp_path, run_root=None, env={})
    for top in ("/bin", "/lib", "/sbin"):
        if os.path.islink(top):
            assert (os.readlink(top), top) in pairs(argv, "--symlink")
        elif Path(top).is_dir():
            assert (top, top) in pairs(argv, "--ro-bind")

