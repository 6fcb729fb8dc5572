"""The ``Door``: one agent's transcript, through ``index``, ``read`` and ``grep``.

The door reads a *table* — the agent's live ``Context``, or, from outside a run, the columnar
``session.checkpoint.Table`` of its fold — and the files its pointers name, through the
``sources`` opener its caller gives (``session.paths.Sources`` by default). It never folds a log
and never finds an ancestor on its own: the caller (``lineage.view.open_door`` from outside,
the supervisor for a live agent) decides both.

Pointers resolve lazily: a turn is read through its own source only when asked for, so a turn
whose file is intact reads even when another ancestor's file is gone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..constants import GREP_TIMEOUT_S
from ..errors import Refusal
from ..paths import Sources
from .index import rows as _rows
from .read import Opener, load_records, read_wants
from .turns import Want, _no_gc, select as _select

# the grep's modules (the regex engine, the raw scan) load on the first grep: ``read`` and
# ``index`` from outside do not pay for them


def _cache(ctx):
    from .grep import _cache

    return _cache(ctx)


def grep_wants(*args, **kwargs):
    from .grep import grep_wants

    return grep_wants(*args, **kwargs)


def _Matcher(*args):
    from .pattern import _Matcher

    return _Matcher(*args)


class Door:
    """The door onto one agent's transcript.

    ``own=True`` is the agent's own (model-facing) door: it refuses the turn in hand, which is
    still being written, and grep skips it. From outside (the CLI) every recorded turn reads.
    ``seam`` is the agent's lock; the ``a*`` entry points resolve under it and read after it is
    released, in a worker thread. ``sources`` opens the files pointers name (default: confined
    to ``root``).
    """

    def __init__(self, root: Path, ctx, *, own: bool = False, seam=None,
                 sources: Opener | None = None, reopen: Callable[[], Any] | None = None):
        self.root = Path(root)
        # from outside: makes the table afresh when a checkpointed one proves damaged in use
        self.reopen = reopen
        self.ctx = ctx
        self.own = own
        self.seam = seam
        self.sources: Opener = sources if sources is not None else Sources(self.root)
        self.torn: Any = None  # from outside: the TornTail left by a crash mid-append, if any

    @classmethod
    def of_agent(cls, root: Path, agent, *, own: bool = True,
                 sources: Opener | None = None) -> "Door":
        """The door of a live ``AgentLog`` (its own, model-facing door by default)."""
        return cls(root, agent.ctx, own=own, seam=agent.seam, sources=sources)

    @property
    def _live(self) -> bool:
        return hasattr(self.ctx, "step")  # a Context, not a checkpointed table

    # ------------------------------------------------------------------ resolving (under the lock)

    def _in_hand(self) -> int | None:
        return self.ctx.in_hand if self.own else None

    def _ids(self):
        if not self._live:
            return self.ctx.ids()
        turns = self.ctx.turns
        return [t.id for t in turns] if type(turns) is list else turns.ids  # columns: no Turn

    def positions(self, turns: Any = None) -> list[int]:
        """Positions of the turns a ``turns`` argument names, in id order."""
        if turns is None and self._live:
            hand = self._in_hand()
            ids = self._ids()
            return [i for i in range(len(ids)) if ids[i] != hand]
        return _select(self._ids(), turns, self._in_hand(), self.ctx.latest)

    def select(self, turns: Any = None) -> list:
        """The turns a ``turns`` argument names, in id order (refusals name the state)."""
        at = self.ctx.turns.__getitem__ if self._live else self.ctx.turn_at
        return [at(i) for i in self.positions(turns)]

    def resolve(self, turns: Any = None):
        """Owned ``(turn, source, loci)`` for the turns named; the only step under the lock."""
        ctx = self.ctx
        if not self._live:  # a checkpointed table never changes: its wants are views
            if turns is None and not self.own:
                return ctx.wants(None)
            return ctx.wants(self.positions(turns))
        hand = ctx.in_hand
        if turns is None:  # the whole transcript: the inherited part is resolved once
            memo = _cache(ctx)
            turns = ctx.turns
            with _no_gc():
                own = [turns.want(i) for i in range(memo["n"], len(turns))] \
                    if type(turns) is not list else \
                    [(t.id, t.source, t.loci) for t in turns[memo["n"]:]]
                if self.own:
                    own = [w for w in own if w[0] != hand]
                return memo["prefix"] + [
                    w if w[0] != hand else (w[0], w[1], tuple(w[2])) for w in own]
        sel = self.select(turns)
        with _no_gc():  # a tuple per turn: without this, cyclic GC walks the whole table
            return [(t.id, t.source, t.loci if t.id != hand else tuple(t.loci)) for t in sel]

    def _records(self, t) -> list | None:
        """A resident turn's records when the table keeps loci only (for the index's blocks);
        None when its file cannot be read (the index is the table's: it does not refuse)."""
        try:
            return load_records(self.sources, (t.id, t.source, t.loci))
        except Refusal:
            return None

    # ------------------------------------------------------------------ sync calls

    def _once_more(self, call: Callable[[], Any]):
        """Run ``call``; a checkpointed table whose column proves damaged in use (the columns
        are digest-checked block by block when first read) is made afresh and ``call`` runs
        again, so a damaged checkpoint never changes an answer."""
        try:
            return call()
        except Exception as e:
            if self._live or self.reopen is None or type(e).__name__ != "Stale":
                raise
        self.ctx = self.reopen()
        return call()

    def index(self, turns: Any = None) -> list[dict]:
        """Every turn (or the turns named), oldest first, as DESIGN.md's index rows."""
        return self._once_more(
            lambda: [r for chunk in self.index_chunks(turns) for r in chunk])

    def index_json(self, turns: Any = None):
        """The index as compact JSON, in byte slices — straight from a checkpointed table's
        printed rows; None when the table has none (then print ``index_chunks``)."""
        if self._live:
            return None
        return self._once_more(
            lambda: self.ctx.index_json(None if turns is None else self.positions(turns)))

    def index_chunks(self, turns: Any = None, chunk: int = 8192):
        """The index rows in lists of at most ``chunk``: printing a long index stays in flat
        memory (a checkpointed table makes them straight from its columns)."""
        if not self._live:
            pos = None if turns is None else self.positions(turns)
            yield from self._once_more(lambda: self.ctx.rows(pos, chunk))
            return
        sel = self.ctx.turns if turns is None else self.select(turns)
        for a in range(0, len(sel), chunk):
            yield _rows(sel[a:a + chunk], self._records)

    def read(self, turns: Any) -> list[dict]:
        """Each named turn's own protocol records, objects exactly as in the file."""
        if turns is None:
            raise Refusal("name the turns to read, such as \"3,5-9\"")
        return self._once_more(lambda: read_wants(self.sources, self.resolve(turns)))

    def grep(self, pattern: str, turns: Any = None, *, timeout_s: float = GREP_TIMEOUT_S,
             shortcut: bool = True) -> dict:
        """``{"hits": [{"turn", "line"}], "total"}`` — at most GREP_HITS hits, oldest first."""
        _Matcher(pattern, timeout_s, shortcut)  # a bad pattern is refused first
        return self._once_more(lambda: grep_wants(
            self.sources, self.resolve(turns), pattern, _matcher=_Matcher(pattern, timeout_s,
                                                                         shortcut),
            _memo=_cache(self.ctx) if self._live else None))

    # ------------------------------------------------------------------ model-facing (async)

    async def _resolve_locked(self, turns: Any):
        seam = self.seam
        if seam is None:
            return self.resolve(turns)
        import trio  # (here: the door from outside never loads Trio)

        try:  # a free seam is taken without a checkpoint (one pass of the scheduler fewer
            seam.acquire_nowait()  # per call: the answer is often small enough to read here)
        except trio.WouldBlock:
            await seam.acquire()
        try:
            return self.resolve(turns)
        finally:
            seam.release()

    async def aindex(self) -> list[dict]:
        if self.seam is None:
            return self.index()
        async with self.seam:
            return self.index()

    async def aread(self, turns: Any) -> list[dict]:
        import trio

        if turns is None:
            raise Refusal("name the turns to read, such as \"3,5-9\"")
        wants = await self._resolve_locked(turns)
        if _small(wants):
            return read_wants(self.sources, wants)
        return await trio.to_thread.run_sync(read_wants, self.sources, wants,
                                             abandon_on_cancel=True)

    async def agrep(self, pattern: str, turns: Any = None, *,
                    timeout_s: float = GREP_TIMEOUT_S) -> dict:
        import trio

        matcher = _Matcher(pattern, timeout_s, True)
        wants = await self._resolve_locked(turns)
        memo = _cache(self.ctx) if self._live else None
        sources = self.sources
        if _small(wants):  # here, with a short budget of regex time: a runaway pattern
            # stalls the loop at most INLINE_REGEX_S, then starts again in a worker thread
            matcher.left = min(timeout_s, INLINE_REGEX_S)
            try:
                return grep_wants(sources, wants, pattern, _matcher=matcher, _memo=memo)
            except Refusal:
                if not matcher.ran_out or timeout_s <= INLINE_REGEX_S:
                    raise
            matcher.left, matcher.ran_out = timeout_s - INLINE_REGEX_S, False
        return await trio.to_thread.run_sync(
            lambda: grep_wants(sources, wants, pattern, _matcher=matcher, _memo=memo),
            abandon_on_cancel=True)


INLINE_BYTES = 256 * 1024
"""A model-facing read or grep of at most this many bytes of records runs on the Trio thread
(a grep's regex with at most ``INLINE_REGEX_S`` of time):
from the page cache that is ~0.1 ms, less than handing it to a worker thread and back costs
(decision 0262). Anything larger goes to a thread, so a long grep stalls no other agent. (The
loop's appends are synchronous writes already, so storage slow enough to make a 256 KiB read
from it stall the loop would stall every append too.)"""


INLINE_REGEX_S = 0.02
"""The regex time a grep run on the Trio thread may take before it is handed to a thread."""


def _small(wants: list) -> bool:
    n, limit = 0, INLINE_BYTES
    for w in wants:
        for locus in w[2]:
            n += locus[1]
            if n > limit:
                return False
    return True


# --------------------------------------------------------------------------- module-level calls


def index(ctx) -> list[dict]:
    """Every turn of a ``Context``, oldest first, as the ``transcript index`` rows."""
    return _rows(ctx.turns)


def read(root: Path, ctx, turns: Any, *, own: bool = False,
         sources: Opener | None = None) -> list[dict]:
    return Door(root, ctx, own=own, sources=sources).read(turns)


def grep(root: Path, ctx, pattern: str, turns: Any = None, *, own: bool = False,
         timeout_s: float = GREP_TIMEOUT_S, sources: Opener | None = None) -> dict:
    return Door(root, ctx, own=own, sources=sources).grep(pattern, turns, timeout_s=timeout_s)


__all__ = ["Door", "Want", "index", "read", "grep"]
