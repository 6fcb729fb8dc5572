"""Disk faults and writers: ENOSPC and EIO on append and on fsync, and one writer per log.

Faults come from a fault-injecting layer over ``os.write``/``os.fsync`` for the log's own
descriptor only (the test's other files are untouched)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mnemon.lineage.runroot import agent_source
from mnemon.lineage.view import open_agent
from mnemon.orchestrator import logs
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import Supervisor, open_supervisor
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.agentlog import AgentLog
from mnemon.session.errors import LogBusy, LogWriteFailed
from mnemon.session import chain
from mnemon.session import log as log_module
from mnemon.session.log import RecordLog, find_torn_tail
from mnemon.session.records import SessionStarted, Steering, UserPrompt
from mnemon.session.resume import fold_file


@pytest.fixture(autouse=True)
def _quiet():
    logs.quiet()


class Faults:
    """Fail writes/fsyncs to files under ``where`` when armed: ``partial`` writes half the
    bytes first, then the error (what a filling disk does).

    A layer over ``os.write`` reaches the writer's Python path only, so it is taken here: the
    native append (check, seal and write in one call, decision 0473) writes below ``os`` and
    is faulted with a real file-size limit instead (``test_the_native_append_...``)."""

    def __init__(self, monkeypatch, where: Path):
        monkeypatch.setattr(log_module, "_Chain", log_module._NoChain)
        self.where = str(where)
        self.write_error: int | None = None
        self.fsync_error: int | None = None
        self.partial = True
        self.writes_failed = 0
        real_write, real_fsync = os.write, os.fsync

        def ours(fd: int) -> bool:
            try:
                return os.readlink(f"/proc/self/fd/{fd}").startswith(self.where)
            except OSError:
                return False

        def write(fd, data):
            if self.write_error is not None and ours(fd):
                self.writes_failed += 1
                if self.partial and len(data) > 1:
                    real_write(fd, bytes(data[: len(data) // 2]))
                raise OSError(self.write_error, os.strerror(self.write_error))
            return real_write(fd, data)

        def fsync(fd):
            if self.fsync_error is not None and ours(fd):
                raise OSError(self.fsync_error, os.strerror(self.fsync_error))
            return real_fsync(fd)

        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "fsync", fsync)


def _only_whole_records(path: Path) -> None:
    assert find_torn_tail(path) is None
    assert path.read_bytes().endswith(b"\n")
    fold_file(path, "agents/a1/record.jsonl")  # every line is a record the fold accepts


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EIO])
def test_a_failed_append_leaves_only_whole_records_and_names_the_path(tmp_path, monkeypatch, err):
    path = tmp_path / "agents" / "a1" / "record.jsonl"
    alog = AgentLog.create(path, "agents/a1/record.jsonl", SessionStarted(agent="a1"))
    alog.prompt("first")
    faults = Faults(monkeypatch, tmp_path)
    faults.write_error = err
    with pytest.raises(LogWriteFailed, match=str(path).replace(".", r"\.") + r": append failed"):
        alog.prompt("x" * 10_000)
    assert faults.writes_failed == 1
    _only_whole_records(path)
    with pytest.raises(LogWriteFailed):
        alog.append(Steering(text="still full"))
    _only_whole_records(path)
    faults.write_error = None  # space again: the same writer goes on
    alog.prompt("second")
    alog.close()
    ctx, torn = fold_file(path, "agents/a1/record.jsonl")
    assert torn is None
    assert [t.id for t in ctx.turns] == [1, 2]


_NATIVE_FULL = r"""
import os, resource, signal, sys
from pathlib import Path
from mnemon.session import log as L
from mnemon.session.agentlog import AgentLog
from mnemon.session.errors import LogWriteFailed
from mnemon.session.records import SessionStarted, Steering

