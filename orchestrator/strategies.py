"""The replay strategies, at the path they had before replay became a package: a re-export of
``mnemon.orchestrator.replay.strategies`` (``from mnemon.orchestrator import strategies as S``
keeps working). New code imports from the package."""

from __future__ import annotations

from .replay.strategies import (
    CLEAR_KEEP_TOOL_USES,
    CLEAR_PLACEHOLDER,
    CLEAR_TRIGGER_TOKENS,
    COMPACT_BUFFER_TOKENS,
    INSTRUCTION_TOKENS,
    REINJECT_FILE_TOKENS,
    REINJECT_FILES,
    ROLLOVER_SHARE,
    ROLLOVER_USER_TOKENS,
    SERVER_COMPACT_INSTRUCTION_TOKENS,
    SERVER_COMPACT_MIN_TRIGGER_TOKENS,
    SERVER_COMPACT_TRIGGER_TOKENS,
    SERVER_COMPACTIONS,
    STRATEGIES,
    SUMMARY_TOKENS,
    AnthropicCompaction,
    ClearToolUses,
    Compact,
    Evict,
    OpenAICompaction,
    Options,
    Rollover,
    Strategy,
    Sweep,
    Unbounded,
    make,
)

__all__ = ["CLEAR_KEEP_TOOL_USES", "CLEAR_PLACEHOLDER", "CLEAR_TRIGGER_TOKENS",
           "COMPACT_BUFFER_TOKENS", "INSTRUCTION_TOKENS", "REINJECT_FILE_TOKENS",
           "REINJECT_FILES", "ROLLOVER_SHARE", "ROLLOVER_USER_TOKENS",
           "SERVER_COMPACT_INSTRUCTION_TOKENS", "SERVER_COMPACT_MIN_TRIGGER_TOKENS",
           "SERVER_COMPACT_TRIGGER_TOKENS", "SERVER_COMPACTIONS", "STRATEGIES", "SUMMARY_TOKENS",
           "AnthropicCompaction", "ClearToolUses", "Compact", "Evict", "OpenAICompaction",
           "Options", "Rollover", "Strategy", "Sweep", "Unbounded", "make"]
