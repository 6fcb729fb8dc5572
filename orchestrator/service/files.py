"""An agent's files over HTTP (``/v1/agents/{id}/workspace…``): read-only answers from
``workspace.view.WorkspaceView``, the one view every surface reads through, so "the files at turn
N" means here what it means to ``mnemon workspace`` and to the agent's own rewind.

Each function reads the agent's log and the run's store (git subprocesses): the app calls them in
a worker thread. Nothing here touches a live agent or writes anything.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..workspace.confine import OutsideWorkspace, clean
from ..workspace.store import is_snapshot_id
from ..workspace.view import NoWorkspace, WorkspaceView, view_of_agent
from . import schema as S
from .control import BadRequest
from .runs import NotFound

__all__ = ["listing", "content", "diff", "changes", "parse_turn", "media_type"]

@contextmanager
def _answered() -> Iterator[None]:
    """The view's refusals as the service answers them: no workspace, no such file or turn →
    404; a path the workspace refuses (absolute, ``..``, ``.git``, NUL) → 400."""
    try:
        yield
    except NoWorkspace as e:
        raise NotFound(" ".join(str(e).split())) from None
    except OutsideWorkspace as e:
        raise BadRequest(" ".join(str(e).split())) from None


def parse_turn(value: str | None, name: str = "turn") -> int | None:
    """A query's turn: a whole number, or absent (None)."""
    if value is None or value == "":
        return None
    if not value.isascii() or not value.isdigit() or len(value) > 12:
        raise BadRequest(f"{name} is a turn id, a whole number")
    return int(value)


def _view(root: Path, aid: str) -> WorkspaceView:
    with _answered():
        return view_of_agent(root, aid)


def listing(root: Path, aid: str, turn: int | None) -> S.WorkspaceOut:
    view = _view(root, aid)
    with _answered():
        snap = view.snapshot(turn)
        files = [S.WorkspaceFile(path=e.path, size=e.size, kind=e.kind)  # type: ignore[arg-type]
                 for e in view.store.entries(snap) if e.kind != "dir"]
    return S.WorkspaceOut(agent=aid, turn=turn, snapshot=snap, files=files, turns=view.turns())


def content(root: Path, aid: str, path: str, turn: int | None) -> bytes:
    with _answered():
        clean(path)  # refused before the store is asked (400, not 404)
    view = _view(root, aid)
    with _answered():
        return view.show(path, turn)


def media_type(data: bytes) -> str:
    """Text when the bytes decode as UTF-8 (the page shows them), else opaque bytes."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "application/octet-stream"
    return "text/plain; charset=utf-8"


def _point(view: WorkspaceView, value: str | None, name: str) -> tuple[int | None, str | None]:
    """``from``/``to``: a turn id, or a snapshot the agent's log names (``changes`` gives
    them) — never any tree of the run's store, which holds every agent's files."""
    if value is None or value == "":
        return None, None
    if is_snapshot_id(value):
        if value not in {r.snapshot for r in view.history.records}:
            raise NotFound(f"agent {view.agent}'s log names no snapshot {value}")
        return None, value
    return parse_turn(value, name), None


def diff(root: Path, aid: str, frm: str | None, to: str | None) -> str:
    """The unified diff from ``frm`` (default: where the agent started) to ``to`` (default:
    its latest files)."""
    view = _view(root, aid)
    f_turn, f_snap = _point(view, frm, "from")
    t_turn, t_snap = _point(view, to, "to")
    with _answered():
        return view.diff(f_turn, t_turn, from_snapshot=f_snap, to_snapshot=t_snap)


def changes(root: Path, aid: str) -> S.WorkspaceChanges:
    view = _view(root, aid)
    with _answered():
        return S.WorkspaceChanges(agent=aid, changes=view.changes())
