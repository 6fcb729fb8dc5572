"""What the context table is made of: the turn and the residue entry.

The lowest layer of the table, shared by everything above it — the fold (``session.context``),
the columns (``session.columns``), rendering (``session.render``), eviction, the door and the
checkpoint — and importing none of them, so that each of those can import it and none needs
another to know what a row is.

* ``Turn`` — one turn of the table, *Here* (its records in memory) or *There* (a Pointer and a
  departure); its role, state and origin take the values ``session.vocab`` names;
* ``ResidueEntry`` — what an eviction leaves in the table, nested by containment;
* a turn's label (``clip_label``) and the labels a residue keeps (``newest_labels``);
* ``Loader``, how a turn that lies in another file is read through its Pointer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import msgspec

from .constants import OPENING_CHARS
from .records import Locus, Pointer, Record, Residue

Loader = Callable[[Pointer], list[Record]]
"""Loads an inherited turn's records through its Pointer (digest-checked)."""


def clip_label(text: str) -> str:
    """A turn's label: its opening text on one line, clipped to OPENING_CHARS characters."""
    return text[:OPENING_CHARS].replace("\r", " ").replace("\n", " ")


NO_SWEEPS: Any = MappingProxyType({})
"""A turn's sweeps until its first one: shared and read-only, so opening a turn allocates no dict
(a sweep gives the turn a dict of its own)."""


class Turn(msgspec.Struct, gc=False, eq=False, repr_omit_defaults=True):
    """One turn of the table. A msgspec Struct: made once per turn by every resume, its
    constructor is native; it holds no reference cycle, so the cyclic GC never scans it."""

    id: int
    role: str  # "user" | "assistant"
    label: str
    bytes: int
    state: str  # "resident" | "evicted" | "withdrawn"
    source: str  # the log file (relative to the run root) that first recorded it
    loci: list[Locus]
    origin: str = "own"  # "own" | "inherited"
    records: list[Record] | None = None  # Here when not None
    swept: dict[int, str] = NO_SWEEPS  # block index -> replacement
    under: "ResidueEntry | None" = None  # the residue that took it (nesting resolved on read)

    @property
    def residue(self) -> tuple[int, int] | None:
        """The outermost residue over it (kept when it is withdrawn later), or None."""
        return None if self.under is None else self.under.outermost().span

    @property
    def held(self) -> str:
        if self.state == "resident" and self.swept:
            return "swept"
        return self.state

    @property
    def pointer(self) -> Pointer:
        return Pointer(self.source, list(self.loci))

    @property
    def here(self) -> bool:
        return self.records is not None

    def _key(self) -> tuple:
        return (self.id, self.role, self.label, self.bytes, self.state, self.source, self.loci,
                self.origin, self.records, self.swept, self.residue)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Turn) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]


@dataclass(slots=True)
class ResidueEntry:
    span: tuple[int, int]
    note: str | None
    by: str
    weight: int  # bytes of the turns under it when they left (nested included, withdrawn not)
    withdrawn: bool = False
    labels: tuple[str, ...] = ()  # labels of the user turns it covers, newest first, at most 3
    parent: "ResidueEntry | None" = field(default=None, compare=False, repr=False)
    _msg_len: int | None = field(default=None, compare=False, repr=False)

    @property
    def first(self) -> int:
        return self.span[0]

    @property
    def last(self) -> int:
        return self.span[1]

    @property
    def outer(self) -> bool:
        """Not swallowed by a later residue."""
        return self.parent is None

    def outermost(self) -> "ResidueEntry":
        root = self
        while root.parent is not None:
            root = root.parent
        node = self
        while node.parent is not None and node.parent is not root:  # path compression
            node.parent, node = root, node.parent
        return root

    def contains(self, other: tuple[int, int]) -> bool:
        return self.span[0] <= other[0] and other[1] <= self.span[1]

    def as_record(self) -> Residue:
        return Residue(span=self.span, note=self.note, by=self.by)  # type: ignore[arg-type]


LABELS_LISTED = 3


def newest_labels(items: "Iterator[Turn | ResidueEntry] | list[Turn | ResidueEntry]") -> tuple[str, ...]:
    """Labels of the user turns among items (in id order), newest first, at most 3."""
    out: list[str] = []
    for it in reversed(list(items)):
        if isinstance(it, Turn):
            if it.role == "user" and it.label and it.state != "withdrawn":
                out.append(it.label)
        else:
            out.extend(it.labels)
        if len(out) >= LABELS_LISTED:
            break
    return tuple(out[:LABELS_LISTED])


FrontierItem = "Turn | ResidueEntry"

__all__ = ["Turn", "ResidueEntry", "Loader", "clip_label", "newest_labels", "LABELS_LISTED",
           "NO_SWEEPS"]
