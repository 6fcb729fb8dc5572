"""A replay on a real wire: every request the harness builds also goes to a provider.

``mnemon replay TRAJ --provider openai-responses`` sends each request — the context the strategy
left, the recorded turns as this provider's input items (an imported Codex session's reasoning
items among them, verbatim and in order) — through that provider's adapter, and records the
usage it reports; the trajectory itself goes on as recorded (the replay provider still plays
each assistant turn), so every strategy meets the same conversation and is measured on the
provider's own cache and prices (``--model``). What the model answers is not kept: it is the
bill, not the story.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...providers.base import Provider, Request, Response
from ...providers.retry import OnAttempt

__all__ = ["WireReplay"]


class WireReplay:
    """The replay provider's turns, the wire provider's usage.

    ``complete`` sends the request to ``wire`` first — its attempts are the ``ProviderCall``
    records, with the usage the provider reported — then plays the recorded turn from
    ``played``; a request the provider refuses ends the agent as any provider failure does,
    before the recording's cursor moves."""

    def __init__(self, played: Provider, wire: Provider):
        self.played = played
        self.wire = wire
        self.name = wire.name

    async def complete(self, request: Request, *, on_attempt: OnAttempt | None = None,
                       on_text: Callable[[str], None] | None = None, **_: Any) -> Response:
        sent = await self.wire.complete(request, on_attempt=on_attempt)  # type: ignore[call-arg]
        turn = await self.played.complete(request)
        return Response(blocks=turn.blocks, stop_reason=turn.stop_reason, usage=sent.usage,
                        model=turn.model, recorded_usage=turn.recorded_usage)

    async def aclose(self) -> None:
        await self.wire.aclose()
