"""Moved to ``orchestrator.tools.gate`` (the gate is a wrapper over an agent's tool table); the
names kept here for one release."""

from __future__ import annotations

from .tools.gate import decide_off_loop, effective_policy, resume_approvals

__all__ = ["decide_off_loop", "effective_policy", "resume_approvals"]
