"""
The scripted provider: the embedded default, with no key and no network.

It plays either a script — a JSONL file (or a list) of assistant turns::

    {"blocks": [{"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "tu_1", "name": "bash", "input": {"command": "ls"}}],
     "stop_reason": "tool_use"}

— or a policy callable ``policy(request, state) -> (blocks, stop_reason)``, sync or async, where
``state`` is a dict kept per agent (keyed by ``request.meta["agent"]``). Each agent plays the
script from its own cursor; a line with an ``"agent"`` key is played only by that agent. When the
script runs out, the answer is one ``end_turn`` text block saying so.

The cursor is where the agent's log stands, not where this process has been: a request carries
the answers its agent's log already records (``meta["requests"]``, the orchestrator's count of
its ``ProviderCall`` records; absent for none), and the agent's next line is the one after that many of its
lines. An agent resumed by another process — a service started again, a job re-run — goes on
with its script instead of playing it again from the top (which repeated tool calls it had made
and asked again for approvals it had had). A policy callable reads ``meta["requests"]`` itself:
its ``state`` starts empty in a new process.

Usage comes from a ``CacheModel`` (shared by every agent of a run; injectable) at its tokens
per byte (1 per 4 by default); output tokens are the blocks' compact-JSON bytes at the same rate.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import trio

from . import latency
from .base import Request, Response
from .cache import CacheModel
from .errors import ProviderError
from .retry import OnAttempt
from .typed import NoInstance, build_instance
from ..session.records import Block, Text, ToolUse, compact, decode_block

__all__ = ["ScriptedProvider", "Policy", "EXHAUSTED", "load_script"]

EXHAUSTED = "[scripted provider] the script is exhausted: no more turns to play."

Policy = Callable[[Request, dict[str, Any]], Any]
"""``policy(request, state) -> (blocks, stop_reason)``; blocks are neutral dicts or Blocks. A
third item, a dict with ``model`` and ``recorded_usage``, is passed through to the Response."""


def load_script(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSONL script; blank lines are skipped, a bad line is refused with its number."""
    turns: list[dict[str, Any]] = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            turn = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{n}: not JSON ({exc.msg})") from exc
        if not isinstance(turn, dict) or not isinstance(turn.get("blocks"), list):
            raise ValueError(f"{path}:{n}: a script line is {{\"blocks\": [...], \"stop_reason\": ...}}")
        turns.append(turn)
    return turns


def _to_block(block: Any) -> Block:
    if isinstance(block, (Text, ToolUse)) or not isinstance(block, dict):
        return block
    return decode_block(block)


def _default_policy(request: Request, state: dict[str, Any]) -> tuple[list[Block], str]:
    """With neither script nor policy: answer the last user text, briefly — or, asked for a
    typed answer (``request.output``), with a value of the output type, built from its
    schema (``typed.build_instance``), as one line of JSON."""
    if request.output is not None:
        try:
            value = build_instance(request.output.schema)
        except NoInstance as e:  # said as what it is, not as an answer that is "not JSON"
            raise ProviderError(f"the scripted provider cannot build a value of the output "
                                f"type: {e}") from None
        return [Text(compact(value).decode())], "end_turn"
    last = ""
    for msg in reversed(request.messages):
        if msg.get("role") == "user":
            texts = [b.get("text", "") for b in msg.get("content") or () if b.get("type") == "text"]
            if texts:
                last = texts[-1]
                break
    clipped = last if len(last) <= 60 else last[:57] + "..."
    return [Text(f"(scripted) You said: {clipped}")], "end_turn"


