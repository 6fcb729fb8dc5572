"""A light core and its surfaces as extras; a CLI whose start stays small.

The core install is the engine (trio, httpx, blake3, msgspec, regex, structlog). The service,
MCP, chat, Dask and plots are extras: without one, its command answers one line naming the
install command and exits 2, before anything is written. The engine itself — ``import
mnemon``, the demo, jobs, replays, the door — runs with every surface absent. And the commands
that people type most (``--version``, ``--help``, the door) import none of the surfaces, no
provider and no HTTP client: the start cannot regress without a test failing here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from mnemon.orchestrator import cli, extras
from tests.conftest import EXAMPLES, TRAJECTORIES

ROOT = Path(__file__).resolve().parents[1]
ENGINE = {"trio", "httpx", "blake3", "msgspec", "regex", "structlog"}
#: the distribution each surface module comes from (they are the same names here)
SURFACES = {m for mods in extras.EXTRAS.values() for m in mods}
#: the top-level packages of the surfaces (``opentelemetry`` for ``opentelemetry.sdk``)
TOPS = {m.split(".")[0] for m in SURFACES}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_the_core_dependencies_are_the_engines():
    assert {_name(r) for r in _project()["dependencies"]} == ENGINE


def test_each_surface_is_an_extra_and_all_is_their_union():
    opt = {k: {_name(r) for r in v} for k, v in _project()["optional-dependencies"].items()}
    for extra, modules in extras.EXTRAS.items():
        assert {m.replace("_", "-").replace(".", "-") for m in modules} <= opt[extra], extra
    union = set().union(*(opt[e] for e in extras.EXTRAS))
    assert opt["all"] == union
    assert union <= opt["test"], "the README's install runs every test"
    assert not ENGINE & union


def _hide(monkeypatch, extra: str) -> None:
    gone = set(extras.EXTRAS[extra])
    real = extras.find_spec
    monkeypatch.setattr(extras, "find_spec", lambda name: None if name in gone else real(name))


@pytest.mark.parametrize(("extra", "argv"), [
    ("serve", ["serve", "--run-root", "{tmp}/run", "--port", "0"]),
    ("serve", ["serve", str(EXAMPLES / "plain")]),
    ("mcp", ["mcp", str(EXAMPLES / "plain")]),
    ("chat", ["chat", "--run-root", "{tmp}/run"]),
    ("dask", ["run", "{tmp}/job.toml", "--engine", "dask", "--run-root", "{tmp}/run"]),
    ("mcp", ["ask", "--mcp", "{tmp}/servers.json", "--run-root", "{tmp}/run", "hello"]),
])
def test_a_surface_without_its_extra_is_one_line_and_exit_2(extra, argv, tmp_path, capsys,
                                                             monkeypatch):
    (tmp_path / "job.toml").write_text('[[tasks]]\nid = "t"\nprompt = "hi"\n')
    (tmp_path / "servers.json").write_text('{"mcpServers": {}}')
    _hide(monkeypatch, extra)
    assert cli.main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith(f"pip install 'mnemon[{extra}]'\n"), err
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists(), "refused before anything was written"


_BLOCK = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None  # as if not installed: import fails, find_spec answers None
"""


