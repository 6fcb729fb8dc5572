"""The root of mnemon's errors, and its two families, each carrying its exit code.

::

    MnemonError                 exit_code: what ``mnemon`` exits with when one reaches it
    ├── UserError               2  the user's mistake, a refusal, a state the user can change
    │   └── ConfigError         2  a setting, flag or file that cannot be used: carries where
    │                              (``file``, ``line``, ``key``), rendered into its one line
    └── Failure                 1  what the user did not cause (a provider failing after its
                                   retries, every task failing, a receiver refusing traces)

Every error of the layers (``session``, ``lineage``, ``providers``, ``orchestrator``) that can
reach a caller is one of these, so a library caller catches ``MnemonError`` once and the CLI
prints its one line and exits with ``exit_code`` — no layer translates another's error into
the CLI's (decision 0330). Classes keep their older bases too (``PolicyError`` is still a
``ValueError``, ``MissingExtra`` an ``ImportError``), so no existing ``except`` changes meaning.

Kept apart, on purpose, and not under this root: the exceptions that steer a run rather than
report a problem — ``loop.AgentDone`` (an agent's end, raised through its own stack),
``session.checkpoint.header.Stale`` (a checkpoint to rebuild), a user tool's ``ToolError`` and
``ToolInputError`` (an answer the model reads, not an error of the program). Catching
``MnemonError`` never swallows one of them (pydantic-ai's ``exceptions.py`` draws the same line
between control flow and errors).

This module sits below every layer (``tests/test_knots.py``, ``BASE``): anything may import it,
and it imports nothing of the package.
"""

from __future__ import annotations

TYPE_CHECKING = False  # as typing's, without importing typing (~2 ms of every start)
if TYPE_CHECKING:
    from typing import ClassVar

__all__ = ["MnemonError", "UserError", "ConfigError", "Failure"]


class MnemonError(Exception):
    """The root of every error mnemon raises to its caller."""

    exit_code: ClassVar[int] = 1


class UserError(MnemonError):
    """Bad input or a refusal: the CLI prints one line and exits 2."""

    exit_code: ClassVar[int] = 2


class ConfigError(UserError):
    """A setting that cannot be used, naming where it came from: ``file``, ``line`` (1-based)
    and ``key`` when the raiser knows them. The file and line lead the one-line message
    (``job.toml:7: …``); the key is kept for a program to read (the message already names it in
    the caller's own spelling: ``--keep`` on the command line, ``keep`` in a table)."""

    def __init__(self, *args: object, file: object = None, line: int | None = None,
                 key: str | None = None) -> None:
        self.file, self.line, self.key = file, line, key
        if args and file is not None:  # rendered once: ``args`` is what a pickle carries
            where = f"{file}:{line}" if line is not None else f"{file}"
            args = (f"{where}: {args[0]}", *args[1:])
        super().__init__(*args)


class Failure(MnemonError):
    """A failure the user did not cause: the CLI prints one line and exits 1."""

    exit_code: ClassVar[int] = 1
