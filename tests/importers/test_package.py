"""The importers package's shape: one module per concept, imports pointing one way, one face.

The layer test checks that the package imports nothing above the orchestrator; these check the
package inside: no module imports another that imports it back (at module level or inside a
function alike), nothing but ``session.records`` (and the error root, ``mnemon.errors``, which
every layer may import) is taken from the rest of mnemon, and every name
the project imports from ``mnemon.orchestrator.importers`` is still offered there.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import mnemon.orchestrator.importers as importers

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "orchestrator" / "importers"
MODULES = {p.stem: p for p in PACKAGE.glob("*.py")}


def _imports(path: Path) -> tuple[set[str], set[str]]:
    """``(sibling modules, modules from outside the package)`` that ``path`` imports, anywhere in it."""
    inside: set[str] = set()
    outside: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                inside.add(node.module.split(".")[0])
            else:
                inside.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level > 1:
            outside.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mnemon"):
            outside.add(node.module or "")
        elif isinstance(node, ast.Import):
            outside.update(a.name for a in node.names if a.name.startswith("mnemon"))
    return inside, outside


def test_one_module_per_format_and_concept():
    assert set(MODULES) == {"__init__", "model", "invariants", "lines", "builder", "content", "neutral",
                            "claude_code", "codex", "openai_messages", "detect"}


def test_no_import_cycle_inside_the_package():
    graph = {name: _imports(path)[0] - {"__init__"} for name, path in MODULES.items() if name != "__init__"}
    for deps in graph.values():
        assert deps <= set(graph), deps
    done: set[str] = set()

    def visit(name: str, trail: tuple[str, ...]) -> None:
        assert name not in trail, " -> ".join(trail + (name,))
        if name in done:
            return
        for dep in sorted(graph[name]):
            visit(dep, trail + (name,))
        done.add(name)

    for name in graph:
        visit(name, ())


def test_only_session_records_comes_from_the_rest_of_mnemon():
    for name, path in MODULES.items():
        outside = _imports(path)[1]
        assert outside <= {"...session.records", "...errors"}, f"{name}: {outside}"


def _names_imported_from_the_package() -> set[str]:
    """Every name imported from ``mnemon.orchestrator.importers`` (or ``..importers``) outside it."""
    wanted: set[str] = set()
    for top in ("tests", "bench", "orchestrator"):
        for path in (ROOT / top).rglob("*.py"):
            if PACKAGE in path.parents:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] == "importers":
                    wanted.update(a.name for a in node.names)
    for path in (ROOT / "docs").rglob("*.md"):
        for m in re.finditer(r"from mnemon\.orchestrator\.importers import ([\w, ]+)", path.read_text(encoding="utf-8")):
            wanted.update(n.strip() for n in m.group(1).split(","))
    return wanted


def test_every_name_the_project_imports_is_offered():
    wanted = _names_imported_from_the_package()
    assert {"load", "Trajectory", "check_invariants", "TrajectoryFormatError"} <= wanted
    assert wanted <= set(importers.__all__), wanted - set(importers.__all__)
    for name in importers.__all__:
        assert getattr(importers, name) is not None
