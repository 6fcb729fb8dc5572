"""Errors of the session layer: each names the state it refuses.

    SessionError           (``mnemon.errors.UserError``: the CLI exits 2)
    ├── Refusal            a record (or a tool call) the fold will not apply; its message goes
    │                      back to the model verbatim and names the state
    ├── LogRefused         a file that does not fold: path, 1-based line and why
    ├── LogCorrupt         bytes that are not a record where a record must be (path, offset)
    │   └── DigestMismatch a Locus whose digest does not match the bytes at its offset
    ├── AncestorUnreadable an ancestor file that is missing or outside the run root
    ├── LogClosed          we closed the log; appending after that is a bug of ours
    └── LogWriteFailed     an append or an fsync failed
        └── LogChanged     the file is no longer what its writer wrote (truncated, grown,
                           replaced): nothing more is appended to it
"""

from __future__ import annotations

from ..errors import UserError


class SessionError(UserError):
    """Exit 2 when it reaches the CLI (``mnemon.errors``): a refusal, or a log the user's
    command cannot use as it stands."""


class Refusal(SessionError):
    """A refusal that names the state; sent to the model as an error tool result."""


class LogRefused(SessionError):
    def __init__(self, path: str, line: int, why: str, offset: int | None = None):
        self.path, self.line, self.why, self.offset = path, line, why, offset
        super().__init__(f"{path}:{line}: {why}")


class LogCorrupt(SessionError):
    def __init__(self, path: str, offset: int, why: str):
        self.path, self.offset, self.why = path, offset, why
        super().__init__(f"{path} at offset {offset}: {why}")


class DigestMismatch(LogCorrupt):
    def __init__(self, path: str, offset: int, expected: str, actual: str):
        super().__init__(path, offset, f"digest mismatch (expected {expected}, found {actual}): "
                                       "the file was edited, rotated or copied over")
        self.expected, self.actual = expected, actual


class AncestorUnreadable(SessionError):
    def __init__(self, path: str, why: str):
        self.path, self.why = path, why
        super().__init__(f"{path}: {why}")


class LogClosed(SessionError):
    pass


class LogBusy(SessionError):
    """Another writer holds the log: one agent's log has one writer, process-wide and across
    processes (an advisory lock on the open file)."""


class LogWriteFailed(SessionError):
    """An append or an fsync failed (a full disk, an I/O error). The log keeps only whole
    records: a partial line is cut off again; after a failed fsync the log takes no more
    appends, since what the kernel dropped cannot be known."""


class LogChanged(LogWriteFailed):
    """The file changed under its writer — it shrank (log rotation with ``copytruncate``, a
    ``> file``), grew by bytes the writer did not write, lost its name, or no longer ends with
    the record the writer wrote last. The writer refuses this append and every later one: a
    record written past damage it has not seen would leave a log that folds and is wrong."""
