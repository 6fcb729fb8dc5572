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


def _session_graph() -> dict[str, set[str]]:
    """``module → the session modules it imports`` over ``session/``, imports inside functions
    included, annotations under ``if TYPE_CHECKING:`` not (they are never executed)."""
    names = {}
    for p in (ROOT / "session").rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p

    def edges(name: str, path: Path) -> set[str]:
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        out: set[str] = set()

        def visit(node) -> None:
            if isinstance(node, ast.If) and getattr(node.test, "id", getattr(
                    node.test, "attr", None)) == "TYPE_CHECKING":
                return
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
                for target in [mod] + [f"{mod}.{a.name}" for a in node.names]:
                    while target and target not in names:
                        target = target.rpartition(".")[0]
                    if target and target != name and target != "session":
                        out.add(target)
            for child in ast.iter_child_nodes(node):
                visit(child)

        visit(ast.parse(path.read_text(encoding="utf-8")))
        return out

    return {name: edges(name, path) for name, path in names.items()}


def test_the_session_modules_import_one_another_without_a_cycle():
    """The session's fold is layers, not a circle (docs/design.md, "Architecture: the session
    layer"): no module of ``session`` reaches itself through its imports."""
    graph = _session_graph()
    assert graph["session.context"] >= {"session.turn", "session.render", "session.columns"}
    done: set[str] = set()

    def walk(name: str, path: list[str]) -> None:
        if name in path:
            raise AssertionError("an import cycle: " + " -> ".join(path[path.index(name):] +
                                                                    [name]))
        if name in done:
            return
        for dep in sorted(graph[name]):
            walk(dep, path + [name])
        done.add(name)

    for name in sorted(graph):
        walk(name, [])


def test_the_checkpoint_face_answers_its_functions_once_its_modules_are_loaded():
    """An imported submodule is an attribute of its package: no module of
    ``session.checkpoint`` is named after a function its face exports."""
    import importlib
    import types

    import mnemon.session.checkpoint as checkpoint

    for p in (ROOT / "session" / "checkpoint").glob("*.py"):
        importlib.import_module(f"mnemon.session.checkpoint.{p.stem}")
    for name in checkpoint.__all__:
        assert not isinstance(getattr(checkpoint, name), types.ModuleType), name
