"""No knots: the installed package's modules form layers, not circles.

Every module of the installed ``mnemon`` is read (not imported) and its imports collected —
those inside functions too, since an import inside a function is still an import; only those
under ``if TYPE_CHECKING:`` are left out, as they never run. The test fails on any cycle between
modules and on any import against the layer order ``session → lineage → providers →
orchestrator`` (a lower layer never imports a higher one). The face (``mnemon``,
``mnemon.__main__``) sits on top; its helpers ``mnemon._lazy``, ``_about``, ``_version``,
``_toml`` (the one TOML reader) and the error root ``mnemon.errors`` at the bottom, usable by
every layer.

And the library never imports its CLI: nothing imports ``mnemon.orchestrator.cli`` (or a module
under it) but the entry point ``mnemon.__main__`` and the package itself, and no module outside
``cli/`` imports ``argparse`` — the engine, jobs, the service, MCP and the batch engine take plain
values (``orchestrator/configure.py``), never parsed arguments.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
import importlib
import importlib.util
from pathlib import Path

import pytest

ORDER = ("session", "lineage", "providers", "orchestrator")
BASE = ("mnemon._lazy", "mnemon._version", "mnemon._about", "mnemon._toml", "mnemon.errors")
CLI = "mnemon.orchestrator.cli"
#: the modules that may import the CLI: the entry points (the console script names
#: ``mnemon.orchestrator.cli:console`` itself)
ENTRY_POINTS = ("mnemon.__main__",)


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


def imports(path: Path) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, those inside functions too; those under
    ``if TYPE_CHECKING:`` left out (they never run)."""
    todo: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _type_checking(node):
            todo.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        todo.extend(ast.iter_child_nodes(node))


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
                found[target] = min(line, found.get(target, line))

        for node in imports(path):
            if isinstance(node, ast.Import):
                for a in node.names:
                    add(a.name, node.lineno)
                continue
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in mods]
            for target in subs or [mod]:  # ``from pkg import sub`` is sub, not pkg's face
                add(target, node.lineno)
        out[name] = found
    return out


def external(mods: dict[str, Path]) -> dict[str, dict[str, int]]:
    """``module → {top-level name of a module outside the package: line}`` (``argparse``,
    ``trio``), read as ``graph`` reads imports: inside functions too, ``TYPE_CHECKING`` aside."""
    out: dict[str, dict[str, int]] = {}
    for name, path in mods.items():
        found: dict[str, int] = {}
        for node in imports(path):
            tops = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                    [node.module] if not node.level and node.module else [])
            for top in tops:
                key = top.split(".")[0]
                found[key] = min(node.lineno, found.get(key, node.lineno))
        out[name] = found
    return out


def _in_cli(name: str) -> bool:
    return name == CLI or name.startswith(CLI + ".")


def into_the_cli(g: dict[str, dict[str, int]], mods: dict[str, Path]) -> list[str]:
    """Imports of the CLI by anything but the entry points and the CLI itself."""
    return [f"{mods[a]}:{line}: {a} imports {b}" for a, deps in sorted(g.items())
            for b, line in sorted(deps.items())
            if _in_cli(b) and not _in_cli(a) and a not in ENTRY_POINTS]


def argparse_outside_the_cli(ext: dict[str, dict[str, int]], mods: dict[str, Path]) -> list[str]:
    return [f"{mods[a]}:{deps['argparse']}: {a} imports argparse" for a, deps in sorted(ext.items())
            if "argparse" in deps and not _in_cli(a)]


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


def test_nothing_imports_the_cli_but_the_entry_points():
    mods = installed()
    assert CLI in mods and f"{CLI}.commands.ask" in mods and f"{CLI}.options" in mods
    assert not into_the_cli(graph(mods), mods)


def test_no_module_outside_the_cli_imports_argparse():
    """Jobs, the service, MCP, the batch engine and the engine take plain values: a job is not
    read as if it were a command line (``configure.settings_from``)."""
    mods = installed()
    assert not argparse_outside_the_cli(external(mods), mods)


def test_the_cli_says_who_may_import_it():
    """As openai-agents' ``run_internal/__init__.py`` does: the package's docstring names who
    may import it, and the two rules above hold it."""
    import mnemon.orchestrator.cli as cli

    assert "Who may import this package" in (cli.__doc__ or "")


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


def test_the_check_sees_the_cli_imported_and_argparse_used(tmp_path):
    mods = _tree(tmp_path, {
        "mnemon/__init__.py": "",
        "mnemon/__main__.py": "from .orchestrator.cli import console\n",
        "mnemon/orchestrator/__init__.py": "",
        "mnemon/orchestrator/cli/__init__.py": "import argparse\nfrom .commands import ask\n",
        "mnemon/orchestrator/cli/commands/__init__.py": "",
        "mnemon/orchestrator/cli/commands/ask.py": "from ... import settings\n",
        "mnemon/orchestrator/settings.py": "",
        "mnemon/orchestrator/jobs/__init__.py": "",
        "mnemon/orchestrator/jobs/build.py": "def f():\n    import argparse\n"
                                             "    from ..cli.commands.ask import run\n",
    })
    bad = into_the_cli(graph(mods), mods)
    assert len(bad) == 1 and bad[0].endswith(
        ":3: mnemon.orchestrator.jobs.build imports mnemon.orchestrator.cli.commands.ask")
    bad = argparse_outside_the_cli(external(mods), mods)
    assert len(bad) == 1 and bad[0].endswith(":2: mnemon.orchestrator.jobs.build imports argparse")


@pytest.mark.parametrize("name, expected", [("mnemon._lazy", -1), ("mnemon.errors", -1),
                                            ("mnemon.session.x", 0),
                                            ("mnemon.orchestrator", 3), ("mnemon", 4)])
def test_the_layers(name, expected):
    assert layer(name) == expected
