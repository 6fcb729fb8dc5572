"""The workspace benchmark: whole operations through the real code (``orchestrator/workspace``),
each beside its plain baseline measured in the same run, on a generated tree.

    python bench/workspace.py [--files 10000] [--mb 40] [--runs 7] [--dir /var/tmp]
                              [--no-tmpfs] [--knobs] [--json]

The tree: ``--files`` files in ``--mb`` MB, 100 per directory, deterministic content (each file
a unique header line and a slice of one seeded text), a ``.gitignore`` and a few ignored build
outputs. It is made once per place, ON DISK under ``--dir`` (default /var/tmp; not a tmpfs) and,
beside it, in /dev/shm when that exists (``--no-tmpfs`` skips it): the store's work is mostly
files, so the two say how much of a figure is the disk.

Figures (milliseconds, the median of ``--runs``; the goals are issue 44's):

- ``import``: a root agent's workspace made on the user's directory (``life.open_root`` with
  ``WorkspaceSpec(dir=…)``: the store made, every file hashed) beside ``git init && git add -A
  && git write-tree`` of the same tree into a fresh repository (default compression);
- ``snapshot_10``: ``Workspace.write`` ×10 (timed apart: each write is made durable, fsync),
  then ``turn_snapshot`` — goal ≤ 30 ms — beside ``git add -A && git write-tree`` in a plain
  repository over a copy of the tree with the same ten changes; both trees' ids must agree;
- ``snapshot_untouched``: ``turn_snapshot`` after a turn whose tools did not touch the workspace
  (µs per call over 1000 calls) beside an empty ``await trio.sleep(0)``;
- ``fork_read``: ``life.open_child`` + one ``Workspace.read`` of the child — goal ≤ 20 ms —
  beside one ``git cat-file blob TREE:PATH``;
- ``fork_write``: a child's first ``Workspace.write`` (the checkout of the whole tree) — goal
  ≤ 500 ms and not slower than ``cp -a`` — beside ``cp -a`` of the tree, the two taken in turn
  (A B A B …), warm: the page cache cannot be dropped here;
- ``restore``: ``Workspace.restore_now`` to the snapshot ten changed files back (a rewind; the
  two directions taken in turn) — goal ≤ 500 ms — beside ``git add -A && git read-tree -u
  --reset TREE`` in the plain repository;
- ``synod_disk``: 8 children forked from one root that each change 10 files: the bytes on disk
  (``du``) of the store and the children's trees, against one workspace (the user's tree) plus
  their changes in the store — goal ≤ 1.1×.

The floor, measured in the same run: ``python -c pass`` and ``git --version`` (a process start).
``--knobs`` also times the checkout (``fork_write``) and the import under other store settings
(``checkout.workers``, compressed objects), appended to the store's ``-c`` options for that
measure only — what ``orchestrator/workspace/store.py``'s ``_CONFIG`` could be.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import trio  # noqa: E402

from mnemon.orchestrator.workspace import store as store_mod  # noqa: E402
from mnemon.orchestrator.workspace.life import open_child, open_root  # noqa: E402
from mnemon.orchestrator.workspace.spec import WorkspaceSpec  # noqa: E402

GOALS_MS = {"snapshot_10": 30.0, "fork_read": 20.0, "fork_write": 500.0, "restore": 500.0}
SYNOD_GOAL = 1.1
PER_DIR = 100
SEED = 44

# plain git for the baselines: nothing of the user's config either, so both sides read the same
PLAIN_ENV = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
PLAIN_ENV.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, LC_ALL="C")


# ---------------------------------------------------------------------------------- the tree

def _text(rng: random.Random, n: int) -> bytes:
    words = [("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))))
             for _ in range(4000)]
    out: list[str] = []
    size = 0
    while size < n:
        line = "    " * rng.randint(0, 3) + " ".join(rng.choices(words, k=rng.randint(3, 12)))
        out.append(line)
        size += len(line) + 1
    return ("\n".join(out) + "\n").encode()[:n]


def make_tree(d: Path, files: int, total_bytes: int, seed: int = SEED) -> dict[str, Any]:
    """``files`` files holding ``total_bytes`` between them under ``d``, the same bytes for the
    same arguments: sizes spread from a tenth to twice the mean, each file's content a unique
    header line and a slice of one seeded text. Plus ``.gitignore`` and ignored ``*.o`` files
    (what a snapshot must leave out). Answers the paths, in order."""
    rng = random.Random(seed)
    mean = max(1, total_bytes // max(1, files))
    base = _text(rng, max(4 * mean, 1 << 20))
    sizes = [rng.randint(max(1, mean // 10), 2 * mean) for _ in range(files)]
    scale = total_bytes / max(1, sum(sizes))
    paths: list[str] = []
    d.mkdir(parents=True, exist_ok=True)
    for i, s in enumerate(sizes):
        rel = f"pkg{i // PER_DIR:03d}/mod{i % PER_DIR:03d}.py"
        if i % PER_DIR == 0:
            (d / rel).parent.mkdir(exist_ok=True)
        head = f"# file {i}\n".encode()
        n = max(0, int(s * scale) - len(head))
        at = rng.randrange(0, max(1, len(base) - n))
        (d / rel).write_bytes(head + base[at:at + n])
        paths.append(rel)
    (d / ".gitignore").write_text("*.o\n/build/\n")
    (d / "build").mkdir(exist_ok=True)
    for i in range(5):
        (d / "build" / f"out{i}.o").write_bytes(b"\0" * 4096)
        (d / f"pkg000/extra{i}.o").write_bytes(b"\0" * 4096)
    return {"paths": paths}


def changed_bytes(path: str, k: int) -> bytes:
    return f"# changed {k} in {path}\n".encode() * 8


# ---------------------------------------------------------------------------------- helpers

def du(path: Path, apparent: bool = False) -> int:
    """Bytes on disk under ``path`` (blocks), or its files' own sizes (``apparent``)."""
    args = ["du", "-s", "-b" if apparent else "-B1", str(path)]
    return int(subprocess.run(args, capture_output=True, check=True, text=True).stdout.split()[0])


