"""The module graph of the installed package, counted: modules, imports between them, imports
against the layers, and imports from the library into its command line.

    python bench/modgraph.py [--json]

Reads the installed ``mnemon`` (an editable install or a wheel: run it with the interpreter of
the environment to count) the way ``tests/test_knots.py`` does — every import, those inside
functions included, ``if TYPE_CHECKING:`` ones left out — and prints:

- ``modules``: modules of the package; ``imports``: distinct module → module edges;
- ``against_layers``: edges from a lower layer to a higher (``session → lineage → providers →
  orchestrator``; the test holds it at 0);
- ``into_cli``: edges from a module outside the command line (``orchestrator.cli`` and, before
  it was a package, ``orchestrator.commands``/``cli``/``options``) into it — the library
  depending on its CLI;
- ``argparse``: modules outside the command line that import ``argparse``.

This is a count, not a test: it exits 0.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_knots import against_layers, graph, installed  # noqa: E402

CLI = ("mnemon.orchestrator.cli", "mnemon.orchestrator.commands", "mnemon.orchestrator.options")


def in_cli(name: str) -> bool:
    return any(name == c or name.startswith(c + ".") for c in CLI)


def imports_argparse(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "argparse":
            return True
    return False


def counts() -> dict:
    mods = installed()
    g = graph(mods)
    return {
        "modules": len(mods),
        "imports": sum(len(v) for v in g.values()),
        "against_layers": len(against_layers(g, mods)),
        "into_cli": sorted(f"{a} -> {b}" for a, deps in g.items() if not in_cli(a)
                           for b in deps if in_cli(b) and a != "mnemon.__main__"),
        "argparse": sorted(m for m, p in mods.items() if not in_cli(m) and imports_argparse(p)),
    }


def main() -> None:
    out = counts()
    if "--json" in sys.argv:
        print(json.dumps(out))
        return
    for k, v in out.items():
        if isinstance(v, list):
            print(f"{k}: {len(v)}")
            for line in v:
                print(f"  {line}")
        else:
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
