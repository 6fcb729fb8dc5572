"""Reading a JSON-lines recording into numbered objects, recovering what a damaged file still holds.

Three of the four formats (neutral, Claude Code, Codex) are JSON lines, and real recordings are not
always clean: a record appended without a newline glues two objects onto one line, a recorder that
died leaves half a line, a stray write leaves a line that is not JSON at all. Refusing the whole file
for one such line would lose every other turn in it, so this module keeps every JSON object it can
find and names each line (or part of one) it had to leave out, as a :class:`~.model.SkippedLine`.
Only a file in which not one line holds a JSON object is refused.

What counts as a readable line is decided here once, for every line format and for detection.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .model import SkippedLine, TrajectoryFormatError

_DECODER = json.JSONDecoder()
_BLANK = " \t\r\n"


def split_values(line: bytes) -> tuple[list[Any], str | None]:
    """The JSON values one line holds, in order, and why the rest of it was not read (``None``: all was).

    A line normally holds one value. Two or more written back to back (``{…}{…}``, with or without
    whitespace between) are all returned. Text after the last value that does not parse ends the
    scan: the values before it are kept and the reason names how many there were.
    """
    try:
        return [json.loads(line)], None
    except ValueError:
        pass  # not one value: several glued together, or damaged
    try:
        text = line.decode("utf-8-sig")  # (a byte-order mark opens some files; json.loads allows it too)
    except UnicodeDecodeError:
        return [], "not JSON (not UTF-8 text)"
    values: list[Any] = []
    i, end = 0, len(text)
    while True:
        while i < end and text[i] in _BLANK:
            i += 1
        if i == end:
            return values, None
        try:
            value, i = _DECODER.raw_decode(text, i)
        except ValueError:
            if not values:
                return [], "not JSON"
            n = len(values)
            return values, f"text after {n} JSON value{'s' if n > 1 else ''} is not JSON"
        values.append(value)


class JsonLines:
    """The objects of a JSON-lines file with their 1-based line numbers, and the lines left out.

    Attributes:
        objects: ``(line number, object)`` in file order; a line holding several objects gives
            several pairs with the same number.
        skipped: every line, or tail of a line, that gave no object, with the reason.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.objects: list[tuple[int, dict[str, Any]]] = []
        self.skipped: list[SkippedLine] = []
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise TrajectoryFormatError(path, f"cannot read: {exc.strerror or exc}") from None
        lines = raw.split(b"\n")
        torn_tail = not raw.endswith(b"\n")  # the last line was never finished: a recorder died mid-write
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            values, rest = split_values(line)
            if rest is not None and torn_tail and number == len(lines):
                rest = "the last line is cut short (no newline ends the file)" if not values else \
                    f"the last line is cut short after {len(values)} JSON value{'s' if len(values) > 1 else ''}"
            for value in values:
                if isinstance(value, dict):
                    self.objects.append((number, value))
                else:
                    self._skip(number, f"a JSON {_json_kind(value)}, not an object")
            if rest is not None:
                self._skip(number, rest)
        if not self.objects and self.skipped:
            first = self.skipped[0]
            raise TrajectoryFormatError(
                path, f"nothing to import: no line holds a JSON object ({first.reason}"
                      f"{'' if len(self.skipped) == 1 else f'; {len(self.skipped) - 1} more skipped'})",
                line=first.line)

    def _skip(self, number: int, reason: str) -> None:
        self.skipped.append(SkippedLine(path=str(self.path), line=number, reason=reason))


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "string" if isinstance(value, str) else "array"


def read_lines(path: Path) -> JsonLines:
    """Read ``path`` as JSON lines; see :class:`JsonLines`.

    Raises:
        TrajectoryFormatError: the file cannot be read, or not one of its lines holds a JSON object.
    """
    return JsonLines(path)
