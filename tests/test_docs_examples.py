"""Every ```python block of the README and docs/ runs as written, pasted into a file.

A block is a whole script: it runs as ``python example.py`` in a new process (its own
``trio.run`` where it needs an event loop — a top-level ``async with`` is a syntax error in a
script, and an asyncio REPL cannot run Trio code). Sketches that are not whole programs are
fenced as ``text`` instead.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert len(BLOCKS) >= 6
    assert any(doc.name == "README.md" for doc, _, _ in (p.values for p in BLOCKS))


@pytest.mark.parametrize(("doc", "line", "source"), BLOCKS)
def test_example_runs_as_a_script(doc, line, source, tmp_path):
    compile(source, f"{doc.name}:{line}", "exec", dont_inherit=True)  # a script, no top-level await
    script = tmp_path / "example.py"
    script.write_text(source, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"{doc.name}:{line}\n{done.stderr[-3000:]}"
    assert "mnemon" in {name.split(".")[0] for name in _imported(source)}


def _imported(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names
