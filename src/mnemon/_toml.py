"""Reading a TOML file, and the one line a user reads when it is not TOML.

Job files, policies, roles, MCP configurations and price tables are TOML that people write by
hand; a typo in any of them is the same mistake and gets the same answer, naming the file, the
line and the column (decision 0343)::

    job.toml: not valid TOML at line 3, column 9: invalid value

Each caller wraps ``TomlError`` in its own family (``JobError``, ``PolicyError``, …) with the
prefix it gives every message, and keeps its own words for a file it cannot open. It sits at the
package's base, beside ``_lazy``, because the price table (``providers``) reads TOML as well as
the orchestrator's files.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["TomlError", "decode", "load", "parse", "read_text"]

_AT = re.compile(r"^(?P<msg>.*) \(at line (?P<line>\d+), column (?P<col>\d+)\)$", re.S)
_END = re.compile(r"^(?P<msg>.*) \(at end of document\)$", re.S)


class TomlError(ValueError):
    """A file that is not TOML (or not UTF-8): one line with the file, line and column."""

    def __init__(self, path: str | Path, line: int, column: int, reason: str):
        self.path = str(path)
        self.line = line
        self.column = column
        self.reason = reason
        super().__init__(f"{self.path}: not valid TOML at line {line}, column {column}: {reason}")


def read_text(path: str | Path) -> str:
    """The file's text; ``OSError`` for a file that cannot be read (the caller words it),
    ``TomlError`` for bytes that are not UTF-8."""
    return decode(Path(path).read_bytes(), path)


def decode(raw: bytes, path: str | Path) -> str:
    """``raw`` as UTF-8 text; ``TomlError`` naming ``path`` and the first bad byte's place."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        before = raw[:e.start]
        line = before.count(b"\n") + 1
        column = e.start - (before.rfind(b"\n") + 1) + 1
        raise TomlError(path, line, column, f"not UTF-8 (byte 0x{raw[e.start]:02x})") from None


def parse(text: str, path: str | Path) -> dict[str, Any]:
    """``text`` read as TOML; ``TomlError`` naming ``path`` where it is not."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _error(e, text, path) from None


def load(path: str | Path) -> dict[str, Any]:
    """The TOML file at ``path``: ``OSError`` when it cannot be read, else ``TomlError``."""
    return parse(read_text(path), path)


def _error(e: tomllib.TOMLDecodeError, text: str, path: str | Path) -> TomlError:
    message = str(e)
    line = getattr(e, "lineno", None)  # Python 3.14 gives the position as attributes
    column = getattr(e, "colno", None)
    reason = getattr(e, "msg", None)
    if line is None or column is None or not isinstance(reason, str):
        at, end = _AT.match(message), _END.match(message)
        if at:
            reason, line, column = at["msg"], int(at["line"]), int(at["col"])
        else:
            reason = end["msg"] if end else message
            lines = text.split("\n")
            line, column = len(lines), len(lines[-1]) + 1
    return TomlError(path, line, column, reason[:1].lower() + reason[1:])
