"""Roles from where people write them: a roles file (``--roles FILE``), a job's ``[roles]``
table, or Python (a ``Roles``, or a dict of role tables). This is the I/O around the pure
``roles.spec``: references resolve relative to the file's folder — an output type (a JSON
Schema file or ``module:Type``), a policy file, a user tool's ``module:callable``, an MCP
config — and every refusal is one ``RolesError`` line naming the file and the role."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ... import _toml as toml
from ..importpath import ImportPathError, resolve
from ..mcp.config import McpConfigError, load_config
from ..policy import PolicyError, load_policy
from ..typed.load import OutputError, check_for, load_output
from ..tools.function import as_tool
from .spec import Resolvers, Roles, RolesError, parse_roles

__all__ = ["as_roles", "load_roles", "resolvers", "roles_from"]


def resolvers(base: Path) -> Resolvers:
    """The real resolvers, each reference read relative to ``base`` (a file's folder)."""

    def output(ref: str, where: str):
        try:
            return load_output(ref, base=base, where=where)
        except OutputError as e:
            raise RolesError(str(e)) from None

    def policy(ref: str, where: str):
        p = Path(ref).expanduser()
        try:
            return load_policy(p if p.is_absolute() else base / p)
        except PolicyError as e:
            raise RolesError(f"{where}: {e}") from None

    def tool(ref: str, where: str):
        obj = _import(ref, base, where)
        try:
            return as_tool(obj)
        except TypeError as e:
            raise RolesError(f"{where}: tool {ref!r}: {e}") from None

    def mcp(ref: str, where: str):
        p = Path(ref).expanduser()
        try:
            return load_config(p if p.is_absolute() else base / p)
        except McpConfigError as e:
            raise RolesError(f"{where}: {e}") from None

    return Resolvers(output=output, policy=policy, tool=tool, mcp=mcp)


def _import(ref: str, base: Path, where: str) -> Any:
    try:
        return resolve(ref, base, want_callable=True)
    except ImportPathError as e:
        raise RolesError(f"{where}: {e}") from None


def roles_from(data: Any, source: str, *, base: Path, root: str | None = None,
               provider: str | None = None) -> Roles:
    """A roles table read from ``source`` (references relative to ``base``), with every output
    type checked against the provider its role runs on (``provider``: the run's)."""
    roles = parse_roles(data, source, root=root, resolve=resolvers(base))
    for role in roles.roles.values():
        try:
            check_for(role.output, role.provider or provider,
                      where=f"{source}: role {role.name}: output")
        except OutputError as e:
            raise RolesError(str(e)) from None
    return roles


def load_roles(path: str | Path, *, root: str | None = None,
               provider: str | None = None) -> Roles:
    """``--roles FILE``: a TOML file of ``[roles.NAME]`` tables (and, optionally, ``role``: the
    root's); ``root`` (``--role NAME``) overrides the file's."""
    p = Path(path)
    try:
        data = toml.load(p)
    except OSError as e:
        raise RolesError(f"{p}: cannot be read ({e.strerror or e})") from None
    except toml.TomlError as e:
        raise RolesError(str(e)) from None
    if "roles" not in data:
        raise RolesError(f"{p}: no [roles.NAME] table")
    return roles_from(data, str(p), base=p.parent, root=root, provider=provider)


def as_roles(value: Any, *, root: str | None = None) -> Roles | None:
    """What Python hands ``open_supervisor(…, roles=…)`` or ``Settings(roles=…)``: None, a
    ``Roles``, or a dict of role tables (references relative to the working directory)."""
    if value is None:
        if root is not None:
            raise RolesError(f"the root's role is {root!r}, but there are no roles")
        return None
    if isinstance(value, Roles):
        return value.with_root(root) if root is not None else value
    return roles_from(value, "roles", base=Path.cwd(), root=root)
