"""The transcript door: ``index``, ``read`` and ``grep`` over everything a lineage recorded.

Read-only. The door answers the record, not what was sent in its place: a departed turn (under a
residue, withdrawn by a clear or rewind) is read back from the file that holds it — this agent's
log or the ancestor file its Pointer names, opened through the caller's ``sources`` (confined to
the run root) and digest-checked before anything is parsed.

One job per module:

* ``api`` — the ``Door``: resolving a request into owned ``Want`` tuples (under the agent's lock
  for a live agent) and the sync and async entry points;
* ``turns`` — the ``turns`` argument and the selection it names;
* ``index`` — index rows;
* ``read`` — reading wanted turns through the caller's opener, digest-checked;
* ``pattern`` — the compiled pattern, its required literal and raw forms, a record's texts;
* ``hits`` — the kept hits and the total, and matching one decoded record;
* ``grep`` — one sequential pass per file over the wanted records;
* ``scan`` — the raw scan: the literal found in raw bytes, bulk counting in C.

Names load on first use (``from mnemon.session.door import Door`` imports ``api`` and what it
needs, nothing more).
"""

from __future__ import annotations

TYPE_CHECKING = False  # as typing's, without importing typing (~2 ms of every start)

from ..._lazy import attach

_WHERE = {
    "Door": ".api",
    "Want": ".turns",
    "index": ".api",
    "read": ".api",
    "grep": ".api",
    "parse_turns": ".turns",
    "required_literal": ".literal",
    "grep_wants": ".grep",
    "read_wants": ".read",
    "GREP_HITS": "..constants",
    "GREP_LINE_BYTES": "..constants",
    "GREP_TIMEOUT_S": "..constants",
    # for tests and benches that reach inside
    "_Matcher": ".pattern",
    "_texts": ".pattern",
}

__getattr__, __dir__, _names = attach(__name__, _WHERE)
__all__ = ["Door", "Want", "index", "read", "grep", "parse_turns", "required_literal",
           "GREP_HITS", "GREP_LINE_BYTES", "GREP_TIMEOUT_S"]

if TYPE_CHECKING:
    from ..constants import GREP_HITS, GREP_LINE_BYTES, GREP_TIMEOUT_S
    from .api import Door, grep, index, read
    from .grep import grep_wants
    from .literal import required_literal
    from .pattern import _Matcher, _texts
    from .read import read_wants
    from .turns import Want, parse_turns
