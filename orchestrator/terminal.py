"""Text bound for a terminal: the characters that drive one made visible.

A transcript holds what models and tools wrote; a line of it printed raw can clear the screen,
set the window's title, ring the bell, move the cursor or overwrite itself with ``\\r`` — or
reorder what is shown with Unicode's bidirectional controls. Every command that prints such
text for a person passes it through ``shown``, which writes each of those characters as
``repr`` would (``\\x1b``, ``\\r``, ``\\x9b``, ``\\u202e``): what ``mnemon transcript index``
does to its labels, the one rule for every view. ``--json`` output is left alone (JSON escapes
C0 itself, and a program reads it).

``for_stream`` is for what is data as much as a view (an answer, a CSV of results): escaped on
a terminal, written as it came when piped, so a program receives the model's own bytes
(decision 0317).

Cheap: ``str.isprintable`` answers the common case at C speed; only text that holds a
character it refuses is translated (``str.translate``, C speed too).
"""

from __future__ import annotations

TYPE_CHECKING = False  # as typing's, without importing typing (~2 ms of every start)
if TYPE_CHECKING:
    from typing import TextIO

__all__ = ["shown", "for_stream", "on_terminal"]

#: C0 but for tab and newline, DEL, C1 (``\x9b`` is CSI in 8-bit), and the Unicode controls that
#: reorder or break what is shown (marks, embeddings, overrides, isolates, line separators)
_UNSAFE = [*range(0x00, 0x09), *range(0x0b, 0x20), 0x7f, *range(0x80, 0xa0),
           0x200e, 0x200f, 0x2028, 0x2029, *range(0x202a, 0x202f), *range(0x2066, 0x206a)]
_TABLE = {c: repr(chr(c))[1:-1] for c in _UNSAFE}


def shown(text: str) -> str:
    """``text`` with every character that drives a terminal written as ``repr`` writes it;
    newlines and tabs kept."""
    if text.isprintable():
        return text
    return text.translate(_TABLE)


def on_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream: not a terminal
        return False


def for_stream(text: str, stream: TextIO) -> str:
    """``text`` as ``stream`` should receive it: ``shown`` on a terminal, as it is otherwise."""
    return shown(text) if on_terminal(stream) else text
