"""The chat's inline approval prompt: a tool call the policy asks about is shown — the agent,
the tool, its input, why it is asked — and the person at the terminal answers ``y`` (approve),
``n`` (reject, then a reason the model reads) or ``e`` (edit the input as JSON, then approve).

It is the run's approval decider (``Approvals.decider``) for the chat's supervisor: the agent
waits on it while the answer is read in a worker thread, as the chat reads every line.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import trio
from rich.console import Console
from rich.markup import escape

from ..approvals import Decision, PendingApproval
from ..terminal import shown

ASK = "approve? [y]es / [n]o / [e]dit › "


class ApprovalPrompt:
    """Decides a request by asking at the terminal; ``read(label)`` reads one line (in a
    worker thread); ``before()`` ends any answer being streamed, so the question stands alone."""

    def __init__(self, console: Console, read: Callable[[str], str],
                 before: Callable[[], None] = lambda: None):
        self.console = console
        self.read = read
        self.before = before
        self.lock = trio.Lock()  # one question at a time (calls of one turn ask together)

    async def _line(self, label: str) -> str:
        return (await trio.to_thread.run_sync(self.read, label)).strip()

    async def decide(self, p: PendingApproval) -> Decision | None:
        async with self.lock:
            self.before()
            # the question is the prompt's own first lines, not printed before it: under the
            # chat, printed lines go through prompt_toolkit's stdout proxy, which writes them a
            # moment later — after the prompt had drawn itself, about one time in ten. The
            # input (and a reason quoting it) is the model's: its terminal controls escaped
            question = shown(f"approval {p.agent} wants to call {p.tool}"
                             + (f" — {p.reason}" if p.reason else "")
                             + "\n  input: " + json.dumps(p.input, ensure_ascii=False)) + "\n"
            try:
                return await self._answer(question)
            except (EOFError, KeyboardInterrupt):
                self.console.print("[yellow]no answer: the call is rejected[/]")
                return Decision("reject", reason="the person at the chat gave no answer", by="chat")

    async def _answer(self, question: str = "") -> Decision:
        c = self.console
        while True:
            ans = (await self._line(question + ASK)).lower()
            question = ""  # asked again after a wrong answer: the choices alone
            if ans in ("y", "yes", "approve"):
                return Decision("approve", by="chat")
            if ans in ("n", "no", "reject"):
                reason = await self._line("reason (the model reads it; empty: none) › ")
                return Decision("reject", reason=reason or None, by="chat")
            if ans in ("e", "edit"):
                text = await self._line("input as a JSON object › ")
                try:
                    value: Any = json.loads(text)
                except ValueError as e:
                    c.print(f"[red]not JSON: {escape(str(e))}[/]")
                    continue
                if not isinstance(value, dict):
                    c.print("[red]the input is a JSON object[/]")
                    continue
                return Decision("approve", input=value, by="chat")
            c.print("[dim]answer y, n or e[/]")
