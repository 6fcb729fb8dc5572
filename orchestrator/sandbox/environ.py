"""The environment a command sees, and the one its launcher starts with: nothing of mnemon's own
but what the settings name.

mnemon's environment holds the provider keys and the service's token. A command gets a fixed
few variables (``PATH``, ``HOME``, ``LANG``, ``TERM``) and the names the settings pass on
(``env``), never the rest. Under bubblewrap that is not enough on its own: the sandbox's first
process keeps the environment bubblewrap itself was started with, readable by any command at
``/proc/1/environ`` — so bubblewrap is started with an empty one (``LAUNCHER_ENV``) and sets the
command's with ``--clearenv``/``--setenv`` (decision 0361). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .spec import SandboxSettings

__all__ = ["HOME", "LAUNCHER_ENV", "PATH", "command_env"]

#: PATH inside the sandbox: the system's, never mnemon's (a venv or ``~/.local/bin`` is not there)
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: HOME inside the sandbox: in its private /tmp, so a tool's caches and dotfiles neither reach
#: the user's home nor land in the workspace (and so in its snapshots)
HOME = "/tmp/home"
#: what the process that starts bubblewrap (and so the sandbox's pid 1) is given: nothing
LAUNCHER_ENV: Mapping[str, str] = {}
#: a locale name as the C library spells it; any other LANG is replaced by C.UTF-8
_LOCALE = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


def command_env(settings: SandboxSettings, parent: Mapping[str, str]) -> dict[str, str]:
    """The command's environment: the fixed few, then the variables ``settings.env`` names that
    ``parent`` (mnemon's environment) has. Under ``kind = "none"`` PATH and HOME are the
    machine's own, as the command runs on it."""
    lang = parent.get("LANG", "")
    env = {"PATH": PATH, "HOME": HOME,
           "LANG": lang if _LOCALE.match(lang) else "C.UTF-8", "TERM": "dumb"}
    if settings.kind == "none":
        env["PATH"] = parent.get("PATH") or PATH
        env["HOME"] = parent.get("HOME") or "/"
    for name in settings.env:
        if name in parent:
            env[name] = parent[name]
    return env
