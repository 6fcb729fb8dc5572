"""The file tools: ``fs_read``, ``fs_write``, ``fs_edit``, ``fs_list``, ``fs_search`` — an agent's
hands in its workspace (docs/workspace.md), offered only to an agent that has one.

Each is a ``ToolBase`` in the one pipeline: judged by the policy like any tool, dispatched by
the agent's table. Reads may run beside each other (``shared``); writes run one at a time in
call order (``serial``), so two edits of one file in one response apply in the order asked.
Every path is the model's and hostile: ``workspace.confine`` refuses what leaves the workspace
at the moment of use. A file that is not text is refused with its size.

A read's answer opens with its recovery pointer — the path and the snapshot holding exactly
the bytes read (``path @ snapshot``) — so that when the turn is evicted or the block marked,
``fs_read {path, at}`` brings back the file as it was, whatever it holds now.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import trio

from ...errors import UserError
from ...session.constants import GREP_HITS, GREP_LINE_BYTES
from ..workspace.globs import GlobError, compile_glob, matches
from ..workspace.life import apply_children
from ..workspace.store import MergeConflict
from .base import Mode, ToolBase, ToolError, ToolInputError
from .builtin import arg
from .shell import Shell

if TYPE_CHECKING:
    from ..workspace.handle import Workspace
    from .context import ToolContext

__all__ = ["FILE_TOOLS", "FS_BY_NAME", "READ_LINES", "READ_BYTES", "LIST_MAX", "pointer",
           "POINTER_PREFIX"]

READ_LINES = 2000  # lines a read answers unless ``limit`` says fewer
READ_BYTES = 64 * 1024  # the most text one read answers (its total always said)
WRITE_BYTES = 8 * 1024 * 1024  # the largest file one write may make
LIST_MAX = 1000  # entries one listing answers (the total always said)
BINARY_PROBE = 8000  # git's own rule: a NUL in the first 8000 bytes is a binary file
POINTER_PREFIX = "file "


def pointer(path: str, snapshot: str) -> str:
    """A read's recovery pointer: ``path @ snapshot`` (``fs_read {path, at}`` reads it back)."""
    return f"{path} @ {snapshot[:12]}"


def _ws(ctx: "ToolContext") -> "Workspace":
    ws = ctx.workspace
    if ws is None:
        raise ToolError("this agent has no workspace (start it with --workspace DIR, or a "
                        "job's [workspace])")
    return ws


def _text(data: bytes, path: str, size: int) -> str:
    if b"\0" in data[:BINARY_PROBE]:
        raise ToolError(f"{path} is a binary file ({size} bytes); the file tools read text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{path} is not UTF-8 text ({size} bytes); the file tools read text")\
            from None


def _at(inp: Any, tool: str) -> str | None:
    at = arg(inp, "at", str, None, tool=tool)
    if at is None:
        return None
    at = at.strip().lower()
    if not (4 <= len(at) <= 40 and all(c in "0123456789abcdef" for c in at)):
        raise ToolInputError(f"{tool}: 'at' is a snapshot id (hex, as a read's pointer shows)")
    return at


class FsRead(ToolBase):
    name = "fs_read"
    mode: Mode = "shared"
    description = (
        "Read a text file of your workspace: numbered lines, from line `offset` (1-based) for "
        f"`limit` lines (default {READ_LINES}; at most {READ_BYTES // 1024} KiB answered, the "
        "total said). The answer opens with the file's pointer, `path @ snapshot`: pass that "
        "snapshot as `at` to read the file exactly as it was then, whatever it holds now.")
    schema = {"type": "object", "properties": {
        "path": {"type": "string", "description": "relative to the workspace"},
        "offset": {"type": "integer", "minimum": 1, "description": "first line, 1-based"},
        "limit": {"type": "integer", "minimum": 1, "description": "lines to read"},
        "at": {"type": "string", "description": "a snapshot id from a pointer (optional)"}},
        "required": ["path"], "additionalProperties": False}

    async def call(self, ctx: "ToolContext", input: dict[str, Any]) -> str:
        path = arg(input, "path", str, tool=self.name)
        offset = arg(input, "offset", int, 1, tool=self.name)
        limit = arg(input, "limit", int, READ_LINES, tool=self.name)
        if offset < 1 or limit < 1:
            raise ToolInputError("fs_read: offset and limit are at least 1")
        r = await _ws(ctx).read(path, at=_at(input, self.name))
        text = _text(r.data, path, r.size)
        lines = text.splitlines()
        total = len(lines)
        first = min(offset, total + 1)
        shown: list[str] = []
        used = 0
        last = first - 1
        for i in range(first - 1, min(total, first - 1 + limit)):
            row = f"{i + 1:>6}\t{lines[i]}"
            if used + len(row) + 1 > READ_BYTES and shown:
                break
            shown.append(row)
            used += len(row) + 1
            last = i + 1
        head = f"{POINTER_PREFIX}{pointer(r.path, r.snapshot)} · "
        if total == 0:
            return head + "empty file (0 lines)"
        if first > total:
            return head + f"{total} lines; offset {offset} is past the end"
        more = f"; read on with offset {last + 1}" if last < total else ""
        return head + f"lines {first}–{last} of {total}{more}\n" + "\n".join(shown)


