"""
The cache model: a provider's prompt-prefix caching, reproduced over a rendered request (pure).

A request is flattened into blocks in the order the provider hashes them — each tool
definition, the system prompt, then every content block of every message — and each block gets
its byte size (compact JSON, ``session.records.compact``) and a running prefix hash (blake3,
chained, seeded with the model name). A cache entry is a prefix hash written at a breakpoint.

For one request, given its breakpoints (at most 4):

* **Read.** A breakpoint at block ``p`` finds an entry at any block ``j`` with
  ``p − LOOKBACK ≤ j ≤ p`` whose prefix hash is this request's hash at ``j`` (the 20-block
  lookback). The request reads the longest prefix any breakpoint finds; reading refreshes the
  entry's TTL.
* **Write.** Every breakpoint past the read whose prefix reaches the minimum cacheable length
  writes (or refreshes) an entry; the tokens from the end of the read to the furthest such
  breakpoint are cache writes.
* **Input.** What lies after the furthest written breakpoint is uncached input.

So ``input + cache_read + cache_write`` is always every input token of the request. Entries live
for the TTL (5 minutes or 1 hour) after their last write or read. One ``CacheModel`` is shared by
every agent of a run, as a provider's cache is per account (and per model).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import accumulate
from typing import Any, Literal

import blake3
from msgspec import Struct

from ..session.records import Usage, compact

__all__ = [
    "LOOKBACK",
    "MAX_BREAKPOINTS",
    "TTL_S",
    "FlatBlock",
    "CacheEntry",
    "CacheModel",
    "flatten",
    "previous_request_len",
    "place_breakpoints",
]

LOOKBACK = 20
MAX_BREAKPOINTS = 4
TTL_S = {"5m": 300.0, "1h": 3600.0}


class FlatBlock(Struct, frozen=True):
    """One block of a flattened request."""

    section: Literal["tools", "system", "messages"]
    message: int | None
    """Index of the message it belongs to (None for tools and system)."""
    bytes: int
    prefix_hash: str
    """blake3 over the model name and every block up to and including this one (32 hex)."""


class CacheEntry(Struct, kw_only=True):
    position: int
    tokens: int
    expires_at: float


MEMO_MAX = 200_000  # blocks a ``CacheModel`` remembers before it starts over


def flatten(request: Any, *, model: str | None = None,
            heads: dict[tuple, tuple] | None = None,
            memo: dict[tuple, tuple] | None = None) -> list[FlatBlock]:
    """The request as blocks: each tool, the system prompt, each message's content blocks.

    ``heads`` (a ``CacheModel``'s memo) keeps the blocks of the tools and system prompt by
    their bytes: every agent of a run sends the same ones, so they are hashed once.

    ``memo`` (also the model's) makes an agent's next request cost what it added: a message
    block already hashed after the same prefix, with the same tag, is the same block object
    (the renderer shares unchanged turns' blocks between requests), so its size and chained
    hash are looked up, not encoded and hashed again. The entry holds the block, so its id is
    not reused while remembered. Blocks are not mutated once sent (the renderer's contract).
    """
    seed = (model if model is not None else (request.model or "")).encode()
    out: list[FlatBlock] = []
    h = b""

    def add(section: Literal["tools", "system", "messages"], message: int | None,
            value: Any, tag: str) -> None:
        nonlocal h
        if memo is not None:
            key = (h, id(value), tag)
            hit = memo.get(key)
            if hit is not None and hit[0] is value:
                h = hit[2]
                fb = hit[4]  # (the tag in the key fixes the section: only the index can move)
                out.append(fb if fb.message == message
                           else FlatBlock(section, message, hit[1], hit[3]))
                return
        hashed(section, message, value, tag)

    def hashed(section: Literal["tools", "system", "messages"], message: int | None,
               value: Any, tag: str) -> None:
        # A block not remembered: encoded, hashed after the prefix, and remembered. The tag
        # (section, role, message start) is hashed but not counted: it is what makes the same
        # text in another role or another message a different prefix.
        nonlocal h
        raw = compact(value)
        prev = h
        h = blake3.blake3(h + tag.encode() + b"\x00" + raw).digest()
        hx = h.hex()[:32]
        fb = FlatBlock(section, message, len(raw), hx)
        out.append(fb)
        if memo is not None:
            if len(memo) >= MEMO_MAX:
                memo.clear()
            # the block, its size, the hash after it, its hex, and the FlatBlock made of them
            # (frozen: the next request that holds the block at the same place takes it as is)
            memo[(prev, id(value), tag)] = (value, len(raw), h, hx, fb)

    head = key = None
    if heads is not None:
        tools = request.tools
        # the same tools list object (the harness keeps one per tool set) is looked up by
        # identity; any other by its bytes
        key = (seed, id(tools), request.system)
        head = heads.get(key)
        if head is None or head[2] is not tools:
            key = (seed, compact(list(tools)), request.system)
            head = heads.get(key)
            if head is not None:
                heads[(seed, id(tools), request.system)] = (head[0], head[1], tools)
    if head is not None:
        out.extend(head[0])
        h = head[1]
    else:
        h = blake3.blake3(b"mnemon-cache\x00" + seed).digest()
        for tool in request.tools:
            add("tools", None, tool, "tool")
        if request.system:
            add("system", None, {"type": "text", "text": request.system}, "system")
        if heads is not None:
            if len(heads) >= 64:
                heads.clear()
            heads[key] = (list(out), h, None)
            heads[(seed, id(request.tools), request.system)] = (list(out), h, request.tools)
    get = memo.get if memo is not None else None
    append = out.append
    for i, msg in enumerate(request.messages):
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        role = msg.get("role")
        tag, nxt = f"{role}:start", f"{role}:next"
        for block in content or ():
            if get is not None:  # ``add``'s memo hit, inlined: most blocks of a request
                hit = get((h, id(block), tag))
                if hit is not None and hit[0] is block:
                    h = hit[2]
                    fb = hit[4]
                    # the same place as when it was made, or the same block after an empty
                    # message (which moves the index, not the hash): a FlatBlock of its own
                    append(fb if fb.message == i else FlatBlock("messages", i, hit[1], hit[3]))
                    tag = nxt
                    continue
            hashed("messages", i, block, tag)  # (not ``add``: the memo was just asked)
            tag = nxt
    return out


def previous_request_len(request: Any, blocks: Sequence[FlatBlock] | None = None) -> int:
    """
    Where the previous request of an agent loop ended, when nobody says: everything but the
    last two messages (the assistant turn it produced and the user message answering it).
    0 when there are fewer than three messages.
    """
    if len(request.messages) < 3:
        return 0
    blocks = blocks if blocks is not None else flatten(request)
    keep = len(request.messages) - 2
    # every block but those of the last two messages (a list, not a generator: ~2x as fast)
    return len(blocks) - len([b for b in blocks
                              if b.section == "messages" and (b.message or 0) >= keep])


def place_breakpoints(blocks: Sequence[FlatBlock], previous_request_len: int = 0) -> list[int]:
    """
    Where the cache breakpoints go (indices into ``blocks``, a breakpoint at the end of that
    block): the end of the tools and system, the end of the previous request's messages, the
    last block; a spare slot goes inside the widest gap longer than LOOKBACK, LOOKBACK blocks
    after its start, so the entries stay within each other's reach. At most 4, sorted.
    Recompute for every request: after an eviction or a sweep the old places are stale.
    """
    n = len(blocks)
    if n == 0:
        return []
    anchors: set[int] = {n - 1}
    head = [i for i, b in enumerate(blocks) if b.section != "messages"]
    if head:
        anchors.add(head[-1])
    if 0 < previous_request_len <= n:
        anchors.add(previous_request_len - 1)
    points = sorted(anchors)
    while len(points) < MAX_BREAKPOINTS:
        starts = [-1] + points
        gaps = [(points[k] - starts[k], starts[k]) for k in range(len(points))]
        width, start = max(gaps, key=lambda g: (g[0], -g[1]))
        if width <= LOOKBACK:
            break
        points = sorted({*points, start + LOOKBACK})
    return points[:MAX_BREAKPOINTS]


class CacheModel:
    """
    The prefix cache of one account, shared by every agent of a run.

    Args:
        ttl: ``"5m"`` or ``"1h"``: how long an entry lives after its last write or read.
        min_prefix_tokens: a breakpoint whose prefix is shorter writes nothing (1024 for most
            Claude models).
        tokens_per_byte: the token estimate; 1 token per 4 bytes by default.
    """

    def __init__(self, *, ttl: str = "5m", min_prefix_tokens: int = 1024,
                 tokens_per_byte: float = 0.25, lookback: int = LOOKBACK,
                 memos: "tuple[dict[tuple, tuple], dict[tuple, tuple]] | None" = None) -> None:
        """``memos``: another model's ``memos`` to share (``flatten``'s heads and blocks): they
        depend on the blocks alone, never on what is cached, so a model that replays requests
        another has already seen — a projection on an empty cache — hashes only what is new."""
        if ttl not in TTL_S:
            raise ValueError(f"ttl must be one of {sorted(TTL_S)}, not {ttl!r}")
        self.ttl = ttl
        self.min_prefix_tokens = min_prefix_tokens
        self.tokens_per_byte = tokens_per_byte
        self.lookback = lookback
        self.entries: dict[str, CacheEntry] = {}
        self._heads: dict[tuple, tuple]  # see ``flatten``
        self._blocks: dict[tuple, tuple]  # see ``flatten``
        self._heads, self._blocks = memos if memos is not None else ({}, {})
        self._scan_at = math.inf  # no entry expires before this; entries only live longer

    @property
    def memos(self) -> "tuple[dict[tuple, tuple], dict[tuple, tuple]]":
        return self._heads, self._blocks

    def tokens(self, nbytes: int) -> int:
        return math.ceil(nbytes * self.tokens_per_byte)

    def usage_for(self, request: Any, output_tokens: int, now: float, *,
                  ttl: str | None = None, model: str | None = None) -> Usage:
        """
        What the provider would report for ``request`` sent at ``now`` (seconds on any
        monotonic clock), and the cache as it stands afterwards.
        """
        ttl_s = TTL_S[ttl or self.ttl]
        blocks = flatten(request, model=model, heads=self._heads, memo=self._blocks)
        if not blocks:
            return Usage(output_tokens=output_tokens)
        self._expire(now)
        # the bytes up to each block; tokens (``tokens``, inlined) only where they are asked:
        # at the breakpoints and the end
        sums = list(accumulate([b.bytes for b in blocks]))
        tpb, ceil = self.tokens_per_byte, math.ceil

        def cum(i: int) -> int:
            return ceil(sums[i] * tpb)

        points = request.breakpoints
        if points is None:
            points = place_breakpoints(blocks, previous_request_len(request, blocks))
        points = sorted({p for p in points if 0 <= p < len(blocks)})[-MAX_BREAKPOINTS:]

        read_end = -1
        get = self.entries.get
        for p in points:
            for j in range(p, max(-1, p - self.lookback - 1), -1):
                entry = get(blocks[j].prefix_hash)
                if entry is not None:
                    entry.expires_at = now + ttl_s
                    read_end = max(read_end, j)
                    break
        write_end = read_end
        for p in points:
            tokens = cum(p)
            if tokens < self.min_prefix_tokens:
                continue
            key = blocks[p].prefix_hash
            entry = self.entries.get(key)
            if entry is None:
                self.entries[key] = CacheEntry(position=p, tokens=tokens, expires_at=now + ttl_s)
                self._scan_at = min(self._scan_at, now + ttl_s)
            else:
                entry.expires_at = max(entry.expires_at, now + ttl_s)
            write_end = max(write_end, p)
        read = cum(read_end) if read_end >= 0 else 0
        written = cum(write_end) if write_end >= 0 else 0
        return Usage(
            input_tokens=cum(-1) - written,
            output_tokens=output_tokens,
            cache_read_tokens=read,
            cache_write_tokens=written - read,
        )

    def _expire(self, now: float) -> None:
        """Drop expired entries — scanning only once the earliest possible expiry has passed,
        so a run-wide cache costs O(1) per request between expiries, not O(entries)."""
        if now < self._scan_at:
            return
        earliest = math.inf
        for key in [k for k, e in self.entries.items() if e.expires_at <= now]:
            del self.entries[key]
        for e in self.entries.values():
            earliest = min(earliest, e.expires_at)
        self._scan_at = earliest
