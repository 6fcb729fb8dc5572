"""The chat's terminal: a prompt_toolkit prompt with history, rich rendering, streamed answers.

Trio owns the main thread: the prompt is read in a worker thread (prompt_toolkit runs its own
event loop there), the agent runs on the Trio thread, and answer text is shown as it streams
(``Supervisor.text_listeners``). On a terminal the text is Markdown, rendered by rich as it
arrives (``MarkdownStream``, decision 0245); piped, it is printed as it came. While a turn is in
flight the terminal is in cooked mode, so Ctrl-C arrives as SIGINT: a Trio signal receiver turns
it into a cancel of that turn alone. At the prompt, Ctrl-C clears the line and Ctrl-D (or
``/quit``) ends the session.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import trio
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table

from ...session.errors import Refusal, SessionError
from ..node import AgentNode
from ..report import cost_columns
from ..terminal import shown
from .approval import ApprovalPrompt
from .commands import HELP, ChatInputError, SlashCommand, parse_line
from .session import ChatSession


class _Prompt:
    """Reads one line: prompt_toolkit on a terminal (history in a file), ``input`` otherwise."""

    def __init__(self, history: Path | None):
        self.session: Any = None
        if sys.stdin.isatty() and sys.stdout.isatty():
            from prompt_toolkit import PromptSession
            from prompt_toolkit.history import FileHistory, InMemoryHistory

            hist = FileHistory(str(history)) if history is not None else InMemoryHistory()
            self.session = PromptSession(history=hist)

    def read(self, label: str) -> str:
        if self.session is not None:
            return self.session.prompt(label)
        sys.stdout.write(label)
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")


def _tool_lines(node: AgentNode) -> list[tuple[str, bool]]:
    """``(name, is_error)`` for each call of the turn in hand, read from its records."""
    from ...session.records import AssistantMessage, ToolResults, ToolUse

    turn = node.ctx.turns[-1] if node.ctx.turns else None
    if turn is None or not turn.records:
        return []
    calls: dict[str, str] = {}
    errors: dict[str, bool] = {}
    for rec in turn.records:
        if isinstance(rec, AssistantMessage):
            calls.update({b.id: b.name for b in rec.blocks if isinstance(b, ToolUse)})
        elif isinstance(rec, ToolResults):
            errors.update({r.tool_use_id: r.is_error for r in rec.results})
    return [(name, errors.get(cid, False)) for cid, name in calls.items()]


def _showing_tools(show: Any) -> Any:
    """Our harness policy, telling ``show(node)`` after each turn's tool calls have answered."""
    from ..loop import HarnessPolicy

    class ShowTools(HarnessPolicy):
        def after_tools(self, env: Any, node: AgentNode) -> None:
            super().after_tools(env, node)
            show(node)

    return ShowTools()


def _same(text: str) -> str:
    return text


class MarkdownStream:
    """One answer's text as Markdown, redrawn in place as it streams in (rich's ``Live``).

    The live region is cropped to the screen's height while it grows (``vertical_overflow
    "ellipsis"``), so rich's cursor moves never reach rows scrolled off the top; ``end`` draws
    the whole answer once, below nothing stale. Redraws are manual and at most ``HZ`` a second
    (a long answer is parsed again at each), no refresh thread; sys.stdout is left alone.
    Whatever else the chat prints meanwhile (a fork's answer, Ctrl-C) goes through the same
    console, which rich places above the live region.
    """

    HZ = 10.0

    def __init__(self, console: Console):
        self.console = console
        self.text = ""
        self.live: Live | None = None
        self.drawn_at = 0.0

    def add(self, text: str) -> None:
        import time

        self.text += text
        now = time.monotonic()
        if self.live is None:
            self.live = Live(self._render(), console=self.console, auto_refresh=False,
                             vertical_overflow="ellipsis", redirect_stdout=False,
                             redirect_stderr=False)
            self.live.start(refresh=True)
            self.drawn_at = now
        else:
            due = now - self.drawn_at >= 1.0 / self.HZ
            self.live.update(self._render(), refresh=due)
            if due:
                self.drawn_at = now

    def end(self) -> None:
        """Draw the whole answer (``Live.stop`` renders it uncropped) and leave it there."""
        if self.live is not None:
            self.live.update(self._render())
            self.live.stop()
        self.live, self.text = None, ""

    def _render(self) -> Markdown:
        return Markdown(self.text, hyperlinks=False)


