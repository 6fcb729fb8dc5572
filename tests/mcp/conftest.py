"""A demo run made once for the MCP tests (three agents a1 → a2 → a3), and an SDK client."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def demo_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mcp") / "demo"
    subprocess.run([sys.executable, "-m", "mnemon", "demo", "--run-root", str(root)], check=True,
                   capture_output=True, timeout=120)
    return root
