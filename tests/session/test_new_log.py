"""A new agent's log (``RecordLog(path, new=True)``): made with its directory, refused over a
log that holds records, adopted when the file is there and empty — whichever way it is opened
(``session.log._created``: directory first, then the file with ``O_EXCL``)."""

from __future__ import annotations

import os

import pytest

from mnemon.session import log as L
from mnemon.session.errors import LogBusy


def test_a_new_log_makes_its_directory_and_its_file(tmp_path):
    path = tmp_path / "agents" / "a1" / "record.jsonl"
    log = L.RecordLog(path, new=True, chain=True)
    assert path.is_file() and path.stat().st_size == 0
    log.append_line(b'{"t":"x"}')
    log.close()
    assert path.read_bytes().startswith(b'{"t":"x"')


def test_a_new_log_makes_missing_folders_above_its_own(tmp_path):
    path = tmp_path / "run" / "agents" / "a1" / "record.jsonl"  # agents/ not made yet
    L.RecordLog(path, new=True).close()
    assert path.is_file()


def test_a_new_log_over_records_is_refused_and_they_are_kept(tmp_path):
    path = tmp_path / "agents" / "a1" / "record.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"t":"theirs"}\n')
    with pytest.raises(FileExistsError, match="already holds a log"):
        L.RecordLog(path, new=True)
    assert path.read_bytes() == b'{"t":"theirs"}\n'
    assert len(os.listdir(path.parent)) == 1


def test_an_empty_file_is_taken_as_a_new_log(tmp_path):
    path = tmp_path / "agents" / "a1" / "record.jsonl"
    path.parent.mkdir(parents=True)
    path.touch()
    ino = path.stat().st_ino
    log = L.RecordLog(path, new=True)
    assert os.fstat(log._fd).st_ino == ino
    log.append_line(b'{"t":"x"}')
    log.close()
    assert path.read_bytes() == b'{"t":"x"}\n'


def test_a_new_log_held_by_another_writer_is_refused(tmp_path):
    path = tmp_path / "agents" / "a1" / "record.jsonl"
    first = L.RecordLog(path, new=True)
    with pytest.raises((FileExistsError, LogBusy)):
        L.RecordLog(path, new=True)
    first.close()


def test_a_new_log_under_a_file_is_an_os_error_not_a_log(tmp_path):
    (tmp_path / "agents").write_text("not a folder")
    with pytest.raises(OSError):
        L.RecordLog(tmp_path / "agents" / "a1" / "record.jsonl", new=True)
