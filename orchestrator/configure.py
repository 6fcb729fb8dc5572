"""From plain values to a run's ``Settings`` and its provider: one builder below the CLI and jobs.

``settings_from(values)`` takes a mapping of setting name → value — what ``mnemon ask``'s flags
give (``cli/options.py`` turns ``args`` into it) or what a job's ``[provider]``, ``[agent]`` and
``[budget]`` tables give (``jobs/build.py``) — and returns ``Settings``; so a job and
``mnemon ask`` with the same values build the same settings, and neither fakes the other's
shape. A value of ``None`` is a value not given (the setting's default, as an unset flag).

The keys are ``Settings``' own fields, and these, which name where a setting is read from:

=============== ==========================================================================
``provider``    the provider's name: its default model (``model`` unset), the roles'
                providers checked against it
``mcp_file``    an MCP configuration file (``--mcp``) → ``mcp_servers``
``policy_file`` a policy file (``--policy``) → ``tool_policy``
``roles_file``  a roles file (``--roles``) → ``roles``; ``role`` (``--role``): the root's
=============== ==========================================================================

``workspace`` is ``Settings``' own field, and may also be given as a path: a directory worked
in place (``--workspace DIR``), refused here when it is not a directory.

A value that cannot be used is a ``ConfigError`` (``mnemon.errors``: exit 2) naming its key —
in the caller's own spelling (``names``: ``--keep`` for the CLI), and after the caller's file
when it gives one — or the loader's own error (``PolicyError``, ``RolesError``,
``McpConfigError``), each a ``ConfigError`` naming its file. Nothing here imports the CLI or
``argparse`` (``tests/test_knots.py``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from msgspec.structs import fields

from ..errors import ConfigError
from ..providers.prices import vertex_price_name
from ..providers.windows import window_for
from .settings import Settings
from .sandbox.spec import parse_sandbox
from .workspace.spec import WorkspaceSpec

if TYPE_CHECKING:
    from ..providers.base import Provider
    from .policy import ToolPolicy
    from .roles.spec import Roles

__all__ = ["VALUE_KEYS", "settings_from", "keep_value", "policy_file", "roles_file",
           "provider_from", "workspace_dir"]

#: the keys a value mapping may hold besides ``Settings``' fields
VALUE_KEYS = ("provider", "mcp_file", "policy_file", "roles_file", "role")
_FIELDS = frozenset(f.name for f in fields(Settings))


def _named(names: Mapping[str, str] | None, key: str) -> str:
    return (names or {}).get(key, key)


def keep_value(value: str | float, *, name: str = "keep",
               file: str | Path | None = None) -> float | Literal["auto"]:
    """``keep``: ``auto`` or a share strictly between 0 and 1; anything else is refused,
    naming the setting as ``name``."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    try:
        share = float(value)
    except ValueError:
        raise ConfigError(f"{name} must be auto or a share between 0 and 1, not {value!r}",
                          file=file, key="keep") from None
    if not 0.0 < share < 1.0:
        raise ConfigError(f"{name} must be auto or between 0 and 1, not {value}", file=file,
                          key="keep")
    return share


def workspace_dir(path: str | Path, *, name: str = "workspace",
                  file: str | Path | None = None) -> WorkspaceSpec:
    """A directory worked in place (``--workspace DIR``): refused before anything is written
    when it is not a directory, since an agent would only find out at its start."""
    text = str(path)
    if not text.strip():
        raise ConfigError(f"{name} needs a directory", file=file, key="workspace")
    p = Path(text).expanduser()
    if not p.is_dir():
        why = "does not exist" if not p.exists() else "is not a directory"
        raise ConfigError(f"{name} {text} {why}", file=file, key="workspace")
    return WorkspaceSpec(dir=str(p.resolve()))


def policy_file(path: str | Path) -> "ToolPolicy":
    """A policy file, judged whole before anything runs (``PolicyError`` naming the file and
    the rule otherwise)."""
    from .policy import load_policy

    return load_policy(path)


