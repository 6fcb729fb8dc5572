"""Where an agent directory lies in its run root, found with ``os.path`` alone: for the answers a
process gives without the full CLI (``orchestrator.cli.quick``), which import no ``pathlib``
(~4 ms of such a process on a slow machine, with ``urllib.parse`` and ``ipaddress`` behind it).

``locate`` gives what ``places.agent_of`` gives — the run root (resolved) and the agent id —
whenever that succeeds on a POSIX system, and None in every other case, where the caller leaves
the answer (or the refusal, in ``agent_of``'s words) to the full path.
"""

from __future__ import annotations

import os
import re

FORMAT = 1
"""The run root format this mnemon reads (``run.json``'s ``format``)."""
AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
"""A path-safe agent id: the name of its directory under ``agents/``. Both here, where no
``pathlib`` is imported, for the quick answers; ``places`` gives them to everything else."""


def locate(path: str) -> tuple[str, str] | None:
    """``(run root, agent id)`` of an agent directory or its ``record.jsonl``, as
    ``places.agent_of`` finds them (its ``Path.resolve`` is ``os.path.realpath``); None where it
    would refuse, or where this cannot be sure it would not."""
    if os.name != "posix" or not path or "\x00" in path:
        return None
    try:
        p = os.path.realpath(path)
        if os.path.isfile(p):
            p = os.path.dirname(p)
        if not os.path.isfile(os.path.join(p, "record.jsonl")):
            return None
        root = p
        while not os.path.isfile(os.path.join(root, "run.json")):
            up = os.path.dirname(root)
            if up == root:
                return None
            root = up
    except (OSError, ValueError):
        return None
    prefix = root if root.endswith("/") else root + "/"
    if not p.startswith(prefix):
        return None
    parts = p[len(prefix):].split("/")
    if len(parts) != 2 or parts[0] != "agents" or not parts[1]:
        return None
    return root, parts[1]


__all__ = ["FORMAT", "AGENT_ID", "locate"]
