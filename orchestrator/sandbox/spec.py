"""What a run says about its shell's sandbox: ``SandboxSettings``, read from a ``[sandbox]`` table
(a job's, a role's) or a JSON object (``POST /v1/agents``), and narrowed from parent to child.

::

    [sandbox]
    kind = "bwrap"          # bwrap (default) | none: no sandbox, the model trusted with the machine
    network = false         # the host's network inside the sandbox
    timeout_s = 120         # a command's wall time unless the model asks for another
    max_timeout_s = 3600    # the most the model may ask for
    memory_mb = 2048        # the command's processes together (a cgroup; else each one's RLIMIT_AS)
    processes = 256         # processes and threads alive at once (a cgroup's pids.max)
    cpu_s = 600             # CPU seconds of any one process (RLIMIT_CPU); unset: the wall time
    output_bytes = 65536    # output kept for the model: head and tail, the total said
    read_only = ["/opt/tools"]   # more paths shown read-only inside the sandbox
    env = ["PIP_INDEX_URL"]      # names of variables passed on from mnemon's environment

Pure: nothing here runs a command or reads a file. Every refusal is one ``SandboxConfigError``
line naming the key, raised before anything runs (docs/sandbox.md).
"""

from __future__ import annotations

import math
import posixpath
import re
from typing import Any, Literal

from msgspec import Struct

from ...errors import ConfigError

__all__ = ["KINDS", "WORKSPACE", "SandboxConfigError", "SandboxSettings", "narrowed",
           "parse_narrowing", "parse_sandbox"]

KINDS = ("bwrap", "none")
#: where the workspace is inside the sandbox, the same for every agent (decision 0360)
WORKSPACE = "/workspace"
#: what a read-only path may not be, nor lie under: the sandbox's own mounts, and the whole
#: machine (``/``, which would show the home directories and every run root)
RESERVED = ("/proc", "/dev", WORKSPACE)
#: the longest a settings file may let a command run: a day; past that a command is a service
TIMEOUT_CEILING_S = 86_400.0
#: an environment variable's name as POSIX shells spell it (a name, never a value, is configured)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
#: the names that are the sandbox's own and are never passed on from mnemon's environment
OWN_ENV = frozenset({"PATH", "HOME", "TERM", "LANG"})


class SandboxError(Exception):
    """A command that could not run as asked (not a program error): the shell tool answers the
    model with exactly this text. Apart from the tools' own ``ToolError`` so that the sandbox,
    a layer below the tools, imports nothing of them."""


class SandboxConfigError(ConfigError):
    """A sandbox setting that cannot be used: one line naming the key."""


class SandboxSettings(Struct, kw_only=True, frozen=True):
    """How an agent's ``shell`` commands run (docs/sandbox.md has each limit and its reason)."""

    kind: Literal["bwrap", "none"] = "bwrap"
    """``bwrap``: under bubblewrap, refused where it cannot start; ``none``: directly on the
    machine, which trusts the model with it."""
    network: bool = False
    """Whether a command reaches the host's network (bwrap ``--share-net``)."""
    timeout_s: float = 120.0
    """A command's wall time when the model does not ask for one."""
    max_timeout_s: float = 3600.0
    """The most the model may ask for with ``timeout_s`` (a larger ask is cut to it, and said)."""
    memory_mb: int = 2048
    """The memory of a command's processes together."""
    processes: int = 256
    """Processes (and threads) of one command alive at once: a fork bomb's bound."""
    cpu_s: float | None = None
    """CPU seconds of any one process; None: the command's wall time."""
    output_bytes: int = 64 * 1024
    """Output kept for the model, as head and tail; the rest is counted and said."""
    read_only: tuple[str, ...] = ()
    """Absolute paths shown read-only inside the sandbox, beside the system's."""
    env: tuple[str, ...] = ()
    """Names of variables passed on from mnemon's own environment (none by default)."""

    def __post_init__(self) -> None:
        """The same checks as ``parse_sandbox``, for a value made in Python or decoded by
        msgspec: a bad value is refused where it is made, not at the first command."""
        problem = _problem(self)
        if problem is not None:
            raise ValueError(f"sandbox.{problem[0]} {problem[1]}")