class Terminal:
    def __init__(self, chat: ChatSession, console: Console, prompt: _Prompt, *,
                 markdown: bool | None = None):
        """``markdown``: render answers as Markdown (default: when the console is a
        terminal; piped output stays the text as written)."""
        self.chat = chat
        self.console = console
        self.prompt = prompt
        self.streamed = False
        self.markdown = console.is_terminal if markdown is None else markdown
        self.stream = MarkdownStream(console)
        # text a model wrote: its terminal controls escaped on a terminal (``terminal.shown``)
        self.safe = shown if console.is_terminal else _same

    # ------------------------------------------------------------------ output

    def on_text(self, agent: str, text: str) -> None:
        if agent == self.chat.agent and self.chat.in_flight:
            self.streamed = True
            text = self.safe(text)
            if self.markdown:
                self.stream.add(text)
            else:
                self.console.print(text, end="", markup=False, highlight=False, soft_wrap=True)

    def _end_stream(self) -> None:
        """The answer text of one request is complete: its final rendering stays."""
        if self.markdown:
            self.stream.end()
        else:
            self.console.print()

    def end_answer(self) -> None:
        """End the answer being streamed, if any (before an approval question)."""
        if self.streamed:
            self._end_stream()
            self.streamed = False

    def said(self, node: AgentNode) -> None:
        if self.streamed:
            self._end_stream()
        elif node.answer:
            if self.markdown:
                self.console.print(Markdown(self.safe(node.answer), hyperlinks=False))
            else:
                self.console.print(self.safe(node.answer), markup=False, highlight=False)
        if node.reason == "cancelled":
            self.console.print("[yellow]turn cancelled[/] (the session goes on)")
        elif node.reason != "done":
            self.console.print(f"[red]agent {node.id} ended: {escape(self.safe(node.reason or '?'))}[/]")
        self.console.print(f"[dim]{node.id} · {node.turns_taken} requests · "
                           f"${self.chat.sup.cost_usd:.4f} so far[/]")

    def tools_ran(self, node: AgentNode) -> None:
        if node.id != self.chat.agent:
            return
        if self.streamed:
            self._end_stream()
            self.streamed = False
        for name, failed in _tool_lines(node):
            mark = "[red]✗[/]" if failed else "[green]✓[/]"
            self.console.print(f"  [dim]↳ {escape(self.safe(name))}[/] {mark}")

    def fork_ended(self, child: AgentNode) -> None:
        head = f"\n[bold]fork {child.id}[/] ({escape(self.safe(child.reason or '?'))}):"
        if self.markdown and child.answer:
            self.console.print(head)
            self.console.print(Markdown(self.safe(child.answer), hyperlinks=False))
        else:
            self.console.print(f"{head} {escape(self.safe(child.answer or '(no answer)'))}")

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        c = self.console
        c.print(f"[bold]mnemon chat[/] · run root {escape(str(self.chat.sup.root))}"
                + (f" · resuming {self.chat.agent}" if self.chat.agent else "")
                + " · /help for commands", soft_wrap=True)
        with trio.open_signal_receiver(signal.SIGINT) as sigint:
            async with trio.open_nursery() as watch:
                watch.start_soon(self._interrupts, sigint)
                while True:
                    try:
                        line = await trio.to_thread.run_sync(self.prompt.read, "› ")
                    except KeyboardInterrupt:
                        continue
                    except EOFError:
                        break
                    try:
                        cmd = parse_line(line)
                    except ChatInputError as e:
                        c.print(f"[red]{escape(str(e))}[/]")
                        continue
                    if cmd is None:
                        continue
                    if cmd.name == "quit":
                        break
                    try:
                        await self.dispatch(cmd)
                    except (Refusal, SessionError, ChatInputError) as e:
                        c.print(f"[red]{escape(str(e))}[/]")
                watch.cancel_scope.cancel()
        c.print(("" if self.prompt.session is not None else "\n") + "[dim]bye[/]")

    async def _interrupts(self, sigint: Any) -> None:
        async for _ in sigint:
            if self.chat.cancel_turn():
                self.console.print("\n[yellow]^C — cancelling the turn[/]")

    async def dispatch(self, cmd: SlashCommand) -> None:
        c, chat = self.console, self.chat
        if cmd.name == "prompt":
            self.streamed = False
            c.print("[dim]… (Ctrl-C cancels this turn)[/]")
            try:
                node = await chat.send(cmd.text)
            finally:  # an answer cut off by an error keeps its rendering; the live region ends
                self.stream.end()
            self.said(node)
        elif cmd.name == "clear":
            chat.clear()
            c.print("[dim]context cleared (every turn stays readable with /transcript)[/]")
        elif cmd.name == "rewind":
            chat.rewind(int(cmd.args[0]))
            c.print(f"[dim]rewound to turn {cmd.args[0]}[/]")
        elif cmd.name == "context":
            self.print_survey(chat.survey())
        elif cmd.name == "transcript":
            await self.transcript(cmd.args)
        elif cmd.name == "fork":
            child = chat.fork(cmd.text, self.fork_ended)
            c.print(f"[dim]fork {child.id} started (mnemon child of {chat.agent})[/]")
        elif cmd.name == "steer":
            out = chat.steer(cmd.args[0], cmd.text)
            n = out["messages"]
            c.print(f"[dim]message to {escape(self.safe(out['agent']))} recorded: its next "
                    f"request carries it ({n} message{'s' if n != 1 else ''} so far)[/]")
        elif cmd.name == "cost":
            self.print_cost(chat.cost())
        elif cmd.name == "help":
            t = Table(show_header=False, box=None)
            for name, what in HELP:
                t.add_row(name, what)
            c.print(t)

    # ------------------------------------------------------------------ tables

    def print_survey(self, s: dict) -> None:
        t = Table(title=f"context of {self.chat.agent}", title_justify="left")
        for col, just in (("turns", "right"), ("role / by", "left"), ("bytes", "right"),
                          ("label / note", "left")):
            t.add_column(col, justify=just)  # type: ignore[arg-type]
        for item in s["frontier"]:
            if item["kind"] == "turn":
                t.add_row(str(item["id"]), item["role"], str(item["bytes"]),
                          escape(self.safe(item.get("label") or "")))
            else:
                a, b = item["span"]
                t.add_row(f"[{a}, {b}]", f"residue, {item['by']}", str(item["bytes"]),
                          escape(self.safe(item.get("note") or "")))
        self.console.print(t)
        window = s["context_window"]
        line = f"used ~{s['used_tokens']} tokens"
        line += f" of a {window}-token window (eviction at {s['eviction_at']})" if window else \
            f"; {s['history_bytes']} history bytes (no window known)"
        plan = s.get("plan")
        if plan:
            line += f" · an eviction now would cut turns {plan['span'][0]}-{plan['span'][1]}"
        self.console.print(f"[dim]{line}[/]")

    def print_cost(self, rows: list[dict]) -> None:
        t = Table()
        cols = cost_columns(rows)
        for key, head in cols:
            t.add_column(head, justify="left" if key == "agent" else "right")
        for r in rows:
            t.add_row(*[f"${r[k]:.4f}" if k == "cost_usd" else str(r[k]) for k, _ in cols])
        self.console.print(t)

    async def transcript(self, args: tuple[str, ...]) -> None:
        c, chat = self.console, self.chat
        if args[0] == "index":
            t = Table()
            for col in ("id", "role", "bytes", "held", "label"):
                t.add_column(col)
            for r in await chat.index():
                t.add_row(str(r["id"]), r["role"], str(r["bytes"]), r["held"],
                          escape(self.safe(str(r["label"]))))
            c.print(t)
        elif args[0] == "read":
            for turn in await chat.read(args[1]):
                c.print(f"[bold]== turn {turn['turn']}[/] [dim]({turn['source']})[/]")
                import json

                for rec in turn["records"]:
                    c.print(self.safe(json.dumps(rec, ensure_ascii=False)), markup=False,
                            highlight=False)
        else:
            ans = await chat.grep(args[1], args[2] if len(args) > 2 else None)
            for h in ans["hits"]:
                c.print(f"[cyan]{h['turn']:>6}[/]: {escape(self.safe(h['line']))}",
                        highlight=False)
            c.print(f"[dim]{ans['total']} matching line{'s' if ans['total'] != 1 else ''}[/]")


async def run_terminal(sup: Any, node: AgentNode | None, *, history: Path | None,
                       markdown: bool | None = None) -> None:
    """The whole session on an open supervisor; forks end (cancelled) with it. ``markdown``:
    as ``Terminal`` (``mnemon chat --plain`` turns it off)."""
    from prompt_toolkit.patch_stdout import patch_stdout

    console = Console(highlight=False)
    prompt = _Prompt(history)
    async with trio.open_nursery() as forks:
        chat = ChatSession(sup, forks, node)
        term = Terminal(chat, console, prompt, markdown=markdown)
        sup.text_listeners.append(term.on_text)
        sup.policy = _showing_tools(term.tools_ran)
        sup.approvals.decider = ApprovalPrompt(console, prompt.read, term.end_answer).decide
        if prompt.session is not None:
            with patch_stdout(raw=True):
                await term.run()
        else:
            await term.run()
        forks.cancel_scope.cancel()