def wall(argv: list[str], cwd: Path | None = None, env: dict | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env or PLAIN_ENV, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def sh(script: str, cwd: Path) -> float:
    return wall(["bash", "-c", script], cwd=cwd)


def plain_git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={repo / '.git'}", f"--work-tree={repo}", *args],
                          env=PLAIN_ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


def ms(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1000, 2)


def figure(ours: list[float], base: dict[str, list[float]], goal: float | None = None,
           **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"ms": ms(ours), "min_ms": round(min(ours) * 1000, 2),
                           "runs": len(ours)}
    for k, v in base.items():
        out[f"{k}_ms"] = ms(v)
    if goal is not None:
        out["goal_ms"] = goal
        out["met"] = out["ms"] <= goal
    out.update(extra)
    return out


def floor(runs: int) -> dict[str, float]:
    py: list[float] = []
    git: list[float] = []
    wall([sys.executable, "-c", "pass"])
    for _ in range(runs):
        py.append(wall([sys.executable, "-c", "pass"]))
        git.append(wall(["git", "--version"]))
    return {"python_c_pass_ms": ms(py), "git_version_ms": ms(git)}


# ---------------------------------------------------------------------------------- measures

async def measure(place: Path, files: int, mb: float, runs: int,
                  knobs: bool) -> dict[str, Any]:
    """Every figure on one place (a disk directory or a tmpfs one)."""
    base = Path(tempfile.mkdtemp(prefix="mnemon-bench-ws-", dir=place))
    try:
        return await _measure(base, files, mb, runs, knobs)
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def _measure(base: Path, files: int, mb: float, runs: int,
                   knobs: bool) -> dict[str, Any]:
    src = base / "src"
    t0 = time.perf_counter()
    tree = make_tree(src, files, int(mb * 1e6))
    paths = tree["paths"]
    out: dict[str, Any] = {"dir": str(base), "fs": _fs(base), "files": files,
                           "tree_bytes": sum(f.stat().st_size for f in src.rglob("*") if f.is_file()), "tree_disk": du(src),
                           "generate_s": round(time.perf_counter() - t0, 2)}
    plain = base / "plain"  # the baselines' copy of the tree, with a plain repository
    subprocess.run(["cp", "-a", str(src), str(plain)], check=True)
    plain_git(plain, "init", "-q")
    plain_git(plain, "add", "-A")
    plain_git(plain, "write-tree")

    # ---- the initial import, beside git add -A into a fresh repository
    ours: list[float] = []
    theirs: list[float] = []
    imported = None
    for i in range(runs):
        rr = base / f"import{i}"
        t = time.perf_counter()
        ws, rec = open_root(rr, "a1", WorkspaceSpec(dir=str(src)))
        ours.append(time.perf_counter() - t)
        ws.release()
        imported = rec.snapshot
        g = base / f"fresh{i}.git"
        theirs.append(sh(f"git --git-dir={g} init -q && git --git-dir={g} --work-tree=. add -A "
                         f"&& git --git-dir={g} --work-tree=. write-tree", src))
        shutil.rmtree(rr)
        shutil.rmtree(g)
    plain_tree = plain_git(plain, "write-tree")
    # ---- the root's workspace on the user's directory, for everything after
    run = base / "run"
    ws, rec = open_root(run, "root", WorkspaceSpec(dir=str(src)))
    store = ws.store
    assert rec.snapshot == plain_tree, "the store's tree differs from git's own"
    out["import"] = figure(ours, {"git_init_add_write_tree": theirs},
                           same_tree_as_git=imported == plain_tree,
                           ignored_left_out=not any(e.path.endswith(".o")
                                                    for e in store.entries(rec.snapshot)))

    # ---- a turn's snapshot with 10 changed files
    writes: list[float] = []
    snaps: list[float] = []
    plain_snap: list[float] = []
    agree = True
    history: list[str] = [rec.snapshot]
    k = 0
    for r in range(runs + 1):  # the first is a warm-up
        chosen = [paths[(r * 977 + j * 131) % len(paths)] for j in range(10)]
        k += 1
        t = time.perf_counter()
        for p in chosen:
            await ws.write(p, changed_bytes(p, k))
        t1 = time.perf_counter()
        snap = await ws.turn_snapshot()
        t2 = time.perf_counter()
        for p in chosen:
            (plain / p).write_bytes(changed_bytes(p, k))
        t3 = time.perf_counter()
        got = subprocess.run(["bash", "-c", "git add -A && git write-tree"], cwd=plain,
                             env=PLAIN_ENV, check=True, capture_output=True,
                             text=True).stdout.strip()
        t4 = time.perf_counter()
        assert snap is not None
        agree = agree and snap == got
        history.append(snap)
        if r:
            writes.append(t1 - t)
            snaps.append(t2 - t1)
            plain_snap.append(t4 - t3)
    out["snapshot_10"] = figure(snaps, {"git_add_write_tree": plain_snap},
                                GOALS_MS["snapshot_10"], writes_10_fsync_ms=ms(writes),
                                writes_and_snapshot_ms=round(ms(writes) + ms(snaps), 2),
                                same_tree_as_git=agree)

    # ---- a turn whose tools did not touch the workspace
    n = 1000
    per: list[float] = []
    empty: list[float] = []
    for _ in range(runs):
        t = time.perf_counter()
        for _ in range(n):
            assert await ws.turn_snapshot() is None
        per.append((time.perf_counter() - t) / n)
        t = time.perf_counter()
        for _ in range(n):
            await trio.sleep(0)
        empty.append((time.perf_counter() - t) / n)
    out["snapshot_untouched"] = {"us": round(statistics.median(per) * 1e6, 2),
                                 "await_sleep0_us": round(statistics.median(empty) * 1e6, 2),
                                 "calls_per_run": n, "runs": runs}

    # ---- a fork for a child that only reads
    target = paths[len(paths) // 2]
    ours, theirs = [], []
    for i in range(runs + 1):
        t = time.perf_counter()
        child, _ = open_child(ws, f"reader{i}")
        got_read = await child.read(target)
        dt = time.perf_counter() - t
        assert got_read.data == (src / target).read_bytes()
        tb = wall(["git", f"--git-dir={store.git_dir}", "cat-file", "blob",
                   f"{ws.tree}:{target}"])
        if i:
            ours.append(dt)
            theirs.append(tb)
    out["fork_read"] = figure(ours, {"git_cat_file": theirs}, GOALS_MS["fork_read"],
                              copied_bytes=sum(f.stat().st_size for f in store.trees.rglob("*")
                                               if f.is_file()))

    # ---- a fork for a child that writes: its first write checks the tree out
    out["fork_write"] = await _fork_write(ws, src, base, runs, "")
    if knobs:
        out["knobs"] = await _knobs(ws, src, base, runs)

    # ---- a rewind: restore to the snapshot ten changed files back, and forth again
    back, forth = history[-2], history[-1]
    ours, theirs = [], []
    for i in range(runs):
        t = time.perf_counter()
        ws.restore_now(back)
        ours.append(time.perf_counter() - t)
        assert all((src / p).read_bytes() == store.blob(e.oid)
                   for p, e in _entries_of(store, back, paths[:3]))
        theirs.append(sh(f"git add -A && git read-tree -u --reset {back}", plain))
        t = time.perf_counter()
        ws.restore_now(forth)
        ours.append(time.perf_counter() - t)
        theirs.append(sh(f"git add -A && git read-tree -u --reset {forth}", plain))
    exact = subprocess.run(["diff", "-r", "-x", ".git", str(src), str(plain)],
                           capture_output=True).returncode == 0
    out["restore"] = figure(ours, {"git_add_read_tree": theirs}, GOALS_MS["restore"],
                            changed_files=len(store.changed(back, forth)),
                            same_files_as_git=exact)

    # ---- 8 synod members that each change 10 files: the disk they take (a run of their own;
    # the directory is held by one root at a time)
    ws.release()
    out["synod_disk"] = await _synod(src, base, paths)
    return out


async def _fork_write(ws, src: Path, base: Path, runs: int, tag: str) -> dict[str, Any]:
    ours: list[float] = []
    theirs: list[float] = []
    full: list[float] = []
    for i in range(runs + 1):
        child, _ = open_child(ws, f"writer-{tag}-{i}")
        t = time.perf_counter()
        await child.write("notes/first.txt", b"the child's first write\n")
        dt = time.perf_counter() - t
        d = child.dir
        # the file tools' writer keeps only what it wrote; the rest reads from the store
        assert d is not None and not (d / "pkg000").exists()
        assert (await child.read("pkg000/mod000.py")).data == \
            (src / "pkg000" / "mod000.py").read_bytes()
        # a command (the shell) needs every file: the whole checkout, beside ``cp -a``
        t = time.perf_counter()
        await child.directory()
        dfull = time.perf_counter() - t
        assert (d / "pkg000" / "mod000.py").read_bytes() == \
            (src / "pkg000" / "mod000.py").read_bytes()
        assert (d / "notes" / "first.txt").read_bytes() == b"the child's first write\n"
        count = sum(1 for _ in d.rglob("*.py"))
        child.release()
        shutil.rmtree(d)
        child.index.unlink(missing_ok=True)
        copy = base / f"cp-{tag}-{i}"
        tb = wall(["cp", "-a", str(src), str(copy)])
        shutil.rmtree(copy)
        if i:  # the first pair is a warm-up
            ours.append(dt)
            theirs.append(tb)
            full.append(dfull)
    fig = figure(ours, {"cp_a": theirs}, GOALS_MS["fork_write"], files_checked_out=count)
    fig["not_slower_than_cp_a"] = fig["ms"] <= fig["cp_a_ms"]
    fig["met"] = fig["met"] and fig["not_slower_than_cp_a"]
    fig["full_checkout_ms"] = ms(full)  # what a first command (the shell) adds
    fig["full_checkout_vs_cp_a"] = round(ms(full) / max(fig["cp_a_ms"], 1e-9), 2)
    return fig


async def _knobs(ws, src: Path, base: Path, runs: int) -> dict[str, Any]:
    """The checkout and the import under other store settings (appended ``-c`` options win
    over the store's own)."""
    saved = store_mod._CONFIG
    out: dict[str, Any] = {}
    trials = {"checkout.workers=1": ("-c", "checkout.workers=1"),
              "checkout.workers=4": ("-c", "checkout.workers=4"),
              "checkout.workers=8": ("-c", "checkout.workers=8"),
              "compressed (core.compression=-1)": ("-c", "core.compression=-1", "-c",
                                                   "core.looseCompression=-1")}
    try:
        for name, extra in trials.items():
            store_mod._CONFIG = saved + extra
            row: dict[str, Any] = {}
            if "compress" in name:  # the objects must be written compressed: a fresh store
                ws.release()  # the user's directory is held by one root at a time
                imp: list[float] = []
                for i in range(runs):
                    rr = base / f"knob-import{i}"
                    t = time.perf_counter()
                    w2, _ = open_root(rr, "a1", WorkspaceSpec(dir=str(src)))
                    imp.append(time.perf_counter() - t)
                    w2.release()
                    if i < runs - 1:
                        shutil.rmtree(rr)
                row["import_ms"] = ms(imp)
                row["store_disk"] = du(w2.store.git_dir)
                fw = await _fork_write(w2, src, base, runs, "z")
                w2.release()
                shutil.rmtree(rr)
                ws.claim()
            else:
                fw = await _fork_write(ws, src, base, runs, name.split("=")[1])
            row["fork_write_ms"] = fw["ms"]
            row["cp_a_ms"] = fw["cp_a_ms"]
            out[name] = row
    finally:
        store_mod._CONFIG = saved
    return out


async def _synod(src: Path, base: Path, paths: list[str]) -> dict[str, Any]:
    run = base / "synod"
    root, _ = open_root(run, "p", WorkspaceSpec(dir=str(src)))
    store = root.store
    store_before = du(store.git_dir)
    t = time.perf_counter()
    members = []
    for m in range(8):
        child, _ = open_child(root, f"member{m}")
        for j in range(10):
            p = paths[(m * 10 + j) * 37 % len(paths)]
            await child.write(p, changed_bytes(p, 1000 + m))
        assert await child.turn_snapshot() is not None
        members.append(child)
    took = time.perf_counter() - t
    store_after = du(store.git_dir)
    trees = du(store.trees)
    one = du(src)
    changes = store_after - store_before
    total = store_after + trees
    for c in members:
        c.release()
    root.release()
    return {"members": 8, "files_changed_each": 10, "one_workspace_disk": one,
            "store_disk_after_import": store_before, "store_disk": store_after,
            "changes_in_store_disk": changes, "trees_disk": trees, "total_disk": total,
            "ratio": round(total / (one + changes), 2), "goal_ratio": SYNOD_GOAL,
            "met": total <= SYNOD_GOAL * (one + changes),
            "ratio_store_only": round(store_after / (one + changes), 2),
            "seconds": round(took, 2)}


def _entries_of(store, tree: str, paths: list[str]):
    for p in paths:
        e = store.entry(tree, p)
        if e is not None:
            yield p, e


def _fs(path: Path) -> str:
    return subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True,
                          text=True).stdout.strip()


def _commit() -> str:
    p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                       text=True)
    return p.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description="the workspace's operations beside plain git")
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--mb", type=float, default=40.0)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--dir", type=Path, default=Path("/var/tmp"),
                    help="where the tree is made on disk (not a tmpfs)")
    ap.add_argument("--no-tmpfs", action="store_true", help="skip the /dev/shm measure")
    ap.add_argument("--knobs", action="store_true", help="also try other store settings")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if shutil.which("git") is None:
        raise SystemExit("bench/workspace.py needs git on PATH")
    a.dir.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {
        "commit": _commit(), "python": platform.python_version(),
        "git": subprocess.run(["git", "--version"], capture_output=True,
                              text=True).stdout.strip(),
        "cpus": os.cpu_count(), "runs": a.runs, "files": a.files, "mb": a.mb,
        "floor": floor(max(5, a.runs)), "load_before": os.getloadavg()[0]}
    res["disk"] = trio.run(measure, a.dir, a.files, a.mb, a.runs, a.knobs)
    shm = Path("/dev/shm")
    if not a.no_tmpfs and shm.is_dir() and os.access(shm, os.W_OK):
        res["tmpfs"] = trio.run(measure, shm, a.files, a.mb, a.runs, False)
    res["load_after"] = os.getloadavg()[0]  # a shared machine: how busy it was around the run
    if a.json:
        print(json.dumps(res, indent=1))
    else:
        _print(res)
    return res


