"""bubblewrap: finding it, knowing whether it can start here, and the command line that confines
one command (decision 0360).

Found as ``MNEMON_BWRAP`` names it (a path to the binary), else as ``bwrap`` on mnemon's PATH
(Debian and Ubuntu: ``apt-get install bubblewrap``). Whether it can start a sandbox here (user
namespaces on, ``/proc`` mountable inside) is probed once per binary, by starting the very
sandbox a command gets around ``true``, and the answer kept for the process's life. Where it
cannot, the shell is refused with one line saying why and what to install — never run
unconfined (``SandboxUnavailable``).

What a command sees::

    /usr /bin /sbin /lib* read-only (the merged-/usr symlinks kept as symlinks)
    /etc               only the files programs need to run (users, hosts, TLS roots,
                       the loader's cache, locales...), read-only; no shadow, no keys
    read_only paths    read-only, as the settings name them
    /proc /dev         its own (a new PID namespace: only its processes)
    /tmp               its own, empty (HOME is /tmp/home)
    /workspace         the agent's workspace, writable; the working directory

and nothing else: not the user's home, not /root, not the run root (masked with an empty
directory where a read-only path would show it), not another agent's workspace. Every namespace
is new (user, PID, IPC, UTS, cgroup, network — the network shared only when the settings allow
it); it gets no capability (as root, bubblewrap would otherwise keep them, and a read-only bind
could be remounted writable: decision 0365); it has its own session (no terminal injection) and
dies with mnemon (``--die-with-parent``).
"""

from __future__ import annotations

import fnmatch
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

import trio

from .environ import HOME, LAUNCHER_ENV
from .spec import WORKSPACE, SandboxError, SandboxSettings

__all__ = ["ENV_VAR", "INSTALL", "SandboxUnavailable", "bwrap_argv", "find_bwrap", "probe",
           "require_bwrap"]

ENV_VAR = "MNEMON_BWRAP"
INSTALL = "apt-get install bubblewrap"
#: the system's top directories shown read-only (each only where it exists; a symlink, as on a
#: merged-/usr system, is recreated as the same symlink)
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: what of /etc a command sees (names, or patterns as ``fnmatch`` reads them): what programs
#: read to run — users and groups, name resolution, TLS roots, the loader's cache, the Debian
#: alternatives /usr/bin links through, the time zone, the runtimes' own directories — and
#: nothing that holds a secret (no shadow, no ssh host keys, no pip.conf or npmrc with an index
#: token, no machine-id). Each is a mount (about 0.2 ms): the list is kept to what is needed,
#: and ``read_only`` adds what a machine's tools need beside it.
ETC = ("passwd", "group", "nsswitch.conf", "hosts", "resolv.conf", "gai.conf", "services",
       "protocols", "ssl", "ca-certificates", "pki", "crypto-policies", "ld.so.cache",
       "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "timezone", "os-release",
       "mime.types", "gitconfig", "perl", "python3*", "java-*")
HOSTNAME = "sandbox"
#: how long the probe may take before bubblewrap is judged unable to start
PROBE_TIMEOUT_S = 15.0


class SandboxUnavailable(SandboxError):
    """The sandbox cannot start here: one line saying why and what to do. A ``SandboxError``:
    the model reads it as the shell's answer, and nothing ran."""


def find_bwrap(environ: Mapping[str, str] | None = None) -> str:
    """The bubblewrap binary to use: ``MNEMON_BWRAP``, else ``bwrap`` on PATH."""
    env = os.environ if environ is None else environ
    named = env.get(ENV_VAR)
    if named:
        if not (os.path.isfile(named) and os.access(named, os.X_OK)):
            raise SandboxUnavailable(f"{ENV_VAR}={named!r} is not an executable file; point it "
                                     f"at bubblewrap ({INSTALL}) or unset it")
        return named
    found = shutil.which("bwrap", path=env.get("PATH", os.defpath))
    if found is None:
        raise SandboxUnavailable(
            f"the shell runs under bubblewrap, which is not installed here ({INSTALL}, or set "
            f"{ENV_VAR}); kind = \"none\" runs commands unconfined, trusting the model with the "
            f"machine")
    return found


