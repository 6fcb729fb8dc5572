"""An agent's log as a person reads it: every record in the order it was written, for the page's
conversation view (``GET /v1/agents/{id}/transcript``).

The door answers "what is turn 7"; a person reading along wants the whole log — the prompt, each
answer, each tool call and its result, each eviction where it fell, each mark, approval and
typed output in its place — and then only what came after. So this reads the log itself from a
byte offset (the same positions the event ids name), records as in the file, with two changes
that keep a page responsive: a long string is clipped (the entry says so; the whole turn is one
``read`` away), and an ``Inherited`` record's links name the ancestor each turn comes from
instead of carrying its loci. Pure reading: nothing here writes, and the on-disk format is
untouched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from ...lineage.runroot import AGENT_ID
from ...session.log import iter_lines

CLIP = 8192  # characters of one string a page is sent; past that the string is clipped
LIMIT = 2000  # records in one answer by default
MAX_LIMIT = 10_000
MAX_BYTES = 8 << 20  # bytes of log one answer reads at most (a longer log is paged)

_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeDecodeError)


def _clip(value: Any, limit: int) -> tuple[Any, bool]:
    """``value`` with every string longer than ``limit`` cut to it (and ``…``); whether any was."""
    if isinstance(value, str):
        return (value[:limit] + "…", True) if len(value) > limit else (value, False)
    if isinstance(value, list):
        out, cut = [], False
        for v in value:
            v, c = _clip(v, limit)
            out.append(v)
            cut = cut or c
        return out, cut
    if isinstance(value, dict):
        res, cut = {}, False
        for k, v in value.items():
            v, c = _clip(v, limit)
            res[k] = v
            cut = cut or c
        return res, cut
    return value, False


def ancestor_of(source: str) -> str | None:
    """The agent whose log ``source`` (``agents/<id>/record.jsonl``) is; None when not one."""
    parts = Path(source).parts
    if len(parts) >= 2 and parts[-1] == "record.jsonl" and AGENT_ID.match(parts[-2]):
        return parts[-2]
    return None


def _shape(rec: dict[str, Any]) -> dict[str, Any]:
    """What a person reads of one record (before clipping)."""
    t = rec.get("t")
    if t == "Inherited":
        turns = []
        for link in rec.get("turns") or ():
            row = dict(link.get("row") or {})
            at = link.get("at") or {}
            row["from"] = ancestor_of(str(at.get("source", "")))
            turns.append(row)
        return {"t": t, "turns": turns, "residues": rec.get("residues") or [],
                "id_floor": rec.get("id_floor")}
    if t == "SessionStarted" and isinstance(rec.get("tools"), list):
        rec = dict(rec)  # the tools' names, not their whole schemas
        rec["tools"] = [tool.get("name") if isinstance(tool, dict) else str(tool)
                        for tool in rec["tools"]]
    return rec


def transcript(path: Path, *, after: int = 0, limit: int = LIMIT,
               clip: int = CLIP) -> dict[str, Any]:
    """The records of the log at ``path`` from byte ``after`` on: ``{"entries": [{"offset",
    "record", "clipped"?}], "next", "more"}``. ``next`` is where the record after the last one
    given starts (pass it back as ``after``); ``more`` says the answer stopped at ``limit``
    records or ``MAX_BYTES`` of log before the end. A line that is not a record is given as
    ``{"t": "Unreadable"}`` at its offset (``mnemon verify`` names it), never skipped silently."""
    entries: list[dict[str, Any]] = []
    nxt, more, read = after, False, 0
    size = path.stat().st_size
    if after > size:
        raise ValueError(f"after={after} is past the end of the log ({size} bytes)")
    if after:
        with open(path, "rb") as f:
            f.seek(after - 1)
            if f.read(1) != b"\n":
                raise ValueError(f"after={after} is not where a record starts")
    for off, line in iter_lines(path, start=after):
        if len(entries) >= limit or (read and read + len(line) > MAX_BYTES):
            more = True
            break
        read += len(line) + 1
        nxt = off + len(line) + 1
        try:
            rec = msgspec.json.decode(line)
        except _DECODE_ERRORS:
            rec = None
        if not isinstance(rec, dict) or not isinstance(rec.get("t"), str):
            entries.append({"offset": off, "record": {"t": "Unreadable", "bytes": len(line)}})
            continue
        shaped, cut = _clip(_shape(rec), clip)
        entry = {"offset": off, "record": shaped}
        if cut:
            entry["clipped"] = True
        entries.append(entry)
    return {"entries": entries, "next": nxt, "more": more}


__all__ = ["transcript", "ancestor_of", "CLIP", "LIMIT", "MAX_LIMIT"]