def _print(res: dict[str, Any]) -> None:
    print(f"commit {res['commit']} · {res['git']} · python {res['python']} · "
          f"{res['cpus']} cpus · {res['files']} files, {res['mb']} MB · median of {res['runs']}")
    f = res["floor"]
    print(f"floor: python -c pass {f['python_c_pass_ms']} ms · git --version "
          f"{f['git_version_ms']} ms · load {res['load_before']:.1f} → {res['load_after']:.1f}")
    for place in ("disk", "tmpfs"):
        r = res.get(place)
        if not r:
            continue
        print(f"\n[{place}] {r['dir']} ({r['fs']}), tree {r['tree_bytes']} B")
        for key in ("import", "snapshot_10", "fork_read", "fork_write", "restore"):
            fig = r[key]
            rest = ", ".join(f"{k} {v}" for k, v in fig.items() if k not in ("ms", "runs"))
            print(f"  {key:<12} {fig['ms']:>9} ms  ({rest})")
        u = r["snapshot_untouched"]
        print(f"  untouched    {u['us']:>9} µs  (await trio.sleep(0): {u['await_sleep0_us']} µs)")
        s = r["synod_disk"]
        print(f"  synod disk   {s['ratio']:>9} ×   ({s})")
        for name, row in r.get("knobs", {}).items():
            print(f"  knob {name}: {row}")


if __name__ == "__main__":
    main()
