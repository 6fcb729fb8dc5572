"""The collector set for many agents: by the mnemon command for its process, for a block
elsewhere (a Dask worker's chunk), never by a program that only imports mnemon."""

from __future__ import annotations

import gc
import subprocess
import sys

from mnemon.orchestrator.gctune import THRESHOLDS, tuned


def _lines(probe: str) -> list[str]:
    """What a fresh interpreter running ``probe`` prints, line by line."""
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True).stdout.split("\n")


def test_a_block_gets_the_thresholds_and_the_host_gets_its_own_back():
    before = gc.get_threshold()
    with tuned():
        assert gc.get_threshold() == THRESHOLDS
    assert gc.get_threshold() == before


def test_the_command_sets_them_for_its_process_and_importing_mnemon_does_not():
    probe = ("import atexit, gc, sys\n"
             "import mnemon, mnemon.orchestrator.cli as cli\n"
             "print(gc.get_threshold()[0], gc.get_freeze_count() > 0)\n"
             # (``-v``: a line the parser reads; the answers given before it start no agent and
             # tune nothing, decision 0460)
             "sys.argv = ['mnemon', '-v', '--version']\n"
             # the command ends the process (``cli.leave``) once its atexit functions ran
             "atexit.register(lambda: print(gc.get_threshold()[0], gc.get_freeze_count() > 0))\n"
             "cli.console()\n")
    out = _lines(probe)
    assert out[0] == "700 False", "importing mnemon leaves the host's collector alone"
    assert out[1].startswith("mnemon ")
    assert out[2] == f"{THRESHOLDS[0]} True"


def test_warming_pauses_the_collector_and_freezes_what_the_block_imported():
    probe = ("import gc\n"
             "from mnemon.orchestrator.gctune import warming\n"
             "frozen = gc.get_freeze_count()\n"
             "with warming():\n"
             "    inside = gc.isenabled()\n"
             "    import decimal, distributed\n"
             "print(inside, gc.isenabled(), gc.get_freeze_count() > frozen + 100_000)\n"
             "gc.disable()\n"
             "with warming():\n"
             "    pass\n"
             "print(gc.isenabled())\n")
    out = _lines(probe)
    assert out[0] == "False True True", "off inside, back on after, Dask's objects frozen"
    assert out[1] == "False", "a collector that was off stays off"


def test_the_fork_server_imports_what_a_worker_needs_with_the_collector_off():
    from mnemon.orchestrator.jobs.forks import PRELOAD

    probe = ("import gc, sys\n"
             "import mnemon.orchestrator.gctune, mnemon.orchestrator.jobs.forks\n"
             "seen = []\n"
             "gc.callbacks.append(lambda phase, info: phase == 'start' and seen.append(1))\n"
             "import mnemon.orchestrator.jobs.warm\n"
             f"print(all(m in sys.modules for m in {list(PRELOAD)!r}), len(seen),\n"
             "      gc.isenabled(), gc.get_freeze_count() > 100_000)\n")
    out = _lines(probe)
    assert out[0] == "True 0 True True", "all imported, in no collection, then frozen"
