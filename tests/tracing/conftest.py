"""A demo run root made once per module, with tracing off (no OTEL_ variable reaches it)."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from unittest import mock

import pytest

from mnemon.orchestrator import cli, logs


def untraced_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}


def make_demo(root: Path) -> Path:
    with mock.patch.dict(os.environ, untraced_env(), clear=True), \
            contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["demo", "--run-root", str(root)]) == 0
    logs.quiet()  # the demo's log file is closed: nothing after it writes there
    return root


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory) -> Path:
    return make_demo(tmp_path_factory.mktemp("demo") / "run")


@pytest.fixture(autouse=True)
def _untraced(monkeypatch):
    for k in [k for k in os.environ if k.startswith("OTEL_")]:
        monkeypatch.delenv(k)
    yield
    logs.quiet()  # a command run in-process configured logging to its run root's file
