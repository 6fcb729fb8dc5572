"""Both ways of answering a command the quick path takes (``orchestrator.cli.quick``): the
quick way and the full CLI, held to the same stdout and exit code."""

from __future__ import annotations

import subprocess
import sys

from mnemon.orchestrator.cli import main
from mnemon.orchestrator.cli.quick import answered


def both(capsys, argv: list[str]) -> bool:
    """Run ``argv`` the quick way and the full way; assert the same stdout and exit code where
    the quick way answers (and that it wrote nothing where it does not). True if it answered."""
    capsys.readouterr()
    code = answered(argv)
    quick_out = capsys.readouterr()
    assert quick_out.err == ""
    if code is None:
        assert quick_out.out == "", argv
    try:
        full_code = main(argv)
    except SystemExit as e:  # argparse's usage errors
        full_code = e.code if isinstance(e.code, int) else 2
    full_out = capsys.readouterr()
    if code is not None:
        assert (quick_out.out, code) == (full_out.out, full_code), argv
        assert full_out.err == "", argv
    return code is not None


def imported(argv: list[str]) -> tuple[set[str], str, int]:
    """The modules a console-script process imports to answer ``argv`` beyond what a bare
    ``import re, sys`` process imports (the console script's own imports), its stdout, its
    exit code."""
    script = "import re, sys; from mnemon.orchestrator.cli import console; console()"
    bare = subprocess.run([sys.executable, "-X", "importtime", "-c", "import re, sys"],
                          capture_output=True, text=True, check=True)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", script, *argv],
                          capture_output=True, text=True)

    def mods(err: str) -> set[str]:
        return {line.rsplit("|", 1)[1].strip() for line in err.splitlines()
                if line.startswith("import time:") and "|" in line} - {"imported package"}

    return mods(proc.stderr) - mods(bare.stderr), proc.stdout, proc.returncode
