"""What a workspace is made from (``WorkspaceSpec``): the settings' ``workspace``.

Three ways a root agent gets one (docs/workspace.md):

- ``dir``: the user's own directory, worked in place (``--workspace DIR``, a service agent's
  ``"workspace": "DIR"``) — the agent's writes land there, and only one agent at a time may
  hold it;
- ``source``: a copy of a directory or of a git repository's last commit, made per root agent
  (a job's ``[workspace] source``: each task its own) — the source itself is never written;
- neither: an empty workspace, made under the run root.

``inherit`` says how each child starts: ``inherit`` (its parent's files as they stand at the
fork, by reference), ``empty``, or ``source`` (the root's starting files).
"""

from __future__ import annotations

from typing import Any, Literal

from msgspec import Struct

from ...errors import ConfigError

__all__ = ["WorkspaceSpec", "INHERIT", "spec_from"]

INHERIT = ("inherit", "empty", "source")


class WorkspaceSpec(Struct, frozen=True, kw_only=True, omit_defaults=True):
    dir: str | None = None
    source: str | None = None
    inherit: Literal["inherit", "empty", "source"] = "inherit"

    def __post_init__(self) -> None:
        if self.dir is not None and self.source is not None:
            raise ConfigError("a workspace is a directory worked in place (dir) or a copy of "
                              "a source (source), not both", key="workspace")
        if self.inherit not in INHERIT:
            raise ConfigError(f"workspace inherit is one of {', '.join(INHERIT)}, not "
                              f"{self.inherit!r}", key="inherit")

    def describe(self) -> str:
        if self.dir is not None:
            return f"{self.dir} (in place)"
        if self.source is not None:
            return f"a copy of {self.source}"
        return "empty"


def spec_from(value: Any, *, where: str = "workspace", in_place: bool = False,
              file: object = None) -> WorkspaceSpec | None:
    """A spec from a TOML table or JSON value: a string is a path (``in_place``: the directory
    itself, else a copy of it), a table names ``source``/``dir`` and ``inherit``. Unknown keys
    and wrong types are a ``ConfigError`` naming them."""
    if value is None or value is False:
        return None
    if isinstance(value, str):
        if not value.strip():
            raise ConfigError(f"{where} needs a path", file=file, key=where)
        return WorkspaceSpec(dir=value) if in_place else WorkspaceSpec(source=value)
    if not isinstance(value, dict):
        raise ConfigError(f"{where} is a path or a table with source and inherit", file=file,
                          key=where)
    unknown = sorted(set(value) - {"dir", "source", "inherit"})
    if unknown:
        raise ConfigError(f"{where} has no key {unknown[0]!r} (it takes source, dir and "
                          "inherit)", file=file, key=unknown[0])
    for k in ("dir", "source", "inherit"):
        if k in value and not isinstance(value[k], str):
            raise ConfigError(f"{where}.{k} must be a string", file=file, key=k)
    return WorkspaceSpec(**value)
