"""Hostile files, each refused by name (or read the one consistent way) in bounded time and
memory: a gigabyte torn tail, FIFOs and device files where logs should be, hard links, invalid
UTF-8, duplicate keys, a pointer claiming a huge length. Commands run in a child process under
an address-space limit, so an attempt to hold a gigabyte fails the test instead of passing."""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

GiB = 1 << 30
LIMIT_AS = 900 << 20  # address space for a command: far less than the files it meets


def _demo(tmp: Path) -> Path:
    run = tmp / "run"
    subprocess.run([sys.executable, "-m", "mnemon", "demo", "--run-root", str(run)],
                   check=True, capture_output=True, timeout=120)
    return run


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))


def mnemon(*args: str, timeout: float = 30) -> tuple[int, str, str, float]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "mnemon", *args], capture_output=True,
                          text=True, timeout=timeout, preexec_fn=_limited)
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0


def test_a_gigabyte_torn_tail_is_reported_not_read(tmp_path):
    run = _demo(tmp_path)
    log = run / "agents" / "a3" / "record.jsonl"
    complete = log.stat().st_size
    with open(log, "ab") as f:
        f.write(b'{"t":"UserPrompt","turn":99,"text":"')
    os.truncate(log, complete + GiB)  # a gigabyte more with no newline (sparse: no disk used)
    for args in (["transcript", "index", str(log.parent), "--json"],
                 ["transcript", "grep", str(log.parent), "codeword", "--json"],
                 ["context", str(log.parent), "--json"], ["verify", str(run)],
                 ["cost", str(run)], ["tree", str(run)]):
        code, out, err, took = mnemon(*args)
        assert code == 0, (args, err[-500:])
        assert f"torn tail of {GiB} bytes at offset {complete}" in err, (args, err)
        assert "Traceback" not in err and took < 20, (args, took)


