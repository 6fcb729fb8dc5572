"""No knots: the installed package's modules form layers, not circles.

Every module of the installed ``mnemon`` is read (not imported) and its imports collected —
those inside functions too, since an import inside a function is still an import; only those
under ``if TYPE_CHECKING:`` are left out, as they never run. The test fails on any cycle between
modules and on any import against the layer order ``session → lineage → providers →
orchestrator`` (a lower layer never imports a higher one). The face (``mnemon``,
``mnemon.__main__``) sits on top; its helpers ``mnemon._lazy``, ``_about``, ``_version`` and
``_toml`` (the one TOML reader) at the bottom, usable by every layer.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

ORDER = ("session", "lineage", "providers", "orchestrator")
BASE = ("mnemon._lazy", "mnemon._version", "mnemon._about", "mnemon._toml")


def installed() -> dict[str, Path]:
    """``module name → file`` for every module of the installed package (a wheel's
    ``site-packages/mnemon`` or an editable install's mapped folders alike)."""
    face = Path(importlib.util.find_spec("mnemon").origin).parent
    mods = {("mnemon" if p.stem == "__init__" else f"mnemon.{p.stem}"): p for p in face.glob("*.py")}
    for top in ORDER:
        folder = Path(importlib.import_module(f"mnemon.{top}").__file__).parent
        for p in folder.rglob("*.py"):
            parts = ["mnemon", top, *p.relative_to(folder).with_suffix("").parts]
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return mods


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return getattr(t, "id", None) == "TYPE_CHECKING" or getattr(t, "attr", None) == "TYPE_CHECKING"


def graph(mods: dict[str, Path]) -> dict[str, dict[str, int]]:
    """``module → {imported module: line}``, the imported name resolved to the nearest module
    of the package (``from .x import f`` names ``x``; ``from . import x`` names ``x``)."""
    out: dict[str, dict[str, int]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: dict[str, int] = {}

        def add(target: str, line: int, importer: str = name) -> None:
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != importer:
                found.setdefault(target, line)

        def visit(node: ast.AST) -> None:
            if isinstance(node, ast.If) and _type_checking(node):
                for n in node.orelse:
                    visit(n)
                return
            if isinstance(node, ast.Import):
                for a in node.names:
                    add(a.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in mods]
                for target in subs or [mod]:  # ``from pkg import sub`` is sub, not pkg's face
                    add(target, node.lineno)
            for child in ast.iter_child_nodes(node):
                visit(child)

        visit(ast.parse(path.read_text(encoding="utf-8")))
        out[name] = found
    return out


def cycles(g: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, {})))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    scc = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        scc.append(w)
                        if w == v:
                            break
                    if len(scc) > 1:
                        found.append(sorted(scc))
    return found


def layer(name: str) -> int:
    if name in BASE:
        return -1
    parts = name.split(".")
    return ORDER.index(parts[1]) if len(parts) > 1 and parts[1] in ORDER else len(ORDER)


def against_layers(g: dict[str, dict[str, int]], mods: dict[str, Path]) -> list[str]:
    return [f"{mods[a]}:{line}: {a} imports {b}" for a, deps in sorted(g.items())
            for b, line in sorted(deps.items()) if layer(b) > layer(a)]


def test_no_cycle_between_modules():
    mods = installed()
    assert len(mods) > 100 and "mnemon.orchestrator.supervisor" in mods
    found = cycles(graph(mods))
    assert not found, "import cycles: " + "; ".join(" ⇄ ".join(c) for c in found)


def test_no_import_against_the_layers():
    mods = installed()
    assert not against_layers(graph(mods), mods)


def test_the_agent_core_does_not_know_the_supervisor():
    """The loop, the tools and the synod see the agent environment, never the supervisor that
    owns it (docs/orchestrator.md, Architecture)."""
    g = graph(installed())
    for low in ("loop", "tools", "synod", "weighing", "env", "node", "servers", "tooldefs",
                *_pipeline(g)):
        assert "mnemon.orchestrator.supervisor" not in g[f"mnemon.orchestrator.{low}"], low


def _pipeline(g: dict) -> list[str]:
    """The tool pipeline's modules, relative to ``mnemon.orchestrator``."""
    return [m.removeprefix("mnemon.orchestrator.") for m in g
            if m.startswith("mnemon.orchestrator.tools.")]


def test_the_tool_pipeline_sits_below_the_loop():
    """Every tool is dispatched by the loop through its agent's table (docs/tools.md): the
    pipeline's modules import neither the loop nor what starts agents — a tool reaches its
    agent through ``ToolContext`` alone, children through the spawner protocol."""
    g = graph(installed())
    mods = _pipeline(g)
    assert {"tools.base", "tools.context", "tools.table", "tools.gate", "tools.builtin",
            "tools.function"} <= set(mods)
    for m in mods:
        for above in ("loop", "env", "supervisor", "synod", "servers", "roles.book", "mcp.client"):
            assert f"mnemon.orchestrator.{above}" not in g[f"mnemon.orchestrator.{m}"], (m, above)


# ---------------------------------------------------------------- the check itself bites


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    mods = {}
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        parts = Path(rel).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return mods


def test_the_check_sees_a_cycle_hidden_in_a_function_but_not_type_hints(tmp_path):
    files = {
        "mnemon/__init__.py": "",
        "mnemon/orchestrator/__init__.py": "",
        "mnemon/orchestrator/loop.py": "from .tools import call\n",
        "mnemon/orchestrator/tools.py": "def call():\n    from .loop import run\n",
        "mnemon/orchestrator/synod.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                        "    from .loop import run\n",
        "mnemon/orchestrator/env.py": "from . import synod\n",
    }
    mods = _tree(tmp_path, files)
    g = graph(mods)
    assert cycles(g) == [["mnemon.orchestrator.loop", "mnemon.orchestrator.tools"]]
    assert "mnemon.orchestrator.loop" not in g["mnemon.orchestrator.synod"]
    assert g["mnemon.orchestrator.env"] == {"mnemon.orchestrator.synod": 1}


def test_the_check_sees_an_upward_import(tmp_path):
    mods = _tree(tmp_path, {
        "mnemon/__init__.py": "",
        "mnemon/_lazy.py": "",
        "mnemon/session/__init__.py": "from .._lazy import attach\n",
        "mnemon/session/door.py": "def f():\n    from ..lineage.runroot import confine\n",
        "mnemon/lineage/__init__.py": "",
        "mnemon/lineage/runroot.py": "from mnemon.session import door\n",
    })
    bad = against_layers(graph(mods), mods)
    assert len(bad) == 1 and bad[0].endswith(":2: mnemon.session.door imports mnemon.lineage.runroot")


@pytest.mark.parametrize("name, expected", [("mnemon._lazy", -1), ("mnemon.session.x", 0),
                                            ("mnemon.orchestrator", 3), ("mnemon", 4)])
def test_the_layers(name, expected):
    assert layer(name) == expected