def roles_file(path: str | Path, *, role: str | None = None, provider: str | None = None,
               tools: "frozenset[str] | None" = frozenset()) -> "Roles":
    """A roles file (and the root's ``role``), judged whole before anything runs:
    ``RolesError`` naming the file and the role otherwise. ``tools``: the names of the run's
    user tools (None: checked later, by the job that knows them)."""
    from .roles.book import check_providers
    from .roles.load import load_roles
    from .roles.spec import check_tools

    roles = load_roles(path, root=role, provider=provider)
    check_providers(roles, provider)
    if tools is not None:
        check_tools(roles, tools)
    return roles


def settings_from(values: Mapping[str, Any], *, file: str | Path | None = None,
                  names: Mapping[str, str] | None = None) -> Settings:
    """``Settings`` from ``values`` (see the module's docstring). ``file``: where the values
    were read, leading each refusal's message; ``names``: how the caller spells each key in
    a message (the CLI: its flags)."""
    given = {k: v for k, v in values.items() if v is not None}
    unknown = sorted(k for k in given if k not in _FIELDS and k not in VALUE_KEYS)
    if unknown:
        raise ConfigError(f"unknown setting {unknown[0]} (not a field of Settings)", file=file,
                          key=unknown[0])
    provider = given.pop("provider", None)
    mcp, policy = given.pop("mcp_file", None), given.pop("policy_file", None)
    roles, role = given.pop("roles_file", None), given.pop("role", None)
    if not given.get("model") and provider is not None:  # (an empty name is no name)
        from ..providers.select import DEFAULT_MODELS

        given["model"] = DEFAULT_MODELS.get(provider)
    if not given.get("context_window"):
        given["context_window"] = window_for(given.get("model"))
    if provider == "vertex" and not given.get("price_model"):  # its location prices it (0403)
        located = vertex_price_name(given.get("model"), os.environ.get("GOOGLE_CLOUD_LOCATION"))
        if located is not None:
            given["price_model"] = located
    if "keep" in given:
        given["keep"] = keep_value(given["keep"], name=_named(names, "keep"), file=file)
    floor = given.get("keep_floor_tokens")
    if floor is not None and floor < 0:
        raise ConfigError(f"{_named(names, 'keep_floor_tokens')} must be a number of tokens, "
                          f"not {floor}", file=file, key="keep_floor_tokens")
    if mcp is not None:
        from .mcp.config import load_config

        given["mcp_servers"] = load_config(mcp)
    if policy is not None:
        given["tool_policy"] = policy_file(policy)
    if isinstance(given.get("workspace"), (str, Path)):
        given["workspace"] = workspace_dir(given["workspace"],
                                           name=_named(names, "workspace"), file=file)
    if isinstance(given.get("sandbox"), (str, dict)):  # ``--sandbox KIND``, a ``[sandbox]`` table
        sb = given["sandbox"]
        given["sandbox"] = parse_sandbox({"kind": sb} if isinstance(sb, str) else sb,
                                         file=file, where=_named(names, "sandbox"))
    if roles is not None:
        given["roles"] = roles_file(roles, role=role, provider=provider)
    elif role is not None:
        raise ConfigError(f"{_named(names, 'role')} {role} needs {_named(names, 'roles_file')} "
                          "FILE (the roles it names)", file=file, key="role")
    return Settings(**given)


def provider_from(values: Mapping[str, Any], **kw: Any) -> "Provider":
    """The provider ``values`` name (``provider``, ``model``, ``base_url``, ``script``,
    ``max_tokens``, ``cache_ttl``, ``store``; ``kw``: more of ``make_provider``'s arguments).
    One that cannot be built is a ``ProviderConfigError``; a script that cannot be read or
    used, a ``ConfigError`` — both exit 2."""
    from ..providers.select import make_provider

    given = {k: v for k, v in values.items() if v is not None}
    try:
        return make_provider(given.get("provider", "scripted"), model=given.get("model"),
                             base_url=given.get("base_url"), script=given.get("script"),
                             max_tokens=given.get("max_tokens", 8192),
                             cache_ttl=given.get("cache_ttl", "5m"),
                             store=given.get("store", False), **kw)
    except ConfigError:
        raise
    except (OSError, ValueError) as e:
        raise ConfigError(str(e)) from None