class FsWrite(ToolBase):
    name = "fs_write"
    mode: Mode = "serial"
    description = ("Create or replace a text file of your workspace with `content` (atomic: "
                   "the old file or the new one, never a mix). Parent directories are made.")
    schema = {"type": "object", "properties": {
        "path": {"type": "string", "description": "relative to the workspace"},
        "content": {"type": "string"}},
        "required": ["path", "content"], "additionalProperties": False}

    async def call(self, ctx: "ToolContext", input: dict[str, Any]) -> str:
        path = arg(input, "path", str, tool=self.name)
        content = arg(input, "content", str, tool=self.name)
        data = content.encode("utf-8", "surrogatepass")
        if len(data) > WRITE_BYTES:
            raise ToolInputError(f"fs_write: at most {WRITE_BYTES} bytes in one file "
                                 f"({len(data)} given)")
        resolved = await _ws(ctx).write(path, data)
        n = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
        return f"wrote {resolved} ({len(data)} bytes, {n} lines)"


class FsEdit(ToolBase):
    name = "fs_edit"
    mode: Mode = "serial"
    description = (
        "Replace the exact text `old` with `new` in a file of your workspace. `old` must occur "
        "exactly once (give more surrounding text to make it unique), or set `all` to replace "
        "every occurrence.")
    schema = {"type": "object", "properties": {
        "path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"},
        "all": {"type": "boolean", "description": "replace every occurrence"}},
        "required": ["path", "old", "new"], "additionalProperties": False}

    async def call(self, ctx: "ToolContext", input: dict[str, Any]) -> str:
        path = arg(input, "path", str, tool=self.name)
        old = arg(input, "old", str, tool=self.name)
        new = arg(input, "new", str, tool=self.name)
        every = arg(input, "all", bool, False, tool=self.name)
        if not old:
            raise ToolInputError("fs_edit: 'old' is empty; use fs_write to make a file")
        if old == new:
            raise ToolInputError("fs_edit: 'old' and 'new' are the same text")
        ws = _ws(ctx)
        r = await ws.read(path)
        text = _text(r.data, path, r.size)
        count = text.count(old)
        if count == 0:
            raise ToolError(f"fs_edit: the text of 'old' is not in {r.path} (0 matches); read "
                            "the file again for its exact text")
        if count > 1 and not every:
            raise ToolError(f"fs_edit: the text of 'old' occurs {count} times in {r.path}; "
                            "give more surrounding text, or set all")
        out = text.replace(old, new) if every else text.replace(old, new, 1)
        resolved = await ws.write(r.path, out.encode("utf-8", "surrogatepass"))
        return f"edited {resolved}: {count if every else 1} replacement(s)"


class FsList(ToolBase):
    name = "fs_list"
    mode: Mode = "shared"
    description = (
        "List the files of your workspace with their sizes, optionally those matching `glob` "
        "(`*.py` anywhere, `src/**/*.ts`, `docs/*`). At most "
        f"{LIST_MAX} answered, the total said.")
    schema = {"type": "object", "properties": {
        "glob": {"type": "string", "description": "a glob over relative paths (optional)"}},
        "additionalProperties": False}

    async def call(self, ctx: "ToolContext", input: dict[str, Any]) -> str:
        glob = arg(input, "glob", str, None, tool=self.name)
        try:
            tokens = compile_glob(glob) if glob else None
        except GlobError as err:
            raise ToolInputError(f"fs_list: {err}") from None
        tree, entries = await _ws(ctx).entries()
        rows: list[str] = []
        total = 0
        for ent in entries:
            if tokens is not None and not matches(tokens, ent.path):
                continue
            total += 1
            if len(rows) < LIST_MAX:
                size = "symlink" if ent.kind == "symlink" else (
                    "repository" if ent.kind == "repository" else f"{ent.size} B")
                rows.append(f"{ent.path}\t{size}")
        head = (f"{total} file(s)" + (f" matching {glob}" if glob else "")
                + f" @ {tree[:12]}" + (f"; the first {LIST_MAX} shown" if total > LIST_MAX
                                         else ""))
        return head + ("\n" + "\n".join(rows) if rows else "")


class FsSearch(ToolBase):
    name = "fs_search"
    mode: Mode = "shared"
    description = (
        "Search the text files of your workspace for a regular expression (Perl syntax), "
        f"optionally in files matching `glob`: `path:line: text`, at most {GREP_HITS} hits, "
        f"each line cut at {GREP_LINE_BYTES} bytes.")
    schema = {"type": "object", "properties": {
        "pattern": {"type": "string", "description": "a regular expression"},
        "glob": {"type": "string", "description": "only files matching this glob"}},
        "required": ["pattern"], "additionalProperties": False}

    async def call(self, ctx: "ToolContext", input: dict[str, Any]) -> str:
        pattern = arg(input, "pattern", str, tool=self.name)
        glob = arg(input, "glob", str, None, tool=self.name)
        if not pattern or len(pattern) > 1000:
            raise ToolInputError("fs_search: a pattern of 1 to 1000 characters")
        if glob is not None:
            try:
                compile_glob(glob)
            except GlobError as e:
                raise ToolInputError(f"fs_search: {e}") from None
        ws = _ws(ctx)
        tree = await ws.current()
        timeout = ctx.settings.grep_timeout_s
        return await trio.to_thread.run_sync(_search, ws, tree, pattern, glob, timeout)


