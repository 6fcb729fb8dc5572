"""Forking: the Inherited link, pointers, ancestor reads, the run root and the lineage tree."""

from .fork import ForkError, child_started, fork, link_bytes, link_for, opening_loader, resume_child
from .tree import build_tree, tree_json, tree_text

__all__ = ["ForkError", "child_started", "fork", "link_bytes", "link_for", "opening_loader", "resume_child",
           "build_tree", "tree_json", "tree_text"]
