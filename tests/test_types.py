"""The type checker over the package (decision 0350): mypy, configured in ``pyproject.toml``, must
report nothing.

The repository's folders install as one namespace (``session/`` is ``mnemon.session``, setup.py),
and the editable install maps them with an import hook that mypy does not follow. So the check
lays out ``mnemon/`` as a folder of links in a temporary directory (``src/mnemon``'s files and
the four top-level packages) and runs ``mypy -p mnemon`` there: the modules are checked under the
names users import, and relative imports resolve as they do at run time. Its cache goes to that
temporary directory too, so the check is cold every run and never reads a stale cache.

``python tests/test_types.py`` runs the same check and prints mypy's report, with the paths
written as the repository's own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = ("session", "lineage", "providers", "orchestrator")


def lay_out(where: Path) -> Path:
    """``where/mnemon``: links to ``src/mnemon``'s files and to the four package folders."""
    pkg = where / "mnemon"
    pkg.mkdir()
    for f in (ROOT / "src" / "mnemon").iterdir():
        if f.name != "__pycache__":
            (pkg / f.name).symlink_to(f)
    for top in TOP:
        (pkg / top).symlink_to(ROOT / top, target_is_directory=True)
    return pkg


def as_repository_paths(report: str) -> str:
    """``mnemon/session/x.py`` → ``session/x.py``; ``mnemon/__init__.py`` → ``src/mnemon/…``."""
    tops = "|".join(TOP)
    report = re.sub(rf"^mnemon/({tops})/", r"\1/", report, flags=re.M)
    return re.sub(r"^mnemon/", "src/mnemon/", report, flags=re.M)


def check() -> subprocess.CompletedProcess[str]:
    """mypy over ``mnemon``, from a fresh link tree and cache; its report in ``stdout``."""
    with tempfile.TemporaryDirectory(prefix="mnemon-types-") as tmp:
        lay_out(Path(tmp))
        run = subprocess.run(
            [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
             "--cache-dir", str(Path(tmp) / "cache"), "-p", "mnemon"],
            cwd=tmp, capture_output=True, text=True,
            env={k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "MYPY_CACHE_DIR")})
    run.stdout = as_repository_paths(run.stdout)
    return run


def test_the_package_type_checks() -> None:
    run = check()
    assert run.returncode == 0, f"mypy reported errors:\n{run.stdout}{run.stderr}"


if __name__ == "__main__":
    result = check()
    print(result.stdout + result.stderr, end="")
    sys.exit(result.returncode)
