"""A reusable corpus builder for benchmarks: a run root of realistic records, parent and children.

``build_corpus(out_dir, target_bytes, children=N)`` writes ``run.json`` and
``agents/<id>/record.jsonl`` through the real writer (``AgentLog.append``): a parent ``p`` whose
log cycles the turns of the trajectories in ``tests/data/trajectories`` (or
``MNEMON_BENCH_CORPUS``) (``user`` →
UserPrompt, ``assistant`` → AssistantMessage with a text block and its tool calls plus a
``ProviderCall`` forensic record, ``tool`` → ToolResults), varied on each pass so the text is not
just repeats, with harness evictions wherever the 500 KiB trigger says they are due (keep half) —
then ``children`` mnemon children forked from the parent's last turn, each opening with an
``Inherited`` record pointing into the parent's file (rows and pointers taken from the parent's
``AgentLog.ctx.turns``) and running a share of the bytes on its own.

Markers for search benchmarks: ``RARE_TOKEN`` appears in exactly ``RARE_COUNT`` tool results of the
parent; ``big_turns`` in the returned info are departed parent turns of about 100 KB.

    python bench/_corpus.py OUT_DIR --mb 50 --children 2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # _data, also when a test loads this file by its path

from mnemon.lineage.runroot import agent_source, create_run_root, make_loader  # noqa: E402
from mnemon.session.agentlog import AgentLog  # noqa: E402
from mnemon.session.eviction import eviction_due, plan_eviction  # noqa: E402
from mnemon.session.records import (  # noqa: E402
    AssistantMessage,
    Evicted,
    Inherited,
    Linked,
    Pointer,
    ProviderCall,
    Residue,
    Row,
    SessionStarted,
    Text,
    ToolResult,
    ToolResults,
    ToolUse,
    Usage,
    UserPrompt,
)

from _data import TRAJECTORIES as TRAJ, announce  # noqa: E402  (the repository's, or MNEMON_BENCH_CORPUS)
RARE_TOKEN = "QUOKKA-7f3a-ZEBRA"
RARE_COUNT = 5
BIG_TURN_BYTES = 100_000
BIG_EVERY = 2_000  # one ~100 KB turn every this many turns
CHILD_SHARE = 0.1  # of target_bytes, split between the children


def load_trajectories(path: Path = TRAJ) -> list[list[dict]]:
    out = []
    for f in sorted(path.glob("*.jsonl")):
        out.append([json.loads(line) for line in f.read_text().splitlines() if line.strip()])
    if not out:
        raise SystemExit(f"no trajectories under {path}")
    return out


def _vary(text: str, n: int) -> str:
    """A light, deterministic variation per pass: renumber a word and tag the first line."""
    if not text:
        return text
    head, nl, rest = text.partition("\n")
    return f"{head} (pass {n})" + nl + rest.replace("the ", "the " if n % 3 else "a ", 3)


class _Writer:
    """Appends trajectory turns to one agent log, evicting as a harness would."""

    def __init__(self, log: AgentLog, trajs: list[list[dict]], start: int = 0,
                 evict: bool = True):
        self.log = log
        self.evict = evict
        self.trajs = trajs
        self.cursor = start
        self.passes = 0
        self.turns = 0
        self.rare_left = 0
        self.rare_every = 0
        self.big: list[int] = []
        self._filler = [r["text"] for t in trajs for r in t if r["role"] == "tool"]

    def _evict_if_due(self) -> None:
        ctx = self.log.ctx
        if not self.evict or ctx.in_hand is None or ctx.pending:
            return
        if eviction_due(0, None, ctx.history_bytes()):
            plan = plan_eviction(ctx)
            if plan is not None:
                self.log.append(Evicted(residue=Residue(span=plan.span, by="harness")))

    def _big_output(self) -> str:
        parts, size, i = [], 0, self.turns
        while size < BIG_TURN_BYTES:
            s = self._filler[i % len(self._filler)]
            parts.append(s)
            size += len(s.encode("utf-8")) + 1
            i += 7
        return "\n".join(parts)[:BIG_TURN_BYTES]

    def run_until(self, size: int) -> None:
        log = self.log
        while log.log.size < size:
            traj = self.trajs[self.cursor % len(self.trajs)]
            n = self.passes
            self.cursor += 1
            if self.cursor % len(self.trajs) == 0:
                self.passes += 1
            for row in traj[1:]:
                if log.log.size >= size:
                    break
                role = row["role"]
                if role == "user":
                    if log.ctx.pending:
                        continue  # a nudge while calls are open: skip, as the harness would
                    self._evict_if_due()
                    log.append(UserPrompt(turn=log.next_id(), text=_vary(row["text"], n)))
                    self.turns += 1
                elif role == "assistant":
                    self._evict_if_due()
                    tid = log.next_id()
                    blocks: list = [Text(_vary(row["text"], n))]
                    seen = set()
                    for c in row.get("tool_calls") or []:
                        if c["id"] not in seen:
                            seen.add(c["id"])
                            blocks.append(ToolUse(f"{c['id']}_{tid}", c["name"], c["arguments"]))
                    log.append(AssistantMessage(
                        turn=tid, blocks=blocks, stop_reason="tool_use" if seen else "end_turn",
                        model="bench-model",
                        usage=Usage(input_tokens=100, output_tokens=50, cache_read_tokens=900)))
                    log.append(ProviderCall(attempt=1, latency_s=0.5,
                                            usage=Usage(input_tokens=100, output_tokens=50)))
                    self.turns += 1
                elif role == "tool":
                    cid = f"{row.get('tool_call_id')}_{log.ctx.in_hand}"
                    if cid not in log.ctx.pending:
                        continue
                    content = _vary(row["text"], n)
                    if self.turns % BIG_EVERY == 0 and log.ctx.in_hand not in self.big:
                        content = self._big_output()
                        self.big.append(log.ctx.in_hand)
                    elif self.rare_left and self.turns % self.rare_every == 0:
                        content += f"\nmarker {RARE_TOKEN} found"
                        self.rare_left -= 1
                    log.append(ToolResults(results=[ToolResult(tool_use_id=cid,
                                                               content=content)]))


def _link(parent: AgentLog) -> Inherited:
    """Rows and pointers for every closed turn of the parent, and its residues below them."""
    ctx = parent.ctx
    hand = ctx.in_hand
    turns = [t for t in ctx.turns if t.id != hand and t.state != "withdrawn"]
    rows = [Linked(Row(id=t.id, role=t.role, label=t.label, bytes=t.bytes,  # type: ignore[arg-type]
                       held=t.held),  # type: ignore[arg-type]
                   Pointer(t.source, [tuple(x) for x in t.loci]))  # type: ignore[misc]
            for t in turns]
    last = turns[-1].id if turns else 0
    # every residue wholly below the fork, nested ones included (DESIGN.md, Lineage)
    residues = [r.as_record() for r in ctx.residues if not r.withdrawn and r.span[1] <= last]
    return Inherited(turns=rows, residues=residues, id_floor=ctx.next_id())


def build_corpus(out_dir: Path, target_bytes: int, *, children: int = 2,
                 trajectories: Path = TRAJ, verbose: bool = False, evict: bool = True) -> dict:
    """Write a run root of about ``target_bytes`` under ``out_dir``; return what it holds."""
    t0 = time.perf_counter()
    root = create_run_root(Path(out_dir), "bench/_corpus.py")
    trajs = load_trajectories(trajectories)
    loader = make_loader(root)
    src = agent_source("p")
    parent = AgentLog.create(root / src, src, SessionStarted(
        agent="p", at="2026-11-30T00:00:00Z", system=trajs[0][0]["text"], model="bench-model"),
        loader=loader)
    child_bytes = int(target_bytes * CHILD_SHARE / children) if children else 0
    parent_bytes = target_bytes - child_bytes * children
    w = _Writer(parent, trajs, evict=evict)
    w.rare_left = RARE_COUNT
    w.rare_every = max(1, int(parent_bytes / 3000 / RARE_COUNT)) | 1  # ~3 KB a turn; odd
    w.run_until(parent_bytes)
    if verbose:
        print(f"parent: {parent.log.size / 1e6:.0f} MB, {len(parent.ctx.turns)} turns "
              f"in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    # the parent's turn in hand calls agents_start; every closed turn goes to each child
    tid = parent.next_id()
    calls = [ToolUse(f"start_{i}", "agents_start", {"task": f"part {i}", "kind": "mnemon"})
             for i in range(children)]
    parent.append(AssistantMessage(turn=tid, blocks=[Text("Delegating."), *calls],
                                   stop_reason="tool_use", model="bench-model", usage=None))
    link = _link(parent)
    kids = []
    for i in range(children):
        cid = f"c{i + 1}"
        csrc = agent_source(cid)
        child = AgentLog.create(root / csrc, csrc, SessionStarted(
            agent=cid, parent="p", kind="mnemon", at="2026-11-30T00:00:01Z",
            system=trajs[0][0]["text"], model="bench-model"), loader=loader)
        child.append(link)
        child.append(UserPrompt(turn=child.next_id(), text=f"part {i}"))
        cw = _Writer(child, trajs, start=3 * (i + 1))
        cw.passes = 1000 + i
        cw.run_until(child.log.size + child_bytes)
        kids.append({"agent": cid, "bytes": child.log.size, "turns": len(child.ctx.turns)})
        child.close()
    parent.append(ToolResults(results=[ToolResult(tool_use_id=c.id, content="started")
                                       for c in calls]))
    info = {
        "root": str(root), "target_bytes": target_bytes,
        "parent": {"agent": "p", "bytes": parent.log.size, "turns": len(parent.ctx.turns)},
        "children": kids, "rare_token": RARE_TOKEN, "rare_count": RARE_COUNT - w.rare_left,
        "big_turns": [t for t in w.big if parent.ctx.turn(t).state != "resident"],
        "seconds": round(time.perf_counter() - t0, 1),
    }
    parent.close()
    (root / "corpus.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--mb", type=float, default=50)
    ap.add_argument("--children", type=int, default=2)
    ap.add_argument("--no-evict", action="store_true",
                    help="the parent never evicts (every turn stays resident)")
    a = ap.parse_args()
    announce()
    print(json.dumps(build_corpus(Path(a.out_dir), int(a.mb * 1e6), children=a.children,
                                  verbose=True, evict=not a.no_evict), indent=1))


if __name__ == "__main__":
    main()
