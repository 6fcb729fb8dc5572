"""``mnemon chat``: an interactive session with one root agent (see docs/chat.md).

``ChatSession`` is the session's logic over the supervisor (no terminal in it); ``commands``
parses the slash commands; ``terminal`` is the prompt_toolkit + rich front end that only
``mnemon chat`` imports."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    "ChatSession": ".session",
    "SlashCommand": ".commands",
    "parse_line": ".commands",
    "ChatInputError": ".commands",
    "run_terminal": ".terminal",
})

if TYPE_CHECKING:
    from .commands import ChatInputError, SlashCommand, parse_line
    from .session import ChatSession
    from .terminal import run_terminal
