"""Fork benchmark: the size of the Inherited link and the time to fork a large parent.

    python bench/fork.py [--turns 10000] [--runs 9] [--trajectories DIR] [--json]

Figures:
- link size: bytes of the child's ``Inherited`` line per record of the parent, labels excluded
  (the target is <= 64 bytes per record plus the row's label), on a synthetic parent and on each
  real trajectory of ``data/trajectories/dev`` (converted line by line to our records);
- fork time of a synthetic parent of N turns (half of them evicted under residues, one swept):
  ``link_for`` + writing the child's opening records (SessionStarted, Inherited, the task),
  median of several runs (target <= 100 ms for 10 000 turns); reported separately: the child's
  load of its resident inherited turns (folding the Inherited record through the run root's
  digest-checking loader), and ``fork()`` end to end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from mnemon.lineage.fork import child_started, fork, link_for, opening_loader  # noqa: E402
from mnemon.lineage.runroot import agent_source, create_run_root, make_loader  # noqa: E402
from mnemon.session.agentlog import AgentLog  # noqa: E402
from mnemon.session.context import Context  # noqa: E402
from mnemon.session.log import RecordLog  # noqa: E402
from mnemon.session.records import (  # noqa: E402
    AssistantMessage,
    Evicted,
    Marked,
    Residue,
    SessionStarted,
    Swept,
    Text,
    ToolResult,
    ToolResults,
    ToolUse,
    UserPrompt,
    encode,
)

FAST = True  # load with opening_loader (as fork does); False: make_loader, one confine per row
from _data import TRAJECTORIES as DEFAULT_TRAJ, announce  # noqa: E402  (the repository's, or MNEMON_BENCH_CORPUS)


def _start_call(log: AgentLog) -> None:
    tid = log.next_id()
    log.append(AssistantMessage(turn=tid, blocks=[ToolUse(f"s{tid}", "agents_start",
                                                          {"task": "t", "kind": "mnemon"})],
                                stop_reason="tool_use", model="m", usage=None))


def synthetic_parent(root: Path, turns: int) -> AgentLog:
    """``turns`` turns: prompts, tool turns with results, answers; the older half evicted."""
    src = agent_source("p")
    log = AgentLog.create(root / src, src, SessionStarted(
        agent="p", at="2026-11-30T00:00:00Z", system="You are careful.", provider="scripted",
        model="m", context_window=200_000), loader=make_loader(root))
    n = 0
    k = 0
    while n < turns - 1:
        k += 1
        kind = k % 5
        tid = log.next_id()
        if kind == 0:
            log.append(UserPrompt(turn=tid, text=f"step {k}: look at module {k % 97} and report"))
        elif kind in (1, 2, 3):
            cid = f"tu_{tid}"
            log.append(AssistantMessage(turn=tid, blocks=[
                Text(f"Reading module {k % 97} to find the flaky call."),
                ToolUse(cid, "bash", {"command": f"sed -n 1,80p src/mod{k % 97}.py"})],
                stop_reason="tool_use", model="m", usage=None))
            log.append(ToolResults(results=[ToolResult(
                tool_use_id=cid, content=f"def f{k}(x):\n    return x * {k}\n" * 12)]))
        else:
            log.append(AssistantMessage(turn=tid, blocks=[Text(f"Module {k % 97} is fine.")],
                                        stop_reason="end_turn", model="m", usage=None))
        n += 1
        if n == turns // 4:  # a first residue, later swallowed by a larger one (nested)
            log.append(Evicted(residue=Residue(span=(1, n - 1), note="first quarter read",
                                               by="model")))
        if n == turns // 2:
            log.append(Evicted(residue=Residue(span=(1, n - 1), note=None, by="harness")))
        if n == 3 * turns // 4:  # sweep one resident tool result
            t = next(t for t in log.ctx.turns if t.state == "resident" and t.role == "assistant"
                     and len(t.records or []) == 2 and t.id != log.ctx.in_hand)
            log.append(Marked(block=(t.id, 2), replacement="one short replacement"))
            log.append(Swept(blocks=[(t.id, 2)]))
    _start_call(log)
    return log


def trajectory_parent(root: Path, path: Path, agent: str) -> AgentLog:
    """A real trajectory, line by line: user -> UserPrompt, assistant -> AssistantMessage (text
    + tool calls), tool -> ToolResults; the system line goes into SessionStarted."""
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    system = lines[0]["text"] if lines and lines[0]["role"] == "system" else None
    src = agent_source(agent)
    log = AgentLog.create(root / src, src, SessionStarted(agent=agent, system=system, model="m"),
                          loader=make_loader(root))
    for obj in lines[1 if system is not None else 0:]:
        role = obj["role"]
        if role == "user":
            log.append(UserPrompt(turn=log.next_id(), text=obj["text"]))
        elif role == "assistant":
            blocks = [Text(obj["text"])] if obj.get("text") else []
            for c in obj.get("tool_calls") or []:
                blocks.append(ToolUse(c["id"], c["name"], c["arguments"]))
            log.append(AssistantMessage(turn=log.next_id(), blocks=blocks, stop_reason=None,
                                        model="m", usage=None))
        elif role == "tool":
            if obj["tool_call_id"] in log.ctx.pending:
                log.append(ToolResults(results=[ToolResult(tool_use_id=obj["tool_call_id"],
                                                           content=obj["text"])]))
    _start_call(log)
    return log


def parent_records(log: AgentLog) -> int:
    """Records of the parent behind the link's rows (one locus each)."""
    return sum(len(t.loci) for t in log.ctx.turns if t.id != log.ctx.in_hand
               and t.state != "withdrawn")


