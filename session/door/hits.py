"""A grep's answer: the first GREP_HITS hits by (turn, record, line) and the total, and the
matching of one decoded record into it."""

from __future__ import annotations

from collections.abc import Sequence

from ..constants import GREP_HITS
from ..errors import Refusal
from ..records import DECODE_ERRORS, decode
from .pattern import _clip, _Matcher, _texts
from .turns import Want


class _Hits:
    """The first GREP_HITS hits by (turn, record, line) and the total, in bounded memory."""

    def __init__(self) -> None:
        self.kept: list[tuple[tuple[int, int, int], int, str]] = []
        self.total = 0
        self.worst: tuple[int, int, int] | None = None

    def add(self, key: tuple[int, int, int], tid: int, line: str) -> None:
        self.total += 1
        if self.worst is not None and key > self.worst:
            return
        self.kept.append((key, tid, _clip(line)))
        if len(self.kept) >= 2 * GREP_HITS:
            self._trim()

    def _trim(self) -> None:
        self.kept.sort(key=lambda h: h[0])
        del self.kept[GREP_HITS:]
        if len(self.kept) == GREP_HITS:
            self.worst = self.kept[-1][0]

    def answer(self) -> dict:
        self._trim()
        return {"hits": [{"turn": tid, "line": line} for _, tid, line in self.kept],
                "total": self.total}


def _grep_record(raw, source: str, off: int, wi: int, ri: int, seq: int,
                 wants: Sequence[Want], m: _Matcher, hits: _Hits) -> int:
    try:
        rec = decode(raw)
    except DECODE_ERRORS as e:
        raise Refusal(f"cannot read {source} at offset {off}: not a record ({e})") from None
    tid = wants[wi][0]
    if hits.worst is not None and (wi, ri) > hits.worst[:2]:
        hits.total += sum(m.count(text) for text in _texts(rec))  # past the kept hits: count
        return seq
    for text in _texts(rec):
        for line in m.lines(text):
            hits.add((wi, ri, seq), tid, line)
            seq += 1
    return seq