assert L._Chain is not L._NoChain, "the native extension is built"
path = Path(sys.argv[1]) / "agents" / "a1" / "record.jsonl"
alog = AgentLog.create(path, "agents/a1/record.jsonl", SessionStarted(agent="a1"))
alog.prompt("first")
assert type(alog.log._chain.h) is L._Chain, "the append below is the native one"
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size + 16, hard))
try:
    alog.prompt("x" * 10_000)  # written in part up to the limit, then refused by the kernel
except LogWriteFailed as e:
    print("refused:", e)
else:
    raise SystemExit("a record past the file-size limit was taken")
try:
    alog.append(Steering(text="still full"))
except LogWriteFailed:
    pass
else:
    raise SystemExit("a second record past the limit was taken")
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # space again: the writer goes on
alog.prompt("second")
print("head", *alog.log.head())
alog.close()
print("ok")
"""


def test_the_native_append_leaves_only_whole_records_when_a_write_fails(tmp_path):
    """The native append's own write failing half-way (a real limit, RLIMIT_FSIZE, in a
    process of its own): the partial line is cut off, the writer refuses nothing it should
    take once the space is back, and the chain goes on from what the file holds."""
    out = subprocess.run([sys.executable, "-c", _NATIVE_FULL, str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "refused:" in out.stdout and "append failed (File too large)" in out.stdout
    assert out.stdout.rstrip().endswith("ok")
    path = tmp_path / "agents" / "a1" / "record.jsonl"
    _only_whole_records(path)
    ctx, torn = fold_file(path, "agents/a1/record.jsonl")
    assert torn is None
    assert [t.id for t in ctx.turns] == [1, 2]
    head = next(line.split()[1:] for line in out.stdout.splitlines() if line.startswith("head"))
    rep = chain.check(path, "a1")  # the chain as the writer left it, whole
    assert rep.broken is None and [str(rep.bytes), str(rep.lines), rep.head] == head
    again, torn = AgentLog.resume(path, "agents/a1/record.jsonl")  # refuses a broken chain
    assert torn is None
    again.close()


def test_a_failed_fsync_stops_the_writer_and_a_reopen_continues(tmp_path, monkeypatch):
    path = tmp_path / "agents" / "a1" / "record.jsonl"
    alog = AgentLog.create(path, "agents/a1/record.jsonl", SessionStarted(agent="a1"),
                           fsync="record")
    alog.prompt("first")
    faults = Faults(monkeypatch, tmp_path)
    faults.fsync_error = errno.EIO
    with pytest.raises(LogWriteFailed, match="failed fsync"):
        alog.prompt("second")
    faults.fsync_error = None
    with pytest.raises(LogWriteFailed, match="no more appends"):
        alog.prompt("third")
    alog.close()
    again, torn = AgentLog.resume(path, "agents/a1/record.jsonl", fsync="record")
    assert torn is None
    again.prompt("after the reopen")
    again.close()
    _only_whole_records(path)


def test_one_writer_per_log_in_this_process_and_another(tmp_path):
    path = tmp_path / "agents" / "a1" / "record.jsonl"
    alog = AgentLog.create(path, "agents/a1/record.jsonl", SessionStarted(agent="a1"))
    alog.prompt("mine")
    with open(path, "ab") as f:  # a crash mid-append elsewhere would leave this
        f.write(b'{"t":"UserPrompt","turn":9')
    before = path.read_bytes()
    with pytest.raises(LogBusy, match="open for writing elsewhere"):
        RecordLog(path)
    code = ("import sys\nfrom mnemon.session.agentlog import AgentLog\n"
            "from mnemon.session.errors import LogBusy\n"
            f"try:\n    AgentLog.resume(__import__('pathlib').Path({str(path)!r}), 'x')\n"
            "except LogBusy as e:\n    print('busy', e)\n    sys.exit(3)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3 and proc.stdout.startswith("busy"), proc.stderr
    assert path.read_bytes() == before, "a refused writer touched nothing, not even the torn tail"
    alog.close()
    again, torn = AgentLog.resume(path, "agents/a1/record.jsonl")
    assert torn is not None and torn.moved_to
    again.close()


def _policy(request, state):
    state["k"] = state.get("k", 0) + 1
    if state["k"] <= 6:
        return [{"type": "tool_use", "id": f"c{state['k']}", "name": "transcript_index",
                 "input": {}}], "tool_use"
    return [{"type": "text", "text": "finished"}], "end_turn"


async def test_a_disk_that_fills_mid_run_ends_the_agent_and_a_resume_finishes(tmp_path, monkeypatch):
    root = tmp_path / "run"
    faults = Faults(monkeypatch, root / "agents")
    appends = {"n": 0}
    real_append = RecordLog.append_line

    def counting(self, line):
        appends["n"] += 1
        if appends["n"] == 12:
            faults.write_error = errno.ENOSPC  # the disk fills here and stays full
        return real_append(self, line)

    monkeypatch.setattr(RecordLog, "append_line", counting)
    settings = Settings(model="scripted")
    async with open_supervisor(root, ScriptedProvider(policy=_policy), settings) as sup:
        node = await sup.ask("work", agent_id="a1")
    assert node.state == "failed"
    assert "LogWriteFailed" in node.reason and str(root / agent_source("a1")) in node.reason
    path = root / agent_source("a1")
    _only_whole_records(path)
    faults.write_error = None  # space again
    sup2 = Supervisor(root, ScriptedProvider(policy=_policy), settings)
    roots = sup2.resume_run()
    assert [n.id for n in roots] == ["a1"]
    await sup2.run(roots[0])
    sup2.close()
    assert roots[0].reason == "done"
    _root, _a, ctx, torn = open_agent(root / "agents" / "a1")
    assert torn is None
    turns = [t.id for t in ctx.turns]
    assert turns == sorted(set(turns)), "no turn recorded twice"


def test_readers_see_only_whole_records_while_an_agent_appends(tmp_path):
    """A writer appends in one thread while readers fold the log, count its lines and read a
    child's pointers into it in another: every read sees whole records, never an error."""
    import threading

    from mnemon.lineage.runroot import create_run_root
    from mnemon.session.log import iter_lines

    root = create_run_root(tmp_path / "run", "tests")
    path = root / agent_source("a1")
    alog = AgentLog.create(path, agent_source("a1"), SessionStarted(agent="a1"))
    stop = threading.Event()
    errors: list[BaseException] = []

    def write():
        try:
            for i in range(3000):
                alog.prompt(f"prompt {i} " + "x" * (i % 700))
                alog.append(Steering(text="s" * (i % 1300)))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
        finally:
            stop.set()

    t = threading.Thread(target=write)
    t.start()
    folds = 0
    last = 0
    while not stop.is_set():
        ctx, _torn = fold_file(path, agent_source("a1"))
        assert len(ctx.turns) >= last
        last = len(ctx.turns)
        n = sum(1 for _ in iter_lines(path))
        assert n >= 1 + len(ctx.turns)
        folds += 1
    t.join()
    alog.close()
    assert not errors and folds > 3
    ctx, torn = fold_file(path, agent_source("a1"))
    assert torn is None and len(ctx.turns) == 3000


def test_the_native_append_syncs_each_record_under_fsync_record(tmp_path, monkeypatch):
    """``fsync = "record"`` on the native append's path (decision 0473): each record is synced
    once it is written, as on the Python path."""
    if log_module._Chain is log_module._NoChain:  # the extension is optional (setup.py)
        pytest.skip("the native extension is not built")
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    path = tmp_path / "agents" / "a1" / "record.jsonl"
    alog = AgentLog.create(path, "agents/a1/record.jsonl", SessionStarted(agent="a1"),
                           fsync="record")
    assert type(alog.log._chain.h) is log_module._Chain
    fd = alog.log._fd
    assert calls.count(fd) == 1  # the opening record
    alog.prompt("one")
    alog.prompt("two")
    assert calls.count(fd) == 3
    alog.close()