def size_figures(log: AgentLog) -> dict:
    link = link_for(log.ctx)
    line = len(encode(link))
    labels = sum(len(x.row.label.encode("utf-8")) for x in link.turns)
    recs = sum(len(x.at.loci) for x in link.turns)
    from mnemon.session.records import compact

    loci = sum(len(compact(list(l))) + 1 for x in link.turns for l in x.at.loci)
    return {"locus_bytes_each": round(loci / recs, 1),
            "row_overhead_ex_label_and_loci": round((line - labels - loci) / max(1, len(link.turns)), 1),
            "rows": len(link.turns), "records": recs, "link_bytes": line,
            "label_bytes": labels, "bytes_per_record_ex_labels": round((line - labels) / recs, 1),
            "bytes_per_row_ex_labels": round((line - labels) / max(1, len(link.turns)), 1)}


def write_opening(root: Path, parent: AgentLog, child: str) -> int:
    """``link_for`` + the child's three opening lines, written (no fold)."""
    started = child_started(parent.ctx.started, child, "mnemon")
    link = link_for(parent.ctx, log_path=parent.path)
    path = root / agent_source(child)
    with RecordLog(path) as w:
        w.append(started)
        w.append(link)
        w.append(UserPrompt(turn=link.id_floor, text="the child's task"))
    return len(link.turns)


def load_resident(root: Path, child: str) -> int:
    """The child's fold of its opening: the Inherited record loads every resident row."""
    from mnemon.session.log import digest, iter_lines
    from mnemon.session.records import decode

    ctx = Context(agent_source(child), loader=(opening_loader if FAST else make_loader)(root))
    for off, line in iter_lines(root / agent_source(child)):
        ctx.step(decode(line), (off, len(line), digest(line)))
    return sum(t.state == "resident" for t in ctx.turns)


def timed(fn, runs: int) -> tuple[float, list[float]]:
    xs = []
    for i in range(runs):
        t0 = time.perf_counter()
        fn(i)
        xs.append((time.perf_counter() - t0) * 1000)
    return statistics.median(xs), xs


