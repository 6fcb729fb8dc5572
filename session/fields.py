"""The context table's fields and projections as its parts read them, for the type checker.

``Context`` is one class kept in three modules: its own (the state, lookups, projections and
the applying) and two bases, ``Judgement`` (``session.judge``) and ``Linking``
(``session.inherited``), which read and write the fields ``Context.__init__`` sets. Those bases
cannot import ``Context`` (it imports them), so this class declares what they rely on, and
they take it as their base only while type checking (``if TYPE_CHECKING``): at run time their
base stays ``object`` and nothing here is imported. mypy then checks each part's use of the
table, and ``Context`` against this declaration (decision 0351). A plain class, not a
``Protocol``: mypy lets a method of a protocol's subclass redeclare a field it assigns
(``self.in_hand = None`` would make it ``None``), never one of a class's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .blocks import BlockRef
from .records import Inherited, SessionStarted
from .turn import Loader, ResidueEntry, Turn


class TableFields:
    """What ``Context`` holds and answers, as ``Judgement`` and ``Linking`` use it."""

    source: str
    loader: Loader | None
    lazy: bool
    turns: list[Turn]
    _by_id: dict[int, int]
    residues: list[ResidueEntry]
    marks: dict[tuple[int, int], str]
    pending: dict[str, int]
    approvals: dict[str, list[Any]]
    reach: int
    id_floor: int
    in_hand: int | None
    started: SessionStarted | None
    protocol_seen: bool
    records_folded: int
    _hist: int
    edits: int

    @property
    def latest(self) -> int | None:
        raise NotImplementedError

    def turn(self, tid: int) -> Turn | None:
        raise NotImplementedError

    def next_id(self) -> int:
        raise NotImplementedError

    def blocks(self, tid: int) -> list[BlockRef]:
        raise NotImplementedError

    def outermost_residues(self) -> list[ResidueEntry]:
        raise NotImplementedError

    def earliest_resident(self) -> int | None:
        raise NotImplementedError

    def spill(self) -> None:
        raise NotImplementedError

    def history_bytes_projection(self) -> int:
        raise NotImplementedError

    def _items(self, lo: int, hi: int) -> Iterator[Turn | ResidueEntry]:
        raise NotImplementedError

    def _index_from(self, tid: int, lo: int = 0) -> int:
        raise NotImplementedError

    def _index_after(self, tid: int, lo: int = 0) -> int:
        raise NotImplementedError

    def _check_inherited(self, rec: Inherited) -> None:
        raise NotImplementedError


__all__ = ["TableFields"]
