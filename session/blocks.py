"""A turn's content blocks, addressed ``turn.index`` in render order (DESIGN.md, "Block").

Order: an assistant message's blocks, then the tool results, then steering; for a user turn, the
prompt then steering. Marks and sweeps name blocks by this address, the door's index lists the
big ones, and a block's length (the UTF-8 bytes of its text, result content, or input's compact
JSON) is what a sweep takes off a turn's weight. A function of a turn's records alone: the fold,
the door and the checkpoint writer each use it without the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .records import AssistantMessage, Record, Steering, ToolResults, UserPrompt, compact


@dataclass(frozen=True)
class BlockRef:
    """One content block inside a turn, addressed ``turn.index`` in render order."""

    turn: int
    index: int
    kind: str  # text | thinking | tool_use | opaque | tool_result | prompt | steering
    value: Any  # the Block, ToolResult, or Steering/UserPrompt record

    @property
    def address(self) -> str:
        return f"{self.turn}.{self.index}"

    @property
    def text(self) -> str:
        """The block's text as the door searches and measures it."""
        v = self.value
        if self.kind in ("text", "thinking", "prompt", "steering"):
            return v.text
        if self.kind == "tool_result":
            return v.content
        if self.kind == "tool_use":
            return compact(v.input).decode("utf-8")
        return compact(v.block).decode("utf-8")

    @property
    def length(self) -> int:
        return len(self.text.encode("utf-8"))


def turn_blocks(turn_id: int, records: list[Record]) -> list[BlockRef]:
    """A turn's blocks in render order: message blocks, tool results, then steering."""
    head: list[BlockRef] = []
    results: list[Any] = []
    steering: list[Any] = []
    for r in records:
        if isinstance(r, AssistantMessage):
            for b in r.blocks:
                # the tag is a str here; msgspec types a tag ``str | int | None``
                head.append(BlockRef(turn_id, 0, b.__struct_config__.tag, b))  # type: ignore[arg-type]
        elif isinstance(r, UserPrompt):
            head.append(BlockRef(turn_id, 0, "prompt", r))
        elif isinstance(r, ToolResults):
            results.extend(r.results)
        elif isinstance(r, Steering):
            steering.append(r)
    out = head + [BlockRef(turn_id, 0, "tool_result", x) for x in results] + [
        BlockRef(turn_id, 0, "steering", s) for s in steering]
    return [BlockRef(turn_id, i, b.kind, b.value) for i, b in enumerate(out)]


__all__ = ["BlockRef", "turn_blocks"]
