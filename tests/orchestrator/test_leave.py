"""The ``mnemon`` command leaves its process without the interpreter's teardown (decision 0264),
but only after everything an ordinary exit does that anyone can see: threads joined, ``atexit``
functions run, buffered output written, the exit code kept."""

from __future__ import annotations

import os
import subprocess
import sys

BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def _run(body: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", body], capture_output=True, text=True,
                          timeout=60, env=BUFFERED)


def test_what_an_ordinary_exit_does_is_done_first():
    done = _run(
        "import atexit, sys, threading, time\n"
        "from mnemon.orchestrator.cli import leave\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        "def late():\n"
        "    time.sleep(0.3)\n"
        "    print('thread finished')\n"
        "threading.Thread(target=late).start()\n"
        "print('buffered, not flushed')\n"
        "sys.stderr.write('on stderr\\n')\n"
        "leave(3)\n"
        "print('never')\n")
    assert done.returncode == 3
    assert done.stdout.splitlines() == ["buffered, not flushed", "thread finished", "atexit ran"]
    assert done.stderr == "on stderr\n"


def test_a_file_left_open_is_written_as_teardown_would_have(tmp_path):
    # a user tool's module-level log file, never closed: the interpreter's teardown would
    # have closed it, so leave flushes it
    done = _run(
        "from mnemon.orchestrator.cli import leave\n"
        f"text = open({str(tmp_path / 'text.log')!r}, 'a')\n"
        f"raw = open({str(tmp_path / 'raw.bin')!r}, 'wb')\n"
        "text.write('kept\\n')\n"
        "raw.write(b'kept')\n"
        "leave(0)\n")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "text.log").read_text() == "kept\n"
    assert (tmp_path / "raw.bin").read_bytes() == b"kept"


def test_the_run_roots_log_is_written_out_however_the_command_ends(tmp_path):
    done = _run(
        "import structlog\n"
        "from mnemon.orchestrator import logs\n"
        "from mnemon.orchestrator.cli import leave\n"
        f"logs.configure({str(tmp_path)!r})\n"
        "structlog.get_logger().info('still here')\n"
        "leave(0)\n")  # no logs.shutdown(): a command that ended on an error
    assert done.returncode == 0, done.stderr
    assert '"event":"still here"' in (tmp_path / "mnemon.log").read_text()


def test_a_reader_gone_is_an_ordinary_exit():
    # ``mnemon … | head`` after head ended: leave falls back to the interpreter's own exit, which
    # reports the unwritable stdout its own way (code 120), not a traceback from leave
    p = subprocess.Popen([sys.executable, "-c",
                          "import time\n"
                          "from mnemon.orchestrator.cli import leave\n"
                          "time.sleep(0.5)\n"
                          "print('x' * 10)\n"
                          "leave(0)\n"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=BUFFERED)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 120
    assert "leave" not in err


def test_the_command_keeps_its_exit_code(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mnemon", "run", str(tmp_path / "none.toml")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("mnemon: ") and len(done.stderr.splitlines()) == 1
