"""Crash injection under load: a multi-agent run in a forked child, killed at random moments.

A *zygote* process imports everything once and forks one child per case, so each case costs a
fork, not an interpreter start. The child runs ``workload`` — a root agent that reads pages with
a small context window (harness evictions), forks a mnemon child that greps the inherited
transcript, waits for it and answers — and writes an acknowledgement line (path, offset, length,
digest) to an ack file after every append that returned. The child is SIGKILLed either by itself
at a chosen append (before it, after a partial line, or after it but before the ack) or by the
parent at a random moment. ``check`` then reopens everything: every acknowledged record is there
with its digest, every log folds, ``resume_run`` finishes the work, no turn is recorded twice and
no provider call is repeated for a recorded turn.

Used by ``tests/reliability/test_crash_injection.py`` (hundreds of cases) and ``bench/soak.py``
(thousands).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

PAGES = 12
ROOT = Path(__file__).resolve().parents[2]


def page(i: int) -> str:
    body = "".join(f"line {k} of page {i}: the quick brown fox jumps over the lazy dog\n"
                   for k in range(28))
    return f"page {i}\n" + body + (f"MARK-{i}\n" if i == 7 else "")


def _last(request):
    """(name of the last tool called, its result block) — what the policy decides from."""
    name = None
    for msg in request.messages:
        if msg["role"] == "assistant":
            for b in msg["content"]:
                if b.get("type") == "tool_use":
                    name = (b["name"], b.get("input") or {})
    last = request.messages[-1]["content"][-1]  # a prompt (text) or the last call's result
    if last.get("type") != "tool_result":
        return None, None
    return name, last


def policy(request, state):
    """Plays the model from what the request shows, so a resumed run decides as the first did."""
    tu = lambda n, **inp: ([{"type": "tool_use", "id": f"c{random.getrandbits(40):x}",  # noqa: E731
                             "name": n, "input": inp}], "tool_use")
    called, result = _last(request)
    if request.meta.get("depth", 0) > 0:
        if called is None:
            return tu("transcript_grep", pattern="MARK-\\d")
        return [{"type": "text", "text": "found " + str(result.get("content"))[:80]}], "end_turn"
    if called is None:
        return tu("read_page", i=1)
    name, inp = called
    if name == "read_page":
        i = int(inp.get("i", PAGES))
        return tu("read_page", i=i + 1) if i < PAGES else tu("agents_start", task="find the MARK")
    if name in ("agents_start", "agents_wait") and not (name == "agents_wait" and not result.get("is_error")):
        return tu("agents_wait")
    return [{"type": "text", "text": "done: " + str(result.get("content"))[:120]}], "end_turn"


def _settings():
    from mnemon.orchestrator.settings import Settings

    return Settings(model="scripted", context_window=6000, system="crash workload")


def _tools():
    from mnemon.orchestrator.usertools import UserTool

    async def read_page(i: int) -> str:
        """Read page i."""
        return page(i)

    return [UserTool(read_page)]


def _provider():
    from mnemon.providers.scripted import ScriptedProvider

    return ScriptedProvider(policy=policy)


async def _run(root: Path) -> None:
    from mnemon.orchestrator.supervisor import open_supervisor

    async with open_supervisor(root, _provider(), _settings(), user_tools=_tools()) as sup:
        await sup.ask("read every page, then have a child find the MARK", agent_id="a1")


def child_main(root: Path, acks: Path, kill_at: int, mode: str) -> None:
    """In the forked child: instrument the writer, run the workload, maybe die at ``kill_at``."""
    import trio

    from mnemon.orchestrator import logs
    from mnemon.session.log import RecordLog

    logs.quiet()
    ack_fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    real = RecordLog.append_line
    count = [0]

    def append_line(self, line):
        count[0] += 1
        if count[0] == kill_at:
            if mode == "before":
                os.kill(os.getpid(), signal.SIGKILL)
            elif mode == "partial":
                data = line + b"\n"
                os.write(self._fd, data[: random.randint(1, len(data) - 1)])
                os.kill(os.getpid(), signal.SIGKILL)
        locus = real(self, line)
        if count[0] == kill_at and mode == "unacked":
            os.kill(os.getpid(), signal.SIGKILL)
        os.write(ack_fd, f"{self.path}\t{locus[0]}\t{locus[1]}\t{locus[2]}\n".encode())
        if count[0] == kill_at and mode == "acked":
            os.kill(os.getpid(), signal.SIGKILL)
        return locus

    RecordLog.append_line = append_line
    trio.run(_run, root)


def zygote() -> None:
    """Read ``RUN root acks seed kill_at mode`` lines; fork a child for each; report its pid and
    its exit status."""
    import mnemon.orchestrator.loop  # noqa: F401 - import everything before forking
    import mnemon.orchestrator.supervisor  # noqa: F401
    import mnemon.orchestrator.tools  # noqa: F401
    import mnemon.providers.scripted  # noqa: F401
    import trio  # noqa: F401

    out = sys.stdout
    for line in sys.stdin:
        cmd, root, acks, seed, kill_at, mode = line.split()
        pid = os.fork()
        if pid == 0:
            try:
                random.seed(int(seed))
                child_main(Path(root), Path(acks), int(kill_at), mode)
                os._exit(0)
            except BaseException:  # noqa: BLE001
                import traceback

                traceback.print_exc()
                os._exit(1)
        out.write(f"PID {pid}\n")
        out.flush()
        _, status = os.waitpid(pid, 0)
        out.write(f"EXIT {status}\n")
        out.flush()


class Zygote:
    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from tests.reliability.crashkit import zygote; zygote()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)

    def run(self, root: Path, acks: Path, seed: int, kill_at: int, mode: str,
            kill_after_s: float | None) -> int:
        self.proc.stdin.write(f"RUN {root} {acks} {seed} {kill_at} {mode}\n")
        self.proc.stdin.flush()
        pid = int(self.proc.stdout.readline().split()[1])
        if kill_after_s is not None:
            time.sleep(kill_after_s)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return int(self.proc.stdout.readline().split()[1])

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _acks(path: Path) -> list[tuple[str, int, int, str]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().split("\n")[:-1]:  # a torn last ack line is no ack
        p, off, n, d = line.split("\t")
        out.append((p, int(off), int(n), d))
    return out


def _check_acks(acks) -> None:
    """Every acknowledged record is in its log — or, for an agent whose creation a crash cut
    before its task prompt, in the log resume moved to ``<run root>/incomplete/``."""
    from mnemon.session.log import digest

    for path, off, n, want in acks:
        p = Path(path)
        if not p.exists():
            moved = sorted((p.parents[2] / "incomplete").glob(f"{p.parent.name}-*.jsonl"))
            assert moved, f"acknowledged record lost: {path}@{off}"
            path = moved[-1]
        with open(path, "rb") as f:
            f.seek(off)
            raw = f.read(n)
        assert len(raw) == n and digest(raw) == want, f"acknowledged record lost: {path}@{off}"


def _records(path: Path) -> list[dict]:
    from mnemon.session.log import iter_lines

    return [json.loads(bytes(line)) for _, line in iter_lines(path)]


def check(root: Path, acks_path: Path) -> dict:
    """Everything the crash promises, then a resume to the end; returns what was seen."""
    import trio

    from mnemon.lineage.runroot import agent_source, list_agents
    from mnemon.lineage.view import open_agent
    from mnemon.orchestrator import logs
    from mnemon.orchestrator.supervisor import Supervisor
    from mnemon.session.log import find_torn_tail

    logs.quiet()
    acks = _acks(acks_path)
    _check_acks(acks)
    seen = {"acks": len(acks), "torn": 0, "agents": 0, "resumed": 0}
    if not (root / "run.json").exists():
        return seen
    agents = list_agents(root)
    seen["agents"] = len(agents)
    acked_paths = {a[0] for a in acks}
    for aid in agents:
        path = root / agent_source(aid)
        torn = find_torn_tail(path)
        if torn is not None:
            seen["torn"] += 1
        if path.stat().st_size == 0 or (torn is not None and torn.offset == 0):
            # its creation was interrupted: nothing of it was acknowledged, resume sets it aside
            assert str(path) not in acked_paths, f"{aid}: an acknowledged log has no record"
            seen["never_created"] = seen.get("never_created", 0) + 1
            continue
        open_agent(root / "agents" / aid)  # folds read-only: raises on anything but a torn tail
    sup = Supervisor(root, _provider(), _settings(), user_tools=_tools())
    roots = sup.resume_run()
    seen["resumed"] = len(roots)

    async def finish():
        for node in roots:
            await sup.run(node)

    trio.run(finish)
    sup.close()
    _check_acks(acks)  # a resume sets torn tails aside, never an acknowledged record
    for aid in list_agents(root):
        path = root / agent_source(aid)
        open_agent(root / "agents" / aid)
        recs = _records(path)
        turns = [r["turn"] for r in recs if r["t"] in ("UserPrompt", "AssistantMessage")]
        assert turns == sorted(set(turns)), f"{aid}: a turn recorded twice: {turns}"
        pending = False  # a successful provider call whose turn is not yet recorded
        for r in recs:
            if r["t"] == "ProviderCall" and not r.get("error"):
                assert not pending, f"{aid}: the provider was called again for a recorded turn"
                pending = True
            elif r["t"] == "AssistantMessage":
                pending = False
            elif r["t"] == "SessionResumed":
                pending = False  # the crash came between the call and its record: not recorded
        assert recs[-1]["t"] == "SessionEnded", f"{aid} did not end"
    return seen


def one_case(zyg: Zygote, tmp: Path, seed: int, total_appends: int = 88) -> dict:
    rng = random.Random(seed)
    root, acks = tmp / f"case-{seed}" / "run", tmp / f"case-{seed}" / "acks"
    root.parent.mkdir(parents=True)
    if rng.random() < 0.7:
        mode = rng.choice(["before", "partial", "unacked", "acked"])
        status = zyg.run(root, acks, seed, rng.randint(1, total_appends), mode, None)
    else:
        mode = "timed"
        status = zyg.run(root, acks, seed, 0, "none", rng.uniform(0.002, 0.07))
    seen = check(root, acks)
    seen.update(mode=mode, killed=os.WIFSIGNALED(status), seed=seed)
    return seen
