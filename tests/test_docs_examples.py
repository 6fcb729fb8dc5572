"""Every ```python block of the README and docs/ runs, against the installed package.

A block is a whole program; top-level ``await`` runs under Trio, as a user's script would under
``trio.run``. Sketches that are not whole programs are fenced as ``text`` instead.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
from pathlib import Path

import pytest
import trio

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)


def _blocks():
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 2
            yield pytest.param(doc, line, m.group(1), id=f"{doc.relative_to(ROOT)}:{line}")


BLOCKS = list(_blocks())


def test_the_docs_have_runnable_examples():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize(("doc", "line", "source"), BLOCKS)
def test_example_runs(doc, line, source, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = compile(source, f"{doc.name}:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
                   dont_inherit=True)
    ns: dict = {"__name__": "__doc_example__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = eval(code, ns)  # a coroutine when the block awaits

        if result is not None:
            async def main():
                await result

            trio.run(main)
    assert "mnemon" in {name.split(".")[0] for name in _imported(source)}


def _imported(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names
