"""The heads of a run's logs as ``mnemon verify --head`` gives them, found with ``os`` and
``json`` alone: for the quick path (``orchestrator.cli.quick``), which imports no argparse, no
``pathlib``, no msgspec and no record Struct (decision 0422).

``quick_heads`` returns exactly the report ``verify(path, fold=False)`` returns
(``orchestrator/cli/commands/verify.py``) when every log's chain is whole and every head kept
of it (a child's link) matches — the answer people keep — and None in every other case: a
break, a signature beside a log, a path it would refuse, a record it is not sure it reads as
the decoder would. The full command then answers, in its own words, so a problem is named by
one piece of code only. ``tests/chain/test_quick.py`` holds both to the same bytes.
"""

from __future__ import annotations

import json
import os

import blake3

from ..session.chainhead import VERSION, complete, examine, run_head
from .outside import AGENT_ID, FORMAT, locate

TYPE_CHECKING = False  # as typing's, without importing typing
if TYPE_CHECKING:
    from typing import Any

PROTOCOL = {"UserPrompt", "AssistantMessage", "ToolResults", "Steering", "Evicted", "Marked",
            "Swept", "Cleared", "Rewound"}  # ``records.PROTOCOL`` but ``Inherited``
FORENSIC = {"SessionStarted", "SessionResumed", "SessionEnded", "TurnStarted", "ProviderCall",
            "ApprovalRequested", "ApprovalDecided", "WorkspaceSnapshot"}  # ``records.FORENSIC``
BEFORE_LINK = 16
"""Lines read for a child's link before this path leaves the question to the decoder (a link
comes second in every log mnemon writes, after ``SessionStarted``)."""


def _run(path: str) -> tuple[str, list[str]] | None:
    """``(run root, agents)`` as ``lineage.view.agents_in`` finds them."""
    if not path or "\x00" in path or not os.path.exists(path):
        return None
    if os.path.isfile(os.path.join(path, "run.json")):
        root = os.path.realpath(path)
        d = os.path.join(root, "agents")
        try:
            names = sorted(os.listdir(d)) if os.path.isdir(d) else []
        except OSError:
            return None
        agents = [n for n in names if os.path.isfile(os.path.join(d, n, "record.jsonl"))]
        for n in names:  # a FIFO, a device, a dangling link where a log should be: named there
            log = os.path.join(d, n, "record.jsonl")
            if os.path.lexists(log) and not os.path.isfile(log):
                return None
        return root, agents
    where = locate(path)
    if where is None:
        return None
    root, agent = where
    return root, [agent]


def _run_json_ok(root: str) -> bool:
    try:
        with open(os.path.join(root, "run.json"), "rb") as f:
            data = json.loads(f.read())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT and \
        type(data["format"]) is int


def _confined(root: str, src: str) -> str | None:
    real = os.path.realpath(os.path.join(root, src))
    if not real.startswith(root.rstrip("/") + "/") or not os.path.isfile(real):
        return None
    return real


def _link(full: str) -> tuple[bool, tuple[str, int, int, str] | None]:
    """``(sure, parent head)`` of a log's ``Inherited`` link: ``sure`` False where the decoder
    might read the lines before it otherwise (a record this does not know, many lines)."""
    with open(full, "rb") as f:
        for n, line in enumerate(f, 1):
            if n > BEFORE_LINK or not line.endswith(b"\n"):
                return False, None
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):  # (a line nested deeper than json reads)
                return False, None
            tag = rec.get("t") if isinstance(rec, dict) else None
            if tag in FORENSIC:
                continue
            if tag in PROTOCOL:
                return True, None
            if tag != "Inherited":
                return False, None
            at = rec.get("parent_head")
            if at is None:
                return True, None
            if not (isinstance(at, dict) and set(at) == {"source", "bytes", "lines", "head"}
                    and isinstance(at["source"], str) and type(at["bytes"]) is int
                    and type(at["lines"]) is int and isinstance(at["head"], str)):
                return False, None
            return True, (at["source"], at["bytes"], at["lines"], at["head"])
    return True, None


def quick_heads(path: str) -> dict[str, Any] | None:
    """The report of ``mnemon verify PATH --head`` when it is clean, or None (see above): a
    file it cannot read is the full command's to name too."""
    if os.name != "posix":
        return None
    try:
        return _heads(path)
    except OSError:
        return None


def _heads(path: str) -> dict[str, Any] | None:
    got = _run(path)
    if got is None:
        return None
    root, agents = got
    if not _run_json_ok(root) or not all(AGENT_ID.match(a) for a in agents):
        return None
    found: list[tuple[str, str]] = []
    for agent in agents:
        src = f"agents/{agent}/record.jsonl"
        full = _confined(root, src)
        if full is None or os.path.lexists(full + ".sig"):
            return None
        found.append((src, full))
    anchors: dict[str, list[tuple[int, str]]] = {src: [] for src, _ in found}
    for src, full in found:
        sure, at = _link(full)
        if not sure:
            return None
        if at is not None and at[0] in anchors:
            anchors[at[0]].append((at[1], at[3]))
    logs: list[dict[str, Any]] = []
    for src, full in found:
        with open(full, "rb", buffering=0) as f:
            fd = f.fileno()
            end = complete(fd)
            marks = sorted({size for size, _ in anchors[src]})
            if any(m > end for m in marks):
                return None  # cut off after a child was forked: the full command names it
            got_ = examine(fd, end, marks, blake3.blake3(max_threads=blake3.blake3.AUTO))
        if got_ is None:
            return None
        version, lines, head, at_ = got_
        if version is not None and version != VERSION:
            return None
        if any(at_.get(size) != want for size, want in anchors[src]):
            return None
        logs.append({"path": src, "chain": f"v{version}" if version else "unchained",
                     "bytes": end, "lines": lines, "head": head})
    return {"ok": True, "agents": len(agents), "problems": [], "torn": [], "logs": logs,
            "run": run_head((x["path"], x["bytes"], x["head"]) for x in logs)}


__all__ = ["quick_heads"]
