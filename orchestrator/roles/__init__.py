"""Named roles: delegation to specialists with their own model, tools, rules and output
(docs/roles.md). ``spec`` judges a roles table (pure); ``load`` reads one from a file, a job or
Python; ``book`` is a run's roles at work (providers, tool tables, the delegation check)."""

from __future__ import annotations

from .spec import Role, Roles, RolesError, parse_roles

__all__ = ["Role", "Roles", "RolesError", "parse_roles"]
