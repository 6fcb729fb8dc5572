"""The layer order: session ← lineage ← providers ← orchestrator. A module imports only from its
own layer or the layers below it — at module level or inside a function alike."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ORDER = ("session", "lineage", "providers", "orchestrator")


def _modules() -> list[Path]:
    return [p for top in ORDER for p in (ROOT / top).rglob("*.py")]


def _imported(path: Path, rel: Path | None = None) -> list[tuple[int, str]]:
    """``(line, top-level folder)`` for every import of one of the four folders; ``rel`` is the
    module's path under the repository (default: where it lies)."""
    rel = (rel or path.relative_to(ROOT)).with_suffix("")
    package = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                if node.level - 1 > len(package):
                    continue
                parts = base + (node.module.split(".") if node.module else [])
                if not parts:  # ``from ... import x``: the mnemon face itself
                    continue
                names = [parts[0]] if node.module or len(base) else [a.name for a in node.names]
            else:
                mod = (node.module or "").split(".")
                names = [mod[1]] if mod[0] == "mnemon" and len(mod) > 1 else []
            out += [(node.lineno, n) for n in names if n in ORDER]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                mod = alias.name.split(".")
                if mod[0] == "mnemon" and len(mod) > 1 and mod[1] in ORDER:
                    out.append((node.lineno, mod[1]))
    return out


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down_the_layers(path):
    mine = ORDER.index(path.relative_to(ROOT).parts[0])
    for line, top in _imported(path):
        assert ORDER.index(top) <= mine, f"{path.relative_to(ROOT)}:{line} imports {top}"


def test_the_check_sees_an_upward_import(tmp_path):
    """The checker itself: the old ``session/door.py`` arrow would be caught."""
    bad = tmp_path / "probe.py"
    bad.write_text("def f():\n    from ..lineage.runroot import confine\n")
    assert _imported(bad, Path("session/door/probe.py")) == [(2, "session")]  # session.lineage
    bad.write_text("def f():\n    from ...lineage.runroot import confine\n")
    assert _imported(bad, Path("session/door/probe.py")) == [(2, "lineage")]
    bad.write_text("from ..lineage.runroot import confine\n")
    assert _imported(bad, Path("session/probe.py")) == [(1, "lineage")]
