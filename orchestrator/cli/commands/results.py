"""``mnemon results RUN_ROOT [--format jsonl|csv]`` — the run's results as a table: one row per
task, the typed output's top-level fields as columns (``jobs/table.py``).

Read-only. The rows are the run root's ``results.jsonl`` (or the results file named with
``--results``); a run root with no results file — ``mnemon ask`` runs, a service's agents —
gets one row per root agent from the logs themselves: its end (``SessionEnded.reason``) and
its typed output (``SessionEnded.output``).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from pathlib import Path

import msgspec

from ....lineage.runroot import agent_source, find_run_root, list_agents
from ....session.log import iter_lines
from .. import COMMANDS
from ....errors import UserError
from ...jobs.results import read_results
from ...jobs.table import to_csv, to_jsonl
from ...jobs.variants import read_rows, variant_roots
from ...terminal import for_stream, shown


def add_parser(sub) -> None:
    p = sub.add_parser("results", help=COMMANDS["results"])
    p.add_argument("path", help="a run root (or its results.jsonl)")
    p.add_argument("--format", choices=("jsonl", "csv"), default="jsonl",
                   help="JSON lines (default) or CSV with a header row")
    p.add_argument("--results", default=None, metavar="FILE",
                   help="the results file, where the job wrote it elsewhere")
    p.add_argument("--summary", action="store_true",
                   help="instead of the table, each scorer's mean, standard error, 95%% "
                        "interval, n, failures, cost and cost per correct answer "
                        "(docs/scores.md)")
    p.add_argument("--patch", default=None, metavar="DIR",
                   help="instead of the table, write TASK.patch into DIR for each task whose "
                        "workspace changed (git apply takes it)")


class _End(msgspec.Struct):
    """What a row needs of a record: the opening's parent, the end and its output."""
    t: str
    parent: str | None = None
    reason: str | None = None
    output: object = None


_probe = msgspec.json.Decoder(_End)
_STATUS = {"done": "done", "budget": "budget", "cancelled": "cancelled"}


def rows_from_logs(root: Path) -> list[dict]:
    """One row per root agent of the run, from its log: ``task`` and ``agent`` its id,
    ``status`` from its last ``SessionEnded`` (``running`` when none), its output."""
    rows = []
    for aid in list_agents(root):
        parent, reason, output, ended = None, None, None, False
        for _off, line in iter_lines(root / agent_source(aid)):
            head = bytes(line[:32])
            if b"Session" not in head:
                continue
            try:
                rec = _probe.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                continue
            if rec.t == "SessionStarted":
                parent = rec.parent
            elif rec.t == "SessionEnded":
                reason, output, ended = rec.reason, rec.output, True
            elif rec.t == "SessionResumed":
                reason, output, ended = None, None, False
        if parent is not None:
            continue
        status = _STATUS.get(reason or "", "failed") if ended else "running"
        rows.append({"task": aid, "status": status, "agent": aid, "reason": reason,
                     "output": output})
    return rows


def run(args) -> int:
    path = Path(args.path)
    if not path.exists():
        raise UserError(f"{path} does not exist")
    if args.patch is not None:
        if path.is_file():
            raise UserError(f"--patch reads the run root's workspaces: give the run root, "
                            f"not {path}")
        return write_patches(find_run_root(path), Path(args.patch), args.results)
    if args.results is not None or path.is_file():
        file = Path(args.results) if args.results is not None else path
        if not file.is_file():
            raise UserError(f"{file}: no such results file")
        rows = list(read_results(file).values())
    elif variant_roots(path) is not None:  # a job's [variants]: each one's rows, named
        rows = read_rows(path)
    else:
        root = find_run_root(path)
        file = root / "results.jsonl"
        rows = list(read_results(file).values()) if file.is_file() else rows_from_logs(root)
    if args.summary:
        from ...scores.summary import summary_text

        print(shown(summary_text(rows)))
        return 0
    # CSV holds the answers as they came: escaped on a terminal, raw into a pipe (a program's)
    sys.stdout.write(for_stream(to_csv(rows), sys.stdout) if args.format == "csv"
                     else to_jsonl(rows))
    return 0


_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}")


def patch_name(task: str) -> str:
    """The file a task's patch goes to: ``<task id>.patch`` when the id is a plain file name;
    else its safe characters and a hash of the whole id (an id is the user's or its input
    file's text: never a path)."""
    if _SAFE.fullmatch(task) and not task.endswith("."):
        return f"{task}.patch"
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", task)[:60].lstrip(".") or "task"
    return f"{safe}-{hashlib.sha1(task.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}.patch"


def write_patches(root: Path, folder: Path, results: str | None) -> int:
    """``--patch DIR``: one ``<task id>.patch`` per task whose workspace changed, from its
    start (the job's ``[workspace] source``) to the snapshot its row names; says how many."""
    from ...workspace.store import is_snapshot_id
    from ...workspace.view import NoWorkspace, view_of_agent

    file = Path(results) if results is not None else root / "results.jsonl"
    if results is not None and not file.is_file():
        raise UserError(f"{file}: no such results file")
    rows = list(read_results(file).values()) if file.is_file() else rows_from_logs(root)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"--patch {folder} exists and is not a directory")
    patches: list[tuple[str, bytes]] = []
    unchanged = without = 0
    for row in rows:
        agent, snap = row.get("agent"), row.get("workspace")
        if not isinstance(agent, str) or ("workspace" in row and snap is None):
            without += 1
            continue
        if snap is not None and not is_snapshot_id(snap):
            raise UserError(f"{file}: task {shown(str(row.get('task')))}'s workspace is not a "
                            f"snapshot id: {shown(repr(snap))[:60]}")
        try:
            view = view_of_agent(root, agent)
        except NoWorkspace:
            without += 1
            continue
        data = view.patch_bytes(to_snapshot=snap)
        if data:
            patches.append((patch_name(str(row.get("task") or agent)), data))
        else:
            unchanged += 1
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in patches:
        tmp = folder / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, folder / name)
    print(f"wrote {len(patches)} patch{'es' if len(patches) != 1 else ''} to "
          f"{shown(str(folder))} ({unchanged} task(s) without a change, {without} without a "
          "workspace)")
    return 0


__all__ = ["rows_from_logs", "patch_name", "write_patches"]