def _problem(s: SandboxSettings) -> tuple[str, str] | None:
    """The first key of ``s`` that cannot be used and why, or None."""
    if s.kind not in KINDS:
        return "kind", f"must be one of {', '.join(KINDS)}, not {s.kind!r}"
    for key in ("timeout_s", "max_timeout_s"):
        v = getattr(s, key)
        if not 0 < v <= TIMEOUT_CEILING_S:
            return key, f"must be seconds between 0 and {TIMEOUT_CEILING_S:g}, not {v!r}"
    if s.timeout_s > s.max_timeout_s:
        return "timeout_s", f"({s.timeout_s:g}) must not exceed max_timeout_s ({s.max_timeout_s:g})"
    if s.cpu_s is not None and not 0 < s.cpu_s <= TIMEOUT_CEILING_S:
        return "cpu_s", f"must be seconds between 0 and {TIMEOUT_CEILING_S:g}, not {s.cpu_s!r}"
    if not 16 <= s.memory_mb <= 1 << 30:
        return "memory_mb", f"must be at least 16 (MiB), not {s.memory_mb!r}"
    if not 8 <= s.processes <= 1 << 22:
        return "processes", f"must be at least 8, not {s.processes!r}"
    if not 1024 <= s.output_bytes <= 1 << 30:
        return "output_bytes", f"must be at least 1024, not {s.output_bytes!r}"
    for p in s.read_only:
        if not p.startswith("/") or "\x00" in p or "\n" in p or len(p) > 4096:
            return "read_only", f"must hold absolute paths, not {p!r}"
        if posixpath.normpath(p) in ("/", "//") or any(_within(p, r) for r in RESERVED):
            return "read_only", f"cannot show {p!r}: the sandbox's own, or the whole machine"
    for name in s.env:
        if not ENV_NAME.match(name):
            return "env", f"must hold variable names, not {name!r}"
        if name in OWN_ENV:
            return "env", f"cannot pass on {name}: the sandbox sets it itself"
    return None


_INT_KEYS = ("memory_mb", "processes", "output_bytes")
_SECONDS_KEYS = ("timeout_s", "max_timeout_s", "cpu_s")
_KEYS = ("kind", "network", *_SECONDS_KEYS, *_INT_KEYS, "read_only", "env")


def parse_sandbox(table: Any, *, file: object = None, where: str = "sandbox") -> SandboxSettings:
    """A ``[sandbox]`` table (TOML already read, or a JSON object) as ``SandboxSettings``.

    ``where`` is how the caller spells the table in its messages (``sandbox``, ``roles.x.sandbox``);
    ``file`` leads each message as ``ConfigError`` renders it. Unknown keys are refused, so a
    misspelt limit is never silently the default."""
    if isinstance(table, SandboxSettings):
        return table
    if not isinstance(table, dict):
        raise SandboxConfigError(f"{where} must be a table, not {type(table).__name__}", file=file,
                                 key=where)

    def bad(key: str, why: str) -> SandboxConfigError:
        return SandboxConfigError(f"{where}.{key} {why}", file=file, key=f"{where}.{key}")

    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise bad(str(unknown[0]), f"is not a sandbox setting (known: {', '.join(_KEYS)})")
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key == "kind":
            if value not in KINDS:
                raise bad(key, f"must be one of {', '.join(KINDS)}, not {value!r}")
        elif key == "network":
            if not isinstance(value, bool):
                raise bad(key, f"must be true or false, not {value!r}")
        elif key in _SECONDS_KEYS:
            if value is None and key == "cpu_s":
                pass
            elif (isinstance(value, bool) or not isinstance(value, (int, float))
                  or not math.isfinite(value)):
                raise bad(key, f"must be a number of seconds, not {value!r}")
            else:
                value = float(value)
        elif key in _INT_KEYS:
            if isinstance(value, bool) or not isinstance(value, int):
                raise bad(key, f"must be a whole number, not {value!r}")
        elif key in ("read_only", "env"):
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise bad(key, f"must be a list of strings, not {value!r}")
            value = tuple(value)
        values[key] = value
    try:
        return SandboxSettings(**values)
    except ValueError as e:  # ``__post_init__``'s one line: "sandbox.<key> <why>"
        key, _, why = str(e).removeprefix("sandbox.").partition(" ")
        raise bad(key, why) from None


