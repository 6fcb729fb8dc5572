"""The distribution as users install it: one ``mnemon`` namespace, a wheel holding every module
and data file of the source tree, a lazy face, and no import that a user's own ``session`` or
``providers`` package can shadow (decision 0208)."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import mnemon

ROOT = Path(__file__).resolve().parents[1]
TOP = ("session", "lineage", "providers", "orchestrator")
EXAMPLES = ROOT / "tests" / "data" / "examples"


def _sources() -> list[Path]:
    files = [p for top in TOP for p in (ROOT / top).rglob("*.py")]
    return files + sorted((ROOT / "src" / "mnemon").glob("*.py"))


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_imports_a_bare_top_level_name(path):
    """Inside the package every import is relative (or spelt ``mnemon.…``): a bare ``session``
    would resolve to whatever a user has on ``sys.path``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            assert node.module.split(".")[0] not in TOP, f"{path}:{node.lineno}: {node.module}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                assert alias.name.split(".")[0] not in TOP, f"{path}:{node.lineno}: {alias.name}"


def test_face_names_resolve_and_version_comes_from_metadata():
    assert mnemon.__version__ == importlib.metadata.version("mnemon")
    for name in mnemon.__all__:
        assert getattr(mnemon, name) is not None, name
    assert mnemon.Settings is importlib.import_module("mnemon.orchestrator.settings").Settings
    assert set(dir(mnemon)) >= set(mnemon.__all__)
    with pytest.raises(AttributeError):
        mnemon.no_such_name  # noqa: B018


@pytest.mark.parametrize("package", ["mnemon", *(f"mnemon.{t}" for t in TOP)])
def test_every_face_is_lazy_and_complete(package):
    mod = importlib.import_module(package)
    for name in mod.__all__:
        assert getattr(mod, name) is not None, f"{package}.{name}"


def _wheel(tmp_path_factory) -> Path:
    """The wheel under test: the one CI built from the sdist (``MNEMON_WHEEL``), or a fresh
    sdist → wheel build of this tree with the installed build tools (no network)."""
    given = os.environ.get("MNEMON_WHEEL")
    if given:
        return Path(given)
    pytest.importorskip("build", reason="the test extra installs `build`")
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out),
                           str(ROOT)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = out.glob("mnemon-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return _wheel(tmp_path_factory)


def _tracked() -> list[str]:
    """The source tree's files of the four packages and the face: git's list where there is
    one (so stray build products do not count), else the folders' files."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                              "--", *TOP, "src/mnemon"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
        if out:
            return out
    except (OSError, subprocess.CalledProcessError):
        pass
    return [str(p.relative_to(ROOT)) for top in (*TOP, "src/mnemon") for p in (ROOT / top).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".so"]


def test_wheel_holds_exactly_the_source_tree_under_mnemon(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    dist_info = {t for t in tops if t.endswith(".dist-info")}
    assert tops - dist_info == {"mnemon"}, f"only mnemon/ may land in site-packages: {tops}"
    expected = set()
    for rel in _tracked():
        expected.add("mnemon/" + (rel[len("src/mnemon/"):] if rel.startswith("src/mnemon/") else rel))
    files = {n for n in names if not n.startswith(tuple(dist_info)) and not n.endswith("/")}
    native = {n for n in files if n.endswith(".so") or n.endswith(".pyd")}
    assert files - native == expected | {"mnemon/_version.py"}, "and the version written at build"
    version = zipfile.ZipFile(wheel).read("mnemon/_version.py").decode()
    assert f'__version__ = "{importlib.metadata.version("mnemon")}"' in version
    assert {Path(n).name.split(".")[0] for n in native} == {"_b3many", "_scan", "_otlp"}, \
        "the C accelerators ship in the wheel"
    assert any(n.startswith("mnemon/orchestrator/corpus/") for n in files), "the demo corpus"
    entry = zipfile.ZipFile(wheel).read(f"{dist_info.pop()}/entry_points.txt").decode()
    assert "mnemon = mnemon.orchestrator.cli:console" in entry


@pytest.mark.skipif(not os.environ.get("MNEMON_WHEEL"), reason="CI installs the wheel")
def test_ci_tests_the_installed_wheel_not_the_tree():
    from mnemon import session
    from mnemon.session import native

    for mod in (mnemon, session, native):
        here = Path(mod.__file__).resolve()
        assert "site-packages" in here.parts, f"{mod.__name__} came from the source tree: {here}"

    assert native.AVAILABLE or os.environ.get("MNEMON_NO_NATIVE")


def _shadows(tmp: Path) -> Path:
    """A user's project whose own top-level packages share our folder names, each of which
    fails loudly when imported."""
    shadow = tmp / "userproject"
    for name in TOP:
        (shadow / name).mkdir(parents=True)
        (shadow / name / "__init__.py").write_text(
            f"raise ImportError('the user package {name} was imported')\n")
    (shadow / "mnemon_user.py").write_text("")
    return shadow


def test_a_users_session_or_providers_package_changes_nothing(tmp_path):
    shadow = _shadows(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(shadow)}
    code = ("import trio, mnemon\n"
            "async def main():\n"
            "    async with mnemon.open_supervisor(" + repr(str(tmp_path / "r")) + ", "
            "mnemon.make_provider('scripted'), mnemon.Settings()) as sup:\n"
            "        return await sup.ask('hi')\n"
            "node = trio.run(main)\n"
            "print(node.state, len(mnemon.open_agent(" + repr(str(tmp_path / "r")) +
            " + '/agents/' + node.id).index()))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=shadow, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[0] == "ended"
    run = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "mnemon", "demo", "--run-root", str(run)],
                          cwd=shadow, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = subprocess.run([sys.executable, "-m", "mnemon", "transcript", "grep",
                           str(run / "agents" / "a1"), "codeword", "--json"],
                          cwd=shadow, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '"hits"' in proc.stdout


def _imported_by(args: list[str], cwd: Path) -> set[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "mnemon", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


@pytest.mark.parametrize("args", [["--help"], ["--version"],
                                  ["transcript", "grep", "agents/a1", "codeword"],
                                  ["transcript", "index", "agents/a1"],
                                  ["context", "agents/a1"], ["tree", "."]])
def test_cli_loads_no_provider_or_http_code_it_does_not_use(args, tmp_path):
    run = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "mnemon", "demo", "--run-root", str(run)], check=True,
                   capture_output=True, timeout=120)
    mods = _imported_by(args, run)
    assert "mnemon.orchestrator.cli" in mods
    unused = {m for m in mods if m.split(".")[0] in ("httpx", "httpcore", "anyio", "h11", "structlog",
                                                     "mcp", "mcp_types", "httpx2", "pydantic",
                                                     "prompt_toolkit", "rich")
              or m.startswith("mnemon.providers")}
    assert not unused, f"mnemon {' '.join(args)} imported {sorted(unused)}"


def test_python_dash_m_is_the_console_script():
    a = subprocess.run([sys.executable, "-m", "mnemon", "--version"], capture_output=True,
                       text=True, timeout=60)
    assert a.returncode == 0 and a.stdout.strip() == f"mnemon {mnemon.__version__}"
    b = subprocess.run([sys.executable, "-m", "mnemon", "transcript", "read", "/nowhere",
                        "--turns", "1"], capture_output=True, text=True, timeout=60)
    assert b.returncode == 2 and len(b.stderr.strip().splitlines()) == 1
    assert "Traceback" not in b.stderr