@functools.cache
def probe(bwrap: str) -> str | None:
    """None when ``bwrap`` can start the sandbox here, else why not (one line). Cached per
    binary for the process's life: a machine does not grow user namespaces while mnemon runs."""
    with tempfile.TemporaryDirectory(prefix="mnemon-probe-") as ws:
        argv = bwrap_argv(bwrap, SandboxSettings(), Path(ws), run_root=None,
                          env={"PATH": "/usr/bin:/bin"}) + ["true"]
        try:
            done = subprocess.run(argv, env=dict(LAUNCHER_ENV), stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=PROBE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{bwrap} could not be run: {e}"
    if done.returncode == 0:
        return None
    said = done.stderr.decode("utf-8", "replace").strip().splitlines()
    why = (said[-1] if said else f"exit {done.returncode}")[:300]
    return (f"bubblewrap ({bwrap}) cannot start a sandbox here: {why!r} — user namespaces may "
            f"be off (sysctl kernel.unprivileged_userns_clone=1, or user.max_user_namespaces), "
            f"or a container forbids them")


async def require_bwrap(environ: Mapping[str, str] | None = None) -> str:
    """The bubblewrap binary, known to start here; else ``SandboxUnavailable``. The first call
    probes in a worker thread (a few milliseconds, once)."""
    bwrap = find_bwrap(environ)
    why = await trio.to_thread.run_sync(probe, bwrap)
    if why is not None:
        raise SandboxUnavailable(why)
    return bwrap


def bwrap_argv(bwrap: str, settings: SandboxSettings, workspace: Path, *, run_root: Path | None,
               env: Mapping[str, str]) -> list[str]:
    """bubblewrap's command line up to the command itself (append ``["bash", "-c", cmd]``).

    ``workspace`` is bound writable at ``/workspace``; ``run_root``, where a read-only path
    would show it, is masked with an empty directory; ``env`` is the command's whole
    environment. A read-only path that does not exist is refused (``SandboxUnavailable``): a
    path the settings name and the command cannot see is a mistake to say, not to skip."""
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--hostname", HOSTNAME]
    if settings.network:
        argv.append("--share-net")
    # its own /proc, /dev and /tmp first: a read-only path under /tmp is mounted on top of it
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", HOME]
    shown: list[str] = []
    for top in SYSTEM:
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
            shown.append(top)
    argv += ["--dir", "/etc"]
    for name in _etc_names():
        p = f"/etc/{name}"
        real = os.path.realpath(p)
        if os.path.exists(real):  # a symlink bound as what it names
            argv += ["--ro-bind", real, p]
    for p in settings.read_only:
        if not os.path.exists(p):
            raise SandboxUnavailable(f"sandbox.read_only names {p!r}, which does not exist")
        argv += ["--ro-bind", p, p]
        shown.append(p)
    if run_root is not None:  # where a shown path holds the run root, an empty one on top
        root = os.path.realpath(run_root)
        for s in shown:
            real = os.path.realpath(s)
            if root == real or root.startswith(real.rstrip("/") + "/"):
                argv += ["--tmpfs", s.rstrip("/") + root[len(real.rstrip("/")):]]
    # the sandbox's own root (where /etc's few files are mounted) read-only too: nothing is
    # written outside the workspace and /tmp, not even into the sandbox's own scratch
    argv += ["--bind", str(workspace), WORKSPACE, "--remount-ro", "/", "--chdir", WORKSPACE,
             "--clearenv"]
    for k, v in env.items():
        argv += ["--setenv", k, v]
    argv.append("--")
    return argv


def _etc_names() -> list[str]:
    """The entries of this machine's /etc that ``ETC`` names, in its order."""
    try:
        present = sorted(os.listdir("/etc"))
    except OSError:
        return []
    out: list[str] = []
    for pattern in ETC:
        out += [n for n in present if n not in out and fnmatch.fnmatchcase(n, pattern)]
    return out
