"""Each package's declared surface is pinned: a name leaves or joins it on purpose."""

from __future__ import annotations

import importlib

import pytest

SURFACES = {
    "session": {
        "AgentLog", "AncestorUnreadable", "BlockRef", "Candidate", "Context", "DigestMismatch",
        "Door", "Gate", "LogClosed", "LogCorrupt", "LogRefused", "PressureLatch", "RecordLog",
        "Refusal", "ResidueEntry", "SessionError", "Turn", "candidates", "digest",
        "eviction_due", "fold_file", "gate", "iter_lines", "plan_eviction", "pressure_reminder",
        "read_at", "read_span", "render", "residue_message", "scan", "turn_blocks"},
    "lineage": {"ForkError", "child_started", "fork", "link_bytes", "link_for", "opening_loader",
                "resume_child", "build_tree", "tree_json", "tree_text"},
    "orchestrator": {"AgentDone", "AgentNode", "Decision", "HarnessPolicy", "Settings",
                     "Supervisor", "Tool", "ToolContext", "ToolPolicy", "UserTool", "load_policy",
                     "open_supervisor",
                     "parse_policy", "tool"},
}


@pytest.mark.parametrize("package", sorted(SURFACES))
def test_surface_is_pinned_and_importable(package):
    mod = importlib.import_module(f"mnemon.{package}")
    assert set(mod.__all__) == SURFACES[package]
    for name in mod.__all__:
        assert getattr(mod, name) is not None