def _search(ws: "Workspace", tree: str, pattern: str, glob: str | None, timeout: float) -> str:
    """``git grep -P`` over the snapshot, in a child process with a deadline: a pattern that
    backtracks without end is stopped, not waited for (PCRE's own match limits apply too)."""
    spec = []
    if glob:
        g = glob.lstrip("/")
        spec = ["--", f":(glob){g if '/' in g.rstrip('/') else '**/' + g}"]
    p = ws.store.popen("grep", "-P", "-n", "-I", "-z", "--no-color", "--full-name",
                       f"--max-count={GREP_HITS + 1}", "-e", pattern, tree, *spec)
    timer = threading.Timer(timeout, p.kill)
    timer.start()
    hits: list[str] = []
    total = 0
    prefix = f"{tree}:".encode()
    try:
        assert p.stdout is not None
        for line in p.stdout:
            parts = line.rstrip(b"\n").split(b"\0", 2)
            if len(parts) < 3:
                continue
            path, num, text = parts
            if path.startswith(prefix):
                path = path[len(prefix):]
            total += 1
            if total > GREP_HITS:
                p.kill()  # enough: the rest is not read
                break
            body = text[:GREP_LINE_BYTES].decode("utf-8", "replace")
            cut = "…" if len(text) > GREP_LINE_BYTES else ""
            hits.append(f"{path.decode('utf-8', 'replace')}:{num.decode()}: {body}{cut}")
        err = p.stderr.read() if p.stderr is not None else b""
        code = p.wait()
    finally:
        timed_out = not timer.is_alive() and total <= GREP_HITS
        timer.cancel()
        p.stdout.close() if p.stdout else None
        p.stderr.close() if p.stderr else None
    if timed_out and code < 0:
        raise ToolError(f"fs_search: the search took longer than {timeout:g} s; narrow the "
                        "pattern or the glob")
    if code == 128 or (code not in (0, 1) and code >= 0):
        msg = err.decode("utf-8", "replace").strip().splitlines()
        raise ToolInputError(f"fs_search: {msg[-1] if msg else 'the pattern was refused'}")
    if not hits:
        return f"no match for {pattern!r} @ {tree[:12]}"
    more = f" (more than {GREP_HITS}: the first {GREP_HITS} shown)" if total > GREP_HITS \
        else ""
    return f"{total} hit(s) @ {tree[:12]}{more}\n" + "\n".join(hits)


class WorkspaceApply(ToolBase):
    """A synod's reduce over changes (docs/workspace.md, "Synods over changes")."""

    name = "workspace_apply"
    mode: Mode = "exclusive"
    description = (
        "Apply the file changes of children that have ended (e.g. a synod's winner) to your "
        "workspace, as three-way merges in the order given: each child's change from where its "
        "workspace started to where it ended. All or nothing: a conflict is refused, naming "
        "the files, and your files stay as they are.")
    schema = {"type": "object", "properties": {
        "agents": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                   "description": "the children whose changes to apply, in order"}},
        "required": ["agents"], "additionalProperties": False}

    async def call(self, ctx: "ToolContext", input: dict[str, Any]) -> str:
        ids = arg(input, "agents", list, tool=self.name)
        if not ids or not all(isinstance(i, str) for i in ids):
            raise ToolInputError("workspace_apply: 'agents' is a list of agent ids")
        ws = _ws(ctx)
        before = ws.recorded
        nodes = [ctx.descendant(i) for i in ids]
        try:
            rec = await apply_children(ws, nodes)
        except MergeConflict as e:
            raise ToolError(str(e)) from None
        except UserError as e:
            raise ToolError(f"workspace_apply: {e}") from None
        ctx.log.append(rec)
        changed = (await trio.to_thread.run_sync(ws.store.changed, before, rec.snapshot)
                   if rec.snapshot != before else [])
        return (f"applied {', '.join(ids)}: {len(changed)} file(s) changed @ "
                f"{rec.snapshot[:12]}" + "".join(f"\n{s}\t{p}" for s, p in changed[:50]))


#: what an agent with a workspace is offered beside the built-ins: the file tools, the merge of
#: its children's changes, and the sandboxed shell (docs/sandbox.md)
FILE_TOOLS: tuple[ToolBase, ...] = (FsRead(), FsWrite(), FsEdit(), FsList(), FsSearch(),
                                    WorkspaceApply(), Shell())
FS_BY_NAME: dict[str, ToolBase] = {t.name: t for t in FILE_TOOLS}
