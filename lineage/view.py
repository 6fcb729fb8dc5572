"""Opening logs from outside a live run: fold an agent's file with its ancestors' loader."""

from __future__ import annotations

import sys
from pathlib import Path

from typing import TYPE_CHECKING, cast

from ..session.door import Door
from ..session.log import TornTail

if TYPE_CHECKING:
    from ..session.context import Context

from .runroot import (RunRootError, Sources, agent_of, agent_source, find_run_root, list_agents,
                      make_loader)


def open_agent(path: Path) -> tuple[Path, str, "Context", TornTail | None]:
    """(run root, agent id, folded table, torn tail) for an agent directory; never writes.

    Every resident turn is loaded (inherited ones through their pointers), as a full fold
    would; a fold checkpoint that describes the log spares the replay
    (``session.checkpoint.reopening``).
    """
    from ..session.checkpoint.reopening import reopen

    root, agent = agent_of(path)
    src = agent_source(agent)
    ctx, _, torn = reopen(root / src, src, loader=make_loader(root))
    # ``reopen`` answers a mapped ``Table`` only when ``as_is`` asks for one: a full fold here
    return root, agent, cast("Context", ctx), torn


def open_door(path: Path) -> Door:
    """The transcript door of an agent directory, from outside: read-only, every recorded turn
    readable. A torn tail (a crash mid-append) is left in place and kept at ``door.torn``.

    Pointers resolve lazily: the structural fold loads no inherited turn, so a turn reached
    through an intact file reads even when another ancestor's file is gone; the turns that need
    the missing file are refused naming it."""
    from ..session.checkpoint.reopening import open_table

    root, agent = agent_of(Path(path))
    src = agent_source(agent)
    sources = Sources(root)
    loader = make_loader(root)
    table, torn = open_table(root / src, src, loader=loader, sources=sources)
    door = Door(root, table, sources=sources, reopen=lambda: open_table(
        root / src, src, loader=loader, sources=sources, rebuild=True)[0])
    door.torn = torn
    return door


def report_torn(source: str, torn: TornTail | None) -> None:
    if torn is not None:
        sys.stderr.write(f"mnemon: {source}: torn tail of {torn.length} bytes at offset "
                         f"{torn.offset} (a crash mid-append); folded what is complete\n")


def agents_in(path: Path) -> tuple[Path, list[str]]:
    """A run root's agents, or the one agent an agent directory names."""
    p = Path(path)
    if not p.exists():
        raise RunRootError(f"{path} does not exist")
    if (p / "run.json").is_file():
        root = p.resolve()
        return root, list_agents(root)
    if (p / "record.jsonl").is_file() or p.name == "record.jsonl":
        root, agent = agent_of(p)
        return root, [agent]
    find_run_root(p)  # raises a clear error when outside any run root
    raise RunRootError(f"{path} is neither a run root nor an agent directory")