class ScriptedProvider:
    """
    A real provider that plays a script or a policy.

    Args:
        script: a JSONL path or a list of turns.
        policy: ``policy(request, state) -> (blocks, stop_reason)``; used when no script.
        cache_model: the shared ``CacheModel`` usage comes from; one of its own by default.
        latency_s: simulated latency per request (``latency.wait``: Trio's clock).
        clock: seconds for the cache's TTL; ``trio.current_time`` by default.
    """

    name = "scripted"
    model = "scripted"

    def __init__(self, script: str | Path | Iterable[dict[str, Any]] | None = None, *,
                 policy: Policy | None = None, cache_model: CacheModel | None = None,
                 latency_s: float = 0.0, clock: Callable[[], float] | None = None) -> None:
        if script is not None and policy is not None:
            raise ValueError("give a script or a policy, not both")
        if isinstance(script, (str, Path)):
            self.script: list[dict[str, Any]] | None = load_script(script)
        else:
            self.script = list(script) if script is not None else None
        self.policy = policy or (None if self.script is not None else _default_policy)
        self.cache_model = cache_model or CacheModel()
        self.latency_s = latency_s
        self._clock = clock or trio.current_time
        self.states: dict[str, dict[str, Any]] = {}

    def __repr__(self) -> str:
        return "ScriptedProvider()"

    streams_text = True  # ``complete`` takes ``on_text``

    async def complete(self, request: Request, *, on_attempt: OnAttempt | None = None,
                       on_text: Callable[[str], None] | None = None) -> Response:
        """
        Play the next turn for ``request.meta["agent"]``.

        Cancellation:
            Only the simulated latency waits; cancelling there consumes no script turn.
        """
        t0 = trio.current_time()
        await latency.wait(self.latency_s)  # at 0, a checkpoint: a turn always yields once here
        agent = str(request.meta.get("agent", ""))
        state = self.states.setdefault(agent, {})
        blocks, stop_reason = await self._next(request, agent, state)
        # the blocks' compact bytes, from one encoding of the list: '[', the blocks, n-1 commas, ']'
        nbytes = len(compact(blocks)) - len(blocks) - 1 if blocks else 0
        output = math.ceil(nbytes * self.cache_model.tokens_per_byte)
        usage = self.cache_model.usage_for(request, output, self._clock(), model=self.model)
        extra = state.pop("_extra", None) or {}
        response = Response(blocks=blocks, stop_reason=stop_reason, usage=usage,
                            model=extra.get("model") or self.model,
                            recorded_usage=extra.get("recorded_usage"))
        if on_text is not None:  # the whole text at once: a script has nothing to stream
            for b in blocks:
                if isinstance(b, Text) and b.text:
                    on_text(b.text)
        if on_attempt is not None:
            result = on_attempt(1, trio.current_time() - t0, usage, None)
            if result is not None and inspect.isawaitable(result):  # (None: no ABC check)
                await result
        return response

    async def _next(self, request: Request, agent: str, state: dict[str, Any]
                    ) -> tuple[list[Block], str | None]:
        if self.policy is not None:
            result = self.policy(request, state)
            if type(result) is not tuple and inspect.isawaitable(result):  # (a tuple: no ABC check)
                result = await result
            raw_blocks, stop_reason, *extra = result
            blocks = [_to_block(b) for b in raw_blocks]
            if extra and extra[0]:  # an optional third item: {"model", "recorded_usage"}
                state["_extra"] = extra[0]
        else:
            assert self.script is not None
            done = request.meta.get("requests")  # absent: none recorded, or not told
            if not isinstance(done, int) or done < 0:
                done = state.get("played", 0)
            if state.get("played", 0) != done:  # another process played the first ``done``
                state["cursor"] = self._after(agent, done)
            cursor = state.get("cursor", 0)
            while cursor < len(self.script) and self.script[cursor].get("agent", agent) != agent:
                cursor += 1
            if cursor >= len(self.script):
                return [Text(EXHAUSTED)], "end_turn"
            turn = self.script[cursor]
            state["cursor"] = cursor + 1
            state["played"] = done + 1
            blocks = [_to_block(b) for b in turn["blocks"]]
            stop_reason = turn.get("stop_reason")
        if stop_reason is None:
            stop_reason = "tool_use" if any(isinstance(b, ToolUse) for b in blocks) else "end_turn"
        return blocks, stop_reason

    def _after(self, agent: str, n: int) -> int:
        """The script index after the first ``n`` lines ``agent`` plays."""
        assert self.script is not None
        for i, turn in enumerate(self.script):
            if n <= 0:
                return i
            if turn.get("agent", agent) == agent:
                n -= 1
        return len(self.script)

    async def aclose(self) -> None:
        return None

    async def __aenter__(self) -> "ScriptedProvider":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
