"""Forking: the Inherited link, pointers, ancestor reads, the run root and the lineage tree."""

from __future__ import annotations

TYPE_CHECKING = False  # as typing's, without importing typing (~2 ms of every start)

from .._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    "ForkError": ".fork",
    "child_started": ".fork",
    "fork": ".fork",
    "link_bytes": ".fork",
    "link_for": ".fork",
    "opening_loader": ".fork",
    "resume_child": ".fork",
    "build_tree": ".tree",
    "tree_json": ".tree",
    "tree_text": ".tree",
})

if TYPE_CHECKING:
    from .fork import ForkError, child_started, fork, link_bytes, link_for, opening_loader, resume_child
    from .tree import build_tree, tree_json, tree_text
