"""A log made ahead of its agent (``session.log.unborn``): an unnamed file, named at the birth
with one link — never a ``record.jsonl`` before it, never a second writer's log taken over."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mnemon.lineage.runroot import create_run_root, list_agents
from mnemon.session import log as L
from mnemon.session.errors import LogBusy

pytestmark = pytest.mark.skipif(not L._TMPFILE, reason="no unnamed files on this system")


def closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def test_an_unborn_log_has_no_name_until_its_birth(tmp_path):
    root = create_run_root(tmp_path / "run", "test")
    path = root / "agents" / "t1" / "record.jsonl"
    fd = L.unborn(path)
    assert fd is not None
    assert path.parent.is_dir() and not any(path.parent.iterdir())
    assert list_agents(root) == [], "a directory without a record.jsonl is no agent"
    log = L.RecordLog(path, new=True, unborn=fd)
    assert path.is_file() and list_agents(root) == ["t1"]
    log.append_line(b'{"t":"x"}')
    assert path.read_bytes() == b'{"t":"x"}\n'
    with pytest.raises(LogBusy):  # the lock taken ahead is the log's: one writer
        L.RecordLog(path)
    log.close()


def test_a_log_another_writer_created_first_is_not_taken_over(tmp_path):
    path = tmp_path / "agents" / "t1" / "record.jsonl"
    fd = L.unborn(path)
    path.write_bytes(b'{"t":"theirs"}\n')
    with pytest.raises(FileExistsError):
        L.RecordLog(path, new=True, unborn=fd)
    assert closed(fd)
    assert path.read_bytes() == b'{"t":"theirs"}\n'


def test_an_empty_log_found_at_the_birth_is_opened_as_without_it(tmp_path):
    path = tmp_path / "agents" / "t1" / "record.jsonl"
    fd = L.unborn(path)
    path.touch()
    n = len(os.listdir("/proc/self/fd"))
    log = L.RecordLog(path, new=True, unborn=fd)
    assert len(os.listdir("/proc/self/fd")) == n, "the unborn file closed, the log opened"
    assert os.fstat(log._fd).st_ino == path.stat().st_ino
    log.append_line(b'{"t":"x"}')
    log.close()
    assert path.read_bytes() == b'{"t":"x"}\n'


def test_a_process_killed_before_the_birth_leaves_no_agent(tmp_path):
    root = create_run_root(tmp_path / "run", "test")
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from mnemon.session.log import unborn\n"
        "fd = unborn(Path(sys.argv[1]) / 'agents' / 't1' / 'record.jsonl')\n"
        "os.write(fd, b'{}\\n')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")
    done = subprocess.run([sys.executable, "-c", code, str(root)])
    assert done.returncode == -9
    assert (root / "agents" / "t1").is_dir()
    assert not any((root / "agents" / "t1").iterdir())
    assert list_agents(root) == []


def test_without_unnamed_files_the_log_is_created_at_the_birth(tmp_path, monkeypatch):
    monkeypatch.setattr(L, "_TMPFILE", 0)
    path = tmp_path / "agents" / "t1" / "record.jsonl"
    assert L.unborn(path) is None and path.parent.is_dir()
    L.RecordLog(path, new=True, unborn=None).close()
    assert path.is_file()


def test_a_system_that_cannot_name_them_makes_no_more(tmp_path, monkeypatch):
    """A link that fails for any reason but an existing log (no ``/proc``, say): the log is
    created as without it, and no further unborn file is made in this process."""
    monkeypatch.setattr(L, "_TMPFILE", L._TMPFILE)  # restored after the test
    path = tmp_path / "agents" / "t1" / "record.jsonl"
    fd = L.unborn(path)

    def refuse(*a, **k):
        raise PermissionError("no")

    monkeypatch.setattr(L.os, "link", refuse)
    log = L.RecordLog(path, new=True, unborn=fd)
    assert path.is_file()
    log.close()
    assert L.unborn(tmp_path / "agents" / "t2" / "record.jsonl") is None


def test_two_writers_creating_one_log_leave_one_writer(tmp_path):
    """Two writers creating one log at once — one naming a file made ahead and one creating
    it, or both creating it — in every interleaving the threads find: exactly one of them
    writes, the other is refused by name (``FileExistsError`` or ``LogBusy``), and the log holds
    the winner's line alone. (Found by this test: a writer that opened the file while it was
    still empty, then waited for the lock, used to append after the first writer's records.)"""
    import threading

    for i in range(400):
        path = tmp_path / "agents" / f"t{i}" / "record.jsonl"
        fd = L.unborn(path) if i % 2 else None
        go = threading.Barrier(2)
        won: list[str] = []
        refused: list[str] = []

        def writer(name: str, unborn: int | None) -> None:
            go.wait()
            try:
                log = L.RecordLog(path, new=True, unborn=unborn)
            except (FileExistsError, LogBusy):
                refused.append(name)
                return
            log.append_line(f'{{"t":"{name}"}}'.encode())
            won.append(name)
            log.close()

        threads = [threading.Thread(target=writer, args=("first", fd)),
                   threading.Thread(target=writer, args=("second", None))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # both may succeed one after the other only if the first closed before the second
        # opened — then the second finds the first's record and is refused, so never both
        assert len(won) == 1 and len(refused) == 1, (i, won, refused)
        assert path.read_bytes() == f'{{"t":"{won[0]}"}}\n'.encode()


@pytest.mark.parametrize("made_ahead", [False, True])
def test_a_new_logs_name_is_made_durable_with_its_first_record(tmp_path, monkeypatch,
                                                               made_ahead):
    """With a durability setting, the first fsync of a new log also syncs its directory and
    the agents/ directory holding it (once): a power cut after an acknowledged record cannot
    lose the log's name. Without one, nothing is synced."""
    synced: list[str] = []
    real = os.fsync

    def spy(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(L.os, "fsync", spy)
    for setting in ("none", "record"):
        synced.clear()
        path = tmp_path / setting / "agents" / "t1" / "record.jsonl"
        fd = L.unborn(path) if made_ahead else None
        if not made_ahead:
            path.parent.mkdir(parents=True)
        log = L.RecordLog(path, new=True, fsync=setting, unborn=fd)
        log.append_line(b'{"t":"a"}')
        log.append_line(b'{"t":"b"}')
        log.close()
        if setting == "none":
            assert synced == []
        else:
            dirs = [s for s in synced if os.path.isdir(s)]
            assert dirs == [str(path.parent), str(path.parent.parent)], synced
