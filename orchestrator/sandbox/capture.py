"""A command's output as the model reads it: the first and the last bytes up to a cap, the
total counted, and the text made safe to show anywhere.

A build's first error is at the head and its verdict at the tail, so both are kept: half the
cap each. Whatever comes between is counted, not kept — memory stays at the cap however much a
command writes. Pure: bytes in, text out.
"""

from __future__ import annotations

import re

__all__ = ["Capture", "printable"]

#: control characters other than tab and newline (C0, DEL, C1): shown as ``\\xNN`` so that
#: output a command chose cannot move a terminal's cursor, recolour it or ring it when the
#: answer is printed (a character class: linear however hostile the text)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with ``\\r\\n`` as ``\\n`` and every other control character escaped."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text.replace("\r\n", "\n"))


class Capture:
    """Head and tail of a byte stream, ``cap`` bytes in all; ``total`` counts every byte fed."""

    __slots__ = ("cap", "total", "_head", "_tail")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.total = 0
        self._head = bytearray()
        self._tail = bytearray()

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.cap // 2 - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            keep = self.cap - self.cap // 2
            if len(self._tail) > 2 * keep:  # trimmed in steps, not on every chunk
                del self._tail[:len(self._tail) - keep]

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        """The output decoded (UTF-8, an invalid byte replaced), the omitted middle said in one
        line with its size and the total."""
        if not self.truncated:
            return printable((bytes(self._head) + bytes(self._tail)).decode("utf-8", "replace"))
        keep = self.cap - self.cap // 2
        tail = bytes(self._tail[-keep:])
        omitted = self.total - len(self._head) - len(tail)
        head_text = bytes(self._head).decode("utf-8", "replace")
        tail_text = tail.decode("utf-8", "replace")
        return (printable(head_text) + f"\n[… {omitted} bytes omitted of {self.total} …]\n"
                + printable(tail_text))
