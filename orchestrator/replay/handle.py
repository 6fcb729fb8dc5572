"""What a strategy works with: one agent of one replay, over the live agent environment.

A strategy reads the agent's context and its figures, appends records, accounts its edits and,
for the summarising peers, sends a summarisation request. The handle gives it exactly that —
the env and the node the loop runs with, the replay's result to count into — and nothing of
the replay's machinery, so the strategies sit below the run that drives them.
"""

from __future__ import annotations

from ...lineage.runroot import now_iso
from ...providers.base import Request
from ...session.context import Context, Turn
from ...session.records import ProviderCall
from ..env import AgentEnv
from ..loop import account, build_request
from ..node import AgentNode
from ..weighing import cache_mults, used_tokens
from .result import Result


class Handle:
    """One agent of one replay, as a strategy sees it.

    ``tokens_per_byte`` before the agent's first response is ``default_tpb``, the cache
    model's ratio (the replay provider's usage is measured at it)."""

    def __init__(self, env: AgentEnv, node: AgentNode, result: Result, default_tpb: float):
        self.env = env
        self.node = node
        self.result = result
        self.default_tpb = default_tpb
        self.synthetic: set[int] = set()  # harness-written prompts (summaries)
        self.left_bytes = 0
        self.recoverable_bytes = 0
        self.edits = 0
        self.verbatim: list[float] = []  # after each of this agent's edits, in order

    @property
    def ctx(self) -> Context:
        return self.node.ctx

    @property
    def window(self) -> int | None:
        return self.env.settings_for(self.node).context_window

    @property
    def growth(self):
        return self.node.growth

    @property
    def write_mult(self) -> float:
        """The agent's cache write multiplier, as the loop's weighing prices it."""
        return cache_mults(self.env, self.node)[0]

    def append(self, record) -> None:
        self.node.log.append(record)

    def tokens_per_byte(self) -> float:
        return self.node.tokens_per_byte or self.default_tpb

    def used_tokens(self) -> int:
        return used_tokens(self.node)

    def edit(self, kind: str, before_bytes: int) -> None:
        """Account one cache-invalidating edit (ours are told through the env's edit hook)."""
        self.edits += 1
        self.node.edited = True
        r = self.result
        r.edits += 1
        r.edit_kinds[kind] = r.edit_kinds.get(kind, 0) + 1
        v = self.verbatim_tokens()
        self.verbatim.append(v)
        r.verbatim_after_edits.append(v)

    def verbatim_tokens(self) -> float:
        """Tokens of original material in the context now: resident turns, less harness
        steering, summaries and replacement text."""
        ctx = self.ctx
        total = 0
        for item in ctx.frontier():
            if not isinstance(item, Turn) or item.id in self.synthetic or item.records is None:
                continue
            for b in ctx.blocks(item.id):
                if b.index in item.swept:
                    continue
                if b.kind == "steering" and getattr(b.value, "by", None) == "harness":
                    continue
                total += b.length
        return total * self.tokens_per_byte()

    async def summary_request(self, instruction_tokens: int, summary_tokens: int) -> None:
        """A summarisation call: the context as it stands plus an instruction; its cost counts
        (one ``ProviderCall`` with ``purpose: summary``, no turn)."""
        n = int(instruction_tokens / self.tokens_per_byte())
        text = ("Summarise the conversation so far for a continuation: the task, the state of "
                "the work, files and commands that matter, and what remains. ")
        instruction = (text * (n // len(text) + 1))[:n]
        env, node = self.env, self.node
        req = build_request(env, node)
        req = Request(system=req.system, tools=req.tools, max_tokens=req.max_tokens,
                      model=req.model, messages=req.messages + [
                          {"role": "user", "content": [{"type": "text", "text": instruction}]}],
                      meta={**req.meta, "purpose": "summary", "summary_tokens": summary_tokens})
        resp = await env.provider.complete(req)
        node.log.append(ProviderCall(attempt=1, latency_s=0.0, usage=resp.usage,
                                     model=env.settings_for(node).model, at=now_iso(),
                                     purpose="summary"))
        account(env, node, req, resp.usage, resp.model)