def test_reopening_for_appends_sets_a_huge_tail_aside_in_bounded_memory(tmp_path):
    run = _demo(tmp_path)
    log = run / "agents" / "a3" / "record.jsonl"
    complete = log.stat().st_size
    os.truncate(log, complete + (256 << 20))
    code = ("from pathlib import Path\nfrom mnemon.session.agentlog import AgentLog\n"
            "from mnemon.lineage.runroot import make_loader\n"
            f"a, torn = AgentLog.resume(Path({str(log)!r}), 'agents/a3/record.jsonl', "
            f"loader=make_loader(Path({str(run)!r})))\n"
            "print(torn.offset, torn.length, torn.moved_to)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, preexec_fn=_limited)
    assert proc.returncode == 0, proc.stderr[-800:]
    off, length, moved = proc.stdout.split()
    assert (int(off), int(length)) == (complete, 256 << 20)
    assert (log.parent / moved).stat().st_size == 256 << 20
    assert log.read_bytes().endswith(b"\n")


def test_a_fifo_where_a_log_should_be_is_refused_without_waiting(tmp_path):
    run = _demo(tmp_path)
    log = run / "agents" / "a3" / "record.jsonl"
    log.unlink()
    os.mkfifo(log)
    code, out, err, took = mnemon("transcript", "index", str(log.parent), timeout=30)
    assert code == 2 and took < 20 and "Traceback" not in err
    assert "not an agent directory" in err
    code, out, err, took = mnemon("verify", str(run), timeout=30)
    assert code != 0 and took < 20 and "Traceback" not in err
    assert "agents/a3/record.jsonl:0: not a regular file: not a log" in out


def test_a_pointer_to_a_fifo_or_a_device_is_refused(tmp_path):
    run = _demo(tmp_path)
    parent = run / "agents" / "a1" / "record.jsonl"
    parent.unlink()
    os.mkfifo(parent)
    code, out, err, took = mnemon("transcript", "read", str(run / "agents" / "a2"), "--turns",
                                  "1", timeout=30)
    assert code != 0 and took < 20 and "Traceback" not in err
    assert "a directory or a special file" in err or "not a log" in err or "does not fold" in err
    parent.unlink()
    try:
        os.mknod(parent, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's numbers
    except PermissionError:
        pytest.skip("cannot make a device node here")
    code, out, err, took = mnemon("transcript", "read", str(run / "agents" / "a2"), "--turns",
                                  "1", timeout=30)
    assert code != 0 and took < 20 and "Traceback" not in err


def test_a_hard_link_is_a_file_of_the_run_root_and_its_digests_still_guard_it(tmp_path):
    """Decision 0231: a hard link inside the run root is read like any file there; whoever made
    it could read its target already. The digests decide what it may answer."""
    run = _demo(tmp_path)
    outside = tmp_path / "outside.jsonl"
    parent = run / "agents" / "a1" / "record.jsonl"
    outside.write_bytes(parent.read_bytes())
    parent.unlink()
    os.link(outside, parent)
    code, out, err, _ = mnemon("transcript", "read", str(run / "agents" / "a2"), "--turns", "1",
                               "--json")
    assert code == 0, err
    outside.write_bytes(outside.read_bytes().replace(b"Read the eight", b"Read the EIGHT"))
    code, out, err, _ = mnemon("transcript", "read", str(run / "agents" / "a2"), "--turns", "1")
    assert code != 0 and "digest mismatch" in err and "Traceback" not in err


def test_invalid_utf8_is_refused_naming_the_line(tmp_path):
    run = _demo(tmp_path)
    log = run / "agents" / "a3" / "record.jsonl"
    lines = log.read_bytes().split(b"\n")
    lines.insert(-2, b'{"t":"Steering","text":"bad \xff\xfe bytes"}')
    log.write_bytes(b"\n".join(lines))
    n = len(lines) - 2
    code, out, err, _ = mnemon("transcript", "index", str(log.parent))
    assert code == 1 and f"agents/a3/record.jsonl:{n}: not a record" in err
    assert "Invalid UTF-8" in err and "Traceback" not in err


def test_duplicate_keys_read_one_way_everywhere(tmp_path):
    """Decision 0231: the last value of a duplicated key wins, in the fold, the door's read and
    both grep paths — every reader of ours reads the same record."""
    run = _demo(tmp_path)
    log = run / "agents" / "a3" / "record.jsonl"
    lines = log.read_bytes().split(b"\n")
    turn = max(json.loads(line).get("turn", 0) for line in lines if line) + 1
    lines.insert(-2, b'{"t":"UserPrompt","turn":%d,"text":"ZANZIBAR hidden","text":"shown"}' % turn)
    log.write_bytes(b"\n".join(lines))
    for env in ({}, {"MNEMON_NO_NATIVE": "1"}):
        e = {**os.environ, **env}
        grep = lambda pat: json.loads(subprocess.run(  # noqa: E731
            [sys.executable, "-m", "mnemon", "transcript", "grep", str(log.parent), pat, "--json"],
            capture_output=True, text=True, env=e, timeout=60, check=True).stdout)
        assert grep("ZANZIBAR")["total"] == 0
        assert grep("^shown$")["hits"] == [{"turn": turn, "line": "shown"}]
    code, out, err, _ = mnemon("transcript", "read", str(log.parent), "--turns", str(turn), "--json")
    assert code == 0 and json.loads(out)[0]["records"][0]["text"] == "shown"


def test_a_pointer_claiming_a_huge_length_is_refused_without_reading_it(tmp_path):
    run = _demo(tmp_path)
    child = run / "agents" / "a2" / "record.jsonl"
    lines = child.read_bytes().split(b"\n")
    i = next(k for k, line in enumerate(lines) if b'"t":"Inherited"' in line)
    rec = json.loads(lines[i])
    for linked in rec["turns"]:  # every pointer, resident rows and evicted ones alike
        linked["at"]["loci"][0][1] = 1 << 40
    lines[i] = json.dumps(rec, separators=(",", ":")).encode()
    child.write_bytes(b"\n".join(lines))
    for args in (["transcript", "read", str(child.parent), "--turns", "1"],
                 ["transcript", "grep", str(child.parent), "codeword"],
                 ["verify", str(run)]):
        code, out, err, took = mnemon(*args)
        assert code != 0 and took < 20 and "Traceback" not in err, (args, err[-400:])
        assert "the file ends before this record" in out + err, (args, err[-400:])
