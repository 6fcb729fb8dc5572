"""The collector set for many agents: by the mnemon command for its process, for a block
elsewhere (a Dask worker's chunk), never by a program that only imports mnemon."""

from __future__ import annotations

import gc
import subprocess
import sys

from mnemon.orchestrator.gctune import THRESHOLDS, tuned


def test_a_block_gets_the_thresholds_and_the_host_gets_its_own_back():
    before = gc.get_threshold()
    with tuned():
        assert gc.get_threshold() == THRESHOLDS
    assert gc.get_threshold() == before


def test_the_command_sets_them_for_its_process_and_importing_mnemon_does_not():
    probe = ("import gc, sys\n"
             "import mnemon, mnemon.orchestrator.cli as cli\n"
             "print(gc.get_threshold()[0], gc.get_freeze_count() > 0)\n"
             "sys.argv = ['mnemon', '--version']\n"
             "try:\n"
             "    cli.console()\n"
             "except SystemExit:\n"
             "    pass\n"
             "print(gc.get_threshold()[0], gc.get_freeze_count() > 0)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[0] == "700 False", "importing mnemon leaves the host's collector alone"
    assert out[1].startswith("mnemon ")
    assert out[2] == f"{THRESHOLDS[0]} True"
