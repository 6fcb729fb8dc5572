"""The roles tests run commands in-process (``main([...])``), which configure logging to their
run root and close it at the end: every test here starts and ends with logging quiet, so no
later test logs to a closed file."""

from __future__ import annotations

import pytest

from mnemon.orchestrator import logs


@pytest.fixture(autouse=True)
def _quiet_logs():
    logs.quiet()
    yield
    logs.quiet()