def narrowed(parent: SandboxSettings | None, child: SandboxSettings | None) -> SandboxSettings | None:
    """The settings a child runs with: its own, never wider than its parent's.

    A child may only narrow: no sandbox under a bubblewrap parent is bubblewrap; the network is
    off when the parent's is; every limit is the smaller of the two; the extra read-only paths
    are those of the child's that lie within one of the parent's, and the variables passed on
    those the parent passes on too. Either side None (no sandbox settings of its own) takes the
    other's."""
    if parent is None or child is None:
        return child if parent is None else parent
    kind: Literal["bwrap", "none"] = ("none" if parent.kind == "none" and child.kind == "none"
                                      else "bwrap")
    cpu = (min(v for v in (parent.cpu_s, child.cpu_s) if v is not None)
           if parent.cpu_s is not None or child.cpu_s is not None else None)
    max_timeout = min(parent.max_timeout_s, child.max_timeout_s)
    return SandboxSettings(
        kind=kind,
        network=parent.network and child.network,
        timeout_s=min(parent.timeout_s, child.timeout_s, max_timeout),
        max_timeout_s=max_timeout,
        memory_mb=min(parent.memory_mb, child.memory_mb),
        processes=min(parent.processes, child.processes),
        cpu_s=cpu,
        output_bytes=min(parent.output_bytes, child.output_bytes),
        read_only=tuple(p for p in child.read_only
                        if any(_within(p, q) for q in parent.read_only)),
        env=tuple(n for n in child.env if n in parent.env),
    )


def parse_narrowing(parent: SandboxSettings | None, table: Any, *, file: object = None,
                    where: str = "sandbox", over: str = "this service's sandbox"
                    ) -> SandboxSettings:
    """A ``[sandbox]`` table read over ``parent`` (its keys replace the parent's, the others
    are the parent's), refused — one line naming the key — where it would widen the parent.

    For a caller that asks for a sandbox at a door the run already bounds (``POST /v1/agents``
    under ``serve --sandbox``): an agent's sandbox only narrows the one it is started under,
    and a wider ask is refused rather than quietly narrowed, so that nobody believes a command
    reaches the network, or runs unconfined, when it will not (decision 0386). A key left out
    is the parent's, not the default: ``{"network": false}`` under a parent with a 512 MiB
    bound keeps 512."""
    base = parent or SandboxSettings()
    if not isinstance(table, dict):
        raise SandboxConfigError(f"{where} must be an object, not {type(table).__name__}",
                                 file=file, key=where)
    mine = {k: (list(v) if isinstance(v, tuple) else v) for k, v in _fields(base).items()}
    cap = table.get("max_timeout_s")
    if ("timeout_s" not in table and isinstance(cap, (int, float)) and not isinstance(cap, bool)
            and cap > 0):
        mine["timeout_s"] = min(base.timeout_s, cap)  # a lower cap lowers the default with it
    child = parse_sandbox({**mine, **table}, file=file, where=where)
    kept = narrowed(base, child)
    assert kept is not None
    for key in _KEYS:
        if getattr(kept, key) == getattr(child, key):
            continue
        asked, has = getattr(child, key), getattr(base, key)
        if key in ("read_only", "env"):
            extra = next(v for v in asked if v not in getattr(kept, key))
            why = (f"{extra!r} is not within the {key} of {over} ("
                   f"{', '.join(map(repr, has)) if has else 'none'})")
        else:
            why = (f"{_toml(asked)} is wider than {over} ({key} = {_toml(has)}): an agent's "
                   "sandbox may only narrow it")
        raise SandboxConfigError(f"{where}.{key} {why}", file=file, key=f"{where}.{key}")
    return child


def _fields(s: SandboxSettings) -> dict[str, Any]:
    return {k: getattr(s, k) for k in _KEYS}


def _toml(v: Any) -> str:
    """A value as a settings file spells it (``true``, ``"none"``, ``2048``)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if v is None:
        return "unset"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _within(path: str, base: str) -> bool:
    """Whether ``path`` is ``base`` or under it, compared as written once ``..`` and doubled
    slashes are folded (both absolute; symbolic links are not followed: the settings are judged
    as words, before any machine is looked at)."""
    p, b = posixpath.normpath(path), posixpath.normpath(base)
    return p == b or p.startswith(b if b.endswith("/") else b + "/")
