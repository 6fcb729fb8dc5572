"""The ``shell`` tool: one command in the agent's workspace, under the sandbox, answered as its
exit status, its time and its output (docs/sandbox.md).

It is ``exclusive``: a command may change anything in the workspace, so no later call of the
response starts until it has ended (a file tool reading beside it would see half a build).
After every command the workspace is told that anything may have changed
(``touched_all``), so the turn's snapshot rescans it and rewind, fork and synod see a command's
changes as they see the file tools'.

What it reads from its context (``ToolContext``): ``workspace`` — None for an agent without one,
and then the tool refuses — and ``settings.sandbox`` (None: the defaults, bubblewrap).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..sandbox import SandboxError, SandboxSettings, ShellOutcome, run_command
from .base import Mode, ToolBase, ToolError, ToolInputError

if TYPE_CHECKING:
    from .context import ToolContext

__all__ = ["SCHEMA", "Shell", "answer"]

#: the longest command the model may send (bash reads it as one argument: far below ARG_MAX)
MAX_COMMAND_CHARS = 100_000

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string",
                    "description": "Run with bash -c in the workspace (the working directory)."},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0,
                      "description": "Wall time in seconds (default and cap: the sandbox "
                                     "settings')."},
    },
    "required": ["command"],
    "additionalProperties": False,
}


class Shell(ToolBase):
    """``shell {command, timeout_s?}``."""

    name = "shell"
    description = ("Run a shell command (bash -c) in your workspace, sandboxed: the workspace is "
                   "writable, the system read-only, no network unless allowed. Answers the exit "
                   "status, the time and the output (stdout and stderr interleaved; head and "
                   "tail of a long one). Every process the command starts ends when it does.")
    schema = SCHEMA
    mode: Mode = "exclusive"

    async def call(self, ctx: "ToolContext", input: dict[str, Any]) -> str:
        command, timeout_s = _read(input)
        ws = getattr(ctx, "workspace", None)
        if ws is None:
            raise ToolError("this agent has no workspace (start it with --workspace DIR)")
        settings = getattr(ctx.settings, "sandbox", None) or SandboxSettings()
        directory = await ws.directory()
        try:
            outcome = await run_command(command, directory, settings, run_root=ws.run_root,
                                        timeout_s=timeout_s)
        except SandboxError as e:  # nothing ran (no bubblewrap, say): the model reads why
            raise ToolError(str(e)) from None
        finally:
            ws.touched_all()
        return answer(outcome, asked_s=timeout_s)


def _read(input: Any) -> tuple[str, float | None]:
    if not isinstance(input, dict):
        raise ToolInputError("shell takes a JSON object: {command, timeout_s?}")
    extra = sorted(set(input) - {"command", "timeout_s"})
    if extra:
        raise ToolInputError(f"shell: unknown argument {extra[0]!r} (it takes command, timeout_s)")
    command = input.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ToolInputError("shell needs 'command', a non-empty string")
    if len(command) > MAX_COMMAND_CHARS:
        raise ToolInputError(f"shell: 'command' is {len(command)} characters; at most "
                             f"{MAX_COMMAND_CHARS} (write a script to the workspace and run it)")
    if "\x00" in command:
        raise ToolInputError("shell: 'command' cannot hold a NUL character")
    t = input.get("timeout_s")
    if t is None:
        return command, None
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
        raise ToolInputError(f"shell: 'timeout_s' must be a positive number of seconds, not {t!r}")
    return command, float(t)


def answer(o: ShellOutcome, *, asked_s: float | None = None) -> str:
    """The text the model reads: a status line, a line per limit or note, then the output.

    ::

        exit 0 · 0.41 s
        <output>

        killed by signal 9 · 3.00 s · stopped by: timeout (3 s), processes
        note: timeout_s 5000 is above this sandbox's cap; 3600 s used
        output: 104857600 bytes in all; its head and tail follow
        <head>
        [… 104792064 bytes omitted of 104857600 …]
        <tail>
    """
    status = (f"exit {o.exit_code}" if o.exit_code is not None else
              f"killed by signal {o.signal}" if o.signal is not None else "exit unknown")
    head = f"{status} · {o.seconds:.2f} s"
    if o.kind == "none":
        head += " · unsandboxed (kind none)"
    stopped = [f"timeout ({o.timeout_s:g} s)" if name == "timeout" else name
               for name in o.limits if name != "output"]
    if stopped:
        head += " · stopped by: " + ", ".join(stopped)
    lines = [head]
    if asked_s is not None and asked_s > o.timeout_s:
        lines.append(f"note: timeout_s {asked_s:g} is above this sandbox's cap; "
                     f"{o.timeout_s:g} s used")
    if o.unbounded:  # said in every answer: a bound this machine cannot hold is never silent
        held = {"processes": "processes not bounded", "memory": "memory bounded per process only"}
        lines.append("note: no cgroup on this machine (docs/sandbox.md): "
                     + ", ".join(held.get(x, x) for x in o.unbounded))
    if o.truncated:
        lines.append(f"output: {o.total_bytes} bytes in all; its head and tail follow")
    lines.append(o.output if o.total_bytes else "(no output)")
    return "\n".join(lines)