def _run(script: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_the_engine_runs_with_every_surface_absent(tmp_path):
    """What a core install offers, in a process where no surface can be imported."""
    traj = TRAJECTORIES / "gen-native__short-fix.jsonl"
    (tmp_path / "job.toml").write_text('[[tasks]]\nid = "t"\nprompt = "hi"\n')
    done = _run(_BLOCK.format(blocked=sorted(SURFACES)) + f"""
import trio
import mnemon
from mnemon.orchestrator.cli import main

async def ask():
    async with mnemon.open_supervisor({str(tmp_path / "lib")!r}, mnemon.make_provider("scripted"),
                                      mnemon.Settings()) as sup:
        return await sup.ask("say hello")

node = trio.run(ask)
assert node.state == "ended", node.state
codes = [main(["demo", "--run-root", "demo"]),
         main(["transcript", "grep", "demo/agents/a1", "codeword"]),
         main(["run", "job.toml", "--run-root", "job"]),
         main(["replay", {str(traj)!r}, "--out", "replay", "--context-window", "32000"]),
         main(["verify", "demo"]),
         main(["serve", "demo"])]
print(codes)
assert codes == [0, 0, 0, 0, 0, 2], codes
leaked = sorted(m for m in sys.modules if m.split(".")[0] in {sorted(TOPS)!r}
                and sys.modules[m] is not None)
assert not leaked, leaked
""", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "pip install 'mnemon[serve]'" in done.stderr
    assert "pip install 'mnemon[plot]'" in done.stderr  # the replay's plot, one line


#: modules a start must not pay for: the surfaces, the HTTP client, every provider, the
#: supervisor and the loop, the log configuration, and the installed metadata
_HEAVY = ("hypercorn", "starlette", "mcp", "prompt_toolkit", "rich", "distributed", "dask",
          "matplotlib", "httpx", "anyio", "trio", "structlog", "importlib.metadata",
          "mnemon.providers.", "mnemon.orchestrator.service", "mnemon.orchestrator.mcp",
          "mnemon.orchestrator.chat", "mnemon.orchestrator.jobs", "mnemon.orchestrator.supervisor",
          "mnemon.orchestrator.loop", "mnemon.orchestrator.logs", "opentelemetry",
          "google.protobuf", "mnemon.orchestrator.tracing")


@pytest.mark.parametrize("argv", [
    ["--version"], ["--help"], ["transcript", "--help"],
    ["transcript", "read", "{ex}/child/agents/c1", "--turns", "2"],
    ["transcript", "index", "{ex}/child/agents/c1", "--json"],
    ["transcript", "grep", "{ex}/child/agents/c1", "the", "--json"],
    ["context", "{ex}/evicted/agents/a1"],
    ["tree", "{ex}/child"],
], ids=lambda a: " ".join(a[:2]))
def test_the_common_commands_import_no_surface(argv, tmp_path):
    argv = [a.format(ex=EXAMPLES) for a in argv]
    done = _run(f"""
import io, json, sys, contextlib
from mnemon.orchestrator.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        code = main({argv!r})
    except SystemExit as e:  # argparse's --help
        code = e.code
print(json.dumps([code, sorted(sys.modules)]))
""", tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    code, modules = json.loads(done.stdout.splitlines()[-1])
    assert code in (0, None)
    heavy = [m for m in modules if any(m == h.rstrip(".") or m.startswith(h if h.endswith(".")
                                       else h + ".") for h in _HEAVY)]
    assert not heavy, heavy
    if argv[0] in ("--version", "--help"):
        assert "msgspec" not in modules, "the version and the help decode nothing"


def test_a_scripted_run_imports_no_http_client_and_no_adapter(tmp_path):
    """``mnemon ask`` and ``demo`` on the scripted provider: the provider not selected is not
    imported, and neither is httpx (the adapters import it; the loop needs only the errors)."""
    done = _run(f"""
import io, json, os, sys, contextlib
for k in [k for k in os.environ if k.startswith("OTEL_")]:  # tracing off
    del os.environ[k]
from mnemon.orchestrator.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    codes = [main(["ask", "--run-root", "a", "hello"]), main(["demo", "--run-root", "d"])]
print(json.dumps([codes, sorted(sys.modules)]))
""", tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    codes, modules = json.loads(done.stdout.splitlines()[-1])
    assert codes == [0, 0]
    assert "mnemon.providers.scripted" in modules
    heavy = [m for m in modules if m.split(".")[0] in ("httpx", "httpcore", "anyio")
             or m in ("mnemon.providers.anthropic", "mnemon.providers.openai",
                      "mnemon.providers.http")]
    assert not heavy, heavy
    traced = [m for m in modules if m.split(".")[0] in ("opentelemetry", "google")
              or m.startswith("mnemon.orchestrator.tracing.") and m.rsplit(".", 1)[1] in (
                  "live", "build", "send", "ship", "tap", "protobuf")]
    assert not traced, f"tracing off, yet the run imported {traced}"
