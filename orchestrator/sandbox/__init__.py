"""The shell's sandbox: running one command confined, bounded, and ended with all it started.

Who may import this package: the shell tool (``orchestrator/tools/shell.py``) and what carries
the settings (``Settings.sandbox``, jobs, roles, the service) — its surface is below. The
modules, one concept each:

- ``spec``: ``SandboxSettings``, read from a ``[sandbox]`` table, narrowed parent to child
  (a wider ask refused: ``parse_narrowing``);
- ``environ``: the environment a command sees (scrubbed), and its launcher's (empty);
- ``bwrap``: finding bubblewrap, probing it once, the command line that confines a command;
- ``cgroup``: the cgroup that bounds a command's processes and memory and ends them all;
- ``capture``: the output kept as head and tail, made safe to print;
- ``run``: ``run_command`` and ``ShellOutcome``.

docs/sandbox.md has the threat model, the defaults and each limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import attach

# names load on first use: ``Settings`` carries ``SandboxSettings`` without loading the runner
__getattr__, __dir__, __all__ = attach(__name__, {
    "SandboxConfigError": ".spec",
    "SandboxError": ".spec",
    "SandboxSettings": ".spec",
    "SandboxUnavailable": ".bwrap",
    "ShellOutcome": ".run",
    "narrowed": ".spec",
    "parse_narrowing": ".spec",
    "parse_sandbox": ".spec",
    "run_command": ".run",
})

if TYPE_CHECKING:
    from .bwrap import SandboxUnavailable
    from .run import ShellOutcome, run_command
    from .spec import (SandboxConfigError, SandboxError, SandboxSettings, narrowed,
                       parse_narrowing, parse_sandbox)