def live_figures(trajectories: Path) -> dict:
    """Link size on parents written by the real agent loop: each dev trajectory's assistant
    turns played by a scripted policy, each call answered by a user tool with the recorded
    output — so the parent log holds what a live agent writes (TurnStarted, ProviderCall,
    AssistantMessage, ToolResults, …). Bytes of the link per line of the parent's log."""
    import trio

    from mnemon.orchestrator import logs
    from mnemon.orchestrator.importers import AssistantStep, ToolStep, UserStep, load
    from mnemon.orchestrator.settings import Settings
    from mnemon.orchestrator.supervisor import open_supervisor
    from mnemon.orchestrator.usertools import UserTool
    from mnemon.providers.scripted import ScriptedProvider
    from mnemon.session.log import iter_lines
    from mnemon.session.records import Text, ToolUse

    logs.quiet()
    per_line: list[float] = []
    per_locus: list[float] = []
    tmp = Path(tempfile.mkdtemp(prefix="mnemon-bench-fork-live-"))
    for i, f in enumerate(sorted(trajectories.glob("*.jsonl"))):
        traj = load(f)
        outputs = {r.tool_use_id: r.content for s in traj.steps if isinstance(s, ToolStep)
                   for r in s.results}
        turns = [s for s in traj.steps if isinstance(s, AssistantStep)]
        task = next(s.text for s in traj.steps if isinstance(s, UserStep))

        def policy(request, state, turns=turns):
            k = state["k"] = state.get("k", 0) + 1
            if k > len(turns):
                return [Text("done")], "end_turn"
            blocks = [ToolUse(b.id, "recorded", {"id": b.id}) if isinstance(b, ToolUse) else b
                      for b in turns[k - 1].blocks]
            if not any(isinstance(b, ToolUse) for b in blocks):
                blocks.append(ToolUse(f"n{k}", "recorded", {"id": ""}))
            return blocks, "tool_use"

        def answer_from(outputs: dict[str, str]):
            async def recorded(id: str) -> str:
                """The recorded output of a call."""
                return outputs.get(id, "")
            return recorded

        recorded = answer_from(outputs)

        async def run(root: Path):
            async with open_supervisor(root, ScriptedProvider(policy=policy), Settings(),
                                       user_tools=[UserTool(recorded)]) as sup:
                return await sup.ask(task)

        root = tmp / f"r{i}"
        node = trio.run(run, root)
        link = link_for(node.ctx, log_path=node.log.path)
        labels = sum(len(x.row.label.encode("utf-8")) for x in link.turns)
        body = len(encode(link)) - labels
        lines = sum(1 for _ in iter_lines(root / agent_source(node.id)))
        per_line.append(body / lines)
        per_locus.append(body / sum(len(x.at.loci) for x in link.turns))
    per_line.sort()
    per_locus.sort()
    return {"parents": len(per_line),
            "bytes_per_parent_line_ex_labels": {"min": round(per_line[0], 1),
                                                "median": round(statistics.median(per_line), 1),
                                                "max": round(per_line[-1], 1)},
            "bytes_per_linked_record_ex_labels": {"min": round(per_locus[0], 1),
                                                  "median": round(statistics.median(per_locus), 1),
                                                  "max": round(per_locus[-1], 1)}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--trajectories", type=Path, default=DEFAULT_TRAJ)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    announce(args.trajectories)

    tmp = Path(tempfile.mkdtemp(prefix="mnemon-bench-fork-"))
    root = create_run_root(tmp / "run", "bench/fork.py")
    t0 = time.perf_counter()
    parent = synthetic_parent(root, args.turns)
    build_s = time.perf_counter() - t0
    resident = sum(t.state == "resident" for t in parent.ctx.turns if t.id != parent.ctx.in_hand)

    med_link, _ = timed(lambda i: link_for(parent.ctx, log_path=parent.path), args.runs)
    med_open, opens = timed(lambda i: write_opening(root, parent, f"w{i}"), args.runs)
    global FAST
    FAST = False
    med_load_slow, _ = timed(lambda i: load_resident(root, f"w{i}"), args.runs)
    FAST = True
    med_load, _ = timed(lambda i: load_resident(root, f"w{i}"), args.runs)
    med_fork, _ = timed(lambda i: fork(root, parent, f"f{i}", task="the child's task").close(),
                        args.runs)

    report = {
        "machine": f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cpus, "
                   f"{platform.system()} {platform.release()}, Python {platform.python_version()}",
        "parent_turns": len(parent.ctx.turns), "parent_resident_rows": resident,
        "parent_log_bytes": parent.path.stat().st_size, "parent_build_s": round(build_s, 2),
        "runs": args.runs,
        "link_for_ms": round(med_link, 2),
        "link_for_plus_write_ms": round(med_open, 2),
        "link_for_plus_write_all_ms": [round(x, 2) for x in opens],
        "child_load_resident_ms": round(med_load, 2),
        "child_load_resident_make_loader_ms": round(med_load_slow, 2),
        "fork_end_to_end_ms": round(med_fork, 2),
        "size_synthetic": size_figures(parent),
        "size_trajectories": {},
    }
    if args.trajectories.is_dir():
        troot = create_run_root(tmp / "traj", "bench/fork.py")
        tot_line = tot_labels = tot_recs = 0
        for i, f in enumerate(sorted(args.trajectories.glob("*.jsonl"))):
            log = trajectory_parent(troot, f, f"t{i}")
            s = size_figures(log)
            report["size_trajectories"][f.name] = s
            tot_line += s["link_bytes"]
            tot_labels += s["label_bytes"]
            tot_recs += s["records"]
            log.close()
        if tot_recs:
            report["size_trajectories_all"] = {
                "records": tot_recs, "link_bytes": tot_line, "label_bytes": tot_labels,
                "bytes_per_record_ex_labels": round((tot_line - tot_labels) / tot_recs, 1)}
    if args.trajectories.is_dir():
        report["size_live"] = live_figures(args.trajectories)
    parent.close()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    s = report["size_synthetic"]
    print(f"machine: {report['machine']}")
    print(f"parent: {report['parent_turns']} turns ({resident} resident rows), "
          f"{report['parent_log_bytes']} bytes of log")
    print(f"link_for:                    {report['link_for_ms']:8.2f} ms (median of {args.runs})")
    print(f"link_for + opening written:  {report['link_for_plus_write_ms']:8.2f} ms")
    print(f"child loads resident rows:   {report['child_load_resident_ms']:8.2f} ms "
          f"(opening_loader; make_loader: {report['child_load_resident_make_loader_ms']:.2f} ms)")
    print(f"fork() end to end:           {report['fork_end_to_end_ms']:8.2f} ms")
    print(f"link size (synthetic): {s['link_bytes']} bytes for {s['records']} records "
          f"({s['rows']} rows): {s['bytes_per_record_ex_labels']} B/record + labels "
          f"({s['bytes_per_row_ex_labels']} B/row = {s['row_overhead_ex_label_and_loci']} B fixed "
          f"+ {s['locus_bytes_each']} B per locus)")
    if "size_trajectories_all" in report:
        a = report["size_trajectories_all"]
        print(f"link size (20 real trajectories): {a['link_bytes']} bytes for {a['records']} "
              f"records: {a['bytes_per_record_ex_labels']} B/record + labels")
        for name, s in report["size_trajectories"].items():
            print(f"  {name:<55} {s['records']:5} rec {s['bytes_per_record_ex_labels']:6} B/rec")
    if "size_live" in report:
        v = report["size_live"]
        a, b = v["bytes_per_parent_line_ex_labels"], v["bytes_per_linked_record_ex_labels"]
        print(f"link size on {v['parents']} parents written by the agent loop: per line of the "
              f"parent's log {a['median']} B median ({a['min']}–{a['max']}) + labels; per linked "
              f"(protocol) record {b['median']} B median ({b['min']}–{b['max']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
